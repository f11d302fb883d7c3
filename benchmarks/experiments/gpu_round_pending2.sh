#!/usr/bin/env bash
# GPU: what changed after 7dd9dde's pending round, in one call: the FlashMLA module stand-in's tests (sparse and
# dense decode through `import flash_mla`, the sitecustomize recipe through a spawned process); the indexer's tests
# with the hostile-count test split per select path; the stress tests after the cross-stream noise fix; the dense
# decode's two sanitizer steps that have not run (the shared-metadata negative control, memcheck under graphs).
# About 7 minutes on a cold machine.
#   bash benchmarks/experiments/gpu_round_pending2.sh SHA   (writes $OUT/pending2.log, $OUT/sanitizers.*)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
echo "commit ${1:-unknown}"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_flash_mla.py -rf 2>&1 | tail -3
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_indexer.py -rf --durations=4 2>&1 | tail -9
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/tools/test_stress.py -rf 2>&1 | tail -3
SANITIZERS="negative-share-metadata-dense memcheck-dense-graphs" bash benchmarks/sanitizers.sh
} 2>&1 | grep -v -E 'Warning[:(]|warner\(' | tee "$OUT/pending2.log"
