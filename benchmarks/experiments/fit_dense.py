"""How well the dense planner's cost model ranks the tiles it chooses between, against a measured grid of every
candidate tile (gpu_round_dense_cal.sh: each tile forced, the planner picking its parts), and a search over the
constants fitted to it.

    PYTHONPATH=src python3 benchmarks/experiments/fit_dense.py benchmarks/results/2026-11-30-h200-dense-cal-*.json

For every shape with b >= 8 (at b = 1 the parts, not the tile, decide), the model's pick among the measured
(tile, parts) points is compared with the fastest measured: a miss is a pick more than 3% slower. Prints the
shipped constants' misses (each named), then the count, the geometric-mean and the worst ratio of pick to best for
a grid of _DENSE_ONE_PROGRAM_DRAM, _DENSE_WGMMA_EFFICIENCY and _DENSE_MMA_EFFICIENCY.
"""

import itertools
import json
import math
import sys

import wavemla.plan as pl
from wavemla.device import get_spec

DEVICE = get_spec("h200")
PAGE = 64  # wavemla bench --dense: its block table has one spare page past s_k


def load(paths: list[str]) -> dict[tuple, list[tuple[str, int, float]]]:
    best: dict[tuple, float] = {}
    for path in paths:
        with open(path) as f:
            records = json.load(f)["records"]
        for r in records:
            if r["lengths"] != "uniform":
                continue
            k = (r["kv_format"], r["h_q"], r["batch"], r["s_k"], r["config"], r["parts"])
            best[k] = min(best.get(k, math.inf), r["median_us"])
    groups: dict[tuple, list[tuple[str, int, float]]] = {}
    for k, v in best.items():
        groups.setdefault(k[:4], []).append((k[4], k[5], v))
    return groups


def predict(fmt: str, h: int, b: int, s_k: int, cfg_name: str, parts: int) -> float | None:
    w = pl.DenseWorkload(batch=b, s_q=1, h_q=h, d_qk=576, max_seqlen=s_k + PAGE, is_fp8=fmt == "fp8", dtype="bf16")
    cfg = pl.KernelConfig(*(int(x) for x in cfg_name.split("x")))
    fit = pl._dense_fit(cfg, w, DEVICE, [])
    if fit is None:
        return None
    res, occ = fit
    return pl._dense_plan_config(w, DEVICE, cfg, res, occ, parts * math.ceil(w.rows / cfg.block_h)).predicted_us


def evaluate(groups: dict, verbose: bool = False) -> tuple[int, int, float, float]:
    ratios, misses = [], 0
    for key, opts in sorted(groups.items()):
        if key[2] < 8:
            continue
        points = [(predict(*key, c, p), us, c, p) for c, p, us in opts]
        points = [x for x in points if x[0] is not None]
        pick = min(points, key=lambda x: x[0])
        best = min(points, key=lambda x: x[1])
        ratios.append(pick[1] / best[1])
        if ratios[-1] > 1.03:
            misses += 1
            if verbose:
                print(f"  miss {key}: pick {pick[2]}[{pick[3]}] {pick[1]:.1f} us,", end=" ")
                print(f"best {best[2]}[{best[3]}] {best[1]:.1f}")
    return misses, len(ratios), math.exp(sum(map(math.log, ratios)) / len(ratios)), max(ratios)


def main() -> None:
    groups = load(sys.argv[1:])
    m, n, gm, worst = evaluate(groups, verbose=True)
    print(f"shipped: {m} misses of {n}, pick/best geomean {gm:.4f}, worst {worst:.3f}")
    for one, wg, mma in itertools.product([1.0, 0.9, 0.85, 0.8], [0.6, 0.7, 0.8, 0.9], [0.5, 0.4]):
        pl._DENSE_ONE_PROGRAM_DRAM, pl._DENSE_WGMMA_EFFICIENCY, pl._DENSE_MMA_EFFICIENCY = one, wg, mma
        pl.clear_dense_caches()
        m, n, gm, worst = evaluate(groups)
        print(f"one-program {one:.2f} wgmma {wg:.1f} mma {mma:.1f}: {m} misses of {n},", end=" ")
        print(f"geomean {gm:.4f}, worst {worst:.3f}")


if __name__ == "__main__":
    main()
