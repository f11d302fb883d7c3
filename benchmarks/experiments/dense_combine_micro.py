"""The dense combine alone, three ways, on workspaces cut the way the planner and scheduler cut uniform requests.

    PYTHONPATH=src python3 benchmarks/experiments/dense_combine_micro.py OUT.json

Variants: ``serial`` (the combine before this experiment: one piece per memory round trip, 128 columns a program),
``grouped-G-BD`` (a group of G pieces in one 3D load, reduced over the piece axis), and ``unrolled-G-BD`` (the
shipped kernels/combine.py: G pieces a step as G 2D loads in a static loop, no reduction across threads, the loads
free to issue together; the logged run timed a copy of it whose sm_90 build had the same registers, loads and
barriers). Each case is timed with CUDA-graph replay (partials left in L2, as the split kernel leaves them; median
of 50) and compared with the serial combine's output (max abs difference).
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

from wavemla.kernels.combine import _dense_mla_combine_kernel
from wavemla.kernels.dense_decode import finalize_rows
from wavemla.plan import dense_schedule
from wavemla.tools.bench import timings_us

D = 512


@triton.jit
def _combine_serial(
    p_out, p_lse, p_o_ws, p_lse_ws, p_req, H, M, stride_ob, stride_os, stride_oh,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    i_b = tl.program_id(0)
    i_mb = tl.program_id(1)
    i_db = tl.program_id(2)
    i_first = tl.load(p_req + i_b * 4 + 0)
    i_last = tl.load(p_req + i_b * 4 + 1)
    if i_last > i_first:
        o_m = i_mb * BLOCK_M + tl.arange(0, BLOCK_M)
        m_m = o_m < M
        o_s = o_m // H
        o_h = o_m - o_s * H
        o_d = i_db * BLOCK_D + tl.arange(0, BLOCK_D)
        b_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        for i_part in range(i_first, i_last + 1):
            i_slot = tl.cast(i_b + i_part, tl.int64)
            b_max = tl.maximum(b_max, tl.load(p_lse_ws + i_slot * M + o_m, mask=m_m, other=float("-inf")))
        b_max_safe = tl.where(b_max == float("-inf"), 0.0, b_max)
        b_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
        b_acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for i_part in tl.range(i_first, i_last + 1, num_stages=2):
            i_slot = tl.cast(i_b + i_part, tl.int64)
            b_w = tl.exp2(tl.load(p_lse_ws + i_slot * M + o_m, mask=m_m, other=float("-inf")) - b_max_safe)
            b_o_i = tl.load(p_o_ws + ((i_slot * M + o_m) * D)[:, None] + o_d[None, :], mask=m_m[:, None], other=0.0)
            b_acc += b_w[:, None] * b_o_i.to(tl.float32)
            b_sum += b_w
        m_seen = b_sum > 0.0
        b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
        b_lse2 = tl.where(m_seen, b_max_safe + tl.log2(tl.where(m_seen, b_sum, 1.0)), float("-inf"))
        b_o, b_lse = finalize_rows(b_o, b_lse2)
        p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + o_s * stride_os + o_h * stride_oh
        tl.store(p_o[:, None] + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_m[:, None])
        if i_db == 0:
            tl.store(p_lse + tl.cast(i_b, tl.int64) * M + o_m, b_lse, mask=m_m)


@triton.jit
def _combine_grouped3d(
    p_out, p_lse, p_o_ws, p_lse_ws, p_req, H, M, stride_ob, stride_os, stride_oh,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, D: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    """A group of pieces as one ``[GROUP, BLOCK_M, BLOCK_D]`` load, reduced over the piece axis (tried, not kept:
    the reduction crosses threads)."""
    i_b = tl.program_id(0)
    i_mb = tl.program_id(1)
    i_db = tl.program_id(2)
    i_first = tl.load(p_req + i_b * 4 + 0)
    i_last = tl.load(p_req + i_b * 4 + 1)
    if i_last > i_first:
        o_m = i_mb * BLOCK_M + tl.arange(0, BLOCK_M)
        m_m = o_m < M
        o_s = o_m // H
        o_h = o_m - o_s * H
        o_d = i_db * BLOCK_D + tl.arange(0, BLOCK_D)
        o_g = tl.arange(0, GROUP)
        b_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        b_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
        b_acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for i_grp in range(i_first, i_last + 1, GROUP):
            o_slot = tl.cast(i_b + i_grp + o_g, tl.int64)
            m_gm = ((i_grp + o_g) <= i_last)[:, None] & m_m[None, :]
            b_lse = tl.load(p_lse_ws + o_slot[:, None] * M + o_m[None, :], mask=m_gm, other=float("-inf"))
            p_o_g = p_o_ws + ((o_slot[:, None] * M + o_m[None, :]) * D)[:, :, None] + o_d[None, None, :]
            b_o_g = tl.load(p_o_g, mask=m_gm[:, :, None], other=0.0)
            b_max_new = tl.maximum(b_max, tl.max(b_lse, 0))
            b_max_safe = tl.where(b_max_new == float("-inf"), 0.0, b_max_new)
            b_alpha = tl.where(b_max == float("-inf"), 0.0, tl.exp2(b_max - b_max_safe))
            b_w = tl.exp2(b_lse - b_max_safe[None, :])
            b_sum = b_sum * b_alpha + tl.sum(b_w, 0)
            b_acc = b_acc * b_alpha[:, None] + tl.sum(b_w[:, :, None] * b_o_g.to(tl.float32), 0)
            b_max = b_max_new
        m_seen = b_sum > 0.0
        b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
        b_max_safe = tl.where(b_max == float("-inf"), 0.0, b_max)
        b_lse2 = tl.where(m_seen, b_max_safe + tl.log2(tl.where(m_seen, b_sum, 1.0)), float("-inf"))
        b_o, b_lse = finalize_rows(b_o, b_lse2)
        p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + o_s * stride_os + o_h * stride_oh
        tl.store(p_o[:, None] + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_m[:, None])
        if i_db == 0:
            tl.store(p_lse + tl.cast(i_b, tl.int64) * M + o_m, b_lse, mask=m_m)


# (batch, heads, parts, s_k, block_n, overhead): the planner's picks at those shapes (bf16 rows)
CASES = [(1, 16, 16, 1024, 32, 2), (1, 16, 132, 4096, 64, 2), (1, 128, 33, 4096, 32, 2), (8, 16, 132, 4096, 64, 2),
         (8, 128, 33, 4096, 32, 2), (32, 16, 264, 4096, 32, 2), (32, 16, 132, 1024, 64, 2), (32, 128, 33, 1024, 32, 2),
         (128, 16, 264, 4096, 32, 2), (128, 64, 132, 4096, 64, 2), (128, 128, 66, 4096, 64, 2)]  # fmt: skip
VARIANTS = ["serial", "grouped-16-32", "grouped-8-64", "grouped-4-128", "unrolled-4-128", "unrolled-8-64",
            "unrolled-8-128", "unrolled-16-32", "unrolled-16-64"]  # fmt: skip


def main() -> int:
    torch.manual_seed(0)
    rows = []
    for b, h, parts, s_k, block_n, ovh in CASES:
        sched = dense_schedule([s_k] * b, parts, ovh, block_n, s_k)
        req = torch.tensor([[f, la, 0, 0] for f, la in sched.request_parts], dtype=torch.int32, device="cuda")
        max_pieces = max(la - f + 1 for f, la in sched.request_parts)
        m = h
        o_ws = torch.randn(b + parts, m, D, device="cuda")
        lse_ws = torch.randn(b + parts, m, device="cuda") * 4
        ref = None
        for v in VARIANTS:
            out = torch.zeros(b, 1, h, D, device="cuda", dtype=torch.bfloat16)
            lse = torch.zeros(b, 1, h, device="cuda")
            name, *shape = v.split("-")
            g, bd = (int(x) for x in shape) if shape else (1, 128)
            kern = {"serial": _combine_serial, "grouped": _combine_grouped3d, "unrolled": _dense_mla_combine_kernel}[
                name
            ]
            extra = {} if name == "serial" else {"GROUP": g}
            grid = (b, triton.cdiv(m, 16), D // bd)

            args = (out, lse, o_ws, lse_ws, req, h, m, out.stride(0), out.stride(1), out.stride(2))

            def call(kern=kern, grid=grid, args=args, bd=bd, extra=extra) -> None:
                kern[grid](*args, BLOCK_M=16, BLOCK_D=bd, D=D, num_warps=4, **extra)

            call()
            torch.cuda.synchronize()
            if ref is None:
                ref = out.float().clone()
            diff = float((out.float() - ref).abs().max())
            us = timings_us(call, 50, flush=False, graph=True)[1]
            rows.append(dict(batch=b, heads=h, parts=parts, max_pieces=max_pieces, variant=v, us=us, max_diff=diff))
            print(f"b={b:3d} h={h:3d} parts={parts:3d} pieces<={max_pieces:3d} {v:15s} {us:7.1f} us  diff {diff:.1e}",
                  flush=True)  # fmt: skip
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
