"""One call each of several kernels for Nsight Compute, profiled between cudaProfilerStart and Stop (run under
``ncu --profile-from-start off``; the warm-up calls that compile them are not profiled): the lightning indexer at
b=32, n_comp=32K, FP8 page-split rows and FP8 queries with each select (token, spread); the dense decode at h=64,
b=32, s_k=4K, bf16; the sparse decode at CSA h=64 b=133 (warp-specialized kernel and the combine of its cut tokens).
``gpu_prof_icache.sh`` reads each kernel's instruction-fetch stalls from the report.

    PYTHONPATH=src python3 benchmarks/experiments/prof_icache.py
"""

from __future__ import annotations

import functools

import torch

import wavemla
import wavemla.kernels.indexer as ix
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, run_case


def main() -> None:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    calls = []
    case = IndexerBenchCase(b=32, n_comp=32768, kv_format="fp8-paged", q_format="fp8")
    data = _fill_case(case, gen)
    ws = torch.empty(ix.indexer_workspace_numel(case.b, 1, 64, case.n_comp), dtype=torch.int32, device="cuda")
    out = (
        torch.empty(case.b, case.s_q, case.topk, dtype=torch.int32, device="cuda"),
        torch.empty(case.b, case.s_q, dtype=torch.int32, device="cuda"),
    )
    for select in ("token", "spread"):
        calls.append(functools.partial(run_case, case, data, ws, out, select=select))
    dense = make_dense_decode_inputs(lengths=[4096] * 32, h_q=64, device="cuda")
    calls.append(functools.partial(wavemla.dense_mla_decode, **dense))
    sparse = make_sparse_decode_inputs(
        batch=133, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048, fp8=True, device="cuda"
    )
    meta, _ = wavemla.get_mla_metadata()
    kw = {k: v for k, v in sparse.items() if v is not None}
    calls.append(functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta))
    for call in calls:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
