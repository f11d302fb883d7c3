"""LSE combine of split pieces: sparse decode (static piece layout) and dense decode (scheduler-written layout).

When the sparse split kernel does not merge cut tokens itself (plans with tiles under 64 rows:
:attr:`wavemla.plan.Plan.merge_in_kernel`), it leaves, for every query token whose tiles span several programs or
batch-invariant pieces, one normalized partial output and one base-2 lse per piece in the workspace (slot
``token + piece``). This kernel merges them (tokens cut into many pieces: all pieces loaded at once and reduced over
a fixed-shape piece axis; few pieces: the split kernel's :func:`merge_pieces`, in slot order), applies the sink and
writes the final output and natural-log lse. Tokens held whole by one program (one slot) were
already written by the split kernel and are skipped here. The pieces of token ``t`` are slots
``t + t*n_tiles // units_per_part .. t + ((t+1)*n_tiles - 1) // units_per_part`` — a pure function of static shapes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wavemla.kernels import gdc, launch
from wavemla.kernels.dense_decode import finalize_rows
from wavemla.kernels.gdc import gdc_wait
from wavemla.kernels.sparse_decode import finalize_heads, merge_pieces, seen_lse2
from wavemla.plan import dense_combine_shape

# Tokens cut into this many pieces or more (the bound, rounded up to a power of two) are merged by _merge_all_pieces.
# H200, CSA/HCA h=64 FP8 (benchmarks/results/2026-11-30-h200-combine.log, each pair in one run): with 20-36 pieces a
# token that is faster (HCA b=1: 16.4 against 22.3 µs; CSA b=1: 16.2 against 17.1), with 5-6 it is slower
# (CSA b=8: 28.9 against 26.7; b=32: 53.2 against 45.8, even with all 512 columns per program), so merge_pieces' loop
# over the pieces stays there.
_WIDE_FROM_PIECES = 16


# Columns a program of the all-pieces merge takes: all 512 (fewer programs; H200, 64 heads, fp16 partials, one-tile
# pieces, the combine alone: benchmarks/experiments/sparse_combine_shapes.py,
# 2026-12-03-h200-sparse-combine-shapes-7e91166.json, L2 flushed, median of 30): 4/8/12 tokens of 10 pieces took 8.1,
# 9.7, 11.4 µs over 512 columns against 10.6, 15.7, 22.0 over 128 (8 tokens of 20 pieces 11.2 against 17.5); one
# token 6.8 against 6.4 (7.6 against 7.2 with 20 pieces), which 128 would win, but the shape may not depend on the
# batch: a batch-invariant plan merges a token alike in every batch, and the order of the sum over pieces follows the
# program's shape. In `wavemla bench` (2026-12-03-h200-sparse-combine512-4d4baba.json, CSA/HCA, 16/64 heads,
# b = 1/4/8) 0.85-1.04 of 128's time, geomean 0.97; 1.04 at 16 heads and one token. The pieces' partials of a program,
# [pieces, block_h, block_d], are capped at this many elements (128 a thread at 4 warps).
_WIDE_MAX_ELEMENTS = 16384


def wide_block_d(max_pieces: int, d: int = 512) -> int:
    """The columns a program of the all-pieces merge takes for tokens of at most ``max_pieces`` (a power of two)
    pieces, one head a program (see ``_WIDE_MAX_ELEMENTS``)."""
    block_d = d
    while block_d > 64 and max_pieces * block_d > _WIDE_MAX_ELEMENTS:
        block_d //= 2
    return block_d


def _check_block(name: str, value: int, d: int | None = None) -> None:
    """``value`` (a block extent of the combine kernels: a ``tl.arange`` length) is a positive power of two, dividing
    the head dim ``d`` where given; else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"{name}: expected a positive power of two, got {value!r}")
    if d is not None and d % value:
        raise ValueError(f"{name}: must divide the head dim {d}, got {value}")


def _max_pieces_pow2(n_tiles: int, units_per_part: int) -> int:
    """The most pieces a token has with slots of ``units_per_part`` tiles, rounded up to a power of two."""
    return triton.next_power_of_2((n_tiles + units_per_part - 2) // units_per_part + 1)


def wide_merge(n_tiles: int, units_per_part: int) -> bool:
    """Whether :func:`sparse_decode_combine` merges tokens of ``n_tiles`` tiles in slots of ``units_per_part`` with
    :func:`_merge_all_pieces` (one program per token, head and column block) rather than the loop over pieces."""
    return _max_pieces_pow2(n_tiles, units_per_part) >= _WIDE_FROM_PIECES


@triton.jit
def _merge_all_pieces(
    p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, o_d, D: tl.constexpr, MAX_PIECES: tl.constexpr
):
    """:func:`merge_pieces` with every piece in one load each for the lse and the partials (two memory round trips,
    not two per piece), then a reduction over a piece axis of fixed size ``MAX_PIECES``; same arguments and
    returns (``o_d`` may be a block of the ``D`` columns)."""
    o_p = tl.arange(0, MAX_PIECES)
    m_p = o_p <= i_last - i_first
    o_slot = tl.cast(i_tok + i_first + o_p, tl.int64)
    m_ph = m_p[:, None] & m_h[None, :]
    p_lse_i = p_lse_ws + o_slot[:, None] * H + o_h[None, :]
    b_lse = tl.load(p_lse_i, mask=m_ph, other=float("-inf"), cache_modifier=".cg")  # [MAX_PIECES, BLOCK_H]
    b_max = tl.max(b_lse, 0)
    b_max_safe = tl.where(b_max == float("-inf"), 0.0, b_max)
    b_w = tl.exp2(b_lse - b_max_safe[None, :])  # 0 for pieces past the last and for empty pieces
    p_o_i = p_o_ws + ((o_slot[:, None] * H + o_h[None, :]) * D)[:, :, None] + o_d[None, None, :]
    b_o_i = tl.load(p_o_i, mask=m_ph[:, :, None], other=0.0, cache_modifier=".cg")  # [MAX_PIECES, BLOCK_H, len(o_d)]
    b_sum = tl.sum(b_w, 0)
    b_acc = tl.sum(b_w[:, :, None] * b_o_i.to(tl.float32), 0)
    m_seen, b_lse2 = seen_lse2(b_max_safe, b_sum)
    b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
    return b_o, b_lse2


@triton.jit
def _sparse_mla_combine_kernel(
    p_out,
    p_lse,
    p_o_ws,
    p_lse_ws,
    p_sink,
    S_Q,
    H,
    n_tiles,
    units_per_part,
    program_units,
    stride_ob,
    stride_os,
    stride_oh,
    HAS_SINK: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    D: tl.constexpr,
    MAX_PIECES: tl.constexpr,
    SKIP_HELD: tl.constexpr,
    PDL: tl.constexpr,
):
    """One program per (token, ``BLOCK_H`` heads, ``BLOCK_D`` columns). ``MAX_PIECES`` 0: :func:`merge_pieces` over
    the slots in order (``BLOCK_D`` = ``D``); otherwise :func:`_merge_all_pieces` with that bound. ``SKIP_HELD``:
    tokens whose pieces all ran in one split program of ``program_units`` units were merged there; skipped."""
    if PDL:
        gdc_wait()  # launched while the split kernel runs: its partials are complete and visible past this point
    i_tok = tl.program_id(0)
    i_hb = tl.program_id(1)
    i_db = tl.program_id(2)
    i_first = (i_tok * n_tiles) // units_per_part
    i_last = ((i_tok + 1) * n_tiles - 1) // units_per_part
    merge = i_last > i_first
    if SKIP_HELD:
        merge = merge & ((i_tok * n_tiles) // program_units != ((i_tok + 1) * n_tiles - 1) // program_units)
    if merge:
        o_h = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
        m_h = o_h < H
        o_d = i_db * BLOCK_D + tl.arange(0, BLOCK_D)
        if MAX_PIECES == 0:
            b_o, b_lse2 = merge_pieces(p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, o_d, D)
        else:
            b_o, b_lse2 = _merge_all_pieces(p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, o_d, D, MAX_PIECES)
        b_o, b_lse = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK)
        i_b = i_tok // S_Q
        i_s = i_tok - i_b * S_Q
        p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + i_s * stride_os
        tl.store(p_o + o_h[:, None] * stride_oh + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_h[:, None])
        if i_db == 0:
            tl.store(p_lse + tl.cast(i_tok, tl.int64) * H + o_h, b_lse, mask=m_h)


def sparse_decode_combine(
    *,
    out: torch.Tensor,
    lse: torch.Tensor,
    o_ws: torch.Tensor,
    lse_ws: torch.Tensor,
    attn_sink: torch.Tensor | None,
    n_tiles: int,
    units_per_part: int,
    program_units: int | None = None,
    block_h: int = 1,
    block_d: int | None = None,
    num_warps: int = 4,
    pdl: bool | None = None,
) -> None:
    """Merge split pieces into ``out [b, s_q, h, 512]`` and ``lse [b, s_q, h]`` (see module docstring).

    ``n_tiles`` is the units a token occupies in the split kernel's work list (the plan's ``unit_tiles``: its tiles,
    or a padded plan's ``token_units``); ``units_per_part`` is the workspace slot size (the plan's ``slot_units``);
    every token with more than one slot is merged. At small batch the pieces of one token are many and the combine is
    a bandwidth problem, so it is spread over every head. A token has at most
    ``(n_tiles + units_per_part - 2) // units_per_part + 1`` pieces; rounded up to a power of two, from 16 on one
    program per (token, ``block_h`` heads, ``block_d`` columns) loads
    them all at once and reduces over the piece axis (``block_d`` None: :func:`wide_block_d`), below that one program
    per (token, ``block_h`` heads) runs
    :func:`merge_pieces` over them in slot order (see ``_WIDE_FROM_PIECES``). The choice depends only on the
    static shape, so batch-invariant plans (fixed pieces) always merge the same way. ``pdl`` (None:
    :func:`wavemla.kernels.gdc.enabled`): launch for programmatic dependent launch behind the split kernel,
    which lets it start early; every program first waits for the split grid to finish. ``program_units`` (the
    plan's ``units_per_part``, given where the split kernel merged the tokens whose batch-invariant pieces all ran in
    one program, as the warp-specialized kernel does): those tokens are skipped.
    """
    if pdl is None:
        pdl = gdc.enabled(out.device)
    b, s_q, h, d = out.shape
    max_pieces = _max_pieces_pow2(n_tiles, units_per_part)
    wide = wide_merge(n_tiles, units_per_part)
    if block_d is None:
        block_d = wide_block_d(max_pieces, d) if wide else d
    _check_block("block_d", block_d, d)
    _check_block("block_h", block_h)
    grid = (b * s_q, triton.cdiv(h, block_h), d // block_d if wide else 1)
    launch.run(
        _sparse_mla_combine_kernel,
        grid,
        p_out=out,
        p_lse=lse,
        p_o_ws=o_ws,
        p_lse_ws=lse_ws,
        p_sink=attn_sink if attn_sink is not None else lse,
        S_Q=s_q,
        H=h,
        n_tiles=n_tiles,
        units_per_part=units_per_part,
        program_units=program_units if program_units is not None else units_per_part,
        stride_ob=out.stride(0),
        stride_os=out.stride(1),
        stride_oh=out.stride(2),
        HAS_SINK=attn_sink is not None,
        BLOCK_H=block_h,
        BLOCK_D=block_d if wide else d,
        D=d,
        MAX_PIECES=max_pieces if wide else 0,
        SKIP_HELD=program_units is not None,
        PDL=pdl,
        num_warps=num_warps,
        **({"launch_pdl": True} if pdl else {}),
    )


# ---------------------------------------------------------------------------------------------------- dense decode
# The dense split kernel cuts requests where the device scheduler put part boundaries, so which parts hold pieces of
# a request is data: the scheduler writes it per request (first part, last part). Request ``b``'s pieces are in
# workspace slots ``b + first .. b + last``; a request held by one part was finished by the split kernel.
# The largest group the unrolled loop below is compiled for. The group and the columns per program come from the
# planner (wavemla.plan.dense_combine_shape, with the measurements behind them).
DENSE_COMBINE_MAX_GROUP = 32
MAX_GRID_YZ = 65535  # CUDA's bound on grid dimensions 1 and 2 (the dense combine's blocks of query rows: dimension 1)


@triton.jit
def _dense_mla_combine_kernel(
    p_out,
    p_lse,
    p_o_ws,
    p_lse_ws,
    p_req,
    H,
    M,
    stride_ob,
    stride_os,
    stride_oh,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
    D: tl.constexpr,
    GROUP: tl.constexpr,
):
    """One program per (request, ``BLOCK_M`` query rows, ``BLOCK_D`` columns): the request's pieces ``GROUP`` a step,
    loaded by an unrolled loop (their loads independent of each other), folded into a running maximum, weight sum
    and output (online softmax over the steps). Pieces past the last one, and empty ones (lse -inf), weigh 0."""
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
        b_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
        b_acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for i_grp in range(i_first, i_last + 1, GROUP):
            # The max pass loads the group's lse rows; the weight pass below loads them again (64 bytes a row, just
            # read) rather than carry GROUP vectors between two unrolled loops. The piece bound is compared as a
            # tensor (o_m * 0 + ...): the interpreter rejects a mask that mixes a tensor with a scalar bool.
            b_max_new = b_max
            for g in tl.static_range(GROUP):
                i_slot = tl.cast(i_b + i_grp + g, tl.int64)
                m_g = m_m & (o_m * 0 + (i_grp + g) <= i_last)
                b_max_new = tl.maximum(b_max_new, tl.load(p_lse_ws + i_slot * M + o_m, mask=m_g, other=float("-inf")))
            b_max_safe = tl.where(b_max_new == float("-inf"), 0.0, b_max_new)
            b_alpha = tl.exp2(b_max - b_max_safe)  # the earlier steps' share; 0 while they were all empty
            b_sum = b_sum * b_alpha
            b_acc = b_acc * b_alpha[:, None]
            for g in tl.static_range(GROUP):
                i_slot = tl.cast(i_b + i_grp + g, tl.int64)
                m_g = m_m & (o_m * 0 + (i_grp + g) <= i_last)
                b_w = tl.exp2(tl.load(p_lse_ws + i_slot * M + o_m, mask=m_g, other=float("-inf")) - b_max_safe)
                p_o_i = p_o_ws + ((i_slot * M + o_m) * D)[:, None] + o_d[None, :]
                b_acc += b_w[:, None] * tl.load(p_o_i, mask=m_g[:, None], other=0.0).to(tl.float32)
                b_sum += b_w
            b_max = b_max_new
        b_max_safe = tl.where(b_max == float("-inf"), 0.0, b_max)
        m_seen, b_lse2 = seen_lse2(b_max_safe, b_sum)
        b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
        b_o, b_lse = finalize_rows(b_o, b_lse2)
        p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + o_s * stride_os + o_h * stride_oh
        tl.store(p_o[:, None] + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_m[:, None])
        if i_db == 0:
            tl.store(p_lse + tl.cast(i_b, tl.int64) * M + o_m, b_lse, mask=m_m)


def dense_decode_combine(
    *,
    out: torch.Tensor,
    lse: torch.Tensor,
    o_ws: torch.Tensor,
    lse_ws: torch.Tensor,
    req: torch.Tensor,
    block_m: int = 16,
    block_d: int | None = None,
    group: int | None = None,
    num_warps: int = 4,
) -> None:
    """Merge the pieces of cut requests into ``out [b, s_q, h, 512]`` and ``lse [b, s_q, h]``.

    ``req [b, 4]`` int32 is the scheduler's per-request row (first part, last part, ...). The grid is one program per
    (request, ``block_m`` query rows, ``block_d`` output columns); each program merges its request's pieces ``group``
    a step, their loads issued together (at small batch a request is cut into as many pieces as the GPU has program
    slots, and one piece per memory round trip made the merge a long latency chain). ``group`` and ``block_d``
    default to :func:`wavemla.plan.dense_combine_shape` of the batch and the parts (``o_ws`` has a slot per request
    and one per part). ``block_m`` is doubled where its blocks of the ``s_q·h`` query rows would pass
    ``MAX_GRID_YZ`` programs. Programs of requests held by one part return at once.
    """
    b, s_q, h, d = out.shape
    auto_group, auto_block_d = dense_combine_shape(b, o_ws.shape[0] - b)
    group = auto_group if group is None else group
    block_d = auto_block_d if block_d is None else block_d
    _check_block("block_d", block_d, d)
    _check_block("block_m", block_m)
    if isinstance(group, bool) or not isinstance(group, int) or not 1 <= group <= DENSE_COMBINE_MAX_GROUP:
        raise ValueError(f"group: pieces per step in 1..{DENSE_COMBINE_MAX_GROUP} (an unrolled loop), got {group}")
    m = s_q * h
    while triton.cdiv(m, block_m) > MAX_GRID_YZ:
        block_m *= 2
    launch.run(
        _dense_mla_combine_kernel,
        (b, triton.cdiv(m, block_m), d // block_d),
        p_out=out,
        p_lse=lse,
        p_o_ws=o_ws,
        p_lse_ws=lse_ws,
        p_req=req,
        H=h,
        M=m,
        stride_ob=out.stride(0),
        stride_os=out.stride(1),
        stride_oh=out.stride(2),
        BLOCK_M=block_m,
        BLOCK_D=block_d,
        D=d,
        GROUP=group,
        num_warps=num_warps,
    )
