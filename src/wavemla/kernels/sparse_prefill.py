"""Sparse MLA prefill (FlashMLA's ``flash_mla_sparse_fwd``): every query token attends over its own list of rows.

One program owns one query token and ``BLOCK_H`` of its heads, and walks the token's index list in tiles of
``BLOCK_N`` entries: each gathered tile ``[BLOCK_N, D]`` (plus its ``[BLOCK_N, 64]`` rope part where d_qk is 576) is
loaded once and feeds both ``tl.dot``s (K = V), with the online softmax in base 2 between them. A prefill chunk of
thousands of tokens gives every SM many programs with whole lists. A short one (whose programs would fill under one
wave of the GPU's program slots) has its lists cut into ``SPLITS`` pieces of whole tiles, one program each: a piece
leaves its normalized output, base-2 lse and largest score in fp32 partials, and
:func:`_sparse_prefill_combine_kernel` merges a token's pieces in piece order, applies the sink and writes the
outputs. Programs run token-major with a token's
head blocks side by side, so the head blocks of one token (and neighbouring tokens, whose lists overlap) gather the
same rows while they are in L2.

The tile shape comes from :func:`wavemla.plan.plan_sparse_prefill` (pure: shared memory per block and programs per
SM of the target GPU). The output follows :mod:`wavemla.reference.sparse_prefill`: ``out`` in q's dtype, the
natural-log ``lse`` without the sink, and ``max_logits``, the largest scaled score, both fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wavemla.kernels.sparse_decode import finalize_heads, seen_lse2
from wavemla.plan import PrefillPlan

_LOG2E = tl.constexpr(1.4426950408889634)  # scores live in base 2 so each exponential is one exp2
COMBINE_BLOCK_H = 16  # heads a program of the combine merges: [16, 512] fp32 is 64 registers a thread at 4 warps


@triton.jit
def _sparse_prefill_kernel(
    p_q, p_kv, p_idx, p_len, p_sink, p_out, p_max, p_lse, p_part,
    s_kv, topk, H, num_hb, piece_tiles,
    stride_qt, stride_qh, stride_kv, stride_it, stride_ot, stride_oh,
    sm_scale,
    HAS_LEN: tl.constexpr, HAS_SINK: tl.constexpr, D: tl.constexpr, D_ROPE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, SPLITS: tl.constexpr,
):  # fmt: skip
    # program (token, piece, head block), head blocks innermost; with SPLITS > 1 a piece's results go to the
    # partials (p_part: fp32 outputs [SPLITS, T, H, D]; p_max and p_lse then hold [SPLITS, T, H] fp32 each)
    i_pid = tl.program_id(0)
    i_hb = i_pid % num_hb
    i_tp = i_pid // num_hb
    i_t = i_tp // SPLITS
    i_piece = i_tp % SPLITS
    o_h = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < H
    o_d = tl.arange(0, D)
    # heads in int64: a head-major buffer viewed token-major puts head 127 past int32 elements from head 0
    p_qt = p_q + tl.cast(i_t, tl.int64) * stride_qt + o_h.to(tl.int64)[:, None] * stride_qh
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
    if SPLITS > 1:  # this piece's tiles of the list
        i_lo = i_piece * piece_tiles
        i_hi = tl.minimum(i_lo + piece_tiles, tl.cdiv(n_valid, BLOCK_N))
    else:  # the whole list, with the loop bounds of a build that has no pieces
        i_lo = 0
        i_hi = tl.cdiv(n_valid, BLOCK_N)
    for i_n in tl.range(i_lo, i_hi, num_stages=NUM_STAGES):
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

    # l is 0 (no valid row: m2 = -inf, acc = 0) or at least 1 (the largest score adds 2^0), so raising it to 1 changes
    # nothing but keeps log2 and the division finite: lse2 = -inf and out = 0 where the token has no valid row. A NaN l
    # (a NaN score) stays NaN: tl.maximum would drop it on the GPU (maxnum) and give a finite lse.
    b_l = tl.where(b_l < 1.0, 1.0, b_l)
    b_lse2 = b_m2 + tl.log2(b_l)
    if SPLITS > 1:  # this piece's normalized output and base-2 lse (-inf: no valid row), for the combine
        n_t = tl.num_programs(0) // (num_hb * SPLITS)  # query tokens T
        o_ph = (tl.cast(i_piece, tl.int64) * n_t + i_t) * H + o_h  # [SPLITS, T, H] order
        tl.store(p_part + o_ph[:, None] * D + o_d[None, :], b_acc / b_l[:, None], mask=m_h[:, None])
        tl.store(p_max + o_ph, b_mx, mask=m_h)
        tl.store(p_lse + o_ph, b_lse2, mask=m_h)
    else:
        b_o, b_lse = finalize_heads(b_acc / b_l[:, None], b_lse2, p_sink, o_h, m_h, HAS_SINK)
        o_th = tl.cast(i_t, tl.int64) * H + o_h
        p_o = p_out + tl.cast(i_t, tl.int64) * stride_ot + o_h.to(tl.int64)[:, None] * stride_oh + o_d[None, :]
        tl.store(p_o, b_o.to(p_out.dtype.element_ty), mask=m_h[:, None])
        tl.store(p_max + o_th, b_mx, mask=m_h)
        tl.store(p_lse + o_th, b_lse, mask=m_h)


@triton.jit
def _sparse_prefill_combine_kernel(
    p_part, p_part_max, p_part_lse, p_sink, p_out, p_max, p_lse,
    T, H, stride_ot, stride_oh,
    HAS_SINK: tl.constexpr, D: tl.constexpr, SPLITS: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    """One program per (token, BLOCK_H heads): the token's SPLITS pieces merged in piece order (weights
    2^(lse2_i - max lse2)), the sink applied, out / max_logits / lse written."""
    i_pid = tl.program_id(0)
    num_hb = tl.cdiv(H, BLOCK_H)
    i_t = i_pid // num_hb
    o_h = (i_pid % num_hb) * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < H
    o_d = tl.arange(0, D)
    o_th = tl.cast(i_t, tl.int64) * H + o_h
    piece = tl.cast(T, tl.int64) * H  # elements between two pieces' [T, H] planes
    b_m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    b_mx = tl.full([BLOCK_H], float("-inf"), tl.float32)
    for i in tl.static_range(SPLITS):
        b_m = tl.maximum(b_m, tl.load(p_part_lse + i * piece + o_th, mask=m_h, other=float("-inf")))
        b_mx = tl.maximum(b_mx, tl.load(p_part_max + i * piece + o_th, mask=m_h, other=float("-inf")))
    b_m_use = tl.where(b_m == float("-inf"), 0.0, b_m)  # no valid row in any piece: every weight 0
    b_sum = tl.zeros([BLOCK_H], tl.float32)
    b_o = tl.zeros([BLOCK_H, D], tl.float32)
    for i in tl.static_range(SPLITS):
        b_w = tl.exp2(tl.load(p_part_lse + i * piece + o_th, mask=m_h, other=float("-inf")) - b_m_use)
        b_part = tl.load(p_part + (i * piece + o_th)[:, None] * D + o_d[None, :], mask=m_h[:, None], other=0.0)
        b_o += b_w[:, None] * b_part
        b_sum += b_w
    m_seen, b_lse2 = seen_lse2(b_m_use, b_sum)  # a NaN piece (a NaN score) keeps the token NaN
    b_o, b_lse = finalize_heads(b_o / tl.where(m_seen, b_sum, 1.0)[:, None], b_lse2, p_sink, o_h, m_h, HAS_SINK)
    p_o = p_out + tl.cast(i_t, tl.int64) * stride_ot + o_h.to(tl.int64)[:, None] * stride_oh + o_d[None, :]
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
    when given), ``max_logits`` and ``lse`` ``[s_q, h_q]`` fp32. A plan with ``splits > 1`` cuts each list into that
    many pieces of ``piece_tiles`` tiles and merges them with a second launch (fp32 partials, allocated here).
    """
    s_q, h_q, d_qk = q.shape
    if out is None:
        out = torch.empty((s_q, h_q, plan.d_v), dtype=q.dtype, device=q.device)
    max_logits = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    lse = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    if s_q == 0:
        return out, max_logits, lse
    num_hb = triton.cdiv(h_q, plan.block_h)
    topk = indices.shape[2]
    splits = plan.splits
    piece_tiles = triton.cdiv(topk, plan.block_n) if splits == 1 else plan.piece_tiles
    if splits * piece_tiles < triton.cdiv(topk, plan.block_n):
        raise ValueError(
            f"plan: {splits} pieces of {piece_tiles} tiles do not cover a list of {topk} entries in "
            f"{plan.block_n}-entry tiles (plan the call with its own topk)"
        )
    if splits > 1:
        part = torch.empty((splits, s_q, h_q, plan.d_v), dtype=torch.float32, device=q.device)
        part_max = torch.empty((splits, s_q, h_q), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((splits, s_q, h_q), dtype=torch.float32, device=q.device)
    else:
        part, part_max, part_lse = max_logits, max_logits, lse
    _sparse_prefill_kernel[(s_q * splits * num_hb,)](
        p_q=q, p_kv=kv, p_idx=indices, p_len=topk_length if topk_length is not None else indices,
        p_sink=attn_sink if attn_sink is not None else max_logits, p_out=out, p_max=part_max, p_lse=part_lse,
        p_part=part, s_kv=kv.shape[0], topk=topk, H=h_q, num_hb=num_hb, piece_tiles=piece_tiles,
        stride_qt=q.stride(0), stride_qh=q.stride(1), stride_kv=kv.stride(0), stride_it=indices.stride(0),
        stride_ot=out.stride(0), stride_oh=out.stride(1), sm_scale=sm_scale,
        HAS_LEN=topk_length is not None, HAS_SINK=attn_sink is not None, D=plan.d_v, D_ROPE=d_qk - plan.d_v,
        BLOCK_H=plan.block_h, BLOCK_N=plan.block_n, NUM_STAGES=plan.num_stages, SPLITS=splits,
        num_warps=plan.num_warps, num_stages=plan.num_stages,
    )  # fmt: skip
    if splits > 1:
        _sparse_prefill_combine_kernel[(s_q * triton.cdiv(h_q, COMBINE_BLOCK_H),)](
            p_part=part, p_part_max=part_max, p_part_lse=part_lse,
            p_sink=attn_sink if attn_sink is not None else max_logits, p_out=out, p_max=max_logits, p_lse=lse,
            T=s_q, H=h_q, stride_ot=out.stride(0), stride_oh=out.stride(1),
            HAS_SINK=attn_sink is not None, D=plan.d_v, SPLITS=splits, BLOCK_H=COMBINE_BLOCK_H, num_warps=4,
        )  # fmt: skip
    return out, max_logits, lse
