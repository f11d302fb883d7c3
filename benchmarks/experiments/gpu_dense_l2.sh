#!/usr/bin/env bash
# GPU: L2 eviction policies for the dense decode's partials (the split kernel stores cut requests' partials
# evict_last, the combine loads them evict_first; knob WAVEMLA_DENSE_L2 of commit 13e6d31 only: no faster, reverted;
# docs/dense-decode.md, "Tried and not kept"), A/B by the knob (on / off) on one source,
# `wavemla bench --dense` alternated in two rounds: the warp-specialized kernel (bf16, h = 64 and 128 at b = 8, 32,
# 64 and 128 at 4K, where b = 128 (h = 64) and 64, 128 (h = 128) give each request a part of its own and cut nothing;
# h = 64 b = 32 and 64 at 16K, uniform and skewed) and the Triton kernel (bf16 h = 16 and FP8 h = 16 and 64, b = 32
# at 4K). Then the
# bits of both ways compared, Nsight Compute's DRAM bytes and durations of the three launches at h = 64 b = 32 4K,
# and the dense GPU tests.
#   BUDGET=480 bash benchmarks/experiments/gpu_dense_l2.sh SHA   (writes dense-l2.tar.gz and the log under $OUT)
set -uo pipefail
BUDGET=${BUDGET:-480}
. "$(dirname "$0")/../budget.sh"
SHA=${1:-}
bench() {  # bench TAG POLICY ARGS...
  local tag=$1 pol=$2; shift 2
  WAVEMLA_DENSE_L2=$pol step 60 python3 -m wavemla.cli bench --dense --reps 10 "$@" \
    --json "$OUT/dl2-$pol-$tag.json" --label "${SHA:-}"
}
{
machine "$SHA"
for round in 1 2; do
  for pol in on off; do
    bench "$round-4k" $pol --kv-formats bf16 --heads 64 128 --batch 8 32 64 128 --seqlen 4096 --lengths uniform
    bench "$round-16k" $pol --kv-formats bf16 --heads 64 --batch 32 64 --seqlen 16384 --lengths uniform skewed
    bench "$round-triton" $pol --kv-formats bf16 fp8 --heads 16 64 --batch 32 --seqlen 4096 --lengths uniform
  done
done
echo "== bits, on against off"
step 90 python3 - <<'PY'
import torch
from wavemla import config, dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs
for fp8, h, b, s_k in ((False, 64, 32, 4096), (False, 16, 32, 4096), (True, 64, 32, 4096), (False, 128, 8, 2000)):
    inputs = make_dense_decode_inputs(lengths=[s_k - 37 * i for i in range(b)], h_q=h, page=64, fp8=fp8, device="cuda")
    res = {}
    for pol in ("on", "off"):
        with config.override(WAVEMLA_DENSE_L2=pol):
            res[pol] = dense_mla_decode(**inputs, metadata=get_mla_metadata()[0])
    same = all(torch.equal(x, y) for x, y in zip(res["on"], res["off"]))
    print(f"fp8={fp8} h={h} b={b} s_k={s_k}: bits {'identical' if same else 'DIFFER'}")
PY
for pol in on off; do
  echo "== ncu $pol (h = 64, b = 32, 4K, bf16; no cache control)"
  WAVEMLA_DENSE_L2=$pol timeout 90 ncu --cache-control none -k regex:dense_mla --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    python3 benchmarks/experiments/prof_dense.py bf16:64:32:4096 0 > "$OUT/ncu-dl2-$pol.txt" 2>&1
  grep -E "_dense_mla_|gpu__time|dram__bytes|lts__t_sector" "$OUT/ncu-dl2-$pol.txt" | sed 's/  */ /g' | cut -c1-120
done
step 150 python3 -m pytest -q -p no:cacheprovider $X tests/kernels/test_dense_decode.py \
  tests/kernels/test_dense_decode_ws.py tests/kernels/test_combine.py tests/test_plan_dense.py
} 2>&1 | grep -v -E "Warning[:(]|warner\(" > "$OUT/dense-l2.log"
grep -E "^== .*pytest|passed|failed|ceilings|bits|ncu|_dense_mla_|gpu__time|dram__bytes|lts__t" "$OUT/dense-l2.log" | cut -c1-150
python3 "$(dirname "$0")/dense_ab_table.py" "$OUT" dl2 on off combine_us | tee -a "$OUT/dense-l2.log"
tar czf "$OUT/dense-l2.tar.gz" -C "$OUT" $(cd "$OUT" && ls dl2-*.json ncu-dl2-*.txt 2>/dev/null) && rm -f "$OUT"/dl2-*.json
