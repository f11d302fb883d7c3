#!/usr/bin/env bash
# Decode calls with a new metadata object each (SGLang's DeepSeek-V4 decode) or none, replaying the first call of
# their signature: the launch-replay GPU tests (and the indexer's, whose cache is the same class now), the API and
# FlashMLA-call tests, the stress tests, then host µs per call without replays (WAVEMLA_LAUNCH=triton) and with.
# Output under $OUT: fresh_meta.log.
#   OUT=/some/dir bash benchmarks/experiments/gpu_fresh_meta.sh <git-sha>
set -uo pipefail
BUDGET=${BUDGET:-560}
source benchmarks/budget.sh
{
  machine "$1"
  step 240 python3 -m pytest tests/kernels/test_launch.py tests/test_api.py tests/test_flash_mla.py -q \
    -p no:cacheprovider $X
  step 150 python3 -m pytest tests/tools/test_stress.py -q -p no:cacheprovider -p no:xdist
  step 60 env WAVEMLA_LAUNCH=triton python3 benchmarks/experiments/api_host_cost.py --calls 200
  step 60 python3 benchmarks/experiments/api_host_cost.py --calls 200
} 2>&1 | quiet | tee "$OUT/fresh_meta.log" | tail -40
