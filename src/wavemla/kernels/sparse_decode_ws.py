"""DeepSeek-V4 sparse MLA decode on sm_90, warp-specialized (Gluon): FP8 gather and decode in one warpgroup, two math
warpgroups.

The split kernel of :mod:`wavemla.kernels.sparse_decode` runs every phase of a tile in the same warps: the gather of
the next tile's rows and their e4m3 decode wait behind the math, and the math behind them. This kernel runs the same
work list (query tokens' tiles of 64 index entries, cut into parts of ``units_per_part`` units as the planner says)
as three partitions of one program of 64 heads, the layout of :mod:`wavemla.kernels.dense_decode_ws` with a
producer that computes instead of copying:

- **gather** (one warpgroup): per tile, the 64 indexed FP8 MODEL1 rows gathered from global memory as 32-bit words,
  decoded to fp16 (e4m3 pairs by the hardware conversion, times the row's power-of-two scale for each 64-wide
  block; the bf16 rope converted) and stored as eight ``[64, 64]`` boxes into one of two stage buffers, with the
  entries' validity beside them. Loads run ahead of the math: each box's store is followed by the load of the same
  box of the next tile (one tile of raw words in registers), the rows of the tile after that are prefetched into
  L2, and the index entries of the one after that are loaded. Rows and scales load with L2 policy ``evict_first``
  (a gathered row is read once a head block; L2 keeps q, the entries and the partials). Invalid entries (past the
  list's length, negative, or past the cache's slots) load nothing and store zeros. At a segment's start the
  first three tiles' entries are asked for at once, then the first tile's rows, then the second tile's rows and
  the next segment's q rows are prefetched into L2.
- **math** (two warpgroups, ``HALF`` 0 and 1): per segment (a token's share of the part) each converts its half of
  q's 64 head rows to fp16 into shared memory; per tile, as the dense kernel's: each scores 32 of the tile's 64
  rows (``q·Kᵀ``, eight wgmma of N = 32), the row maxima cross through shared memory, each computes P for its rows,
  and ``O[:, 256·HALF : 256·HALF + 256] += P·V`` takes its own P from registers and the other's from shared
  memory. The row sums meet once per segment.

Shared memory: q 64 KB, two 64 KB stages, the P halves (8 KB), the maxima and the validity masks (207,296 bytes with
the compiler's scratch). A token held whole by one program is finished there (sink applied, output and lse
written); a cut token leaves one normalized partial (fp16) and one base-2 lse per piece in the workspace, for
:func:`wavemla.kernels.combine.sparse_decode_combine`. Both leave by TMA (:func:`_out_by_tma`) from q's shared memory,
which the segment is done with, so ``out`` must be contiguous; with ``PIECES`` the partials leave from registers (a
further piece of the token keeps q), and with ``MERGE`` their copies complete before the count that lets another
program merge them (:func:`_bulk_writes_done`). Batch-invariant plans cut every token into fixed pieces and
launch the kernel compiled with ``PIECES``: the math runs one segment per piece (a token's later pieces keep its
staged q), the gather one per token (no prologue between pieces), and a program that ran all of a token's pieces
merges them itself (:func:`_merge_half`, the combine's arithmetic in the same order, so the bits do not depend on
which kernel merged); the combine takes the tokens cut between programs. Without ``PIECES`` none of that is
compiled in: a default launch runs the same code as if the pieces' handling did not exist (moving code around it
moved the default plans' times by up to 9% on the H200, so it is kept out of their build).

Launched with ``MERGE`` (the plan's :attr:`wavemla.plan.Plan.ws_merge`), the kernel merges the tokens cut between
programs itself and no combine kernel runs: each math warpgroup counts its piece of such a token on a counter of its
own (:func:`_completes_half`) once the piece's partial and lse are stored, and the warpgroup whose count completes
the token merges its 256 columns with :func:`_merge_half` and puts the counter back to zero. Which program merges
varies from run to run; the bits do not (the same merge in slot order). Outputs and partials are those of the
Triton kernel up to the rounding of P (each rounds P to fp16 at its own point).

Scope: FP8 MODEL1 caches (main and extra), ``h`` a multiple of 64, bf16 or fp16 q, 64x64 tiles; :func:`applies`
says whether a launch qualifies. Everything else runs the Triton kernel.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from wavemla import config
from wavemla.kernels import launch
from wavemla.kernels.dense_decode_ws import HAVE_GLUON
from wavemla.kernels.sparse_decode import segment, spread_cut_units, token_span, unit_range

if HAVE_GLUON:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

    from wavemla.kernels.dense_decode_ws import (
        TensorDescriptor,
        _exchange,
        _row_sums,
        _tile_pv,
        _tile_softmax,
        _tma_store,
        _warps_barrier,
        smem_layout,
    )

    # a shared-memory view with another element type: renamed in Triton 3.9 (``_reinterpret`` before)
    _smem_reinterpret = (
        gl.shared_memory_descriptor.reinterpret
        if hasattr(gl.shared_memory_descriptor, "reinterpret")
        else gl.shared_memory_descriptor._reinterpret
    )

D = 512  # latent width: keys and values
BLOCK = 64  # heads per program, index entries per tile, columns per box
CHUNKS = D // BLOCK  # 8 boxes per row block: 7 of e4m3 nope, 1 of rope
STAGES = 2
# Registers a thread: the gather warpgroup's (a tile of raw bytes in flight, the decode of one box) and the second
# math warpgroup's; the first (the default partition) gets what the compiler leaves (184). The tile waits on both
# math warpgroups and on the gather, whose spills cost most: on the H200, 112 and 192 (the first 200) took 1.05-1.10x
# the time of 120 and 200 at CSA/HCA h=64 b = 128 and 256, and a gather of 104 registers or fewer 1.05-1.53x that of
# 112 (benchmarks/experiments/ws_bounds.py, regs:MxG; 2026-12-04-h200-ws-regs-*.log; docs/sparse-decode.md).
GATHER_REGS = 120
MATH_REGS = 200
MAX_REGS = 168  # per thread at launch: 12 warps x 32 x 168 <= 65,536
ROW_BYTES = 576  # MODEL1: 448 e4m3 + 64 bf16 rope per row; then 8 scale bytes per row after the page's rows
_BLOCK = tl.constexpr(BLOCK)
_CHUNKS = tl.constexpr(CHUNKS)
_STAGES = tl.constexpr(STAGES)
_MATH_REGS = tl.constexpr(MATH_REGS)
_GATHER_REGS = tl.constexpr(GATHER_REGS)
_ROW_BYTES = tl.constexpr(ROW_BYTES)


def applies(*, arch: int, is_fp8: bool, h_q: int, block_h: int, block_n: int) -> bool:
    """Whether a launch of these static shapes runs this kernel (the planner prices it from this): Gluon present, the
    knob ``WAVEMLA_SPARSE_WS`` not ``off``, sm_90, FP8 MODEL1 rows, ``h_q`` a multiple of 64 and 64x64 tiles."""
    return (
        HAVE_GLUON
        and config.get("WAVEMLA_SPARSE_WS") != "off"
        and arch == 90
        and is_fp8
        and h_q % BLOCK == 0
        and block_h == BLOCK
        and block_n == BLOCK
    )


def supported(*, is_fp8: bool, block_h: int, block_n: int, arch: int, q: torch.Tensor, kv: torch.Tensor,
              extra_kv: torch.Tensor | None) -> bool:  # fmt: skip
    """:func:`applies` for a launch's tensors, which must also qualify (:func:`tensors_qualify`)."""
    return applies(arch=arch, is_fp8=is_fp8, h_q=q.shape[2], block_h=block_h, block_n=block_n) and tensors_qualify(
        q=q, kv=kv, extra_kv=extra_kv
    )


def tensors_qualify(*, q: torch.Tensor, kv: torch.Tensor, extra_kv: torch.Tensor | None) -> bool:
    """What this kernel needs of a launch's tensors beyond :func:`applies`: q's head rows contiguous and each query
    token's rows 16-byte aligned (the gather prefetches the next token's rows into L2 by bulk copies of 16-byte
    aligned addresses), the caches' pages 16-byte aligned (the gather loads 16 bytes at a time)."""
    caches = [kv] if extra_kv is None else [kv, extra_kv]
    return (
        q.stride(3) == 1
        and q.stride(2) == q.shape[3]
        and q.data_ptr() % 16 == 0
        and all(n == 1 or q.stride(i) * q.element_size() % 16 == 0 for i, n in enumerate(q.shape[:2]))
        and all(c.data_ptr() % 16 == 0 and c.stride(0) % 16 == 0 for c in caches)
    )


if HAVE_GLUON:

    @gluon.jit
    def _list_len(p_len, i_b, topk, HAS_LEN: gl.constexpr):
        """Valid entries of a request's index list: ``topk``, or its ``topk_length`` clamped to ``[0, topk]``."""
        n = topk
        if HAS_LEN:
            n = gl.minimum(gl.maximum(gl.load(p_len + i_b), 0), topk)
        return n

    @gluon.jit
    def _token(i_b, i_s, n_tiles_main, p_len, p_len_x, topk, topk_x, HAS_LEN: gl.constexpr, HAS_EXTRA: gl.constexpr,
               HAS_LEN_X: gl.constexpr):  # fmt: skip
        """A query token as the tile helpers take it: (batch row, query position, main tiles, valid main entries,
        valid extra entries)."""
        n_main = _list_len(p_len, i_b, topk, HAS_LEN)
        n_x = 0
        if HAS_EXTRA:
            n_x = _list_len(p_len_x, i_b, topk_x, HAS_LEN_X)
        return i_b, i_s, n_tiles_main, n_main, n_x

    @gluon.jit
    def _tile_of(u, tok, lists, HAS_EXTRA: gl.constexpr):
        """Unit ``u`` of a token ``tok = (batch row, query position, main tiles, main entries, extra entries)``, its
        index lists ``lists = (main, extra, their batch and position strides)``: (whether it reads the main cache,
        its first entry, the list's valid entries, the token's index row, whether the tile holds any valid entry)."""
        i_b, i_s, n_tiles_main, n_main, n_x = tok
        p_idx, p_idx_x, stride_ib, stride_is, stride_ixb, stride_ixs = lists
        is_main = u < n_tiles_main
        p_row = p_idx + i_b.to(gl.int64) * stride_ib + i_s * stride_is
        n_valid = n_main
        e0 = u * _BLOCK
        if HAS_EXTRA and not is_main:
            p_row = p_idx_x + i_b.to(gl.int64) * stride_ixb + i_s * stride_ixs
            n_valid = n_x
            e0 = (u - n_tiles_main) * _BLOCK
        return is_main, e0, n_valid, p_row, e0 < n_valid

    @gluon.jit
    def _row_ptrs(p_cache, idx, stride_blk, PAGE: gl.constexpr):
        """Each slot's row (576 bytes: e4m3 nope, bf16 rope) and scale bytes in a MODEL1 cache."""
        p_page = p_cache + (idx // PAGE).to(gl.int64) * stride_blk
        tok = idx % PAGE
        return p_page + tok * _ROW_BYTES, p_page + PAGE * _ROW_BYTES + tok * 8

    @gluon.jit
    def _prefetch_l2(p_a, p_b, ok, NBYTES: gl.constexpr):
        """Bring ``NBYTES`` from each row address ``p_a`` (16-byte aligned) and the 128-byte line at ``p_b`` into L2,
        where ``ok``; one thread of the four that hold a row in the gather's layout issues it. Nothing waits for
        it: the loads an iteration later find the bytes in L2."""
        return gl.inline_asm_elementwise(
            f"""{{
            .reg .pred p;
            .reg .b32 l;
            mov.u32 l, %laneid;
            and.b32 l, l, 3;
            setp.eq.u32 p, l, 0;
            setp.ne.and.b32 p, $3, 0, p;
            @p cp.async.bulk.prefetch.L2.global [$1], {NBYTES};
            @p prefetch.global.L2 [$2];
            mov.u32 $0, 0;
            }}""",
            "=r,l,l,r",
            [p_a, p_b, ok.to(gl.int32)],
            dtype=gl.int32,
            is_pure=False,
            pack=1,
        )

    @gluon.jit
    def _load_box(p_row, ok, o_w4, o_w8, ld8: gl.constexpr, j: gl.constexpr):
        """Raw words of box ``j`` of a tile, four e4m3 bytes a word ``[64, 16]`` (boxes 0-6), or two bf16 rope values
        a word ``[64, 32]`` (box 7). Invalid rows load zeros. (Words, not bytes: bytes held in registers across the
        loop take a register each.)"""
        if j < 7:
            p_w = (p_row + j * 64).to(gl.pointer_type(gl.int32))
            raw = gl.load(p_w[:, None] + o_w4[None, :], mask=ok[:, None], other=0, eviction_policy="evict_first")
        else:
            rows8: gl.constexpr = gl.SliceLayout(1, ld8)
            p_w = gl.convert_layout((p_row + 448).to(gl.pointer_type(gl.int32)), rows8)
            raw = gl.load(
                p_w[:, None] + o_w8[None, :],
                mask=gl.convert_layout(ok, rows8)[:, None],
                other=0,
                eviction_policy="evict_first",
            )
        return raw

    @gluon.jit
    def _load_scales(p_scl, ok):
        """The rows' eight scale bytes as two words (scales 0-3, 4-7)."""
        p_w = p_scl.to(gl.pointer_type(gl.int32))
        return (
            gl.load(p_w, mask=ok, other=0, eviction_policy="evict_first"),
            gl.load(p_w + 1, mask=ok, other=0, eviction_policy="evict_first"),
        )

    @gluon.jit
    def _scale_f16x2(s_lo, s_hi, j: gl.constexpr):
        """Box ``j``'s row scales ``2^(s - 127) · 2^8`` as fp16 (as the Triton kernel rounds them), twice per word."""
        sb = (s_lo >> (8 * j)) & 0xFF if j < 4 else (s_hi >> (8 * (j - 4))) & 0xFF
        f16 = ((sb + 8) << 23).to(gl.float32, bitcast=True).to(gl.float16)
        bits = f16.to(gl.int16, bitcast=True).to(gl.int32) & 0xFFFF
        return bits | (bits << 16)

    @gluon.jit
    def _decode_box(raw, s_lo, s_hi, j: gl.constexpr):
        """Box ``j``'s fp16 values, two a word ``[64, 32]``: ``e4m3 · 2^-8`` (exact in fp16) times the row's scale, as
        the Triton kernel computes them (hardware conversion, two values an instruction); the rope converted from
        bf16 (round to nearest)."""
        if j < 7:
            sc = _scale_f16x2(s_lo, s_hi, j)
            lo, hi = gl.inline_asm_elementwise(
                """{
                .reg .b16 l, h;
                .reg .b32 k;
                mov.b32 {l, h}, $2;
                mov.b32 k, 0x1C001C00;
                cvt.rn.f16x2.e4m3x2 $0, l;
                cvt.rn.f16x2.e4m3x2 $1, h;
                mul.rn.f16x2 $0, $0, k;
                mul.rn.f16x2 $1, $1, k;
                mul.rn.f16x2 $0, $0, $3;
                mul.rn.f16x2 $1, $1, $3;
                }""",
                "=r,=r,r,r",
                [raw, sc[:, None]],
                dtype=(gl.int32, gl.int32),
                is_pure=True,
                pack=1,
            )
            out = gl.reshape(gl.join(lo, hi), [_BLOCK, _BLOCK // 2])
        else:
            out = gl.inline_asm_elementwise(
                """{
                .reg .b16 l, h;
                .reg .f32 fl, fh;
                mov.b32 {l, h}, $1;
                cvt.f32.bf16 fl, l;
                cvt.f32.bf16 fh, h;
                cvt.rn.f16x2.f32 $0, fh, fl;
                }""",
                "=r,r",
                [raw],
                dtype=gl.int32,
                is_pure=True,
                pack=1,
            )
        return out

    @gluon.jit
    def _box_step(kv_smem, slot: gl.constexpr, raw, s_lo, s_hi, p_row_n, ok_n, o_w4, o_w8, ld8: gl.constexpr,
                  j: gl.constexpr):  # fmt: skip
        """Decode and store box ``j`` of the current tile (its fp16 pairs as 32-bit words into the same bytes), then
        load box ``j`` of the next one in its registers."""
        words: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
        dst = _smem_reinterpret(kv_smem.index(slot), gl.int32, [_BLOCK, _BLOCK // 2], words)
        dst.store(gl.convert_layout(_decode_box(raw, s_lo, s_hi, j), ld8))
        return _load_box(p_row_n, ok_n, o_w4, o_w8, ld8, j)

    @gluon.jit
    def _tile_entries(u, t_hi, tok, lists, o_r, HAS_EXTRA: gl.constexpr):
        """Unit ``u``'s 64 index entries (-1 past its list's valid entries or past ``t_hi``): one load, whose value
        the gather uses an iteration later."""
        _, e0, n_valid, p_row, live = _tile_of(u, tok, lists, HAS_EXTRA)
        n_valid = gl.where((u < t_hi) & live, n_valid, 0)
        ent = e0 + o_r
        return gl.load(p_row + ent, mask=ent < n_valid, other=-1)

    @gluon.jit
    def _tile_rows(u, idx, n_tiles_main, caches, PAGE: gl.constexpr, PAGE_X: gl.constexpr, HAS_EXTRA: gl.constexpr):
        """Row and scale pointers of unit ``u``'s entries ``idx`` and their validity (in the cache's slots);
        ``caches = (main, extra, their slots, their page strides)``."""
        p_kv, p_kv_x, num_slots, num_slots_x, stride_kv_blk, stride_kvx_blk = caches
        if HAS_EXTRA:
            if u < n_tiles_main:
                ok = (idx >= 0) & (idx < num_slots)
                p_r, p_s = _row_ptrs(p_kv, gl.where(ok, idx, 0), stride_kv_blk, PAGE)
            else:
                ok = (idx >= 0) & (idx < num_slots_x)
                p_r, p_s = _row_ptrs(p_kv_x, gl.where(ok, idx, 0), stride_kvx_blk, PAGE_X)
        else:
            ok = (idx >= 0) & (idx < num_slots)
            p_r, p_s = _row_ptrs(p_kv, gl.where(ok, idx, 0), stride_kv_blk, PAGE)
        return p_r, p_s, ok

    @gluon.jit
    def _live_from(u, n_tiles_main, n_main, HAS_EXTRA: gl.constexpr):
        """The first unit from ``u`` on that can hold entries: past the main list's valid tiles, the extra list's
        first (units past both lists hold none; their loads are masked off)."""
        if HAS_EXTRA:
            u = gl.where((u < n_tiles_main) & (u * _BLOCK >= n_main), n_tiles_main, u)
        return u

    @gluon.jit
    def _stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF: gl.constexpr):
        """This warpgroup's half of a token's 64 q head rows converted to fp16 into shared memory (the four loads
        issued before any store), then both warpgroups meet (the previous segment's last QKᵀ is done in both: the
        row-sum exchange before it); returns the next exchange."""
        p_qt = p_q + i_b.to(gl.int64) * stride_qb + i_s * stride_qs + o_qh[:, None] * 512 + o_qc[None, :]
        b_q0 = gl.load(p_qt + 0 * _BLOCK)
        b_q1 = gl.load(p_qt + 1 * _BLOCK)
        b_q2 = gl.load(p_qt + 2 * _BLOCK)
        b_q3 = gl.load(p_qt + 3 * _BLOCK)
        q_smem.index(HALF * 4 + 0).store(b_q0.to(gl.float16))
        q_smem.index(HALF * 4 + 1).store(b_q1.to(gl.float16))
        q_smem.index(HALF * 4 + 2).store(b_q2.to(gl.float16))
        q_smem.index(HALF * 4 + 3).store(b_q3.to(gl.float16))
        fence_async_shared()
        _exchange(x_bar, i_x)
        return i_x + 1

    @gluon.jit
    def _out_by_tma(q_smem, desc, row, acc0, acc1, acc2, acc3, b_sc, HALF: gl.constexpr):
        """This warpgroup's 256 columns of a segment's 64 head rows (``acc0..3`` times ``b_sc``, in ``desc``'s dtype)
        to rows ``row ..`` of ``desc`` by TMA, through q's shared-memory boxes ``4·HALF ..``: both warpgroups are
        done with q once their row sums have crossed (their last ``QKᵀ`` came before), and this warpgroup stages only
        those boxes of the next q, after the copies have read them (the wait at the end)."""
        box: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
        ty: gl.constexpr = desc.dtype
        b0 = _smem_reinterpret(q_smem.index(HALF * 4 + 0), ty, [_BLOCK, _BLOCK], box)
        b1 = _smem_reinterpret(q_smem.index(HALF * 4 + 1), ty, [_BLOCK, _BLOCK], box)
        b2 = _smem_reinterpret(q_smem.index(HALF * 4 + 2), ty, [_BLOCK, _BLOCK], box)
        b3 = _smem_reinterpret(q_smem.index(HALF * 4 + 3), ty, [_BLOCK, _BLOCK], box)
        b0.store((acc0 * b_sc).to(ty))
        b1.store((acc1 * b_sc).to(ty))
        b2.store((acc2 * b_sc).to(ty))
        b3.store((acc3 * b_sc).to(ty))
        fence_async_shared()
        _warps_barrier()
        _tma_store(desc, [row, HALF * 256 + 0 * _BLOCK], b0)
        _tma_store(desc, [row, HALF * 256 + 1 * _BLOCK], b1)
        _tma_store(desc, [row, HALF * 256 + 2 * _BLOCK], b2)
        _tma_store(desc, [row, HALF * 256 + 3 * _BLOCK], b3)
        tma.store_wait(0)

    @gluon.jit
    def _bulk_writes_done(o):
        """Wait until this thread's TMA stores are complete, their writes to global memory included (the wait after
        :func:`_out_by_tma` only waits for their reads of shared memory), and order those writes before its later
        accesses through the generic proxy: a partial that another program's merge loads after this program's count
        (``o``: any tensor, for the elementwise form)."""
        return gl.inline_asm_elementwise(
            "cp.async.bulk.wait_group 0;\n fence.proxy.async.global;\n mov.u32 $0, 0;",
            "=r,r",
            [o],
            dtype=gl.int32,
            is_pure=False,
            pack=1,
        )

    @gluon.jit
    def _token_slots(i_tok, n_tiles, slot_units):
        """Token ``i_tok``'s first and last workspace slots, less ``i_tok``: its pieces are the runs of
        ``slot_units`` units of the flattened (token, tile) space that hold its tiles."""
        return (i_tok * n_tiles) // slot_units, ((i_tok + 1) * n_tiles - 1) // slot_units

    @gluon.jit
    def _completes_half(p_cnt, n_pieces, HALF: gl.constexpr):
        """Count this warpgroup's piece of a token of ``n_pieces`` pieces on the counter ``*p_cnt`` and return 1 in
        each of its threads if that completed the count, else 0: the Triton kernel's handshake
        (:func:`wavemla.kernels.sparse_decode._completes_count`) for one warpgroup of a warp-specialized program.

        The caller's warpgroup barrier orders its threads' stores of the partial before this. The first lane of each
        of the four warps adds 1 with acquire-release semantics at GPU scope (a piece counts 4), and the lane that
        brings the count to ``4 · n_pieces`` tells the others through a barrier of the warpgroup's 128 threads with an
        OR reduction (named barrier ``8 + HALF``, one the compiler's partitions do not use: they take 0-3), which
        also orders their later loads (the merge's) after its acquire. One lane a warp, not the warpgroup's first
        thread: reading ``%tid.x`` here made ptxas treat the code after it as divergent (with Triton 3.6's build,
        twice the partition's register spills, the tile loop's included)."""
        return gl.inline_asm_elementwise(
            f"""{{
            .reg .pred p_first, p_last, p_any;
            .reg .u32 r_lane, r_old;
            mov.u32 r_lane, %laneid;
            setp.eq.u32 p_first, r_lane, 0;
            mov.u32 r_old, 0xffffffff;
            @p_first atom.acq_rel.gpu.global.add.u32 r_old, [$1], 1;
            setp.eq.and.u32 p_last, r_old, $2, p_first;
            bar.red.or.pred p_any, {8 + HALF}, 128, p_last;
            selp.u32 $0, 1, 0, p_any;
            }}""",
            "=r,l,r",
            [p_cnt, 4 * n_pieces - 1],
            dtype=gl.int32,
            is_pure=False,
            pack=1,
        )

    @gluon.jit
    def _merge_half(p_o_ws, p_lse_ws, p_out, p_lse, p_sink, i_tok, i_b, i_s, n_tiles, slot_units, H, h0,
                    stride_ob, stride_os, stride_oh, HAS_SINK: gl.constexpr, HALF: gl.constexpr):  # fmt: skip
        """Merge token ``i_tok``'s pieces (workspace slots ``i_tok + i_first .. i_tok + i_last``) into its output
        columns ``256·HALF ..`` for heads ``h0 .. h0 + 63`` (and, ``HALF`` 0, its lse): the arithmetic of
        :func:`wavemla.kernels.sparse_decode.merge_pieces` then ``finalize_heads``, each element's terms added in
        slot order, so the bits equal the combine kernel's for the same pieces. Reads only what this warpgroup
        stored (after its barrier).

        The code runs once per merged token, so its size is what it costs: an SM fetches it cold while the tile loops of
        the other warps want the instruction cache too (Nsight Compute on the H200, CSA b=128: with the merge unrolled,
        3,591 SASS instructions for the two warpgroups, warps waited for an instruction in 16.5% of the stall samples,
        against 5.5% in the default build; docs/sparse-decode.md, "Instruction fetch"). So the lse sums come first, then
        one loop over (64-column box, piece) with the next partial's load issued before the current one is added: one
        copy of a box's code."""
        st_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])
        rows: gl.constexpr = gl.SliceLayout(1, st_layout)
        o_h = h0 + gl.arange(0, _BLOCK, layout=rows)
        o_c = HALF * 256 + gl.arange(0, _BLOCK, layout=gl.SliceLayout(0, st_layout))
        i_first, i_last = _token_slots(i_tok, n_tiles, slot_units)
        n_pieces = i_last - i_first + 1
        p_l0 = p_lse_ws + (i_tok + i_first).to(gl.int64) * H + o_h
        b_max = gl.full([_BLOCK], float("-inf"), gl.float32, layout=rows)
        for i_part in range(0, n_pieces):
            b_max = gl.maximum(b_max, gl.load(p_l0 + i_part * H, cache_modifier=".cg"))
        b_max = gl.where(b_max == float("-inf"), 0.0, b_max)
        b_sum = gl.zeros([_BLOCK], gl.float32, layout=rows)
        for i_part in range(0, n_pieces):
            b_sum += gl.exp2(gl.load(p_l0 + i_part * H, cache_modifier=".cg") - b_max)
        m_seen = b_sum != 0.0  # a NaN piece (a NaN score) keeps the token NaN, as the combine does
        b_div = gl.where(m_seen, b_sum, 1.0)
        b_lse2 = gl.where(m_seen, b_max + gl.log2(b_div), float("-inf"))
        m_rows = b_lse2 != float("-inf")
        b_factor = b_div  # no sink: not read
        if HAS_SINK:
            b_sink2 = gl.load(p_sink + o_h).to(gl.float32) * 1.4426950408889634
            b_factor = 1.0 / (1.0 + gl.exp2(b_sink2 - b_lse2))
        if HALF == 0:
            gl.store(p_lse + i_tok.to(gl.int64) * H + o_h, gl.where(m_rows, b_lse2 * 0.6931471805599453, float("inf")))
        p_o = p_out + i_b.to(gl.int64) * stride_ob + i_s * stride_os + o_h[:, None] * stride_oh + o_c[None, :]
        # partial (box j, piece i) at p_p0 + i·H·512 + j·64
        p_p0 = p_o_ws + ((i_tok + i_first).to(gl.int64) * H + o_h[:, None]) * 512 + o_c[None, :]
        b_p = gl.load(p_p0, cache_modifier=".cg")
        b_acc = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=st_layout)
        n_steps = 4 * n_pieces
        for i_step in range(0, n_steps):
            j = i_step // n_pieces
            i_part = i_step - j * n_pieces
            b_pc = b_p
            i_nx = gl.minimum(i_step + 1, n_steps - 1)
            j_nx = i_nx // n_pieces
            b_p = gl.load(p_p0 + (i_nx - j_nx * n_pieces) * H * 512 + j_nx * _BLOCK, cache_modifier=".cg")
            b_w = gl.exp2(gl.load(p_l0 + i_part * H, cache_modifier=".cg") - b_max)
            b_acc += b_w[:, None] * b_pc.to(gl.float32)
            if i_part == n_pieces - 1:
                # the box complete: normalized (the sum of weights, then the sink factor: finalize_heads' order),
                # rows no piece saw zeroed
                b_o = b_acc / b_div[:, None]
                if HAS_SINK:
                    b_o = b_o * b_factor[:, None]
                gl.store(p_o + j * _BLOCK, gl.where(m_rows[:, None], b_o, 0.0).to(p_o.dtype.element_ty))
                b_acc = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=st_layout)

    @gluon.jit
    def _gather_partition(kv_smem, m_smem, kv_ready, kv_empty, p_q, stride_qb, stride_qs, p_kv, p_idx, p_len, p_kv_x,
                          p_idx_x, p_len_x, num_slots, num_slots_x, stride_kv_blk, stride_kvx_blk, S_Q, H, topk,
                          topk_x, n_tiles_main, n_tiles, total_units, units_per_part, seg_units, stride_ib, stride_is,
                          stride_ixb, stride_ixs, cut_units, whole_units, PAGE: gl.constexpr, PAGE_X: gl.constexpr,
                          HAS_LEN: gl.constexpr, HAS_EXTRA: gl.constexpr, HAS_LEN_X: gl.constexpr,
                          NUM_HB: gl.constexpr, PIECES: gl.constexpr, SPREAD: gl.constexpr):  # fmt: skip
        ld4: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])  # [64, 16] words: 16 bytes a thread
        ld8: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])  # [64, 32] words: 32 bytes a thread
        o_r = gl.arange(0, _BLOCK, layout=gl.SliceLayout(1, ld4))
        o_w4 = gl.arange(0, _BLOCK // 4, layout=gl.SliceLayout(0, ld4))
        o_w8 = gl.arange(0, _BLOCK // 2, layout=gl.SliceLayout(0, ld8))
        m_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        i_pid = gl.program_id(0)
        i_hb = i_pid % NUM_HB
        i_part = i_pid // NUM_HB
        lists = (p_idx, p_idx_x, stride_ib, stride_is, stride_ixb, stride_ixs)
        caches = (p_kv, p_kv_x, num_slots, num_slots_x, stride_kv_blk, stride_kvx_blk)
        i_it = 0
        # batch-invariant pieces (PIECES): one segment per token, so that a token's pieces are one run of tiles here,
        # with no prologue between them; otherwise the math's segments (one per token as well)
        g_units = n_tiles if PIECES else seg_units
        for i_rng in range(0, 1 + SPREAD):
            unit_lo, unit_hi, seg_end = unit_range(
                i_part, i_rng, units_per_part, total_units, cut_units, whole_units, g_units, SPREAD
            )
            for i_seg in range(unit_lo // g_units, seg_end):
                _, _, i_b, i_s, t_lo, t_hi = segment(i_seg, unit_lo, unit_hi, g_units, n_tiles, S_Q)
                tok = _token(i_b, i_s, n_tiles_main, p_len, p_len_x, topk, topk_x, HAS_LEN, HAS_EXTRA, HAS_LEN_X)
                n_main = tok[3]
                # the first three live tiles' index entries asked for at once, then the first tile's raw words, the
                # second's rows on their way to L2, the next segment's q rows too (the third tile's entries go into
                # the loop): one trip to memory for the entries, and the first tile's rows ahead of the prefetches
                u1 = _live_from(t_lo, n_tiles_main, n_main, HAS_EXTRA)
                u2 = _live_from(u1 + 1, n_tiles_main, n_main, HAS_EXTRA)
                idx1 = _tile_entries(u1, t_hi, tok, lists, o_r, HAS_EXTRA)
                idx2 = _tile_entries(u2, t_hi, tok, lists, o_r, HAS_EXTRA)
                idx = _tile_entries(_live_from(u2 + 1, n_tiles_main, n_main, HAS_EXTRA), t_hi, tok, lists, o_r,
                                    HAS_EXTRA)  # fmt: skip
                p_r, p_s, ok = _tile_rows(u1, idx1, n_tiles_main, caches, PAGE, PAGE_X, HAS_EXTRA)
                s_lo, s_hi = _load_scales(p_s, ok)
                ok_cur = ok
                r0 = _load_box(p_r, ok, o_w4, o_w8, ld8, 0)
                r1 = _load_box(p_r, ok, o_w4, o_w8, ld8, 1)
                r2 = _load_box(p_r, ok, o_w4, o_w8, ld8, 2)
                r3 = _load_box(p_r, ok, o_w4, o_w8, ld8, 3)
                r4 = _load_box(p_r, ok, o_w4, o_w8, ld8, 4)
                r5 = _load_box(p_r, ok, o_w4, o_w8, ld8, 5)
                r6 = _load_box(p_r, ok, o_w4, o_w8, ld8, 6)
                r7 = _load_box(p_r, ok, o_w4, o_w8, ld8, 7)
                p_r2, p_s2, ok2 = _tile_rows(u2, idx2, n_tiles_main, caches, PAGE, PAGE_X, HAS_EXTRA)
                _prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)
                if i_seg + 1 <= seg_end - 1:
                    i_tok_n = i_seg + 1 if PIECES else gl.maximum((i_seg + 1) * g_units, unit_lo) // n_tiles
                    i_b_n = i_tok_n // S_Q
                    p_qn = p_q + i_b_n.to(gl.int64) * stride_qb + (i_tok_n - i_b_n * S_Q) * stride_qs
                    p_qr = p_qn + (i_hb * _BLOCK + o_r) * 512
                    _prefetch_l2(p_qr, p_qr, o_r >= 0, 1024)
                for u in range(t_lo, t_hi):
                    live = _tile_of(u, tok, lists, HAS_EXTRA)[4]
                    if live:
                        # the next live tile's rows (prefetched into L2 an iteration ago) into registers, the one
                        # after's rows into L2 (from the entries loaded an iteration ago), the entries of the one after
                        # that
                        u_n = _live_from(u + 1, n_tiles_main, n_main, HAS_EXTRA)
                        u_nn = _live_from(u_n + 1, n_tiles_main, n_main, HAS_EXTRA)
                        p_r = p_r2
                        p_s = p_s2
                        ok = ok2
                        p_r2, p_s2, ok2 = _tile_rows(u_nn, idx, n_tiles_main, caches, PAGE, PAGE_X, HAS_EXTRA)
                        _prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)
                        idx = _tile_entries(
                            _live_from(u_nn + 1, n_tiles_main, n_main, HAS_EXTRA), t_hi, tok, lists, o_r, HAS_EXTRA
                        )
                        s_lo_n, s_hi_n = _load_scales(p_s, ok)
                        i_st = i_it % _STAGES
                        mbarrier.wait(kv_empty.index(i_st), ((i_it // _STAGES) & 1) ^ 1)
                        base = i_st * _CHUNKS
                        r0 = _box_step(kv_smem, base + 0, r0, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 0)
                        r1 = _box_step(kv_smem, base + 1, r1, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 1)
                        r2 = _box_step(kv_smem, base + 2, r2, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 2)
                        r3 = _box_step(kv_smem, base + 3, r3, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 3)
                        r4 = _box_step(kv_smem, base + 4, r4, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 4)
                        r5 = _box_step(kv_smem, base + 5, r5, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 5)
                        r6 = _box_step(kv_smem, base + 6, r6, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 6)
                        r7 = _box_step(kv_smem, base + 7, r7, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 7)
                        s_lo = s_lo_n
                        s_hi = s_hi_n
                        m_smem.index(i_st).store(gl.convert_layout(ok_cur.to(gl.int32), m_layout))
                        ok_cur = ok
                        fence_async_shared()
                        _warps_barrier()
                        mbarrier.arrive(kv_ready.index(i_st), count=1)
                        i_it += 1

    @gluon.jit
    def _math_partition(q_smem, kv_smem, m_smem, p_smem, x_smem, kv_ready, kv_empty, x_bar, p_bar, p_q, p_out, p_lse,
                        p_o_ws, p_lse_ws, p_sink, p_cnt, p_idx, p_len, p_idx_x, p_len_x, S_Q, H, topk, topk_x,
                        n_tiles_main, n_tiles, total_units, units_per_part, seg_units, slot_units, stride_qb,
                        stride_qs, stride_ob, stride_os, stride_oh, stride_ib, stride_is, stride_ixb, stride_ixs,
                        qk_scale, o_desc, w_desc, cut_units, whole_units, HAS_LEN: gl.constexpr,
                        HAS_EXTRA: gl.constexpr, HAS_LEN_X: gl.constexpr, HAS_SINK: gl.constexpr,
                        NUM_HB: gl.constexpr, PIECES: gl.constexpr, MERGE: gl.constexpr, SPREAD: gl.constexpr,
                        HALF: gl.constexpr):  # fmt: skip
        """One of the two math warpgroups (:mod:`wavemla.kernels.dense_decode_ws`' scheme): this one scores entries
        ``32·HALF ..`` of each tile and accumulates value columns ``256·HALF ..``."""
        HK: gl.constexpr = _BLOCK // 2
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HK, 16])  # fmt: skip
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK, 16])  # fmt: skip
        gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        rows_l: gl.constexpr = gl.SliceLayout(1, s_layout)
        cols_l: gl.constexpr = gl.SliceLayout(0, s_layout)
        orow_l: gl.constexpr = gl.SliceLayout(1, o_layout)
        x_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        # output rows leave in 16-byte pieces (a wgmma accumulator's layout stores 4 bytes a thread)
        st_layout: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])
        st_rows: gl.constexpr = gl.SliceLayout(1, st_layout)
        o_st = gl.arange(0, _BLOCK, layout=gl.SliceLayout(0, st_layout))
        V_CHUNKS: gl.constexpr = 4
        v0: gl.constexpr = HALF * V_CHUNKS
        k_mine: gl.constexpr = HALF * HK
        (1 - HALF) * HK

        i_pid = gl.program_id(0)
        i_hb = i_pid % NUM_HB
        i_part = i_pid // NUM_HB
        o_h = i_hb * _BLOCK + gl.arange(0, _BLOCK, layout=rows_l)
        o_ho = i_hb * _BLOCK + gl.arange(0, _BLOCK, layout=orow_l)
        q_ld: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0])
        o_qh = i_hb * _BLOCK + gl.arange(0, _BLOCK, layout=gl.SliceLayout(1, q_ld))
        o_qc = HALF * 256 + gl.arange(0, _BLOCK, layout=gl.SliceLayout(0, q_ld))
        lists = (p_idx, p_idx_x, stride_ib, stride_is, stride_ixb, stride_ixs)
        i_it = 0
        i_x = 0
        i_tok_q = -1  # the token whose q is staged
        # the sinks (base 2) of this program's heads, loaded now: a whole token's epilogue would otherwise wait for them
        b_sink2 = gl.zeros([_BLOCK], gl.float32, layout=rows_l)
        if HAS_SINK:
            b_sink2 = gl.load(p_sink + o_h).to(gl.float32) * 1.4426950408889634
        for i_rng in range(0, 1 + SPREAD):
            unit_lo, unit_hi, seg_end = unit_range(
                i_part, i_rng, units_per_part, total_units, cut_units, whole_units, seg_units, SPREAD
            )
            for i_seg in range(unit_lo // seg_units, seg_end):
                seg_lo, i_tok, i_b, i_s, t_lo, t_hi = segment(i_seg, unit_lo, unit_hi, seg_units, n_tiles, S_Q)
                tok = _token(i_b, i_s, n_tiles_main, p_len, p_len_x, topk, topk_x, HAS_LEN, HAS_EXTRA, HAS_LEN_X)
                b_mx = gl.full([_BLOCK], float("-inf"), gl.float32, layout=rows_l)
                b_l = gl.zeros([_BLOCK], gl.float32, layout=rows_l)
                acc0 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
                acc1 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
                acc2 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
                acc3 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
                # q: this warpgroup converts its half of the token's 64 head rows to fp16; a further batch-invariant
                # piece of the same token keeps the staged q
                if PIECES:
                    if i_tok != i_tok_q:
                        i_x = _stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)
                        i_tok_q = i_tok
                else:
                    i_x = _stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)
                for u in range(t_lo, t_hi):
                    live = _tile_of(u, tok, lists, HAS_EXTRA)[4]
                    if live:
                        i_st = i_it % _STAGES
                        mbarrier.wait(kv_ready.index(i_st), (i_it // _STAGES) & 1)
                        k_base = i_st * _CHUNKS
                        b_s = gl.zeros([_BLOCK, HK], gl.float32, layout=s_layout)
                        for c in gl.static_range(_CHUNKS):
                            b_k = kv_smem.index(k_base + c).slice(k_mine, HK, dim=0).permute((1, 0))
                            b_s = warpgroup_mma(q_smem.index(c), b_k, b_s, use_acc=c > 0, is_async=True)
                        b_s = warpgroup_mma_wait(num_outstanding=0, deps=(b_s,))
                        # this warpgroup's entries' validity, as the gather found it
                        m_n = gl.convert_layout(m_smem.index(i_st).slice(k_mine, HK).load(x_layout), cols_l) != 0
                        b_s = gl.where(m_n[None, :], b_s * qk_scale, float("-inf"))
                        # the tile's row maxima and P: this warpgroup's entries, then the other's through shared memory
                        b_p16, b_alpha, b_mx, b_l, i_x = _tile_softmax(b_s, b_mx, b_l, p_smem, x_smem, x_bar, p_bar,
                                                                       i_x, HALF)  # fmt: skip
                        acc0, acc1, acc2, acc3 = _tile_pv(b_p16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, k_base + v0,
                                                          p_smem, p_bar, i_it, HALF)  # fmt: skip
                        mbarrier.arrive(kv_empty.index(i_st), count=1)
                        i_it += 1

                b_l, i_x = _row_sums(b_l, x_smem, x_bar, i_x, HALF)
                m_seen = b_l != 0.0  # a NaN score makes l NaN, which stays NaN (the reference's), not 'no row seen'
                b_inv = 1.0 / gl.where(m_seen, b_l, 1.0)
                b_lse2 = gl.where(m_seen, b_mx + gl.log2(gl.where(m_seen, b_l, 1.0)), float("-inf"))
                if (t_lo == 0) & (t_hi == n_tiles):
                    # the whole token: the sink enters the denominator, out = o / (1 + 2^(sink·log2e - lse2))
                    if HAS_SINK:
                        b_inv = b_inv / (1.0 + gl.exp2(b_sink2 - b_lse2))
                    b_sc = gl.convert_layout(gl.where(m_seen, b_inv, 0.0), orow_l)[:, None]
                    # out's rows: (token, head), contiguous
                    _out_by_tma(q_smem, o_desc, i_tok * H + i_hb * _BLOCK, acc0, acc1, acc2, acc3, b_sc, HALF)
                    if HALF == 0:
                        b_lse = gl.where(m_seen, b_lse2 * 0.6931471805599453, float("inf"))
                        gl.store(p_lse + i_tok.to(gl.int64) * H + o_h, b_lse)
                else:
                    i_slot = (i_tok + seg_lo // slot_units).to(gl.int64)
                    b_sc = gl.convert_layout(b_inv, orow_l)[:, None]
                    if PIECES:
                        # from registers: a further piece keeps q's shared memory
                        p_w = (
                            p_o_ws
                            + gl.convert_layout((i_slot * H + o_ho) * 512 + HALF * 256, st_rows)[:, None]
                            + o_st[None, :]
                        )
                        w_ty = p_o_ws.dtype.element_ty
                        gl.store(p_w + 0 * _BLOCK, gl.convert_layout((acc0 * b_sc).to(w_ty), st_layout))
                        gl.store(p_w + 1 * _BLOCK, gl.convert_layout((acc1 * b_sc).to(w_ty), st_layout))
                        gl.store(p_w + 2 * _BLOCK, gl.convert_layout((acc2 * b_sc).to(w_ty), st_layout))
                        gl.store(p_w + 3 * _BLOCK, gl.convert_layout((acc3 * b_sc).to(w_ty), st_layout))
                    else:
                        # the workspace's rows: (slot, head); the combine reads them after this kernel, or (MERGE) a
                        # merge after this warpgroup's count, which the copies' writes are ordered before (below)
                        _out_by_tma(q_smem, w_desc, (i_slot * H).to(gl.int32) + i_hb * _BLOCK, acc0, acc1, acc2, acc3,
                                    b_sc, HALF)  # fmt: skip
                    if PIECES or MERGE:
                        # both warpgroups store the piece's lse (the same values): each merges from its own stores, or
                        # from those its count orders before the merge
                        gl.store(p_lse_ws + i_slot * H + o_h, b_lse2)
                        if MERGE:
                            # the last of a token's pieces where all of them ran here (batch-invariant pieces) is merged
                            # now; a piece of a token cut between programs is counted once this warpgroup's stores are
                            # done, and the piece whose count completes merges the token's columns 256·HALF .. and
                            # resets the count (one call site of the merge: its code is fetched once)
                            cut = (i_tok * n_tiles < unit_lo) | ((i_tok + 1) * n_tiles > unit_hi)
                            merge_now = (t_hi == n_tiles) & (i_tok * n_tiles >= unit_lo)
                            if not PIECES:
                                _bulk_writes_done(o_h)  # the partial went out by TMA
                            _warps_barrier()
                            i_first, i_last = _token_slots(i_tok, n_tiles, slot_units)
                            p_c = p_cnt + (i_tok * NUM_HB + i_hb) * 2 + HALF
                            if cut:
                                merge_now = _completes_half(p_c, i_last - i_first + 1, HALF) != 0
                            if merge_now:
                                _merge_half(p_o_ws, p_lse_ws, p_out, p_lse, p_sink, i_tok, i_b, i_s, n_tiles,
                                            slot_units, H, i_hb * _BLOCK, stride_ob, stride_os, stride_oh, HAS_SINK,
                                            HALF)  # fmt: skip
                                if cut:
                                    gl.store(p_c, 0)
                        else:
                            if (t_hi == n_tiles) & (i_tok * n_tiles >= unit_lo):
                                # the last of a token's pieces, all of which ran here: merged now, as the combine kernel
                                # would (the tokens cut between programs are left to it, or to MERGE's count)
                                _warps_barrier()
                                _merge_half(p_o_ws, p_lse_ws, p_out, p_lse, p_sink, i_tok, i_b, i_s, n_tiles,
                                            slot_units, H, i_hb * _BLOCK, stride_ob, stride_os, stride_oh, HAS_SINK,
                                            HALF)  # fmt: skip
                    else:
                        if HALF == 0:
                            gl.store(p_lse_ws + i_slot * H + o_h, b_lse2)

    @gluon.jit
    def _sparse_mla_decode_ws_kernel(p_q, p_out, p_lse, p_o_ws, p_lse_ws, p_sink, p_kv, p_idx, p_len, p_kv_x,
                                     p_idx_x, p_len_x, num_slots, num_slots_x, stride_kv_blk, stride_kvx_blk, S_Q, H,
                                     topk, topk_x, n_tiles_main, n_tiles, total_units, units_per_part, seg_units,
                                     slot_units, stride_qb, stride_qs, stride_ob, stride_os, stride_oh, stride_ib,
                                     stride_is, stride_ixb, stride_ixs, qk_scale, p_cnt, o_desc, w_desc,
                                     cut_units, whole_units, PAGE: gl.constexpr,
                                     PAGE_X: gl.constexpr, HAS_LEN: gl.constexpr, HAS_EXTRA: gl.constexpr,
                                     HAS_LEN_X: gl.constexpr, HAS_SINK: gl.constexpr,
                                     NUM_HB: gl.constexpr, PIECES: gl.constexpr, MERGE: gl.constexpr,
                                     SPREAD: gl.constexpr):  # fmt: skip
        box: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
        q_smem = gl.allocate_shared_memory(gl.float16, [_CHUNKS, _BLOCK, _BLOCK], box)
        kv_smem = gl.allocate_shared_memory(gl.float16, [_STAGES * _CHUNKS, _BLOCK, _BLOCK], box)
        kv_ready = gl.allocate_shared_memory(gl.int64, [_STAGES, 1], mbarrier.MBarrierLayout())
        kv_empty = gl.allocate_shared_memory(gl.int64, [_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(_STAGES):
            mbarrier.init(kv_ready.index(i), count=1)
            mbarrier.init(kv_empty.index(i), count=2)
        p_sl: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)
        p_smem = gl.allocate_shared_memory(gl.float16, [2, _BLOCK, _BLOCK // 2], p_sl)
        x_smem = gl.allocate_shared_memory(gl.float32, [4, _BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        m_smem = gl.allocate_shared_memory(gl.int32, [_STAGES, _BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        x_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        p_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(x_bar, count=2)
        mbarrier.init(p_bar, count=2)
        fence_async_shared()
        # The two math partitions' arguments are written out twice: Triton 3.6's Gluon frontend does not compile a
        # shared tuple extended by the half (`args + (0,)`: "'int' object has no attribute '_flatten_ir'").
        # fmt: off
        gl.warp_specialize(
            [
                (_math_partition, (q_smem, kv_smem, m_smem, p_smem, x_smem, kv_ready, kv_empty, x_bar, p_bar, p_q,
                                   p_out, p_lse, p_o_ws, p_lse_ws, p_sink, p_cnt, p_idx, p_len, p_idx_x, p_len_x, S_Q,
                                   H, topk, topk_x, n_tiles_main, n_tiles, total_units, units_per_part, seg_units,
                                   slot_units, stride_qb, stride_qs, stride_ob, stride_os, stride_oh, stride_ib,
                                   stride_is, stride_ixb, stride_ixs, qk_scale, o_desc, w_desc, cut_units,
                                   whole_units, HAS_LEN, HAS_EXTRA, HAS_LEN_X,
                                   HAS_SINK, NUM_HB, PIECES, MERGE, SPREAD, 0)),
                (_math_partition, (q_smem, kv_smem, m_smem, p_smem, x_smem, kv_ready, kv_empty, x_bar, p_bar, p_q,
                                   p_out, p_lse, p_o_ws, p_lse_ws, p_sink, p_cnt, p_idx, p_len, p_idx_x, p_len_x, S_Q,
                                   H, topk, topk_x, n_tiles_main, n_tiles, total_units, units_per_part, seg_units,
                                   slot_units, stride_qb, stride_qs, stride_ob, stride_os, stride_oh, stride_ib,
                                   stride_is, stride_ixb, stride_ixs, qk_scale, o_desc, w_desc, cut_units,
                                   whole_units, HAS_LEN, HAS_EXTRA, HAS_LEN_X,
                                   HAS_SINK, NUM_HB, PIECES, MERGE, SPREAD, 1)),
                (_gather_partition, (kv_smem, m_smem, kv_ready, kv_empty, p_q, stride_qb, stride_qs, p_kv, p_idx,
                                     p_len,
                                     p_kv_x, p_idx_x, p_len_x, num_slots, num_slots_x, stride_kv_blk, stride_kvx_blk,
                                     S_Q, H, topk, topk_x, n_tiles_main, n_tiles, total_units, units_per_part,
                                     seg_units, stride_ib, stride_is, stride_ixb, stride_ixs, cut_units, whole_units,
                                     PAGE, PAGE_X, HAS_LEN, HAS_EXTRA, HAS_LEN_X, NUM_HB, PIECES, SPREAD)),
            ],
            [4, 4],
            [_MATH_REGS, _GATHER_REGS],
        )
        # fmt: on


def sparse_decode_split_ws(
    *,
    q: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    o_ws: torch.Tensor | None,
    lse_ws: torch.Tensor | None,
    kv: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    extra_kv: torch.Tensor | None,
    extra_indices: torch.Tensor | None,
    extra_topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    softmax_scale: float,
    units_per_part: int,
    num_parts: int,
    pieces_tiles: int | None = None,
    counts: torch.Tensor | None = None,
    whole_units: int = 0,
    token_units: int = 0,
) -> Any:
    """Launch the warp-specialized split kernel (arguments as :func:`wavemla.kernels.sparse_decode.sparse_decode_split`
    with 64x64 tiles, which calls this where :func:`supported`). Tokens cut between programs are merged in the
    kernel where ``counts`` is given (int32, zero, two counters per token and head block: ``b·s_q·(h/64)·2``, left
    zero again; the plan's :attr:`wavemla.plan.Plan.ws_merge`), else their partials are left in the workspace for
    :func:`wavemla.kernels.combine.sparse_decode_combine`. ``whole_units`` > 0 (:attr:`wavemla.plan.Plan.whole_units`):
    each of the ``num_parts`` parts runs ``units_per_part`` units of the leftover tokens (the first
    ``b·s_q - num_parts·whole_units / n_tiles``), then ``whole_units`` units of whole tokens. ``token_units`` > 0
    (:attr:`wavemla.plan.Plan.token_units`): tokens padded with empty units (the kernel skips units without
    entries), one piece of one token a part. Returns Triton's compiled-kernel handle."""
    from wavemla.kernels.sparse_decode import LOG2E

    b, s_q, h, _ = q.shape
    topk = indices.shape[2]
    has_extra = extra_kv is not None
    topk_x = extra_indices.shape[2] if extra_indices is not None else 0
    n_tiles_main = triton.cdiv(topk, BLOCK)
    n_tiles = token_span(
        n_tiles_main + (triton.cdiv(topk_x, BLOCK) if has_extra else 0), units_per_part, token_units, pieces_tiles,
        whole_units,
    )  # fmt: skip
    kv_x = extra_kv if extra_kv is not None else kv
    idx_x = extra_indices if extra_indices is not None else indices
    num_hb = h // BLOCK
    # a whole token's output, and a cut token's partial but with batch-invariant pieces, leave by TMA: out's and the
    # workspace's rows as [rows, 512] boxes of 64 x 64
    if not out.is_contiguous():
        raise ValueError(f"out: expected a contiguous [b, s_q, h, 512] tensor (its rows go out by TMA), got strides "
                         f"{out.stride()}")  # fmt: skip
    # the copies go through q's fp16 boxes of shared memory, 64 x 64 elements of 2 bytes: wider elements would spill
    # into the neighbouring boxes
    if out.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"out: expected bf16 or fp16 (q's dtype; its rows go out by TMA through fp16 boxes), got "
                         f"{out.dtype}")  # fmt: skip
    layout = smem_layout()
    out2 = out.view(b * s_q * h, D)
    o_desc = TensorDescriptor(out2, list(out2.shape), list(out2.stride()), [BLOCK, BLOCK], layout)
    w_desc = o_desc
    if o_ws is not None:
        if not o_ws.is_contiguous() or o_ws.shape[-1] != D or o_ws.shape[-2] != h or o_ws.dtype != torch.float16:
            raise ValueError(f"o_ws: expected a contiguous fp16 [slots, {h}, {D}] tensor (partials go out by TMA), "
                             f"got {o_ws.dtype} {list(o_ws.shape)} with strides {o_ws.stride()}")  # fmt: skip
        ws2 = o_ws.view(-1, D)
        w_desc = TensorDescriptor(ws2, list(ws2.shape), list(ws2.stride()), [BLOCK, BLOCK], layout)
    total_units = b * s_q * n_tiles
    cut_units = spread_cut_units(total_units, n_tiles, num_parts, units_per_part, whole_units)
    if counts is not None and (counts.dtype != torch.int32 or counts.numel() < b * s_q * num_hb * 2):
        raise ValueError(f"counts: expected int32 with at least {b * s_q * num_hb * 2} elements, got {counts.dtype} "
                         f"with {counts.numel()}")  # fmt: skip
    return launch.run(
        _sparse_mla_decode_ws_kernel,
        (num_parts * num_hb,),
        q,
        out,
        lse,
        o_ws if o_ws is not None else out,
        lse_ws if lse_ws is not None else lse,
        attn_sink if attn_sink is not None else lse,
        kv,
        indices,
        topk_length if topk_length is not None else indices,
        kv_x,
        idx_x,
        extra_topk_length if extra_topk_length is not None else indices,
        kv.shape[0] * kv.shape[1],
        kv_x.shape[0] * kv_x.shape[1],
        kv.stride(0),
        kv_x.stride(0),
        s_q,
        h,
        topk,
        topk_x,
        n_tiles_main,
        n_tiles,
        total_units,
        units_per_part,
        n_tiles if pieces_tiles is None else pieces_tiles,
        units_per_part if pieces_tiles is None else pieces_tiles,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        indices.stride(0),
        indices.stride(1),
        idx_x.stride(0),
        idx_x.stride(1),
        softmax_scale * LOG2E,
        counts if counts is not None else indices,  # then the descriptors: the default build's parameters keep
        o_desc,  # their offsets
        w_desc,
        cut_units,
        whole_units,
        PAGE=kv.shape[1],
        PAGE_X=kv_x.shape[1],
        HAS_LEN=topk_length is not None,
        HAS_EXTRA=has_extra,
        HAS_LEN_X=has_extra and extra_topk_length is not None,
        HAS_SINK=attn_sink is not None,
        NUM_HB=num_hb,
        PIECES=pieces_tiles is not None and pieces_tiles < n_tiles,
        MERGE=counts is not None,
        SPREAD=whole_units > 0,
        num_warps=4,
        maxnreg=MAX_REGS,
    )


def compile_sm90(*, page: int = 64, page_x: int = 64, has_extra: bool = True, has_len: bool = True,
                 has_sink: bool = True, num_hb: int = 1, pieces: bool = False, merge: bool = False,
                 spread: bool = False) -> Any:  # fmt: skip
    """Compile the kernel for sm_90 without a GPU (bf16 q, as the launcher specialises it; strides multiples of 16,
    as they are in practice); returns Triton's compiled kernel (``asm``, ``metadata``: shared memory, registers)."""
    from wavemla.kernels.dense_decode_ws import build_sm90

    types = {"p_q": "*bf16", "p_out": "*bf16", "p_lse": "*fp32", "p_o_ws": "*fp16", "p_lse_ws": "*fp32",
             "p_sink": "*fp32", "p_kv": "*u8", "p_idx": "*i32", "p_len": "*i32", "p_kv_x": "*u8", "p_idx_x": "*i32",
             "p_len_x": "*i32", "qk_scale": "fp32", "p_cnt": "*i32",
             "o_desc": f"tensordesc<bf16[{BLOCK}, {BLOCK}],{smem_layout()!r}>",
             "w_desc": f"tensordesc<fp16[{BLOCK}, {BLOCK}],{smem_layout()!r}>"}  # fmt: skip
    constexprs = {"PAGE": page, "PAGE_X": page_x, "HAS_LEN": has_len, "HAS_EXTRA": has_extra, "HAS_LEN_X": has_len,
                  "HAS_SINK": has_sink, "NUM_HB": num_hb, "PIECES": pieces, "MERGE": merge,
                  "SPREAD": spread}  # fmt: skip
    return build_sm90(_sparse_mla_decode_ws_kernel, types=types, constexprs=constexprs, divisible=("stride_",),
                      max_regs=MAX_REGS)  # fmt: skip
