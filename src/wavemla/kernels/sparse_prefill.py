"""Sparse MLA prefill (FlashMLA's ``flash_mla_sparse_fwd``): every query token attends over its own list of rows.

One program owns one query token and ``BLOCK_H`` of its heads, and walks the token's whole index list in tiles of
``BLOCK_N`` entries: each gathered tile ``[BLOCK_N, D]`` (plus its ``[BLOCK_N, 64]`` rope part where d_qk is 576) is
loaded once and feeds both ``tl.dot``s (K = V), with the online softmax in base 2 between them. No token is split
across programs: a prefill chunk has thousands of tokens, so whole tokens already give every SM many programs, and
no workspace or combine is needed. Programs run token-major with a token's head blocks side by side, so the head
blocks of one token (and neighbouring tokens, whose lists overlap) gather the same rows while they are in L2.

The tile shape comes from :func:`wavemla.plan.plan_sparse_prefill` (pure: shared memory per block and programs per
SM of the target GPU). The output follows :mod:`wavemla.reference.sparse_prefill`: ``out`` in q's dtype, the
natural-log ``lse`` without the sink, and ``max_logits``, the largest scaled score, both fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wavemla.kernels.sparse_decode import finalize_heads
from wavemla.plan import PrefillPlan

_LOG2E = tl.constexpr(1.4426950408889634)  # scores live in base 2 so each exponential is one exp2


@triton.jit
def _sparse_prefill_kernel(
    p_q, p_kv, p_idx, p_len, p_sink, p_out, p_max, p_lse,
    s_kv, topk, H, num_hb,
    stride_qt, stride_qh, stride_kv, stride_it, stride_ot, stride_oh,
    sm_scale,
    HAS_LEN: tl.constexpr, HAS_SINK: tl.constexpr, D: tl.constexpr, D_ROPE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    i_pid = tl.program_id(0)
    i_t = i_pid // num_hb
    i_hb = i_pid % num_hb
    o_h = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < H
    o_d = tl.arange(0, D)
    p_qt = p_q + tl.cast(i_t, tl.int64) * stride_qt + o_h[:, None] * stride_qh
    b_q = tl.load(p_qt + o_d[None, :], mask=m_h[:, None], other=0.0)
    if D_ROPE > 0:
        o_r = D + tl.arange(0, D_ROPE)
        b_qr = tl.load(p_qt + o_r[None, :], mask=m_h[:, None], other=0.0)
    n_valid = topk
    if HAS_LEN:
        n_valid = tl.minimum(tl.maximum(tl.load(p_len + i_t), 0), topk)
    p_it = p_idx + tl.cast(i_t, tl.int64) * stride_it

    b_m2 = tl.full([BLOCK_H], float("-inf"), tl.float32)  # running max of the base-2 scores
    b_mx = tl.full([BLOCK_H], float("-inf"), tl.float32)  # running max of the natural scores: max_logits
    b_l = tl.zeros([BLOCK_H], tl.float32)
    b_acc = tl.zeros([BLOCK_H, D], tl.float32)
    for i_n in tl.range(0, tl.cdiv(n_valid, BLOCK_N), num_stages=NUM_STAGES):
        o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
        b_idx = tl.load(p_it + o_n, mask=o_n < n_valid, other=-1)
        m_n = (b_idx >= 0) & (b_idx < s_kv)
        p_row = p_kv + tl.where(m_n, b_idx, 0).to(tl.int64) * stride_kv
        b_kv = tl.load(p_row[:, None] + o_d[None, :], mask=m_n[:, None], other=0.0)
        b_s = tl.dot(b_q, tl.trans(b_kv))
        if D_ROPE > 0:
            b_kr = tl.load(p_row[:, None] + o_r[None, :], mask=m_n[:, None], other=0.0)
            b_s += tl.dot(b_qr, tl.trans(b_kr))
        b_s = tl.where(m_n[None, :], b_s * sm_scale, float("-inf"))
        b_mx = tl.maximum(b_mx, tl.max(b_s, 1))
        b_s2 = b_s * _LOG2E
        b_m_new = tl.maximum(b_m2, tl.max(b_s2, 1))
        b_m_use = tl.where(b_m_new == float("-inf"), 0.0, b_m_new)  # no valid row yet: keep exp2 finite
        b_alpha = tl.exp2(b_m2 - b_m_use)
        b_p = tl.exp2(b_s2 - b_m_use[:, None])
        b_l = b_l * b_alpha + tl.sum(b_p, 1)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(b_kv.dtype), b_kv)
        b_m2 = b_m_new

    # l is 0 (no valid row: m2 = -inf, acc = 0) or at least 1 (the largest score adds 2^0), so max(l, 1) changes
    # nothing but keeps log2 and the division finite: lse2 = -inf and out = 0 where the token has no valid row.
    b_l = tl.maximum(b_l, 1.0)
    b_lse2 = b_m2 + tl.log2(b_l)
    b_o, b_lse = finalize_heads(b_acc / b_l[:, None], b_lse2, p_sink, o_h, m_h, HAS_SINK)
    o_th = tl.cast(i_t, tl.int64) * H + o_h
    p_o = p_out + tl.cast(i_t, tl.int64) * stride_ot + o_h[:, None] * stride_oh + o_d[None, :]
    tl.store(p_o, b_o.to(p_out.dtype.element_ty), mask=m_h[:, None])
    tl.store(p_max + o_th, b_mx, mask=m_h)
    tl.store(p_lse + o_th, b_lse, mask=m_h)


def sparse_prefill(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float,
    plan: PrefillPlan,
    attn_sink: torch.Tensor | None,
    topk_length: torch.Tensor | None,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch on validated inputs (:func:`wavemla.api.sparse_mla_prefill` checks them).

    q ``[s_q, h_q, d_qk]``, kv ``[s_kv, 1, d_qk]`` (unit last strides), indices ``[s_q, 1, topk]`` int32 with a unit
    last stride, d_qk 512 or 576; returns ``out [s_q, h_q, 512]`` (q's dtype; the caller's ``out``, unit last stride,
    when given), ``max_logits`` and ``lse`` ``[s_q, h_q]`` fp32.
    """
    s_q, h_q, d_qk = q.shape
    if out is None:
        out = torch.empty((s_q, h_q, plan.d_v), dtype=q.dtype, device=q.device)
    max_logits = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    lse = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    if s_q == 0:
        return out, max_logits, lse
    num_hb = triton.cdiv(h_q, plan.block_h)
    _sparse_prefill_kernel[(s_q * num_hb,)](
        p_q=q, p_kv=kv, p_idx=indices, p_len=topk_length if topk_length is not None else indices,
        p_sink=attn_sink if attn_sink is not None else max_logits, p_out=out, p_max=max_logits, p_lse=lse,
        s_kv=kv.shape[0], topk=indices.shape[2], H=h_q, num_hb=num_hb,
        stride_qt=q.stride(0), stride_qh=q.stride(1), stride_kv=kv.stride(0), stride_it=indices.stride(0),
        stride_ot=out.stride(0), stride_oh=out.stride(1), sm_scale=sm_scale,
        HAS_LEN=topk_length is not None, HAS_SINK=attn_sink is not None, D=plan.d_v, D_ROPE=d_qk - plan.d_v,
        BLOCK_H=plan.block_h, BLOCK_N=plan.block_n, NUM_STAGES=plan.num_stages,
        num_warps=plan.num_warps, num_stages=plan.num_stages,
    )  # fmt: skip
    return out, max_logits, lse
