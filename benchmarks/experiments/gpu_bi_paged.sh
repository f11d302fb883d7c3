# GPU check of the batch-invariant in-program merge (cost vs the default plan) and of the page-split FP8 indexer
# layout with the three-pass select: indexer tests on that layout, its kernel breakdown, the benchmark grid for
# fp8-paged rows with FP8 queries.   bash benchmarks/experiments/gpu_bi_paged.sh  (writes under $OUT)
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
E=benchmarks/experiments
timeout 100 python3 -m pytest tests/kernels/test_indexer.py -k paged -q -p no:cacheprovider -p no:xdist 2>&1 | tail -2
timeout 80 python3 benchmarks/bi_cost.py --batch 1 32 48 64 96 128 148 256 --reps 10 --json "$OUT/bi_cost.json" \
  2>&1 | grep -v Warn | tee "$OUT/bi_cost.log"
timeout 90 python3 $E/idx_prof.py 32:32768:fp8qp 64:32768:fp8qp 128:262144:fp8qp 2>&1 | grep -v Warn | tee "$OUT/idx_prof.log"
timeout 200 python3 - "$OUT/indexer-paged.json" <<'PY' 2>&1 | grep -v Warn | tee "$OUT/indexer-paged.log"
import sys
from wavemla.tools.bench_indexer import bench_cases, run_indexer_bench
for r in run_indexer_bench(sys.argv[1], cases=bench_cases(kv_formats=["fp8-paged"], q_formats=["fp8"]), reps=20):
    pct = r["pct_of_copy_bw"]
    print(f"{r['provider']:6s} b={r['b']} n={r['n_comp']} {r['kv_format']} q {r['q_format']}: {r['median_us']:.1f} us "
          f"{r['gbps']:.0f} GB/s" + (f" ({pct:.0f}% of copy)" if pct is not None else ""))
PY
