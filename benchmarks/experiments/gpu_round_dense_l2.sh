# GPU: the dense split kernel's L2 prefetch of the tile L2_AHEAD ahead, A/B against none (bits compared), and
# Nsight Compute stall reasons of the keys-major bf16 tile with and without it.
#   bash benchmarks/experiments/gpu_round_dense_l2.sh LABEL   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=${1:-dev}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
python3 benchmarks/experiments/dense_variant_ab.py "$OUT/dense-l2-bf16-$L.json" --variants l2_ahead=0 l2_ahead=1 l2_ahead=2 \
  --points bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:64:128:16384 bf16:128:32:4096 \
  bf16:128:128:16384 bf16:16:128:4096 bf16:16:128:16384 2>&1 | tee "$OUT/dense-l2-$L.log"
python3 benchmarks/experiments/dense_variant_ab.py "$OUT/dense-l2-fp8-$L.json" --variants l2_ahead=0 l2_ahead=2 l2_ahead=3 \
  --points fp8:64:128:4096 fp8:16:128:4096 fp8:128:32:4096 2>&1 | tee -a "$OUT/dense-l2-$L.log"
for a in 0 1; do
  timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --section MemoryWorkloadAnalysis -k regex:_dense_mla_decode_kernel --launch-skip 2 --launch-count 1 \
    python3 benchmarks/experiments/prof_dense.py bf16:64:128:4096 $a > "$OUT/ncu-dense-l2-$a.txt" 2>&1
  echo "== ncu ahead $a"
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall|stall" "$OUT/ncu-dense-l2-$a.txt" | head -14
done
