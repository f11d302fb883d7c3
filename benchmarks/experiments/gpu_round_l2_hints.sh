#!/usr/bin/env bash
# GPU: L2 eviction policies in the split kernel (gathered FP8 rows evict_first, partials evict_last, 64-row tiles):
# kernel tests, same bits and time against the kernel without them (merge_ab.py, L2 flushed and not), the
# batch-invariant cost, the stress harness, the DSV4 h=64 tables, the hostile-input property test, within a budget.
# Run materialize.sh here first and carry benchmarks/experiments/variants.
#   BUDGET=480 bash benchmarks/experiments/gpu_round_l2_hints.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider
step 90 python3 benchmarks/experiments/merge_ab.py "$OUT/l2_ab.json" --points csa:128:2 csa:256:2 hca:32:2 csa:32:2 \
  hca:128:2 hca:256:2 csa:133:0 csa:148:0 hca:133:0 csa:64:0 csa:96:0 csa:128:0 csa:256:0 hca:64:0 hca:128:0 \
  csa:32:0 csa:8:0 csa:1:0
step 30 python3 benchmarks/experiments/merge_ab.py "$OUT/l2_ab_noflush.json" --no-flush --points csa:128:0 csa:128:2 \
  csa:133:0 hca:128:0
step 50 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json"
step 60 python3 -m wavemla.cli stress
step 25 python3 -m wavemla.cli stress --batch-invariant --replays 2000
step 100 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 \
  --reps 20 --json "$OUT/bench_h64.json" --label l2-hints
step 90 python3 -m pytest tests/test_hostile_inputs.py -q -x -p no:cacheprovider -p no:xdist --tb=short
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/l2_hints.log"
grep -E "^== |passed|failed|bits|^(csa|hca) |ratio|result|mismatch|^E |Falsifying" "$OUT/l2_hints.log" | cut -c1-170
