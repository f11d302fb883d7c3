"""Choose the merge terms of the planner's sm_90 model (``_MERGE_PAIR_US``, ``_MERGE_US``, ``_MERGE_PIECE_US`` in
wavemla/plan.py) from a measured partition grid, the tile and segment costs left as shipped.

    PYTHONPATH=src python3 benchmarks/experiments/fit_merge.py benchmarks/results/2026-12-01-h200-refit7.json

Every point of the given ``partition_sweep.py`` JSON must have run the launcher's current path (a grid of this
build). For each triple of a grid it plans every batch of the grid and scores the pick against the grid's fastest
partition at that batch: the regret (sum over batches of pick / fastest - 1, where the pick was measured), the
batches whose pick the grid did not measure, and, as in fit_sm90.py, the pairs of partitions of one batch measured
>3% apart that the model ranks the wrong way round, and the rms log error over the 64-row points (the only ones that
merge in the kernel). Triples are ranked by (unmeasured picks, regret); the best ten are printed, then the shipped
triple's picks and misranked pairs.
"""

import itertools
import sys
from pathlib import Path

import wavemla.plan as pl

sys.path.insert(0, str(Path(__file__).parent))
from partition_model import load_groups, score


def set_merge(triple: tuple[float, float, float]) -> None:
    pl._MERGE_PAIR_US, pl._MERGE_US, pl._MERGE_PIECE_US = triple
    pl.clear_caches()


groups = load_groups(sys.argv[1:])
shipped = (pl._MERGE_PAIR_US, pl._MERGE_US, pl._MERGE_PIECE_US)
# the model before the measured terms: every merge priced by its bytes (partials read back from L2, output written)
measured_merge = pl._Coster._merge
pl._Coster._merge = lambda self, pieces: pieces * self.seg_cut / pl._L2_OVER_DRAM_PER_SM + self.seg_whole
pl.clear_caches()
unmeasured, regret, wrong, total, rms, notes = score(groups)
print(f"merge priced by its bytes: {unmeasured} unmeasured picks, regret {regret:.3f}, {wrong} of {total} pairs ranked")
print("\n".join("  " + n for n in notes if "misranked" not in n))
pl._Coster._merge = measured_merge
ranked = []
for triple in itertools.product([0.0, 0.5, 1.0, 2.0, 3.0], [2.0, 4.0, 5.0, 6.0, 8.0], [0.0, 1.0, 2.0, 3.0, 4.4]):
    set_merge(triple)
    ranked.append((*score(groups)[:5], triple))
ranked.sort(key=lambda x: (x[0], x[1], x[2]))
print("pair, general, per piece (us): unmeasured picks, regret, pairs ranked wrong, rms log error (64-row points)")
for unmeasured, regret, wrong, total, rms, triple in ranked[:10]:
    print(f"  {triple}: {unmeasured}, {regret:.3f}, {wrong} of {total}, {rms:.3f}")
set_merge(shipped)
unmeasured, regret, wrong, total, rms, notes = score(groups)
print(f"shipped {shipped}: {unmeasured} unmeasured picks, regret {regret:.3f}, {wrong} of {total} pairs ranked wrong")
print("\n".join("  " + n for n in notes))
