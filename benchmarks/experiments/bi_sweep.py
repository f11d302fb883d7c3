"""Batch-invariant plans on the GPU: the planner's choice and forced alternatives (tile rows, pieces per token) per
batch, each timed against the default plan (CUDA-graph replay, L2 flushed, median).

    PYTHONPATH=src python3 benchmarks/experiments/bi_sweep.py --batch 32 48 64 96 128 148 256 --json bi_sweep.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import wavemla
from wavemla import config
from wavemla.tools.bench import environment, timings_us

sys.path.insert(0, str(Path(__file__).parent))
from merge_ab import decode_point

OPTIONS = {
    "csa": [None, (64, 2), (64, 5), (32, 4), (32, 5)],
    "hca": [None, (64, 2), (64, 3), (32, 4), (32, 6)],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", nargs="+", default=["csa", "hca"])
    ap.add_argument("--batch", nargs="+", type=int, default=[32, 48, 64, 96, 128, 148, 256])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--options", default=None, help="BLOCK_N:pieces,... instead of the built-in list (plan first)")
    args = ap.parse_args()
    if args.options:
        forced = [tuple(int(x) for x in o.split(":")) for o in args.options.split(",")]
        for mode in OPTIONS:
            OPTIONS[mode] = [None, *forced]
    records = []
    for mode in args.mode:
        for b in args.batch:
            kw, _ = decode_point(mode, b, 0, seed=0)
            meta, _ = wavemla.get_mla_metadata()
            wavemla.sparse_mla_decode(**kw, metadata=meta)
            base = timings_us(
                functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta), reps=args.reps, graph=True
            )[1]
            line = [f"{mode} b={b:3d} default {base:6.1f}"]
            for opt in OPTIONS[mode]:
                knobs = {} if opt is None else {"WAVEMLA_BLOCK_N": opt[0], "WAVEMLA_NUM_SPLITS": opt[1]}
                meta, _ = wavemla.get_mla_metadata()
                with config.override(**knobs):
                    wavemla.sparse_mla_decode(**kw, metadata=meta, batch_invariant=True)
                p = meta.plan
                call = functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta, batch_invariant=True)
                t = timings_us(call, reps=args.reps, graph=True)[1]
                label = "plan" if opt is None else f"bn{opt[0]}p{opt[1]}"
                pieces = p.n_tiles // p.pieces_tiles
                records.append(
                    {
                        "mode": mode,
                        "batch": b,
                        "option": label,
                        "block_n": p.block_n,
                        "pieces": pieces,
                        "units_per_part": p.units_per_part,
                        "programs": p.programs,
                        "combine": p.needs_combine,
                        "predicted_us": p.predicted_us,
                        "us": t,
                        "default_us": base,
                        "ratio": t / base,
                    }
                )
                line.append(
                    f"{label}[{p.block_n}/{pieces}p k{p.units_per_part // p.pieces_tiles}"
                    f"{'c' if p.needs_combine else ''}] {t:6.1f} ({t / base:.2f})"
                )
            print(" | ".join(line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
