"""Fit the planner's costs of the warp-specialized sm_90 sparse kernel (``_SM90_WS``, ``_SM90_WS_BUSY``,
``_SM90_WS_COMBINE_US`` and ``_SM90_WS_WIDE_US`` in wavemla/plan.py) to a measured partition grid
(``partition_sweep.py`` JSON of 64x64 points, from ``gpu_ws_grid.sh``), by coordinate descent on the squared log
error of predicted against measured time.

    PYTHONPATH=src python3 benchmarks/experiments/fit_ws.py benchmarks/results/2026-12-02-h200-ws-grid-c6b0e72.json

Prints the shipped values' error, the fit, every point's residual, and how often the fitted model ranks two measured
partitions of one batch (>3% apart) the wrong way round.
"""

import dataclasses
import json
import math
import sys
from pathlib import Path

import wavemla.plan as pl

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import predict, print_misranked

records = []
for a in sys.argv[1:]:
    for r in json.loads(Path(a).read_text())["records"]:
        if "provider" in r:  # a `wavemla bench` curve: the planner's own plans, every third batch
            if r["provider"] != "wavemla" or r["batch"] % 3:
                continue
            r = {**r, "spec": "curve", "ok": True}
        if r["ok"] and r["config"].startswith("64x64"):
            records.append(r)
GRID = {
    "tile": [2.0 + x / 10 for x in range(0, 51)],
    "segment": [x / 2 for x in range(0, 31)],
    "first": [x / 2 for x in range(0, 51)],
    "busy": [x / 20 for x in range(0, 17)],
    "combine": [x / 2 for x in range(0, 31)],
    "wide": [x / 10 for x in range(0, 31)],
}


def apply(v: dict) -> None:
    pl._SM90_WS = dataclasses.replace(pl._SM90_WS, tile_us=v["tile"], segment_us=v["segment"],
                                      first_segment_us=v["first"])  # fmt: skip
    pl._SM90_WS_BUSY = v["busy"]
    pl._SM90_WS_COMBINE_US = v["combine"]
    pl._SM90_WS_WIDE_US = v["wide"]
    pl.clear_caches()


def loss(v: dict) -> float:
    apply(v)
    return sum(math.log(predict(r) / r["median_us"]) ** 2 for r in records)


shipped = {"tile": pl._SM90_WS.tile_us, "segment": pl._SM90_WS.segment_us, "first": pl._SM90_WS.first_segment_us,
           "busy": pl._SM90_WS_BUSY, "combine": pl._SM90_WS_COMBINE_US, "wide": pl._SM90_WS_WIDE_US}  # fmt: skip
print(f"shipped {shipped}: rms log error {math.sqrt(loss(shipped) / len(records)):.3f} over {len(records)} points")
best = {"tile": 4.0, "segment": 5.0, "first": 5.0, "busy": 0.2, "combine": 3.0, "wide": 1.0}
err = loss(best)
for _ in range(10):
    moved = False
    for name, values in GRID.items():
        for x in values:
            e = loss({**best, name: x})
            if e < err - 1e-12:
                err, best, moved = e, {**best, name: x}, True
    if not moved:
        break
apply(best)
print(f"fit {best}: rms log error {math.sqrt(err / len(records)):.3f}")
for r in sorted(records, key=lambda r: (r["mode"], r.get("s_q", 1), r.get("h_q", 64), r["batch"], r["units_per_part"])):
    p = predict(r)
    print(f"   {r['mode']} s_q={r.get('s_q', 1)} h={r.get('h_q', 64):3d} b={r['batch']:3d} upp={r['units_per_part']:3d}"
          f" meas {r['median_us']:6.1f} pred {p:6.1f}"
          f" {100 * (p / r['median_us'] - 1):+5.0f}%")  # fmt: skip
print_misranked(records)
