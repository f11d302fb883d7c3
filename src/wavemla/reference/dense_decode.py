"""The fp64 reference of paged dense MLA decode (DeepSeek-V3 / Kimi-K2 / GLM): the semantics every kernel must match.

For request ``b`` with ``L = clamp(cache_seqlens[b], 0, max_blocks · page)`` cached keys, query token ``s`` of
``s_q`` and head ``h`` (one key row is ``d_qk`` wide; its first 512 dims are also the value)::

    row_j  = k_cache[block_table[b, j // page], j % page]                 j < L
    vis(s) = { j < L : j <= L - s_q + s }   if causal   else   { j < L }
    s_j    = (q[b, s, h] · row_j) · softmax_scale                        over all d_qk dims
    lse    = log Σ_{j ∈ vis(s)} exp(s_j)                                  natural log
    out    = Σ_{j ∈ vis(s)} exp(s_j - lse) · row_j[:512]

Edge semantics (FlashMLA's dense decode, plus the guards a paged allocator needs):

- query token ``s`` of a causal call sees keys ``[0, L - s_q + s]`` (the last query token sees all ``L``);
- a query that sees no key (``L = 0``, or a causal token with ``L - s_q + s < 0``) gets ``out = 0`` and
  ``lse = +inf``;
- ``block_table`` entries at or past ``ceil(L / page)`` are never read (padding may hold anything, e.g.
  2147480000), nor are cache rows at or past ``L``; a length above ``max_blocks · page`` is clamped to it and a
  negative length counts as 0;
- a block-table entry inside the length that is not a block (``< 0`` or ``>= num_blocks``) names no rows: its keys
  are excluded (never read), like an invalid index of the sparse decode.

Example::

    out, lse = dense_decode_ref(q, k_cache, block_table, cache_seqlens, causal=True)   # fp64 [b,s_q,h,512], [b,h,s_q]
"""

from __future__ import annotations

import torch

from wavemla.reference import fp8_rows, fp8_v32

D_V = 512


def dense_rows(k_cache: torch.Tensor, descale_k: torch.Tensor | None = None) -> torch.Tensor:
    """The cache as fp64 rows ``[num_blocks, page, d_qk]``: an FP8 cache is dequantized (V3.2, 656 bytes a token,
    with its own scales; per-tensor, 576 codes a token, times ``descale_k``), a row cache upcast."""
    if k_cache.dtype in (torch.uint8, torch.float8_e4m3fn):
        if k_cache.shape[-1] == fp8_rows.BYTES_PER_TOKEN:
            if descale_k is None:
                raise ValueError("descale_k: required with a per-tensor FP8 cache (576 codes a token)")
            return fp8_rows.dequantize_fp8_rows(k_cache, descale_k, torch.float64)[:, :, 0, :]
        if descale_k is not None:
            raise ValueError("descale_k: only with a per-tensor FP8 cache (the V3.2 cache carries its own scales)")
        return fp8_v32.dequantize_v32(k_cache, torch.float64)[:, :, 0, :]
    if descale_k is not None:
        raise ValueError("descale_k: only with a per-tensor FP8 cache (576 e4m3 codes a token)")
    return k_cache[:, :, 0, :].double()


def dense_decode_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    *,
    head_dim_v: int = D_V,
    softmax_scale: float | None = None,
    causal: bool = False,
    descale_q: torch.Tensor | None = None,
    descale_k: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense paged decode in fp64.

    Args:
        q: ``[b, s_q, h_q, d_qk]`` any float dtype, ``d_qk`` 576 (512 latent + 64 rope) or 512.
        k_cache: ``[num_blocks, page, 1, d_qk]`` rows of any float dtype, a V3.2 FP8 cache
            ``[num_blocks, page, 1, 656]`` uint8 / float8_e4m3fn, or a per-tensor FP8 cache ``[num_blocks, page, 1,
            576]`` uint8 / float8_e4m3fn with ``descale_k`` (dequantized first; ``d_qk`` must be 576).
        block_table: ``[b, max_blocks]`` int32.
        cache_seqlens: ``[b]`` int32 keys per request.
        head_dim_v: 512 (the value is the first 512 dims of the row).
        softmax_scale: default ``d_qk ** -0.5``.
        causal: query token ``s`` sees keys ``[0, L - s_q + s]``.
        descale_q: a one-element tensor: q's values are ``q · descale_q`` (FlashMLA's FP8 q).
        descale_k: the per-tensor FP8 cache's scale (a one-element tensor), required with that cache only.

    Returns:
        ``out [b, s_q, h_q, 512]`` fp64 and ``lse [b, h_q, s_q]`` fp64 (natural log; +inf where a query sees no key).
    """
    b, s_q, h_q, d_qk = q.shape
    scale = d_qk**-0.5 if softmax_scale is None else float(softmax_scale)
    rows = dense_rows(k_cache, descale_k)  # [nb, page, d]
    if descale_q is not None:
        if not isinstance(descale_q, torch.Tensor) or descale_q.numel() != 1:
            raise ValueError("descale_q: expected a one-element tensor")
        q = q.double() * descale_q.to(device=q.device, dtype=torch.float64).reshape(())
    if rows.shape[-1] != d_qk:
        raise ValueError(f"k_cache: rows are {rows.shape[-1]} wide, q has d_qk {d_qk}")
    nb, page = rows.shape[0], rows.shape[1]
    cap = block_table.shape[1] * page
    lengths = cache_seqlens.long().clamp(0, cap).cpu()
    table = block_table.long().cpu()
    device = q.device
    out = torch.zeros((b, s_q, h_q, head_dim_v), dtype=torch.float64, device=device)
    lse = torch.full((b, s_q, h_q), float("inf"), dtype=torch.float64, device=device)
    for i_b in range(b):
        n = int(lengths[i_b])
        if n == 0 or nb == 0:  # no key, or every block id outside a cache of no blocks
            continue
        j = torch.arange(n)
        blk = table[i_b, j // page]
        valid = (blk >= 0) & (blk < nb)
        safe = torch.where(valid, blk, torch.zeros_like(blk))
        k = rows[safe.to(rows.device), (j % page).to(rows.device)].to(device)  # [n, d]
        k = torch.where(valid.to(device)[:, None], k, torch.zeros((), dtype=k.dtype, device=device))
        scores = torch.einsum("shd,nd->shn", q[i_b].double(), k) * scale  # [s_q, h, n]
        mask = valid.to(device)[None, :].expand(s_q, n)
        if causal:
            limit = n - s_q + torch.arange(s_q, device=device)  # last visible key per query token
            mask = mask & (torch.arange(n, device=device)[None, :] <= limit[:, None])
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        row_lse = torch.logsumexp(scores, dim=-1)  # [s_q, h]
        seen = mask.any(-1)[:, None].expand_as(row_lse)
        probs = torch.exp(scores - torch.where(seen, row_lse, torch.zeros_like(row_lse))[..., None])
        o = torch.einsum("shn,nd->shd", probs, k[:, :head_dim_v])
        out[i_b] = torch.where(seen[..., None], o, torch.zeros_like(o))
        lse[i_b] = torch.where(seen, row_lse, torch.full_like(row_lse, float("inf")))
    return out, lse.transpose(1, 2)
