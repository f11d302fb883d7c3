#!/usr/bin/env bash
# transformers' decode-step calls with the mask-list kernels' launches replayed (kernels.launch) against a base tree
# whose launches all go through Triton: the mask-list and hf tests on the GPU, then hf_call_host.py under each tree,
# alternated over three rounds. BASE is a folder holding the base tree's src/ (e.g. `git archive SHA src | tar -x -C
# old-src`, untracked, so that it travels with the call). Output under $OUT: hf-replay.log.
#   BASE=old-src OUT=/some/dir bash benchmarks/experiments/gpu_hf_replay.sh <git-sha> <base-sha>
set -uo pipefail
BUDGET=${BUDGET:-400}
source benchmarks/budget.sh
{
  machine "${1:-unknown}"
  echo "base ${2:-unknown} from ${BASE:?BASE: the folder of the base tree}"
  step 150 python3 -m pytest tests/kernels/test_mask_lists.py tests/test_hf_attention.py -q -p no:cacheprovider $X
  env PYTHONPATH="$PWD/$BASE/src" python3 -c "import wavemla.kernels.mask_lists as m; print('base replays:', hasattr(m, '_REPLAYS'))"
  python3 -c "import wavemla.kernels.mask_lists as m; print('new replays:', hasattr(m, '_REPLAYS'))"
  for round in 1 2 3; do
    echo "== round $round: base"
    step 60 env PYTHONPATH="$PWD/$BASE/src" python3 benchmarks/experiments/hf_call_host.py
    echo "== round $round: new"
    step 60 python3 benchmarks/experiments/hf_call_host.py
  done
} 2>&1 | quiet > "$OUT/hf-replay.log"
cat "$OUT/hf-replay.log"
