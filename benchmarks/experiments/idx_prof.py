"""Where lightning-indexer time goes: per-kernel device time (torch.profiler) and the graph-replayed total.

    PYTHONPATH=src python3 benchmarks/experiments/idx_prof.py 64:32768:fp8q 128:262144:bf16 64:32768:fp8:128,8,3
    PYTHONPATH=src python3 benchmarks/experiments/idx_prof.py --once 64:32768:fp8q     # one call (for ncu)

A spec is b:n_comp:format[:block_n,num_warps,num_stages[,chunk]]; format fp8qp = FP8 rows in the page-split layout
and float8_e4m3fn queries, fp8q = FP8 rows (per-row scales) and float8_e4m3fn queries,
fp8 = FP8 rows and bf16 queries, bf16 = bf16 rows and queries. The optional part replaces the score kernel's tile
choice (and the keys per select program).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import sys
from collections import defaultdict

import torch

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, index_k_bytes, run_case

_choose = ix.choose_config


def parse(spec: str) -> tuple[IndexerBenchCase, tuple[int, ...] | None]:
    parts = spec.split(":")
    b, n, fmt = int(parts[0]), int(parts[1]), parts[2]
    tile = tuple(int(x) for x in parts[3].split(",")) if len(parts) > 3 else None
    kv, q = {"fp8qp": ("fp8-paged", "fp8"), "fp8q": ("fp8", "fp8"), "fp8": ("fp8", "bf16"), "bf16": ("bf16", "bf16")}[
        fmt
    ]
    return IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format=q), tile  # type: ignore[return-value]


def main(argv: list[str]) -> None:
    once = argv[:1] == ["--once"]
    specs = argv[1:] if once else argv
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    for spec in specs:
        case, tile = parse(spec)

        def choose(*a, _tile=tile, **k):
            cfg = _choose(*a, **k)
            if _tile is None:
                return cfg
            cfg = dataclasses.replace(cfg, block_n=_tile[0], num_warps=_tile[1], num_stages=_tile[2])
            if len(_tile) > 3:
                cfg = dataclasses.replace(cfg, chunk=_tile[3], block_sel=min(1024, _tile[3]))
            return cfg

        ix.choose_config = choose
        data = _fill_case(case, gen)
        ws = torch.empty(ix.indexer_workspace_numel(case.b, 1, 64, case.n_comp), dtype=torch.int32, device="cuda")

        out = (
            torch.empty(case.b, case.s_q, case.topk, dtype=torch.int32, device="cuda"),
            torch.empty(case.b, case.s_q, dtype=torch.int32, device="cuda"),
        )
        call = functools.partial(run_case, case, data, ws, out)

        call()
        torch.cuda.synchronize()
        if once:
            call()
            torch.cuda.synchronize()
            continue
        iters = 5
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                call()
            torch.cuda.synchronize()
        per: dict[str, float] = defaultdict(float)
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                per[ev.name[:40]] += ev.device_time_total / iters
        med = statistics.median(timing_samples_us(call, 20, graph=True))
        gbps = index_k_bytes(case) / (med * 1e-6) / 1e9
        print(
            f"== {spec}: graph {med:.1f} us ({gbps:.0f} GB/s of index-K); kernels "
            + ", ".join(
                f"{name.removeprefix('_indexer_')} {us:.1f}" for name, us in sorted(per.items(), key=lambda kv: -kv[1])
            )
        )
        del data, ws
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
