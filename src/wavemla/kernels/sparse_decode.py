"""DeepSeek-V4 sparse MLA decode: the split kernel.

One program owns ``BLOCK_H`` query heads and a contiguous range of the flattened work list ``(query token, KV tile)``;
a query token's tiles are its main-cache tiles followed by its extra-cache tiles (``BLOCK_N`` index entries each).
Every gathered KV tile ``[BLOCK_N, 512]`` is loaded once and shared by all ``BLOCK_H`` heads through ``tl.dot`` (K = V:
the same tile feeds QK^T and PV). A query token whose tiles all fall into one program is finished there (sink applied,
output and lse written); a token split across programs leaves one normalized partial per piece in the workspace, and
the program that writes the token's last piece merges them (:func:`merge_pieces`, in slot order): each piece bumps a
per-(token, head block) counter after its partial is stored (a CTA barrier, then one thread's acquire-release atomic
add at GPU scope, whose returned count reaches every thread through a barrier with an OR reduction:
:func:`_completes_count`); the program whose increment completes the count reads the partials back from L2 (``.cg``
loads), writes the output and resets the counter to 0 for the next call. Which program merges varies from run to run;
the merged bits do not (fixed slot order), and no combine kernel is launched. A token cut into two pieces is merged by
:func:`_merge_two_out`, the same weighted sum with its weights and row scale computed once. With ``MERGE_IN_KERNEL``
off (the plans whose tiles have fewer than 64 rows: see :attr:`wavemla.plan.Plan.merge_in_kernel`) the partials are
left to :mod:`wavemla.kernels.combine`, which runs the same :func:`merge_pieces` or, for tokens cut into many pieces,
loads them all at once and reduces over a fixed-shape piece axis.

Work ranges come from the planner as ``units_per_part``: program ``p`` covers units
``[p*units_per_part, (p+1)*units_per_part)``. The split layout is therefore a pure function of static shapes, so a
launch needs no device metadata, no host sync, and is CUDA-graph capturable. Workspace slot of the piece of token
``t`` made by program ``p`` is ``t + p`` (unique, < T + num_parts).

Batch-invariant plans cut every token into fixed pieces of ``pieces_tiles`` tiles whatever the batch, and let a
program run several whole pieces in turn: each piece is still computed alone and written to slot ``t + piece``
(the combine sees pieces as if each were a program of ``pieces_tiles`` units), so the bits do not depend on how
many programs the batch needs, while the program count adapts to the batch. A program holding all of a token's
pieces merges them after the last (no counting); pieces spread over programs are merged as any cut token's are.
Either way the merge is a fixed computation over the token's slots (chosen by the pieces per token alone), so where
the pieces ran never changes the bits.

Scores live in base 2 (``qk_scale = softmax_scale·log2 e``) so the exponentials are single ``exp2`` instructions.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from wavemla import config
from wavemla.device import device_arch, fp8_decode_path, triton_interpreting
from wavemla.kernels import gdc, launch
from wavemla.kernels.fp8 import e4m3_f16, e4m3_times_256_inv_f16, ue8m0_scale, ue8m0_scale_times_256
from wavemla.kernels.gdc import gdc_launch_dependents, gdc_wait
from wavemla.plan import Q_CONVERT_MIN_TILES, staged_fp8

LOG2E = 1.4426950408889634


@triton.jit
def _tile_idx(p_idx, i_tile, n_valid, num_slots, BLOCK_N: tl.constexpr):
    """Index entries of one tile as int32 slots, -1 where invalid (past ``n_valid``, negative, or >= slots)."""
    o_n = i_tile * BLOCK_N + tl.arange(0, BLOCK_N)
    b_idx = tl.load(p_idx + o_n, mask=o_n < n_valid, other=-1)
    return tl.where((b_idx >= 0) & (b_idx < num_slots), b_idx, -1)


@triton.jit
def _load_raw(
    p_cache, b_idx, m_n, stride_blk, stride_tok, IS_FP8: tl.constexpr, PAGE: tl.constexpr, D: tl.constexpr,
    KV_EVICT: tl.constexpr,
):  # fmt: skip
    """Issue the loads of one tile's rows; returns the raw registers (e4m3 bytes, scale bytes, rope or rows).

    FP8 rows stay in their compact form: e4m3 bytes as ``[BLOCK_N, 8, 64]`` (64-wide tile j of the 448 nope dims;
    tile 7 is masked off), one scale byte per tile ``[BLOCK_N, 8]`` and 64 bf16 rope values ``[BLOCK_N, 64]``.
    Broadcasting scales and rope over the tile axis at decode time keeps the register footprint close to the bytes
    loaded (measured on H200: half the time of a flat ``[BLOCK_N, 512]`` form with a per-column scale gather).
    ``KV_EVICT`` is the rows' L2 eviction policy ("evict_first": each row is read once per program, so it goes
    before the partials and q; "": none).
    """
    # PAGE is a compile-time constant: the slot -> (page, row) split is a multiply-shift, not a 64-bit division.
    b_blk = (b_idx // PAGE).to(tl.int64)
    b_tok = b_idx % PAGE
    if IS_FP8:
        # MODEL1 page: [PAGE x 576 B nope|rope][PAGE x 8 B scales]; nope is e4m3 (7 tiles of 64), rope bf16.
        o_j = tl.arange(0, 8)
        o_e = tl.arange(0, 64)
        p_page = p_cache + b_blk * stride_blk
        p_row = p_page + b_tok * 576
        m_x = m_n[:, None, None] & (o_j < 7)[None, :, None]
        b_x = tl.load(
            p_row[:, None, None] + (o_j[None, :, None] * 64 + o_e[None, None, :]),
            mask=m_x,
            other=0,
            eviction_policy=KV_EVICT,
        )
        m_s = m_n[:, None] & (o_j < 7)[None, :]
        b_s = tl.load(
            (p_page + PAGE * 576 + b_tok * 8)[:, None] + o_j[None, :], mask=m_s, other=0, eviction_policy=KV_EVICT
        )
        p_rope = (p_row + 448).to(tl.pointer_type(tl.bfloat16))
        b_r = tl.load(p_rope[:, None] + o_e[None, :], mask=m_n[:, None], other=0.0, eviction_policy=KV_EVICT)
    else:
        o_d = tl.arange(0, D)
        p_row = p_cache + b_blk * stride_blk + b_tok * stride_tok
        b_r = tl.load(p_row[:, None] + o_d[None, :], mask=m_n[:, None], other=0.0, eviction_policy=KV_EVICT)
        b_x = b_r
        b_s = b_r
    return b_x, b_s, b_r


@triton.jit
def _decode_raw(b_x, b_s, b_r, IS_FP8: tl.constexpr, DTYPE: tl.constexpr, D: tl.constexpr, E4M3_CVT: tl.constexpr):
    """Raw tile registers -> KV rows ``[BLOCK_N, D]`` in the compute dtype (fp16 for FP8 rows)."""
    if IS_FP8:
        # fp16 all the way: e4m3 x 2^-8 is exact in fp16, then one multiply by the row's power-of-two scale x 2^8
        # (a packed half multiply, no fp32 round trip per element). Both decode paths build the same fp16 values,
        # so they give the same bits. Exact whenever the decoded value is representable in fp16 (|x| <= 65504,
        # |x| >= 2^-24).
        o_j = tl.arange(0, 8)
        b_scale = ue8m0_scale_times_256(b_s).to(tl.float16)
        if E4M3_CVT:
            # The hardware conversion (sm_89+), two values per instruction: on the H200 it cut the tile loop by a
            # third of its instructions and CSA b=128 from 109 to 101 µs.
            b_x16 = b_x.to(tl.float8e4nv, bitcast=True).to(tl.float16) * 0.00390625
        else:
            b_x16 = e4m3_times_256_inv_f16(b_x)
        b_nope = b_x16 * b_scale[:, :, None]
        b_kv3 = tl.where((o_j < 7)[None, :, None], b_nope, b_r.to(tl.float16)[:, None, :])
        b_kv = tl.reshape(b_kv3, (b_kv3.shape[0], D))
    else:
        b_kv = b_r.to(DTYPE)
    return b_kv


@triton.jit
def _online_update(b_acc, b_m, b_l, b_kv, b_s_qk, m_n, p_pws, DTYPE: tl.constexpr, P_VIA_WS: tl.constexpr):
    """Fold one tile's scores ``b_s_qk [BLOCK_H, BLOCK_N]`` (base 2, already scaled) into (acc, m, l).

    With ``P_VIA_WS`` the weights P and the rescale factors reach the PV dot through this program's scratch rows at
    ``p_pws`` (``BLOCK_H x BLOCK_N`` values of ``DTYPE``, then ``BLOCK_H`` fp32): Triton gives a dot whose result
    feeds another dot every warp along M, so with 64 heads and 8 warps each warpgroup computed all of QK^T; with no
    value path between the two dots, QK^T is split over the warpgroups (half the tile's columns each; H200, CSA
    h=64 b=128: 75.4 -> 73.0 µs, s_q=2 b=96 121.9 -> 114.9; 2026-12-01-h200-tile-loop-pws.log).
    """
    b_s_qk = tl.where(m_n[None, :], b_s_qk, float("-inf"))
    b_m_new = tl.maximum(b_m, tl.max(b_s_qk, 1))
    # A row that has seen no valid score keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN.
    b_m_safe = tl.where(b_m_new == float("-inf"), 0.0, b_m_new)
    b_p = tl.exp2(b_s_qk - b_m_safe[:, None])
    b_alpha = tl.exp2(b_m - b_m_safe)
    b_l = b_l * b_alpha + tl.sum(b_p, 1)
    if P_VIA_WS:
        # P and alpha reach the PV dot through this program's scratch rows: with no value path from the QK^T dot
        # to the PV dot, Triton lays QK^T out over both warpgroups (each computes half the tile's columns) instead
        # of computing all of it in each.
        o_ph = tl.arange(0, b_p.shape[0])
        o_pn = tl.arange(0, b_p.shape[1])
        p_p = p_pws + o_ph[:, None] * b_p.shape[1] + o_pn[None, :]
        p_a = (p_pws + b_p.shape[0] * b_p.shape[1]).to(tl.pointer_type(tl.float32)) + o_ph
        tl.debug_barrier()  # the previous tile's reads of the scratch rows are done
        tl.store(p_p, b_p.to(DTYPE))
        tl.store(p_a, b_alpha)
        tl.debug_barrier()  # every thread's values are stored before any thread reads them back
        b_acc = b_acc * tl.load(p_a)[:, None] + tl.dot(tl.load(p_p), b_kv)
    else:
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(DTYPE), b_kv)
    return b_acc, b_m_new, b_l


@triton.jit
def _attend_tiles(
    b_acc,
    b_m,
    b_l,
    b_q,
    p_cache,
    p_idx,
    i_lo,
    i_hi,
    n_valid,
    num_slots,
    stride_blk,
    stride_tok,
    qk_scale,
    p_pws,
    IS_FP8: tl.constexpr,
    PAGE: tl.constexpr,
    DTYPE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    E4M3_CVT: tl.constexpr,
    PREFETCH_ROWS: tl.constexpr,
    KV_EVICT: tl.constexpr,
    PREFETCH_L2: tl.constexpr,
    P_VIA_WS: tl.constexpr,
):
    """Online softmax over tiles ``[i_lo, i_hi)`` of one index list; returns the updated (acc, m, l).

    Loads run ahead of the tile being computed (H200, CSA h=64 FP8, µs):

    - the index entries of tile i+1 are loaded while tile i is computed, so a tile's row gather waits on one
      memory round trip instead of two (b=128: 101 -> 94);
    - with ``PREFETCH_ROWS`` the raw rows of tile i+1 are gathered right after tile i's QK^T is issued, so the
      gather overlaps tile i's softmax and PV (BLOCK_N=32, b=32: 48.3 -> 41.8). At BLOCK_N=64 the extra tile
      does not fit the registers next to the accumulator (864 B of spills, twice as slow), so it stays off there.
    """
    n_hi = tl.minimum(n_valid, i_hi * BLOCK_N)
    b_raw_idx = _tile_idx(p_idx, i_lo, n_hi, num_slots, BLOCK_N)
    if PREFETCH_ROWS:
        m_n = b_raw_idx >= 0
        b_x, b_s, b_r = _load_raw(
            p_cache, tl.where(m_n, b_raw_idx, 0), m_n, stride_blk, stride_tok, IS_FP8, PAGE, D, KV_EVICT
        )
        b_raw_idx = _tile_idx(p_idx, i_lo + 1, n_hi, num_slots, BLOCK_N)
        for i_tile in tl.range(i_lo, i_hi, num_stages=NUM_STAGES):
            b_kv = _decode_raw(b_x, b_s, b_r, IS_FP8, DTYPE, D, E4M3_CVT)
            b_s_qk = tl.dot(b_q, tl.trans(b_kv)) * qk_scale
            m_n_next = b_raw_idx >= 0  # past i_hi every entry is -1: the loads below are masked off
            b_x, b_s, b_r = _load_raw(
                p_cache, tl.where(m_n_next, b_raw_idx, 0), m_n_next, stride_blk, stride_tok, IS_FP8, PAGE, D, KV_EVICT
            )
            b_raw_idx = _tile_idx(p_idx, i_tile + 2, n_hi, num_slots, BLOCK_N)
            b_acc, b_m, b_l = _online_update(b_acc, b_m, b_l, b_kv, b_s_qk, m_n, p_pws, DTYPE, P_VIA_WS)
            m_n = m_n_next
    else:
        for i_tile in tl.range(i_lo, i_hi, num_stages=NUM_STAGES):
            m_n = b_raw_idx >= 0
            b_x, b_s, b_r = _load_raw(
                p_cache, tl.where(m_n, b_raw_idx, 0), m_n, stride_blk, stride_tok, IS_FP8, PAGE, D, KV_EVICT
            )
            b_raw_idx = _tile_idx(p_idx, i_tile + 1, n_hi, num_slots, BLOCK_N)  # all -1 past i_hi
            b_kv = _decode_raw(b_x, b_s, b_r, IS_FP8, DTYPE, D, E4M3_CVT)
            if PREFETCH_L2:
                # The next tile's rows on their way to L2 while this one is computed: its gather then waits on an L2
                # hit instead of a DRAM round trip (no registers held, unlike PREFETCH_ROWS).
                _prefetch_rows_l2(p_cache, b_raw_idx, stride_blk, PAGE)
            b_s_qk = tl.dot(b_q, tl.trans(b_kv)) * qk_scale
            b_acc, b_m, b_l = _online_update(b_acc, b_m, b_l, b_kv, b_s_qk, m_n, p_pws, DTYPE, P_VIA_WS)
    return b_acc, b_m, b_l


# Staged FP8 tiles: a chunk's index entries are loaded this many tiles at a time (see _attend_tiles_staged).
STAGED_CHUNK_TILES = 16


@triton.jit
def _chunk_entries(p_idx, i_c0, n_hi, num_slots, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """Index entries of tiles ``[i_c0, i_c0 + BLOCK_C)`` as ``[BLOCK_C, BLOCK_N]`` int32 slots, -1 where invalid (at or
    past ``n_hi``, negative, or >= slots)."""
    o_n = (i_c0 + tl.arange(0, BLOCK_C))[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    b_idx = tl.load(p_idx + o_n, mask=o_n < n_hi, other=-1)
    return tl.where((b_idx >= 0) & (b_idx < num_slots), b_idx, -1)


@triton.jit
def _staged_scores(b_q, b_x, b_c, k_f, E4M3_CVT: tl.constexpr, ASM: tl.constexpr):
    """One 64-wide nope block of a staged tile: its e4m3 codes ``[BLOCK_N, 64]`` as fp16 (:func:`e4m3_f16`) and its
    scores ``q_j · E_jᵀ`` times each row's scale (``b_c``, fp32) and ``k_f``."""
    b_e = e4m3_f16(b_x, E4M3_CVT, ASM)
    return b_e, tl.dot(b_q, tl.trans(b_e)) * (b_c * k_f)[None, :]


@triton.jit
def _attend_tiles_staged(
    b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l,
    b_q0, b_q1, b_q2, b_q3, b_q4, b_q5, b_q6, b_qr,
    p_cache, p_idx, i_lo, i_hi, n_valid, num_slots, stride_blk, qk_scale,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, E4M3_CVT: tl.constexpr,
    ASM: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """:func:`_attend_tiles` for FP8 MODEL1 rows, staged: returns the updated accumulators (seven nope blocks and the
    rope block, ``[BLOCK_H, 64]`` each), m and l.

    The index entries come ``BLOCK_C`` tiles at a time, so no load in the tile loop feeds a tile's row addresses and
    Triton's pipeliner issues the raw bytes of tile ``i + NUM_STAGES - 1`` through cp.async while tile ``i`` is
    computed. A row's seven 64-wide nope blocks stay apart: each block's power-of-two scale multiplies its dot's
    scores (``QKᵀ``) or the weights that meet its values (``PV``), so the decode is the e4m3 conversion alone (inline
    assembly on a GPU: a cast that Triton moves into the dots' operand layouts keeps the raw load out of cp.async).
    With the hardware conversion the blocks hold e4m3 values, with the bit assembly those values x 2^-8
    (``F_INV``); the nope accumulators hold ``2^8 / F_INV`` times their output columns, the rope one its own.
    """
    F_INV: tl.constexpr = 1.0 if E4M3_CVT else 256.0  # a decoded value is e4m3 / F_INV
    o_e = tl.arange(0, 64)
    n_hi = tl.minimum(n_valid, i_hi * BLOCK_N)
    k_f = qk_scale * F_INV
    for i_c0 in range(i_lo, i_hi, BLOCK_C):
        b_ids = _chunk_entries(p_idx, i_c0, n_hi, num_slots, BLOCK_N, BLOCK_C)
        for i_tile in tl.range(i_c0, tl.minimum(i_c0 + BLOCK_C, i_hi), num_stages=NUM_STAGES):
            m_sel = tl.arange(0, BLOCK_C) == i_tile - i_c0
            b_idx = tl.sum(tl.where(m_sel[:, None], b_ids, 0), 0)
            m_n = b_idx >= 0
            b_idx = tl.where(m_n, b_idx, 0)
            # PAGE is a compile-time constant: the slot -> (page, row) split is a multiply-shift
            p_page = p_cache + (b_idx // PAGE).to(tl.int64) * stride_blk
            b_tok = b_idx % PAGE
            p_row = p_page + b_tok * 576
            # a row's 8 scale bytes (7 used) as one 8-byte word, the rope as 64 bf16
            b_sc = tl.load((p_page + PAGE * 576 + b_tok * 8).to(tl.pointer_type(tl.int64)), mask=m_n, other=0)
            b_x0 = tl.load(p_row[:, None] + (0 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x1 = tl.load(p_row[:, None] + (1 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x2 = tl.load(p_row[:, None] + (2 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x3 = tl.load(p_row[:, None] + (3 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x4 = tl.load(p_row[:, None] + (4 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x5 = tl.load(p_row[:, None] + (5 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_x6 = tl.load(p_row[:, None] + (6 * 64 + o_e[None, :]), mask=m_n[:, None], other=0)
            b_r = tl.load((p_row + 448).to(tl.pointer_type(tl.bfloat16))[:, None] + o_e[None, :], mask=m_n[:, None],
                          other=0.0).to(tl.float16)  # fmt: skip
            b_c0 = ue8m0_scale(b_sc)
            b_c1 = ue8m0_scale(b_sc >> 8)
            b_c2 = ue8m0_scale(b_sc >> 16)
            b_c3 = ue8m0_scale(b_sc >> 24)
            b_c4 = ue8m0_scale(b_sc >> 32)
            b_c5 = ue8m0_scale(b_sc >> 40)
            b_c6 = ue8m0_scale(b_sc >> 48)
            b_e0, b_s0 = _staged_scores(b_q0, b_x0, b_c0, k_f, E4M3_CVT, ASM)
            b_e1, b_s1 = _staged_scores(b_q1, b_x1, b_c1, k_f, E4M3_CVT, ASM)
            b_e2, b_s2 = _staged_scores(b_q2, b_x2, b_c2, k_f, E4M3_CVT, ASM)
            b_e3, b_s3 = _staged_scores(b_q3, b_x3, b_c3, k_f, E4M3_CVT, ASM)
            b_e4, b_s4 = _staged_scores(b_q4, b_x4, b_c4, k_f, E4M3_CVT, ASM)
            b_e5, b_s5 = _staged_scores(b_q5, b_x5, b_c5, k_f, E4M3_CVT, ASM)
            b_e6, b_s6 = _staged_scores(b_q6, b_x6, b_c6, k_f, E4M3_CVT, ASM)
            b_s = ((b_s0 + b_s1) + (b_s2 + b_s3)) + ((b_s4 + b_s5) + (b_s6 + tl.dot(b_qr, tl.trans(b_r)) * qk_scale))
            # _online_update's softmax step, written out: as a helper shared with it, ptxas allocated the measured
            # tiles' registers differently (64x64x8x1 and this tile, whose stack grew from 40 to 48 B; offline SASS)
            b_s = tl.where(m_n[None, :], b_s, float("-inf"))
            b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
            # a row that has seen no valid score keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN
            b_m_safe = tl.where(b_m_new == float("-inf"), 0.0, b_m_new)
            b_p = tl.exp2(b_s - b_m_safe[:, None])
            b_alpha = tl.exp2(b_m - b_m_safe)
            b_l = b_l * b_alpha + tl.sum(b_p, 1)
            b_m = b_m_new
            b_alpha = b_alpha[:, None]
            # weights times scale x 2^8 (a power of two: P rounds to fp16 as it would alone)
            b_a0 = tl.dot((b_p * (b_c0 * 256.0)[None, :]).to(tl.float16), b_e0, b_a0 * b_alpha)
            b_a1 = tl.dot((b_p * (b_c1 * 256.0)[None, :]).to(tl.float16), b_e1, b_a1 * b_alpha)
            b_a2 = tl.dot((b_p * (b_c2 * 256.0)[None, :]).to(tl.float16), b_e2, b_a2 * b_alpha)
            b_a3 = tl.dot((b_p * (b_c3 * 256.0)[None, :]).to(tl.float16), b_e3, b_a3 * b_alpha)
            b_a4 = tl.dot((b_p * (b_c4 * 256.0)[None, :]).to(tl.float16), b_e4, b_a4 * b_alpha)
            b_a5 = tl.dot((b_p * (b_c5 * 256.0)[None, :]).to(tl.float16), b_e5, b_a5 * b_alpha)
            b_a6 = tl.dot((b_p * (b_c6 * 256.0)[None, :]).to(tl.float16), b_e6, b_a6 * b_alpha)
            b_ar = tl.dot(b_p.to(tl.float16), b_r, b_ar * b_alpha)
    return b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l


@triton.jit
def _join_cols8(b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_a7):
    """Eight ``[R, C]`` column blocks -> ``[R, 8·C]`` (block j at columns ``[j·C, (j+1)·C)``)."""
    b_z = tl.join(tl.join(tl.join(b_a0, b_a1), tl.join(b_a2, b_a3)), tl.join(tl.join(b_a4, b_a5), tl.join(b_a6, b_a7)))
    b_z = tl.permute(b_z, (0, 4, 3, 2, 1))  # [R, C, k, m, n] = block 4n + 2m + k
    return tl.reshape(b_z, (b_z.shape[0], 8 * b_z.shape[4]))


@triton.jit
def finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK: tl.constexpr):
    """Normalized output ``[BLOCK_H, D]`` and base-2 lse -> (output scaled by the sink factor, natural-log lse).

    No valid row (lse2 = -inf) gives output 0 and lse +inf; a NaN lse2 (a NaN score) stays NaN in both, as in the
    reference (``> -inf`` would read it as no valid row). The sink enters only the denominator:
    ``out = o / (1 + 2^(sink·log2e - lse2))``.
    """
    m_rows = b_lse2 != float("-inf")
    if HAS_SINK:
        b_sink2 = tl.load(p_sink + o_h, mask=m_h, other=float("-inf")).to(tl.float32) * 1.4426950408889634
        b_factor = 1.0 / (1.0 + tl.exp2(b_sink2 - b_lse2))
        b_o = b_o * b_factor[:, None]
    b_o = tl.where(m_rows[:, None], b_o, 0.0)
    b_lse = tl.where(m_rows, b_lse2 * 0.6931471805599453, float("inf"))
    return b_o, b_lse


@triton.jit
def seen_lse2(b_max, b_sum):
    """Rows' (whether they saw a row, base-2 lse) from the maximum their weights are relative to and the sum of those
    weights, as every split kernel and merge finishes a row: a zero sum saw no row (lse2 -inf); a NaN sum (a NaN
    score) is not zero, so it stays NaN, as in the reference (``> 0`` read it as no row seen)."""
    m_seen = b_sum != 0.0
    return m_seen, tl.where(m_seen, b_max + tl.log2(tl.where(m_seen, b_sum, 1.0)), float("-inf"))


@triton.jit
def _out_scale(b_inv, b_lse2, m_seen, p_sink, o_h, m_h, HAS_SINK: tl.constexpr):
    """What :func:`finalize_heads` does, as a per-row factor for an unnormalized accumulator: ``b_inv`` (``1/l``,
    or ``1/sum`` of merged pieces) times the sink factor ``1 / (1 + 2^(sink - lse))``, so an output element costs one
    product ``acc · scale``. A row that saw no valid row has acc = +0 (its weights were all 0) and gets scale 0:
    output +0 and lse +inf, as finalize_heads gives, without a select per element (which the compiler moves past the
    cast to 16 bits, into unpack-select-repack). Returns (scale, natural-log lse)."""
    if HAS_SINK:
        b_sink2 = tl.load(p_sink + o_h, mask=m_h, other=float("-inf")).to(tl.float32) * 1.4426950408889634
        b_inv = b_inv / (1.0 + tl.exp2(b_sink2 - b_lse2))
    b_lse = tl.where(b_lse2 != float("-inf"), b_lse2 * 0.6931471805599453, float("inf"))
    return tl.where(m_seen, b_inv, 0.0), b_lse


@triton.jit
def _completes_count(p_cnt, n_before_last, ASM: tl.constexpr):
    """Add this program's piece to the counter ``*p_cnt`` and return 1 in every thread if its increment completed
    the count (the count before it was ``n_before_last``), else 0.

    Thread 0 adds with acquire-release semantics at GPU scope and the CTA learns the value it got back through one
    barrier with an OR reduction (``bar.red.or.pred``), which also orders every thread's later loads (the merge's)
    after thread 0's acquire. So all threads of a program take the same branch, exactly one program merges a token,
    and no thread depends on reading back an increment that another thread made: the earlier scheme (every thread
    reads the count after a release increment, the CTA taking the smallest value read) lost that uniformity where
    the compiler folded the reduction over identical loads, and threads of the last program could split between
    merging and not (seen on the H200 under compute-sanitizer's timing: half-written outputs). Under Triton's
    interpreter (programs run one after another) a plain atomic add."""
    if ASM:
        return tl.inline_asm_elementwise(
            """{
            .reg .pred p_first, p_last, p_any;
            .reg .u32 r_tid, r_old;
            mov.u32 r_tid, %tid.x;
            setp.eq.u32 p_first, r_tid, 0;
            mov.u32 r_old, 0xffffffff;
            @p_first atom.acq_rel.gpu.global.add.u32 r_old, [$1], 1;
            setp.eq.and.u32 p_last, r_old, $2, p_first;
            bar.red.or.pred p_any, 0, p_last;
            selp.u32 $0, 1, 0, p_any;
            }""",
            "=r,l,r",
            [p_cnt, n_before_last],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )
    else:
        return (tl.atomic_add(p_cnt, 1, sem="acq_rel", scope="gpu") == n_before_last).to(tl.int32)


@triton.jit
def _piece_lse(p_lse_ws, i_slot, H, o_h, m_h):
    """Base-2 lse of workspace slot ``i_slot`` for heads ``o_h`` (-inf where masked). The load skips L1: other
    programs wrote the partials during this kernel."""
    return tl.load(p_lse_ws + i_slot * H + o_h, mask=m_h, other=float("-inf"), cache_modifier=".cg")


@triton.jit
def _pieces_max(p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h):
    """Largest piece lse per head over slots ``i_tok + i_first .. i_tok + i_last``, 0 where every piece is empty,
    so that every weight 2^(lse_i - max) is <= 1."""
    b_max = tl.full(o_h.shape, float("-inf"), dtype=tl.float32)
    for i_part in range(i_first, i_last + 1):
        b_max = tl.maximum(b_max, _piece_lse(p_lse_ws, tl.cast(i_tok + i_part, tl.int64), H, o_h, m_h))
    return tl.where(b_max == float("-inf"), 0.0, b_max)


@triton.jit
def merge_pieces(p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, o_d, D: tl.constexpr):
    """Merge the normalized partials of token ``i_tok`` in workspace slots ``i_tok + i_first .. i_tok + i_last``
    (base-2 lse each) in slot order; returns the merged output ``[BLOCK_H, D]`` fp32 and its base-2 lse.

    The same arithmetic in the same order whichever program runs it, so a token's bits do not depend on which of
    its pieces finished last.
    """
    b_max_safe = _pieces_max(p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h)
    b_sum = tl.zeros(o_h.shape, dtype=tl.float32)
    b_acc = tl.zeros([o_h.shape[0], D], dtype=tl.float32)
    for i_part in range(i_first, i_last + 1):
        i_slot = tl.cast(i_tok + i_part, tl.int64)
        b_w = tl.exp2(_piece_lse(p_lse_ws, i_slot, H, o_h, m_h) - b_max_safe)
        p_o_i = p_o_ws + (i_slot * H + o_h[:, None]) * D + o_d[None, :]
        b_o_i = tl.load(p_o_i, mask=m_h[:, None], other=0.0, cache_modifier=".cg")
        b_acc += b_w[:, None] * b_o_i.to(tl.float32)
        b_sum += b_w
    m_seen, b_lse2 = seen_lse2(b_max_safe, b_sum)
    b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
    return b_o, b_lse2


@triton.jit
def _q_to_f16_kernel(p_q, p_out, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """fp16 copy of a contiguous q (FP8 rows compute in fp16). With ``PDL`` the split kernel, launched for
    programmatic dependent launch behind it, starts at once and waits for this grid only where it reads q."""
    if PDL:
        gdc_launch_dependents()
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(p_out + o, tl.load(p_q + o, mask=m).to(tl.float16), mask=m)


@triton.jit
def _prefetch_l2(p):
    """Bring the 128-byte line at each address of ``p`` into L2 (no register result; nothing waits for it)."""
    return tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [p], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _prefetch_first_tile(
    p_cache, p_idx, i_tile, n_valid, num_slots, stride_blk, PAGE: tl.constexpr, BLOCK_N: tl.constexpr
):
    """L2 prefetch of the FP8 MODEL1 rows of one tile (every 128-byte line of a 576-byte row, and its scales)."""
    _prefetch_rows_l2(p_cache, _tile_idx(p_idx, i_tile, n_valid, num_slots, BLOCK_N), stride_blk, PAGE)


@triton.jit
def _prefetch_rows_l2(p_cache, b_idx, stride_blk, PAGE: tl.constexpr):
    """L2 prefetch of the FP8 MODEL1 rows at slots ``b_idx`` (-1: none): every 128-byte line of each 576-byte row,
    and its scale bytes."""
    m_n = b_idx >= 0
    b_idx = tl.where(m_n, b_idx, 0)
    p_page = p_cache + (b_idx // PAGE).to(tl.int64) * stride_blk
    b_tok = b_idx % PAGE
    o_l = tl.arange(0, 8)
    # lines of the row at offsets 0, 128, ..., 512 and its last byte (575); the scales after the page's rows
    o_b = tl.where(o_l < 5, o_l * 128, tl.where(o_l == 5, 575, PAGE * 576 + b_tok[:, None] * 8 - b_tok[:, None] * 576))
    _prefetch_l2(tl.where(m_n[:, None] & (o_l < 7)[None, :], p_page[:, None] + b_tok[:, None] * 576 + o_b, p_cache))


@triton.jit
def _merge_pieces_out(
    p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, p_sink, p_o, stride_oh, p_lse_tok,
    HAS_SINK: tl.constexpr, D: tl.constexpr, DC: tl.constexpr,
):  # fmt: skip
    """:func:`merge_pieces` and :func:`finalize_heads` for a whole head block, written out ``DC`` columns at a time
    (output rows at ``p_o``, lse at ``p_lse_tok``): each column chunk holds a ``[BLOCK_H, DC]`` accumulator instead
    of ``[BLOCK_H, D]``. Every output element sees the same operations in the same order as in
    :func:`merge_pieces`, so the bits are the same."""
    b_max_safe = _pieces_max(p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h)
    b_sum = tl.zeros(o_h.shape, dtype=tl.float32)
    for i_part in range(i_first, i_last + 1):
        b_sum += tl.exp2(_piece_lse(p_lse_ws, tl.cast(i_tok + i_part, tl.int64), H, o_h, m_h) - b_max_safe)
    m_seen, b_lse2 = seen_lse2(b_max_safe, b_sum)
    for i_dc in range(D // DC):
        o_dc = i_dc * DC + tl.arange(0, DC)
        b_acc = tl.zeros([o_h.shape[0], DC], dtype=tl.float32)
        for i_part in range(i_first, i_last + 1):
            i_slot = tl.cast(i_tok + i_part, tl.int64)
            b_w = tl.exp2(_piece_lse(p_lse_ws, i_slot, H, o_h, m_h) - b_max_safe)
            p_o_i = p_o_ws + (i_slot * H + o_h[:, None]) * D + o_dc[None, :]
            b_o_i = tl.load(p_o_i, mask=m_h[:, None], other=0.0, cache_modifier=".cg")
            b_acc += b_w[:, None] * b_o_i.to(tl.float32)
        b_o = b_acc / tl.where(m_seen, b_sum, 1.0)[:, None]
        b_o, _ = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK)
        tl.store(p_o + o_h[:, None] * stride_oh + o_dc[None, :], b_o.to(p_o.dtype.element_ty), mask=m_h[:, None])
    b_lse = tl.where(b_lse2 != float("-inf"), b_lse2 * 0.6931471805599453, float("inf"))  # as finalize_heads
    tl.store(p_lse_tok + o_h, b_lse, mask=m_h)


@triton.jit
def _merge_two_out(
    p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, p_sink, p_o, stride_oh, p_lse_tok,
    HAS_SINK: tl.constexpr, D: tl.constexpr, DC: tl.constexpr,
):  # fmt: skip
    """Merge of a token cut into two pieces (slots ``i_tok + i_first`` and ``i_tok + i_first + 1``; with
    ``i_last == i_first`` the one piece alone), written out ``DC`` columns at a time as :func:`_merge_pieces_out`
    does, with less code around the weighted sum:

    - both pieces' lse and the sinks are loaded once, together, and each piece's weight ``2^(lse_i - max)`` and the
      row scale are computed once for all column chunks (not reloaded and re-broadcast per chunk and piece);
    - the row scale is ``factor / sum`` (:func:`_out_scale`), so an output element is one product ``acc · scale``
      instead of a division and a product;
    - the chunks are unrolled and the next chunk's partials are loaded before the current chunk is stored.

    The weighted sum is the same as :func:`_merge_pieces_out`'s (``0 + w_0·o_0``, then ``+ w_1·o_1``, fused
    multiply-adds in slot order), the max and the lse too; the output differs from it only by the rounding of
    ``acc · (factor / sum)`` against ``(acc / sum) · factor`` (an fp32 unit or two before the cast). Deterministic,
    and a function of the token's slots alone, so batch-invariant plans keep their guarantee."""
    i_s0 = tl.cast(i_tok + i_first, tl.int64)
    m_h1 = tl.where(i_last > i_first, m_h, False)  # the second piece's heads (none with one piece)
    b_l0 = tl.load(p_lse_ws + i_s0 * H + o_h, mask=m_h, other=float("-inf"), cache_modifier=".cg")
    b_l1 = tl.load(p_lse_ws + (i_s0 + 1) * H + o_h, mask=m_h1, other=float("-inf"), cache_modifier=".cg")
    p_w0 = p_o_ws + (i_s0 * H + o_h[:, None]) * D
    p_w1 = p_w0 + H * D
    o_c = tl.arange(0, DC)
    b_o0 = tl.load(p_w0 + o_c[None, :], mask=m_h[:, None], other=0.0, cache_modifier=".cg")
    b_o1 = tl.load(p_w1 + o_c[None, :], mask=m_h1[:, None], other=0.0, cache_modifier=".cg")
    b_max = tl.maximum(tl.maximum(tl.full(o_h.shape, float("-inf"), dtype=tl.float32), b_l0), b_l1)
    b_max_safe = tl.where(b_max == float("-inf"), 0.0, b_max)
    b_w0 = tl.exp2(b_l0 - b_max_safe)
    b_w1 = tl.exp2(b_l1 - b_max_safe)
    b_sum = tl.zeros(o_h.shape, dtype=tl.float32)
    b_sum += b_w0
    b_sum += b_w1
    m_seen, b_lse2 = seen_lse2(b_max_safe, b_sum)
    b_scale, b_lse = _out_scale(1.0 / tl.where(m_seen, b_sum, 1.0), b_lse2, m_seen, p_sink, o_h, m_h, HAS_SINK)
    for i_dc in tl.static_range(D // DC):
        o_dc = i_dc * DC + o_c
        if i_dc + 1 < D // DC:
            b_n0 = tl.load(p_w0 + DC + o_dc[None, :], mask=m_h[:, None], other=0.0, cache_modifier=".cg")
            b_n1 = tl.load(p_w1 + DC + o_dc[None, :], mask=m_h1[:, None], other=0.0, cache_modifier=".cg")
        b_acc = tl.zeros([o_h.shape[0], DC], dtype=tl.float32)
        b_acc += b_w0[:, None] * b_o0.to(tl.float32)
        b_acc += b_w1[:, None] * b_o1.to(tl.float32)
        b_out = (b_acc * b_scale[:, None]).to(p_o.dtype.element_ty)
        tl.store(p_o + o_h[:, None] * stride_oh + o_dc[None, :], b_out, mask=m_h[:, None])
        if i_dc + 1 < D // DC:
            b_o0 = b_n0
            b_o1 = b_n1
    tl.store(p_lse_tok + o_h, b_lse, mask=m_h)


# Integer arguments whose values follow the workload: slot counts, list widths and their strides, work counters.
# Triton compiles a kernel variant per combination of "multiple of 16 or not" over its integer arguments, so a caller
# whose lists or pools change size (transformers' gathered rows grow by one a step) would compile again mid-decode,
# seconds a time. Their alignment hints change no instruction: the PTX is identical with and without them for every
# plannable configuration on sm_80, sm_90 and sm_120 (Triton 3.6); tests/test_resources.py checks one. The kernel
# ignores their alignment (it still specializes a value of 1, as Triton does).
WORKLOAD_INTS = (
    "num_slots", "num_slots_x", "topk", "topk_x", "n_tiles_main", "n_tiles", "total_units", "units_per_part",
    "seg_units", "slot_units", "stride_ib", "stride_is", "stride_ixb", "stride_ixs", "cut_units", "whole_units",
)  # fmt: skip


def spread_cut_units(total_units: int, n_tiles: int, num_parts: int, units_per_part: int, whole_units: int) -> int:
    """The units left to cut (the leftover tokens') when each of ``num_parts`` parts runs ``whole_units`` units of
    whole tokens after its ``units_per_part`` of them (:func:`unit_range`); ValueError naming ``whole_units`` where
    those are not whole tokens or leave more than the parts' runs cover. ``whole_units`` 0: every unit."""
    cut_units = total_units - num_parts * whole_units
    if whole_units < 0 or whole_units % n_tiles or not 0 <= cut_units <= num_parts * units_per_part:
        raise ValueError(f"whole_units: expected whole tokens ({n_tiles} units each) leaving at most num_parts · "
                         f"units_per_part = {num_parts * units_per_part} of the {total_units} units to cut, got "
                         f"{whole_units}")  # fmt: skip
    return cut_units


def token_span(n_tiles: int, units_per_part: int, token_units: int, pieces_tiles: int | None, whole_units: int) -> int:
    """The units a query token occupies in the work list: ``n_tiles``, or ``token_units`` > 0 (padded tokens,
    :attr:`wavemla.plan.Plan.token_units`): its tiles, then empty units up to a multiple of ``units_per_part``, so
    that every program runs one piece of one token. ValueError naming ``token_units`` where the padding is not that
    (a multiple of ``units_per_part`` at least ``n_tiles``, less than one program's units more) or is combined with
    batch-invariant pieces or a spread partition."""
    if not token_units:
        return n_tiles
    if (
        token_units < n_tiles
        or units_per_part < 1
        or token_units % units_per_part
        or token_units - n_tiles >= units_per_part
        or pieces_tiles is not None
        or whole_units
    ):
        raise ValueError(f"token_units: expected the {n_tiles} tiles of a token padded to a multiple of "
                         f"units_per_part = {units_per_part} (less than one more), without pieces_tiles or "
                         f"whole_units, got {token_units}")  # fmt: skip
    return token_units


@triton.jit
def unit_range(i_part, i_rng, units_per_part, total_units, cut_units, whole_units, g, SPREAD: tl.constexpr):
    """Part ``i_part``'s units ``[unit_lo, unit_hi)`` of its range ``i_rng`` and the end (exclusive) of their segments
    of ``g`` units. One range: ``units_per_part`` units of the flattened (token, tile) space. ``SPREAD`` (whole
    tokens first, the leftover spread; :attr:`wavemla.plan.Plan.whole_units`), two: first a run of ``units_per_part``
    units of the ``cut_units`` units of the leftover tokens (the first tokens), then ``whole_units`` units of whole
    tokens after them; either may be empty. The warp-specialized kernel calls it too."""
    if SPREAD:
        first = 1 - i_rng
        unit_lo = first * (i_part * units_per_part) + i_rng * (cut_units + i_part * whole_units)
        unit_hi = tl.minimum(unit_lo + first * units_per_part + i_rng * whole_units,
                             first * cut_units + i_rng * total_units)  # fmt: skip
        seg_end = tl.where(unit_hi > unit_lo, (unit_hi - 1) // g + 1, unit_lo // g)
    else:
        unit_lo = i_part * units_per_part
        unit_hi = tl.minimum(unit_lo + units_per_part, total_units)
        seg_end = (unit_hi - 1) // g + 1
    return unit_lo, unit_hi, seg_end


@triton.jit
def segment(i_seg, unit_lo, unit_hi, seg_units, n_tiles, S_Q):
    """Segment ``i_seg`` of a part's units ``[unit_lo, unit_hi)``: (its first unit, token, batch row, query position,
    first and end unit within the token). The warp-specialized kernel calls it too."""
    seg_lo = tl.maximum(i_seg * seg_units, unit_lo)
    i_tok = seg_lo // n_tiles
    i_b = i_tok // S_Q
    i_s = i_tok - i_b * S_Q
    t_lo = seg_lo - i_tok * n_tiles
    t_hi = tl.minimum((i_seg + 1) * seg_units, unit_hi) - i_tok * n_tiles
    return seg_lo, i_tok, i_b, i_s, t_lo, t_hi


@triton.jit(do_not_specialize_on_alignment=WORKLOAD_INTS)
def _sparse_mla_decode_kernel(
    p_q,
    p_out,
    p_lse,
    p_o_ws,
    p_lse_ws,
    p_cnt,
    p_q_ws,
    p_sink,
    p_p_ws,
    # main cache
    p_kv,
    p_idx,
    p_len,
    num_slots,
    stride_kv_blk,
    stride_kv_tok,
    # extra cache
    p_kv_x,
    p_idx_x,
    p_len_x,
    num_slots_x,
    stride_kvx_blk,
    stride_kvx_tok,
    # shapes and strides
    S_Q,
    H,
    topk,
    topk_x,
    n_tiles_main,
    n_tiles,
    total_units,
    units_per_part,
    seg_units,
    slot_units,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_ob,
    stride_os,
    stride_oh,
    stride_ib,
    stride_is,
    stride_ixb,
    stride_ixs,
    qk_scale,
    cut_units,
    whole_units,
    IS_FP8: tl.constexpr,
    PAGE: tl.constexpr,
    PAGE_X: tl.constexpr,
    HAS_LEN: tl.constexpr,
    HAS_EXTRA: tl.constexpr,
    HAS_LEN_X: tl.constexpr,
    HAS_SINK: tl.constexpr,
    DTYPE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
    NUM_HB: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    E4M3_CVT: tl.constexpr,
    PREFETCH_ROWS: tl.constexpr,
    MERGE_IN_KERNEL: tl.constexpr,
    ACQUIRE_ASM: tl.constexpr,
    Q_VIA_WS: tl.constexpr,
    PDL: tl.constexpr,
    WAIT_Q: tl.constexpr,
    PREFETCH_FIRST: tl.constexpr,
    MERGE_DC: tl.constexpr,
    KV_EVICT: tl.constexpr,
    WS_EVICT: tl.constexpr,
    PREFETCH_L2: tl.constexpr,
    P_VIA_WS: tl.constexpr,
    MERGE_PAIR: tl.constexpr,
    LEAN_NORM: tl.constexpr,
    DECODE_ASM: tl.constexpr,
    STAGED_C: tl.constexpr,
    SPREAD: tl.constexpr,
):
    if PDL:
        # Let the combine launch now: its programs wait in griddepcontrol.wait until this grid has finished, so
        # its launch latency hides behind this kernel instead of following it.
        gdc_launch_dependents()
    i_pid = tl.program_id(0)
    i_hb = i_pid % NUM_HB
    i_part = i_pid // NUM_HB
    o_h = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < H
    o_d = tl.arange(0, D)
    # this program's P scratch rows (P_VIA_WS): BLOCK_H x BLOCK_N values of the compute dtype, then BLOCK_H fp32
    p_pws = p_p_ws + tl.cast(i_pid, tl.int64) * (BLOCK_H * BLOCK_N + 2 * BLOCK_H)

    # Segments: the program's units cut at every multiple of seg_units (a token, or a batch-invariant piece); two
    # ranges of units with SPREAD.
    for i_rng in range(0, 1 + SPREAD):
        unit_lo, unit_hi, seg_end = unit_range(
            i_part, i_rng, units_per_part, total_units, cut_units, whole_units, seg_units, SPREAD
        )
        for i_seg in range(unit_lo // seg_units, seg_end):
            seg_lo, i_tok, i_b, i_s, t_lo, t_hi = segment(i_seg, unit_lo, unit_hi, seg_units, n_tiles, S_Q)

            if WAIT_Q:
                # Launched behind the q conversion kernel (programmatic dependent launch): everything but q was
                # written before that kernel started, so the first tile's rows can be on their way to L2 while it runs.
                if PREFETCH_FIRST:
                    first = i_seg == unit_lo // seg_units
                    if first & (t_lo < n_tiles_main):
                        _prefetch_first_tile(
                            p_kv, p_idx + tl.cast(i_b, tl.int64) * stride_ib + i_s * stride_is, t_lo, topk,
                            num_slots, stride_kv_blk, PAGE, BLOCK_N,
                        )  # fmt: skip
                    if first & (t_lo >= n_tiles_main) & HAS_EXTRA:
                        _prefetch_first_tile(
                            p_kv_x, p_idx_x + tl.cast(i_b, tl.int64) * stride_ixb + i_s * stride_ixs,
                            t_lo - n_tiles_main, topk_x, num_slots_x, stride_kvx_blk, PAGE_X, BLOCK_N,
                        )  # fmt: skip
                gdc_wait()
            p_q_tok = p_q + tl.cast(i_b, tl.int64) * stride_qb + i_s * stride_qs
            if IS_FP8 and NUM_STAGES > 1:
                n_main = topk
                if HAS_LEN:
                    n_main = tl.minimum(tl.maximum(tl.load(p_len + i_b), 0), topk)
                hi_main = tl.minimum(t_hi, tl.cdiv(n_main, BLOCK_N))
                n_x = topk_x
                if HAS_EXTRA and HAS_LEN_X:
                    n_x = tl.minimum(tl.maximum(tl.load(p_len_x + i_b), 0), topk_x)
                lo_x = tl.maximum(t_lo - n_tiles_main, 0)
                hi_x = tl.minimum(t_hi - n_tiles_main, tl.cdiv(n_x, BLOCK_N))
                p_idx_tok = p_idx + tl.cast(i_b, tl.int64) * stride_ib + i_s * stride_is
                p_idx_x_tok = p_idx_x + tl.cast(i_b, tl.int64) * stride_ixb + i_s * stride_ixs
                # Staged tiles (_attend_tiles_staged): q and the accumulators as eight 64-wide column blocks, the
                # seventh past the nope dims the rope's.
                o_e = tl.arange(0, 64)
                p_qh = p_q_tok + o_h[:, None] * stride_qh + o_e[None, :]
                b_q0 = tl.load(p_qh + 0 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q1 = tl.load(p_qh + 1 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q2 = tl.load(p_qh + 2 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q3 = tl.load(p_qh + 3 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q4 = tl.load(p_qh + 4 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q5 = tl.load(p_qh + 5 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_q6 = tl.load(p_qh + 6 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_qr = tl.load(p_qh + 7 * 64, mask=m_h[:, None], other=0.0).to(tl.float16)
                b_a0 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a1 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a2 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a3 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a4 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a5 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_a6 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_ar = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
                b_m = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
                b_l = tl.zeros([BLOCK_H], dtype=tl.float32)
                b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l = _attend_tiles_staged(
                    b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l,
                    b_q0, b_q1, b_q2, b_q3, b_q4, b_q5, b_q6, b_qr,
                    p_kv, p_idx_tok, t_lo, hi_main, n_main, num_slots, stride_kv_blk, qk_scale,
                    PAGE, BLOCK_N, NUM_STAGES, E4M3_CVT, DECODE_ASM, STAGED_C,
                )  # fmt: skip
                if HAS_EXTRA:
                    b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l = _attend_tiles_staged(
                        b_a0, b_a1, b_a2, b_a3, b_a4, b_a5, b_a6, b_ar, b_m, b_l,
                        b_q0, b_q1, b_q2, b_q3, b_q4, b_q5, b_q6, b_qr,
                        p_kv_x, p_idx_x_tok, lo_x, hi_x, n_x, num_slots_x, stride_kvx_blk, qk_scale,
                        PAGE_X, BLOCK_N, NUM_STAGES, E4M3_CVT, DECODE_ASM, STAGED_C,
                    )  # fmt: skip
                K_NOPE: tl.constexpr = (1.0 if E4M3_CVT else 256.0) / 256.0  # the nope blocks' 2^8 / F_INV undone
                b_acc = _join_cols8(b_a0 * K_NOPE, b_a1 * K_NOPE, b_a2 * K_NOPE, b_a3 * K_NOPE, b_a4 * K_NOPE,
                                    b_a5 * K_NOPE, b_a6 * K_NOPE, b_ar)  # fmt: skip
            else:
                b_q = tl.load(p_q_tok + o_h[:, None] * stride_qh + o_d[None, :], mask=m_h[:, None], other=0.0).to(DTYPE)
                if Q_VIA_WS:
                    # q converted here goes out to this program's scratch rows and comes back as a plain load, which
                    # Triton stages in shared memory for the tensor cores (a converted value would stay in registers
                    # across the tile loop); the round trip is served by L2 and replaces a separate conversion kernel.
                    # (Converting 64 columns at a time spilled less but measured slower, CSA b=8 with 16x32 tiles 32.5
                    # against 26.8 µs in separate runs: a chunk's load may not move above the previous chunk's store,
                    # which may alias it.)
                    p_qw = p_q_ws + tl.cast(i_pid, tl.int64) * (BLOCK_H * D)
                    p_qw = p_qw + tl.arange(0, BLOCK_H)[:, None] * D + o_d[None, :]
                    tl.debug_barrier()  # the previous segment's reads of the scratch rows are done
                    tl.store(p_qw, b_q)
                    tl.debug_barrier()  # every thread's rows are stored before any thread reads them back
                    b_q = tl.load(p_qw)
                b_acc = tl.zeros([BLOCK_H, D], dtype=tl.float32)
                b_m = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
                b_l = tl.zeros([BLOCK_H], dtype=tl.float32)

                n_main = topk
                if HAS_LEN:
                    n_main = tl.minimum(tl.maximum(tl.load(p_len + i_b), 0), topk)
                hi_main = tl.minimum(t_hi, tl.cdiv(n_main, BLOCK_N))
                b_acc, b_m, b_l = _attend_tiles(
                    b_acc, b_m, b_l, b_q,
                    p_kv, p_idx + tl.cast(i_b, tl.int64) * stride_ib + i_s * stride_is,
                    t_lo, hi_main, n_main, num_slots, stride_kv_blk, stride_kv_tok, qk_scale, p_pws,
                    IS_FP8, PAGE, DTYPE, BLOCK_N, D, NUM_STAGES, E4M3_CVT, PREFETCH_ROWS, KV_EVICT,
                    PREFETCH_L2, P_VIA_WS,
                )  # fmt: skip
                if HAS_EXTRA:
                    n_x = topk_x
                    if HAS_LEN_X:
                        n_x = tl.minimum(tl.maximum(tl.load(p_len_x + i_b), 0), topk_x)
                    lo_x = tl.maximum(t_lo - n_tiles_main, 0)
                    hi_x = tl.minimum(t_hi - n_tiles_main, tl.cdiv(n_x, BLOCK_N))
                    b_acc, b_m, b_l = _attend_tiles(
                        b_acc, b_m, b_l, b_q,
                        p_kv_x, p_idx_x + tl.cast(i_b, tl.int64) * stride_ixb + i_s * stride_ixs,
                        lo_x, hi_x, n_x, num_slots_x, stride_kvx_blk, stride_kvx_tok, qk_scale, p_pws,
                        IS_FP8, PAGE_X, DTYPE, BLOCK_N, D, NUM_STAGES, E4M3_CVT, PREFETCH_ROWS, KV_EVICT,
                        PREFETCH_L2, P_VIA_WS,
                    )  # fmt: skip

            m_seen, b_lse2 = seen_lse2(b_m, b_l)
            if LEAN_NORM:
                # One product per element: acc times a per-row scale (1/l, with the sink factor for a whole token)
                # instead of a division per element (and a product and a select for the sink).
                b_scale = 1.0 / tl.where(m_seen, b_l, 1.0)
            else:
                b_o = b_acc / tl.where(m_seen, b_l, 1.0)[:, None]
            if (t_lo == 0) & (t_hi == n_tiles):
                if LEAN_NORM:
                    b_scale, b_lse = _out_scale(b_scale, b_lse2, m_seen, p_sink, o_h, m_h, HAS_SINK)
                    b_o = b_acc * b_scale[:, None]
                else:
                    b_o, b_lse = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK)
                p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + i_s * stride_os
                tl.store(
                    p_o + o_h[:, None] * stride_oh + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_h[:, None]
                )
                tl.store(p_lse + tl.cast(i_tok, tl.int64) * H + o_h, b_lse, mask=m_h)
            else:
                if LEAN_NORM:
                    b_o = b_acc * b_scale[:, None]
                i_slot = tl.cast(i_tok + seg_lo // slot_units, tl.int64)
                tl.store(
                    p_o_ws + (i_slot * H + o_h[:, None]) * D + o_d[None, :],
                    b_o.to(p_o_ws.dtype.element_ty),
                    mask=m_h[:, None],
                    eviction_policy=WS_EVICT,
                )
                tl.store(p_lse_ws + i_slot * H + o_h, b_lse2, mask=m_h, eviction_policy=WS_EVICT)
                if MERGE_IN_KERNEL:
                    tok_lo = i_tok * n_tiles
                    i_first = tok_lo // slot_units
                    i_last = (tok_lo + n_tiles - 1) // slot_units
                    p_cnt_tok = p_cnt + i_tok * NUM_HB + i_hb
                    if (tok_lo >= unit_lo) & (tok_lo + n_tiles <= unit_hi):
                        # Batch-invariant pieces all in this program: merge after the last, no counting.
                        tl.debug_barrier()  # every thread's partials are stored before the loads of the merge
                        is_last = t_hi == n_tiles
                    else:
                        # Count this piece in; the program whose increment completes the count merges them all, and
                        # all of its threads know it (_completes_count).
                        tl.debug_barrier()  # every thread's partial is stored before the release below
                        is_last = _completes_count(p_cnt_tok, i_last - i_first, ACQUIRE_ASM) != 0
                    if is_last:
                        p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + i_s * stride_os
                        pair = False
                        if MERGE_PAIR:
                            pair = i_last - i_first <= 1
                        if pair:
                            _merge_two_out(
                                p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, p_sink, p_o, stride_oh,
                                p_lse + tl.cast(i_tok, tl.int64) * H, HAS_SINK, D, D if MERGE_DC == 0 else MERGE_DC,
                            )  # fmt: skip
                        elif MERGE_DC == 0:
                            b_o, b_lse2 = merge_pieces(p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, o_d, D)
                            b_o, b_lse = finalize_heads(b_o, b_lse2, p_sink, o_h, m_h, HAS_SINK)
                            p_o_h = p_o + o_h[:, None] * stride_oh + o_d[None, :]
                            tl.store(p_o_h, b_o.to(p_out.dtype.element_ty), mask=m_h[:, None])
                            tl.store(p_lse + tl.cast(i_tok, tl.int64) * H + o_h, b_lse, mask=m_h)
                        else:
                            _merge_pieces_out(
                                p_o_ws, p_lse_ws, i_tok, i_first, i_last, H, o_h, m_h, p_sink, p_o, stride_oh,
                                p_lse + tl.cast(i_tok, tl.int64) * H, HAS_SINK, D, MERGE_DC,
                            )  # fmt: skip
                        # Every piece has counted in (if any did): zero for the next call.
                        tl.store(p_cnt_tok, 0)


_TL_DTYPE = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
_Q_BLOCK = 2048
# Output columns per step of the in-kernel merge (H200: 128 beat 64 and all 512; 2026-11-30-h200-merge.log).
MERGE_CHUNK = 128


def l2_policies(is_fp8: bool, block_h: int, block_n: int) -> bool:
    """Whether the split kernel loads its gathered rows with L2 policy evict_first and stores cut tokens' partials
    with evict_last by default (``WAVEMLA_L2_POLICIES=auto``; same results either way): for FP8 rows except in 64x32
    tiles, as measured on the H200 — faster in 64x64 tiles, also where two query tokens (s_q = 2) or two head blocks
    (h = 128) read each row, and in 16x32 tiles; 2-3% slower in 64x32 tiles (2026-11-30-h200-l2-hints.log,
    -l2-shapes.log). Row caches go without them (not measured)."""
    return is_fp8 and not (block_h >= 64 and block_n < 64)


def l2_prefetch_next(is_fp8: bool, block_n: int) -> bool:
    """Whether the split kernel prefetches the next tile's rows into L2 while it computes a tile by default: FP8
    rows in tiles of more than 32 rows, whose raw rows are not prefetched into registers (same results either way;
    H200, 64x64 tiles: 1-5% faster at h=64, neutral at h=128, where a second head block reads each row;
    2026-12-01-h200-tile-loop.log)."""
    return is_fp8 and block_n > 32


def p_scratch(is_fp8: bool, block_h: int, arch: int) -> bool:
    """Whether the split kernel built for sm_``arch`` passes P to the PV dot through scratch rows: FP8 rows in
    64-head tiles where Triton lowers ``tl.dot`` to Hopper's warpgroup MMA (sm_90), whose layout rule made each
    warpgroup compute all of QK^T (:func:`_online_update`). sm_100 (tcgen05) and the mma.sync paths were not
    measured with it."""
    return is_fp8 and block_h >= 64 and arch == 90


def p_scratch_elems(is_fp8: bool, block_h: int, block_n: int, programs: int, device: Any) -> int:
    """fp16 elements of the scratch rows through which the split kernel passes P to the PV dot (``p_ws``), 0 where
    it keeps P in registers: :func:`p_scratch` for the architecture kernels on ``device`` are built for, and under
    Triton's interpreter the same tiles, so that the CPU tests run the path. ``programs``: the grid (parts times
    head blocks)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        use = triton_interpreting() and p_scratch(is_fp8, block_h, 90)
    else:
        use = p_scratch(is_fp8, block_h, device_arch(dev))
    return programs * (block_h * block_n + 2 * block_h) if use else 0


def launch_l2_policies(is_fp8: bool, block_h: int, block_n: int) -> bool:
    """The launcher's choice of L2 policies: the ``WAVEMLA_L2_POLICIES`` knob, ``auto`` meaning :func:`l2_policies`."""
    choice = config.get("WAVEMLA_L2_POLICIES")
    return choice == "on" or (choice == "auto" and l2_policies(is_fp8, block_h, block_n))


def _q_to_f16(q: torch.Tensor, pdl: bool) -> torch.Tensor:
    """fp16 copy of ``q`` by :func:`_q_to_f16_kernel` (which lets a dependent launch start at once when ``pdl``)."""
    if not q.is_contiguous():
        launch.untracked("q copied to make it contiguous")
        q = q.contiguous()
    out = launch.scratch(torch.empty(q.shape, dtype=torch.float16, device=q.device))
    n = q.numel()
    launch.run(_q_to_f16_kernel, (triton.cdiv(n, _Q_BLOCK),), q, out, n, BLOCK=_Q_BLOCK, PDL=pdl, num_warps=4)
    return out


def sparse_decode_split(
    *,
    q: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    o_ws: torch.Tensor | None,
    lse_ws: torch.Tensor | None,
    counts: torch.Tensor | None,
    kv: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    extra_kv: torch.Tensor | None,
    extra_indices: torch.Tensor | None,
    extra_topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    is_fp8: bool,
    softmax_scale: float,
    block_h: int,
    block_n: int,
    num_warps: int,
    num_stages: int,
    units_per_part: int,
    num_parts: int,
    e4m3_cvt: bool | None = None,
    pieces_tiles: int | None = None,
    merge_in_kernel: bool = True,
    q_ws: torch.Tensor | None = None,
    pdl: bool | None = None,
    prefetch_first: bool = True,
    merge_chunk: int = MERGE_CHUNK,
    l2_hints: bool | None = None,
    prefetch_l2: bool | None = None,
    p_ws: torch.Tensor | None = None,
    merge_pair: bool = True,
    lean_norm: bool = True,
    whole_units: int = 0,
    token_units: int = 0,
) -> Any:
    """Launch the split kernel; returns Triton's compiled-kernel handle (registers, spills, shared memory).

    Inputs must already be validated (see :mod:`wavemla.api`).

    q ``[b, s_q, h, 512]``; out ``[b, s_q, h, 512]`` q.dtype; lse ``[b, s_q, h]`` fp32; workspace ``o_ws
    [b*s_q + num_parts, h, 512]`` (fp32, or fp16 for FP8 caches), ``lse_ws [b*s_q + num_parts, h]`` fp32 and
    ``counts [b*s_q*ceil(h/block_h)]`` int32, zero at the first call (the kernel leaves it zero): needed when a token
    is split.
    kv ``[blocks, page, 1, 512]`` rows or ``[blocks, page, 1, 584]`` uint8 MODEL1; indices ``[b, s_q, topk]`` int32.
    ``pieces_tiles`` (batch-invariant plans): every token is cut into fixed pieces of this many tiles, each written
    to its own workspace slot (``token + piece``), however many pieces a program covers; the workspace then needs
    ``b*s_q + b*s_q*n_tiles/pieces_tiles`` rows. ``merge_in_kernel`` False leaves every partial for
    :func:`wavemla.kernels.combine.sparse_decode_combine` (``counts`` unused). ``q_ws`` ``[num_parts *
    ceil(h/block_h), block_h, 512]`` fp16: scratch rows through which the kernel converts a bf16 q for FP8 caches
    (ignored otherwise). ``pdl`` (None: :func:`wavemla.kernels.gdc.enabled`): let a following kernel launched
    for programmatic dependent launch (the combine) start while this one runs, and, where q is converted by a kernel
    before this one, launch this one behind it the same way (with ``prefetch_first``, its programs first prefetch
    their first tile's rows into L2, then wait for q). ``merge_chunk``: output columns per step of the in-kernel
    merge of cut tokens (0: all 512 at once; same bits either way). ``e4m3_cvt`` picks the e4m3 decode
    (hardware conversion or bit assembly; identical results); None asks :func:`wavemla.device.fp8_decode_path` for
    q's device. ``l2_hints``: load the gathered rows with L2 policy evict_first and store the partials with
    evict_last (same results either way); None: :func:`launch_l2_policies`. ``prefetch_l2``: prefetch the next
    tile's FP8 rows into L2 during each tile (tiles of more than 32 rows; same results either way); None:
    :func:`l2_prefetch_next`. ``p_ws``: fp16 scratch of at least :func:`p_scratch_elems` elements through which P
    reaches the PV dot (FP8 rows; None keeps P in registers). ``merge_pair``: tokens cut into two pieces are
    merged by :func:`_merge_two_out` (False: by the general merge, whose output can differ by an fp32 unit before
    the cast). ``lean_norm``: a segment's accumulator is normalized by one product per element with a per-row
    scale (False: a division per element, then the sink's product; outputs within an fp32 unit or two).
    ``whole_units`` > 0 (:attr:`wavemla.plan.Plan.whole_units`): each of the ``num_parts`` parts runs
    ``units_per_part`` units of the leftover tokens (the first ``b·s_q - num_parts·whole_units / n_tiles`` tokens,
    cut between programs), then ``whole_units`` units of whole tokens. ``token_units`` > 0
    (:attr:`wavemla.plan.Plan.token_units`): each token occupies that many units of the work list, its tiles and
    then empty ones (skipped), so that parts of ``units_per_part`` units never straddle two tokens; the workspace
    then needs ``b*s_q + b*s_q*token_units/units_per_part`` rows.
    """
    if l2_hints is None:
        l2_hints = launch_l2_policies(is_fp8, block_h, block_n)
    if prefetch_l2 is None:
        prefetch_l2 = l2_prefetch_next(is_fp8, block_n)
    if p_ws is not None:
        need = num_parts * triton.cdiv(q.shape[2], block_h) * (block_h * block_n + 2 * block_h)
        if not is_fp8 or p_ws.dtype != torch.float16 or p_ws.numel() < need:
            raise ValueError(
                f"p_ws: FP8 rows and an fp16 tensor of at least {need} elements, got {p_ws.dtype} "
                f"{p_ws.numel()} ({'FP8' if is_fp8 else 'row'} cache)"
            )
    if merge_chunk < 0 or (merge_chunk and (q.shape[-1] % merge_chunk or merge_chunk & (merge_chunk - 1))):
        raise ValueError(f"merge_chunk: 0 or a power of two dividing {q.shape[-1]}, got {merge_chunk}")
    if e4m3_cvt is None:
        e4m3_cvt = is_fp8 and fp8_decode_path(q.device) == "cvt"
    # FP8 rows compute in fp16. q must reach the tensor cores from shared memory: converted in-kernel and used
    # directly it stays in registers across the tile loop and the kernel runs 15% slower (H200, CSA b=128: 103.7 vs
    # 121.1 µs). With ``q_ws`` the kernel converts q and reloads it through per-program scratch rows; without it, q is
    # converted by _q_to_f16 (one more kernel, which this one launches behind) when programs run Q_CONVERT_MIN_TILES
    # tiles or more.
    # Staged FP8 tiles hold q in registers as eight 64-wide blocks, converted there (16 heads: 32 registers), and
    # load a row's scale bytes as one 8-byte word: caches whose pages do not start 8-byte aligned (the API asks 2)
    # run the register-decoded tile instead (same plan and partition, outputs within the tolerances).
    staged = staged_fp8(is_fp8, num_stages) and all(
        c.data_ptr() % 8 == 0 and c.stride(0) % 8 == 0 for c in (kv, extra_kv) if c is not None
    )
    if is_fp8 and not staged:
        num_stages = 1
    q_via_ws = is_fp8 and q.dtype != torch.float16 and q_ws is not None and not staged
    if pdl is None:
        pdl = gdc.enabled(q.device)
    wait_q = False
    convert_q = is_fp8 and q.dtype != torch.float16 and not q_via_ws and not staged
    if convert_q and units_per_part + whole_units >= Q_CONVERT_MIN_TILES:
        q = _q_to_f16(q, pdl)
        wait_q = pdl
    b, s_q, h, d = q.shape
    topk = indices.shape[2]
    n_tiles_main = triton.cdiv(topk, block_n)
    has_extra = extra_kv is not None
    dummy = indices  # a valid pointer for arguments a constexpr flag disables
    if extra_kv is not None:
        if extra_indices is None:
            raise ValueError("extra_indices: required with extra_kv")
        kv_x, idx_x = extra_kv, extra_indices
    else:
        kv_x, idx_x = kv, indices
    topk_x = idx_x.shape[2] if has_extra else 0
    n_tiles = token_span(
        n_tiles_main + (triton.cdiv(topk_x, block_n) if has_extra else 0), units_per_part, token_units, pieces_tiles,
        whole_units,
    )  # fmt: skip
    num_hb = triton.cdiv(h, block_h)
    total_units = b * s_q * n_tiles
    cut_units = spread_cut_units(total_units, n_tiles, num_parts, units_per_part, whole_units)
    return launch.run(
        _sparse_mla_decode_kernel,
        (num_parts * num_hb,),
        p_q=q,
        p_out=out,
        p_lse=lse,
        p_o_ws=o_ws if o_ws is not None else out,
        p_lse_ws=lse_ws if lse_ws is not None else lse,
        p_cnt=counts if counts is not None else indices,
        p_q_ws=q_ws if q_via_ws else q,
        p_sink=attn_sink if attn_sink is not None else lse,
        p_p_ws=p_ws if p_ws is not None else out,
        p_kv=kv,
        p_idx=indices,
        p_len=topk_length if topk_length is not None else dummy,
        num_slots=kv.shape[0] * kv.shape[1],
        stride_kv_blk=kv.stride(0),
        stride_kv_tok=kv.stride(1),
        p_kv_x=kv_x,
        p_idx_x=idx_x,
        p_len_x=extra_topk_length if extra_topk_length is not None else dummy,
        num_slots_x=kv_x.shape[0] * kv_x.shape[1],
        stride_kvx_blk=kv_x.stride(0),
        stride_kvx_tok=kv_x.stride(1),
        S_Q=s_q,
        H=h,
        topk=topk,
        topk_x=topk_x,
        n_tiles_main=n_tiles_main,
        n_tiles=n_tiles,
        total_units=total_units,
        units_per_part=units_per_part,
        seg_units=n_tiles if pieces_tiles is None else pieces_tiles,
        slot_units=units_per_part if pieces_tiles is None else pieces_tiles,
        stride_qb=q.stride(0),
        stride_qs=q.stride(1),
        stride_qh=q.stride(2),
        stride_ob=out.stride(0),
        stride_os=out.stride(1),
        stride_oh=out.stride(2),
        stride_ib=indices.stride(0),
        stride_is=indices.stride(1),
        stride_ixb=idx_x.stride(0),
        stride_ixs=idx_x.stride(1),
        qk_scale=softmax_scale * LOG2E,
        cut_units=cut_units,
        whole_units=whole_units,
        IS_FP8=is_fp8,
        PAGE=kv.shape[1],
        PAGE_X=kv_x.shape[1],
        HAS_LEN=topk_length is not None,
        HAS_EXTRA=has_extra,
        HAS_LEN_X=has_extra and extra_topk_length is not None,
        HAS_SINK=attn_sink is not None,
        # FP8 rows decode exactly into fp16, whose 10-bit mantissa keeps the softmax weights P (rounded for the PV
        # dot) 8x more precise than bf16; row caches compute in their own dtype.
        DTYPE=tl.float16 if is_fp8 else _TL_DTYPE[q.dtype],
        BLOCK_H=block_h,
        BLOCK_N=block_n,
        D=d,
        NUM_HB=num_hb,
        NUM_STAGES=num_stages,
        E4M3_CVT=is_fp8 and e4m3_cvt,
        # Row prefetch needs a second raw tile in registers: measured a win at 32 rows, spills at 64.
        PREFETCH_ROWS=is_fp8 and block_n <= 32,
        MERGE_IN_KERNEL=merge_in_kernel,
        ACQUIRE_ASM=not triton_interpreting(),
        Q_VIA_WS=q_via_ws,
        PDL=pdl,
        WAIT_Q=wait_q,
        PREFETCH_FIRST=wait_q and prefetch_first,  # wait_q: FP8 rows (the conversion is for them)
        MERGE_DC=merge_chunk,
        # L2 policy: gathered rows are streamed, so they go first; the partials, read back by the merge, stay.
        # H200 (2026-11-30-h200-l2-hints.log, -l2-shapes.log): h=64 s_q=1 CSA b=128 80.3 -> 75.1 µs, batch-invariant
        # 97.1 -> 89.5, b=133 (cut tokens) 102.0 -> 96.0; s_q=2 and h=128 5-8% faster, h=16 (16x32 tiles) b=96 7%.
        KV_EVICT="evict_first" if l2_hints else "",
        WS_EVICT="evict_last" if l2_hints else "",
        PREFETCH_L2=is_fp8 and prefetch_l2 and block_n > 32 and not triton_interpreting(),
        P_VIA_WS=p_ws is not None,
        MERGE_PAIR=merge_pair,
        LEAN_NORM=lean_norm,
        DECODE_ASM=not triton_interpreting(),
        STAGED_C=STAGED_CHUNK_TILES,
        SPREAD=whole_units > 0,
        num_warps=num_warps,
        num_stages=num_stages,
        **({"launch_pdl": True} if wait_q else {}),
    )
