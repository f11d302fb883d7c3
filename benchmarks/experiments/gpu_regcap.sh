#!/usr/bin/env bash
# Register cap for occupancy (benchmarks/experiments/regcap_ab.py): the sparse split kernel with maxnreg and the
# planner's slots raised to match, against the default. Output under $OUT: regcap*.{json,log}.
#   OUT=/some/dir bash benchmarks/experiments/gpu_regcap.sh d45d4ef   (run on that commit: its launcher has maxnreg)
set -uo pipefail
BUDGET=${BUDGET:-540}
source benchmarks/budget.sh
echo "commit ${1:-unknown}"
F='Warning[:(]|warner\('
step 240 python3 benchmarks/experiments/regcap_ab.py "$OUT/regcap-h16.json" --points csa:128:1:16 csa:256:1:16 \
  hca:128:1:16 hca:256:1:16 csa:64:1:16 --variants 192:2 168:3 128:4 2>&1 | grep -v -E "$F" | tee "$OUT/regcap-h16.log"
step 150 python3 benchmarks/experiments/regcap_ab.py "$OUT/regcap-h64.json" --points csa:32:1:64 csa:128:1:64 \
  --variants 128:2 2>&1 | grep -v -E "$F" | tee "$OUT/regcap-h64.log"
