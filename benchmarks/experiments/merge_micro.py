"""The in-kernel merge alone: how long one program takes to merge P partials ``[64, 512]`` of a token, outside the
split kernel (no tile loop before it, no other traffic), for the shipped merge and two rewrites.

    PYTHONPATH=src python3 benchmarks/experiments/merge_micro.py OUT.json

Each program merges its token's P workspace slots ``REPEAT`` times (same inputs, same output); the time of one merge
is the difference of the call at REPEAT = 11 and 1, over 10 (CUDA-graph replay, the partials hot in L2 as the
split kernel leaves them, median of 30). Programs: 1 (one SM, latency only) and 132 (one per SM). Variants:

- ``shipped``: ``_merge_pieces_out`` (column chunks of ``MERGE_CHUNK``), as the split kernel calls it;
- ``whole``: ``merge_pieces`` + ``finalize_heads`` on the whole ``[64, 512]`` (the ``MERGE_DC = 0`` path);
- ``unrolled``: P a constexpr, every piece's lse and chunk loaded before any is used (``tl.static_range``).
- ``flat-DC-NS``: one loop over (column chunk, piece), pipelined by Triton NS deep (cp.async into shared memory).

The outputs of all variants are compared with ``shipped`` (bitwise for ``whole``, which is documented to match).
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import triton
import triton.language as tl

from wavemla.kernels.sparse_decode import MERGE_CHUNK, _merge_pieces_out, _pieces_max, finalize_heads, merge_pieces
from wavemla.tools.bench import timings_us

H, D = 64, 512
VARIANTS = [("shipped", 8), ("whole", 8), ("unrolled", 8), ("unrolled", 4)] + [
    (f"flat-{dc}-{ns}", 8) for dc, ns in ((128, 2), (128, 3), (128, 4), (64, 2), (64, 4), (256, 2))
]


@triton.jit
def _merge_whole(p_o_ws, p_lse_ws, p_sink, p_out, p_lse, n_pieces, repeat, BLOCK_H: tl.constexpr, D: tl.constexpr):
    i_tok = tl.program_id(0)
    o_h = tl.arange(0, BLOCK_H)
    m_h = o_h < BLOCK_H
    o_d = tl.arange(0, D)
    i_first = i_tok * n_pieces
    for _ in range(repeat):
        b_o, b_lse2 = merge_pieces(p_o_ws, p_lse_ws, 0, i_first, i_first + n_pieces - 1, BLOCK_H, o_h, m_h, o_d, D)
        b_o, b_lse = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, True)
        tl.store(p_out + i_tok * BLOCK_H * D + o_h[:, None] * D + o_d[None, :], b_o.to(p_out.dtype.element_ty))
        tl.store(p_lse + i_tok * BLOCK_H + o_h, b_lse)


@triton.jit
def _merge_unrolled(
    p_o_ws, p_lse_ws, p_sink, p_out, p_lse, repeat,
    P: tl.constexpr, BLOCK_H: tl.constexpr, D: tl.constexpr, DC: tl.constexpr,
):  # fmt: skip
    i_tok = tl.program_id(0)
    o_h = tl.arange(0, BLOCK_H)
    i_first = i_tok * P
    for _ in range(repeat):
        b_max = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        for i in tl.static_range(P):
            b_max = tl.maximum(b_max, tl.load(p_lse_ws + (i_first + i) * BLOCK_H + o_h, cache_modifier=".cg"))
        b_max = tl.where(b_max == float("-inf"), 0.0, b_max)
        b_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
        for i in tl.static_range(P):
            b_sum += tl.exp2(tl.load(p_lse_ws + (i_first + i) * BLOCK_H + o_h, cache_modifier=".cg") - b_max)
        m_seen = b_sum > 0.0
        b_lse2 = tl.where(m_seen, b_max + tl.log2(tl.where(m_seen, b_sum, 1.0)), float("-inf"))
        for i_dc in tl.static_range(D // DC):
            o_dc = i_dc * DC + tl.arange(0, DC)
            b_acc = tl.zeros([BLOCK_H, DC], dtype=tl.float32)
            for i in tl.static_range(P):
                i_slot = i_first + i
                b_w = tl.exp2(tl.load(p_lse_ws + i_slot * BLOCK_H + o_h, cache_modifier=".cg") - b_max)
                b_o_i = tl.load(p_o_ws + (i_slot * BLOCK_H + o_h[:, None]) * D + o_dc[None, :], cache_modifier=".cg")
                b_acc += b_w[:, None] * b_o_i.to(tl.float32)
            b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
            b_o, _ = finalize_heads(b_o, b_lse2, p_sink, o_h, o_h < BLOCK_H, True)
            tl.store(p_out + i_tok * BLOCK_H * D + o_h[:, None] * D + o_dc[None, :], b_o.to(p_out.dtype.element_ty))
        tl.store(
            p_lse + i_tok * BLOCK_H + o_h, tl.where(b_lse2 > float("-inf"), b_lse2 * 0.6931471805599453, float("inf"))
        )


@triton.jit
def _merge_flat_out(
    p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, p_sink, p_o, stride_oh, p_lse_tok,
    HAS_SINK: tl.constexpr, D: tl.constexpr, DC: tl.constexpr, NS: tl.constexpr,
):  # fmt: skip
    """``_merge_pieces_out`` as one loop over (column chunk, piece) that Triton's pipeliner can keep ``NS`` loads
    ahead in: the same operations in the same order per output element."""
    b_max_safe = _pieces_max(p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h)
    n_p = i_last - i_first + 1
    b_sum = tl.zeros(o_h.shape, dtype=tl.float32)
    b_acc = tl.zeros([o_h.shape[0], DC], dtype=tl.float32)
    o_c = tl.arange(0, DC)
    for i_it in tl.range(0, n_p * (D // DC), num_stages=NS):
        i_dc = i_it // n_p
        i_part = i_it - i_dc * n_p
        i_slot = tl.cast(i_tok + i_first + i_part, tl.int64)
        b_w = tl.exp2(
            tl.load(p_lse_ws + i_slot * H + o_h, mask=m_h, other=float("-inf"), cache_modifier=".cg") - b_max_safe
        )
        o_dc = i_dc * DC + o_c
        b_o_i = tl.load(
            p_o_ws + (i_slot * H + o_h[:, None]) * D + o_dc[None, :], mask=m_h[:, None], other=0.0, cache_modifier=".cg"
        )
        b_sum = tl.where(i_dc == 0, b_sum + b_w, b_sum)
        b_acc += b_w[:, None] * b_o_i.to(tl.float32)
        if i_part == n_p - 1:
            m_seen = b_sum > 0.0
            b_lse2 = tl.where(m_seen, b_max_safe + tl.log2(tl.where(m_seen, b_sum, 1.0)), float("-inf"))
            b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
            b_o, b_lse = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK)
            tl.store(p_o + o_h[:, None] * stride_oh + o_dc[None, :], b_o.to(p_o.dtype.element_ty), mask=m_h[:, None])
            if i_dc == 0:
                tl.store(p_lse_tok + o_h, b_lse, mask=m_h)
        b_acc = tl.where(i_part == n_p - 1, 0.0, b_acc)


@triton.jit
def _merge_chunks(
    p_o_ws, p_lse_ws, p_sink, p_out, p_lse, n_pieces, repeat,
    BLOCK_H: tl.constexpr, D: tl.constexpr, DC: tl.constexpr, NS: tl.constexpr,
):  # fmt: skip
    """Each program merges its token's pieces ``repeat`` times: the shipped ``_merge_pieces_out`` (``NS`` 0) or
    ``_merge_flat_out`` pipelined ``NS`` deep."""
    i_tok = tl.program_id(0)
    o_h = tl.arange(0, BLOCK_H)
    m_h = o_h < BLOCK_H
    i_first = i_tok * n_pieces
    for _ in range(repeat):
        if NS == 0:
            _merge_pieces_out(
                p_o_ws, p_lse_ws, 0, i_first, i_first + n_pieces - 1, BLOCK_H, o_h, m_h, p_sink,
                p_out + i_tok * BLOCK_H * D, D, p_lse + i_tok * BLOCK_H, True, D, DC,
            )  # fmt: skip
        else:
            _merge_flat_out(
                p_o_ws, p_lse_ws, 0, i_first, i_first + n_pieces - 1, BLOCK_H, o_h, m_h, p_sink,
                p_out + i_tok * BLOCK_H * D, D, p_lse + i_tok * BLOCK_H, True, D, DC, NS,
            )  # fmt: skip


def main() -> int:
    out_path = sys.argv[1]
    torch.manual_seed(0)
    rows = []
    for pieces in (2, 5):
        for n_prog in (1, 132):
            ws = torch.randn(n_prog * pieces, H, D, device="cuda").to(torch.float16)
            lse_ws = torch.randn(n_prog * pieces, H, device="cuda") * 3
            sink = torch.randn(H, device="cuda")
            outs = {}
            for variant, warps in VARIANTS:
                out = torch.empty(n_prog, H, D, device="cuda", dtype=torch.bfloat16)
                lse = torch.empty(n_prog, H, device="cuda")

                def call(rep: int, variant: str = variant, warps: int = warps, out=out, lse=lse, ws=ws, lse_ws=lse_ws,
                         sink=sink, n_prog=n_prog, pieces=pieces) -> None:  # fmt: skip
                    if variant == "shipped":
                        _merge_chunks[(n_prog,)](
                            ws, lse_ws, sink, out, lse, pieces, rep, H, D, MERGE_CHUNK, 0, num_warps=warps
                        )
                    elif variant == "whole":
                        _merge_whole[(n_prog,)](ws, lse_ws, sink, out, lse, pieces, rep, H, D, num_warps=warps)
                    elif variant == "unrolled":
                        _merge_unrolled[(n_prog,)](
                            ws, lse_ws, sink, out, lse, rep, pieces, H, D, MERGE_CHUNK, num_warps=warps
                        )
                    else:  # flat-DC-NS
                        _, dc, ns = variant.split("-")
                        _merge_chunks[(n_prog,)](
                            ws, lse_ws, sink, out, lse, pieces, rep, H, D, int(dc), int(ns), num_warps=warps
                        )

                call(1)
                torch.cuda.synchronize()
                outs[(variant, warps)] = (out.clone(), lse.clone())
                t1 = timings_us(lambda call=call: call(1), 30, flush=False, graph=True)[1]
                t11 = timings_us(lambda call=call: call(11), 30, flush=False, graph=True)[1]
                ref_o, ref_l = outs[("shipped", 8)]
                same = bool(torch.equal(out, ref_o) and torch.equal(lse, ref_l))
                maxdiff = float((out.float() - ref_o.float()).abs().max())
                row = {
                    "pieces": pieces, "programs": n_prog, "variant": variant, "warps": warps,
                    "call_us_repeat1": t1, "call_us_repeat11": t11, "merge_us": (t11 - t1) / 10,
                    "same_bits_as_shipped8": same, "max_abs_diff": maxdiff,
                }  # fmt: skip
                rows.append(row)
                print(
                    f"P={pieces} programs={n_prog:3d} {variant:8s} warps={warps}: merge {row['merge_us']:6.2f} µs "
                    f"(call {t1:6.1f} / {t11:6.1f}) same bits {same} maxdiff {maxdiff:.2e}",
                    flush=True,
                )
    with open(out_path, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    med = statistics.median(r["merge_us"] for r in rows if r["variant"] == "shipped" and r["warps"] == 8)
    print(f"shipped, 8 warps, median merge over the cases: {med:.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
