#!/usr/bin/env bash
# DeepSeek-V3.2's sparse decode under `wavemla stress --mode v32`: CUDA graphs (list kernel, dense decode, sink)
# replayed on several streams against eager runs, bitwise; then the injected flip and the shared-metadata negative
# control, and the stress tests' V3.2 cases. Output under $OUT: stress_v32.log.
#   OUT=/some/dir bash benchmarks/experiments/gpu_stress_v32.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-420}
source benchmarks/budget.sh
W="python3 -m wavemla.cli stress --mode v32"
{
  machine "${1:-unknown}"
  step 120 $W --replays 4000
  step 60 $W --s-q 2 --out-buffers --batch 9 64 --replays 1000 --seed 1
  step 45 $W --replays 400 --inject-flip 177 --check-every 7
  step 45 $W --share-metadata --batch 64 --splits auto --replays 1000
  step 90 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist -k "v32" -rs
} 2>&1 | quiet > "$OUT/stress_v32.log"
grep -E "^commit|H[12]00|^== |result:|graph [0-9]:|passed|failed|MISMATCH" "$OUT/stress_v32.log" | cut -c1-200 | head -60
