#!/usr/bin/env bash
# transformers' DeepSeek-V4 CSA call through wavemla.hf_attention with the index lists from the mask-list kernels:
# every gathered row, the cut forced and the shipped rule (hf_csa_lists.py), from short contexts (where the rule
# keeps every row) to long ones. Output under $OUT: hf_cut.log.
#   OUT=/some/dir bash benchmarks/experiments/gpu_hf_cut.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  step 380 python3 benchmarks/experiments/hf_csa_lists.py --batch 1 8 32 64 --context 3072 4096 8192 32768 --calls 20
} 2>&1 | grep -v -E 'Warning[:(]|warner\(' > "$OUT/hf_cut.log"
cat "$OUT/hf_cut.log"
