# Sourced by the GPU call scripts that run inside a time budget (set BUDGET, in seconds, before sourcing; default
# 480): makes OUT (default ./gpu-lane-out), puts the checkout's src first on PYTHONPATH, unbuffers Python, sets X to
# pytest-xdist's "-n 8" where xdist is installed (else empty), and defines step, machine (the run's header: the
# commit given, the GPU, torch and Triton), curve and curve_part (a sparse decode curve over b = 1..256 or a range of
# it, labelled with $SHA) and quiet (a filter that drops Python's and Triton's warning lines).
OUT=${OUT:-$PWD/gpu-lane-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
X=""
python3 -c "import xdist" 2>/dev/null && X="-n 8"
END=$((SECONDS + ${BUDGET:-480}))
step() {  # step LIMIT COMMAND...: runs COMMAND under LIMIT seconds capped by the budget left, or skips it
  local limit=$1; shift
  local left=$((END - SECONDS))
  [ "$left" -lt 10 ] && { echo "== skipped (budget): $*"; return; }
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== exit $? ($((SECONDS - start))s)"
}
machine() {  # machine SHA: what a run's log starts with
  echo "commit ${1:-unknown}"
  nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | head -1
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
}
curve() {  # curve LIMIT MODE HEADS S_Q: the sparse decode's b = 1..256 curve (median of 5) into $OUT/curve_MODE_hHEADS_sS_Q.json
  curve_part "$1" "$2" "$3" "$4" 1 256
}
curve_part() {  # curve_part LIMIT MODE HEADS S_Q FIRST LAST: a curve over b = FIRST..LAST (median of 5) into
  # $OUT/curve_MODE_hHEADS_sS_Q.json, labelled with $SHA
  step "$1" python3 -m wavemla.cli bench --mode "$2" --s-q "$4" --heads "$3" --batch $(seq "$5" "$6") --reps 5 \
    --json "$OUT/curve_$2_h$3_s$4.json" --label "${SHA:-unknown}"
}
quiet() {  # ... | quiet: the lines in, less the warnings Python and Triton print (and the source lines they quote)
  grep -v -E 'Warning[:(]|warner\(|_warn_once'
}
