# GPU check of the split kernel merging cut tokens itself (64-row tiles; the combine kernel for smaller tiles):
# kernel tests, batch invariance b = 1..256, the h=64 s_q=1 anchor table against FlashMLA, the batch-invariant
# cost, a stress run and its shared-metadata negative control, and sanitizers on the merge. About 6 minutes.
#   bash benchmarks/experiments/gpu_fused_merge.sh   (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{
timeout 150 python3 -m pytest tests/kernels/test_sparse_decode.py tests/kernels/test_determinism.py -m gpu -q -p no:cacheprovider -p no:xdist 2>&1 | tail -1
timeout 130 python3 -m pytest tests/kernels/test_batch_invariance.py -q -p no:cacheprovider -p no:xdist 2>&1 | tail -1
} | tee "$OUT/tests.log"
timeout 70 python3 -m wavemla.cli bench --mode csa hca --s-q 1 --heads 64 --batch 1 8 32 48 64 80 96 128 148 256 --reps 10 \
  --json "$OUT/bench_h64.json" --label fused-merge > "$OUT/bench_h64.log" 2>&1; echo "bench rc=$?"
timeout 60 python3 benchmarks/bi_cost.py --batch 1 32 48 64 96 128 148 256 --reps 10 --json "$OUT/bi_cost.json" 2>&1 | grep -v -i warn | tee "$OUT/bi_cost.log"
timeout 60 python3 -m wavemla.tools.stress --replays 1500 2>&1 | tail -3 | tee "$OUT/stress.log"
timeout 40 python3 -m wavemla.tools.stress --share-metadata --batch 64 --splits 3 --replays 1000 2>&1 | tail -2 | tee -a "$OUT/stress.log"
SANITIZERS="memcheck-csa racecheck-merge" RACECHECK_LIMIT=80 bash benchmarks/sanitizers.sh
python3 - "$OUT/bench_h64.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["records"]:
    if r.get("provider") == "wavemla":
        print(f"{r['mode']} b={r['batch']:3d} {r['config']} {r['median_us']:7.1f} us  FlashMLA {r.get('flashmla_us')}  ratio {r.get('ratio_to_flashmla')}")
PY
