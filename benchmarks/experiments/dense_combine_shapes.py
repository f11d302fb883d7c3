"""The dense combine alone over its launch shapes, on 16-bit partials cut the way the scheduler cuts uniform
requests: pieces per step, output columns and query rows per program, warps.

    PYTHONPATH=src python3 benchmarks/experiments/dense_combine_shapes.py OUT.json [--skewed | --many]

``--skewed``: 16 heads, the benchmark's skewed lengths (one request in 8 at s_k, the others s_k / 32), cut by the
scheduler as the planner's staged FP8 16x32 plan cuts them into 132 or 264 parts: the long request holds most of the
pieces, which one chain of steps merges (b = 8, 16K in 264 parts: the combine took 28 µs of a 45.6 µs call).

``--many``: uniform lengths cut into more than 16 pieces a request (16 heads in 264 or 132 parts, 64 and 128 heads at
b = 1..8), groups of 16 and 32 pieces a step over 16..128 columns: whether 32 a step holds where a request's pieces
are that many without skew.

Each case is the planner's part count at h = 64 / 128 with 4K keys; partials bf16, lse fp32, random. Every shape is
timed with CUDA-graph replay, L2 flushed before each replay (the split kernel's row stream evicts its partials before
the combine reads them), median of 30, and compared with the planner's shape (max abs difference of the outputs).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable

import torch

from wavemla import config
from wavemla.device import get_spec
from wavemla.kernels.combine import dense_decode_combine
from wavemla.plan import DenseWorkload, dense_combine_shape, dense_schedule, plan_dense
from wavemla.tools.bench import dense_lengths, timings_us

D = 512
CASES = [(8, 64, 132), (32, 64, 132), (64, 64, 132), (8, 128, 66), (32, 128, 66)]  # (batch, heads, parts)
SHAPES = list(itertools.product((4, 8, 16), (64, 128, 256), (16, 32), (4, 8)))  # group, block_d, block_m, warps
# (batch, heads, parts, s_k) with skewed lengths, and the shapes tried there (one 16-row block at 16 heads)
SKEWED = [(8, 16, 264, 16384), (8, 16, 132, 16384), (8, 16, 264, 4096), (16, 16, 264, 16384), (32, 16, 264, 16384)]
SKEWED_SHAPES = list(itertools.product((8, 16, 32), (16, 32, 64, 128), (16,), (4, 8)))
# (batch, heads, parts) with uniform lengths of more than 16 pieces a request, and the shapes tried there
MANY = [(1, 16, 132), (4, 16, 264), (8, 16, 264), (8, 16, 132), (16, 16, 264), (1, 64, 132), (2, 64, 132),
        (4, 64, 132), (1, 128, 66), (2, 128, 66)]  # fmt: skip
MANY_SHAPES = list(itertools.product((16, 32), (16, 32, 64, 128), (16,), (4, 8)))


def run_checked(
    call: Callable[[], None], out: torch.Tensor, ref: torch.Tensor | None
) -> tuple[torch.Tensor, float, float]:
    """Run ``call`` (which writes ``out``) once, compare ``out`` with ``ref`` (the first shape's output; None: this is
    the first), then time it: (the reference, the max abs difference, median µs over 30 graph replays, L2 flushed)."""
    call()
    torch.cuda.synchronize()
    if ref is None:
        ref = out.float().clone()
    diff = float((out.float() - ref).abs().max())
    return ref, diff, timings_us(call, 30, flush=True, graph=True)[1]


def schedule_rows(b: int, h: int, parts: int, s_k: int, skewed: bool) -> list[tuple[int, int]]:
    """(first part, last part) of each request as the device scheduler cuts them."""
    if not skewed:
        return dense_schedule([4096] * b, parts, 2, 64, 4096).request_parts
    with config.override(WAVEMLA_TARGET_CTAS=parts):  # the plan the benchmark runs in these parts
        p = plan_dense(DenseWorkload(batch=b, s_q=1, h_q=h, max_seqlen=s_k, is_fp8=True), get_spec("h200"))
    assert p.num_parts == parts, (p.num_parts, parts)
    lengths = dense_lengths(b, s_k, "skewed")
    return dense_schedule(lengths, parts, p.segment_overhead, p.config.block_n, s_k, p.cut_units).request_parts


def main() -> int:
    torch.manual_seed(0)
    rows = []
    skewed = "--skewed" in sys.argv
    many = "--many" in sys.argv
    cases = SKEWED if skewed else [(*c, 4096) for c in (MANY if many else CASES)]
    for b, h, parts, s_k in cases:
        request_parts = schedule_rows(b, h, parts, s_k, skewed)
        req = torch.tensor([[f, la, 0, 0] for f, la in request_parts], dtype=torch.int32, device="cuda")
        o_ws = torch.randn(b + parts, h, D, device="cuda").to(torch.bfloat16)
        lse_ws = torch.randn(b + parts, h, device="cuda") * 4
        g0, bd0 = dense_combine_shape(b, parts)
        ref = None
        shapes = SKEWED_SHAPES if skewed else MANY_SHAPES if many else SHAPES
        for g, bd, bm, w in [(g0, bd0, 16, 4), *shapes]:
            out = torch.zeros(b, 1, h, D, device="cuda", dtype=torch.bfloat16)
            lse = torch.zeros(b, 1, h, device="cuda")

            def call(out=out, lse=lse, g=g, bd=bd, bm=bm, w=w, o_ws=o_ws, lse_ws=lse_ws, req=req) -> None:
                dense_decode_combine(out=out, lse=lse, o_ws=o_ws, lse_ws=lse_ws, req=req, block_m=bm, block_d=bd,
                                     group=g, num_warps=w)  # fmt: skip

            ref, diff, us = run_checked(call, out, ref)
            planner = (g, bd, bm, w) == (g0, bd0, 16, 4)
            rows.append(dict(batch=b, heads=h, parts=parts, s_k=s_k, skewed=skewed, group=g, block_d=bd, block_m=bm,
                             warps=w, us=us, max_diff=diff, planner=planner))  # fmt: skip
        case = [r for r in rows if (r["batch"], r["heads"], r["parts"], r["s_k"]) == (b, h, parts, s_k)]
        best = min(case, key=lambda r: r["us"])
        pick = case[0]
        pieces = max(la - f + 1 for f, la in request_parts)
        print(f"b={b:3d} h={h:3d} parts={parts:3d} s_k={s_k} most pieces {pieces}: planner {g0}x{bd0}x16x4 "
              f"{pick['us']:.1f} us; best "
              f"{best['group']}x{best['block_d']}x{best['block_m']}x{best['warps']} {best['us']:.1f} us; max diff "
              f"{max(r['max_diff'] for r in case):.1e}", flush=True)  # fmt: skip
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
