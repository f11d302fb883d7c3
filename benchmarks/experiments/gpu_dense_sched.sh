#!/usr/bin/env bash
# GPU: the dense scheduler gathering each part's request prefix and units in registers (and the next part's start)
# instead of reading back the rows it stored (two round trips to L2 and two block barriers fewer, for batches of up to
# 1024 requests; the kernel of commit d4d2a29 only: no faster, reverted; docs/dense-decode.md, "Tried and not kept"),
# A/B against the source before it (carry build/oldsrc: `git archive REV src | tar -x -C
# build/oldsrc`), `wavemla bench --dense` alternated in two rounds (bf16, h = 64 and 128 at b = 1, 8, 32, 64 and 128
# with 4K keys; h = 64 b = 32 with 16K, uniform and skewed; bf16 h = 16 and FP8 h = 64 at b = 32 4K: the Triton
# kernel), with the scheduler also timed alone; then the dense GPU tests and a short stress.
#   BUDGET=540 bash benchmarks/experiments/gpu_dense_sched.sh SHA   (writes dense-sched.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-540}
. "$(dirname "$0")/../budget.sh"
NEW=$PWD/src
OLD=$PWD/build/oldsrc/src
SHA=${1:-}
bench() {  # bench TAG SRC ARGS...
  local tag=$1 src=$2; shift 2
  PYTHONPATH=$src step 70 python3 -m wavemla.cli bench --dense --reps 10 "$@" --json "$OUT/ds-$tag.json" \
    --label "${SHA:-}"
}
{
machine "$SHA"
for round in 1 2; do
  for v in new old; do
    src=$NEW; [ "$v" = old ] && src=$OLD
    bench "$v-$round-4k" "$src" --kv-formats bf16 --heads 64 128 --batch 1 8 32 64 128 --seqlen 4096 --lengths uniform
    bench "$v-$round-16k" "$src" --kv-formats bf16 --heads 64 --batch 32 --seqlen 16384 --lengths uniform skewed
    bench "$v-$round-triton" "$src" --kv-formats bf16 fp8 --heads 16 64 --batch 32 --seqlen 4096 --lengths uniform
  done
done
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
step 60 python3 -m wavemla.tools.stress --mode dense --heads 64 --replays 1000
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-sched.log"
grep -E "^== .*(pytest|stress)|passed|failed|mismatch|ceilings" "$OUT/dense-sched.log" | cut -c1-150 | tail -8
python3 - "$OUT" <<'PY' | tee -a "$OUT/dense-sched.log"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("ds-*.json")):
    v = f.stem.split("-")[1]
    for r in json.loads(f.read_text())["records"]:
        key = (r["kv_format"], r["h_q"], r["batch"], r["s_k"], r["lengths"])
        rows.setdefault(key, {}).setdefault(v, []).append((r["median_us"], r["pct_copy"], r["schedule_us"]))
print("fmt   h    b    s_k lengths   new µs (r1, r2)   old µs (r1, r2)  ratio  %copy new/old  scheduler alone new/old")
for k, d in sorted(rows.items()):
    if "new" in d and "old" in d:
        n, o = [x[0] for x in d["new"]], [x[0] for x in d["old"]]
        pn, po = max(x[1] for x in d["new"]), max(x[1] for x in d["old"])
        cn, co = min(x[2] for x in d["new"]), min(x[2] for x in d["old"])
        print(f"{k[0]:5s} {k[1]:3d} {k[2]:4d} {k[3]:6d} {k[4]:8s} {n[0]:8.1f} {n[-1]:8.1f} {o[0]:8.1f} {o[-1]:8.1f}  "
              f"{min(n) / min(o):.3f}  {pn:5.1f}/{po:5.1f}  {cn:6.1f}/{co:6.1f}")
PY
tar czf "$OUT/dense-sched.tar.gz" -C "$OUT" $(cd "$OUT" && ls ds-*.json) && rm -f "$OUT"/ds-*.json
