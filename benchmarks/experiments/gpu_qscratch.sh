# GPU check of the q scratch rows (bf16 q converted in the split kernel, no conversion launch) and of 64-row
# partitions the planner does not pick: kernel tests, a partition sweep at the DSV4 anchor batches (each spec
# against the fp64 reference, then timed), the h=64 anchor table against FlashMLA, the batch-invariant cost.
#   bash benchmarks/experiments/gpu_qscratch.sh   (writes under $OUT; about 8 minutes)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
S="python3 benchmarks/experiments/partition_sweep.py --reps 20"
timeout 170 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py -m gpu -q -p no:cacheprovider -p no:xdist 2>&1 | tail -2 | tee "$OUT/tests.log"
{
timeout 60 $S --mode csa --batch 8 --specs default default:launcher-q 64x64x8x1:1 64x64x8x1:2 --json "$OUT/ps_csa8.json"
timeout 60 $S --mode csa --batch 32 --specs default default:launcher-q 64x64x8x1:3 64x32x8x1:4 --json "$OUT/ps_csa32.json"
timeout 60 $S --mode csa --batch 80 --specs default default:launcher-q 64x64x8x1:7 64x64x8x1:8 64x64x8x1:10 --json "$OUT/ps_csa80.json"
timeout 60 $S --mode csa --batch 96 --specs default default:launcher-q 64x64x8x1:8 64x64x8x1:9 --json "$OUT/ps_csa96.json"
timeout 60 $S --mode csa --batch 128 --specs default default:launcher-q 64x64x8x2:10 --json "$OUT/ps_csa128.json"
timeout 60 $S --mode hca --batch 32 --specs default default:launcher-q 64x64x8x1:5 64x64x8x1:4 --json "$OUT/ps_hca32.json"
timeout 60 $S --mode hca --batch 128 --specs default default:launcher-q --json "$OUT/ps_hca128.json"
} 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
timeout 80 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 10 \
  --json "$OUT/bench_h64.json" --label q-scratch > "$OUT/bench_h64.log" 2>&1; echo "bench rc=$?"
timeout 60 python3 benchmarks/bi_cost.py --batch 32 48 64 96 128 148 256 --reps 10 --json "$OUT/bi_cost.json" 2>&1 | grep -v -i warn | tee "$OUT/bi_cost.log"
echo "== tests"; cat "$OUT/tests.log"
echo "== sweep"; cat "$OUT/sweep.log"
python3 - "$OUT/bench_h64.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["records"]:
    if r.get("provider") == "wavemla":
        print(f"{r['mode']} b={r['batch']:3d} {r['config']} upp={r['units_per_part']} {r['median_us']:7.1f} us  FlashMLA {r.get('flashmla_us')}  ratio {r.get('ratio_to_flashmla')}")
PY
