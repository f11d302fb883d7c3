"""The fp64 reference of sparse MLA decode: it defines the semantics every kernel must match.

DeepSeek-V4: q and the cache rows are 512 wide (K = V = one latent row). DeepSeek-V3.2: q and the rows are 576 wide
(512 latent + 64 rope), the scores read all 576 and the output the first 512 (V = the latent). For each request
``b``, query token ``s`` and head ``h``::

    rows  = { main[i]  : i = indices[b, s, j],       j < topk_length[b],       0 <= i < main slots }
          ∪ { extra[i] : i = extra_indices[b, s, j], j < extra_topk_length[b], 0 <= i < extra slots }
    s_r   = (q[b, s, h] · row_r) * softmax_scale
    lse   = log Σ_r exp(s_r)                              natural log; the sink is NOT included
    out   = Σ_r exp(s_r - lse) row_r[:512] · exp(lse) / (exp(lse) + exp(sink[h]))

Edge semantics (FlashMLA's):

- an index < 0 or >= the number of cache slots (``num_blocks * page``) is invalid and never read; an entry at
  position >= its topk_length is ignored (a topk_length above topk means all entries; below 0 means none);
- a query with no valid row gets ``out = 0`` and ``lse = +inf``;
- ``sink = -inf`` has no effect; ``sink = +inf`` gives a zero output; no sink = ``-inf``;
- the same row listed twice counts twice (nothing is de-duplicated).

Example::

    out, lse = sparse_decode_ref(q, kv, idx, softmax_scale=512 ** -0.5)   # fp64 [b,s_q,h,512], [b,h,s_q]
"""

from __future__ import annotations

import torch

from wavemla.reference.fp8 import BYTES_PER_TOKEN, dequantize_model1
from wavemla.reference.fp8_v32 import BYTES_PER_TOKEN as V32_BYTES_PER_TOKEN
from wavemla.reference.fp8_v32 import dequantize_v32

D_V = 512


def as_rows(cache: torch.Tensor) -> torch.Tensor:
    """Cache rows as fp64 ``[slots, 512 or 576]``: a MODEL1 (584 bytes a token) or V3.2 (656) FP8 cache is
    dequantized, a row cache upcast."""
    if cache.dtype in (torch.uint8, torch.float8_e4m3fn):
        if cache.shape[-1] == BYTES_PER_TOKEN:
            cache = dequantize_model1(cache, torch.float32)
        elif cache.shape[-1] == V32_BYTES_PER_TOKEN:
            cache = dequantize_v32(cache, torch.float64)
    return cache.reshape(-1, cache.shape[-1]).double()


def gather_rows(
    rows: torch.Tensor, indices: torch.Tensor, length: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[b, s_q, k, d]`` of ``rows [slots, d]`` picked by ``indices [b, s_q, k]`` (zero where invalid) and the
    validity mask ``[b, s_q, k]``: an entry is valid when it lies in ``0..slots-1`` and before ``length[b]``."""
    b, _, k = indices.shape
    idx = indices.long()
    valid = (idx >= 0) & (idx < rows.shape[0])
    if length is not None:
        pos = torch.arange(k, device=indices.device).view(1, 1, k)
        valid &= pos < length.long().view(b, 1, 1)
    # Invalid entries read an appended zero row (also when there are no rows at all).
    padded = torch.cat([rows, rows.new_zeros((1, rows.shape[-1]))])
    safe = torch.where(valid, idx, torch.full_like(idx, rows.shape[0]))
    return padded[safe.flatten()].view(*indices.shape, rows.shape[-1]), valid


def sparse_decode_ref(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    *,
    topk_length: torch.Tensor | None = None,
    extra_kv_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
    attn_sink: torch.Tensor | None = None,
    softmax_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse decode in fp64 over a main cache and an optional extra (compressed) cache.

    Args:
        q: ``[b, s_q, h_q, 512]`` (DeepSeek-V4) or ``[b, s_q, h_q, 576]`` (DeepSeek-V3.2), any float dtype.
        kv_cache: ``[num_blocks, page, 1, 512 or 576]`` rows of any float dtype (q's width), or an FP8 cache
            ``[num_blocks, page, 1, 584]`` (MODEL1, width 512) or ``[..., 656]`` (V3.2, width 576) uint8 /
            float8_e4m3fn, dequantized first.
        indices: ``[b, s_q, topk]`` int32 global slots ``block * page + offset`` into ``kv_cache``.
        topk_length: ``[b]`` int32, the number of leading ``indices`` entries to use (None: all).
        extra_kv_cache, extra_indices, extra_topk_length: the same for the second cache, attended jointly (the
            extra lists are refused without the extra cache).
        attn_sink: ``[h_q]`` fp32 sink logits (None: no sink).
        softmax_scale: default ``d ** -0.5`` (q's width).

    Returns:
        ``out [b, s_q, h_q, 512]`` fp64 and ``lse [b, h_q, s_q]`` fp64 (natural log, sink excluded, +inf where a query
        has no valid row).
    """
    h_q, d = q.shape[2], q.shape[3]
    scale = d**-0.5 if softmax_scale is None else float(softmax_scale)
    rows, valid = gather_rows(as_rows(kv_cache), indices, topk_length)
    if extra_kv_cache is not None:
        if extra_indices is None:
            raise ValueError("extra_indices: required when extra_kv_cache is given")
        e_rows, e_valid = gather_rows(as_rows(extra_kv_cache), extra_indices, extra_topk_length)
        rows = torch.cat([rows, e_rows], dim=2)
        valid = torch.cat([valid, e_valid], dim=2)
    elif extra_indices is not None or extra_topk_length is not None:
        raise ValueError("extra_indices / extra_topk_length: given without extra_kv_cache")
    qd = q.double()
    scores = torch.einsum("bshd,bskd->bshk", qd, rows) * scale
    scores = scores.masked_fill(~valid[:, :, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # [b, s_q, h]; -inf when no valid row
    has_rows = valid.any(-1)[:, :, None].expand_as(lse)
    probs = torch.exp(scores - torch.where(has_rows, lse, torch.zeros_like(lse))[..., None])
    out = torch.einsum("bshk,bskd->bshd", probs, rows[..., :D_V])
    if attn_sink is not None:
        sink = attn_sink.double().view(1, 1, h_q).expand_as(lse)
        factor = 1.0 / (1.0 + torch.exp(sink - lse))
        out = out * torch.where(has_rows, factor, torch.zeros_like(factor))[..., None]
    out = torch.where(has_rows[..., None], out, torch.zeros_like(out))
    lse = torch.where(has_rows, lse, torch.full_like(lse, float("inf")))
    return out, lse.transpose(1, 2)
