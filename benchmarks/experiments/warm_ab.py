"""The benchmarks' warm-up (50 ms and 10 calls under load) against the 3 untimed calls before it, alternated on the
same inputs right after they are built (old, new, old, new; median of 15 CUDA-graph replays behind the L2 flush):
a bandwidth-bound dense call on a new pool, a math-bound one (128 heads), a sparse CSA decode and an indexer call.

    PYTHONPATH=src python3 benchmarks/experiments/warm_ab.py [--json F]
"""

import argparse
import json

import torch
from dense_first_case import build, case

from wavemla import get_mla_metadata, sparse_mla_decode
from wavemla.kernels.indexer import indexer_workspace_numel
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools import bench
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, run_case


def dense_case(b: int, h: int, s_k: int, pool: int):
    return case(build(pool, s_k, h), b, s_k, h)


def sparse_case(b: int):
    topk, page, xtopk, xpage, xpool = bench.MODES["csa"]
    full = make_sparse_decode_inputs(batch=b, s_q=1, h_q=64, topk=topk, page=page, extra_topk=xtopk, extra_page=xpage,
                                     extra_pool=xpool or None, fp8=True, device="cuda", seed=0)  # fmt: skip
    kwargs = {k: v for k, v in full.items() if v is not None}
    meta, _ = get_mla_metadata()
    return lambda: sparse_mla_decode(**kwargs, metadata=meta)


def indexer_case(b: int):
    c = IndexerBenchCase(b=b, n_comp=32768, kv_format="fp8-paged", q_format="fp8")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    data = _fill_case(c, gen)
    ws = torch.empty(indexer_workspace_numel(b, 1, 64, 32768), dtype=torch.int32, device="cuda")
    out = (
        torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
        torch.empty(b, 1, dtype=torch.int32, device="cuda"),
    )
    return lambda: run_case(c, data, ws, out)


def timed(fn, old: bool) -> float:
    saved = bench.WARM_MS, bench.WARM_CALLS
    if old:
        bench.WARM_MS, bench.WARM_CALLS = 0.0, 3
    try:
        s = bench.timing_samples_us(fn, 15, graph=True)
    finally:
        bench.WARM_MS, bench.WARM_CALLS = saved
    return s[len(s) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    cases = {
        "dense bf16 h16 b32 16K (pool of 128)": lambda: dense_case(32, 16, 16384, 128),
        "dense bf16 h128 b128 16K": lambda: dense_case(128, 128, 16384, 128),
        "sparse CSA h64 FP8 b128": lambda: sparse_case(128),
        "indexer FP8 32K b64": lambda: indexer_case(64),
    }
    result = {}
    for name, make in cases.items():
        torch.cuda.empty_cache()
        fn = make()
        torch.cuda.synchronize()
        row = [("old" if i % 2 == 0 else "new", timed(fn, i % 2 == 0)) for i in range(4)]
        result[name] = row
        print(f"{name:40s} " + "  ".join(f"{k} {v:7.1f}" for k, v in row))
        del fn
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
