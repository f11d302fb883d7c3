"""Comparison helpers shared by the tests, the demo and the benchmarks.

One rule everywhere (FlashMLA's): an element passes when it is within the absolute OR the relative tolerance of the
reference; the whole tensor must also have a cosine difference under ``cos``; inf and NaN must sit at exactly the
same positions (with the same sign for inf). Failures name the worst element.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    """Per-element ``abs`` or ``rel`` bound plus a whole-tensor cosine-difference bound."""

    abs: float
    rel: float
    cos: float = 1.0


# Keyed by (quantity, lane). "gpu" compares bf16/fp16 kernel output to the fp64 reference on the same dequantized rows
# (FlashMLA's sparse decode test tolerances); "interp" is the Triton interpreter lane (fp16 tiles, numpy arithmetic).
TOLERANCES: dict[tuple[str, str], Tolerance] = {
    ("out", "gpu"): Tolerance(abs=1e-3, rel=2.01 / 128, cos=5e-6),
    ("lse", "gpu"): Tolerance(abs=1e-6, rel=8.01 / 65536),
    ("out", "interp"): Tolerance(abs=1e-3, rel=2.01 / 128, cos=5e-6),
    ("lse", "interp"): Tolerance(abs=1e-6, rel=8.01 / 65536),
}


def bf16_weights_tolerance(tol: Tolerance, v_max: float) -> Tolerance:
    """``tol`` widened for outputs whose softmax weights were rounded to bf16 for the ``PV`` product (bf16 row
    caches; FP8 rows use fp16 weights). Each weight then carries a relative error up to 2^-9, so an output element
    can be off by up to 2^-9 · max|v| over the rows it reads — an absolute error, which FlashMLA's ``abs`` of 1e-3
    does not cover where the weighted rows nearly cancel (docs/reliability.md, "Numeric limits"). The ``abs`` bound
    becomes ``max(tol.abs, 2^-8 · v_max)`` (twice the worst case) and the cosine bound ``max(tol.cos, 2^-16)``."""
    return Tolerance(abs=max(tol.abs, v_max / 256.0), rel=tol.rel, cos=max(tol.cos, 2.0**-16))


def rows_out_tolerance(
    lane: str, bf16_rows: tuple[torch.Tensor | None, ...] = (), out_dtype: torch.dtype | None = None
) -> Tolerance:
    """The output tolerance on ``lane`` ("gpu" or "interp"): FlashMLA's, widened on the GPU by
    :func:`bf16_weights_tolerance` where the decode read bf16 row caches (``bf16_rows``, whose softmax weights are
    rounded to bf16), over their largest finite |value| (poisoned rows hold NaN or ±inf and do not count). A bf16
    ``out_dtype`` on the interpreter lane (an FP8 q's output) widens the cosine bound to 2e-5: Triton's interpreter
    converts fp32 to bf16 by truncation, not rounding, which biases every element by up to 2^-8."""
    tol = TOLERANCES[("out", lane)]
    if lane == "interp" and out_dtype == torch.bfloat16:
        return Tolerance(abs=tol.abs, rel=tol.rel, cos=max(tol.cos, 2e-5))
    if lane != "gpu" or not bf16_rows:
        return tol
    vals = [
        c.float().abs().nan_to_num(0.0, posinf=0.0, neginf=0.0).max().item()
        for c in bf16_rows
        if c is not None and c.numel()
    ]
    return bf16_weights_tolerance(tol, max(vals, default=0.0))


def dense_out_tolerance(k_cache: torch.Tensor, lane: str, out_dtype: torch.dtype | None = None) -> Tolerance:
    """The dense decode's output tolerance on ``lane`` ("gpu" or "interp"): FlashMLA's, widened by
    :func:`bf16_weights_tolerance` where bf16 rows meet one bf16 dot of P (``WAVEMLA_DENSE_P=single``, the default),
    and on the interpreter lane for a bf16 ``out_dtype`` (:func:`rows_out_tolerance`)."""
    from wavemla.kernels.dense_decode import split_p

    one_bf16_dot = k_cache.dtype == torch.bfloat16 and not split_p(False, torch.bfloat16)
    return rows_out_tolerance(lane, (k_cache[..., :512],) if one_bf16_dot else (), out_dtype)


def cosine_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """1 - 2<a,b>/(|a|^2+|b|^2) over finite positions, in fp64 (0 when both are all zero)."""
    a64, b64 = a.double().flatten(), b.double().flatten()
    finite = torch.isfinite(a64) & torch.isfinite(b64)
    a64, b64 = a64[finite], b64[finite]
    denom = (a64 * a64 + b64 * b64).sum().item()
    if denom == 0.0:
        return 0.0
    return 1.0 - 2.0 * (a64 * b64).sum().item() / denom


def check_close(name: str, actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> str | None:
    """None when ``actual`` matches ``expected`` under ``tol``; otherwise a one-paragraph description."""
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu()
    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    if not torch.equal(a_nan, e_nan):
        where = (a_nan != e_nan).nonzero()[0].tolist()
        return f"{name}: NaN positions differ, first at {where} (actual {a[tuple(where)]}, expected {e[tuple(where)]})"
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    if not torch.equal(a_inf, e_inf) or not torch.equal(a[a_inf], e[e_inf]):
        where = ((a_inf != e_inf) | (a_inf & (a != e))).nonzero()[0].tolist()
        return f"{name}: inf positions differ, first at {where} (actual {a[tuple(where)]}, expected {e[tuple(where)]})"
    finite = torch.isfinite(e)
    err = (a - e).abs().where(finite, torch.zeros_like(a))
    bound = torch.maximum(torch.full_like(e, tol.abs), tol.rel * e.abs())
    bad = err > bound
    if bad.any():
        ratio = (err / bound).where(bad, torch.zeros_like(a))  # a bound of 0 (abs 0, zero expected): 0/0 or inf
        worst = tuple(int(i) for i in torch.unravel_index(ratio.argmax(), ratio.shape))
        return (
            f"{name}: {int(bad.sum())} of {e.numel()} elements outside abs {tol.abs:g} / rel {tol.rel:g}; "
            f"worst at {list(worst)}: actual {a[worst].item():.8g}, expected {e[worst].item():.8g}, "
            f"error {err[worst].item():.3g}"
        )
    cd = cosine_diff(a, e)
    if cd > tol.cos:
        return f"{name}: cosine difference {cd:.3g} > {tol.cos:g}"
    return None


def assert_close(name: str, actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> None:
    """Raise AssertionError with the worst element when :func:`check_close` finds a mismatch."""
    problem = check_close(name, actual, expected, tol)
    if problem is not None:
        raise AssertionError(problem)


def _to_device(cache: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """Move a cache keeping its layout (a MODEL1 view keeps its padded page stride)."""
    if cache.device == torch.device(device):
        return cache
    if cache.dtype != torch.uint8:
        return cache.to(device)
    from wavemla.reference.fp8 import empty_model1

    moved = empty_model1(cache.shape[0], cache.shape[1], device)
    flat = torch.as_strided(cache, (cache.shape[0], cache.stride(0)), (cache.stride(0), 1))
    torch.as_strided(moved, (cache.shape[0], moved.stride(0)), (moved.stride(0), 1)).copy_(flat)
    return moved


# Caches of more rows than this are built a slice of pages at a time (benchmarks of engine-sized caches: the fp32 rows
# of all 8.4M rows at once, with the quantizer's copies, were about 60 GB); smaller ones, every test's, at once.
BULK_ROWS = 1 << 21


def make_sparse_decode_inputs(
    *,
    batch: int,
    s_q: int = 1,
    h_q: int = 64,
    topk: int = 128,
    page: int = 256,
    extra_topk: int = 0,
    extra_page: int = 64,
    extra_pool: int | None = None,
    fp8: bool = True,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device = "cpu",
    sink: bool = True,
    invalid_fraction: float = 0.0,
    seed: int = 0,
) -> dict[str, torch.Tensor | None]:
    """DSV4-shaped decode inputs, as keyword arguments of :func:`wavemla.sparse_mla_decode`.

    Each request owns its own pages. Main indices are the request's ``topk`` most recent window rows (consecutive
    slots of its pages, as a sliding window is); extra indices pick ``extra_topk`` distinct rows at random from a pool
    of ``extra_pool`` compressed rows (default: exactly ``extra_topk``, i.e. all rows, as in HCA). Slots no request
    uses hold NaN (bf16/fp16) or 0xFF bytes (FP8: NaN codes), so a kernel that reads an invalid row fails the
    comparison. ``invalid_fraction`` replaces that share of indices by -1. Latents are N(0, 1) and q is N(0, 1)
    clamped to [-1, 1], the distribution FlashMLA's tests use with the same tolerances.
    """
    from wavemla.reference.fp8 import empty_model1, page_views, quantize_model1

    gen = torch.Generator().manual_seed(seed)
    # Bulk values come from a generator on the target device (fast at benchmark sizes); layout choices from the CPU one.
    dev_gen = torch.Generator(device=device).manual_seed(seed)

    def cache_for(rows_per_req: int, pg: int) -> tuple[torch.Tensor, torch.Tensor]:
        blocks_per_req = -(-rows_per_req // pg)
        nb = batch * blocks_per_req + 1  # one spare block that nothing indexes: poisoned
        if nb * pg <= BULK_ROWS:
            rows = torch.randn((nb, pg, 1, 512), generator=dev_gen, device=device)
            cache = quantize_model1(rows.to(dtype)) if fp8 else rows.to(dtype)
        else:  # an engine-sized cache: its fp32 rows a slice of blocks at a time
            step = max(1, BULK_ROWS // pg)
            cache = empty_model1(nb, pg, device) if fp8 else torch.empty((nb, pg, 1, 512), dtype=dtype, device=device)
            for b0 in range(0, nb, step):
                part = torch.randn((min(step, nb - b0), pg, 1, 512), generator=dev_gen, device=device).to(dtype)
                cache[b0 : b0 + part.shape[0]] = quantize_model1(part) if fp8 else part
        # global slot of request r's i-th row: its pages are laid out in a shuffled order, as a paged allocator does
        perm = torch.randperm(nb, generator=gen)
        table = perm[: batch * blocks_per_req].view(batch, blocks_per_req)
        i = torch.arange(rows_per_req)
        slots = table[:, i // pg] * pg + i % pg  # [batch, rows_per_req]
        used = torch.zeros(nb * pg, dtype=torch.bool, device=device)
        used[slots.flatten().to(device)] = True
        if fp8:
            data, scales = page_views(cache)
            unused = ~used.view(nb, pg)
            data[unused] = 0xFF
            scales[unused] = 0xFF
        else:
            cache.view(-1, 512)[~used] = float("nan")
        return cache, slots

    kv, win_slots = cache_for(topk, page)  # caches are built on the target device; index lists on the CPU
    lists = {"indices": win_slots.view(batch, 1, topk).expand(batch, s_q, topk).to(torch.int32)}
    out: dict[str, torch.Tensor | None] = {}
    if extra_topk:
        pool = extra_pool or extra_topk
        if pool < extra_topk:
            raise ValueError(f"extra_pool: expected at least extra_topk={extra_topk} rows to pick from, got {pool}")
        extra_kv, comp_slots = cache_for(pool, extra_page)
        pick = torch.stack([torch.randperm(pool, generator=gen)[:extra_topk] for _ in range(batch * s_q)])
        extra_idx = torch.gather(comp_slots.repeat_interleave(s_q, 0), 1, pick).view(batch, s_q, extra_topk)
        out["extra_kv_cache"] = extra_kv
        lists["extra_indices"] = extra_idx.to(torch.int32)
    for key, t in lists.items():
        if invalid_fraction > 0:
            t = t.masked_fill(torch.rand(t.shape, generator=gen) < invalid_fraction, -1)
        out[key] = t.contiguous().to(device)
    out["q"] = torch.randn((batch, s_q, h_q, 512), generator=dev_gen, device=device).clamp(-1.0, 1.0).to(dtype)
    out["kv_cache"] = kv
    out["attn_sink"] = (torch.randn((h_q,), generator=dev_gen, device=device) * 2.0) if sink else None
    return out


# Block-table padding FlashMLA's dense-decode tests use: a kernel that reads a table entry past the length indexes
# far outside the cache.
BLOCK_TABLE_PAD = 2147480000


def make_dense_decode_inputs(
    *,
    lengths: list[int],
    s_q: int = 1,
    h_q: int = 16,
    d_qk: int = 576,
    page: int = 64,
    fp8: bool | str = False,
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device = "cpu",
    spare_blocks: int = 1,
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Paged dense-decode inputs, as keyword arguments of :func:`wavemla.dense_mla_decode`.

    Request ``i`` holds ``lengths[i]`` keys in its own pages, laid out in a shuffled order as a paged allocator does;
    its block-table row is padded with :data:`BLOCK_TABLE_PAD` past its pages, and the table has ``spare_blocks``
    columns more than the longest request needs. Every cache row no request covers (the tail of a request's last
    page, and one spare page) holds NaN (rows) or 0xFF bytes (FP8 V3.2: NaN codes, NaN scales, NaN rope), so a kernel
    that reads past a length fails the comparison. Rows are N(0, 1); q is N(0, 1) clamped to [-1, 1] (FlashMLA's
    test distribution). ``fp8`` stores the rows in the V3.2 layout (True or ``"v32"``), or as per-tensor FP8 codes
    (``"tensor"``: the rows in codes of one scale that is not a power of two, given as ``descale_k``; poisoned bytes
    0xFF); ``d_qk`` must
    be 576.
    """
    if fp8 not in (False, True, "v32", "tensor"):
        raise ValueError(f"fp8: False, True / 'v32' (the V3.2 layout) or 'tensor' (per-tensor codes), got {fp8!r}")
    from wavemla.reference.fp8_v32 import quantize_v32

    gen = torch.Generator().manual_seed(seed)
    dev_gen = torch.Generator(device=device).manual_seed(seed)
    b = len(lengths)
    pages = [-(-max(n, 0) // page) for n in lengths]
    nb = sum(pages) + 1  # one spare page that nothing references: poisoned
    width = max(pages, default=0) + spare_blocks
    perm = torch.randperm(nb, generator=gen)
    table = torch.full((b, width), BLOCK_TABLE_PAD, dtype=torch.int32)
    used = torch.zeros(nb, page, dtype=torch.bool)
    start = 0
    for i, (n, k) in enumerate(zip(lengths, pages, strict=True)):
        blocks = perm[start : start + k]
        start += k
        table[i, :k] = blocks.to(torch.int32)
        if k:
            used[blocks] = True
            used[blocks[-1], (n - (k - 1) * page) :] = False  # the tail of the last page
    rows = torch.randn((nb, page, 1, d_qk), generator=dev_gen, device=device)
    used_dev = used.to(device)
    extra: dict[str, torch.Tensor] = {}
    if fp8 == "tensor":
        from wavemla.reference.fp8_rows import quantize_fp8_rows

        # codes up to 448 from |x| 5.2, one scale for the cache that is not a power of two
        codes, extra["descale_k"] = quantize_fp8_rows(rows, scale=0.0117)
        cache = codes.view(torch.uint8)
        cache[~used_dev] = 0xFF
    elif fp8:
        cache = quantize_v32(rows)
        cache[~used_dev] = 0xFF
    else:
        cache = rows.to(dtype)
        cache[~used_dev] = float("nan")
    q = torch.randn((b, s_q, h_q, d_qk), generator=dev_gen, device=device).clamp(-1.0, 1.0).to(dtype)
    return {
        "q": q,
        "k_cache": cache,
        "block_table": table.to(device),
        "cache_seqlens": torch.tensor(lengths, dtype=torch.int32).to(device),
        **extra,
    }
