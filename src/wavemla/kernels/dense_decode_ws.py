"""Paged dense MLA decode on sm_90, warp-specialized (Gluon): TMA loads in one warp, two math warpgroups.

The split kernel of :mod:`wavemla.kernels.dense_decode` runs every phase of a 64-key tile in the same warps: the
copy of the next tile waits behind the math, and the math behind the copy (Nsight Compute on the H200: about 0.2
instructions per cycle per scheduler, the loop bound by the latency of its dependent phases). Triton 3.6 and 3.9
cannot split that loop into producer and consumer warps for sm_90 by themselves (docs/dense-decode.md). Gluon, the
layout-explicit language that ships with Triton, can: this module writes the same work list as that kernel, with
the same output, lse and workspace partials (so the same scheduler and combine run around it), as three partitions
of one program:

- **load** (one warp): per segment, q's 64 rows ``[64, 576]`` as nine TMA boxes of ``[64, 64]`` into shared memory;
  per tile, the tile's 64 key rows as nine boxes into one of two stage buffers, as soon as both math warpgroups
  have released that buffer. A block id outside the cache loads rows past the end of the descriptor, which TMA
  fills with zeros (and the math masks).
- **math** (two warpgroups, ``HALF`` 0 and 1): each scores 32 of the tile's 64 keys, ``S_half = q·K_halfᵀ`` (nine
  wgmma of K = 64, N = 32, from shared memory); the row maxima of the two halves cross through shared memory (one
  mbarrier both arrive at), each computes P for its keys against the common maximum and stores it for the other;
  ``O[:, 256·HALF : 256·HALF + 256] += P·V`` for its half of the value columns takes its own P from registers and
  the other's from shared memory (a second mbarrier). The row sums stay per warpgroup and are added once per
  segment, in the same order in both. Shared memory: q 72 KB, two 72 KB stages, the two P halves (8 KB) and the
  maxima: 231,008 of the 232,448 bytes a block may use. (Computing the whole ``S`` in each warpgroup, with no
  exchange, was 5-10% slower on the H200 where the MMAs bind: docs/dense-decode.md.)
  A segment's result leaves by TMA: each warpgroup writes its 256 normalized columns into four of q's boxes (free
  once the row sums have crossed) and copies them out, then releases q to the load warp: a finished request's
  output, or a cut request's partial, in q's dtype (a weighted mean of value rows of that dtype, so within its
  range), into the workspace slot the combine merges.

Keys past a request's length in its last tile are real rows of its last page (any bits, NaN included): their scores
are masked, and each warpgroup zeroes those rows of its value columns in shared memory before ``P·V``, since
``0 · NaN`` is NaN.

Scope: bf16/fp16 row caches with d_qk 576, 64-key tiles within pages (page a multiple of 64), query rows
``s_q·h`` a multiple of 64 (one program per 64 of them), contiguous q and cache. :func:`applies` says whether a
launch qualifies (the planner prices it from that); everything else runs the Triton kernel.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import triton
import triton.language as tl

from wavemla import config
from wavemla.kernels import launch


def _triton_at_least(major: int, minor: int) -> bool:
    """Whether the installed Triton is ``major.minor`` or newer (from ``triton.__version__``)."""
    parts = triton.__version__.split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (major, minor)
    except (IndexError, ValueError):  # pragma: no cover - an unparsable version string
        return False


# Gluon ships with Triton 3.5 and newer, but the API this kernel is written against (warp_specialize taking a list of
# (function, arguments) pairs) is that of 3.6 and newer; it was compiled with 3.6 and 3.9. Older: the Triton kernel.
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    HAVE_GLUON = (
        _triton_at_least(3, 6)
        and hasattr(gl, "warp_specialize")
        and next(iter(inspect.signature(gl.warp_specialize).parameters), "") == "functions_and_args"
    )
    # a barrier of the calling warps (a partition's own warps inside warp_specialize): renamed in Triton 3.9
    _warps_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier
    # a TMA load of one box into shared memory, completing on an mbarrier: renamed in Triton 3.9
    _tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
    # a TMA store of one box from shared memory: renamed in Triton 3.9
    _tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
except ImportError:  # pragma: no cover - depends on the Triton build
    HAVE_GLUON = False

D_QK = 576
D_V = 512
BLOCK = 64  # query rows per program, keys per tile, dims per TMA box
CHUNKS = D_QK // BLOCK  # 9 boxes per row block
STAGES = 2  # key tiles in flight (q, 2 stages, the P halves and maxima: 231,008 of the 232,448 bytes a block has)
LOAD_REGS = 24  # registers per thread of the load warp's warpgroup
MATH_REGS = 240  # the second math warpgroup's; the first (the default partition) gets what the compiler leaves
MAX_REGS = 168  # per thread at launch: 12 warps (3 warpgroups) x 32 x 168 <= 65,536
_BLOCK = tl.constexpr(BLOCK)  # the same, as kernel constants
_CHUNKS = tl.constexpr(CHUNKS)
_STAGES = tl.constexpr(STAGES)
_D_V = tl.constexpr(D_V)
_MATH_REGS = tl.constexpr(MATH_REGS)
_LOAD_REGS = tl.constexpr(LOAD_REGS)


def applies(*, arch: int, is_fp8: bool, d_qk: int, dtype: str, page: int, rows: int, block_h: int,
            block_n: int) -> bool:  # fmt: skip
    """Whether a launch of these static shapes runs this kernel (the planner prices it from this): Gluon present, the
    knob ``WAVEMLA_DENSE_WS`` not ``off``, sm_90, bf16/fp16 rows of width 576, pages of a multiple of 64 keys, query
    rows ``s_q·h`` a multiple of 64, and the 64x64 tile (64 query rows, 64 keys). P meets V in one dot here, so bf16
    rows under ``WAVEMLA_DENSE_P=split`` (two dots) run the Triton kernel. ``dtype``: ``"bf16"`` or ``"fp16"``."""
    return (
        HAVE_GLUON
        and config.get("WAVEMLA_DENSE_WS") != "off"
        and not (dtype == "bf16" and config.get("WAVEMLA_DENSE_P") == "split")
        and arch == 90
        and not is_fp8
        and d_qk == D_QK
        and dtype in ("bf16", "fp16")
        and page % BLOCK == 0
        and rows % BLOCK == 0
        and block_h == BLOCK
        and block_n == BLOCK
    )


def applies_to(*, is_fp8: bool, block_h: int, block_n: int, arch: int, q: torch.Tensor, kv: torch.Tensor) -> bool:
    """:func:`applies` for the shapes and dtype of a launch's tensors (whether or not the tensors qualify)."""
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(q.dtype, str(q.dtype))
    return applies(
        arch=arch,
        is_fp8=is_fp8,
        d_qk=q.shape[3],
        dtype=dtype,
        page=kv.shape[1],
        rows=q.shape[1] * q.shape[2],
        block_h=block_h,
        block_n=block_n,
    )


def supported(*, is_fp8: bool, block_h: int, block_n: int, arch: int, q: torch.Tensor, kv: torch.Tensor) -> bool:
    """:func:`applies_to` for a launch's tensors, which must also be contiguous (TMA views q and the cache as 2-D row
    arrays of 1,152 bytes a row), 16-byte aligned and not empty (a descriptor has at least one row: a cache of no
    blocks, which the Triton kernel reads as all keys excluded, runs there)."""
    return (
        applies_to(is_fp8=is_fp8, block_h=block_h, block_n=block_n, arch=arch, q=q, kv=kv)
        and q.shape[0] > 0
        and kv.shape[0] > 0
        and q.is_contiguous()
        and kv.is_contiguous()
        and q.data_ptr() % 16 == 0
        and kv.data_ptr() % 16 == 0
    )


if HAVE_GLUON:

    @gluon.jit
    def _segment(p_seqlens, p_sched, i_part, i_b, max_len):
        """Request ``i_b``'s share of part ``i_part``: (its keys, the first tile, the end of the part's range in units,
        the request's units, the end of the range's tiles that hold keys), the same ranges as the Triton kernel's
        loop. A request with no key has one unit and no tile."""
        r_begin = gl.load(p_sched + i_part * 4 + 0)
        t_begin = gl.load(p_sched + i_part * 4 + 1)
        r_end = gl.load(p_sched + i_part * 4 + 2)
        t_end = gl.load(p_sched + i_part * 4 + 3)
        n_keys = gl.minimum(gl.maximum(gl.load(p_seqlens + i_b), 0), max_len)
        n_kv = gl.cdiv(n_keys, _BLOCK)
        n_units = gl.maximum(n_kv, 1)
        t_lo = gl.where(i_b == r_begin, t_begin, 0)
        t_hi = gl.where(i_b == r_end, t_end, n_units)
        t_stop = gl.minimum(t_hi, n_kv)
        return n_keys, t_lo, t_hi, n_units, t_stop

    @gluon.jit
    def _requests(p_sched, i_part):
        """First and last request of part ``i_part``."""
        r_begin = gl.load(p_sched + i_part * 4 + 0)
        r_end = gl.load(p_sched + i_part * 4 + 2)
        t_end = gl.load(p_sched + i_part * 4 + 3)
        r_last = gl.where(t_end > 0, r_end, r_end - 1)
        return r_begin, r_last

    @gluon.jit
    def _load_partition(q_desc, kv_desc, q_smem, kv_smem, q_ready, q_empty, kv_ready, kv_empty, p_bt, p_seqlens,
                        p_sched, num_blocks, max_len, stride_bt, M, PAGE: gl.constexpr, NUM_RB: gl.constexpr,
                        N_CHUNKS: gl.constexpr, N_STAGES: gl.constexpr):  # fmt: skip
        i_pid = gl.program_id(0)
        i_rb = i_pid % NUM_RB
        i_part = i_pid // NUM_RB
        r_begin, r_last = _requests(p_sched, i_part)
        box_bytes: gl.constexpr = _BLOCK * _BLOCK * 2
        i_seg = 0
        i_it = 0
        for i_b in range(r_begin, r_last + 1):
            _, t_lo, _, _, t_stop = _segment(p_seqlens, p_sched, i_part, i_b, max_len)
            # q of this segment, once both math warpgroups are done with the previous one
            mbarrier.wait(q_empty, (i_seg & 1) ^ 1)
            mbarrier.expect(q_ready, N_CHUNKS * box_bytes)
            row_q = i_b * M + i_rb * _BLOCK
            for c in gl.static_range(N_CHUNKS):
                _tma_load(q_desc, [row_q, c * _BLOCK], q_ready, q_smem.index(c))
            i_seg += 1  # noqa: SIM113 (a loop-carried counter in a kernel)
            p_bt_row = p_bt + i_b.to(gl.int64) * stride_bt  # type: ignore[attr-defined]  # a kernel's range() index is a tensor
            for i_tile in range(t_lo, t_stop):
                i_st = i_it % N_STAGES
                mbarrier.wait(kv_empty.index(i_st), ((i_it // N_STAGES) & 1) ^ 1)
                key0 = i_tile * _BLOCK
                bid = gl.load(p_bt_row + key0 // PAGE)
                ok = (bid >= 0) & (bid < num_blocks)
                # an invalid block reads past the descriptor's last row: zeros, never cache bytes
                row = gl.where(ok, bid * PAGE + key0 % PAGE, num_blocks * PAGE)
                bar = kv_ready.index(i_st)
                mbarrier.expect(bar, N_CHUNKS * box_bytes)
                for c in gl.static_range(N_CHUNKS):
                    _tma_load(kv_desc, [row, c * _BLOCK], bar, kv_smem.index(i_st * N_CHUNKS + c))
                i_it += 1

    @gluon.jit
    def _zero_tail(kv_smem, v_base, n_in, o_zr, z_layout: gl.constexpr, dtype: gl.constexpr):
        """Rows ``n_in ..`` of a tile hold the bits of the page past the length (NaN included, and 0 · NaN is NaN):
        zero them in this warpgroup's four value boxes before its P·V reads them."""
        if n_in < _BLOCK:
            m_z = (o_zr < n_in)[:, None]
            for j in gl.static_range(4):
                v_buf = kv_smem.index(v_base + j)
                v_buf.store(gl.where(m_z, v_buf.load(z_layout), 0.0).to(dtype))
            fence_async_shared()
            _warps_barrier()

    @gluon.jit
    def _exchange(x_bar, i_x):
        """Both math warpgroups meet at exchange ``i_x``: this warpgroup's shared-memory writes before it (every
        thread's, through the warpgroup barrier) are visible to the other one after it."""
        _warps_barrier()
        mbarrier.arrive(x_bar, count=1)
        mbarrier.wait(x_bar, i_x & 1)

    @gluon.jit
    def _tile_softmax(b_s, b_mx, b_l, p_smem, x_smem, x_bar, p_bar, i_x, HALF: gl.constexpr):
        """One tile's online softmax across the two math warpgroups (this one holds ``b_s``, the scaled and masked
        scores of its 32 keys): the row maxima cross through ``x_smem`` at exchange ``i_x``, and this warpgroup's P
        goes to ``p_smem`` for the other (arriving at ``p_bar``). Returns (P in ``p_smem``'s dtype, the
        accumulator's rescale factor, the new row maxima and sums, the next exchange)."""
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK // 2, 16])  # fmt: skip
        rows_l: gl.constexpr = gl.SliceLayout(1, s_layout)
        x_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        x_smem.index((i_x & 1) * 2 + HALF).store(gl.convert_layout(gl.max(b_s, 1), x_layout))
        _exchange(x_bar, i_x)
        b_x = x_smem.index((i_x & 1) * 2 + 1 - HALF).load(x_layout)
        i_next = i_x + 1
        b_mx_new = gl.maximum(b_mx, gl.maximum(gl.max(b_s, 1), gl.convert_layout(b_x, rows_l)))
        b_mx_safe = gl.where(b_mx_new == float("-inf"), 0.0, b_mx_new)
        b_p = gl.exp2(b_s - b_mx_safe[:, None])
        b_alpha = gl.exp2(b_mx - b_mx_safe)
        b_l = b_l * b_alpha + gl.sum(b_p, 1)
        b_p16 = b_p.to(p_smem.dtype)
        p_smem.index(HALF).store(b_p16)
        fence_async_shared()
        _warps_barrier()
        mbarrier.arrive(p_bar, count=1)
        return b_p16, b_alpha, b_mx_new, b_l, i_next

    @gluon.jit
    def _tile_pv(b_p16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, v_base, p_smem, p_bar, i_it, HALF: gl.constexpr):
        """``O += P·V`` for this warpgroup's four value boxes from ``v_base``: the accumulator rescaled by
        ``b_alpha`` plus its own keys' P from registers, then the other warpgroup's keys' P from ``p_smem`` once
        ``p_bar`` says it is there (tile ``i_it``). Returns the four accumulators, their MMAs complete."""
        HK: gl.constexpr = _BLOCK // 2
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK, 16])  # fmt: skip
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        orow_l: gl.constexpr = gl.SliceLayout(1, o_layout)
        k_mine: gl.constexpr = HALF * HK
        k_other: gl.constexpr = (1 - HALF) * HK
        b_a = gl.convert_layout(b_alpha, orow_l)[:, None]
        b_pa = gl.convert_layout(b_p16, p_layout)
        acc0 = warpgroup_mma(b_pa, kv_smem.index(v_base + 0).slice(k_mine, HK, dim=0), acc0 * b_a, is_async=True)
        acc1 = warpgroup_mma(b_pa, kv_smem.index(v_base + 1).slice(k_mine, HK, dim=0), acc1 * b_a, is_async=True)
        acc2 = warpgroup_mma(b_pa, kv_smem.index(v_base + 2).slice(k_mine, HK, dim=0), acc2 * b_a, is_async=True)
        acc3 = warpgroup_mma(b_pa, kv_smem.index(v_base + 3).slice(k_mine, HK, dim=0), acc3 * b_a, is_async=True)
        # the other warpgroup's P for its keys
        mbarrier.wait(p_bar, i_it & 1)
        p_o = p_smem.index(1 - HALF)
        acc0 = warpgroup_mma(p_o, kv_smem.index(v_base + 0).slice(k_other, HK, dim=0), acc0, is_async=True)
        acc1 = warpgroup_mma(p_o, kv_smem.index(v_base + 1).slice(k_other, HK, dim=0), acc1, is_async=True)
        acc2 = warpgroup_mma(p_o, kv_smem.index(v_base + 2).slice(k_other, HK, dim=0), acc2, is_async=True)
        acc3 = warpgroup_mma(p_o, kv_smem.index(v_base + 3).slice(k_other, HK, dim=0), acc3, is_async=True)
        return warpgroup_mma_wait(num_outstanding=0, deps=(acc0, acc1, acc2, acc3))

    @gluon.jit
    def _row_sums(b_l, x_smem, x_bar, i_x, HALF: gl.constexpr):
        """The two warpgroups' row sums of a segment, added in the same order in both (exchange ``i_x``); returns
        (the sums, the next exchange)."""
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK // 2, 16])  # fmt: skip
        rows_l: gl.constexpr = gl.SliceLayout(1, s_layout)
        x_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        x_smem.index((i_x & 1) * 2 + HALF).store(gl.convert_layout(b_l, x_layout))
        _exchange(x_bar, i_x)
        b_l_other = gl.convert_layout(x_smem.index((i_x & 1) * 2 + 1 - HALF).load(x_layout), rows_l)
        i_next = i_x + 1
        b_l = b_l + b_l_other if HALF == 0 else b_l_other + b_l
        return b_l, i_next

    @gluon.jit
    def _math_partition(o_desc, w_desc, q_smem, kv_smem, p_smem, x_smem, q_ready, q_empty, kv_ready, kv_empty, x_bar,
                        p_bar, p_lse, p_lse_ws, p_bt, p_seqlens, p_sched, num_blocks, max_len, stride_bt,
                        S_Q, H, M, qk_scale, CAUSAL: gl.constexpr,
                        PAGE: gl.constexpr, NUM_RB: gl.constexpr, N_CHUNKS: gl.constexpr, N_STAGES: gl.constexpr,
                        HALF: gl.constexpr):  # fmt: skip
        """The math of one of the two warpgroups, ``QKᵀ`` split between them: this one scores keys ``32·HALF ..`` of
        each tile (nine wgmma of N = 32), the row maxima cross through shared memory (``x_smem``), each computes P for
        its keys, and P·V for its value columns takes its own P from registers and the other's from ``p_smem``.
        The row sums stay per warpgroup and meet once per segment. ``x_smem`` holds two exchanges' rows (by the
        exchange's parity), so that a write never overtakes the other warpgroup's read of the exchange before."""
        HK: gl.constexpr = _BLOCK // 2  # keys per warpgroup
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HK, 16])  # fmt: skip
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK, 16])  # fmt: skip
        gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        rows_l: gl.constexpr = gl.SliceLayout(1, s_layout)
        cols_l: gl.constexpr = gl.SliceLayout(0, s_layout)
        orow_l: gl.constexpr = gl.SliceLayout(1, o_layout)
        z_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        gl.BlockedLayout([1], [32], [4], [0])
        dtype: gl.constexpr = kv_smem.dtype
        V_CHUNKS: gl.constexpr = 4
        v0: gl.constexpr = HALF * V_CHUNKS
        k_mine: gl.constexpr = HALF * HK
        (1 - HALF) * HK

        i_pid = gl.program_id(0)
        i_rb = i_pid % NUM_RB
        i_part = i_pid // NUM_RB
        r_begin, r_last = _requests(p_sched, i_part)
        o_m = i_rb * _BLOCK + gl.arange(0, _BLOCK, layout=rows_l)
        o_s = o_m // H
        o_n = gl.arange(0, HK, layout=cols_l)
        o_zr = gl.arange(0, _BLOCK, layout=gl.SliceLayout(1, z_layout))
        i_seg = 0
        i_it = 0
        i_x = 0
        for i_b in range(r_begin, r_last + 1):
            n_keys, t_lo, t_hi, n_units, t_stop = _segment(p_seqlens, p_sched, i_part, i_b, max_len)
            b_lim = gl.zeros([_BLOCK], gl.int32, layout=rows_l) + n_keys
            if CAUSAL:
                b_lim = b_lim - (S_Q - 1 - o_s)
            b_mx = gl.full([_BLOCK], float("-inf"), gl.float32, layout=rows_l)
            b_l = gl.zeros([_BLOCK], gl.float32, layout=rows_l)
            acc0 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
            acc1 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
            acc2 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
            acc3 = gl.zeros([_BLOCK, _BLOCK], gl.float32, layout=o_layout)
            p_bt_row = p_bt + i_b.to(gl.int64) * stride_bt  # type: ignore[attr-defined]  # a kernel's range() index is a tensor
            mbarrier.wait(q_ready, i_seg & 1)
            for i_tile in range(t_lo, t_stop):
                i_st = i_it % N_STAGES
                mbarrier.wait(kv_ready.index(i_st), (i_it // N_STAGES) & 1)
                k_base = i_st * N_CHUNKS
                b_s = gl.zeros([_BLOCK, HK], gl.float32, layout=s_layout)
                for c in gl.static_range(N_CHUNKS):
                    b_k = kv_smem.index(k_base + c).slice(k_mine, HK, dim=0).permute((1, 0))
                    b_s = warpgroup_mma(q_smem.index(c), b_k, b_s, use_acc=c > 0, is_async=True)
                b_s = warpgroup_mma_wait(num_outstanding=0, deps=(b_s,))
                key0 = i_tile * _BLOCK
                bid = gl.load(p_bt_row + key0 // PAGE)
                ok = (bid >= 0) & (bid < num_blocks)
                m_s = ((key0 + k_mine + o_n)[None, :] < b_lim[:, None]) & ok
                b_s = gl.where(m_s, b_s * qk_scale, float("-inf"))
                # the tile's row maxima and P: this warpgroup's keys, then the other's through shared memory
                b_p16, b_alpha, b_mx, b_l, i_x = _tile_softmax(b_s, b_mx, b_l, p_smem, x_smem, x_bar, p_bar, i_x, HALF)
                v_base = k_base + v0
                _zero_tail(kv_smem, v_base, n_keys - key0, o_zr, z_layout, dtype)
                acc0, acc1, acc2, acc3 = _tile_pv(b_p16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, v_base, p_smem,
                                                  p_bar, i_it, HALF)  # fmt: skip
                mbarrier.arrive(kv_empty.index(i_st), count=1)
                i_it += 1
            whole = (t_lo == 0) & (t_hi == n_units)
            i_seg += 1  # noqa: SIM113 (a loop-carried counter in a kernel)

            b_l, i_x = _row_sums(b_l, x_smem, x_bar, i_x, HALF)
            m_seen = b_l != 0.0  # a NaN score makes l NaN, which stays NaN (the reference's), not 'no key seen'
            b_inv = gl.convert_layout(1.0 / gl.where(m_seen, b_l, 1.0), orow_l)
            b_lse2 = gl.where(m_seen, b_mx + gl.log2(gl.where(m_seen, b_l, 1.0)), float("-inf"))
            m_rows = b_lse2 != float("-inf")
            # The segment's 64 rows x 256 columns, normalized, go out by TMA from q's shared memory, which both
            # warpgroups are done with (their last QKᵀ came before the row-sum exchange) and which the load warp
            # refills only once both have arrived at q_empty, after the copies have read it: a finished request's
            # output (rows that saw no key: 0), or a cut request's partial in q's dtype (a weighted mean of value
            # rows, so within their range) into its workspace slot.
            b_sc = gl.convert_layout(gl.where(m_rows | (not whole), 1.0, 0.0), orow_l)[:, None] * b_inv[:, None]
            q_smem.index(V_CHUNKS * HALF + 0).store((acc0 * b_sc).to(dtype))
            q_smem.index(V_CHUNKS * HALF + 1).store((acc1 * b_sc).to(dtype))
            q_smem.index(V_CHUNKS * HALF + 2).store((acc2 * b_sc).to(dtype))
            q_smem.index(V_CHUNKS * HALF + 3).store((acc3 * b_sc).to(dtype))
            fence_async_shared()
            _warps_barrier()
            if whole:
                row_o = i_b * M + i_rb * _BLOCK
                for c in gl.static_range(V_CHUNKS):
                    _tma_store(o_desc, [row_o, HALF * 256 + c * _BLOCK], q_smem.index(V_CHUNKS * HALF + c))
            else:
                row_w = (i_b + i_part) * M + i_rb * _BLOCK
                for c in gl.static_range(V_CHUNKS):
                    _tma_store(w_desc, [row_w, HALF * 256 + c * _BLOCK], q_smem.index(V_CHUNKS * HALF + c))
            tma.store_wait(0)
            mbarrier.arrive(q_empty, count=1)
            if HALF == 0:
                if whole:
                    b_lse = gl.where(m_rows, b_lse2 * 0.6931471805599453, float("inf"))
                    gl.store(p_lse + i_b.to(gl.int64) * M + o_m, b_lse)  # type: ignore[attr-defined]  # as above
                else:
                    gl.store(p_lse_ws + (i_b + i_part).to(gl.int64) * M + o_m, b_lse2)

    @gluon.jit
    def _dense_mla_decode_ws_kernel(q_desc, kv_desc, o_desc, w_desc, p_lse, p_lse_ws, p_bt, p_seqlens, p_sched,
                                    num_blocks, max_len, stride_bt, S_Q, H, M, qk_scale, CAUSAL: gl.constexpr,
                                    PAGE: gl.constexpr, NUM_RB: gl.constexpr):  # fmt: skip
        N_CHUNKS: gl.constexpr = _CHUNKS
        N_STAGES: gl.constexpr = _STAGES
        q_smem = gl.allocate_shared_memory(q_desc.dtype, [N_CHUNKS, _BLOCK, _BLOCK], q_desc.layout)
        kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [N_STAGES * N_CHUNKS, _BLOCK, _BLOCK], kv_desc.layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        kv_ready = gl.allocate_shared_memory(gl.int64, [N_STAGES, 1], mbarrier.MBarrierLayout())
        kv_empty = gl.allocate_shared_memory(gl.int64, [N_STAGES, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_ready, count=1)
        mbarrier.init(q_empty, count=2)
        for i in gl.static_range(N_STAGES):
            mbarrier.init(kv_ready.index(i), count=1)
            mbarrier.init(kv_empty.index(i), count=2)
        fence_async_shared()
        p_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)
        p_smem = gl.allocate_shared_memory(kv_desc.dtype, [2, _BLOCK, _BLOCK // 2], p_layout)
        x_smem = gl.allocate_shared_memory(gl.float32, [4, _BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        x_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        p_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(x_bar, count=2)
        mbarrier.init(p_bar, count=2)
        fence_async_shared()
        # fmt: off
        gl.warp_specialize(
            [
                (_math_partition, (o_desc, w_desc, q_smem, kv_smem, p_smem, x_smem, q_ready, q_empty, kv_ready,
                                   kv_empty, x_bar, p_bar, p_lse, p_lse_ws, p_bt, p_seqlens, p_sched, num_blocks,
                                   max_len, stride_bt, S_Q, H, M, qk_scale, CAUSAL,
                                   PAGE, NUM_RB, N_CHUNKS, N_STAGES, 0)),
                (_math_partition, (o_desc, w_desc, q_smem, kv_smem, p_smem, x_smem, q_ready, q_empty, kv_ready,
                                   kv_empty, x_bar, p_bar, p_lse, p_lse_ws, p_bt, p_seqlens, p_sched, num_blocks,
                                   max_len, stride_bt, S_Q, H, M, qk_scale, CAUSAL,
                                   PAGE, NUM_RB, N_CHUNKS, N_STAGES, 1)),
                (_load_partition, (q_desc, kv_desc, q_smem, kv_smem, q_ready, q_empty, kv_ready, kv_empty, p_bt,
                                   p_seqlens, p_sched, num_blocks, max_len, stride_bt, M, PAGE, NUM_RB, N_CHUNKS,
                                   N_STAGES)),
            ],
            [4, 1],
            [_MATH_REGS, _LOAD_REGS],
        )
        # fmt: on


def smem_layout() -> Any:
    """The shared-memory layout of every ``[64, 64]`` box of q and the cache (128-byte swizzle, 16-bit elements)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)


def dense_decode_split_ws(
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
    causal: bool,
    softmax_scale: float,
    num_parts: int,
) -> Any:
    """Launch the warp-specialized split kernel over ``num_parts`` parts (arguments as
    :func:`wavemla.kernels.dense_decode.dense_decode_split`, which calls this where :func:`supported`; the partials
    ``o_ws [b + num_parts, s_q·h, 512]`` are of q's dtype here, contiguous)."""
    from wavemla.kernels.dense_decode import LOG2E

    b, s_q, h, d_qk = q.shape
    m = s_q * h
    shape_ok = o_ws.dim() == 3 and o_ws.shape[0] >= b + num_parts and tuple(o_ws.shape[1:]) == (m, D_V)
    if o_ws.dtype != q.dtype or not shape_ok or not o_ws.is_contiguous():
        raise ValueError(
            f"o_ws: expected a contiguous {q.dtype} tensor [>= {b + num_parts}, {m}, {D_V}] (partials leave by TMA "
            f"in q's dtype), got {o_ws.dtype} {list(o_ws.shape)} with strides {o_ws.stride()}"
        )
    num_blocks, page = kv.shape[0], kv.shape[1]
    layout = smem_layout()
    q2 = q.view(b * m, d_qk)
    kv2 = kv.view(num_blocks * page, d_qk)
    q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [BLOCK, BLOCK], layout)
    kv_desc = TensorDescriptor(kv2, list(kv2.shape), list(kv2.stride()), [BLOCK, BLOCK], layout)
    if not out.is_contiguous():
        raise ValueError(f"out: expected a contiguous [b, s_q, h, 512] tensor (its rows go out by TMA), got strides "
                         f"{out.stride()}")  # fmt: skip
    out2 = out.view(b * m, out.shape[-1])  # requests' rows follow each other
    o_desc = TensorDescriptor(out2, list(out2.shape), list(out2.stride()), [BLOCK, BLOCK], layout)
    ws2 = o_ws.view(o_ws.shape[0] * m, D_V)  # slot s, query row r at row s·m + r
    w_desc = TensorDescriptor(ws2, list(ws2.shape), list(ws2.stride()), [BLOCK, BLOCK], layout)
    num_rb = m // BLOCK
    return launch.run(
        _dense_mla_decode_ws_kernel,
        (num_parts * num_rb,),
        q_desc,
        kv_desc,
        o_desc,
        w_desc,
        lse,
        lse_ws,
        block_table,
        cache_seqlens,
        sched,
        num_blocks,
        block_table.shape[1] * page,
        block_table.stride(0),
        s_q,
        h,
        m,
        softmax_scale * LOG2E,
        CAUSAL=causal and s_q > 1,
        PAGE=page,
        NUM_RB=num_rb,
        num_warps=4,
        maxnreg=MAX_REGS,
    )


def build_sm90(fn: Any, *, types: dict[str, str], constexprs: dict[str, Any], divisible: tuple[str, ...] = (),
               max_regs: int) -> Any:  # fmt: skip
    """Compile the Gluon kernel ``fn`` for sm_90 without a GPU, with 4 warps at launch and ``max_regs`` registers a
    thread: arguments named in ``types`` get that type (pointers, ``*..``, also 16-byte aligned), those in
    ``constexprs`` that value, every other one ``i32`` (a multiple of 16 where its name starts with one of
    ``divisible``, as the launcher specialises such values). Returns Triton's compiled kernel (``asm``,
    ``metadata``: shared memory, registers)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    signature: dict[str, str] = {}
    consts: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, name in enumerate(fn.arg_names):
        if name in types:
            signature[name] = types[name]
            if types[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in constexprs:
            signature[name] = "constexpr"
            consts[(i,)] = constexprs[name]
        else:
            signature[name] = "i32"
            if divisible and name.startswith(divisible):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "maxnreg": max_regs})  # fmt: skip


def compile_sm90(dtype: torch.dtype = torch.bfloat16, *, page: int = 64, causal: bool = False,
                 num_rb: int = 1) -> Any:  # fmt: skip
    """Compile the kernel for sm_90 without a GPU (as the launcher specialises it); returns Triton's compiled
    kernel (``asm``, ``metadata``: shared memory, registers)."""
    ty = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    desc = f"tensordesc<{ty}[{BLOCK}, {BLOCK}],{smem_layout()!r}>"
    types = {"q_desc": desc, "kv_desc": desc, "o_desc": desc, "w_desc": desc, "p_lse": "*fp32",
             "p_lse_ws": "*fp32", "p_bt": "*i32", "p_seqlens": "*i32", "p_sched": "*i32",
             "qk_scale": "fp32"}  # fmt: skip
    return build_sm90(_dense_mla_decode_ws_kernel, types=types,
                      constexprs={"CAUSAL": causal, "PAGE": page, "NUM_RB": num_rb}, max_regs=MAX_REGS)  # fmt: skip
