"""The sparse prefill at short and mid-size calls: every (tile, pieces) pair against the planner's plan.

For DeepSeek-V4 shapes (64 heads, 640-entry lists of 512, 8K rows), ``--tokens`` query tokens: the 64-head and
16-head tiles over whole lists and cut into 2..8 pieces of whole tiles, each checked against the fp64 reference on
its first tokens, then timed (CUDA graph, L2 flushed, median of ``--reps``).

    PYTHONPATH=src python3 benchmarks/experiments/prefill_pieces_grid.py --tokens 16 32 64 100 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json

from wavemla.device import current_spec
from wavemla.kernels.sparse_prefill import sparse_prefill
from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill
from wavemla.tools.bench import timings_us
from wavemla.tools.bench_prefill import PrefillCase, _check, make_inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 32, 64, 100])
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    spec = current_spec()
    rows = []
    for s_q in args.tokens:
        case = PrefillCase(f"dsv4-h{args.heads}-s{s_q}", s_q, 8192, 640, args.heads, 512)
        x = make_inputs(case)
        planned = plan_sparse_prefill(PrefillWorkload(s_q, args.heads, 640, 512), spec)
        variants = [("planned", planned)]
        for cfg in (KernelConfig(64, 64, 8, 3), KernelConfig(16, 32, 4, 2)):
            tiles = -(-640 // cfg.block_n)
            for splits in (1, 2, 3, 4, 5, 8):
                piece = -(-tiles // splits)
                if -(-tiles // piece) != splits:
                    continue
                variants.append((f"{cfg}/{splits}", dataclasses.replace(planned, config=cfg, splits=splits,
                                                                        piece_tiles=piece)))  # fmt: skip
        for name, plan in variants:
            args_ = (x["q"], x["kv"], x["indices"], x["sm_scale"], plan, x["attn_sink"], x["topk_length"])
            fn = functools.partial(lambda *a: sparse_prefill(*a)[0], *args_)
            _check(f"{case.name} {name}", fn(), x)
            _, med, _ = timings_us(fn, args.reps, flush=True, graph=True)
            label = f"{plan.config}/{plan.splits}"
            rows.append({"tokens": s_q, "heads": args.heads, "variant": name, "plan": label, "median_us": med})
            print(f"s_q={s_q:4d} {name:14s} {label:14s} {med:8.1f} us", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"gpu": spec.name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
