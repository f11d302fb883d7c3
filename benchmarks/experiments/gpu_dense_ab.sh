#!/usr/bin/env bash
# Dense decode on one H200, old kernel (git HEAD) against the working tree, bf16 rows, in under 150 s:
#   1. the dense GPU tests (60 s);
#   2. the working tree: b 32/128 x s_k 4K/16K x h 16/64/128, s_q 1, uniform lengths, the planner's pick (16x32x4x3 or
#      16x64x4x3 rows for h16, mostly keys-major 64x64x8x2 for h64/h128) and the keys-major 64x64x8x2 forced;
#   3. git HEAD's kernel and planner (its picks: 16x32x4x2 for h16, 32x32x8x3 for h64/h128) at b 128, as time allows.
# A run cut by its timeout writes no JSON; its points are in $OUT/dense_ab.log.
# Each point: CUDA-graph replay, L2 flushed, median of 10; % of the copy bandwidth measured in the same process.
# Run from the repository root with $OUT set: bash benchmarks/experiments/gpu_dense_ab.sh
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ROOT=$PWD
START=$SECONDS
BUDGET=${BUDGET:-140}
left() { echo $((BUDGET - (SECONDS - START))); }
step() {  # step LIMIT CMD...: run CMD under timeout LIMIT (capped by the time left), or skip it
  local limit=$1 rest
  shift
  rest=$(left)
  ((limit > rest)) && limit=$rest
  if ((limit < 10)); then echo "== skipped, ${limit}s left: $*"; return 0; fi
  echo "== $* (limit ${limit}s)"
  timeout "$limit" "$@"
  echo "== exit $? after $((SECONDS - START))s"
}
BENCH=(python3 -m wavemla.cli bench --dense --kv-formats bf16 --seqlen 4096 16384 --heads 16 64 128 --lengths uniform
  --reps 10)
SHA=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  PYTHONPATH=$ROOT/src python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  step 60 env PYTHONPATH="$ROOT/src" python3 -m pytest tests/kernels/test_dense_decode.py -m gpu -q -p no:cacheprovider
  step 50 env PYTHONPATH="$ROOT/src" "${BENCH[@]}" --batch 32 128 --configs 64x64x8x2 --json "$OUT/dense_new.json" \
    --label "working tree on $SHA"
  OLD=$(mktemp -d)
  if git archive HEAD src | tar -x -C "$OLD" 2>/dev/null; then
    step 40 env PYTHONPATH="$OLD/src" "${BENCH[@]}" --batch 128 --json "$OUT/dense_old.json" --label "HEAD $SHA"
  else
    echo "== no git history here: compare with benchmarks/results/2026-11-30-h200-dense-sweep-bf16.json"
  fi
} > "$OUT/dense_ab.log" 2>&1
grep -E "^== |passed|failed|Error|ceilings" "$OUT/dense_ab.log" | head -30
# One table from both JSON files (and $OUT/dense_ab.json): µs and % of copy per shape, old pick beside new ones.
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
runs = {}
for name in ("old", "new"):
    path = os.path.join(out, f"dense_{name}.json")
    if os.path.exists(path):
        runs[name] = json.load(open(path))
rows = {}
for name, run in runs.items():
    for r in run["records"]:
        key = (r["h_q"], r["batch"], r["s_k"])
        rows.setdefault(key, []).append((name, r["config"], r["median_us"], r["pct_copy"], r["split_us"]))
for name, run in runs.items():
    print(f"{name}: {run['label']}, copy {run['ceilings']['copy_gbps']:.0f} GB/s")
print(f"{'h':>4} {'b':>4} {'s_k':>6}  run config: median µs (% of copy, split µs)")
for key in sorted(rows):
    cells = "  |  ".join(f"{n} {c}: {us:.1f} ({pct:.0f}%, {sp:.1f})" for n, c, us, pct, sp in rows[key])
    print(f"{key[0]:>4} {key[1]:>4} {key[2]:>6}  {cells}")
json.dump({"runs": {k: {"label": v["label"], "ceilings": v["ceilings"]} for k, v in runs.items()},
           "rows": [{"h_q": k[0], "batch": k[1], "s_k": k[2], "results": [dict(zip(
               ("run", "config", "median_us", "pct_copy", "split_us"), v)) for v in vals]}
                    for k, vals in sorted(rows.items())]},
          open(os.path.join(out, "dense_ab.json"), "w"), indent=1)
PY
