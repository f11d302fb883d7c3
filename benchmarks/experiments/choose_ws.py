"""Choose the warp-specialized kernel's cost values (``_SM90_WS`` and its terms in wavemla/plan.py) by the picks they
make: over every (shape, batch) measured with more than one plan on the H200 (the partition grid, the b = 1..256
curves, the re-measured moved plans and the kernel's A/B rows with it on), the summed regret (pick / fastest - 1)
where the pick was measured, the count of picks never measured, and the rms log error of the 64x64 points, for each
value set of a grid around the fit.

    PYTHONPATH=src python3 benchmarks/experiments/choose_ws.py GRID.json CURVE.json ... [--top 15]
    PYTHONPATH=src python3 benchmarks/experiments/choose_ws.py GRID.json CURVE.json ... --picks

Prints the value sets ranked by (unmeasured picks, regret, rms); with ``--picks`` only the shipped values' score and
the points whose pick is more than 3% slower than the fastest plan measured there.
"""

import argparse
import dataclasses
import itertools
import json
import math
import sys
from pathlib import Path

import wavemla.plan as pl

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import DEVICE, predict, workload

ap = argparse.ArgumentParser()
ap.add_argument("paths", nargs="+")
ap.add_argument("--top", type=int, default=15)
ap.add_argument("--picks", action="store_true", help="the shipped values' picks more than 3%% off, then stop")
args = ap.parse_args()
groups: dict[tuple, dict[tuple[str, int], dict]] = {}
for path in args.paths:
    data = json.loads(Path(path).read_text())
    for r in data.get("records", data.get("rows", [])):  # partition_sweep / bench records, sparse_ws_ab.py rows
        if r.get("provider", "wavemla") != "wavemla" or not r.get("ok", True) or r.get("ws", "on") != "on":
            continue
        key = (r["mode"], r.get("s_q", 1), r.get("h_q", 64), r["batch"])
        groups.setdefault(key, {})[(r["config"], r["units_per_part"])] = r  # later files win
multi = {k: list(v.values()) for k, v in groups.items() if len(v) > 1}
points = [r for v in groups.values() for r in v.values() if r["config"].startswith("64x64")]
print(f"{len(multi)} (shape, batch) groups measured with 2+ plans; {len(points)} 64x64 points")


def score(v: dict) -> tuple[int, float, float]:
    pl._SM90_WS = dataclasses.replace(pl._SM90_WS, tile_us=v["tile"], segment_us=v["segment"],
                                      first_segment_us=v["first"])  # fmt: skip
    pl._SM90_WS_BUSY, pl._SM90_WS_COMBINE_US, pl._SM90_WS_WIDE_US = v["busy"], v["combine"], v["wide"]
    pl.clear_caches()
    unmeasured, regret = 0, 0.0
    for rs in multi.values():
        p = pl.plan(workload(rs[0]), DEVICE)
        pick = next((r for r in rs if (r["config"], r["units_per_part"]) == (str(p.config), p.units_per_part)), None)
        if pick is None:
            unmeasured += 1
        else:
            regret += pick["median_us"] / min(r["median_us"] for r in rs) - 1
    rms = math.sqrt(sum(math.log(predict(r) / r["median_us"]) ** 2 for r in points) / len(points))
    return unmeasured, regret, rms


shipped = {"tile": pl._SM90_WS.tile_us, "segment": pl._SM90_WS.segment_us, "first": pl._SM90_WS.first_segment_us,
           "busy": pl._SM90_WS_BUSY, "combine": pl._SM90_WS_COMBINE_US, "wide": pl._SM90_WS_WIDE_US}  # fmt: skip
u0, regret0, rms0 = score(shipped)
print(f"shipped {shipped} -> unmeasured {u0}, regret {regret0:.3f}, rms {rms0:.3f}")
if args.picks:
    for key, rs in sorted(multi.items()):
        p = pl.plan(workload(rs[0]), DEVICE)
        pick = next((r for r in rs if (r["config"], r["units_per_part"]) == (str(p.config), p.units_per_part)), None)
        best = min(rs, key=lambda r: r["median_us"])
        if pick is not None and pick["median_us"] > 1.03 * best["median_us"]:
            print(
                f"{key}: pick {pick['config']}:{pick['units_per_part']} {pick['median_us']:.1f} us, fastest "
                f"{best['config']}:{best['units_per_part']} {best['median_us']:.1f} us"
            )
    sys.exit(0)
grid = {"tile": [3.5, 3.6, 3.7, 3.8], "segment": [2.5, 3.0, 3.5, 4.0, 4.5], "first": [4.0, 5.0, 5.5, 6.0, 7.0],
        "busy": [0.2, 0.25, 0.3], "combine": [0.0, 1.0, 2.0], "wide": [1.0, 1.2, 1.5]}  # fmt: skip
results = []
for values in itertools.product(*grid.values()):
    v = dict(zip(grid, values, strict=True))
    results.append((score(v), v))
results.sort(key=lambda x: x[0])
for (u, regret, rms), v in results[: args.top]:
    print(f"unmeasured {u:3d} regret {regret:.3f} rms {rms:.3f}  {v}")
