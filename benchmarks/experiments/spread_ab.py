"""The package's spread plans (whole tokens first, the leftover spread: ``Plan.whole_units``) against the plans the
planner makes without that partition, at the points past a perfect fit where it spreads, on this GPU.

For each point: the planner's plan and the uniform one (``plan._Coster.spread`` switched off, the planner's caches
cleared), each checked against the fp64 reference, then timed in alternated rounds (CUDA-graph replay, L2 flushed,
median of ``--reps`` per round); the batch before it (the perfect fit, or the spread before) is timed too, for the
per-request step. Points: ``MODE[-sN][-hN]:B`` as ``ws_spread.py``; the default is every point of the H200 preset's
64- and 128-head curves (s_q = 1 and 2, CSA and HCA) where the planner spreads.

    PYTHONPATH=src python3 benchmarks/experiments/spread_ab.py OUT.json [--points csa:133 ...] [--rounds 3] [--reps 10]
        [--max-left L]

``--max-left`` offers the spread up to L leftover query tokens (``plan._SPREAD_MAX_LEFT``) for the run; ``--force``
takes the spread wherever it applies (priced at 0 µs, so the planner picks it), to time it where the model prefers
another plan.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def spread_points() -> list[str]:
    """Every (mode, s_q, h, b ≤ 256) of the H200 curves that the planner plans as a spread."""
    from wavemla.device import get_spec
    from wavemla.plan import Workload, plan

    h200 = get_spec("h200")
    points = []
    for mode, extra in (("csa", 512), ("hca", 1024)):
        for s_q, h in ((1, 64), (2, 64), (1, 128)):
            for b in range(1, 257):
                w = Workload(batch=b, s_q=s_q, h_q=h, topk=128, extra_topk=extra, is_fp8=True, dtype="bf16")
                if plan(w, h200).whole_units:
                    points.append(f"{mode}{'-s2' if s_q == 2 else ''}{'-h128' if h == 128 else ''}:{b}")
    return points


def parse_point(point: str) -> tuple[str, int, int, int]:
    """(mode, s_q, heads, batch) of a point ``MODE[-sN][-hN]:B``."""
    m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?:(\d+)", point)
    if m is None:
        raise SystemExit(f"point {point!r}: expected MODE[-sN][-hN]:B")
    return m.group(1), int(m.group(2) or 1), int(m.group(3) or 64), int(m.group(4))


def checked_call(mode: str, batch: int, s_q: int, h: int, patches: dict[str, Any]) -> tuple[dict[str, Any], Any, str]:
    """One decode call at a point, planned with ``plan._Coster``'s attributes replaced by ``patches`` (the planner's
    caches cleared before and after, also the first calls a fresh metadata object would replay), checked against the
    fp64 reference: (call keywords, metadata, '' or the mismatch)."""
    from wavemla import get_mla_metadata, sparse_mla_decode
    from wavemla import plan as plan_mod
    from wavemla.reference import sparse_decode_ref
    from wavemla.testing import TOLERANCES, check_close

    sys.path.insert(0, str(HERE))
    from merge_ab import decode_point

    saved = {name: getattr(plan_mod._Coster, name) for name in patches}
    for name, value in patches.items():
        setattr(plan_mod._Coster, name, value)
    plan_mod.clear_caches()
    try:
        kw, _ = decode_point(mode, batch, None, seed=0, s_q=s_q, h=h)
        meta, _ = get_mla_metadata()
        out, lse = sparse_mla_decode(**kw, metadata=meta)
    finally:
        for name, value in saved.items():
            setattr(plan_mod._Coster, name, value)
        plan_mod.clear_caches()
    rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
    bad = check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]) or check_close(
        "lse", lse, ref_l, TOLERANCES[("lse", "gpu")]
    )
    return kw, meta, bad or ""


def checked_runs(
    point: str, mode: str, s_q: int, h: int, cases: list[tuple[str, int, dict[str, Any]]]
) -> dict[str, tuple[dict[str, Any], Any, str]]:
    """:func:`checked_call` for each case ``(name, batch, patches)`` of a point, a line printed for each (its plan's
    tiles a program, the split kernel, ok or the mismatch): (call keywords, metadata, plan label) by name."""
    from wavemla.plan import tiles_label

    runs: dict[str, tuple[dict[str, Any], Any, str]] = {}
    for name, batch, patches in cases:
        kw, meta, bad = checked_call(mode, batch, s_q, h, patches)
        p = meta.plan
        assert p is not None
        label = f"{p.config}:{tiles_label(p.units_per_part, p.whole_units, p.token_units)}"
        kernel = getattr(meta.split_kernel, "name", "?")
        print(f"{point:12s} {name:8s} b={batch:<4d} {label:22s} {kernel:32s} "
              f"{'ok' if not bad else 'MISMATCH ' + bad[:80]}", flush=True)  # fmt: skip
        runs[name] = (kw, meta, label)
    return runs


def alternated_medians(runs: dict[str, tuple[dict[str, Any], Any]], rounds: int, reps: int) -> tuple[
    dict[str, list[float]], dict[str, float]
]:  # fmt: skip
    """Each run's call (keywords, metadata) timed in turn, ``rounds`` times (CUDA-graph replay, L2 flushed, median of
    ``reps``): (per-round medians, their median) by run."""
    from wavemla import sparse_mla_decode
    from wavemla.tools.bench import timings_us

    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for name, (kw, meta) in runs.items():
            fn = lambda kw=kw, meta=meta: sparse_mla_decode(**kw, metadata=meta)  # noqa: E731
            times[name].append(timings_us(fn, reps=reps, graph=True)[1])
    return times, {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def ab_arguments() -> argparse.ArgumentParser:
    """The A/B scripts' shared arguments: the JSON to write, the points, the alternated rounds and the repetitions
    a round."""
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--points", nargs="+", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    return ap


def main() -> None:
    ap = ab_arguments()
    ap.add_argument("--max-left", type=int, default=None, help="offer the spread up to this many leftover tokens")
    ap.add_argument("--force", action="store_true", help="take the spread wherever it applies (priced at 0 us)")
    args = ap.parse_args()

    import torch

    from wavemla import plan as plan_mod

    if args.max_left is not None:
        plan_mod._SPREAD_MAX_LEFT = args.max_left
        plan_mod.clear_caches()
    predicted: dict[tuple[str, int, int, int], float] = {}
    if args.force:
        import dataclasses

        priced = plan_mod._Coster.spread

        def forced(self: Any) -> Any:
            s = priced(self)
            if s is None:
                return None
            predicted[(self.h_q, self.tokens, self.n_tiles, self.num_hb)] = s.predicted_us
            return dataclasses.replace(s, predicted_us=0.0)

        plan_mod._Coster.spread = forced  # type: ignore[method-assign]
        plan_mod.clear_caches()
    points = args.points or spread_points()
    print(f"{len(points)} points: {' '.join(points)}", flush=True)
    records: list[dict[str, Any]] = []
    for point in points:
        mode, s_q, h, b = parse_point(point)
        off: dict[str, Any] = {"spread": lambda self: None}
        runs = checked_runs(point, mode, s_q, h, [("fit", b - 1, {}), ("spread", b, {}), ("uniform", b, off)])
        if runs["spread"][1].plan.whole_units == 0:
            print(f"{point:12s} the planner does not spread here: skipped", flush=True)
            continue
        if runs["uniform"][1].plan.whole_units != 0:
            raise SystemExit(f"{point}: the plan without spread still spreads ({runs['uniform'][2]})")
        times, med = alternated_medians({k: v[:2] for k, v in runs.items()}, args.rounds, args.reps)
        fit_per_request = med["fit"] / (b - 1)
        steps = {k: 100 * ((med[k] / b) / fit_per_request - 1) for k in ("spread", "uniform")}
        p_spread = runs["spread"][1].plan
        key = (h, b * s_q, p_spread.n_tiles, p_spread.num_head_blocks)
        pred = {"spread": predicted.get(key, p_spread.predicted_us), "uniform": runs["uniform"][1].plan.predicted_us}
        print(f"{point:12s} fit {med['fit']:7.1f}  spread {med['spread']:7.1f}  uniform {med['uniform']:7.1f} us;"
              f" spread/uniform {med['spread'] / med['uniform']:.3f}; per-request step spread {steps['spread']:+.1f}%"
              f" uniform {steps['uniform']:+.1f}%; predicted {pred['spread']:.1f} / {pred['uniform']:.1f}",
              flush=True)  # fmt: skip
        records.append(dict(point=point, batch=b, s_q=s_q, h_q=h, mode=mode, forced=args.force,
                            plans={k: v[2] for k, v in runs.items()}, rounds=times, median_us=med,
                            predicted_us=pred, step_percent=steps))  # fmt: skip
        torch.cuda.empty_cache()
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
