# GPU: the dense keys-major tile rescaling its accumulator only on tiles where a row's reference maximum moved
# past 2^8 (lazy_rescale=1) against every tile, same plans (dense_variant_ab.py).
#   bash benchmarks/experiments/gpu_round_dense_lazy.sh   (writes under $OUT)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 benchmarks/experiments/dense_variant_ab.py "$OUT/dense-lazy.json" --variants lazy_rescale=0 lazy_rescale=1 \
  --points bf16:64:32:4096 bf16:64:128:4096 bf16:64:32:16384 bf16:64:128:16384 bf16:128:32:4096 \
  bf16:128:128:16384 2>&1 | tee "$OUT/dense-lazy.log"
