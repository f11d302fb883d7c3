"""Paged dense MLA decode (DeepSeek-V3 / Kimi-K2 / GLM): the device scheduler and the split kernel.

Work list. Request ``b`` with ``L_b`` keys owns ``n_b = max(ceil(L_b / BLOCK_N), 1)`` units: its KV tiles of
``BLOCK_N`` keys (a request with no key keeps one empty unit, whose processing writes ``out = 0``, ``lse = +inf``).
Every query token of a request reads the same keys, so the ``S·H`` query rows of a request (row ``m = s·H + h``) are
tiled ``BLOCK_H`` per program and each KV tile is loaded once per row block and shared through ``tl.dot``; the
first 512 dims of a key row are its value, so the same tile feeds ``QKᵀ`` and ``PV``.

Scheduler (:func:`dense_decode_schedule`, one program, FlashMLA's get_decoding_sched_meta scheme). A request weighs
``w_b = n_b + OVH`` (its units plus a fixed per-segment overhead, in tiles). With ``C_b`` the exclusive prefix of
``w`` and ``W`` the total, part ``p`` of ``P`` starts at weight ``x_p = floor(p·W / P)``: in request ``r_p`` (the last
with ``C_r <= x_p``) at tile ``clamp(x_p - C_r - OVH, 0, n_r - 1)`` — a boundary inside a request's overhead snaps
to its first tile. So every part carries the same weight whatever the lengths, a request is cut only where a part
boundary falls, and each unit belongs to exactly one part. ``r_p`` is found in O(b + P) without a search: part
boundaries inside request ``r`` start at ``ceil(C_r·P / W)``, so a histogram of those values, prefix-summed, counts
the requests that start at or before each part. The scheduler writes ``sched[p] = (first request, first tile, end
request, end tile)`` (end exclusive) and, per request, the first and last part that touch it (``part(u)`` of a unit
is ``floor(((X_u + 1)·P - 1) / W)`` with ``X_u`` the unit's weight position), which the combine reads. Aligned
(the plan's ``cut_units >= 0``, :func:`wavemla.plan.dense_schedule`): where there are no more requests than parts and
the heaviest request weighs at most ``ceil(W / P) + OVH + cut_units``, part ``p`` takes request ``p`` whole and the
parts past ``b`` nothing, so no request is cut and the combine has nothing to merge.

Split kernel. Program ``(part, row block)`` walks its range; a request it covers whole is finished there (output and
natural-log lse written); a cut request leaves one normalized fp32 partial and its base-2 lse in workspace slot
``request + part`` (unique: parts advance monotonically through the requests) for :mod:`wavemla.kernels.combine`.
Scores live in base 2 (``qk_scale = softmax_scale·log2 e``). Keys at or past the length, block-table padding and
block ids outside the cache are masked: never read.

Row tiles (bf16/fp16): the latent of a tile is loaded once and feeds both dots from shared memory. Its block ids are
loaded ``BLOCK_C`` tiles at a time and selected in registers, so no load inside the tile loop feeds a tile address:
Triton's pipeliner then issues tile ``i + NUM_STAGES - 1`` with cp.async while tile ``i`` is computed (with a
block-table load in the loop, the pipeliner gives that load a stage and the tile was fetched after the previous one
was computed: one tile in flight, never overlapped with the math). Row blocks of 16 or 32 run row-major (``mma.sync``);
64-row blocks run keys-major (:func:`keys_major`: ``Sᵀ = K·qᵀ`` and ``Oᵀ = Vᵀ·Pᵀ``, so the MMA's M is 64 keys or
512 value columns and its N the 64 query rows: wgmma on sm_90).

Caches: bf16/fp16 rows ``[blocks, page, 1, d_qk]`` (d_qk 576 = 512 latent + 64 rope, or 512), FlashMLA's V3.2 FP8
layout ``[blocks, page, 1, 656]`` (512 e4m3, 4 fp32 scales per 128 values, 64 bf16 rope), or per-tensor FP8 rows
``[blocks, page, 1, 576]`` (576 e4m3 codes, one fp32 scale for the cache: vLLM's and SGLang's ``fp8`` KV cache,
FlashMLA's ``descale_k``), both computed in fp16. A per-tensor tile holds the codes themselves (exact in fp16), and
the cache's scale multiplies the scores and the output once (read on the device, so a CUDA graph replays any scale).
FP8 tiles at ``NUM_STAGES`` > 1 are staged like row tiles (the raw bytes through cp.async) and keep a row's four
128-wide blocks apart, each block's scale applied to its dot's scores and to the weights that meet its values, so only
the e4m3 conversion touches every value; at ``NUM_STAGES`` 1 the tile is decoded in registers (V3.2: scaled, exact for
power-of-two scales), the raw bytes of the next tile loaded into registers while a tile is computed and the rows of
the tile after it prefetched into L2 (:func:`l2_ahead_tiles`).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from wavemla import config
from wavemla.device import E4M3_CVT_MIN_ARCH, device_arch, fp8_decode_path, triton_interpreting
from wavemla.kernels import launch
from wavemla.kernels.fp8 import e4m3_f16, e4m3_times_256_inv_f16

LOG2E = 1.4426950408889634
D_V = 512  # value width (the latent part of a key row)
D_PE = 64  # rope width of a 576-wide row
_D_V = tl.constexpr(D_V)  # the same, as kernel constants
_D_PE = tl.constexpr(D_PE)
FP8_ROW_BYTES = 656
_FP8_ROW_BYTES = tl.constexpr(FP8_ROW_BYTES)
SCHED_FIELDS = 4  # (first request, first tile, end request, end tile) per part
REQ_FIELDS = 4  # (first part, last part, weight prefix, units) per request
_MAX_BLOCK_B = 1024
# Tiles whose block ids are loaded at once (a pipeline fill and drain per chunk: 1/32 of a tile loop)
CHUNK_TILES = 32


def keys_major(is_fp8: bool, block_h: int) -> bool:
    """Whether the split kernel runs transposed (keys as the MMA's M): bf16/fp16 rows with 64-row blocks. Row-major,
    64 rows are one wgmma M per warpgroup, and Triton gives chained dots (QKᵀ -> PV -> the SPLIT_P PV) every warp
    along M: each of the 2 warpgroups then holds the whole [64, 512] fp32 accumulator (256 registers; 13-17 KB of
    spills per thread on sm_90). Transposed, PV's M is the 512 value columns, split between the warpgroups."""
    return not is_fp8 and block_h == 64


def l2_ahead_tiles(is_fp8: bool) -> int:
    """How many tiles ahead the split kernel prefetches rows into L2 by default: FP8 rows 2 (the next tile's raw
    bytes are already in flight in registers; 2 and 3 measured 0.6-5.6% faster than none on the H200, bits
    unchanged), row caches 0 (their next tile is staged by cp.async; a prefetch 1 or 2 tiles ahead measured 6-20%
    slower, its address arithmetic and spills added to an issue-bound loop)."""
    return 2 if is_fp8 else 0


def split_p(is_fp8: bool, dtype: torch.dtype) -> bool:
    """Whether P meets V as ``bf16(P)`` plus ``bf16(P - bf16(P))`` (two dots): bf16 row caches with
    ``WAVEMLA_DENSE_P=split`` (the default, ``single``, rounds P to bf16 once, as FlashMLA does). fp16 keeps 11 bits
    of P in one dot; FP8 rows compute in fp16."""
    return not is_fp8 and dtype == torch.bfloat16 and config.get("WAVEMLA_DENSE_P") == "split"


def fp8_rows64(is_fp8: bool, block_h: int) -> bool:
    """FP8 rows in 64-row tiles: row-major, P to the PV dot through scratch rows on sm_90 (:func:`p_scratch`)."""
    return is_fp8 and block_h == 64


def scratch_tile(is_fp8: bool, block_h: int, dtype: torch.dtype) -> bool:
    """Whether the split kernel's tile has a path that passes P (or Pᵀ) to the PV dot through scratch rows:
    keys-major tiles with one dot of P, and FP8 rows in 64-row tiles."""
    return (keys_major(is_fp8, block_h) and not split_p(is_fp8, dtype)) or fp8_rows64(is_fp8, block_h)


def p_scratch(is_fp8: bool, block_h: int, dtype: torch.dtype, arch: int) -> bool:
    """Whether the split kernel built for sm_``arch`` passes P to the PV dot through scratch rows: the tiles of
    :func:`scratch_tile`, where Triton lowers ``tl.dot`` to Hopper's warpgroup MMA (sm_90). Triton gives a dot whose
    result feeds another dot every warp along M, so each warpgroup computed all of QKᵀ (and, row-major, held all
    of the [64, 512] accumulator); with the scratch rows both are split over the two. sm_100 (tcgen05) and the
    mma.sync paths were not measured with it."""
    return scratch_tile(is_fp8, block_h, dtype) and arch == 90


def p_scratch_elems(is_fp8: bool, block_h: int, block_n: int, dtype: torch.dtype, programs: int, device: Any) -> int:
    """Elements (of the compute dtype) of the split kernel's scratch rows for Pᵀ (``p_ws``), 0 where it keeps P in
    registers: :func:`p_scratch` for the architecture kernels on ``device`` are built for, and under Triton's
    interpreter the same tiles, so that the CPU tests run the path. ``programs``: the grid (parts times row blocks)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        use = triton_interpreting() and p_scratch(is_fp8, block_h, dtype, 90)
    else:
        use = p_scratch(is_fp8, block_h, dtype, device_arch(dev))
    return programs * (block_n * block_h + 2 * block_h) if use else 0


@triton.jit
def finalize_rows(b_o, b_lse2):
    """Normalized output ``[BLOCK_H, 512]`` and base-2 lse -> (output, natural-log lse); a row that saw no key
    (lse2 = -inf) gets output 0 and lse +inf; a NaN lse2 (a NaN score) stays NaN in both, as in the reference."""
    m_rows = b_lse2 != float("-inf")
    b_o = tl.where(m_rows[:, None], b_o, 0.0)
    b_lse = tl.where(m_rows, b_lse2 * 0.6931471805599453, float("inf"))
    return b_o, b_lse


@triton.jit
def _request_units(p_seqlens, o_b, m_b, max_len, BLOCK_N: tl.constexpr):
    """Units of requests ``o_b``: KV tiles of their clamped lengths, at least one."""
    b_len = tl.load(p_seqlens + o_b, mask=m_b, other=0)
    b_len = tl.minimum(tl.maximum(b_len, 0), max_len)
    return tl.maximum(tl.cdiv(b_len, BLOCK_N), 1)


@triton.jit
def _dense_mla_schedule_kernel(
    p_seqlens,
    p_sched,
    p_req,
    B,
    max_len,
    P,
    OVH,
    CUT,
    BLOCK_N: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    # Pass 1: total weight W and the heaviest request's weight.
    b_total = tl.zeros([BLOCK_B], dtype=tl.int32)
    b_wmax = tl.zeros([BLOCK_B], dtype=tl.int32)
    for i_b0 in range(0, B, BLOCK_B):
        o_b = i_b0 + tl.arange(0, BLOCK_B)
        m_b = o_b < B
        b_n = _request_units(p_seqlens, o_b, m_b, max_len, BLOCK_N)
        b_total += tl.where(m_b, b_n + OVH, 0)
        b_wmax = tl.maximum(b_wmax, tl.where(m_b, b_n + OVH, 0))
    w_total = tl.sum(b_total, 0).to(tl.int64)
    # Aligned (plan.dense_schedule_aligned): a part per request, none cut, where the heaviest request costs no more
    # than a balanced part plus what cutting costs (CUT units; -1: never).
    aligned = (CUT >= 0) & (B <= P) & (tl.max(b_wmax, 0).to(tl.int64) <= (w_total + P - 1) // P + OVH + CUT)

    # Pass 2: weight prefix per request, the parts that touch it, and a histogram of the first part boundary inside
    # each request (ceil(C_r·P / W) <= P; padding goes to the last bin, which no part < P reads).
    b_hist = tl.zeros([BLOCK_P], dtype=tl.int32)
    carry = tl.sum(tl.zeros([BLOCK_B], dtype=tl.int32), 0)
    for i_b0 in range(0, B, BLOCK_B):
        o_b = i_b0 + tl.arange(0, BLOCK_B)
        m_b = o_b < B
        b_n = _request_units(p_seqlens, o_b, m_b, max_len, BLOCK_N)
        b_w = tl.where(m_b, b_n + OVH, 0)
        b_c = tl.cumsum(b_w, 0) - b_w + carry
        b_c64 = b_c.to(tl.int64)
        b_first = tl.where(aligned, o_b, tl.minimum(((b_c64 + OVH + 1) * P - 1) // w_total, P - 1))
        b_last = tl.where(aligned, o_b, tl.minimum(((b_c64 + b_w) * P - 1) // w_total, P - 1))
        p_r = p_req + o_b * 4
        tl.store(p_r + 0, b_first.to(tl.int32), mask=m_b)
        tl.store(p_r + 1, b_last.to(tl.int32), mask=m_b)
        tl.store(p_r + 2, b_c, mask=m_b)
        tl.store(p_r + 3, b_n, mask=m_b)
        b_lo = (b_c64 * P + w_total - 1) // w_total
        b_hist += tl.histogram(tl.where(m_b, b_lo.to(tl.int32), BLOCK_P - 1), BLOCK_P)
        carry += tl.sum(b_w, 0)
    tl.debug_barrier()  # the per-request rows above are read back (gathered) below

    # Part p begins in request r_p = #{r : ceil(C_r·P / W) <= p} - 1, at weight x_p = floor(p·W / P).
    o_p = tl.arange(0, BLOCK_P)
    m_p = o_p < P
    b_r = tl.maximum(tl.cumsum(b_hist, 0) - 1, 0)
    b_r = tl.where(m_p, b_r, 0)
    b_c = tl.load(p_req + b_r * 4 + 2, mask=m_p, other=0).to(tl.int64)
    b_n = tl.load(p_req + b_r * 4 + 3, mask=m_p, other=1).to(tl.int64)
    b_x = (o_p.to(tl.int64) * w_total) // P
    b_t = tl.minimum(tl.maximum(b_x - b_c - OVH, 0), b_n - 1)
    b_r = tl.where(aligned, tl.minimum(o_p, B), b_r)
    b_t = tl.where(aligned, 0, b_t)
    tl.store(p_sched + o_p * 4 + 0, b_r, mask=m_p)
    tl.store(p_sched + o_p * 4 + 1, b_t.to(tl.int32), mask=m_p)
    tl.debug_barrier()
    # A part ends where the next begins; the last one at (B, 0).
    m_next = m_p & (o_p + 1 < P)
    b_r_end = tl.load(p_sched + (o_p + 1) * 4 + 0, mask=m_next, other=B)
    b_t_end = tl.load(p_sched + (o_p + 1) * 4 + 1, mask=m_next, other=0)
    tl.store(p_sched + o_p * 4 + 2, b_r_end, mask=m_p)
    tl.store(p_sched + o_p * 4 + 3, b_t_end, mask=m_p)


@triton.jit
def _tile_rows(p_kv, p_bt_row, i_tile, n_keys, num_blocks, stride_blk, stride_tok, PAGE: tl.constexpr,
               BLOCK_N: tl.constexpr):  # fmt: skip
    """Keys of tile ``i_tile`` of one request -> (row pointers ``[BLOCK_N]``, validity, key positions). Keys past the
    length and keys of pages that are not blocks are invalid (their rows are never read)."""
    o_n = i_tile * BLOCK_N + tl.arange(0, BLOCK_N)
    m_n = o_n < n_keys
    # PAGE is a compile-time constant: key -> (page, row) is a multiply-shift, not a division.
    b_blk = tl.load(p_bt_row + o_n // PAGE, mask=m_n, other=-1)
    m_n = m_n & (b_blk >= 0) & (b_blk < num_blocks)
    p_row = p_kv + tl.where(m_n, b_blk, 0).to(tl.int64) * stride_blk + (o_n % PAGE) * stride_tok
    return p_row, m_n, o_n


@triton.jit
def _chunk_blocks(p_bt_row, i_c0, t_stop, n_keys, TILE_IN_PAGE: tl.constexpr, PAGE: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    """Block ids of tiles ``[i_c0, i_c0 + BLOCK_C)`` (those at or past ``t_stop`` get -1): ``[BLOCK_C]`` (one page
    holds each tile) or ``[BLOCK_C, BLOCK_N]`` (one id per key; keys at or past ``n_keys`` get -1, so that no entry
    past the request's pages, nor past its block-table row, is read)."""
    o_c = tl.arange(0, BLOCK_C)
    m_c = i_c0 + o_c < t_stop
    if TILE_IN_PAGE:
        b_ids = tl.load(p_bt_row + (i_c0 + o_c) // (PAGE // BLOCK_N), mask=m_c, other=-1)
    else:
        o_n = (i_c0 + o_c)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        b_ids = tl.load(p_bt_row + o_n // PAGE, mask=m_c[:, None] & (o_n < n_keys), other=-1)
    return b_ids


@triton.jit
def _chunk_tile_rows(p_kv, b_ids, i_c, i_tile, n_keys, num_blocks, stride_blk, stride_tok, TILE_IN_PAGE: tl.constexpr,
                     PAGE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    """:func:`_tile_rows` for tile ``i_tile``, entry ``i_c`` of a chunk's block ids (:func:`_chunk_blocks`): the ids
    are selected in registers, so no load in the tile loop feeds the tile's addresses and Triton's pipeliner can
    issue the tile ``num_stages - 1`` iterations ahead (a block-table load in the loop takes one of those stages)."""
    o_r = tl.arange(0, BLOCK_N)
    o_n = i_tile * BLOCK_N + o_r
    m_sel = tl.arange(0, BLOCK_C) == i_c
    if TILE_IN_PAGE:
        # one page holds the tile: its rows are contiguous, one base address plus loop-invariant offsets
        blk = tl.sum(tl.where(m_sel, b_ids, 0), 0)
        ok = (blk >= 0) & (blk < num_blocks)
        p_tile = p_kv + tl.where(ok, blk, 0).to(tl.int64) * stride_blk + ((i_tile * BLOCK_N) % PAGE) * stride_tok
        p_row = p_tile + o_r * stride_tok
        m_n = (o_n < n_keys) & (tl.zeros([BLOCK_N], dtype=tl.int1) | ok)
    else:
        b_blk = tl.sum(tl.where(m_sel[:, None], b_ids, 0), 0)
        m_n = (o_n < n_keys) & (b_blk >= 0) & (b_blk < num_blocks)
        p_row = p_kv + tl.where(m_n, b_blk, 0).to(tl.int64) * stride_blk + (o_n % PAGE) * stride_tok
    return p_row, m_n, o_n


@triton.jit
def _load_latent_codes(p_row, m_n):
    """The 512 latent e4m3 codes of each row of an FP8 tile (both layouts start with them): ``[BLOCK_N, 4, 128]``
    uint8."""
    o_t = tl.arange(0, 4)
    o_c = tl.arange(0, 128)
    return tl.load(p_row[:, None, None] + (o_t[None, :, None] * 128 + o_c[None, None, :]), mask=m_n[:, None, None],
                   other=0)  # fmt: skip


@triton.jit
def _load_fp8_raw(p_row, m_n):
    """Issue the loads of one V3.2 tile: codes ``[BLOCK_N, 4, 128]`` uint8, scales ``[BLOCK_N, 4]`` fp32, rope
    ``[BLOCK_N, 64]`` bf16 (token layout: 512 e4m3 | 4 fp32 scales | 64 bf16 rope)."""
    o_t = tl.arange(0, 4)
    o_e = tl.arange(0, _D_PE)
    b_x = _load_latent_codes(p_row, m_n)
    b_s = tl.load((p_row + 512).to(tl.pointer_type(tl.float32))[:, None] + o_t[None, :], mask=m_n[:, None], other=0.0)
    b_r = tl.load((p_row + 528).to(tl.pointer_type(tl.bfloat16))[:, None] + o_e[None, :], mask=m_n[:, None],
                  other=0.0)  # fmt: skip
    return b_x, b_s, b_r


@triton.jit
def _load_fp8t_raw(p_row, m_n):
    """Issue the loads of one per-tensor FP8 tile: codes ``[BLOCK_N, 4, 128]`` and rope codes ``[BLOCK_N, 64]``,
    uint8 (token layout: 576 e4m3, the 512 latent values then the 64 rope values; one scale for the whole cache)."""
    o_e = tl.arange(0, _D_PE)
    b_r = tl.load(p_row[:, None] + _D_V + o_e[None, :], mask=m_n[:, None], other=0)
    return _load_latent_codes(p_row, m_n), b_r


@triton.jit
def _load_fp8_codes(p_row, m_n, J: tl.constexpr):
    """Block ``J`` (of 4) of an FP8 tile's latent: its e4m3 codes ``[BLOCK_N, 128]`` uint8."""
    o_c = tl.arange(0, 128)
    return tl.load(p_row[:, None] + (J * 128 + o_c[None, :]), mask=m_n[:, None], other=0)


@triton.jit
def _load_fp8_block(p_row, m_n, J: tl.constexpr):
    """Block ``J`` (of 4) of a V3.2 tile: its e4m3 codes ``[BLOCK_N, 128]`` uint8 and its fp32 scale per row."""
    b_x = _load_fp8_codes(p_row, m_n, J)
    b_s = tl.load((p_row + 512).to(tl.pointer_type(tl.float32)) + J, mask=m_n, other=0.0)
    return b_x, b_s


@triton.jit
def _join_cols4(b_a0, b_a1, b_a2, b_a3):
    """Four ``[R, C]`` column blocks -> ``[R, 4·C]`` (block j at columns ``[j·C, (j+1)·C)``)."""
    b_z = tl.join(tl.join(b_a0, b_a1), tl.join(b_a2, b_a3))  # [R, C, k, m] = block 2m + k
    b_z = tl.permute(b_z, (0, 3, 2, 1))
    return tl.reshape(b_z, (b_z.shape[0], 4 * b_z.shape[3]))


@triton.jit
def _prefetch_rows_l2(p_row, m_n, ROW_BYTES: tl.constexpr):
    """Bring the ``ROW_BYTES`` bytes at each row address of ``p_row`` (masked by ``m_n``) into L2: one
    ``prefetch.global.L2`` per 128-byte line a row touches (the last byte's line covers a row that is not
    line-aligned). Nothing waits for it; it returns nothing."""
    NL: tl.constexpr = ROW_BYTES // 128 + 2
    o_l = tl.arange(0, triton.next_power_of_2(NL))
    o_b = tl.minimum(o_l * 128, ROW_BYTES - 1)
    p_line = p_row.to(tl.pointer_type(tl.int8))[:, None] + o_b[None, :]
    m_line = (m_n[:, None] & (o_l < NL)[None, :]).to(tl.int32)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; }\n\tmov.u32 $0, 0;",
        "=r,l,r",
        [p_line, m_line],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _decode_fp8(b_x, b_s, b_r, BLOCK_N: tl.constexpr):
    """Raw V3.2 tile -> (latent ``[BLOCK_N, 512]``, rope ``[BLOCK_N, 64]``) fp16. e4m3 bits placed in an fp16 word
    are the value x 2^-8 (exact); each 128-wide tile meets its scale x 2^8, rounded once to fp16, by broadcast.
    (The hardware conversion instead measured 10-11% slower in these register-prefetched tiles on the H200.) The NaN
    codes read as ±480 here: NaN-exact decoding measured 2-3% slower on an H100
    (benchmarks/results/2026-12-07-h100-dense-fp8-nan-{exact,before}-c8f30b6.json)."""
    b_kv3 = e4m3_times_256_inv_f16(b_x, False) * (b_s * 256.0).to(tl.float16)[:, :, None]
    return tl.reshape(b_kv3, (BLOCK_N, _D_V)), b_r.to(tl.float16)


@triton.jit
def _decode_fp8t(b_x, b_r, BLOCK_N: tl.constexpr):
    """Raw per-tensor FP8 tile -> (latent ``[BLOCK_N, 512]``, rope ``[BLOCK_N, 64]``) fp16, each value its e4m3
    code x 2^-8 (exact; the NaN codes read as ±480, as in :func:`_decode_fp8`); the cache's scale x 2^8 is applied
    to the scores and the output instead."""
    return tl.reshape(e4m3_times_256_inv_f16(b_x, False), (BLOCK_N, _D_V)), e4m3_times_256_inv_f16(b_r, False)


@triton.jit
def _softmax_weights(b_mx, b_l, b_s, m_s, qk_scale):
    """One tile of scores ``[BLOCK_H, BLOCK_N]`` (masked by ``m_s``) into the running max and sum; returns the new
    (max, sum), the tile's weights P (base 2) and the accumulator's rescale factors."""
    b_s = tl.where(m_s, b_s * qk_scale, float("-inf"))
    b_mx_new = tl.maximum(b_mx, tl.max(b_s, 1))
    # A row that has seen no valid score keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN.
    b_mx_safe = tl.where(b_mx_new == float("-inf"), 0.0, b_mx_new)
    b_p = tl.exp2(b_s - b_mx_safe[:, None])
    b_alpha = tl.exp2(b_mx - b_mx_safe)
    b_l = b_l * b_alpha + tl.sum(b_p, 1)
    return b_mx_new, b_l, b_p, b_alpha


@triton.jit
def _online_softmax(b_acc, b_mx, b_l, b_s, m_s, qk_scale):
    """:func:`_softmax_weights`; returns the rescaled accumulator, the new (max, sum) and the tile's weights P."""
    b_mx, b_l, b_p, b_alpha = _softmax_weights(b_mx, b_l, b_s, m_s, qk_scale)
    return b_acc * b_alpha[:, None], b_mx, b_l, b_p


@triton.jit
def _softmax_t_weights(b_mx, b_l, b_st, m_st, qk_scale):
    """One transposed tile of scores ``[BLOCK_N, BLOCK_H]`` (masked by ``m_st``) into the running max and sum;
    returns the new (max, sum), the tile's weights Pᵀ (base 2) and the accumulator's rescale factors."""
    b_st = tl.where(m_st, b_st * qk_scale, float("-inf"))
    b_mx_new = tl.maximum(b_mx, tl.max(b_st, 0))
    b_mx_safe = tl.where(b_mx_new == float("-inf"), 0.0, b_mx_new)
    b_pt = tl.exp2(b_st - b_mx_safe[None, :])
    b_alpha = tl.exp2(b_mx - b_mx_safe)
    b_l = b_l * b_alpha + tl.sum(b_pt, 0)
    return b_mx_new, b_l, b_pt, b_alpha


@triton.jit
def _online_softmax_t(b_acc_t, b_mx, b_l, b_st, m_st, qk_scale):
    """:func:`_online_softmax` on transposed tiles: scores ``[BLOCK_N, BLOCK_H]``, accumulator ``[512, BLOCK_H]``."""
    b_mx, b_l, b_pt, b_alpha = _softmax_t_weights(b_mx, b_l, b_st, m_st, qk_scale)
    return b_acc_t * b_alpha[None, :], b_mx, b_l, b_pt


@triton.jit
def _bar_sync(x):
    """``bar.sync 0`` (every thread of the program) as an opaque instruction: Triton's pipeliner keeps pipelining a
    loop that holds it, where ``tl.debug_barrier`` stops it. ``x``: any scalar (the instruction's operand)."""
    return tl.inline_asm_elementwise(
        "bar.sync 0;\n\tmov.u32 $0, 0;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _st_b16(p, v):
    """Store the 16-bit ``v`` at ``p`` with an opaque instruction (kept in order with :func:`_bar_sync`)."""
    return tl.inline_asm_elementwise(
        "st.global.b16 [$1], $2;\n\tmov.u32 $0, 0;",
        "=r,l,h",
        [p.to(tl.int64), v.to(tl.int16, bitcast=True)],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _ld_b16(p, DTYPE: tl.constexpr):
    """Load a 16-bit ``DTYPE`` value at ``p`` with an opaque instruction: not turned into a cp.async issued ahead of
    its store."""
    b = tl.inline_asm_elementwise("ld.global.b16 $0, [$1];", "=h,l", [p], dtype=tl.int16, is_pure=False, pack=1)
    return b.to(DTYPE, bitcast=True)


@triton.jit
def _st_f32(p, v):
    """Store fp32 ``v`` at ``p`` with an opaque instruction."""
    return tl.inline_asm_elementwise(
        "st.global.f32 [$1], $2;\n\tmov.u32 $0, 0;",
        "=r,l,f",
        [p.to(tl.int64), v],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _ld_f32(p):
    """Load fp32 at ``p`` with an opaque instruction."""
    return tl.inline_asm_elementwise("ld.global.f32 $0, [$1];", "=f,l", [p], dtype=tl.float32, is_pure=False, pack=1)


@triton.jit
def _exchange_via_ws(p_p, b_p, p_a, b_alpha, i_tile, DTYPE: tl.constexpr, SCRATCH_ASM: tl.constexpr):
    """Weights ``b_p`` (as ``DTYPE``, at ``p_p``) and rescale factors ``b_alpha`` (fp32, at ``p_a``) through this
    program's scratch rows and back, in whatever layout the reading dot needs; returns (weights, factors).

    With no value path from the QKᵀ dot to the PV dot, Triton splits QKᵀ over the warpgroups instead of computing
    all of it in each. The barriers and the scratch accesses are opaque instructions, which Triton's pipeliner
    leaves in place and in order as long as none of their results is used (a ``tl.debug_barrier`` stops it from
    pipelining the row loads; plain loads of the scratch become cp.async issued ahead of their stores); under the
    interpreter, plain ones.
    """
    if SCRATCH_ASM:
        _bar_sync(i_tile)  # the previous tile's reads of the scratch rows are done
        _st_b16(p_p, b_p.to(DTYPE))
        _st_f32(p_a, b_alpha)
        _bar_sync(i_tile)  # every thread's values are stored before any thread reads them
        b_p_ws = _ld_b16(p_p, DTYPE)
        b_alpha_ws = _ld_f32(p_a)
    else:
        tl.debug_barrier()
        tl.store(p_p, b_p.to(DTYPE))
        tl.store(p_a, b_alpha)
        tl.debug_barrier()
        b_p_ws = tl.load(p_p)
        b_alpha_ws = tl.load(p_a)
    return b_p_ws, b_alpha_ws


@triton.jit
def _softmax_via_ws(
    b_acc, b_mx, b_l, b_s, m_s, qk_scale, p_pws, p_aws, i_tile, DTYPE: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr, SCRATCH_ASM: tl.constexpr,
):  # fmt: skip
    """:func:`_online_softmax` on row-major tiles whose weights P and rescale factors come back through this
    program's scratch rows (:func:`_exchange_via_ws`); returns (rescaled accumulator, max, sum, P). Row-major, the
    scratch rows also keep Triton from giving each warpgroup all of the [64, 512] accumulator."""
    b_mx, b_l, b_p, b_alpha = _softmax_weights(b_mx, b_l, b_s, m_s, qk_scale)
    o_ph = tl.arange(0, BLOCK_H)
    o_pn = tl.arange(0, BLOCK_N)
    p_p = p_pws + o_ph[:, None] * BLOCK_N + o_pn[None, :]
    b_p_ws, b_alpha_ws = _exchange_via_ws(p_p, b_p, p_aws + o_ph, b_alpha, i_tile, DTYPE, SCRATCH_ASM)
    return b_acc * b_alpha_ws[:, None], b_mx, b_l, b_p_ws


@triton.jit
def _softmax_t_via_ws(
    b_mx, b_l, b_st, m_st, qk_scale, p_pws, p_aws, i_tile, DTYPE: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_H: tl.constexpr, SCRATCH_ASM: tl.constexpr,
):  # fmt: skip
    """:func:`_online_softmax_t` whose weights Pᵀ and rescale factors come back through this program's scratch rows
    (:func:`_exchange_via_ws`); returns (max, sum, Pᵀ, alpha)."""
    b_mx, b_l, b_pt, b_alpha = _softmax_t_weights(b_mx, b_l, b_st, m_st, qk_scale)
    o_pn = tl.arange(0, BLOCK_N)
    o_ph = tl.arange(0, BLOCK_H)
    p_pt = p_pws + o_pn[:, None] * BLOCK_H + o_ph[None, :]
    b_pt_ws, b_alpha_ws = _exchange_via_ws(p_pt, b_pt, p_aws + o_ph, b_alpha, i_tile, DTYPE, SCRATCH_ASM)
    return b_mx, b_l, b_pt_ws, b_alpha_ws


@triton.jit
def _dense_mla_decode_kernel(
    p_q,
    p_out,
    p_lse,
    p_o_ws,
    p_lse_ws,
    p_kv,
    p_bt,
    p_seqlens,
    p_sched,
    p_p_ws,
    p_kscale,
    p_qscale,
    num_blocks,
    max_len,
    stride_kv_blk,
    stride_kv_tok,
    stride_bt,
    S_Q,
    H,
    M,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_ob,
    stride_os,
    stride_oh,
    qk_scale,
    IS_FP8: tl.constexpr,
    KV_TENSOR: tl.constexpr,
    Q_SCALE: tl.constexpr,
    HAS_PE: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAGE: tl.constexpr,
    DTYPE: tl.constexpr,
    SPLIT_P: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_RB: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    KEYS_MAJOR: tl.constexpr,
    TILE_IN_PAGE: tl.constexpr,
    BLOCK_C: tl.constexpr,
    P_VIA_WS: tl.constexpr,
    SCRATCH_ASM: tl.constexpr,
    L2_AHEAD: tl.constexpr,
    E4M3_CVT: tl.constexpr,
):
    i_pid = tl.program_id(0)
    i_rb = i_pid % NUM_RB
    i_part = i_pid // NUM_RB
    o_m = i_rb * BLOCK_H + tl.arange(0, BLOCK_H)  # query row m = s·H + h
    m_m = o_m < M
    o_s = o_m // H
    o_h = o_m - o_s * H
    o_d = tl.arange(0, _D_V)
    o_e = tl.arange(0, _D_PE)
    o_c = tl.arange(0, 128)
    # this program's scratch rows for Pᵀ (P_VIA_WS): BLOCK_N x BLOCK_H values of DTYPE, then BLOCK_H fp32 factors
    p_pws = p_p_ws + tl.cast(i_pid, tl.int64) * (BLOCK_N * BLOCK_H + 2 * BLOCK_H)
    p_aws = (p_pws + BLOCK_N * BLOCK_H).to(tl.pointer_type(tl.float32))
    ROW_BYTES: tl.constexpr = _D_V + _D_PE if KV_TENSOR else _FP8_ROW_BYTES
    if KV_TENSOR:
        # Per-tensor FP8 rows: the tile holds the codes (staged: as decoded; in registers: x 2^-8), so the cache's
        # scale (read on the device: graph-safe) multiplies the scores here and the output at the end.
        k_sc = tl.load(p_kscale)
        o_scale = k_sc if NUM_STAGES > 1 else k_sc * 256.0
        qk_scale = qk_scale * o_scale
    if Q_SCALE:
        qk_scale = qk_scale * tl.load(p_qscale)  # q's scale (an FP8 q: its codes, converted exactly, are q)

    p_sched_part = p_sched + i_part * 4
    r_begin = tl.load(p_sched_part + 0)
    t_begin = tl.load(p_sched_part + 1)
    r_end = tl.load(p_sched_part + 2)
    t_end = tl.load(p_sched_part + 3)
    r_last = tl.where(t_end > 0, r_end, r_end - 1)
    for i_b in range(r_begin, r_last + 1):
        n_keys = tl.minimum(tl.maximum(tl.load(p_seqlens + i_b), 0), max_len)
        n_kv = tl.cdiv(n_keys, BLOCK_N)
        n_units = tl.maximum(n_kv, 1)
        t_lo = tl.where(i_b == r_begin, t_begin, 0)
        t_hi = tl.where(i_b == r_end, t_end, n_units)
        t_stop = tl.minimum(t_hi, n_kv)

        p_q_rows = p_q + tl.cast(i_b, tl.int64) * stride_qb + o_s * stride_qs + o_h * stride_qh
        b_q = tl.load(p_q_rows[:, None] + o_d[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
        if HAS_PE:
            b_qpe = tl.load(p_q_rows[:, None] + _D_V + o_e[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
        # Last key each row may see: causal query token s sees keys [0, L - S + s].
        b_lim = tl.zeros([BLOCK_H], dtype=tl.int32) + n_keys
        if CAUSAL:
            b_lim = b_lim - (S_Q - 1 - o_s)
        b_acc = tl.zeros([BLOCK_H, _D_V], dtype=tl.float32)
        b_mx = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        b_l = tl.zeros([BLOCK_H], dtype=tl.float32)
        p_bt_row = p_bt + tl.cast(i_b, tl.int64) * stride_bt
        if IS_FP8 and NUM_STAGES > 1:
            # Staged: the raw bytes of tile i + NUM_STAGES - 1 go through cp.async (Triton's pipeliner) while tile i
            # is computed, with the four 128-wide blocks of a row apart: each block's fp32 scale multiplies its
            # dot's scores (QKᵀ) or the weights that meet its values (PV), so the decode is the e4m3 conversion
            # alone (as inline assembly: a cast that Triton moves into the two dots' operand layouts keeps the raw
            # load out of cp.async), and QKᵀ is five independent dots instead of one chain over 576.
            F_INV: tl.constexpr = 1.0 if E4M3_CVT else 256.0  # decoded value = e4m3 / F_INV
            b_q0 = tl.load(p_q_rows[:, None] + 0 * 128 + o_c[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
            b_q1 = tl.load(p_q_rows[:, None] + 1 * 128 + o_c[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
            b_q2 = tl.load(p_q_rows[:, None] + 2 * 128 + o_c[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
            b_q3 = tl.load(p_q_rows[:, None] + 3 * 128 + o_c[None, :], mask=m_m[:, None], other=0.0).to(DTYPE)
            b_a0 = tl.zeros([BLOCK_H, 128], dtype=tl.float32)
            b_a1 = tl.zeros([BLOCK_H, 128], dtype=tl.float32)
            b_a2 = tl.zeros([BLOCK_H, 128], dtype=tl.float32)
            b_a3 = tl.zeros([BLOCK_H, 128], dtype=tl.float32)
            for i_c0 in range(t_lo, t_stop, BLOCK_C):
                b_ids = _chunk_blocks(p_bt_row, i_c0, t_stop, n_keys, TILE_IN_PAGE, PAGE, BLOCK_N, BLOCK_C)
                for i_tile in tl.range(i_c0, tl.minimum(i_c0 + BLOCK_C, t_stop), num_stages=NUM_STAGES):
                    p_row, m_n, o_n = _chunk_tile_rows(p_kv, b_ids, i_tile - i_c0, i_tile, n_keys, num_blocks,
                                                       stride_kv_blk, stride_kv_tok, TILE_IN_PAGE, PAGE, BLOCK_N,
                                                       BLOCK_C)  # fmt: skip
                    k_f = qk_scale * F_INV
                    if KV_TENSOR:
                        # one scale for every block (folded into qk_scale and the output): no scale loads
                        b_x0 = _load_fp8_codes(p_row, m_n, 0)
                        b_x1 = _load_fp8_codes(p_row, m_n, 1)
                        b_x2 = _load_fp8_codes(p_row, m_n, 2)
                        b_x3 = _load_fp8_codes(p_row, m_n, 3)
                        b_c0 = tl.full([BLOCK_N], 1.0, dtype=tl.float32)
                        b_c1 = b_c0
                        b_c2 = b_c0
                        b_c3 = b_c0
                        b_xpe = tl.load(p_row[:, None] + _D_V + o_e[None, :], mask=m_n[:, None], other=0)
                        b_pe = e4m3_f16(b_xpe, E4M3_CVT, SCRATCH_ASM)
                        pe_f = k_f
                    else:
                        b_x0, b_c0 = _load_fp8_block(p_row, m_n, 0)
                        b_x1, b_c1 = _load_fp8_block(p_row, m_n, 1)
                        b_x2, b_c2 = _load_fp8_block(p_row, m_n, 2)
                        b_x3, b_c3 = _load_fp8_block(p_row, m_n, 3)
                        b_pe = tl.load((p_row + 528).to(tl.pointer_type(tl.bfloat16))[:, None] + o_e[None, :],
                                       mask=m_n[:, None], other=0.0).to(tl.float16)  # fmt: skip
                        pe_f = qk_scale
                    b_e0 = e4m3_f16(b_x0, E4M3_CVT, SCRATCH_ASM)
                    b_e1 = e4m3_f16(b_x1, E4M3_CVT, SCRATCH_ASM)
                    b_e2 = e4m3_f16(b_x2, E4M3_CVT, SCRATCH_ASM)
                    b_e3 = e4m3_f16(b_x3, E4M3_CVT, SCRATCH_ASM)
                    b_s = (tl.dot(b_q0, tl.trans(b_e0)) * (b_c0 * k_f)[None, :]
                           + tl.dot(b_q1, tl.trans(b_e1)) * (b_c1 * k_f)[None, :]
                           + tl.dot(b_q2, tl.trans(b_e2)) * (b_c2 * k_f)[None, :]
                           + tl.dot(b_q3, tl.trans(b_e3)) * (b_c3 * k_f)[None, :]
                           + tl.dot(b_qpe, tl.trans(b_pe)) * pe_f)  # fmt: skip
                    m_s = m_n[None, :] & (o_n[None, :] < b_lim[:, None])
                    b_mx, b_l, b_p, b_alpha = _softmax_weights(b_mx, b_l, b_s, m_s, 1.0)
                    if P_VIA_WS:
                        o_ph = tl.arange(0, BLOCK_H)
                        p_p = p_pws + o_ph[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
                        b_p16, b_alpha = _exchange_via_ws(p_p, b_p, p_aws + o_ph, b_alpha, i_tile, DTYPE,
                                                          SCRATCH_ASM)  # fmt: skip
                        b_p = b_p16.to(tl.float32)
                    # weights times scale x 2^8 (within fp16's normal range); the accumulators hold 2^8 / F_INV x O
                    b_a0 = tl.dot((b_p * (b_c0 * 256.0)[None, :]).to(tl.float16), b_e0, b_a0 * b_alpha[:, None])
                    b_a1 = tl.dot((b_p * (b_c1 * 256.0)[None, :]).to(tl.float16), b_e1, b_a1 * b_alpha[:, None])
                    b_a2 = tl.dot((b_p * (b_c2 * 256.0)[None, :]).to(tl.float16), b_e2, b_a2 * b_alpha[:, None])
                    b_a3 = tl.dot((b_p * (b_c3 * 256.0)[None, :]).to(tl.float16), b_e3, b_a3 * b_alpha[:, None])
            b_acc = _join_cols4(b_a0, b_a1, b_a2, b_a3) * (F_INV / 256.0)
        elif IS_FP8:
            # Decoded in registers, so Triton cannot stage these loads through cp.async: prefetch by hand. The raw
            # bytes of tile i+1 are requested before tile i is decoded and multiplied (a load only waits at its
            # first use), so one tile is always in flight.
            # keys of tiles at or past this segment's end are masked: the prefetch past the last tile reads nothing
            n_seg = tl.minimum(n_keys, t_stop * BLOCK_N)
            p_row, m_n, o_n = _tile_rows(p_kv, p_bt_row, t_lo, n_seg, num_blocks, stride_kv_blk, stride_kv_tok,
                                         PAGE, BLOCK_N)  # fmt: skip
            if KV_TENSOR:
                b_x, b_r = _load_fp8t_raw(p_row, m_n)  # no per-row scales: one for the cache, folded above
            else:
                b_x, b_sc, b_r = _load_fp8_raw(p_row, m_n)
            for i_tile in range(t_lo, t_stop):
                if L2_AHEAD > 1:
                    # and the rows of tile i + L2_AHEAD into L2, so that the raw loads of the next tile hit there
                    p_frow, m_fn, _ = _tile_rows(p_kv, p_bt_row, i_tile + L2_AHEAD, n_seg, num_blocks,
                                                 stride_kv_blk, stride_kv_tok, PAGE, BLOCK_N)  # fmt: skip
                    _prefetch_rows_l2(p_frow, m_fn, ROW_BYTES)
                p_nrow, m_nn, o_nn = _tile_rows(p_kv, p_bt_row, i_tile + 1, n_seg, num_blocks, stride_kv_blk,
                                                stride_kv_tok, PAGE, BLOCK_N)  # fmt: skip
                if KV_TENSOR:
                    b_xn, b_rn = _load_fp8t_raw(p_nrow, m_nn)
                    b_kv, b_pe = _decode_fp8t(b_x, b_r, BLOCK_N)
                else:
                    b_xn, b_scn, b_rn = _load_fp8_raw(p_nrow, m_nn)
                    b_kv, b_pe = _decode_fp8(b_x, b_sc, b_r, BLOCK_N)
                m_s = m_n[None, :] & (o_n[None, :] < b_lim[:, None])
                if P_VIA_WS:
                    # the two dots apart, each scaled (see the keys-major tiles below), P through scratch rows
                    b_s = tl.dot(b_q, tl.trans(b_kv)) * qk_scale + tl.dot(b_qpe, tl.trans(b_pe)) * qk_scale
                    b_acc, b_mx, b_l, b_p_ws = _softmax_via_ws(
                        b_acc, b_mx, b_l, b_s, m_s, 1.0, p_pws, p_aws, i_tile, DTYPE, BLOCK_N, BLOCK_H, SCRATCH_ASM
                    )
                    b_acc = tl.dot(b_p_ws, b_kv, b_acc)
                else:
                    b_s = tl.dot(b_q, tl.trans(b_kv)) + tl.dot(b_qpe, tl.trans(b_pe))
                    b_acc, b_mx, b_l, b_p = _online_softmax(b_acc, b_mx, b_l, b_s, m_s, qk_scale)
                    b_acc = tl.dot(b_p.to(DTYPE), b_kv, b_acc)
                b_x, b_r, m_n, o_n = b_xn, b_rn, m_nn, o_nn
                if not KV_TENSOR:
                    b_sc = b_scn
        else:
            # Rows: one load of the tile's latent [BLOCK_N, 512] (and rope [BLOCK_N, 64]) feeds both dots. The
            # block ids come BLOCK_C tiles at a time, so no load in the tile loop feeds the tile addresses and
            # Triton's pipeliner stages the tile NUM_STAGES - 1 iterations ahead through cp.async. With mma.sync
            # (operands read into registers) 3 stages keep 2 buffers and tile i + 1 lands while tile i is computed;
            # wgmma reads its operands from shared memory until its wait, so at 2 stages (the 64-key keys-major
            # tiles: a third buffer does not fit) the next copy starts after the math.
            if KEYS_MAJOR:
                b_acc_t = tl.zeros([_D_V, BLOCK_H], dtype=tl.float32)
            for i_c0 in range(t_lo, t_stop, BLOCK_C):
                b_ids = _chunk_blocks(p_bt_row, i_c0, t_stop, n_keys, TILE_IN_PAGE, PAGE, BLOCK_N, BLOCK_C)
                for i_tile in tl.range(i_c0, tl.minimum(i_c0 + BLOCK_C, t_stop), num_stages=NUM_STAGES):
                    p_row, m_n, o_n = _chunk_tile_rows(p_kv, b_ids, i_tile - i_c0, i_tile, n_keys, num_blocks,
                                                       stride_kv_blk, stride_kv_tok, TILE_IN_PAGE, PAGE, BLOCK_N,
                                                       BLOCK_C)  # fmt: skip
                    b_kv = tl.load(p_row[:, None] + o_d[None, :], mask=m_n[:, None], other=0.0)
                    if HAS_PE:
                        b_pe = tl.load(p_row[:, None] + _D_V + o_e[None, :], mask=m_n[:, None], other=0.0)
                    if KEYS_MAJOR:
                        # Transposed: keys are the MMA's M (64 per warpgroup: wgmma on sm_90) and query rows its N,
                        # so 64 rows run as 2 warpgroups splitting the 512 value columns of Oᵀ = Vᵀ·Pᵀ with no
                        # replicated accumulator (row-major, the chained PV dots of SPLIT_P make Triton give each
                        # warpgroup all 64 rows of a [64, 512] fp32 accumulator: 256 registers, spilled).
                        s_scale = qk_scale
                        if P_VIA_WS and HAS_PE:
                            # The two dots apart, each scaled, then summed: accumulated one into the other, the
                            # first (whose result feeds a dot) is computed whole in each warpgroup and its result
                            # re-laid out through shared memory (8 barriers a tile); apart, both split their query
                            # rows over the warpgroups. The scaling keeps Triton from folding the sum back into
                            # the accumulator of the second dot.
                            b_st = tl.dot(b_kv, tl.trans(b_q)) * qk_scale + tl.dot(b_pe, tl.trans(b_qpe)) * qk_scale
                            s_scale = 1.0
                        else:
                            b_st = tl.dot(b_kv, tl.trans(b_q))
                            if HAS_PE:
                                b_st = tl.dot(b_pe, tl.trans(b_qpe), b_st)
                        m_st = m_n[:, None] & (o_n[:, None] < b_lim[None, :])
                        if P_VIA_WS:
                            b_mx, b_l, b_pt_ws, b_alpha_ws = _softmax_t_via_ws(
                                b_mx, b_l, b_st, m_st, s_scale, p_pws, p_aws, i_tile, DTYPE, BLOCK_N, BLOCK_H,
                                SCRATCH_ASM,
                            )  # fmt: skip
                            b_acc_t = tl.dot(tl.trans(b_kv), b_pt_ws, b_acc_t * b_alpha_ws[None, :])
                        else:
                            b_acc_t, b_mx, b_l, b_pt = _online_softmax_t(b_acc_t, b_mx, b_l, b_st, m_st, qk_scale)
                            b_pt_hi = b_pt.to(DTYPE)
                            b_acc_t = tl.dot(tl.trans(b_kv), b_pt_hi, b_acc_t)
                        if SPLIT_P:
                            b_acc_t = tl.dot(tl.trans(b_kv), (b_pt - b_pt_hi.to(tl.float32)).to(DTYPE), b_acc_t)
                    else:
                        b_s = tl.dot(b_q, tl.trans(b_kv))
                        if HAS_PE:
                            b_s = tl.dot(b_qpe, tl.trans(b_pe), b_s)
                        m_s = m_n[None, :] & (o_n[None, :] < b_lim[:, None])
                        b_acc, b_mx, b_l, b_p = _online_softmax(b_acc, b_mx, b_l, b_s, m_s, qk_scale)
                        b_p_hi = b_p.to(DTYPE)
                        b_acc = tl.dot(b_p_hi, b_kv, b_acc)
                        if SPLIT_P:
                            # bf16 keeps 8 bits of P: a row holding most of the weight would be off by up to 0.4%
                            # of |v|. The remainder P - bf16(P) through a second dot restores 16 bits.
                            b_acc = tl.dot((b_p - b_p_hi.to(tl.float32)).to(DTYPE), b_kv, b_acc)
            if KEYS_MAJOR:
                b_acc = tl.trans(b_acc_t)

        m_seen = b_l != 0.0  # a NaN score makes l NaN: it stays NaN, not "no key seen"
        b_o = b_acc / tl.where(m_seen, b_l, 1.0)[:, None]
        if KV_TENSOR:
            b_o = b_o * o_scale
        b_lse2 = tl.where(m_seen, b_mx + tl.log2(tl.where(m_seen, b_l, 1.0)), float("-inf"))
        if (t_lo == 0) & (t_hi == n_units):
            b_o, b_lse = finalize_rows(b_o, b_lse2)
            p_o = p_out + tl.cast(i_b, tl.int64) * stride_ob + o_s * stride_os + o_h * stride_oh
            tl.store(p_o[:, None] + o_d[None, :], b_o.to(p_out.dtype.element_ty), mask=m_m[:, None])
            tl.store(p_lse + tl.cast(i_b, tl.int64) * M + o_m, b_lse, mask=m_m)
        else:
            i_slot = tl.cast(i_b + i_part, tl.int64)
            p_w = p_o_ws + ((i_slot * M + o_m) * _D_V)[:, None] + o_d[None, :]
            tl.store(p_w, b_o.to(p_o_ws.dtype.element_ty), mask=m_m[:, None])
            tl.store(p_lse_ws + i_slot * M + o_m, b_lse2, mask=m_m)


def dense_decode_schedule(
    *,
    cache_seqlens: torch.Tensor,
    sched: torch.Tensor,
    req: torch.Tensor,
    max_seqlen: int,
    num_parts: int,
    segment_overhead: int,
    block_n: int,
    cut_units: int = -1,
) -> None:
    """Write the work ranges of ``num_parts`` parts into ``sched [num_parts, 4]`` int32 and the parts touching each
    request into ``req [b, 4]`` int32 (first part, last part, weight prefix, units), from ``cache_seqlens [b]``
    int32 on the device (see the module docstring; ``cut_units >= 0`` lets it give each request a part of its own,
    :func:`wavemla.plan.dense_schedule`). One program; no host sync."""
    if isinstance(cut_units, bool) or not isinstance(cut_units, int) or cut_units < -1:
        raise ValueError(f"cut_units: an int >= 0, or -1 for never aligned, got {cut_units!r}")
    b = cache_seqlens.shape[0]
    launch.run(
        _dense_mla_schedule_kernel,
        (1,),
        p_seqlens=cache_seqlens,
        p_sched=sched,
        p_req=req,
        B=b,
        max_len=max_seqlen,
        P=num_parts,
        OVH=segment_overhead,
        CUT=cut_units,
        BLOCK_N=block_n,
        BLOCK_B=min(triton.next_power_of_2(max(b, 16)), _MAX_BLOCK_B),
        BLOCK_P=triton.next_power_of_2(num_parts + 1),
        num_warps=4,
    )


_TL_DTYPE = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


def runs_ws(*, q: torch.Tensor, kv: torch.Tensor, is_fp8: bool, block_h: int, block_n: int) -> bool:
    """Whether :func:`dense_decode_split` runs the warp-specialized sm_90 kernel for these tensors and tile (compiled
    kernels only; :func:`wavemla.kernels.dense_decode_ws.supported`)."""
    if triton_interpreting() or q.device.type != "cuda":
        return False
    from wavemla.kernels import dense_decode_ws

    return dense_decode_ws.supported(is_fp8=is_fp8, block_h=block_h, block_n=block_n, arch=device_arch(q.device),
                                     q=q, kv=kv)  # fmt: skip


def partials_dtype(is_fp8: bool, dtype: torch.dtype) -> torch.dtype:
    """The dtype of the cut requests' partials :func:`dense_decode_split` writes (a piece's normalized output; its
    lse stays fp32): the 16-bit dtype the value rows are computed in, fp16 for FP8 rows (decoded to fp16) and q's
    ``dtype`` for bf16/fp16 rows. A partial is a weighted mean of those value rows, so it lies within their range,
    and its rounding adds at most one rounding of that dtype to an output element (2⁻⁹ of its size in bf16, 2⁻¹¹ in
    fp16). Under ``WAVEMLA_DENSE_P=split``, which keeps 16 bits of every bf16 weight for precision, bf16 rows keep
    fp32 partials."""
    if is_fp8:
        return torch.float16
    return torch.float32 if split_p(False, dtype) else dtype


def dense_decode_split(
    *,
    q: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    o_ws: torch.Tensor,
    lse_ws: torch.Tensor,
    kv: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    sched: torch.Tensor,
    is_fp8: bool,
    causal: bool,
    softmax_scale: float,
    block_h: int,
    block_n: int,
    num_warps: int,
    num_stages: int,
    num_parts: int,
    p_ws: torch.Tensor | None = None,
    l2_ahead: int | None = None,
    e4m3_cvt: bool | None = None,
    k_scale: torch.Tensor | None = None,
    q_scale: torch.Tensor | None = None,
) -> Any:
    """Launch the split kernel over ``num_parts`` parts; returns Triton's compiled-kernel handle.

    Inputs must already be validated (see :mod:`wavemla.api`). q ``[b, s_q, h, d_qk]``; out ``[b, s_q, h, 512]``
    q.dtype; lse ``[b, s_q, h]`` fp32; workspace ``o_ws [b + num_parts, s_q·h, 512]`` of :func:`partials_dtype` and
    ``lse_ws [b + num_parts, s_q·h]`` fp32; kv ``[blocks, page, 1, d_qk]`` rows or ``[blocks, page, 1, 656]`` uint8;
    block_table ``[b, max_blocks]`` int32; cache_seqlens ``[b]`` int32; sched ``[num_parts, 4]`` int32 from
    :func:`dense_decode_schedule`. ``p_ws``: scratch of the compute dtype (q's; fp16 for FP8 rows), at least
    :func:`p_scratch_elems` elements, through which P (Pᵀ) reaches the PV dot of the tiles of :func:`scratch_tile` (None
    keeps P in registers; the same arithmetic but for how the two dots of QKᵀ, rope and latent, are summed and scaled).
    ``l2_ahead``: prefetch the rows of the tile that many tiles ahead into L2 (FP8 rows; 0: none); None:
    :func:`l2_ahead_tiles`. Results are the same bits either way. ``e4m3_cvt``: staged FP8 tiles (``num_stages`` > 1)
    decode e4m3 by the hardware conversion (sm_89+) rather than by bit assembly (exact either way; the tile's scores
    and weights are the same bits); None: the ``WAVEMLA_FP8_DECODE`` rule (:func:`wavemla.device.fp8_decode_path`).
    Register-prefetched FP8 tiles (``num_stages`` 1) always assemble the bits. ``k_scale``: with ``is_fp8``, a
    one-element fp32 tensor on the device makes ``kv`` a per-tensor FP8 cache ``[blocks, page, 1, 576]`` uint8 (e4m3
    codes, value = code · k_scale, read on the device); None: the V3.2 layout. ``q_scale``: with ``is_fp8``, a
    one-element fp32 tensor on the device that multiplies q (q may then be float8_e4m3fn: its codes convert to fp16
    exactly and the scale is applied to the scores; ``out`` takes any 16-bit dtype).
    """
    if k_scale is not None and not is_fp8:
        raise ValueError("k_scale: only for FP8 caches (is_fp8=True: the per-tensor FP8 rows of 576 codes)")
    if q_scale is not None and not is_fp8:
        raise ValueError("q_scale: only for FP8 caches (is_fp8=True), whose split kernel computes in fp16")
    if p_ws is not None:
        need = num_parts * triton.cdiv(q.shape[1] * q.shape[2], block_h) * (block_n * block_h + 2 * block_h)
        tiles_ok = scratch_tile(is_fp8, block_h, q.dtype)
        compute = torch.float16 if is_fp8 else q.dtype
        if not tiles_ok or p_ws.dtype != compute or p_ws.numel() < need:
            raise ValueError(
                f"p_ws: keys-major tiles with one dot of P or 64-row FP8 tiles, and a {compute} tensor of at least "
                f"{need} elements, got "
                f"{p_ws.dtype} {p_ws.numel()} ({block_h}-row blocks, {'FP8' if is_fp8 else q.dtype} rows)"
            )
    if e4m3_cvt is None:
        e4m3_cvt = is_fp8 and fp8_decode_path(q.device) == "cvt"
    elif e4m3_cvt and q.is_cuda and device_arch(q.device) < E4M3_CVT_MIN_ARCH:
        raise ValueError(f"e4m3_cvt: sm_{device_arch(q.device)} has no e4m3 conversion (sm_89 or newer needed)")
    if l2_ahead is None:
        l2_ahead = l2_ahead_tiles(is_fp8)
    elif l2_ahead != 0 and (not is_fp8 or l2_ahead < 2):
        raise ValueError(f"l2_ahead: 0, or at least 2 with FP8 rows (the next tile is in flight), got {l2_ahead}")
    if runs_ws(q=q, kv=kv, is_fp8=is_fp8, block_h=block_h, block_n=block_n):
        from wavemla.kernels import dense_decode_ws

        return dense_decode_ws.dense_decode_split_ws(
            q=q, out=out, lse=lse, o_ws=o_ws, lse_ws=lse_ws, kv=kv, block_table=block_table,
            cache_seqlens=cache_seqlens, sched=sched, causal=causal, softmax_scale=softmax_scale,
            num_parts=num_parts,
        )  # fmt: skip
    if o_ws.dtype != partials_dtype(is_fp8, q.dtype):
        raise ValueError(f"o_ws: expected partials of dtype {partials_dtype(is_fp8, q.dtype)} (partials_dtype), got "
                         f"{o_ws.dtype}")  # fmt: skip
    if is_fp8 and q.dtype != torch.float16:
        # FP8 rows compute in fp16; one conversion here lets the split kernel stage q straight into shared memory.
        q = launch.converted(q, torch.float16)
    _, s_q, h, d_qk = q.shape
    m = s_q * h
    num_rb = triton.cdiv(m, block_h)
    page = kv.shape[1]
    return launch.run(
        _dense_mla_decode_kernel,
        (num_parts * num_rb,),
        p_q=q,
        p_out=out,
        p_lse=lse,
        p_o_ws=o_ws,
        p_lse_ws=lse_ws,
        p_kv=kv,
        p_bt=block_table,
        p_seqlens=cache_seqlens,
        p_sched=sched,
        p_p_ws=p_ws if p_ws is not None else out,
        p_kscale=k_scale if k_scale is not None else lse,
        p_qscale=q_scale if q_scale is not None else lse,
        num_blocks=kv.shape[0],
        max_len=block_table.shape[1] * page,
        stride_kv_blk=kv.stride(0),
        stride_kv_tok=kv.stride(1),
        stride_bt=block_table.stride(0),
        S_Q=s_q,
        H=h,
        M=m,
        stride_qb=q.stride(0),
        stride_qs=q.stride(1),
        stride_qh=q.stride(2),
        stride_ob=out.stride(0),
        stride_os=out.stride(1),
        stride_oh=out.stride(2),
        qk_scale=softmax_scale * LOG2E,
        IS_FP8=is_fp8,
        KV_TENSOR=k_scale is not None,
        Q_SCALE=q_scale is not None,
        HAS_PE=d_qk == D_V + D_PE,
        CAUSAL=causal and s_q > 1,
        PAGE=page,
        DTYPE=tl.float16 if is_fp8 else _TL_DTYPE[q.dtype],
        SPLIT_P=split_p(is_fp8, q.dtype),
        BLOCK_H=block_h,
        BLOCK_N=block_n,
        NUM_RB=num_rb,
        NUM_STAGES=num_stages,
        KEYS_MAJOR=keys_major(is_fp8, block_h),
        TILE_IN_PAGE=page % block_n == 0,
        BLOCK_C=CHUNK_TILES,
        P_VIA_WS=p_ws is not None,
        SCRATCH_ASM=not triton_interpreting(),
        L2_AHEAD=0 if triton_interpreting() else l2_ahead,
        E4M3_CVT=bool(is_fp8 and e4m3_cvt),
        num_warps=num_warps,
        num_stages=num_stages,
    )
