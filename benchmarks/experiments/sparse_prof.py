"""Where a sparse decode call's time goes at the planner's plan: each kernel's device time (torch.profiler, L2 flushed
before every call, median over calls) against the call's CUDA-graph-replayed time (L2 flushed, median), the rest
being the gaps between the kernels and the launches.

    PYTHONPATH=src python3 benchmarks/experiments/sparse_prof.py csa:8 csa:32 hca:32 csa-s2:32 [--calls 15]

A point is MODE[-sN][-hN]:B (DSV4 FP8 inputs, ``benchmarks/experiments/merge_ab.py``'s ``decode_point``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from merge_ab import decode_point, parse_point

from wavemla import get_mla_metadata, sparse_mla_decode
from wavemla.tools.bench import timings_us


def profile_point(point: str, calls: int) -> dict[str, Any]:
    mode, s_q, h, b = parse_point(point)
    kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=h)
    meta, _ = get_mla_metadata()

    def call() -> None:
        sparse_mla_decode(**kw, metadata=meta)

    call()
    torch.cuda.synchronize()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    per: dict[str, list[float]] = defaultdict(list)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.fill_(1)
            call()
        torch.cuda.synchronize()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and "fill" not in ev.name and "elementwise" not in ev.name:
            per[ev.name[:48]].append(ev.device_time_total)
    kernels = {name: statistics.median(v) for name, v in per.items()}
    graph_us = timings_us(call, reps=15, graph=True)[1]
    plan = meta.plan
    rec = dict(
        point=point,
        plan=f"{plan.config}:{plan.units_per_part}" if plan is not None else "",
        graph_us=graph_us,
        kernels_us=kernels,
        launches_per_call={name: len(v) / calls for name, v in per.items()},
        rest_us=graph_us - sum(kernels.values()),
    )
    names = ", ".join(f"{n} {us:.1f}" for n, us in sorted(kernels.items(), key=lambda kv: -kv[1]))
    print(f"{point:12s} {rec['plan']:16s} graph {graph_us:6.1f} us = {names}; rest {rec['rest_us']:.1f}", flush=True)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("points", nargs="+")
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    records = [profile_point(p, args.calls) for p in args.points]
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
