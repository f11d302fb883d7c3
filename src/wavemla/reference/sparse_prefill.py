"""The fp64 reference of sparse MLA prefill (FlashMLA's ``flash_mla_sparse_fwd``): the semantics its kernel matches.

Every query token ``t`` attends over its own list of rows of one unpaged latent array ``kv`` (K = V: the first
``d_v`` columns of a row are its value). For each token ``t`` and head ``h``::

    rows        = { kv[i] : i = indices[t, 0, j],  j < topk_length[t],  0 <= i < s_kv }
    s_r         = (q[t, h] · row_r) * sm_scale           over all d_qk columns
    max_logits  = max_r s_r                              -inf where the token has no valid row
    lse         = log Σ_r exp(s_r)                       natural log; the sink is NOT included; +inf with no row
    out         = Σ_r exp(s_r - lse) row_r[:d_v] · exp(lse) / (exp(lse) + exp(sink[h]))

The edge semantics are the sparse decode's (:mod:`wavemla.reference.sparse_decode`): an index < 0 or >= s_kv is
invalid and never read; a topk_length above topk means all entries and below 0 none; a token with no valid row gets
``out = 0``; ``sink = -inf`` (or no sink) has no effect and ``sink = +inf`` zeroes the output; a row listed twice
counts twice. DeepSeek-V4 prefill uses ``d_qk = d_v = 512``; DeepSeek-V3.2 ``d_qk = 576`` (512 latent + 64 rope).

Example::

    out, max_logits, lse = sparse_prefill_ref(q, kv, idx, sm_scale=512 ** -0.5)  # fp64 [s_q,h,512], [s_q,h] x2
"""

from __future__ import annotations

import torch

from wavemla.reference.sparse_decode import gather_rows


def sparse_prefill_ref(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    *,
    sm_scale: float,
    d_v: int = 512,
    attn_sink: torch.Tensor | None = None,
    topk_length: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sparse prefill attention in fp64.

    Args:
        q: ``[s_q, h_q, d_qk]`` any float dtype.
        kv: ``[s_kv, 1, d_qk]`` rows of any float dtype.
        indices: ``[s_q, 1, topk]`` int32 row numbers into ``kv``.
        sm_scale: the softmax scale applied to ``q · row``.
        d_v: the value width: the first ``d_v`` columns of a row.
        attn_sink: ``[h_q]`` fp32 sink logits (None: no sink).
        topk_length: ``[s_q]`` int32, the number of leading ``indices`` entries a token uses (None: all).

    Returns:
        ``out [s_q, h_q, d_v]``, ``max_logits [s_q, h_q]`` and ``lse [s_q, h_q]``, all fp64.
    """
    s_q, h_q, _ = q.shape
    rows, valid = gather_rows(kv.reshape(kv.shape[0], kv.shape[-1]).double(), indices, topk_length)
    rows, valid = rows[:, 0], valid[:, 0]  # [s_q, topk, d_qk], [s_q, topk]
    scores = torch.einsum("thd,tkd->thk", q.double(), rows) * float(sm_scale)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    has_rows = valid.any(-1)[:, None].expand(s_q, h_q)
    # amax refuses an empty dimension: with topk 0 no token has a row
    max_logits = scores.amax(-1) if scores.shape[-1] else scores.new_full(scores.shape[:-1], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - torch.where(has_rows, lse, torch.zeros_like(lse))[..., None])
    out = torch.einsum("thk,tkd->thd", probs, rows[..., :d_v])
    if attn_sink is not None:
        sink = attn_sink.double().view(1, h_q).expand_as(lse)
        out = out * (1.0 / (1.0 + torch.exp(sink - lse)))[..., None]
    out = torch.where(has_rows[..., None], out, torch.zeros_like(out))
    lse = torch.where(has_rows, lse, torch.full_like(lse, float("inf")))
    max_logits = torch.where(has_rows, max_logits, torch.full_like(max_logits, float("-inf")))
    return out, max_logits, lse
