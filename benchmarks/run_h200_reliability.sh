#!/usr/bin/env bash
# Reliability part of the H200 run, one call: the stress tests alone (no other GPU process beside them), racecheck
# and the negative controls of benchmarks/sanitizers.sh, and a short layer benchmark whose traces become CPU fixtures.
#   bash benchmarks/run_h200_reliability.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  echo "== stress tests (serial)"
  timeout 120 python3 -m pytest tests/tools/test_stress.py -m gpu -q -p no:cacheprovider -p no:xdist 2>&1 | tail -15
  echo "== stress tests exit ${PIPESTATUS[0]}"  # 124: cut at 120 s
  echo "== sanitizers"
  RACECHECK_LIMIT=50 SANITIZERS="racecheck-csa racecheck-hca-bf16 negative-share-pool negative-share-metadata" \
    timeout 150 bash benchmarks/sanitizers.sh
  echo "== sanitizers exit $?"  # 124: cut at 150 s, so the steps after the last line above did not run
  echo "== layer bench (trace fixtures)"
  timeout 70 python3 -m wavemla.cli layer-bench --mode csa --batch 1 32 64 --context 8192 --reps 3 \
    --profile-steps 2 --out "$OUT/layer" 2>&1 | tail -12
  echo "== layer bench exit ${PIPESTATUS[0]}"
} > "$OUT/reliability.log" 2>&1
tar czf /tmp/layer.tgz -C "$OUT" layer && rm -rf "$OUT/layer" && mv /tmp/layer.tgz "$OUT/layer.tgz"
cat "$OUT/reliability.log"
