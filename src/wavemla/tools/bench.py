"""Time sparse decode at DeepSeek-V4 shapes (or, with ``--dense``, paged dense decode at DeepSeek-V3 shapes) on the
GPU: CUDA-graph replay after a warm-up under load (``WARM_MS``), L2 flushed, medians, % of roofline.

Every record carries its model: the bytes that must move (each distinct KV row a request gathers, q, out, indices)
and the FLOPs (``2·h·(512+512)`` per valid row per query token), the ceilings measured in the same run (device copy
GB/s counting read + write, bf16 GEMM TFLOP/s), and, run on an H200, FlashMLA's time for the same inputs on an H200
where one was measured (none on other cards: the ratio would compare two cards). Shapes follow FlashMLA's MODEL1
benchmark: a 128-row sliding window at page 256 plus 512 CSA rows at page 64 (picked from a 2048-row pool) or 1024
HCA rows at page 2.

Dense mode (:func:`bench_dense`) times ``dense_mla_decode`` over batch x context x heads x {uniform, skewed
lengths} x {bf16, FP8 V3.2} at page 64, d_qk 576; it reports µs, GB/s over the bytes that must move (every key row of
every request once, q, the block-table entries used, the lengths, out and lse) and the percentage of the copy
bandwidth measured in the same run, plus the scheduler, split and combine launches timed alone and the call with an
earlier call's schedule reused (the later layers of one decode step).

Example::

    wavemla bench --mode csa --batch 1 64 128 --heads 64 --s-q 1 --json out.json
    wavemla bench --dense --batch 32 128 --seqlen 4096 --heads 16 --kv-formats bf16 --json dense.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

# FlashMLA (deepseek-ai/FlashMLA) sparse FP8 decode on an H200, µs, h=64, s_q=1, same shapes and inputs.
FLASHMLA_H200_US: dict[tuple[str, int, int, int], float] = {
    **{
        ("csa", 64, 1, b): t
        for b, t in [
            (1, 12.1),
            (8, 14.4),
            (32, 22.4),
            (48, 31.1),
            (64, 43.8),
            (80, 41.0),
            (96, 43.0),
            (128, 45.8),
            (148, 69.3),
            (256, 88.7),
        ]
    },
    **{("hca", 64, 1, b): t for b, t in [(1, 14.2), (32, 31.8), (64, 59.7), (128, 73.3), (256, 141.7)]},
    # cliffs quoted for FlashMLA: s_q=2 and h=128 at b=64/96
    ("csa", 64, 2, 64): 45.5,
    ("csa", 64, 2, 96): 84.5,
    ("csa", 128, 1, 64): 53.4,
    ("csa", 128, 1, 96): 93.2,
}

# the device preset the anchors were measured on (DeviceSpec.name): elsewhere a ratio would compare two cards
FLASHMLA_ANCHOR_GPU = "h200"


def flashmla_anchor_us(mode: str, h: int, s_q: int, batch: int, fp8: bool, gpu: str) -> float | None:
    """FlashMLA's time for this shape (µs) where one was measured and ``gpu`` (a ``DeviceSpec.name``) is the card it
    was measured on, else None: its sparse decode reads FP8 caches only, and its anchors are H200 times."""
    if not fp8 or gpu != FLASHMLA_ANCHOR_GPU:
        return None
    return FLASHMLA_H200_US.get((mode, h, s_q, batch))


MODES = {
    # mode: (topk, page, extra_topk, extra_page, extra_pool)
    "swa": (128, 256, 0, 64, 0),
    "csa": (128, 256, 512, 64, 2048),
    "hca": (128, 256, 1024, 2, 1024),
}


@dataclass
class Ceilings:
    copy_gbps: float
    gemm_tflops: float


@dataclass
class Record:
    provider: str
    mode: str
    batch: int
    s_q: int
    h_q: int
    fp8: bool
    config: str
    units_per_part: int
    programs: int
    combine: bool
    median_us: float
    p20_us: float
    p80_us: float
    flops: float
    bytes: float
    tflops: float
    gbps: float
    roofline_us: float
    pct_roofline: float
    flashmla_us: float | None
    ratio_to_flashmla: float | None
    predicted_us: float
    # a spread plan's units of whole tokens a program runs after its units_per_part of the leftover tokens'
    whole_units: int = 0
    # a padded plan's units a token occupies (its tiles, then empty ones up to a multiple of units_per_part)
    token_units: int = 0


SPARSE_BATCHES = [1, 8, 32, 48, 64, 80, 96, 128, 148, 256]
DENSE_BATCHES = [1, 8, 32, 64, 128]
DENSE_SEQLENS = [1024, 4096, 16384, 65536]
DENSE_HEADS = [16, 64, 128]
DENSE_PAGE = 64
MAX_HEADS = 128  # both decodes take h_q 1..128
MAX_SPARSE_S_Q = 4  # the sparse decode's s_q 1..4 (the dense decode takes any)


def _positive(text: str) -> int:
    """An argument that counts something (a batch, heads, keys, replays): an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _kernel_config(text: str) -> str:
    """A forced kernel config ``BLOCK_HxBLOCK_NxWARPSxSTAGES`` (four integers >= 1), returned as given."""
    parts = text.split("x")
    if len(parts) != 4 or not all(p.isdecimal() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"expected BLOCK_HxBLOCK_NxWARPSxSTAGES (e.g. 32x32x8x1), got {text!r}")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dense", action="store_true", help="paged dense decode (DeepSeek-V3 shapes), not sparse")
    parser.add_argument(
        "--mode", nargs="+", default=None, choices=sorted(MODES), help="sparse: layer kinds (default: csa hca)"
    )
    parser.add_argument(
        "--batch", nargs="+", type=_positive, default=None,
        help=f"batch sizes (default: sparse {SPARSE_BATCHES}, dense {DENSE_BATCHES})",
    )  # fmt: skip
    parser.add_argument(
        "--heads", nargs="+", type=_positive, default=None,
        help=f"query heads, at most {MAX_HEADS} (default: sparse [64], dense {DENSE_HEADS})",
    )  # fmt: skip
    parser.add_argument(
        "--seqlen",
        nargs="+",
        type=_positive,
        default=None,
        help=f"dense: keys per request (s_k; default {DENSE_SEQLENS})",
    )
    parser.add_argument(
        "--lengths", nargs="+", default=None, choices=["uniform", "skewed"],
        help="dense: every request at s_k, or one request in 8 at s_k and the rest at s_k/32 (default: both)",
    )  # fmt: skip
    parser.add_argument(
        "--kv-formats", nargs="+", default=None, choices=["bf16", "fp8", "fp8-tensor"],
        help="dense: bf16 rows, the FP8 V3.2 layout, and/or per-tensor FP8 rows (576 codes, descale_k); default: "
        "bf16 fp8",
    )  # fmt: skip
    parser.add_argument(
        "--s-q",
        nargs="+",
        type=_positive,
        default=[1],
        help=f"query tokens per request (sparse: at most {MAX_SPARSE_S_Q})",
    )
    parser.add_argument("--bf16", action="store_true", help="sparse: bf16 row caches instead of FP8 MODEL1")
    parser.add_argument(
        "--configs",
        nargs="*",
        type=_kernel_config,
        default=[],
        help="kernel configs to force, as BLOCK_HxBLOCK_NxWARPSxSTAGES (e.g. 32x32x8x1); default: the planner's",
    )
    parser.add_argument("--reps", type=_positive, default=50, help="timed replays per point (median reported)")
    parser.add_argument("--json", help="write records and ceilings to this file")
    parser.add_argument("--label", default="", help="free text stored in the JSON (e.g. the git SHA)")


def measure_ceilings() -> Ceilings:
    """Device copy bandwidth (read + write bytes) and bf16 GEMM rate, each the median of timed repeats."""
    import torch

    n = 1 << 30
    copy_us = statistics.median(copy_samples_us(n, reps=20))
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    gemm_us = _median_us(lambda: torch.mm(a, b), reps=10, flush=False)
    return Ceilings(copy_gbps=2 * n / copy_us / 1e3, gemm_tflops=2 * m**3 / gemm_us / 1e6)


_FLUSH: Any = None

# Before its timed calls a call runs untimed, behind the same flush, for at least WARM_MS of wall time and
# WARM_CALLS calls. With 3 untimed calls, on an H100 SXM the calls timed after a benchmark built new inputs ran at
# one of two speeds: 259-264 µs for the first 20-35 calls (about 15-25 ms of them), 226-230 µs after (bf16 h = 16,
# b = 32, 16K keys; 944 against 808 µs at b = 128; 153.6 against 140.7 µs for the indexer at b = 64, 32K rows).
# 50 ms of GEMMs, a 1 s sleep or five reads of the 2.4 GB pool before timing did not change it; the call itself
# under load did (benchmarks/experiments/dense_first_case.py, idx_first_case.py,
# 2026-12-06-h100-first-case-fc34cf0.log). Calls bound by their MMAs go the other way, 6-13% slower warm than cold
# (128 heads: 1171 µs cold, 1247-1322 after; warm_ab.py, 2026-12-06-h100-warm-ab-17aa683.log): timed warm, as a
# busy server runs them.
WARM_MS = 50.0
WARM_CALLS = 10


def _flush_l2() -> None:
    import torch

    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    _FLUSH.zero_()


def _median_us(fn: Any, reps: int, flush: bool = True, graph: bool = False) -> float:
    return timings_us(fn, reps, flush, graph)[1]


def copy_samples_us(nbytes: int, reps: int) -> list[float]:
    """Sorted timing samples (µs) of a device-to-device copy of ``nbytes`` (which reads and writes ``2·nbytes``)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    return timing_samples_us(lambda: dst.copy_(src), reps, flush=False)


def timings_us(fn: Any, reps: int, flush: bool = True, graph: bool = False) -> tuple[float, float, float]:
    """(p20, median, p80) µs of ``fn`` — replayed from a CUDA graph when ``graph`` — with L2 flushed before each."""
    return spread_us(timing_samples_us(fn, reps, flush, graph))


def spread_us(samples: list[float]) -> tuple[float, float, float]:
    """(p20, median, p80) of timing samples, the quantiles linear between order statistics (numpy's default, as in
    ``bench_indexer.percentiles``): of 5 samples p80 lies between the 4th and the 5th, not at the maximum."""
    if not samples:
        raise ValueError("samples: expected at least one timing sample")
    times = sorted(samples)

    def quantile(q: float) -> float:
        pos = q * (len(times) - 1)
        lo = int(pos)
        return times[lo] + (times[min(lo + 1, len(times) - 1)] - times[lo]) * (pos - lo)

    return quantile(0.2), statistics.median(times), quantile(0.8)


def timing_samples_us(fn: Any, reps: int, flush: bool = True, graph: bool = False) -> list[float]:
    """Sorted µs of ``reps`` calls of ``fn`` (one CUDA-graph replay of it when ``graph``), L2 flushed before each,
    after untimed calls for at least ``WARM_MS`` and ``WARM_CALLS``."""
    import torch

    run = fn
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        run = g.replay
    torch.cuda.synchronize()
    warm_start, warm_calls = time.perf_counter(), 0
    while warm_calls < WARM_CALLS or (time.perf_counter() - warm_start) * 1e3 < WARM_MS:
        if flush:
            _flush_l2()
        run()
        torch.cuda.synchronize()
        warm_calls += 1
    times = []
    for _ in range(reps):
        if flush:
            _flush_l2()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times


def traffic(inputs: dict[str, Any]) -> tuple[float, float]:
    """(FLOPs, bytes) one call must do: every valid row per query token (the leading ``topk_length`` entries of a
    list, where given); every distinct row per request once, at its cache's bytes a row (MODEL1 584, V3.2 656, a
    row cache's width times its element size); q in, out (512 wide) and lse written, the index lists read.
    ``2·h·(d_qk + 512)`` FLOPs per valid row per query token."""
    import torch

    q = inputs["q"]
    b, s_q, h, d = q.shape
    flops = 0.0
    nbytes = float(q.numel() * q.element_size() + b * s_q * h * (512 * q.element_size() + 4))
    for key, cache_key, length_key in (
        ("indices", "kv_cache", "topk_length"),
        ("extra_indices", "extra_kv_cache", "extra_topk_length"),
    ):
        idx = inputs.get(key)
        if idx is None:
            continue
        cache = inputs[cache_key]
        row_bytes = cache.shape[-1] * cache.element_size()  # byte caches: 584 or 656; rows: 2·d
        slots = cache.shape[0] * cache.shape[1]
        valid = (idx >= 0) & (idx < slots)
        length = inputs.get(length_key)
        if length is not None:
            valid &= torch.arange(idx.shape[-1], device=idx.device) < length.to(idx.device).view(b, 1, 1)
        flops += 2.0 * h * (d + 512) * float(valid.sum())
        nbytes += idx.numel() * 4
        for r in range(b):
            rows = idx[r][valid[r]]
            nbytes += float(torch.unique(rows).numel()) * row_bytes
    return flops, nbytes


def bench(
    modes: list[str],
    batches: list[int],
    heads: list[int],
    s_qs: list[int],
    fp8: bool,
    configs: list[str],
    reps: int,
    ceilings: Ceilings,
    log: Any = print,
) -> list[Record]:
    import torch

    from wavemla import config, get_mla_metadata, sparse_mla_decode
    from wavemla.device import DeviceSpec
    from wavemla.testing import make_sparse_decode_inputs

    gpu = DeviceSpec.from_torch()
    if gpu.name != FLASHMLA_ANCHOR_GPU:
        log(f"FlashMLA anchors are {FLASHMLA_ANCHOR_GPU} times: none shown on this {gpu.display_name}")
    records: list[Record] = []
    forced = [None] + [c for c in configs] if configs else [None]
    for mode in modes:
        topk, page, xtopk, xpage, xpool = MODES[mode]
        for h in heads:
            for s_q in s_qs:
                full = make_sparse_decode_inputs(
                    batch=max(batches), s_q=s_q, h_q=h, topk=topk, page=page, extra_topk=xtopk, extra_page=xpage,
                    extra_pool=xpool or None, fp8=fp8, device="cuda", seed=0,
                )  # fmt: skip
                for b in batches:
                    per_request = ("q", "indices", "extra_indices")
                    inputs = {k: (v[:b] if v is not None and k in per_request else v) for k, v in full.items()}
                    kwargs = {k: v for k, v in inputs.items() if v is not None}
                    flops, nbytes = traffic(inputs)
                    floor_us = max(flops / (ceilings.gemm_tflops * 1e6), nbytes / (ceilings.copy_gbps * 1e3))
                    for cfg in forced:
                        over: dict[str, Any] = {}
                        if cfg:
                            bh, bn, nw, ns = (int(x) for x in cfg.split("x"))
                            over = dict(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw,
                                        WAVEMLA_NUM_STAGES=ns)  # fmt: skip
                        with config.override(**over):
                            meta, _ = get_mla_metadata()
                            p20, med, p80 = timings_us(
                                lambda kwargs=kwargs, meta=meta: sparse_mla_decode(**kwargs, metadata=meta),
                                reps=reps,
                                graph=True,
                            )
                        pl = meta.plan
                        assert pl is not None
                        anchor = flashmla_anchor_us(mode, h, s_q, b, fp8, gpu.name)
                        c = pl.config
                        rec = Record(
                            provider="wavemla",
                            mode=mode,
                            batch=b,
                            s_q=s_q,
                            h_q=h,
                            fp8=fp8,
                            config=f"{c.block_h}x{c.block_n}x{c.num_warps}x{c.num_stages}",
                            units_per_part=pl.units_per_part,
                            whole_units=pl.whole_units,
                            token_units=pl.token_units,
                            programs=pl.programs,
                            combine=pl.needs_combine,
                            median_us=med,
                            p20_us=p20,
                            p80_us=p80,
                            flops=flops,
                            bytes=nbytes,
                            tflops=flops / med / 1e6,
                            gbps=nbytes / med / 1e3,
                            roofline_us=floor_us,
                            pct_roofline=100.0 * floor_us / med,
                            flashmla_us=anchor,
                            ratio_to_flashmla=(med / anchor) if anchor else None,
                            predicted_us=pl.predicted_us,
                        )
                        records.append(rec)
                        log(format_record(rec))
                    torch.cuda.empty_cache()
    return records


def format_record(r: Record) -> str:
    anchor = ""
    if r.flashmla_us and r.ratio_to_flashmla:
        anchor = f" | FlashMLA {r.flashmla_us:7.1f} {r.ratio_to_flashmla:5.2f}x"
    from wavemla.plan import tiles_label

    upp = tiles_label(r.units_per_part, r.whole_units, r.token_units)
    return (
        f"{r.mode:4s} h{r.h_q:<4d}s{r.s_q} b{r.batch:<4d} {r.config:10s} upp={upp:<4s} "
        f"progs={r.programs:<5d}{'C' if r.combine else ' '} {r.median_us:8.1f}us {r.tflops:6.1f}TF {r.gbps:7.1f}GB/s "
        f"{r.pct_roofline:5.1f}%roof{anchor}"
    )


@dataclass
class DenseRecord:
    provider: str
    mode: str
    kv_format: str
    batch: int
    s_q: int
    h_q: int
    s_k: int
    lengths: str
    total_keys: int
    config: str
    parts: int
    programs: int
    median_us: float
    p20_us: float
    p80_us: float
    schedule_us: float
    split_us: float
    combine_us: float
    flops: float
    bytes: float
    tflops: float
    gbps: float
    pct_copy: float
    predicted_us: float
    # the call with the schedule of an earlier call reused (reuse_schedule=True): what a model's later layers pay in
    # one decode step, FlashMLA's metadata contract; pct_copy_reused is its share of the copy ceiling
    reused_us: float = 0.0
    pct_copy_reused: float = 0.0


def dense_lengths(batch: int, s_k: int, kind: str) -> list[int]:
    """Keys per request: ``uniform`` gives every request ``s_k``; ``skewed`` gives one request in 8 (the first,
    ninth, ...) ``s_k`` and the others ``s_k // 32`` (at least 1), the long-tail mix a serving batch has."""
    if kind == "uniform":
        return [s_k] * batch
    if kind == "skewed":
        return [s_k if i % 8 == 0 else max(1, s_k // 32) for i in range(batch)]
    raise ValueError(f"kind: expected 'uniform' or 'skewed', got {kind!r}")


def dense_traffic(
    lengths: list[int], s_q: int, h_q: int, d_qk: int, fp8: bool, page: int, fp8_tensor: bool = False
) -> tuple[float, float]:
    """(FLOPs, bytes) a dense decode must do: every key row of every request read once (656 B FP8 V3.2, 576 B
    per-tensor FP8 with ``fp8_tensor``, 2·d_qk B rows), the block-table entries those keys use, each request's
    length, q (bf16) in, out (bf16) and lse (fp32) written; ``2·s_q·h·(d_qk + 512)`` FLOPs per key (causal masking
    ignored)."""
    row = (576 if fp8_tensor else 656) if fp8 else 2 * d_qk
    keys = float(sum(max(n, 0) for n in lengths))
    b = len(lengths)
    pages = float(sum(-(-max(n, 0) // page) for n in lengths))
    nbytes = keys * row + pages * 4 + b * 4 + b * s_q * h_q * (2 * d_qk + 2 * 512 + 4)
    flops = 2.0 * s_q * h_q * (d_qk + 512) * keys
    return flops, nbytes


def dense_cases(
    batches: list[int], seqlens: list[int], heads: list[int], s_qs: list[int], kinds: list[str], formats: list[str]
) -> list[tuple[str, int, int, int, int, str]]:
    """The grid, ordered so that one cache per (format, s_k) serves every batch, head count and length mix:
    (format, s_k, h, s_q, batch, kind)."""
    return [(f, sk, h, sq, b, k) for f in formats for sk in seqlens for h in heads for sq in s_qs for b in batches
            for k in kinds if not (k == "skewed" and b == 1)]  # fmt: skip


def bench_dense(
    batches: list[int],
    seqlens: list[int],
    heads: list[int],
    s_qs: list[int],
    kinds: list[str],
    formats: list[str],
    configs: list[str],
    reps: int,
    ceilings: Ceilings,
    log: Any = print,
) -> list[DenseRecord]:
    """Time ``dense_mla_decode`` (scheduler + split + combine, one CUDA graph) on every case of :func:`dense_cases`,
    the same with the schedule reused (``reuse_schedule=True``), and each launch alone. ``configs`` forces tile
    configurations (``BLOCK_HxBLOCK_NxWARPSxSTAGES``) besides the planner's choice."""
    import torch

    from wavemla import config, dense_mla_decode, get_mla_metadata
    from wavemla.api import dense_partials
    from wavemla.kernels.combine import dense_decode_combine
    from wavemla.kernels.dense_decode import dense_decode_schedule, dense_decode_split, split_p
    from wavemla.testing import make_dense_decode_inputs

    records: list[DenseRecord] = []
    forced = [None, *configs]
    cache_key: tuple[str, int, int] | None = None
    full: dict[str, Any] = {}
    for fmt, s_k, h, s_q, b, kind in dense_cases(batches, seqlens, heads, s_qs, kinds, formats):
        fp8, tensor = fmt in ("fp8", "fp8-tensor"), fmt == "fp8-tensor"
        if cache_key != (fmt, s_k, s_q) or full["q"].shape[2] < h:
            full = {}
            torch.cuda.empty_cache()
            # one cache holding max(batches) requests of s_k keys; shorter lengths leave rows unread
            full = make_dense_decode_inputs(
                lengths=[s_k] * max(batches), s_q=s_q, h_q=max(heads), page=DENSE_PAGE, fp8="tensor" if tensor else fp8,
                device="cuda", seed=0,
            )  # fmt: skip
            cache_key = (fmt, s_k, s_q)
        lengths = dense_lengths(b, s_k, kind)
        inputs = {
            "q": full["q"][:b, :, :h].contiguous(),
            "k_cache": full["k_cache"],
            "block_table": full["block_table"][:b].contiguous(),
            "cache_seqlens": torch.tensor(lengths, dtype=torch.int32, device="cuda"),
        }
        if tensor:
            inputs["descale_k"] = full["descale_k"]
        flops, nbytes = dense_traffic(lengths, s_q, h, 576, fp8, DENSE_PAGE, tensor)
        for cfg in forced:
            over: dict[str, Any] = {}
            if cfg:
                bh, bn, nw, ns = (int(x) for x in cfg.split("x"))
                over = dict(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw, WAVEMLA_NUM_STAGES=ns)
            with config.override(**over):
                meta, _ = get_mla_metadata()
                p20, med, p80 = timings_us(
                    lambda inputs=inputs, meta=meta, s_q=s_q: dense_mla_decode(**inputs, causal=s_q > 1, metadata=meta),
                    reps=reps,
                    graph=True,
                )
                # the same metadata has scheduled these lengths: the later layers' call
                reused = timings_us(
                    lambda inputs=inputs, meta=meta, s_q=s_q: dense_mla_decode(
                        **inputs, causal=s_q > 1, metadata=meta, reuse_schedule=True
                    ),
                    reps=reps,
                    graph=True,
                )[1]
            pl = meta.dense_plan
            assert pl is not None and meta.lse_ws is not None
            assert meta.sched is not None and meta.req is not None
            out = torch.empty((b, s_q, h, 512), dtype=inputs["q"].dtype, device="cuda")
            lse = torch.empty((b, s_q, h), dtype=torch.float32, device="cuda")
            kv = inputs["k_cache"].view(torch.uint8) if fp8 else inputs["k_cache"]
            o_ws = dense_partials(meta, inputs["q"], fp8)
            c = pl.config
            phases: dict[str, Any] = {
                "schedule": lambda pl=pl, meta=meta, inputs=inputs: dense_decode_schedule(
                    cache_seqlens=inputs["cache_seqlens"], sched=meta.sched, req=meta.req,
                    max_seqlen=inputs["block_table"].shape[1] * DENSE_PAGE, num_parts=pl.num_parts,
                    segment_overhead=pl.segment_overhead, block_n=pl.config.block_n, cut_units=pl.cut_units),
                "split": lambda pl=pl, meta=meta, inputs=inputs, out=out, lse=lse, kv=kv, c=c, fp8=fp8, s_q=s_q,
                o_ws=o_ws: (
                    dense_decode_split(
                    q=inputs["q"], out=out, lse=lse, o_ws=o_ws, lse_ws=meta.lse_ws, kv=kv,
                    block_table=inputs["block_table"], cache_seqlens=inputs["cache_seqlens"], sched=meta.sched,
                    is_fp8=fp8, causal=s_q > 1, softmax_scale=576**-0.5, block_h=c.block_h, block_n=c.block_n,
                    num_warps=c.num_warps, num_stages=c.num_stages, num_parts=pl.num_parts,
                    p_ws=None if split_p(fp8, inputs["q"].dtype) else meta.p_ws, k_scale=inputs.get("descale_k"))),
                "combine": lambda meta=meta, out=out, lse=lse, o_ws=o_ws: dense_decode_combine(
                    out=out, lse=lse, o_ws=o_ws, lse_ws=meta.lse_ws, req=meta.req),
            }  # fmt: skip
            alone = {name: _median_us(fn, reps=max(5, reps // 2), graph=True) for name, fn in phases.items()}
            rec = DenseRecord(
                provider="wavemla",
                mode="dense",
                kv_format=fmt,
                batch=b,
                s_q=s_q,
                h_q=h,
                s_k=s_k,
                lengths=kind,
                total_keys=sum(lengths),
                config=str(c),
                parts=pl.num_parts,
                programs=pl.programs,
                median_us=med,
                p20_us=p20,
                p80_us=p80,
                schedule_us=alone["schedule"],
                split_us=alone["split"],
                combine_us=alone["combine"],
                flops=flops,
                bytes=nbytes,
                tflops=flops / med / 1e6,
                gbps=nbytes / med / 1e3,
                pct_copy=100.0 * nbytes / med / 1e3 / ceilings.copy_gbps,
                predicted_us=pl.predicted_us,
                reused_us=reused,
                pct_copy_reused=100.0 * nbytes / reused / 1e3 / ceilings.copy_gbps,
            )
            records.append(rec)
            log(format_dense_record(rec))
    return records


def format_dense_record(r: DenseRecord) -> str:
    return (
        f"dense {r.kv_format:10s} h{r.h_q:<4d}s{r.s_q} b{r.batch:<4d} sk{r.s_k:<6d} {r.lengths:7s} {r.config:10s} "
        f"parts={r.parts:<4d} {r.median_us:9.1f}us (sched {r.schedule_us:5.1f} split {r.split_us:8.1f} "
        f"comb {r.combine_us:6.1f}) {r.gbps:7.1f}GB/s {r.pct_copy:5.1f}%copy {r.tflops:6.1f}TF "
        f"| schedule reused {r.reused_us:9.1f}us {r.pct_copy_reused:5.1f}%copy"
    )


def environment() -> dict[str, Any]:
    import torch
    import triton

    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
    }


def refusal(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot be benchmarked as given, naming the option (None: they can): an option of the other
    decode, which would otherwise be ignored, or a value the decode call refuses only after the ceilings are
    measured."""
    if args.dense:
        other = {"--mode": args.mode, "--bf16": args.bf16 or None}
        hint = {"--mode": "the sparse decode's layer kinds", "--bf16": "the sparse decode's row caches (with --dense, "
                "--kv-formats bf16)"}  # fmt: skip
    else:
        other = {"--seqlen": args.seqlen, "--lengths": args.lengths, "--kv-formats": args.kv_formats}
        hint = dict.fromkeys(other, "an option of --dense")
    for name, value in other.items():
        if value is not None:
            return f"{name}: {hint[name]}; not an option of {'--dense' if args.dense else 'the sparse decode'}"
    if any(h > MAX_HEADS for h in args.heads or ()):
        return f"--heads: expected 1..{MAX_HEADS} query heads, got {max(args.heads)}"
    if not args.dense and max(args.s_q) > MAX_SPARSE_S_Q:
        return f"--s-q: the sparse decode takes 1..{MAX_SPARSE_S_Q} query tokens a request, got {max(args.s_q)}"
    return None


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with each option its decode's default where it was left out, and each value of a list once (in the
    order given: a value named twice would be timed and written twice)."""
    if args.dense:
        given = {"batch": args.batch or DENSE_BATCHES, "heads": args.heads or DENSE_HEADS,
                 "seqlen": args.seqlen or DENSE_SEQLENS, "lengths": args.lengths or ["uniform", "skewed"],
                 "kv_formats": args.kv_formats or ["bf16", "fp8"]}  # fmt: skip
    else:
        given = {"batch": args.batch or SPARSE_BATCHES, "heads": args.heads or [64],
                 "mode": args.mode or ["csa", "hca"]}  # fmt: skip
    given["s_q"] = args.s_q
    return argparse.Namespace(**{**vars(args), **{k: list(dict.fromkeys(v)) for k, v in given.items()}})


def run(args: argparse.Namespace) -> int:
    import torch

    from wavemla.cli import output_file_problem

    problem = refusal(args) or (None if args.json is None else output_file_problem("--json", args.json))
    if problem:
        print(f"wavemla bench: {problem}", file=sys.stderr)
        return 2
    args = resolve_args(args)
    if not torch.cuda.is_available():
        print("wavemla bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    ceilings = measure_ceilings()
    print(f"ceilings: copy {ceilings.copy_gbps:.0f} GB/s, bf16 GEMM {ceilings.gemm_tflops:.0f} TFLOP/s", flush=True)
    records: list[Any]
    if args.dense:
        records = bench_dense(
            args.batch, args.seqlen, args.heads, args.s_q, args.lengths,
            args.kv_formats, args.configs, args.reps, ceilings, log=lambda s: print(s, flush=True),
        )  # fmt: skip
    else:
        records = bench(
            args.mode, args.batch, args.heads, args.s_q, not args.bf16, args.configs,
            args.reps, ceilings, log=lambda s: print(s, flush=True),
        )  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"label": args.label, "env": environment(), "ceilings": asdict(ceilings),
                 "records": [asdict(r) for r in records]},
                f,
                indent=1,
            )  # fmt: skip
    return 0
