#!/usr/bin/env bash
# GPU: the dense warp-specialized kernel's load warp prefetching the next segment's q rows into L2 (one bulk prefetch
# per segment; the kernel of commit 34971b4 only: no faster, reverted; docs/dense-decode.md, "Tried and not kept"),
# A/B against the source before it (carry build/oldsrc: `git archive REV src | tar -x -C
# build/oldsrc`), `wavemla bench --dense` alternated in two rounds at the batches whose parts hold several segments
# (bf16, h = 64 b = 8..64 at 4K and b = 32 at 16K, h = 128 b = 32, skewed b = 32), then the dense GPU tests.
#   BUDGET=420 bash benchmarks/experiments/gpu_dense_qahead.sh SHA   (writes qahead.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-420}
. "$(dirname "$0")/../budget.sh"
NEW=$PWD/src
OLD=$PWD/build/oldsrc/src
bench() {  # bench TAG SRC ARGS...
  local tag=$1 src=$2; shift 2
  PYTHONPATH=$src step 60 python3 -m wavemla.cli bench --dense --kv-formats bf16 --reps 10 "$@" \
    --json "$OUT/qahead-$tag.json" --label "${SHA:-}"
}
SHA=${1:-}
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    src=$NEW; [ "$v" = old ] && src=$OLD
    bench "$v-$round-h64" "$src" --heads 64 --batch 8 16 32 64 --seqlen 4096 --lengths uniform
    bench "$v-$round-h64-16k" "$src" --heads 64 --batch 32 --seqlen 16384 --lengths uniform skewed
    bench "$v-$round-h128" "$src" --heads 128 --batch 32 --seqlen 4096 --lengths uniform
  done
done
step 130 python3 -m pytest -q -p no:cacheprovider -n 16 tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/qahead.log"
grep -E "^== .*pytest|passed|failed|ceilings" "$OUT/qahead.log" | cut -c1-150
python3 - "$OUT" <<'PY' | tee -a "$OUT/qahead.log"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("qahead-*.json")):
    v, rnd = f.stem.split("-")[1:3]
    for r in json.loads(f.read_text())["records"]:
        rows.setdefault((r["h_q"], r["batch"], r["s_k"], r["lengths"]), {}).setdefault(v, []).append(r["median_us"])
print("  h    b    s_k lengths   q ahead (r1, r2)   before (r1, r2)   ratio of the lower")
for k, d in sorted(rows.items()):
    if "new" in d and "old" in d:
        n, o = d["new"], d["old"]
        print(f"{k[0]:3d} {k[1]:4d} {k[2]:6d} {k[3]:8s} {n[0]:8.1f} {n[-1]:8.1f}  {o[0]:8.1f} {o[-1]:8.1f}  {min(n) / min(o):.3f}")
PY
tar czf "$OUT/qahead.tar.gz" -C "$OUT" $(cd "$OUT" && ls qahead-*.json) && rm -f "$OUT"/qahead-*.json
