"""What a planner constant or the spread moves, offline: the ten DeepSeek-V4 sparse decode curves (CSA and HCA; 16
heads s_q 1 and 2, 64 heads s_q 1 and 2, 128 heads; b = 1..256) on a GPU preset.

    PYTHONPATH=src python3 benchmarks/experiments/plan_moves.py --gpu h100 --set _COMBINE_SM90_GBPS=3350
    PYTHONPATH=src python3 benchmarks/experiments/plan_moves.py --spread [--gpu l40s ...]
    PYTHONPATH=src python3 benchmarks/experiments/plan_moves.py --bias benchmarks/results/...-curve-*.json

``--set NAME=VALUE`` (a float constant of ``wavemla.plan``): the points whose plan (tile, tiles a program, whole and
padded units) differs between the planner with that value and the package's, each ``b:with-value->package``.
``--spread``: for each preset (or those given), where the package's plan is a spread of the Triton split kernel, its
predicted time over that of the plan made without the spread (``plan._Coster.spread`` off). ``--bias CURVE.json
...``: measured over predicted time on ``wavemla bench`` curves from b = 24, median and range, for the plans that cut
tokens (the combine runs) and those of whole tokens, by programs an SM (spread plans apart).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator

from wavemla import plan as plan_mod
from wavemla.device import PRESETS, DeviceSpec, get_spec
from wavemla.plan import Plan, Workload, plan
from wavemla.tools.bench import MODES

CURVES = [(m, s_q, h) for m in ("csa", "hca") for s_q, h in ((1, 16), (2, 16), (1, 64), (2, 64), (1, 128))]


def points(device: DeviceSpec) -> Iterator[tuple[tuple[str, int, int], int, Workload, Plan]]:
    """((mode, s_q, heads), batch, workload, the planner's plan) over the ten curves."""
    for mode, s_q, h in CURVES:
        topk, _, extra, _, _ = MODES[mode]
        for b in range(1, 257):
            w = Workload(batch=b, s_q=s_q, h_q=h, topk=topk, extra_topk=extra, is_fp8=True)
            yield (mode, s_q, h), b, w, plan(w, device)


def label(p: Plan) -> str:
    """A plan's tile and tiles a program (``U+W`` for a spread's run and whole units)."""
    return f"{p.config}:{plan_mod.tiles_label(p.units_per_part, p.whole_units, p.token_units)}"


def moves(device: DeviceSpec, name: str, value: float) -> None:
    plan_mod.clear_caches()
    before = {(c, b): label(p) for c, b, _, p in points(device)}
    saved = getattr(plan_mod, name)
    setattr(plan_mod, name, value)
    plan_mod.clear_caches()
    try:
        after = {(c, b): label(p) for c, b, _, p in points(device)}
    finally:
        setattr(plan_mod, name, saved)
        plan_mod.clear_caches()
    moved = [k for k in before if before[k] != after[k]]
    for curve in CURVES:
        here = [f"{b}:{after[(c, b)]}->{before[(c, b)]}" for c, b in moved if c == curve]
        if here:
            print(*curve, len(here), *here)
    print(f"{device.name}: {len(moved)} of {len(before)} points move ({name}={value} -> the package's {saved})")


def spread_gains(device: DeviceSpec) -> None:
    plan_mod.clear_caches()
    spread = {
        (c, b): p for c, b, w, p in points(device) if p.whole_units and not plan_mod._sparse_ws(p.config, w, device)
    }
    priced = plan_mod._Coster.spread
    plan_mod._Coster.spread = lambda self: None  # type: ignore[method-assign,assignment]
    plan_mod.clear_caches()
    try:
        uniform = {(c, b): p for c, b, _, p in points(device) if (c, b) in spread}
    finally:
        plan_mod._Coster.spread = priced  # type: ignore[method-assign]
        plan_mod.clear_caches()
    out = []
    for curve in CURVES:
        r = [(b, spread[(c, b)].predicted_us / uniform[(c, b)].predicted_us) for c, b in spread if c == curve]
        if r:
            lo, hi = min(x for _, x in r), max(x for _, x in r)
            out.append(f"{curve[0]} s_q={curve[1]} h={curve[2]}: {len(r)} b {r[0][0]}..{r[-1][0]} {lo:.3f}-{hi:.3f}")
    print(f"{device.name} |", "; ".join(out) or "none")


def bias(path: str, num_sms: int = 132) -> None:
    with open(path) as f:
        records = json.load(f)["records"]
    recs = [r for r in records if r["provider"] == "wavemla" and r["batch"] >= 24]
    groups: dict[str, list[float]] = {}
    for r in recs:
        if r.get("whole_units"):
            kind = "spread"
        elif r["combine"]:
            kind = "cut"
        else:
            kind = f"whole, {-(-r['programs'] // num_sms)} programs an SM at most"
        groups.setdefault(kind, []).append(r["median_us"] / r["predicted_us"])
    parts = [f"{k}: {len(v)} median {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" for k, v in groups.items()]
    print(path.rsplit("/", 1)[-1], "|", "; ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", nargs="+", default=None, help="presets (default: h100 for --set, every one for --spread)")
    ap.add_argument("--set", default=None, help="NAME=VALUE: a float constant of wavemla.plan to compare against")
    ap.add_argument("--spread", action="store_true", help="the Triton kernel's spread against the plan without it")
    ap.add_argument("--bias", nargs="+", default=[], help="wavemla bench curve JSON files: measured over predicted")
    args = ap.parse_args()
    if args.set is None and not args.spread and not args.bias:
        ap.error("give --set NAME=VALUE, --spread or --bias")
    for path in args.bias:
        bias(path)
    if args.set is not None:
        name, _, value = args.set.partition("=")
        if not isinstance(getattr(plan_mod, name, None), float):
            ap.error(f"--set: {name!r} is not a float constant of wavemla.plan")
        for g in args.gpu or ["h100"]:
            moves(get_spec(g), name, float(value))
    if args.spread:
        for g in args.gpu or list(PRESETS):
            spread_gains(get_spec(g))


if __name__ == "__main__":
    main()
