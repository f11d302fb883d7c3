"""A separate time for the sm_90 16x32 FP8 tiles where two programs share an SM (a launch of more programs than
SMs), fitted to the 16-head b = 1..256 curves of both tiles: the register tile's (2026-11-30, 16x32x4x1) and the
staged tile's (2026-12-03, 16x32x4x3, with the batches re-measured at the plans that the staged tile's pricing moved).
The planner's ``_SM90_TABLE`` priced those tiles at one time (2.3 µs) whatever the programs per SM (it now takes
``_SHARED_16X32_US`` where they share an SM, at 16 heads); here the model's tile time where two or more programs
share an SM is replaced by each trial value, the other costs kept, and the picks are compared against one time.

    PYTHONPATH=src python3 benchmarks/experiments/fit_shared_tile.py [VALUE ...] [--moves VALUE]
    PYTHONPATH=src python3 benchmarks/experiments/fit_shared_tile.py --steps AB.json [AB.json ...]

For each value (default 2.3 .. 3.3) it prints the rms log error of predicted against measured time per tile, and
the mean ratio predicted / measured per group: CSA or HCA, tokens cut between programs or not, at most one program
per SM ("one") or more programs than SMs ("two"). Then the planner's picks that ``--moves`` (default 2.9) changes, at
16 heads, b = 1..256, and at 64 and 128 heads, b = 1..8, with the old pick's measured time where the curves have it.

``--steps``: the per-request steps above 5% of the 16-head curves (report.cliffs) as they are, and with each batch that
the A/B runs of gpu_shared_tile.sh timed at its moved plan (2.9 µs) in place (median over the runs given); the moved
batches they did not time are left out.
"""

import collections
import json
import math
import statistics
import sys
from pathlib import Path

import wavemla.plan as pl
from wavemla.device import DeviceSpec
from wavemla.tools.bench import MODES

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import DEVICE, predict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import report as results  # benchmarks/report.py: the committed curves as the report reads them

# the 16-head curves: the register tile's (before the staged tile) and the staged tile's as BENCHMARKS.md has them
# (report.CURVES: the curve with the batches re-measured since)
REGISTER = [f"{results.BEFORE}-sparse-decode-curve-h16", f"{results.BEFORE}-sparse-decode-curve-h16-hca"]
STAGED_CURVES = [c for c in results.CURVES if c[2] == 16 and c[3] == 1]
STAGED = [(name, later) for name, _, _, _, later in STAGED_CURVES]
CONFIGS = {(16, 32, 4, 1), (16, 32, 4, pl.STAGED_FP8_STAGES)}
_shipped_tile_us = pl._tile_us
_shared: list[float | None] = [None]


def _tile_us(
    cfg: pl.KernelConfig, workload: pl.Workload, device: DeviceSpec, occupancy: int = 1, measured: float | None = None,
    num_hb: int = 1,
) -> float:  # fmt: skip
    """plan._tile_us with the trial shared-SM time for the 16x32 FP8 tiles' measured costs at 2+ programs per SM."""
    shape = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages)
    if _shared[0] is not None and measured is not None and occupancy > 1 and shape in CONFIGS:
        return _shared[0]
    return _shipped_tile_us(cfg, workload, device, occupancy, measured, num_hb)


pl._tile_us = _tile_us


def set_shared(value: float | None) -> None:
    _shared[0] = value
    pl.clear_caches()


def load(config: str) -> list[dict]:
    """The 16-head curve points of ``config`` (16x32x4x1: the register tile's curves; 16x32x4x3: the staged tile's,
    with the re-measured batches in place)."""
    if config == "16x32x4x1":
        rows = [r for name in REGISTER for r in results.curve_rows(name)]
    else:
        rows = [r for name, later in STAGED for r in results.current_rows(name, later)]
    return [r for r in rows if r["config"] == config]


def summary(points: list[dict]) -> str:
    groups: dict[tuple[str, str, str], list[float]] = collections.defaultdict(list)
    err = 0.0
    for r in points:
        n_tiles = 20 if r["mode"] == "csa" else 36
        ratio = predict(r) / r["median_us"]
        err += math.log(ratio) ** 2
        cut = "cut" if r["units_per_part"] % n_tiles else "whole"
        groups[(r["mode"], cut, "one" if r["programs"] <= DEVICE.num_sms else "two")].append(ratio)
    parts = [f"{'/'.join(k)} {sum(v) / len(v):.3f} ({len(v)})" for k, v in sorted(groups.items())]
    return f"rms log error {math.sqrt(err / len(points)):.3f}; " + ", ".join(parts)


def picks(h_q: int, batches: range) -> dict[tuple[str, int], tuple[str, int, float]]:
    out = {}
    for mode in ("csa", "hca"):
        topk, _, extra, _, _ = MODES[mode]
        for b in batches:
            w = pl.Workload(batch=b, s_q=1, h_q=h_q, topk=topk, extra_topk=extra, is_fp8=True)
            p = pl.plan(w, DEVICE)
            out[(mode, b)] = (str(p.config), p.units_per_part, p.predicted_us)
    return out


def steps(paths: list[str], moves: float) -> None:
    """The 16-head curves' steps now, and with the moved plans (a shared-SM time of ``moves``) that the A/B runs
    timed in place (each pair of records: before, then moved); moved batches the runs did not time are left out."""
    times: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    for path in paths:
        records = json.loads(Path(path).read_text())["records"]
        for moved in records[1::2]:
            if moved["h_q"] == 16 and moved["s_q"] == 1:
                times[(moved["mode"], moved["batch"])].append(moved["median_us"])
    set_shared(pl._SM90_TABLE[(16, 32, 4, 1, True)].tile_us)
    before = picks(16, range(1, 257))
    set_shared(moves)
    after = picks(16, range(1, 257))
    for name, mode, _, _, later in STAGED_CURVES:
        rows = results.current_rows(name, later)
        timed = []
        for r in rows:
            key = (mode, r["batch"])
            if key in times:
                timed.append(dict(r, median_us=statistics.median(times[key])))
            elif before[key][:2] == after[key][:2]:
                timed.append(r)
        for label, curve in (("now", rows), (f"moved plans timed ({len(rows) - len(timed)} untimed left out)", timed)):
            table, count = results.cliffs(curve)
            print(f"{mode} h=16, {label}: {count} steps above 5%\n{table}")


def main() -> None:
    args = sys.argv[1:]
    if "--steps" in args:
        steps(args[args.index("--steps") + 1 :], 2.9)
        return
    moves = 2.9
    if "--moves" in args:
        i = args.index("--moves")
        moves = float(args[i + 1])
        del args[i : i + 2]
    values = [float(a) for a in args] or [2.3, 2.5, 2.7, 2.8, 2.9, 3.0, 3.1, 3.3]
    data = {c: load(c) for c in ("16x32x4x1", "16x32x4x3")}
    for value in values:
        set_shared(value)
        for config, points in data.items():
            print(f"shared tile {value:.2f} µs, {config}: {summary(points)}")
    measured = {(r["mode"], r["batch"], r["units_per_part"]): r["median_us"] for r in data["16x32x4x3"]}
    for h_q, batches in ((16, range(1, 257)), (64, range(1, 9)), (128, range(1, 9))):
        set_shared(pl._SM90_TABLE[(16, 32, 4, 1, True)].tile_us)  # one time, shared or not
        before = picks(h_q, batches)
        set_shared(moves)
        after = picks(h_q, batches)
        moved = [k for k in before if before[k][:2] != after[k][:2]]
        print(f"h={h_q}: {len(moved)} of {len(before)} picks moved by a shared-SM tile of {moves} µs")
        for k in moved:
            (c0, u0, _), (c1, u1, p1) = before[k], after[k]
            was = measured.get((k[0], k[1], u0)) if h_q == 16 else None
            was_s = f", measured {was:.1f} µs" if was is not None else ""
            print(f"  {k[0]} b={k[1]}: {c0}:{u0}{was_s} -> {c1}:{u1} (predicted {p1:.1f} µs)")


if __name__ == "__main__":
    main()
