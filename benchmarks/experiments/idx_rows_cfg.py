"""Score-kernel tiles for FP8 index-K rows with per-row scales (132-byte rows, loaded in 4-byte pieces) against the
page-split layout (16-byte pieces): whole indexer calls (FP8 queries, top-512, CUDA graph, L2 flushed, median of
``--reps``) with the score kernel's ``(block_n, num_warps, num_stages)`` replaced, to see whether the per-row
layout wants other tiles than the shipped ones (128, 4, 5).

    PYTHONPATH=src python3 benchmarks/experiments/idx_rows_cfg.py OUT.json [--shapes 64:32768 128:262144]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from typing import Any

import torch

from wavemla.kernels import indexer
from wavemla.tools.bench import copy_samples_us, timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, index_k_bytes, run_case

CONFIGS = ((128, 4, 5), (128, 4, 3), (128, 4, 2), (64, 4, 5), (64, 4, 3), (128, 8, 5), (256, 8, 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--shapes", nargs="+", default=["64:32768", "128:262144"])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    copy_us = statistics.median(copy_samples_us(1 << 30, 10))
    copy_gbps = 2 * (1 << 30) / copy_us / 1e3
    original = indexer.choose_config
    records: list[dict[str, Any]] = []
    for shape in args.shapes:
        b, n = (int(x) for x in shape.split(":"))
        for kv in ("fp8", "fp8-paged"):
            case = IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format="fp8")
            data = _fill_case(case, torch.Generator(device="cuda").manual_seed(0))
            ws = torch.empty(indexer.indexer_workspace_numel(b, 1, 64, n), dtype=torch.int32, device="cuda")
            out = (torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
                   torch.empty(b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip
            want = None
            for block_n, warps, stages in CONFIGS:

                def patched(*a: Any, _bn: int = block_n, _w: int = warps, _s: int = stages, **k: Any) -> Any:
                    return dataclasses.replace(original(*a, **k), block_n=_bn, num_warps=_w, num_stages=_s)

                indexer.choose_config = patched  # type: ignore[assignment]
                indexer._REPLAYS.clear()
                try:
                    run_case(case, data, ws, out)
                    torch.cuda.synchronize()
                    got = out[0].sort(-1).values.clone()
                    same = want is None or torch.equal(got, want)
                    want = got if want is None else want
                    us = statistics.median(timing_samples_us(
                        lambda c=case, d=data, w=ws, o=out: run_case(c, d, w, o), args.reps, graph=True))  # fmt: skip
                    err = None
                except Exception as exc:  # a configuration that does not compile or fit: noted, the sweep goes on
                    us, same, err = float("nan"), False, f"{type(exc).__name__}: {exc}"[:200]
                finally:
                    indexer.choose_config = original  # type: ignore[assignment]
                    indexer._REPLAYS.clear()
                pct = 100 * index_k_bytes(case) / us / 1e3 / copy_gbps
                rec = {"b": b, "n_comp": n, "kv_format": kv, "block_n": block_n, "num_warps": warps,
                       "num_stages": stages, "median_us": us, "pct_of_copy_bw": pct, "same_set": same, "error": err,
                       "copy_gbps": copy_gbps}  # fmt: skip
                records.append(rec)
                print(f"b={b} n={n} {kv:<9} {block_n}x{warps}w x{stages}s: {us:8.1f} us ({pct:4.1f}% of copy)"
                      f"{'' if same else ' SET DIFFERS'}{'' if err is None else ' ' + err}", flush=True)  # fmt: skip
    with open(args.out, "w") as f:
        json.dump(records, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
