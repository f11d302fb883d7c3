#!/usr/bin/env bash
# Write the frozen kernel variants that diag.py times into benchmarks/experiments/variants/ (git-ignored), from the
# commit that last held them as files. Run it here, then pass `carry=["benchmarks/experiments/variants"]` (or copy
# the folder) to the GPU machine, which has no git history.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p variants
for v in sd_v0 sd_v2 sd_v3 sd_v3f; do
  git show "8427cc8:benchmarks/experiments/$v.py" > "variants/$v.py"
done
# the e4m3-conversion / prefetch round (flags native, prefetch, layout3)
git show "0b0479a:benchmarks/experiments/sd_next.py" > variants/sd_next.py
# the sparse combine before the one-load merge (partition_sweep.py ':loop-combine')
git show "32ccee3:src/wavemla/kernels/combine.py" > variants/combine_loop.py
# the split kernel whose merges load one piece per memory round trip (merge_ab.py --old)
git show "2fd72ff:src/wavemla/kernels/sparse_decode.py" > variants/sd_2fd72ff.py
# the split kernel before the two-piece merge and the returned count (merge_race.py --old)
git show "e233f07:src/wavemla/kernels/sparse_decode.py" > variants/sd_e233f07.py
echo "wrote $(ls variants | tr '\n' ' ')"
