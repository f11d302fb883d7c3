"""Whole indexer calls on MXFP4 index-K rows against FP8 rows, page-split layout, FP8 and bf16 queries.

    PYTHONPATH=src python3 benchmarks/experiments/idx_mxfp4.py OUT.json [--reps 20]     # on a GPU

``run_indexer_bench`` (CUDA-graph replay, L2 flushed, the copy ceiling measured first) over b 32 / 64 / 128 at 32K
rows, for ``fp8-paged`` rows with FP8 queries and for ``mxfp4-paged`` rows with FP8 and bf16 queries, with the planned
score tiles (64 rows, four stages) and codes decoded by byte permutes. ``--tiles``: also MXFP4 rows with FP8's tiles
(128 rows, five stages); ``--one-code``: also MXFP4 codes decoded one at a time (``FP4_PERMUTE_DECODE`` off);
``--long``: also b 32 at 256K rows, and FP8 rows with bf16 queries. Prints the median µs, the GB/s of index-K read,
and the torch baseline's time over the Triton call's. Launch replays are off (``WAVEMLA_LAUNCH=triton``) so that each
setting compiles its own kernel.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["WAVEMLA_LAUNCH"] = "triton"

import torch

import wavemla.kernels.indexer as ix
from wavemla.tools.bench_indexer import IndexerBenchCase, run_indexer_bench

SHAPES = ((32, 32768), (64, 32768), (128, 32768))
LONG = ((32, 262144),)


def _cases(kv: str, long: bool, fp8_bf16: bool) -> list[IndexerBenchCase]:
    q_formats = ("fp8", "bf16") if kv.startswith("mxfp4") or fp8_bf16 else ("fp8",)
    shapes = SHAPES + LONG if long else SHAPES
    return [IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format=q) for q in q_formats for b, n in shapes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--tiles", action="store_true", help="also MXFP4 rows with FP8's 128-row score tiles")
    parser.add_argument("--one-code", action="store_true", help="also MXFP4 codes decoded one at a time")
    parser.add_argument("--long", action="store_true", help="also b 32 at 256K rows, and FP8 rows with bf16 queries")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_mxfp4.py: needs a CUDA device", file=sys.stderr)
        return 2
    records: list[dict[str, Any]] = []
    planned = ix.choose_config

    def fp8_tiles(*args: Any, **kwargs: Any) -> ix.IndexerConfig:
        cfg = planned(*args, **kwargs)
        return dataclasses.replace(cfg, block_n=128, num_stages=5) if kwargs.get("kv_fp4") else cfg

    variants = [("fp8", "fp8-paged", planned, True)]
    if args.one_code:
        variants.append(("mxfp4 one code at a time", "mxfp4-paged", planned, False))
    variants.append(("mxfp4 64-row tiles", "mxfp4-paged", planned, True))
    if args.tiles:
        variants.append(("mxfp4 128-row tiles", "mxfp4-paged", fp8_tiles, True))
    for label, kv, choose, permute in variants:
        ix.choose_config = choose
        ix.FP4_PERMUTE_DECODE = permute
        part = args.out.with_suffix(f".{len(records)}.json")
        rows = run_indexer_bench(part, cases=_cases(kv, args.long, args.long), reps=args.reps)
        part.unlink()
        for r in rows:
            r["decode"] = label
        records += rows
        args.out.write_text(json.dumps(records, indent=1))
        print(f"copy {rows[0]['gbps']:.0f} GB/s ({label})")
        torch_us = {(r["b"], r["n_comp"], r["q_format"]): r["median_us"] for r in rows[1:] if r["provider"] == "torch"}
        for r in rows[1:]:
            if r["provider"] != "triton":
                continue
            key = (r["b"], r["n_comp"], r["q_format"])
            ratio = f"{torch_us[key] / r['median_us']:.1f}x" if key in torch_us else "-"
            print(f"b={r['b']:<4d} n={r['n_comp']:<7d} {label:25s} q {r['q_format']:4s} {r['median_us']:8.1f} us "
                  f"{r['gbps']:6.0f} GB/s {r['pct_of_copy_bw']:5.1f}% of copy  torch/ours {ratio}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
