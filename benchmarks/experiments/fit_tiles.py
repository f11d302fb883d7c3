"""Choose the sm_90 FP8 tile costs of 64x64 and 64x32 plans (``_SM90_TABLE`` in wavemla/plan.py: tile, segment and
first-segment µs) from measured partitions, the merge terms left as shipped.

    PYTHONPATH=src python3 benchmarks/experiments/fit_tiles.py benchmarks/results/2026-12-01-h200-refit7.json \\
        benchmarks/results/2026-12-01-h200-tile32-ab.json benchmarks/results/2026-12-01-h200-exact-pieces-ab.json

Every point must have run the current kernel (``partition_sweep.py`` JSON). For each value set of a grid it plans every
measured (shape, batch) and scores the pick against the fastest measured partition there (``partition_model.score``:
regret, unmeasured picks, pairs measured >3% apart ranked the wrong way round). Sets are ranked by (unmeasured picks,
regret, pairs ranked wrong); the best fifteen are printed, then the shipped set's picks and misranked pairs.
"""

import dataclasses
import itertools
import sys
from pathlib import Path

import wavemla.plan as pl

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import load_groups, score

K64, K32 = (64, 64, 8, 1, True), (64, 32, 8, 1, True)
SHIPPED = {k: pl._SM90_TABLE[k] for k in (K64, K32)}


def set_tiles(t64: float, s64: float, f64: float, t32: float, s32: float, f32: float) -> None:
    pl._SM90_TABLE[K64] = dataclasses.replace(SHIPPED[K64], tile_us=t64, segment_us=s64, first_segment_us=f64)
    pl._SM90_TABLE[K32] = dataclasses.replace(SHIPPED[K32], tile_us=t32, segment_us=s32, first_segment_us=f32)
    pl.clear_caches()


groups = load_groups(sys.argv[1:])
print(f"{len(groups)} (shape, batch) groups, {sum(len(rs) for rs in groups.values())} partitions")
grid = itertools.product(
    [4.0, 4.25, 4.5, 4.75, 5.0], [2.5, 3.0, 3.5, 4.0], [6.0, 7.0, 8.25, 9.5],  # 64x64: tile, segment, first segment
    [2.8, 3.0, 3.2, 3.4], [2.25, 2.75, 3.25, 3.75], [0.0, 1.5],  # 64x32
)  # fmt: skip
ranked = []
for values in grid:
    set_tiles(*values)
    unmeasured, regret, wrong, total, rms, _ = score(groups)
    ranked.append((unmeasured, round(regret, 6), wrong, total, rms, values))
ranked.sort(key=lambda x: x[:3])
print("64x64 tile, segment, first; 64x32 tile, segment, first (us): unmeasured picks, regret, pairs ranked wrong")
for unmeasured, regret, wrong, total, _, values in ranked[:15]:
    print(f"  {values}: {unmeasured}, {regret:.3f}, {wrong} of {total}")
for k, res in SHIPPED.items():
    pl._SM90_TABLE[k] = res
pl.clear_caches()
unmeasured, regret, wrong, total, rms, notes = score(groups)
shipped = tuple(getattr(SHIPPED[k], f) for k in (K64, K32) for f in ("tile_us", "segment_us", "first_segment_us"))
print(f"shipped {shipped}: {unmeasured} unmeasured picks, regret {regret:.3f}, {wrong} of {total} pairs ranked wrong")
print("\n".join("  " + n for n in notes))
