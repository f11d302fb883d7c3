"""Dense MLA decode at small shapes for compute-sanitizer: every dense kernel (scheduler, split, combine) on bf16
rows, FP8 V3.2 rows and per-tensor FP8 rows, lengths including 0 and a cut request, causal s_q = 2, 64-row keys-major
tiles and 64-row FP8 tiles (with their scratch rows for P on sm_90), each result checked against the fp64 reference.

    compute-sanitizer --tool memcheck python3 benchmarks/sanitize_dense.py
"""

from __future__ import annotations

import sys

import torch

import wavemla
from wavemla import config
from wavemla.reference.dense_decode import dense_decode_ref
from wavemla.testing import TOLERANCES, check_close, dense_out_tolerance, make_dense_decode_inputs


def main() -> int:
    # on a machine without a GPU this runs through Triton's interpreter (TRITON_INTERPRET=1), in fp16
    device, dtype = ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float16)
    lane = "gpu" if device == "cuda" else "interp"
    bad = 0
    cases = [
        dict(lengths=[0, 5, 130, 700], s_q=1, h_q=16, fp8=False),
        dict(lengths=[3, 0, 257, 64], s_q=2, h_q=16, fp8=True),
        dict(lengths=[1000, 1], s_q=1, h_q=64, fp8=False),
        # keys-major 64x64 tiles, a request cut over parts
        dict(lengths=[700, 0, 90], s_q=2, h_q=32, fp8=False, knobs=dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64,
                                                                        WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2)),
        # 64-row FP8 tiles (P through scratch rows on sm_90), a request cut over parts
        dict(lengths=[700, 0, 90], s_q=2, h_q=32, fp8=True, knobs=dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32,
                                                                       WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)),
        # per-tensor FP8 rows (576 codes, descale_k): the planner's tile, staged 16-row tiles, 64-row tiles
        dict(lengths=[3, 0, 257, 64], s_q=2, h_q=16, fp8="tensor"),
        dict(lengths=[700, 0, 90], s_q=1, h_q=16, fp8="tensor", knobs=dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32,
                                                                           WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=3)),
        dict(lengths=[700, 0, 90], s_q=2, h_q=32, fp8="tensor", knobs=dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32,
                                                                           WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)),
    ]  # fmt: skip
    for case in cases:
        shape = {k: v for k, v in case.items() if k != "knobs"}
        inputs = make_dense_decode_inputs(**shape, dtype=dtype, device=device)
        causal = case["s_q"] > 1
        with config.override(**case.get("knobs", {})):
            out, lse = wavemla.dense_mla_decode(**inputs, causal=causal)
        if device == "cuda":
            torch.cuda.synchronize()
        ref_out, ref_lse = dense_decode_ref(**{k: v.cpu() for k, v in inputs.items()}, causal=causal)
        # the tolerances of the dense kernel tests (FlashMLA's, widened for bf16 weights), against fp64 on the same rows
        why = [
            m
            for m in (
                check_close("out", out.cpu(), ref_out, dense_out_tolerance(inputs["k_cache"], lane)),
                check_close("lse", lse.cpu(), ref_lse, TOLERANCES[("lse", lane)]),
            )
            if m
        ]
        bad += bool(why)
        print(f"dense {case}: {'ok' if not why else 'MISMATCH: ' + ' '.join(why)}", flush=True)
    print("result:", "PASS" if not bad else f"FAIL ({bad} mismatching cases)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
