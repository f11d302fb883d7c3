"""How much of a default-plan sparse decode call the combine kernel takes, at the batches where the planner cuts
tokens between programs of the warp-specialized kernel (FlashMLA's cliff shapes): each point timed as shipped and
with the combine launch replaced by nothing (outputs then wrong: timing only), alternating, CUDA-graph replay with
L2 flushed, median of ``--reps``. The difference bounds what merging the cut tokens inside the kernel could save.

    PYTHONPATH=src python3 benchmarks/experiments/combine_share.py [--reps 15] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics

from merge_ab import decode_point, time_call  # this directory: the script's own path entry

import wavemla.kernels.combine as combine
from wavemla import get_mla_metadata, sparse_mla_decode

POINTS = (("csa", 133, 1, 64), ("csa", 148, 1, 64), ("hca", 133, 1, 64), ("hca", 148, 1, 64), ("csa", 96, 2, 64),
          ("csa", 96, 1, 128))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    shipped = combine.sparse_decode_combine
    rows = []
    print("mode  b  s_q  h   plan                         with (µs)  without (µs)  combine's share")
    for mode, b, s_q, h in POINTS:
        kw, _ = decode_point(mode, b, None, seed=0, s_q=s_q, h=h)
        meta, _ = get_mla_metadata()
        sparse_mla_decode(**kw, metadata=meta)
        times: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(args.rounds):
            for name in times:
                combine.sparse_decode_combine = shipped if name == "with" else (lambda **_: None)
                try:
                    times[name].append(time_call(kw, meta, args.reps))
                finally:
                    combine.sparse_decode_combine = shipped
        w, wo = statistics.median(times["with"]), statistics.median(times["without"])
        plan = meta.plan
        label = f"{plan.config.block_h}x{plan.config.block_n} {plan.units_per_part} tiles"
        rows.append(dict(mode=mode, batch=b, s_q=s_q, heads=h, plan=label, needs_combine=plan.needs_combine,
                         with_us=w, without_us=wo))  # fmt: skip
        print(f"{mode} {b:4d} {s_q:3d} {h:4d}   {label:28s} {w:9.1f} {wo:12.1f}   {(w - wo) / w:6.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records": rows}, f, indent=1)


if __name__ == "__main__":
    main()
