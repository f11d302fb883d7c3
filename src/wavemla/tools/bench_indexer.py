"""Lightning-indexer benchmark: the Triton indexer against a PyTorch baseline, and the GPU's copy bandwidth.

Contract (one record per measured case, fixed schema): kernel, provider (``triton`` | ``torch`` | ``copy``), gpu,
torch, triton, git_sha, b, s_q, heads, n_comp, topk, page, kv_format, q_format, median_us, p20_us, p80_us, reps,
bytes, gbps, copy_gbps, pct_of_copy_bw. ``git_sha`` is :func:`wavemla.tools.revision.source_revision`'s
(``-dirty`` where tracked files differ from the commit, null outside a checkout).

- ``bytes`` counts index-K bytes read (``b · n_comp · row_bytes``; 132 B per FP8 row, 68 B per MXFP4 row, 256 B
  per bf16 row), the traffic the indexer cannot avoid; both providers are charged the same bytes, so ``gbps`` is an
  effective rate.
  The ``copy`` record is the device-to-device copy ceiling ``wavemla bench`` uses (bytes read + written).
- Timing: each provider is captured once in a CUDA graph and replayed; before every replay a ≥ 256 MB buffer is
  written so that the L2 holds none of the inputs; CUDA events around the replay give one sample; median, p20, p80
  of ``reps`` (≥ 20) samples.
- Shapes: b ∈ {1, 32, 64, 128} × n_comp ∈ {2K, 8K, 32K, 256K} × (FP8 rows with per-row scales or page-split, and
  MXFP4 rows page-split, each with FP8 queries — DeepSeek's indexer — and with bf16 queries; bf16 rows with bf16
  queries), s_q 1, 64 heads, top-512, page 64;
  a provider whose estimated memory does not fit the free device memory is skipped for that shape.

Example::

    records = run_indexer_bench("indexer_h200.json")
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from wavemla.kernels.indexer import choose_config, indexer_workspace_numel, lightning_indexer
from wavemla.reference.indexer import (
    FP8_ROW_BYTES,
    INDEX_DIM,
    MXFP4_BLOCK,
    MXFP4_CODE_BYTES,
    MXFP4_ROW_BYTES,
    quantize_index_k,
)
from wavemla.tools.bench import copy_samples_us, spread_us, timing_samples_us
from wavemla.tools.revision import source_revision

BATCHES = (1, 32, 64, 128)
N_COMPS = (2048, 8192, 32768, 262144)
# fp8-paged: FP8 rows in vLLM's page-split V3.2 layout; mxfp4-paged: MXFP4 rows (68 bytes) in the page-split layout
# of SGLang's and vLLM's DeepSeek-V4 caches
KV_FORMATS = ("fp8", "fp8-paged", "mxfp4-paged", "bf16")
Q_FORMATS = ("fp8", "bf16")  # fp8 queries (DeepSeek's indexer) go with byte (FP8, MXFP4) index-K rows only
COPY_BYTES = 1 << 30
MIN_REPS = 20
MEMORY_HEADROOM = 0.85  # fraction of free memory a case may plan to use (allocator slack, fragmentation)


@dataclass(frozen=True)
class IndexerBenchCase:
    """One benchmark shape (decode: one query token per request by default)."""

    b: int
    n_comp: int
    kv_format: str  # "fp8" (per-row scales), "fp8-paged" (page-split scales), "mxfp4-paged" or "bf16"
    q_format: str = "bf16"  # "bf16", or "fp8": float8_e4m3fn queries with byte rows (codes x codes on the MMA)
    s_q: int = 1
    topk: int = 512
    heads: int = 64
    page: int = 64

    def __post_init__(self) -> None:
        for name in ("b", "n_comp", "s_q", "topk", "heads", "page"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.kv_format not in KV_FORMATS:
            raise ValueError(f"kv_format: expected one of {KV_FORMATS}, got {self.kv_format!r}")
        if self.q_format not in Q_FORMATS:
            raise ValueError(f"q_format: expected one of {Q_FORMATS}, got {self.q_format!r}")
        if self.q_format == "fp8" and self.kv_format == "bf16":
            raise ValueError("q_format: 'fp8' queries go with byte index-K rows (FP8, MXFP4), not kv_format 'bf16'")

    @property
    def blocks_per_request(self) -> int:
        return -(-self.n_comp // self.page)


def bench_cases(
    batches: Sequence[int] = BATCHES,
    n_comps: Sequence[int] = N_COMPS,
    kv_formats: Sequence[str] = KV_FORMATS,
    q_formats: Sequence[str] = Q_FORMATS,
) -> list[IndexerBenchCase]:
    """Every (row format, query format, b, n_comp) combination, smallest first within a format pair.

    FP8 queries are paired with byte rows only (FP8 and MXFP4); bf16 rows take bf16 queries.
    """
    for fmt in kv_formats:
        if fmt not in KV_FORMATS:
            raise ValueError(f"kv_formats: expected values in {KV_FORMATS}, got {fmt!r}")
    for fmt in q_formats:
        if fmt not in Q_FORMATS:
            raise ValueError(f"q_formats: expected values in {Q_FORMATS}, got {fmt!r}")
    pairs = [(kv, q) for kv in kv_formats for q in q_formats if q == "bf16" or kv != "bf16"]
    return [
        IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format=q) for kv, q in pairs for b in batches for n in n_comps
    ]


def row_bytes(kv_format: str) -> int:
    """Bytes of one index-K row: 128 e4m3 + fp32 scale, 64 bytes of e2m1 pairs + 4 block exponents, or 128 bf16."""
    if kv_format in ("fp8", "fp8-paged"):
        return FP8_ROW_BYTES
    if kv_format == "mxfp4-paged":
        return MXFP4_ROW_BYTES
    if kv_format == "bf16":
        return INDEX_DIM * 2
    raise ValueError(f"kv_format: expected one of {KV_FORMATS}, got {kv_format!r}")


def index_k_bytes(case: IndexerBenchCase) -> int:
    """Index-K bytes one call must read: every visible row of every request once."""
    return case.b * case.n_comp * row_bytes(case.kv_format)


def cache_bytes(case: IndexerBenchCase) -> int:
    """Bytes of the paged index-K cache holding the case (whole pages)."""
    return case.b * case.blocks_per_request * case.page * row_bytes(case.kv_format)


def triton_memory_bytes(case: IndexerBenchCase) -> int:
    """Device bytes the Triton provider needs: cache, inputs, workspace, outputs."""
    tokens = case.b * case.s_q
    ws = indexer_workspace_numel(case.b, case.s_q, case.heads, case.n_comp) * 4
    q = tokens * case.heads * INDEX_DIM * (1 if case.q_format == "fp8" else 2)
    w = tokens * case.heads * 4
    table = case.b * case.blocks_per_request * 4
    outputs = tokens * (case.topk + 1) * 4
    return cache_bytes(case) + q + w + table + ws + outputs


def torch_memory_bytes(case: IndexerBenchCase) -> int:
    """Device bytes the PyTorch baseline needs on top of the shared inputs: peak of its temporaries.

    FP8: bf16 codes and the bf16 dequantized rows; MXFP4: about five bf16-sized temporaries at the peak of
    :func:`dequantize_rows_bf16` (the unpacked codes, the two branches of the e2m1 value, the block scales spread over
    the values, the product); then bf16 logits ``[b, s_q·h, n]``, their fp32 copy and its fp32 product with the
    weights (all three alive at the weighted sum) and the fp32 scores.
    """
    rows = case.b * case.n_comp
    dequant = {"bf16": 0, "mxfp4-paged": 5}.get(case.kv_format, 2) * rows * INDEX_DIM * 2
    logits = rows * case.s_q * case.heads * 2
    weighted = 2 * rows * case.s_q * case.heads * 4
    scores = rows * case.s_q * 4
    return dequant + logits + weighted + scores


def fits(case: IndexerBenchCase, provider: str, free_bytes: int, headroom: float = MEMORY_HEADROOM) -> bool:
    """Whether ``provider`` ("triton" or "torch") can run ``case`` within ``headroom`` of ``free_bytes``."""
    need = triton_memory_bytes(case)
    if provider == "torch":
        need += torch_memory_bytes(case)
    elif provider != "triton":
        raise ValueError(f"provider: expected 'triton' or 'torch', got {provider!r}")
    return need <= headroom * free_bytes


def percentiles(samples_us: Sequence[float]) -> dict[str, float]:
    """Median, p20 and p80 (linear interpolation between order statistics) of timing samples in µs."""
    if len(samples_us) == 0:
        raise ValueError("samples_us: expected at least one sample")
    p20, median, p80 = spread_us([float(x) for x in samples_us])
    return {"median_us": median, "p20_us": p20, "p80_us": p80}


def make_record(
    case: IndexerBenchCase | None,
    provider: str,
    samples_us: Sequence[float],
    nbytes: int,
    env: dict[str, Any],
    copy_gbps: float | None,
) -> dict[str, Any]:
    """One benchmark row in the fixed schema (``case`` is None for the copy-bandwidth row)."""
    stats = percentiles(samples_us)
    gbps = nbytes / (stats["median_us"] * 1e-6) / 1e9
    shape = asdict(case) if case is not None else dict.fromkeys(f.name for f in fields(IndexerBenchCase))
    return {
        "kernel": "lightning_indexer" if case is not None else "copy",
        "provider": provider,
        **env,
        **shape,
        **stats,
        "reps": len(samples_us),
        "bytes": nbytes,
        "gbps": gbps,
        "copy_gbps": copy_gbps,
        "pct_of_copy_bw": None if not copy_gbps else 100.0 * gbps / copy_gbps,
    }


def torch_indexer_baseline(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor,
    block_table: torch.Tensor,
    page: int,
    topk: int,
    *,
    causal: bool = False,
) -> torch.Tensor:
    """The PyTorch way: ``topk(Σ_h w_h · ReLU(q_h · K))`` over contiguous rows, mapped to global slots.

    ``q_idx [b, s_q, h, 128]``, ``weights [b, s_q, h]`` fp32, ``rows [b, n, 128]`` (bf16, or dequantized FP8),
    ``block_table [b, ceil(n / page)]``. Every token sees all ``n`` rows; with ``causal``, token ``s`` sees the first
    ``n - (s_q - 1 - s)`` (as :func:`lightning_indexer` counts a request's ``n_comp``), the rest scoring −inf. Returns
    slots ``[b, s_q, min(topk, n)]`` int32 in score order (ties arbitrary).
    """
    b, s_q, h, d = q_idx.shape
    n = rows.shape[1]
    logits = torch.matmul(q_idx.reshape(b, s_q * h, d), rows.transpose(1, 2))  # [b, s_q·h, n]
    logits = torch.relu_(logits).view(b, s_q, h, -1)
    scores = (logits.float() * weights[..., None]).sum(dim=2)  # [b, s_q, n]
    if causal and s_q > 1:
        seen = n - (s_q - 1) + torch.arange(s_q, device=scores.device)  # rows token s sees
        scores = scores.masked_fill(torch.arange(n, device=scores.device) >= seen[:, None], float("-inf"))
    top = torch.topk(scores, k=min(topk, n), dim=-1).indices
    blk = torch.gather(block_table.long()[:, None, :].expand(b, s_q, -1), 2, top // page)
    return (blk * page + top % page).to(torch.int32)


def dequantize_rows_bf16(cache: torch.Tensor, layout: str = "rows") -> torch.Tensor:
    """FP8 rows ``[..., 132]`` or MXFP4 rows ``[..., 68]`` -> bf16 ``[..., 128]`` with torch ops (the baseline's
    dequantization).

    ``layout="paged"``: ``cache [..., page, width]`` holds each page's code rows, then its scales.
    """
    if cache.shape[-1] == MXFP4_ROW_BYTES:
        if layout != "paged":
            raise ValueError(f"layout: MXFP4 rows are benchmarked in the 'paged' layout, got {layout!r}")
        lead, page = cache.shape[:-2], cache.shape[-2]
        flat = cache.reshape(*lead, page * MXFP4_ROW_BYTES)
        packed = flat[..., : page * MXFP4_CODE_BYTES].reshape(*lead, page, MXFP4_CODE_BYTES)
        exps = flat[..., page * MXFP4_CODE_BYTES :].reshape(*lead, page, INDEX_DIM // MXFP4_BLOCK)
        codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(*lead, page, INDEX_DIM)
        mag = codes & 7
        # e2m1 magnitude: m · 0.5 for codes 0 and 1, else 2^(m // 2 - 1) · (1 + (m % 2) / 2)
        value = torch.where(
            mag < 2,
            mag.to(torch.bfloat16) * 0.5,
            torch.exp2((mag >> 1).to(torch.bfloat16) - 1) * (1 + (mag & 1).to(torch.bfloat16) * 0.5),
        )
        value = torch.where(codes >= 8, -value, value)
        scale = torch.exp2(exps.to(torch.bfloat16) - 127).repeat_interleave(MXFP4_BLOCK, dim=-1)
        return value * scale
    if layout == "paged":
        lead, page = cache.shape[:-2], cache.shape[-2]
        flat = cache.reshape(*lead, page * FP8_ROW_BYTES)
        codes = flat[..., : page * INDEX_DIM].reshape(*lead, page, INDEX_DIM).view(torch.float8_e4m3fn)
        scale = flat[..., page * INDEX_DIM :].contiguous().view(torch.float32).reshape(*lead, page, 1)
        return codes.to(torch.bfloat16) * scale.to(torch.bfloat16)
    codes = cache[..., :INDEX_DIM].view(torch.float8_e4m3fn).to(torch.bfloat16)
    scale = cache[..., INDEX_DIM:].contiguous().view(torch.float32)
    return codes * scale.to(torch.bfloat16)


def _environment() -> dict[str, Any]:
    import triton

    sha = source_revision()
    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "git_sha": sha,
    }


def run_case(
    case: IndexerBenchCase,
    data: dict[str, torch.Tensor],
    ws: torch.Tensor,
    out: tuple[torch.Tensor, torch.Tensor],
    **extra: Any,
) -> object:
    """One ``lightning_indexer`` call on a case filled by :func:`_fill_case`, into ``out`` with workspace ``ws``
    (``extra``: further keyword arguments, e.g. ``select``)."""
    return lightning_indexer(
        data["q"],
        data["w"],
        data["cache"],
        data["table"],
        data["n_comp"],
        case.topk,
        max_n_comp=case.n_comp,
        out=out,
        workspace=ws,
        index_k_layout="paged" if case.kv_format.endswith("-paged") else "rows",
        **extra,
    )


def run_torch_case(case: IndexerBenchCase, data: dict[str, torch.Tensor]) -> torch.Tensor:
    """The PyTorch baseline on a case filled by :func:`_fill_case`: the rows the Triton provider sees (each request's
    first ``n_comp``, token ``s`` of ``s_q`` the first ``n_comp - (s_q - 1 - s)``), dequantized to bf16 first."""
    paged = case.kv_format.endswith("-paged")
    # request r owns consecutive blocks: its rows are one view (pages kept whole for the page-split layout)
    rows = data["cache"].view(case.b, case.blocks_per_request, case.page, -1)
    if not paged:
        rows = rows.view(case.b, case.blocks_per_request * case.page, -1)
    if case.kv_format != "bf16":
        rows = dequantize_rows_bf16(rows, "paged" if paged else "rows")
    rows = rows.reshape(case.b, case.blocks_per_request * case.page, INDEX_DIM)[:, : case.n_comp]
    q = data["q"].to(torch.bfloat16)  # FP8 queries: the torch way dequantizes them too
    return torch_indexer_baseline(q, data["w"], rows, data["table"], case.page, case.topk, causal=True)


def _fill_case(
    case: IndexerBenchCase, generator: torch.Generator, device: str | torch.device = "cuda"
) -> dict[str, torch.Tensor]:
    """Random inputs on ``device`` (``generator``'s); request r owns blocks [r·blocks, (r+1)·blocks) so rows are also
    contiguous."""
    dev = torch.device(device)
    blocks = case.blocks_per_request
    q = torch.randn(case.b, case.s_q, case.heads, INDEX_DIM, device=dev, dtype=torch.bfloat16, generator=generator)
    if case.q_format == "fp8":
        q = (q * 64).to(torch.float8_e4m3fn)  # a per-token scale would be folded into the weights
    w = torch.randn(case.b, case.s_q, case.heads, device=dev, generator=generator) * (INDEX_DIM * case.heads) ** -0.5
    table = torch.arange(case.b * blocks, device=dev, dtype=torch.int32).view(case.b, blocks)
    fp8 = case.kv_format != "bf16"
    layout = "paged" if case.kv_format.endswith("-paged") else "rows"
    fmt = "mxfp4" if case.kv_format.startswith("mxfp4") else "fp8"
    width = row_bytes(case.kv_format) if fp8 else INDEX_DIM
    dtype = torch.uint8 if fp8 else torch.bfloat16
    cache = torch.empty(case.b * blocks, case.page, width, device=dev, dtype=dtype)
    step = max(1, (1 << 22) // case.page)  # fill 4M rows at a time to bound temporaries
    for lo in range(0, cache.shape[0], step):
        part = torch.randn(min(step, cache.shape[0] - lo), case.page, INDEX_DIM, device=dev, generator=generator)
        cache[lo : lo + part.shape[0]] = quantize_index_k(part, layout=layout, fmt=fmt) if fp8 else part.bfloat16()
    n_comp = torch.full((case.b,), case.n_comp, device=dev, dtype=torch.int32)
    return {"q": q, "w": w, "table": table, "cache": cache, "n_comp": n_comp}


def copy_record(reps: int, env: dict[str, Any]) -> dict[str, Any]:
    """The copy-bandwidth ceiling as a benchmark row (``case`` None): up to ``COPY_BYTES`` copied device to device,
    at most a fifth of the free memory; the same copy and timing as the sparse-decode benchmark's ceiling (eager
    calls, L2 not flushed: the copy is many times the L2)."""
    free, _ = torch.cuda.mem_get_info()
    copy_bytes = min(COPY_BYTES, int(free * 0.2))
    return make_record(None, "copy", copy_samples_us(copy_bytes, reps), 2 * copy_bytes, env, None)


def run_indexer_bench(
    out_json_path: str | Path,
    *,
    cases: Sequence[IndexerBenchCase] | None = None,
    reps: int = 30,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Measure every case (default :func:`bench_cases`) for the Triton and PyTorch providers; write JSON; return rows.

    Needs a CUDA device. The first row is the copy-bandwidth ceiling; each case row carries ``pct_of_copy_bw``.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("run_indexer_bench needs a CUDA device")
    if reps < MIN_REPS:
        raise ValueError(f"reps: expected at least {MIN_REPS} samples per provider, got {reps}")
    out_path = Path(out_json_path)
    env = _environment()
    copy_row = copy_record(reps, env)
    copy_gbps = float(copy_row["gbps"])
    records: list[dict[str, Any]] = [copy_row]
    generator = torch.Generator(device="cuda")
    generator.manual_seed(seed)
    for case in cases if cases is not None else bench_cases():
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info()
        if not fits(case, "triton", free):
            print(f"skip {case}: needs {triton_memory_bytes(case) / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
            continue
        data = _fill_case(case, generator)
        nbytes = index_k_bytes(case)
        cfg = choose_config(
            case.b,
            case.s_q,
            case.heads,
            case.n_comp,
            kv_fp8=case.kv_format != "bf16",
            topk=case.topk,
            kv_fp4=case.kv_format.startswith("mxfp4"),
        )
        ws = torch.empty(
            indexer_workspace_numel(case.b, case.s_q, case.heads, case.n_comp),
            dtype=torch.int32,
            device="cuda",
        )
        out = (
            torch.empty(case.b, case.s_q, case.topk, dtype=torch.int32, device="cuda"),
            torch.empty(case.b, case.s_q, dtype=torch.int32, device="cuda"),
        )

        def run_triton(
            case: IndexerBenchCase = case,
            data: dict[str, torch.Tensor] = data,
            ws: torch.Tensor = ws,
            out: tuple[torch.Tensor, torch.Tensor] = out,
        ) -> object:
            return run_case(case, data, ws, out)

        samples = timing_samples_us(run_triton, reps, graph=True)
        row = make_record(case, "triton", samples, nbytes, env, copy_gbps)
        row["config"] = {
            "select": cfg.select,
            "rows_per_program": cfg.rows_per_program,
            "chunk": cfg.chunk,
            "s_block": cfg.s_block,
            "block_n": cfg.block_n,
            "num_warps": cfg.num_warps,
        }
        records.append(row)
        del ws, out
        torch.cuda.empty_cache()
        if fits(case, "torch", free):  # free as measured before this case's inputs were allocated

            def run_torch(case: IndexerBenchCase = case, data: dict[str, torch.Tensor] = data) -> object:
                return run_torch_case(case, data)

            samples = timing_samples_us(run_torch, reps, graph=True)
            records.append(make_record(case, "torch", samples, nbytes, env, copy_gbps))
        else:
            print(f"skip torch baseline for {case}: needs {torch_memory_bytes(case) / 2**30:.1f} GiB more")
        del data
        out_path.write_text(json.dumps(records, indent=1))  # keep partial results if a later case fails
    out_path.write_text(json.dumps(records, indent=1))
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m wavemla.tools.bench_indexer OUT.json [--reps N]``: the whole grid on the current GPU."""
    from wavemla.cli import output_file_problem, summary

    parser = argparse.ArgumentParser(prog="python -m wavemla.tools.bench_indexer", description=summary(__doc__))
    parser.add_argument("out", metavar="OUT.json", help="write the copy ceiling and every case's rows here")
    parser.add_argument(
        "--reps", type=int, default=30, help=f"timed replays per provider, at least {MIN_REPS} (default 30)"
    )
    args = parser.parse_args(argv)
    if args.reps < MIN_REPS:
        parser.error(f"--reps: expected at least {MIN_REPS}, got {args.reps}")
    problem = output_file_problem("OUT.json", args.out)  # written after the whole grid has run
    if problem is not None:
        parser.error(problem)
    if not torch.cuda.is_available():
        parser.exit(2, f"{parser.prog}: needs a CUDA GPU\n")
    for row in run_indexer_bench(args.out, reps=args.reps):
        print(
            f"{row['provider']:6s} b={row['b']} n={row['n_comp']} rows {row['kv_format']} q {row['q_format']}: "
            f"{row['median_us']:.1f} us, {row['gbps']:.0f} GB/s"
            + (f" ({row['pct_of_copy_bw']:.0f}% of copy)" if row["pct_of_copy_bw"] is not None else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
