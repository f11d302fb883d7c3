#!/usr/bin/env bash
# GPU: batch-invariant pieces merged from registers by the program that computes all of a token's pieces (the last
# piece never stored): kernel tests, same bits and time against the stored-piece merge (launch_ab.py
# --kw merge_in_registers=0), the batch-invariant cost, the batch-invariant stress, memcheck and racecheck over
# the in-program merge tests, within a budget.
#   BUDGET=480 bash benchmarks/experiments/gpu_round_merge_regs.sh   (writes under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
CS="compute-sanitizer --error-exitcode 99"
K="tests/kernels/test_batch_invariance.py -q -p no:cacheprovider -p no:xdist -k merged_in_their_program"
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
step 150 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py \
  tests/kernels/test_batch_invariance.py tests/kernels/test_numerics.py -q $X -p no:cacheprovider --tb=short
step 90 python3 benchmarks/experiments/launch_ab.py "$OUT/merge_regs_ab.json" --kw merge_in_registers=0 --points \
  csa:128:1:64:2 csa:256:1:64:2 hca:128:1:64:2 hca:256:1:64:2 csa:128:1:64:3 csa:256:1:64:3 hca:256:1:64:3 \
  csa:64:1:64:2 csa:128:1:64:0
step 60 python3 benchmarks/bi_cost.py --batch 32 64 128 256 --reps 15 --json "$OUT/bi_cost.json"
step 30 python3 -m wavemla.cli stress --batch-invariant --replays 2000
step 90 $CS --tool memcheck python3 -m pytest $K
step 120 $CS --tool racecheck --racecheck-report hazard python3 -m pytest $K
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/merge_regs.log"
grep -E "^== |passed|failed|bits|^(csa|hca) |ratio|result|mismatch|SUMMARY|^E " "$OUT/merge_regs.log" | cut -c1-190
