"""Kernel timeline of one lightning-indexer call per select path: each kernel's start and end (µs from the call's
first kernel) and its duration, from torch.profiler over CUDA-graph replays of the call, each behind a 256 MB L2
flush, median of 5; then the graph-replayed call timed as the benchmarks do (L2 flushed, median of 15). The listed
path also runs with its dependent launch off (``pdl-off``), to show what launching the score kernel behind the
sample kernel overlaps. FP8 rows in the page-split layout with FP8 queries, top-512, s_q 1.

    PYTHONPATH=src python3 benchmarks/experiments/idx_listed_timeline.py 32:32768 1:32768 64:32768
"""

from __future__ import annotations

import functools
import statistics
import sys
from collections import defaultdict
from unittest import mock

import torch

import wavemla.kernels.gdc as gdc
from wavemla.kernels.indexer import _REPLAYS, indexer_workspace_numel
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, run_case

FLUSH = 256 << 20


def timeline(call, flush: torch.Tensor, calls: int = 5) -> list[tuple[str, float, float]]:
    """(kernel, start, end) in µs from the first kernel of the call, medians over ``calls`` flushed replays."""
    per: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.add_(1)
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = [e for e in kernels if "elementwise" not in e.name and "vectorized" not in e.name]
    kernels.sort(key=lambda e: e.time_range.start)
    n = len(kernels) // calls
    for i in range(calls):
        group = kernels[i * n : (i + 1) * n]
        t0 = group[0].time_range.start
        for j, e in enumerate(group):
            per[(j, e.name)].append((e.time_range.start - t0, e.time_range.end - t0))
    return [
        (name.removeprefix("_indexer_")[:28], statistics.median(s for s, _ in v), statistics.median(e for _, e in v))
        for (_, name), v in sorted(per.items())
    ]


def main(argv: list[str]) -> int:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    flush = torch.empty(FLUSH // 4, dtype=torch.int32, device="cuda")
    for spec in argv:
        b, n = (int(x) for x in spec.split(":"))
        case = IndexerBenchCase(b=b, n_comp=n, kv_format="fp8-paged", q_format="fp8")
        data = _fill_case(case, gen)
        ws = torch.empty(indexer_workspace_numel(b, 1, 64, n), dtype=torch.int32, device="cuda")
        out = (torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
               torch.empty(b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip
        for path in ("spread", "listed", "pdl-off"):
            select = "listed" if path == "pdl-off" else path
            ctx = mock.patch.object(gdc, "enabled", lambda _d: False) if path == "pdl-off" else mock.patch.dict({})
            _REPLAYS.clear()  # a recorded launch keeps its dependent-launch setting
            with ctx:
                call = functools.partial(run_case, case, data, ws, out, select=select)
                call()
                rows = timeline(call, flush)
                graph = statistics.median(timing_samples_us(call, 15, graph=True))
            parts = ", ".join(f"{k} {s:.1f}-{e:.1f} ({e - s:.1f})" for k, s, e in rows)
            print(f"b={b} n={n} {path:8s} graph {graph:6.1f} us | {parts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
