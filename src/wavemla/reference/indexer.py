"""The fp64 reference of the DeepSeek-V4 lightning indexer (CSA layers): score every visible compressed row, keep the
top-k, return their global cache slots. It defines the semantics the Triton indexer must match.

For request ``b``, query token ``s`` and visible compressed row ``i`` (``i < n_vis[b, s]``)::

    K_i          = index_k_cache[block_table[b, i // page], i % page]        (FP8 rows dequantized)
    I[b, s, i]   = Σ_h weights[b, s, h] · ReLU(q_idx[b, s, h] · K_i)           fp64
    selected     = the top-k rows by I; ties at the k-th score go to the lower row index
    indices[b, s] = sorted(selected) mapped to global slots block_table[b, i // page] · page + i % page, −1 padded
    topk_length[b, s] = min(k, n_vis[b, s])

Edge semantics:

- **Visibility.** ``n_comp`` is either ``[b]`` (compressed rows of the request, as seen by its *last* query token)
  or ``[b, s_q]`` (an explicit visible-row count per query token). With ``[b]`` the query token ``s`` sees
  ``n_comp[b] - (s_q - 1 - s)`` rows (clamped at 0): token ``s_q - 1`` sees all of them, each earlier token one row
  fewer. For exact CSA causality of speculative tokens at absolute positions ``p`` pass the ``[b, s_q]`` form built by
  :func:`csa_visible_rows` (``(p + 1) // 4``). Counts are also clamped to ``max_n_comp`` (default: all the rows the
  block table can address, ``max_blocks · page``).
- **Short rows.** When ``n_vis ≤ k`` every visible row is returned, in row order, without scoring.
- **Order.** Selected rows are listed in ascending row order (not score order): attention is over a set, and a fixed
  order makes the output bit-identical run to run.
- **Ties.** Equal scores at the k-th place are taken lowest row index first. A NaN score ranks as −inf; −0 equals +0.
- **Padding.** Entries ``[topk_length, k)`` hold −1. Rows past ``n_vis`` (unused cache rows, unused block-table
  entries) are never read.

The Triton kernel scores in fp32 (tensor-core dot, fp32 accumulate); its selection equals this reference whenever the
scores are exact in fp32 (e.g. small-integer test data) or the k-th score is separated from the next by more than the
fp32 rounding of the dot products.

Index-K cache formats (one compressed row = 128 values):

- bf16 / fp16 rows ``[num_blocks, page, 128]``;
- FP8 rows ``[num_blocks, page, 132]`` uint8: bytes ``[0, 128)`` are float8_e4m3fn codes, bytes ``[128, 132)`` one
  little-endian fp32 scale ``2^ceil(log2(amax / 448))`` (amax clamped ≥ 1e-4); value = code · scale.
- MXFP4 rows ``[num_blocks, page, 68]`` uint8 (OCP MX: e2m1 values, one e8m0 scale per block of 32): bytes
  ``[0, 64)`` hold the 128 e2m1 codes two a byte (value ``2j`` in the low nibble, ``2j + 1`` in the high one), bytes
  ``[64, 68)`` the four block exponents ``E`` (block ``g`` covers values ``[32g, 32g + 32)``); value = e2m1(code) ·
  2^(E − 127), E = 255 is NaN. DeepSeek-V4's index keys are FP4 fake-quantized in blocks of 32, so this format holds
  them exactly in 68 bytes; SGLang and vLLM store it in the page-split layout.

Both byte formats come in two layouts (:data:`INDEX_K_LAYOUTS`): ``"rows"`` keeps each row's codes and scale bytes
together; ``"paged"`` stores a page's code rows first, then the page's scale bytes.

Example::

    cache = quantize_index_k(torch.randn(4, 64, 128))                   # [4, 64, 132] uint8
    idx, length = lightning_indexer_ref(q, w, cache, block_table, n_comp, 512)
"""

from __future__ import annotations

import math

import torch

INDEX_DIM = 128
FP8_ROW_BYTES = INDEX_DIM + 4
MXFP4_BLOCK = 32  # values per e8m0 block scale
MXFP4_CODE_BYTES = INDEX_DIM // 2
MXFP4_ROW_BYTES = MXFP4_CODE_BYTES + INDEX_DIM // MXFP4_BLOCK
E4M3_MAX = 448.0
E2M1_MAX = 6.0
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitude of codes 0..7; bit 3 is the sign
AMAX_FLOOR = 1e-4
# Byte formats of an index-K cache: FP8 rows [num_blocks, page, 132] uint8, MXFP4 rows [num_blocks, page, 68] uint8.
INDEX_K_FORMATS = ("fp8", "mxfp4")
# Layouts of a byte-format cache: "rows" keeps each row's codes and scale bytes together; "paged" (vLLM's V3.2
# indexer cache, and SGLang's and vLLM's DeepSeek-V4 MXFP4 caches) stores a page's code rows first (128 or 64 bytes
# each), then the page's scale bytes (4 a row).
INDEX_K_LAYOUTS = ("rows", "paged")


def quantize_index_k(rows: torch.Tensor, *, layout: str = "rows", fmt: str = "fp8") -> torch.Tensor:
    """Quantize index-K rows ``[..., 128]`` (any float dtype) to FP8 rows ``[..., 132]`` or MXFP4 rows ``[..., 68]``.

    ``fmt="fp8"``, per row: ``scale = 2^ceil(log2(max(amax, 1e-4) / 448))`` (exact power of two, computed through
    frexp so no log rounding can push a code past 448), codes = round-to-nearest-even e4m3 of ``row / scale``.
    ``fmt="mxfp4"``, per block of 32 values: ``scale = 2^ceil(log2(max(amax, 1e-4) / 6))``, stored as the e8m0
    exponent byte, codes = round-to-nearest-even e2m1 of ``block / scale`` (ties to the even code, as SGLang's
    fused DeepSeek-V4 index-K packer rounds). ``layout="rows"``: each row's scale bytes follow its codes.
    ``layout="paged"``: ``rows`` is ``[..., page, 128]`` and each page holds its ``page`` code rows first, then their
    scale bytes (vLLM's V3.2 indexer cache; SGLang's and vLLM's DeepSeek-V4 MXFP4 caches).

    Example::

        cache = quantize_index_k(torch.randn(8, 64, 128))                   # [8, 64, 132] uint8, per-row scales
        paged = quantize_index_k(torch.randn(8, 64, 128), layout="paged")   # same shape, page-split bytes
        fp4 = quantize_index_k(torch.randn(8, 64, 128), layout="paged", fmt="mxfp4")   # [8, 64, 68] uint8
    """
    if not isinstance(rows, torch.Tensor) or not rows.is_floating_point():
        raise ValueError(f"rows: expected a floating-point tensor [..., {INDEX_DIM}], got {_describe(rows)}")
    if rows.dim() < 1 or rows.shape[-1] != INDEX_DIM:
        raise ValueError(f"rows: expected last dimension {INDEX_DIM}, got shape {tuple(rows.shape)}")
    _check_layout(layout)
    if fmt not in INDEX_K_FORMATS:
        raise ValueError(f"fmt: expected one of {INDEX_K_FORMATS}, got {fmt!r}")
    if layout == "paged" and rows.dim() < 2:
        raise ValueError(f"rows: layout 'paged' needs pages [..., page, {INDEX_DIM}], got shape {tuple(rows.shape)}")
    x = rows.float()
    if fmt == "fp8":
        scale = _pow2_scale(x, E4M3_MAX)
        codes = (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
        scale_bytes = scale.contiguous().view(torch.uint8)  # [..., 4], little-endian like the GPU
    else:
        codes, scale_bytes = _quantize_mxfp4(x)
    width = codes.shape[-1]
    if layout == "rows":
        return torch.cat([codes, scale_bytes], dim=-1)
    lead, page = rows.shape[:-2], rows.shape[-2]
    flat = torch.cat([codes.reshape(*lead, page * width), scale_bytes.reshape(*lead, page * 4)], dim=-1)
    return flat.view(*lead, page, width + 4)


def _pow2_scale(x: torch.Tensor, top: float) -> torch.Tensor:
    """``2^ceil(log2(max(amax, 1e-4) / top))`` over the last dimension of fp32 ``x``, as ``[..., 1]`` fp32."""
    amax = x.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
    mant, expo = torch.frexp(amax.double() / top)  # amax/top = mant · 2^expo, mant in [0.5, 1)
    expo = torch.where(mant == 0.5, expo - 1, expo)  # an exact power of two needs no extra octave
    return torch.ldexp(torch.ones_like(amax), expo.to(torch.int32)).float()


def _quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 ``[..., 128]`` -> (packed e2m1 codes ``[..., 64]``, e8m0 block exponents ``[..., 4]``) uint8."""
    blocks = x.reshape(*x.shape[:-1], INDEX_DIM // MXFP4_BLOCK, MXFP4_BLOCK)
    scale = _pow2_scale(blocks, E2M1_MAX)  # [..., 4, 1]; 1e-4 / 6 keeps the exponent well inside e8m0
    exps = (torch.frexp(scale)[1] - 1 + 127).to(torch.uint8)[..., 0]  # scale = 2^(E - 127)
    a = (blocks / scale).clamp(-E2M1_MAX, E2M1_MAX)
    mag_a = a.abs()
    mag = torch.zeros(a.shape, dtype=torch.uint8, device=x.device)
    for i in range(len(E2M1_VALUES) - 1):  # midpoint i lies between codes i and i + 1
        mid = (E2M1_VALUES[i] + E2M1_VALUES[i + 1]) / 2
        mag += mag_a > mid
        if i % 2:  # a value on the midpoint goes to the even code of the two, here the upper one
            mag += mag_a == mid
    codes = mag | ((a < 0) & (mag != 0)).to(torch.uint8) << 3
    codes = codes.reshape(*x.shape[:-1], INDEX_DIM)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed, exps


def quantize_index_q(q_idx: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 indexer queries, DeepSeek's way: ``(q codes float8_e4m3fn, weights · scale fp32)``.

    Each head's 128 values get a power-of-two scale (the rule of :func:`quantize_index_k`); since a positive scale
    commutes with ReLU, ``Σ_h w_h·ReLU((s_h·c_h)·k) = Σ_h (w_h·s_h)·ReLU(c_h·k)``, so the scale moves into the head
    weight and the logit dot runs on the codes. ``q_idx [..., heads, 128]`` (any float dtype), ``weights [...,
    heads]``; the scores change only by the e4m3 rounding of q.

    Example::

        q8, w8 = quantize_index_q(q_idx, weights)     # then lightning_indexer(q8, w8, cache, ...)
    """
    if not isinstance(q_idx, torch.Tensor) or not q_idx.is_floating_point() or q_idx.shape[-1:] != (INDEX_DIM,):
        raise ValueError(f"q_idx: expected a floating-point tensor [..., heads, {INDEX_DIM}], got {_describe(q_idx)}")
    if not isinstance(weights, torch.Tensor) or weights.shape != q_idx.shape[:-1]:
        raise ValueError(f"weights: expected shape {tuple(q_idx.shape[:-1])}, got {_describe(weights)}")
    x = q_idx.float()
    scale = _pow2_scale(x, E4M3_MAX)
    codes = (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes, weights.float() * scale[..., 0]


def dequantize_index_k(cache: torch.Tensor, *, layout: str = "rows") -> torch.Tensor:
    """FP8 rows ``[..., 132]`` or MXFP4 rows ``[..., 68]`` uint8 -> fp32 ``[..., 128]`` (exact: code · scale).

    The format follows from the last dimension; ``layout="paged"`` reads ``[..., page, width]`` pages as
    :func:`quantize_index_k` writes them. An MXFP4 block exponent of 255 gives NaN values.

    Example::

        rows = dequantize_index_k(quantize_index_k(torch.randn(3, 128)))  # [3, 128] fp32
    """
    if not isinstance(cache, torch.Tensor) or cache.dtype != torch.uint8:
        raise ValueError(
            f"cache: expected a uint8 tensor [..., {FP8_ROW_BYTES}] or [..., {MXFP4_ROW_BYTES}], got {_describe(cache)}"
        )
    if cache.dim() < 1 or cache.shape[-1] not in (FP8_ROW_BYTES, MXFP4_ROW_BYTES):
        raise ValueError(
            f"cache: expected last dimension {FP8_ROW_BYTES} (FP8) or {MXFP4_ROW_BYTES} (MXFP4), got shape "
            f"{tuple(cache.shape)}"
        )
    _check_layout(layout)
    return _dequantize(cache, layout).float()


def _dequantize(cache: torch.Tensor, layout: str) -> torch.Tensor:
    """:func:`dequantize_index_k` in fp64 (MXFP4 values with large block exponents overflow fp32)."""
    width = cache.shape[-1] - 4
    if layout == "rows":
        codes, scale_bytes = cache[..., :width], cache[..., width:]
    else:
        if cache.dim() < 2:
            raise ValueError(f"cache: layout 'paged' needs pages [..., page, {width + 4}], got {_describe(cache)}")
        lead, page = cache.shape[:-2], cache.shape[-2]
        flat = cache.reshape(*lead, page * (width + 4))
        codes = flat[..., : page * width].reshape(*lead, page, width)
        scale_bytes = flat[..., page * width :].reshape(*lead, page, 4)
    if width == INDEX_DIM:
        fp8 = codes.contiguous().view(torch.float8_e4m3fn).double()
        return fp8 * scale_bytes.contiguous().view(torch.float32).double()
    pairs = torch.stack([codes & 15, codes >> 4], dim=-1).reshape(*codes.shape[:-1], INDEX_DIM).long()
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=cache.device)
    values = torch.where(pairs >= 8, -grid[pairs & 7], grid[pairs & 7])
    exps = scale_bytes.long()
    scale = torch.where(exps == 255, math.nan, torch.ldexp(torch.ones_like(exps, dtype=torch.float64), exps - 127))
    blocks = values.reshape(*values.shape[:-1], INDEX_DIM // MXFP4_BLOCK, MXFP4_BLOCK) * scale[..., None]
    return blocks.reshape(values.shape)


def index_k_rows(index_k_cache: torch.Tensor, layout: str = "rows") -> torch.Tensor:
    """The cache as fp64 rows ``[num_blocks, page, 128]``: byte formats dequantized, bf16/fp16/fp32 rows upcast."""
    if index_k_cache.dtype == torch.uint8:
        _check_layout(layout)
        return _dequantize(index_k_cache, layout)
    return index_k_cache.double()


def _check_layout(layout: object) -> None:
    if layout not in INDEX_K_LAYOUTS:
        raise ValueError(f"layout: expected one of {INDEX_K_LAYOUTS}, got {layout!r}")


def visible_rows(n_comp: torch.Tensor, s_q: int, max_n_comp: int | None = None) -> torch.Tensor:
    """Visible compressed rows per query token, int64 ``[b, s_q]``.

    ``n_comp [b]``: token ``s`` sees ``n_comp[b] - (s_q - 1 - s)`` rows; ``n_comp [b, s_q]``: taken as given. Both are
    clamped to ``[0, max_n_comp]`` (no upper clamp when ``max_n_comp`` is None).

    Example::

        visible_rows(torch.tensor([10]), 3)                             # tensor([[8, 9, 10]])
    """
    n = n_comp.long()
    if n.dim() == 1:
        shift = torch.arange(s_q - 1, -1, -1, device=n.device)
        n = n[:, None] - shift[None, :]
    elif n.dim() != 2 or n.shape[1] != s_q:
        raise ValueError(f"n_comp: expected shape [b] or [b, {s_q}], got {tuple(n_comp.shape)}")
    n = n.clamp_min(0)
    if max_n_comp is not None:
        n = n.clamp_max(max_n_comp)
    return n


def csa_visible_rows(positions: torch.Tensor, ratio: int = 4) -> torch.Tensor:
    """Exact CSA visibility for query tokens at absolute positions ``p`` ``[b, s_q]``: ``(p + 1) // ratio`` (int32).

    Pass the result as ``n_comp`` to give each speculative token its own causal row count.

    Example::

        csa_visible_rows(torch.tensor([[14, 15]]))                      # tensor([[3, 4]], dtype=torch.int32)
    """
    if ratio < 1:
        raise ValueError(f"ratio: expected a positive compression ratio, got {ratio}")
    return torch.div(positions.long() + 1, ratio, rounding_mode="floor").to(torch.int32)


def rows_to_slots(rows: torch.Tensor, block_table_row: torch.Tensor, page: int) -> torch.Tensor:
    """Row numbers of one request -> global cache slots ``block_table[i // page] · page + i % page`` (int64)."""
    rows = rows.long()
    return block_table_row.long()[rows // page] * page + rows % page


def indexer_scores_ref(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    *,
    max_n_comp: int | None = None,
    index_k_layout: str = "rows",
) -> torch.Tensor:
    """Index scores fp64 ``[b, s_q, max_n_comp]``: ``I`` for visible rows, −inf for rows a token cannot see.

    Shapes: ``q_idx [b, s_q, h, 128]``, ``weights [b, s_q, h]`` fp32, ``index_k_cache [num_blocks, page, 128|132]``,
    ``block_table [b, max_blocks]`` int32, ``n_comp [b]`` or ``[b, s_q]`` int32. ``max_n_comp`` defaults to
    ``max_blocks · page``; ``index_k_layout`` is the FP8 cache's layout (:data:`INDEX_K_LAYOUTS`). NaN scores are
    reported as −inf (their rank).

    Example::

        scores = indexer_scores_ref(q, w, cache, block_table, n_comp)  # fp64 [b, s_q, max_blocks * page]
    """
    b, s_q = q_idx.shape[0], q_idx.shape[1]
    page = index_k_cache.shape[1]
    capacity = block_table.shape[1] * page
    n_max = capacity if max_n_comp is None else max_n_comp
    n_vis = visible_rows(n_comp, s_q, n_max).cpu()
    rows_all = index_k_rows(index_k_cache, index_k_layout)
    out = torch.full((b, s_q, n_max), -math.inf, dtype=torch.float64, device=q_idx.device)
    for i_b in range(b):
        n_hi = int(n_vis[i_b].max()) if s_q > 0 else 0
        if n_hi == 0:
            continue
        rows = torch.arange(n_hi, device=block_table.device)
        blk = block_table[i_b].long()[rows // page]
        k = rows_all[blk, rows % page].to(q_idx.device)  # [n_hi, 128]
        for i_s in range(s_q):
            n = int(n_vis[i_b, i_s])
            if n == 0:
                continue
            logits = q_idx[i_b, i_s].double() @ k[:n].T  # [h, n]
            score = (torch.relu(logits) * weights[i_b, i_s].double()[:, None]).sum(0)
            out[i_b, i_s, :n] = torch.nan_to_num(score, nan=-math.inf)
    return out


def select_topk_rows(scores: torch.Tensor, n_vis: int, topk: int) -> torch.Tensor:
    """Selected row numbers of one query token, ascending (int64 ``[min(topk, n_vis)]``).

    ``scores [>= n_vis]``: only the first ``n_vis`` are candidates. With ``n_vis <= topk`` every row is taken;
    otherwise the ``topk`` largest scores, equal scores ordered by lower row first (a stable descending sort).
    """
    if n_vis <= topk:
        return torch.arange(n_vis, device=scores.device)
    cand = torch.nan_to_num(scores[:n_vis].double(), nan=-math.inf)
    order = torch.sort(cand, descending=True, stable=True).indices
    return torch.sort(order[:topk]).values


def lightning_indexer_ref(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    topk: int,
    *,
    max_n_comp: int | None = None,
    index_k_layout: str = "rows",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k compressed rows per query token as global cache slots.

    Args:
        q_idx: ``[b, s_q, h, 128]`` indexer queries (any float dtype; computed in fp64).
        weights: ``[b, s_q, h]`` fp32 head weights, already including ``128^-0.5 · h^-0.5``.
        index_k_cache: ``[num_blocks, page, 128]`` bf16/fp16/fp32 rows or ``[num_blocks, page, 132]`` uint8 FP8 rows.
        block_table: ``[b, max_blocks]`` int32.
        n_comp: ``[b]`` or ``[b, s_q]`` int32 (see the module docstring for visibility).
        topk: rows to keep (512 for V4-Flash, 1024 for V4-Pro).
        max_n_comp: static bound on visible rows (default ``max_blocks · page``).
        index_k_layout: ``"rows"`` or ``"paged"`` (the FP8 cache's byte layout, see :data:`INDEX_K_LAYOUTS`).

    Returns:
        ``indices [b, s_q, topk]`` int32 global slots in ascending row order, −1 padded, and
        ``topk_length [b, s_q]`` int32 ``= min(topk, n_vis)``.

    Example::

        idx, length = lightning_indexer_ref(q, w, cache, block_table, n_comp, 512)
    """
    if topk < 1:
        raise ValueError(f"topk: expected a positive number of rows, got {topk}")
    b, s_q = q_idx.shape[0], q_idx.shape[1]
    page = index_k_cache.shape[1]
    n_max = block_table.shape[1] * page if max_n_comp is None else max_n_comp
    n_vis = visible_rows(n_comp, s_q, n_max).cpu()
    need_scores = bool((n_vis > topk).any())
    scores = (
        indexer_scores_ref(
            q_idx, weights, index_k_cache, block_table, n_comp, max_n_comp=n_max, index_k_layout=index_k_layout
        )
        if need_scores
        else None
    )
    device = q_idx.device
    indices = torch.full((b, s_q, topk), -1, dtype=torch.int32, device=device)
    lengths = torch.zeros((b, s_q), dtype=torch.int32, device=device)
    for i_b in range(b):
        for i_s in range(s_q):
            n = int(n_vis[i_b, i_s])
            if n > topk:
                assert scores is not None
                rows = select_topk_rows(scores[i_b, i_s], n, topk)
            else:
                rows = torch.arange(n, device=device)
            slots = rows_to_slots(rows.to(block_table.device), block_table[i_b], page)
            indices[i_b, i_s, : rows.numel()] = slots.to(device=device, dtype=torch.int32)
            lengths[i_b, i_s] = rows.numel()
    return indices, lengths


def topk_length_per_request(topk_length: torch.Tensor, *, require_uniform: bool = False) -> torch.Tensor:
    """Reduce per-token lengths ``[b, s_q]`` to the per-request ``[b]`` int32 the sparse decode takes.

    The maximum over the request's tokens is exact: a token with a shorter list holds −1 past its own length, and the
    sparse decode ignores −1 entries. ``require_uniform=True`` additionally checks that all tokens of a request share
    one length (a host synchronisation: not for CUDA-graph capture) and raises ValueError otherwise.

    Example::

        topk_length_per_request(torch.tensor([[511, 512]], dtype=torch.int32))   # tensor([512], dtype=torch.int32)
    """
    if not isinstance(topk_length, torch.Tensor) or topk_length.dtype != torch.int32:
        raise ValueError(f"topk_length: expected an int32 tensor [b, s_q] or [b], got {_describe(topk_length)}")
    if topk_length.dim() == 1:
        return topk_length
    if topk_length.dim() != 2 or topk_length.shape[1] < 1:
        raise ValueError(f"topk_length: expected shape [b, s_q] with s_q >= 1, got {tuple(topk_length.shape)}")
    reduced = topk_length.amax(dim=1)
    if require_uniform and not bool((topk_length == reduced[:, None]).all()):
        raise ValueError("topk_length: tokens of one request have different lengths and require_uniform=True")
    return reduced


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor of shape {tuple(x.shape)} on {x.device}"
    return type(x).__name__
