"""The package's padded-token plans (``Plan.token_units``: every token padded with empty units to a multiple of the
part size, one piece of one token a program) against the plans the planner makes without them, on this GPU.

For each point: the planner's plan and the unpadded one (``plan._Coster.padded`` switched off, the planner's caches
cleared), each checked against the fp64 reference, then timed in alternated rounds (CUDA-graph replay, L2 flushed,
the benchmarks' warm-up, median of ``--reps`` per round); with ``--prev``, the batch before each point with its own
plan too, for the per-request step. Points: ``MODE[-sN][-hN]:B`` (``csa``, ``hca``; ``-s2`` two query tokens,
``-h128`` / ``-h16`` heads); the default is every point of the curves (h = 16, 64, 128; s_q = 1, 2 at 64 heads; CSA
and HCA; b = 1..256) where the planner pads on this GPU.

    PYTHONPATH=src python3 benchmarks/experiments/pad_ab.py OUT.json [--points csa:32 ...] [--rounds 3] [--reps 10]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CURVES = ((1, 64), (2, 64), (1, 128), (1, 16))  # (s_q, heads)


def padded_points() -> list[str]:
    """Every (mode, s_q, h, b ≤ 256) of the curves that the planner plans with padded tokens on this GPU."""
    from wavemla.device import current_spec
    from wavemla.plan import Workload, plan

    spec = current_spec()
    points = []
    for mode, extra in (("csa", 512), ("hca", 1024)):
        for s_q, h in CURVES:
            for b in range(1, 257):
                w = Workload(batch=b, s_q=s_q, h_q=h, topk=128, extra_topk=extra, is_fp8=True, dtype="bf16")
                if plan(w, spec).token_units:
                    points.append(f"{mode}{'-s2' if s_q == 2 else ''}{'' if h == 64 else f'-h{h}'}:{b}")
    return points


def main() -> None:
    sys.path.insert(0, str(HERE))
    from spread_ab import ab_arguments, alternated_medians, checked_runs, parse_point

    ap = ab_arguments()
    ap.add_argument("--prev", action="store_true", help="also time the batch before each point (its own plan)")
    args = ap.parse_args()

    import torch

    points = args.points or padded_points()
    print(f"{len(points)} points: {' '.join(points)}", flush=True)
    records: list[dict[str, Any]] = []
    for point in points:
        mode, s_q, h, b = parse_point(point)
        off: dict[str, Any] = {"padded": lambda self: []}
        cases = [("padded", b, {}), ("unpadded", b, off)] + ([("prev", b - 1, {})] if args.prev and b > 1 else [])
        runs = checked_runs(point, mode, s_q, h, cases)
        if runs["padded"][1].plan.token_units == 0:
            print(f"{point:12s} the planner does not pad here: skipped", flush=True)
            continue
        if runs["unpadded"][1].plan.token_units != 0:
            raise SystemExit(f"{point}: the plan without padding still pads ({runs['unpadded'][2]})")
        times, med = alternated_medians({k: v[:2] for k, v in runs.items()}, args.rounds, args.reps)
        line = (f"{point:12s} padded {med['padded']:7.1f}  unpadded {med['unpadded']:7.1f} us; "
                f"padded/unpadded {med['padded'] / med['unpadded']:.3f}; predicted "
                f"{runs['padded'][1].plan.predicted_us:.1f} / {runs['unpadded'][1].plan.predicted_us:.1f}")  # fmt: skip
        steps: dict[str, float] = {}
        if "prev" in med:
            per_prev = med["prev"] / (b - 1)
            steps = {k: 100 * ((med[k] / b) / per_prev - 1) for k in ("padded", "unpadded")}
            line += (f"; prev b={b - 1} {med['prev']:.1f}, per-request step padded {steps['padded']:+.1f}% "
                     f"unpadded {steps['unpadded']:+.1f}%")  # fmt: skip
        print(line, flush=True)
        records.append(dict(point=point, batch=b, s_q=s_q, h_q=h, mode=mode,
                            plans={k: v[2] for k, v in runs.items()},
                            predicted_us={k: v[1].plan.predicted_us for k, v in runs.items()},
                            rounds=times, median_us=med, step_percent=steps))  # fmt: skip
        torch.cuda.empty_cache()
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
