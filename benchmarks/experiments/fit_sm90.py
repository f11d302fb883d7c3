"""Fit the sm_90 tile and segment costs of the planner's model (``_SM90_TABLE`` in wavemla/plan.py) to measured
partition grids (``partition_sweep.py`` JSON from ``gpu_refit.sh`` and ``gpu_round_refit2.sh``) and ``wavemla bench``
curves (every third batch), one configuration at a time, over the points that ran the path the launcher takes now.

    PYTHONPATH=src python3 benchmarks/experiments/fit_sm90.py benchmarks/results/2026-11-30-h200-refit.json \
        benchmarks/results/2026-11-30-h200-qpath.json [BUSY ...]

It first prints the shipped table's error per configuration and the shipped model's prediction for the points it
leaves out (programs the planner does not offer). Then, for each busy factor (``_SM90_BUSY``; default 0, 0.15,
0.3) and configuration, it searches (tile µs, segment µs, first segment µs) minimizing the squared log error of
predicted against measured time over that configuration's points, prints the fit and every point's residual, and
then how often the fitted model ranks two measured partitions of one batch (>3% apart) the wrong way round.
"""

import dataclasses
import itertools
import json
import math
import sys
from pathlib import Path

import wavemla.plan as pl

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import cfg_of, predict, print_misranked, workload


def register_q(r: dict) -> bool:
    """A program the planner no longer offers: a bf16 q kept in registers next to 64x32 tiles (_register_q_slow)."""
    return r["units_per_part"] < pl.Q_CONVERT_MIN_TILES and pl._register_q_slow(cfg_of(r), workload(r))


def current_path(r: dict) -> bool:
    """Whether a measured point converted q the way the launcher does now for its plan. The grids ran when 64x64
    plans of Q_CONVERT_MIN_TILES+ tiles still went through scratch rows unless forced to the conversion kernel
    (``:launcher-q``); 64x32 plans already took the conversion kernel and 16x32 plans still take the scratch rows.
    So 64x64 points of that size count with ``:launcher-q`` only, every other point without it."""
    if r["config"].startswith("64x64") and r["units_per_part"] >= pl.Q_CONVERT_MIN_TILES:
        return "launcher-q" in r["spec"]
    return "launcher-q" not in r["spec"]


paths = [Path(a) for a in sys.argv[1:] if a.endswith(".json")]
measured = []
for path in paths:
    for r in json.loads(path.read_text())["records"]:
        if "provider" in r:  # a `wavemla bench` curve: the planner's own plans, every third batch (and b <= 16)
            if r["provider"] != "wavemla" or not (r["batch"] <= 16 or r["batch"] % 3 == 0):
                continue
            r = {**r, "spec": "curve", "ok": True}
        measured.append(r)
measured = [r for r in measured if r["ok"]]
left_out = [r for r in measured if register_q(r)]
records = [r for r in measured if not register_q(r) and (r["spec"] == "curve" or current_path(r))]


def set_entry(cfg: pl.KernelConfig, tile: float, seg: float, first: float) -> None:
    key = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, True)
    pl._SM90_TABLE[key] = dataclasses.replace(pl._SM90_TABLE[key], tile_us=tile, segment_us=seg, first_segment_us=first)
    pl.clear_caches()


def loss(points: list[dict]) -> float:
    return sum(math.log(predict(r) / r["median_us"]) ** 2 for r in points)


by_cfg: dict[str, list[dict]] = {}
for r in records:
    by_cfg.setdefault(r["config"], []).append(r)

print(f"as shipped (_SM90_TABLE, _SM90_BUSY = {pl._SM90_BUSY}):")
for name, points in sorted(by_cfg.items()):
    print(f"  {name}: rms log error {math.sqrt(loss(points) / len(points)):.3f} over {len(points)} points")
print("left out of the fit (q in registers next to 64x32 tiles), against the shipped model:")
for r in left_out:
    meas, pred = r["median_us"], predict(r)
    print(f"  {r['mode']} b={r['batch']:3d} {r['config']}:{r['units_per_part']} meas {meas:6.1f} pred {pred:6.1f}")


def fit_cfg(points: list[dict]) -> tuple[float, float, float, float]:
    """(loss, tile µs, segment µs, first segment µs) minimizing the squared log error over ``points`` (a coarse
    grid, then a fine one around its best)."""
    cfg = cfg_of(points[0])
    best = None
    grid = itertools.product([x / 4 for x in range(4, 41)], range(0, 16), range(0, 16))
    for tile, seg, first in grid:
        set_entry(cfg, tile, seg, first)
        err = loss(points)
        if best is None or err < best[0]:
            best = (err, tile, seg, first)
    _, t0, s0, f0 = best
    fine = itertools.product(
        [t0 + x / 20 for x in range(-5, 6)],
        [max(0.0, s0 + x / 4) for x in range(-4, 5)],
        [max(0.0, f0 + x / 4) for x in range(-4, 5)],
    )
    for tile, seg, first in fine:
        set_entry(cfg, tile, seg, first)
        err = loss(points)
        if err < best[0]:
            best = (err, tile, seg, first)
    set_entry(cfg, *best[1:])
    return best


busy_best = None
for busy in [float(x) for x in sys.argv[1:] if not x.endswith(".json")] or [0.0, 0.15, 0.3]:
    pl._SM90_BUSY = busy
    total_err = sum(fit_cfg(points)[0] for points in by_cfg.values())
    print(f"busy {busy:.2f}: total squared log error {total_err:.4f}")
    if busy_best is None or total_err < busy_best[0]:
        busy_best = (total_err, busy)
pl._SM90_BUSY = busy_best[1]
print(f"busy factor {busy_best[1]:.2f}")
for name, points in sorted(by_cfg.items()):
    err, tile, seg, first = fit_cfg(points)
    rms = math.sqrt(err / len(points))
    print(
        f"{name}: tile {tile:.2f} us, segment {seg:.2f} us, first segment {first:.2f} us, rms log error {rms:.3f}"
        f" over {len(points)} points"
    )
    for r in sorted(points, key=lambda r: (r["mode"], r["batch"], r["units_per_part"])):
        p = predict(r)
        print(
            f"   {r['mode']} b={r['batch']:3d} upp={r['units_per_part']:3d} meas {r['median_us']:6.1f} pred {p:6.1f}"
            f" {100 * (p / r['median_us'] - 1):+5.0f}%"
        )
print_misranked(records)
