# GPU: the dense decode A/B (row tiles pipelined by chunked block ids, keys-major 64-row blocks) and the indexer's
# per-token select against the chunked one, each with its GPU tests; one call.
#   bash benchmarks/experiments/gpu_round_dense_idx.sh   (writes under $OUT; about 5 minutes)
set -uo pipefail
BUDGET=140 bash benchmarks/experiments/gpu_dense_ab.sh
bash benchmarks/experiments/gpu_idx_select.sh
