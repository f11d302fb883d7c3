"""Whole indexer calls on MXFP4 index-K rows against FP8 rows, page-split layout, FP8 and bf16 queries.

    PYTHONPATH=src python3 benchmarks/experiments/idx_mxfp4.py OUT.json [--reps 20]     # on a GPU

``run_indexer_bench`` (CUDA-graph replay, L2 flushed, the copy ceiling measured first) over b 32 / 64 / 128 at 32K
rows and b 32 at 256K rows, for ``mxfp4-paged`` and ``fp8-paged`` rows with FP8 and with bf16 queries; prints
the median µs, the GB/s of index-K read and the torch baseline's time over the Triton call's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from wavemla.tools.bench_indexer import IndexerBenchCase, run_indexer_bench

SHAPES = ((32, 32768), (64, 32768), (128, 32768), (32, 262144))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_mxfp4.py: needs a CUDA device", file=sys.stderr)
        return 2
    cases = [
        IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format=q)
        for q in ("fp8", "bf16")
        for kv in ("mxfp4-paged", "fp8-paged")
        for b, n in SHAPES
    ]
    rows = run_indexer_bench(args.out, cases=cases, reps=args.reps)
    print(f"copy {rows[0]['gbps']:.0f} GB/s")
    torch_us = {(r["b"], r["n_comp"], r["kv_format"], r["q_format"]): r["median_us"] for r in rows[1:]
                if r["provider"] == "torch"}  # fmt: skip
    for r in rows[1:]:
        if r["provider"] != "triton":
            continue
        key = (r["b"], r["n_comp"], r["kv_format"], r["q_format"])
        ratio = f"{torch_us[key] / r['median_us']:.1f}x" if key in torch_us else "-"
        print(f"b={r['b']:<4d} n={r['n_comp']:<7d} rows {r['kv_format']:12s} q {r['q_format']:4s} "
              f"{r['median_us']:8.1f} us {r['gbps']:6.0f} GB/s {r['pct_of_copy_bw']:5.1f}% of copy  "
              f"torch/ours {ratio}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
