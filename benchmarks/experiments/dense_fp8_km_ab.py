"""The dense decode's FP8 V3.2 rows in keys-major 64x64 tiles (Pᵀ through scratch rows on sm_90) against the
planner's pick and the row-major 64x64 tile, at DeepSeek-V3 shapes; each checked against the fp64 reference.

    PYTHONPATH=src python3 benchmarks/experiments/dense_fp8_km_ab.py OUT.json --points 64:32:4096 64:128:4096

A point is ``H:B:S_K`` (FP8 rows, s_q 1, uniform lengths, page 64). The keys-major variant patches
``wavemla.kernels.dense_decode.keys_major`` to take 64-row FP8 blocks too (the kernel has the branch; the planner does
not offer it). CUDA-graph replay, L2 flushed, median of ``--reps``; % of the copy bandwidth measured in-process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import wavemla.kernels.dense_decode as dd
from wavemla import config, dense_mla_decode, get_mla_metadata
from wavemla.reference import dense_decode_ref
from wavemla.testing import TOLERANCES, check_close, make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, dense_traffic, measure_ceilings

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import graph_median_us, pct_copy, write_results

TILE64 = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["64:32:4096"])
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    rows_rule = dd.keys_major
    variants = (("pick", {}, False), ("rows64", TILE64, False), ("km64", TILE64, True))
    records = []
    for item in args.points:
        h, b, s_k = (int(x) for x in item.split(":"))
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, h_q=h, page=DENSE_PAGE, fp8=True, device="cuda", seed=0)
        ref_out, ref_lse = dense_decode_ref(**inputs)
        _, nbytes = dense_traffic([s_k] * b, 1, h, 576, True, DENSE_PAGE)
        for name, knobs, km in variants:
            dd.keys_major = (lambda is_fp8, block_h: block_h == 64) if km else rows_rule  # type: ignore[assignment]
            try:
                with config.override(**knobs):
                    meta, _ = get_mla_metadata()
                    out, lse = dense_mla_decode(**inputs, metadata=meta)
                    fn = lambda meta=meta, kw=inputs: dense_mla_decode(**kw, metadata=meta)  # noqa: E731
                    t = graph_median_us(fn, args.reps)
            finally:
                dd.keys_major = rows_rule  # type: ignore[assignment]
            bad = check_close("out", out, ref_out, TOLERANCES[("out", "gpu")]) or check_close(
                "lse", lse, ref_lse, TOLERANCES[("lse", "gpu")]
            )
            p = meta.dense_plan
            assert p is not None
            pct = pct_copy(nbytes, t, ceil)
            records.append(dict(heads=h, batch=b, s_k=s_k, variant=name, config=str(p.config), parts=p.num_parts,
                                scratch=meta.p_ws is not None, median_us=t, pct_copy=pct, mismatch=bad))  # fmt: skip
            used = meta.p_ws is not None
            print(f"fp8 h{h:<4d} b{b:<4d} sk{s_k:<6d} {name:7s} {p.config!s:10s} parts={p.num_parts:<4d} "
                  f"scratch={used!s:5s} {t:8.1f} us  {pct:5.1f}% of copy  {bad or 'matches'}")  # fmt: skip
        del inputs
        torch.cuda.empty_cache()
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
