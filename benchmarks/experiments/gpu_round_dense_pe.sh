# GPU: dense split kernel options, each A/B in alternation (dense_variant_ab.py): the rope and latent dots of the
# bf16 keys-major tile summed after scaling (pe_apart) against accumulated one into the other, and the L2
# prefetch of FP8 tiles two or three tiles ahead at more shapes; then Nsight Compute's per-instruction stall samples
# of the keys-major tile.
#   bash benchmarks/experiments/gpu_round_dense_pe.sh LABEL   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=${1:-dev}
python3 benchmarks/experiments/dense_variant_ab.py "$OUT/dense-pe-bf16-$L.json" --variants - pe_apart=1 \
  --points bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:64:128:16384 bf16:128:32:4096 \
  bf16:128:128:16384 2>&1 | tee "$OUT/dense-pe-$L.log"
python3 benchmarks/experiments/dense_variant_ab.py "$OUT/dense-l2-fp8b-$L.json" --variants l2_ahead=0 l2_ahead=2 l2_ahead=3 \
  --points fp8:16:1:4096 fp8:16:8:4096 fp8:64:8:16384 fp8:64:32:16384 fp8:16:128:16384 fp8:128:128:4096 \
  fp8:64:128:1024 2>&1 | tee -a "$OUT/dense-pe-$L.log"
timeout 150 ncu --section WarpStateStats --section SourceCounters -k regex:_dense_mla_decode_kernel --launch-skip 2 \
  --launch-count 1 -f -o /tmp/prof_km python3 benchmarks/experiments/prof_dense.py bf16:64:128:4096 0 > /dev/null 2>&1
ncu -i /tmp/prof_km.ncu-rep --page details > "$OUT/ncu-dense-km-details.txt" 2>&1
ncu -i /tmp/prof_km.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/ncu-dense-km-sass.csv.gz"
grep -E "Warp Cycles Per Issued|Stall|stall" "$OUT/ncu-dense-km-details.txt" | head -12
