"""The indexer benchmark's cases are timed right after their inputs are allocated (`torch.cuda.empty_cache()`, then
fresh tensors). The dense grid's first case after a new pool measured 10-15% slow for a few tens of calls
(dense_first_case.py). This times the same indexer case four rounds in a row (median of 15 CUDA-graph replays behind
the L2 flush each), as the benchmark builds it, then after a rebuild and a 1 s sleep.

    PYTHONPATH=src python3 benchmarks/experiments/idx_first_case.py [--batch 32 64] [--n-comp 32768]

The rounds use the benchmarks' timing (`timing_samples_us`), which warms each call up under load since.
"""

import argparse
import json
import time

import torch

from wavemla.kernels.indexer import indexer_workspace_numel
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, index_k_bytes, run_case


def rounds(case: IndexerBenchCase, generator: torch.Generator, n: int, sleep_s: float) -> list[float]:
    torch.cuda.empty_cache()
    data = _fill_case(case, generator)
    ws = torch.empty(indexer_workspace_numel(case.b, case.s_q, case.heads, case.n_comp), dtype=torch.int32,
                     device="cuda")  # fmt: skip
    out = (
        torch.empty(case.b, case.s_q, case.topk, dtype=torch.int32, device="cuda"),
        torch.empty(case.b, case.s_q, dtype=torch.int32, device="cuda"),
    )
    torch.cuda.synchronize()
    if sleep_s:
        time.sleep(sleep_s)
    meds = []
    for _ in range(n):
        s = timing_samples_us(lambda: run_case(case, data, ws, out), 15, graph=True)
        meds.append(s[len(s) // 2])
    return meds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--n-comp", type=int, default=32768)
    ap.add_argument("--json")
    args = ap.parse_args()
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    result = []
    for b in args.batch:
        case = IndexerBenchCase(b=b, n_comp=args.n_comp, kv_format="fp8-paged", q_format="fp8")
        gb = index_k_bytes(case) / 1e9
        for sleep_s in (0.0, 1.0):
            meds = rounds(case, generator, 4 if not sleep_s else 2, sleep_s)
            result.append({"b": b, "n_comp": args.n_comp, "sleep_s": sleep_s, "medians_us": meds, "gb": gb})
            print(f"b={b} n_comp={args.n_comp} sleep {sleep_s:.0f} s: " + "  ".join(
                f"{m:7.1f} us ({gb / m * 1e6:.0f} GB/s)" for m in meds))  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
