#!/usr/bin/env bash
# compute-sanitizer passes of docs/reliability.md ("Sanitizers") plus the stress harness's negative controls.
# Writes sanitizers.log under $OUT and prints one line per step: the step, its exit code, and what it found.
#   bash benchmarks/sanitizers.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LOG="$OUT/sanitizers.log"
: > "$LOG"
S="python3 -m wavemla.tools.stress"
CS="compute-sanitizer --error-exitcode 99"
# racecheck prints 100 hazards by default: every one is needed to tell Triton's partition-state reports from others
compute-sanitizer --help 2>&1 | grep -q -- "--print-limit" && CS="$CS --print-limit 1000000"
step() {  # step LIMIT NAME COMMAND...
  local limit=$1 name=$2; shift 2
  echo "== $name: $*" >> "$LOG"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  local found
  found=$(sed -n '/^== '"$name"':/,$p' "$LOG" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|result:" | tail -1)
  if [[ $name == racecheck-* ]]; then  # racecheck's exit code: 99 on any hazard; the classes tell them apart
    sed -n '/^== '"$name"':/,$p' "$LOG" > "$OUT/$name.tmp"
    found="$found | $(python3 -m wavemla.tools.racecheck "$OUT/$name.tmp" | grep -E "partition-state:|other:|result:" \
      | tr -s ' ' | paste -sd' ')"
    rm -f "$OUT/$name.tmp"
  fi
  printf '%-34s rc=%-3s %s\n' "$name" "$rc" "$found" | tee -a "$OUT/sanitizers.txt"
}
# SANITIZERS (default: all) picks steps by name, e.g. SANITIZERS="racecheck-csa negative-share-pool"
want() { [ -z "${SANITIZERS:-}" ] || [[ " $SANITIZERS " == *" $1 "* ]]; }
# negative controls: a FAIL (non-zero exit, mismatches) is the expected outcome
want negative-share-pool && step 60 negative-share-pool $S --share-pool --replays 2000
want negative-share-metadata && step 60 negative-share-metadata $S --share-metadata --batch 64 --splits 3 --replays 2000
want negative-share-metadata-dense && step 60 negative-share-metadata-dense $S --mode dense --share-metadata --batch 64 --splits 3 --replays 2000
want self-test-inject-flip && step 30 self-test-inject-flip $S --small --replays 40 --inject-flip 17
# graphs on the caching allocator (cudaMallocAsync pools fail Triton's launcher pointer check under the sanitizer)
want memcheck-csa && step 90 memcheck-csa $CS --tool memcheck $S --small --mode csa --replays 20
want memcheck-hca && step 90 memcheck-hca $CS --tool memcheck $S --small --mode hca --replays 20
want memcheck-swa-bf16 && step 90 memcheck-swa-bf16 $CS --tool memcheck $S --small --mode swa --bf16 --replays 20
# eager calls with caching off: every tensor its own allocation, so a read past any tensor is seen
want memcheck-exact-csa && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${MEMCHECK_LIMIT:-90} memcheck-exact-csa $CS --tool memcheck $S --small --mode csa --no-graph --replays 6
want memcheck-exact-hca && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 memcheck-exact-hca $CS --tool memcheck $S --small --mode hca --no-graph --replays 6
want initcheck-eager && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 initcheck-eager $CS --tool initcheck $S --small --no-graph --replays 6
# the indexer over MXFP4 index-K rows (SGLang's page-split layout; byte-permute decode of the e2m1 codes on sm_89+)
want memcheck-csa-mxfp4 && step 90 memcheck-csa-mxfp4 $CS --tool memcheck $S --small --mode csa --index-k mxfp4 --replays 20
want memcheck-exact-csa-mxfp4 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step 90 memcheck-exact-csa-mxfp4 $CS --tool memcheck $S --small --mode csa --index-k mxfp4 --no-graph --replays 6
want racecheck-csa-mxfp4 && step ${RACECHECK_LIMIT:-150} racecheck-csa-mxfp4 $CS --tool racecheck --racecheck-report hazard $S --small --mode csa --index-k mxfp4 --replays 6
want racecheck-csa && step ${RACECHECK_LIMIT:-150} racecheck-csa $CS --tool racecheck --racecheck-report hazard $S --small --mode csa --replays 6
want racecheck-hca-bf16 && step ${RACECHECK_LIMIT:-150} racecheck-hca-bf16 $CS --tool racecheck --racecheck-report hazard $S --small --mode hca --bf16 --replays 6
want synccheck && step 90 synccheck $CS --tool synccheck $S --small --replays 6
# the q conversion kernel with the split kernel launched behind it (dependent launch, first tile prefetched) and the
# combine behind that: CSA b=32, 64x32 tiles, 5 per program
Q="python3 benchmarks/experiments/partition_sweep.py --reps 2 --points csa:32:default"
want memcheck-qwait && step 120 memcheck-qwait $CS --tool memcheck $Q
want racecheck-qwait && step ${RACECHECK_LIMIT:-150} racecheck-qwait $CS --tool racecheck --racecheck-report hazard $Q
# batch-invariant pieces merged inside their program and by the combine (the tests that pin both paths)
M="python3 -m pytest tests/kernels/test_batch_invariance.py -k merged -q -p no:cacheprovider -p no:xdist"
want memcheck-merge && step 120 memcheck-merge $CS --tool memcheck $M
want racecheck-merge && step ${RACECHECK_LIMIT:-150} racecheck-merge $CS --tool racecheck --racecheck-report hazard $M
# the in-kernel merges of cut tokens (two pieces by _merge_two_out, three by the general merge; 64-row tiles)
TP="python3 -m pytest tests/kernels/test_sparse_decode.py -k merge -q -p no:cacheprovider -p no:xdist"
want memcheck-pair && step 120 memcheck-pair $CS --tool memcheck $TP
want racecheck-pair && step ${RACECHECK_LIMIT:-150} racecheck-pair $CS --tool racecheck --racecheck-report hazard $TP
# staged FP8 16x32 tiles (raw rows through cp.async, index entries a chunk at a time): whole and cut tokens, a list
# past one chunk, bf16 q converted in registers (the --small stress runs above plan them too: 16 heads)
ST="python3 -m pytest tests/kernels/test_sparse_decode.py -k staged -q -p no:cacheprovider -p no:xdist"
want memcheck-staged && step 150 memcheck-staged $CS --tool memcheck $ST
want racecheck-staged && step ${RACECHECK_LIMIT:-150} racecheck-staged $CS --tool racecheck --racecheck-report hazard $ST
# the sparse prefill: every tile that fits the GPU, d_qk 512 and 576, invalid indices and lengths
PF="python3 benchmarks/sanitize_prefill.py"
want memcheck-prefill && step 120 memcheck-prefill $CS --tool memcheck $PF
want racecheck-prefill && step ${RACECHECK_LIMIT:-150} racecheck-prefill $CS --tool racecheck --racecheck-report hazard $PF
# 64-head FP8 tiles passing P to the PV dot through per-program scratch rows (sm_90), whole and cut tokens
PS="python3 -m pytest tests/kernels/test_sparse_decode.py -k scratch_rows -q -p no:cacheprovider -p no:xdist"
want memcheck-pscratch && step 120 memcheck-pscratch $CS --tool memcheck $PS
want racecheck-pscratch && step ${RACECHECK_LIMIT:-150} racecheck-pscratch $CS --tool racecheck --racecheck-report hazard $PS
# the warp-specialized sparse kernel (sm_90, Gluon) at CSA b = 8 (tokens cut between programs) and without a sink
WS=(python3 -m pytest tests/kernels/test_sparse_decode_ws.py -k "csa-b8 or no-sink" -q -p no:cacheprovider -p no:xdist)
want racecheck-ws && step ${RACECHECK_LIMIT:-150} racecheck-ws $CS --tool racecheck --racecheck-report hazard "${WS[@]}"
# dense decode: scheduler, split and combine kernels, bf16, FP8 V3.2 and per-tensor FP8 rows, lengths 0..1000
want memcheck-dense && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${MEMCHECK_LIMIT:-90} memcheck-dense $CS --tool memcheck python3 benchmarks/sanitize_dense.py
want racecheck-dense && step ${RACECHECK_LIMIT:-150} racecheck-dense $CS --tool racecheck --racecheck-report hazard python3 benchmarks/sanitize_dense.py
# ... and in CUDA graphs on two streams (the scheduler's work ranges written on every replay)
want memcheck-dense-graphs && step 90 memcheck-dense-graphs $CS --tool memcheck $S --small --mode dense --replays 20
# DeepSeek-V3.2's sparse decode: the compacted lists (invalid entries, lengths from negative to past topk), the dense
# decode over them and the sink's scale into outputs of other strides; eager calls with caching off
V3="python3 -m pytest -q -p no:cacheprovider -p no:xdist tests/kernels/test_v32_lists.py::test_lists_match_the_sort
 tests/kernels/test_v32_lists.py::test_sink_scale_in_place_and_into_strided_out
 tests/test_sparse_v32.py::test_topk_length_sink_and_empty_tokens tests/test_sparse_v32.py::test_sink_with_the_callers_out
 tests/test_sparse_v32.py::test_invalid_entries_are_never_read"
want memcheck-v32 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${MEMCHECK_LIMIT:-150} memcheck-v32 $CS --tool memcheck $V3
exit 0
