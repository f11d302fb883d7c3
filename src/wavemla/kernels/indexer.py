"""DeepSeek-V4 lightning indexer: fused index scores + exact, deterministic top-k (CSA layers).

Semantics are those of :mod:`wavemla.reference.indexer` (visibility, ties to the lower row, ascending row order, −1
padding, short rows taken without scoring). The work is five kernels (after a memset of the histograms) whose grids
depend only on static shapes and the ``max_n_comp`` bound, so the whole call is CUDA-graph capturable (no host sync,
no data-dependent host branch):

1. ``_indexer_score_kernel`` — grid (row chunks, B, token groups). Rows are gathered through the block table, one
   K tile ``[BLOCK_N, 128]`` feeds ``tl.dot`` with the q tile of ``S_BLOCK`` tokens ``[S_BLOCK·H, 128]``; ReLU,
   the weighted head sum and (FP8) the row scale follow. Each score is stored as an order-preserving int32 *key*;
   the program then re-reads its keys (from L2) and adds the histogram of their top 11 bits into a per-token
   histogram (integer atomics: exact and order-free, hence deterministic).
2. ``_indexer_hist_kernel`` PASS=1 / PASS=2 — grid (chunks, T). From the histograms so far each program derives the
   key prefix the k-th largest key must have, then histograms the next 11 (then 10) bits of the keys that match it.
3. ``_indexer_count_kernel`` — the three histograms give the exact k-th key ``thr`` and ``need_eq`` (how many keys
   equal to ``thr`` are taken); each chunk counts its keys ``> thr`` and ``== thr``.
4. ``_indexer_compact_kernel`` — each chunk starts from the counts of the chunks before it and writes its selected
   rows (all ``> thr``, and ``== thr`` while the global tie rank is ``< need_eq``) in row order, as global slots.
   Chunk 0 also writes the −1 padding and ``topk_length``.

Radix select on keys finds the k-th value exactly, so the selected set never depends on the launch configuration.
FP8 rows are decoded by bit assembly (no float8 type: none exists on sm_80/86): the e4m3 sign/exponent/mantissa bits
placed in an fp16 word give ``code · 2^-8`` exactly, subnormals included; the scale (× 2^8) multiplies the score.

Example::

    idx, length = lightning_indexer(q_idx, weights, index_k_cache, block_table, n_comp, 512)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

INDEX_DIM = 128
FP8_ROW_BYTES = INDEX_DIM + 4
SUPPORTED_HEADS = (16, 32, 64, 128)
# Key histograms: bits 31..21, 20..10 and 9..0 of the order-preserving key, one pass each.
HIST_BINS = 2048
HIST_PASSES = 3
MAX_TOKENS = 65535  # grid dimension 1 of the select kernels is B·S
_Q_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# ----------------------------------------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class IndexerConfig:
    """Launch choices of one indexer call; every field depends on static shapes only."""

    block_n: int  # K rows per tile of the score kernel
    s_block: int  # query tokens sharing one K tile (one gather, S_BLOCK·H dot rows)
    num_warps: int
    num_stages: int
    rows_per_program: int  # rows one score program walks (a multiple of block_n)
    chunk: int  # keys one select program walks
    block_sel: int  # keys per select-loop iteration
    reasons: tuple[str, ...]


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def choose_config(b: int, s_q: int, heads: int, max_n_comp: int, *, select_chunk: int | None = None) -> IndexerConfig:
    """Pick tiles for a call from static shapes (pure; no device query).

    ``select_chunk`` forces the keys per select program (a power of two ≥ 16); a value that cannot be honoured raises
    ValueError naming it.
    """
    reasons: list[str] = []
    s_block = 2 if s_q >= 2 and heads <= 64 else 1
    reasons.append(
        f"s_block={s_block}: "
        + ("two tokens share each gathered K tile (128 dot rows)" if s_block == 2 else "one token per K tile")
    )
    block_n = 64
    reasons.append("block_n=64: K tile 64x128 keeps 3 pipeline stages under 100 KB of shared memory on sm_86/89/120")
    rows_m = s_block * heads
    num_warps = 4 if rows_m <= 64 else 8
    reasons.append(f"num_warps={num_warps}: fp32 logits tile {rows_m}x{block_n} at <= 64 registers per thread")
    num_stages = 3
    groups = -(-s_q // s_block)
    target = -(-(b * groups * max(max_n_comp, 1)) // 1024)
    rows_per_program = min(4096, max(block_n, _next_pow2(target)))
    reasons.append(
        f"rows_per_program={rows_per_program}: about 1024 score programs (several waves of resident programs on a "
        "132-SM part), each amortising its q-tile load and histogram flush over many rows"
    )
    tokens = b * s_q
    if select_chunk is None:
        chunk = min(65536, max(4096, _next_pow2(-(-(tokens * max(max_n_comp, 1)) // 512))))
        reasons.append(f"chunk={chunk}: about 512 select programs, >= 4096 keys each to amortise histogram reads")
    else:
        if select_chunk < 16 or select_chunk & (select_chunk - 1):
            raise ValueError(f"select_chunk: expected a power of two >= 16, got {select_chunk}")
        chunk = select_chunk
        reasons.append(f"chunk={chunk}: forced by select_chunk")
    block_sel = min(1024, chunk)
    return IndexerConfig(
        block_n=block_n,
        s_block=s_block,
        num_warps=num_warps,
        num_stages=num_stages,
        rows_per_program=rows_per_program,
        chunk=chunk,
        block_sel=block_sel,
        reasons=tuple(reasons),
    )


@dataclass(frozen=True)
class WorkspaceLayout:
    """Element offsets (int32) of the indexer workspace regions."""

    n_pad: int  # keys per token (chunks · chunk)
    n_chunks: int
    keys: int  # [T, n_pad]
    hist: int  # [T, 3, HIST_BINS]  (zeroed every call)
    counts: int  # [T, n_chunks, 2]
    thresh: int  # [T, 2]
    numel: int


def workspace_layout(b: int, s_q: int, max_n_comp: int, config: IndexerConfig) -> WorkspaceLayout:
    tokens = b * s_q
    n_chunks = max(1, -(-max_n_comp // config.chunk))
    n_pad = n_chunks * config.chunk
    keys = 0
    hist = keys + tokens * n_pad
    counts = hist + tokens * HIST_PASSES * HIST_BINS
    thresh = counts + tokens * n_chunks * 2
    numel = thresh + tokens * 2
    return WorkspaceLayout(n_pad, n_chunks, keys, hist, counts, thresh, numel)


def indexer_workspace_numel(b: int, s_q: int, heads: int, max_n_comp: int, *, select_chunk: int | None = None) -> int:
    """int32 elements the ``workspace=`` argument of :func:`lightning_indexer` must hold for these static shapes."""
    config = choose_config(b, s_q, heads, max_n_comp, select_chunk=select_chunk)
    return workspace_layout(b, s_q, max_n_comp, config).numel


# ----------------------------------------------------------------------------------------------------------- kernels
@triton.jit
def _visible_rows(p_ncomp, i_b, o_s, stride_nb, stride_ns, max_n, S_Q: tl.constexpr, PER_TOKEN: tl.constexpr):
    """Visible rows of query tokens ``o_s`` (scalar or vector) of request ``i_b``; 0 for ``o_s >= S_Q``."""
    o_safe = tl.minimum(o_s, S_Q - 1)
    if PER_TOKEN:
        b_n = tl.load(p_ncomp + i_b * stride_nb + o_safe * stride_ns)
    else:
        # the last query token sees all n_comp rows, each earlier token one fewer
        b_n = tl.load(p_ncomp + i_b * stride_nb + o_safe * 0) - (S_Q - 1 - o_safe)
    b_n = tl.minimum(tl.maximum(b_n, 0), max_n)
    return tl.where(o_s < S_Q, b_n, 0)


@triton.jit
def _e4m3_to_f16(b_code):
    """e4m3 codes in the low byte of int32 -> fp16 ``code × 2^-8`` (exact: fp16's exponent bias is 8 above e4m3's)."""
    b_bits = ((b_code & 0x80) << 8) | ((b_code & 0x7F) << 7)
    return b_bits.to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _score_key(b_score):
    """fp32 score -> int32 key with the same order (signed compare); NaN ranks as −inf and −0 as +0."""
    b_score = tl.where(b_score == b_score, b_score, float("-inf"))
    b_score = tl.where(b_score == 0.0, 0.0, b_score)
    b_bits = b_score.to(tl.int32, bitcast=True)
    return b_bits ^ ((b_bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _resolve_digit(p_hist, rem, NB: tl.constexpr):
    """Digit of the ``rem``-th largest key in a histogram, and the rank left inside that digit's bucket."""
    o_bin = tl.arange(0, NB)
    b_h = tl.load(p_hist + o_bin)
    b_ge = tl.sum(b_h, 0) - tl.cumsum(b_h, 0) + b_h  # keys with digit >= bin; non-increasing
    i_d = tl.sum((b_ge >= rem).to(tl.int32), 0) - 1
    n_above = tl.sum(tl.where(o_bin > i_d, b_h, 0), 0)
    return i_d, rem - n_above


@triton.jit
def _indexer_score_kernel(
    p_q,
    p_w,
    p_k,
    p_bt,
    p_ncomp,
    p_keys,
    p_hist,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_wb,
    stride_ws,
    stride_kb,
    stride_kp,
    stride_btb,
    stride_nb,
    stride_ns,
    stride_keys,
    max_n,
    topk,
    rows_per_program,
    S_Q: tl.constexpr,
    S_BLOCK: tl.constexpr,
    H: tl.constexpr,
    D: tl.constexpr,
    PAGE: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    FP8: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_HIST: tl.constexpr,
    NB: tl.constexpr,
):
    i_n = tl.program_id(0)
    i_b = tl.program_id(1)
    i_g = tl.program_id(2)
    o_s = i_g * S_BLOCK + tl.arange(0, S_BLOCK)
    b_nvis = _visible_rows(p_ncomp, i_b, o_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    m_active = b_nvis > topk  # tokens with <= topk rows take them all, unscored
    b_nvis = tl.where(m_active, b_nvis, 0)
    n_hi = tl.max(b_nvis, 0)
    row_lo = i_n * rows_per_program
    if row_lo < n_hi:
        row_hi = tl.minimum(row_lo + rows_per_program, n_hi)
        o_m = tl.arange(0, S_BLOCK * H)  # dot row m = token (m // H) of the group, head m % H
        o_ms = i_g * S_BLOCK + o_m // H
        m_m = o_ms < S_Q
        p_qm = p_q + i_b * stride_qb + o_ms[:, None] * stride_qs + (o_m % H)[:, None] * stride_qh
        b_w = tl.load(p_w + i_b * stride_wb + o_ms * stride_ws + o_m % H, mask=m_m, other=0.0)
        o_tok = (i_b * S_Q + o_s).to(tl.int64)
        if FP8:
            # FP8 rows are read as 33 int32 words (rows sit at 4-byte, not 16-byte, alignment). Byte j of word w is
            # dimension 4w + j, so byte plane j dots with q's columns j, j+4, ... (4 dots of depth D/4).
            o_w = tl.arange(0, D // 4)
            b_q0 = tl.load(p_qm + (4 * o_w)[None, :], mask=m_m[:, None], other=0.0)
            b_q1 = tl.load(p_qm + (4 * o_w + 1)[None, :], mask=m_m[:, None], other=0.0)
            b_q2 = tl.load(p_qm + (4 * o_w + 2)[None, :], mask=m_m[:, None], other=0.0)
            b_q3 = tl.load(p_qm + (4 * o_w + 3)[None, :], mask=m_m[:, None], other=0.0)
        else:
            o_d = tl.arange(0, D)
            b_q = tl.load(p_qm + o_d[None, :], mask=m_m[:, None], other=0.0)
        for i_row in range(row_lo, row_hi, BLOCK_N):
            o_n = i_row + tl.arange(0, BLOCK_N)
            m_n = o_n < row_hi
            b_blk = tl.load(p_bt + i_b * stride_btb + o_n // PAGE, mask=m_n, other=0)
            p_row = p_k + b_blk.to(tl.int64) * stride_kb + (o_n % PAGE) * stride_kp
            if FP8:
                b_word = tl.load(p_row[:, None] + o_w[None, :], mask=m_n[:, None], other=0)  # [BLOCK_N, D/4]
                b_k0 = _e4m3_to_f16(b_word).to(b_q0.dtype)
                b_k1 = _e4m3_to_f16(b_word >> 8).to(b_q0.dtype)
                b_k2 = _e4m3_to_f16(b_word >> 16).to(b_q0.dtype)
                b_k3 = _e4m3_to_f16(b_word >> 24).to(b_q0.dtype)
                b_logit = tl.dot(b_q0, tl.trans(b_k0), input_precision=DOT_PRECISION)
                b_logit = tl.dot(b_q1, tl.trans(b_k1), b_logit, input_precision=DOT_PRECISION)
                b_logit = tl.dot(b_q2, tl.trans(b_k2), b_logit, input_precision=DOT_PRECISION)
                b_logit = tl.dot(b_q3, tl.trans(b_k3), b_logit, input_precision=DOT_PRECISION)
                # the row's fp32 scale is word D/4; scale > 0 commutes with ReLU, applied after the head sum
                b_scale = tl.load(p_row + D // 4, mask=m_n, other=0).to(tl.float32, bitcast=True) * 256.0
            else:
                b_k = tl.load(p_row[:, None] + o_d[None, :], mask=m_n[:, None], other=0.0)
                b_logit = tl.dot(b_q, tl.trans(b_k), input_precision=DOT_PRECISION)
            # ReLU that keeps NaN (a plain max returns 0 on GPUs): a NaN row scores NaN and so ranks as -inf
            b_logit = tl.maximum(b_logit, 0.0, propagate_nan=tl.PropagateNan.ALL) * b_w[:, None]
            b_score = tl.sum(tl.reshape(b_logit, [S_BLOCK, H, BLOCK_N]), axis=1)  # [S_BLOCK, BLOCK_N]
            if FP8:
                b_score = b_score * b_scale[None, :]  # × scale · 2^8 undoes the decode's 2^-8 (exact)
            b_key = _score_key(b_score)
            m_key = m_active[:, None] & (o_n[None, :] < b_nvis[:, None])
            tl.store(p_keys + (o_tok * stride_keys)[:, None] + o_n[None, :], b_key, mask=m_key)
        # Histogram pass 0 over this program's keys, read back from L2 in blocks of BLOCK_HIST: a histogram call
        # costs O(NB) shared-memory work whatever its input size, too much to pay per BLOCK_N-row tile.
        tl.debug_barrier()  # the keys stored above by other threads of this program must be visible
        for i_sl in tl.static_range(S_BLOCK):
            n_s = tl.sum(tl.where(tl.arange(0, S_BLOCK) == i_sl, b_nvis, 0), 0)  # 0 when the token is inactive
            row_end = tl.minimum(row_hi, n_s)
            i_t = i_b * S_Q + i_g * S_BLOCK + i_sl
            b_hist = tl.zeros([NB], dtype=tl.int32)
            for i_row in range(row_lo, row_end, BLOCK_HIST):
                o_n = i_row + tl.arange(0, BLOCK_HIST)
                m_n = o_n < row_end
                b_key = tl.load(p_keys + i_t.to(tl.int64) * stride_keys + o_n, mask=m_n, other=0)
                b_hist += tl.histogram((b_key >> 21) + NB // 2, NB, mask=m_n)
            tl.atomic_add(p_hist + i_t.to(tl.int64) * (3 * NB) + tl.arange(0, NB), b_hist, mask=b_hist > 0)


@triton.jit
def _indexer_hist_kernel(
    p_keys,
    p_hist,
    p_ncomp,
    stride_nb,
    stride_ns,
    stride_keys,
    max_n,
    topk,
    chunk,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    PASS: tl.constexpr,
    NB: tl.constexpr,
    BLOCK_SEL: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_t = tl.program_id(1)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    row_lo = i_c * chunk
    if (n_vis > topk) & (row_lo < n_vis):
        p_h = p_hist + i_t.to(tl.int64) * (3 * NB)
        i_d, rem = _resolve_digit(p_h, topk, NB)
        prefix = i_d - NB // 2
        if PASS == 2:
            i_d, rem = _resolve_digit(p_h + NB, rem, NB)
            prefix = prefix * NB + i_d
        row_hi = tl.minimum(row_lo + chunk, n_vis)
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        b_hist = tl.zeros([NB], dtype=tl.int32)
        for i_row in range(row_lo, row_hi, BLOCK_SEL):
            o_n = i_row + tl.arange(0, BLOCK_SEL)
            m_n = o_n < row_hi
            b_key = tl.load(p_row_keys + o_n, mask=m_n, other=0)
            if PASS == 1:
                m_match = m_n & ((b_key >> 21) == prefix)
                b_digit = (b_key >> 10) & (NB - 1)
            else:
                m_match = m_n & ((b_key >> 10) == prefix)
                b_digit = b_key & 1023
            b_hist += tl.histogram(b_digit, NB, mask=m_match)
        tl.atomic_add(p_h + PASS * NB + tl.arange(0, NB), b_hist, mask=b_hist > 0)


@triton.jit
def _indexer_count_kernel(
    p_keys,
    p_hist,
    p_ncomp,
    p_counts,
    p_thresh,
    stride_nb,
    stride_ns,
    stride_keys,
    max_n,
    topk,
    chunk,
    n_chunks,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    NB: tl.constexpr,
    BLOCK_SEL: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_t = tl.program_id(1)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    row_lo = i_c * chunk
    if (n_vis > topk) & (row_lo < n_vis):
        p_h = p_hist + i_t.to(tl.int64) * (3 * NB)
        i_d0, rem = _resolve_digit(p_h, topk, NB)
        i_d1, rem = _resolve_digit(p_h + NB, rem, NB)
        i_d2, rem = _resolve_digit(p_h + 2 * NB, rem, NB)
        thr = ((i_d0 - NB // 2) * NB + i_d1) * 1024 + i_d2  # the k-th largest key, exactly
        row_hi = tl.minimum(row_lo + chunk, n_vis)
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        b_gt = tl.zeros([BLOCK_SEL], dtype=tl.int32)
        b_eq = tl.zeros([BLOCK_SEL], dtype=tl.int32)
        for i_row in range(row_lo, row_hi, BLOCK_SEL):
            o_n = i_row + tl.arange(0, BLOCK_SEL)
            m_n = o_n < row_hi
            b_key = tl.load(p_row_keys + o_n, mask=m_n, other=0)
            b_gt += (m_n & (b_key > thr)).to(tl.int32)
            b_eq += (m_n & (b_key == thr)).to(tl.int32)
        p_cnt = p_counts + (i_t.to(tl.int64) * n_chunks + i_c) * 2
        tl.store(p_cnt, tl.sum(b_gt, 0))
        tl.store(p_cnt + 1, tl.sum(b_eq, 0))
        if i_c == 0:
            tl.store(p_thresh + i_t * 2, thr)
            tl.store(p_thresh + i_t * 2 + 1, rem)  # keys equal to thr that are taken


@triton.jit
def _indexer_compact_kernel(
    p_keys,
    p_bt,
    p_ncomp,
    p_counts,
    p_thresh,
    p_idx,
    p_len,
    stride_btb,
    stride_nb,
    stride_ns,
    stride_keys,
    stride_ib,
    stride_is,
    stride_lb,
    stride_ls,
    max_n,
    topk,
    chunk,
    n_chunks,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_SEL: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_t = tl.program_id(1)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    length = tl.minimum(n_vis, topk)
    row_lo = i_c * chunk
    row_hi = tl.minimum(row_lo + chunk, n_vis)
    p_out = p_idx + i_b.to(tl.int64) * stride_ib + i_s * stride_is
    p_bt_row = p_bt + i_b.to(tl.int64) * stride_btb
    if row_lo < n_vis:
        if n_vis > topk:
            thr = tl.load(p_thresh + i_t * 2)
            need_eq = tl.load(p_thresh + i_t * 2 + 1)
            p_cnt = p_counts + i_t.to(tl.int64) * n_chunks * 2
            b_gt = tl.zeros([BLOCK_C], dtype=tl.int32)
            b_eq = tl.zeros([BLOCK_C], dtype=tl.int32)
            for i_c0 in range(0, i_c, BLOCK_C):
                o_c = i_c0 + tl.arange(0, BLOCK_C)
                m_c = o_c < i_c
                b_gt += tl.load(p_cnt + o_c * 2, mask=m_c, other=0)
                b_eq += tl.load(p_cnt + o_c * 2 + 1, mask=m_c, other=0)
            eq_seen = tl.sum(b_eq, 0)
            base = tl.sum(b_gt, 0) + tl.minimum(eq_seen, need_eq)
            for i_row in range(row_lo, row_hi, BLOCK_SEL):
                o_n = i_row + tl.arange(0, BLOCK_SEL)
                m_n = o_n < row_hi
                b_key = tl.load(p_keys + i_t.to(tl.int64) * stride_keys + o_n, mask=m_n, other=0)
                m_eq = m_n & (b_key == thr)
                b_eq_rank = eq_seen + tl.cumsum(m_eq.to(tl.int32), 0) - 1
                m_sel = (m_n & (b_key > thr)) | (m_eq & (b_eq_rank < need_eq))  # ties: lowest rows first
                b_sel = m_sel.to(tl.int32)
                o_pos = base + tl.cumsum(b_sel, 0) - 1
                b_blk = tl.load(p_bt_row + o_n // PAGE, mask=m_sel, other=0)
                tl.store(p_out + o_pos, b_blk * PAGE + o_n % PAGE, mask=m_sel)
                base += tl.sum(b_sel, 0)
                eq_seen += tl.sum(m_eq.to(tl.int32), 0)
        else:
            for i_row in range(row_lo, row_hi, BLOCK_SEL):
                o_n = i_row + tl.arange(0, BLOCK_SEL)
                m_n = o_n < row_hi
                b_blk = tl.load(p_bt_row + o_n // PAGE, mask=m_n, other=0)
                tl.store(p_out + o_n, b_blk * PAGE + o_n % PAGE, mask=m_n)
    if i_c == 0:
        for i_k in range(0, topk, BLOCK_SEL):
            o_k = i_k + tl.arange(0, BLOCK_SEL)
            tl.store(p_out + o_k, tl.full([BLOCK_SEL], -1, tl.int32), mask=(o_k >= length) & (o_k < topk))
        tl.store(p_len + i_b * stride_lb + i_s * stride_ls, length)


# ---------------------------------------------------------------------------------------------------------- launcher
def _interpreted() -> bool:
    """True when this module's kernels were built by the Triton interpreter (CPU tensors only then)."""
    return not isinstance(_indexer_score_kernel, triton.runtime.JITFunction)


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor of shape {tuple(x.shape)} with strides {tuple(x.stride())} on {x.device}"
    text = repr(x)
    return f"{type(x).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _require_tensor(
    name: str, x: object, dtypes: tuple[torch.dtype, ...], dims: int, device: torch.device | None
) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {_describe(x)}")
    if x.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise ValueError(f"{name}: expected dtype {want}, got {_describe(x)}")
    if x.dim() != dims:
        raise ValueError(f"{name}: expected {dims} dimensions, got {_describe(x)}")
    if device is not None and x.device != device:
        raise ValueError(f"{name}: expected a tensor on {device} (the device of q_idx), got {_describe(x)}")
    if x.numel() > 0 and x.dim() > 0 and x.stride(-1) != 1 and x.shape[-1] > 1:
        raise ValueError(f"{name}: expected a unit stride in the last dimension, got {_describe(x)}")
    return x


@dataclass(frozen=True)
class _Call:
    b: int
    s_q: int
    heads: int
    page: int
    fp8: bool
    topk: int
    max_n: int
    per_token: bool


def _validate(
    q_idx: object,
    weights: object,
    index_k_cache: object,
    block_table: object,
    n_comp: object,
    topk: object,
    max_n_comp: object,
) -> _Call:
    if not isinstance(q_idx, torch.Tensor):
        raise ValueError(f"q_idx: expected a torch.Tensor [b, s_q, h, {INDEX_DIM}], got {_describe(q_idx)}")
    device = q_idx.device
    if device.type == "cuda":
        if _interpreted():
            raise ValueError(f"q_idx: the Triton interpreter is active, expected CPU tensors, got {_describe(q_idx)}")
    elif device.type == "cpu":
        if not _interpreted():
            raise ValueError(
                f"q_idx: expected a CUDA tensor (CPU runs need the Triton interpreter), got {_describe(q_idx)}"
            )
    else:
        raise ValueError(f"q_idx: expected a CUDA tensor, got {_describe(q_idx)}")
    _require_tensor("q_idx", q_idx, _Q_DTYPES, 4, None)
    b, s_q, heads, dim = q_idx.shape
    if heads not in SUPPORTED_HEADS or dim != INDEX_DIM:
        raise ValueError(
            f"q_idx: expected shape [b, s_q, h, {INDEX_DIM}] with h in {SUPPORTED_HEADS}, got {_describe(q_idx)}"
        )
    if b < 1 or s_q < 1:
        raise ValueError(f"q_idx: expected b >= 1 and s_q >= 1, got {_describe(q_idx)}")
    if b * s_q > MAX_TOKENS:
        raise ValueError(f"q_idx: expected b * s_q <= {MAX_TOKENS}, got {_describe(q_idx)}")
    weights = _require_tensor("weights", weights, (torch.float32,), 3, device)
    if tuple(weights.shape) != (b, s_q, heads):
        raise ValueError(f"weights: expected shape {(b, s_q, heads)} fp32, got {_describe(weights)}")
    if not isinstance(index_k_cache, torch.Tensor):
        raise ValueError(f"index_k_cache: expected a torch.Tensor, got {_describe(index_k_cache)}")
    fp8 = index_k_cache.dtype == torch.uint8
    if fp8:
        _require_tensor("index_k_cache", index_k_cache, (torch.uint8,), 3, device)
        if index_k_cache.shape[2] != FP8_ROW_BYTES:
            raise ValueError(
                f"index_k_cache: expected FP8 rows [num_blocks, page, {FP8_ROW_BYTES}] uint8, "
                f"got {_describe(index_k_cache)}"
            )
        if index_k_cache.stride(0) % 4 or index_k_cache.stride(1) % 4 or index_k_cache.data_ptr() % 4:
            raise ValueError(
                "index_k_cache: FP8 rows are read as int32 words; expected byte strides and a start address that are "
                f"multiples of 4, got {_describe(index_k_cache)}"
            )
    else:
        _require_tensor("index_k_cache", index_k_cache, (q_idx.dtype,), 3, device)
        if index_k_cache.shape[2] != INDEX_DIM:
            raise ValueError(
                f"index_k_cache: expected rows [num_blocks, page, {INDEX_DIM}] {q_idx.dtype} (the dtype of q_idx) or "
                f"FP8 rows [num_blocks, page, {FP8_ROW_BYTES}] uint8, got {_describe(index_k_cache)}"
            )
    num_blocks, page = index_k_cache.shape[0], index_k_cache.shape[1]
    if page < 1 or num_blocks < 1:
        raise ValueError(
            f"index_k_cache: expected at least one block of at least one row, got {_describe(index_k_cache)}"
        )
    if num_blocks * page >= 2**31:
        raise ValueError(
            f"index_k_cache: global slots must fit int32 (num_blocks * page < 2^31), got {_describe(index_k_cache)}"
        )
    block_table = _require_tensor("block_table", block_table, (torch.int32,), 2, device)
    if block_table.shape[0] != b or block_table.shape[1] < 1:
        raise ValueError(f"block_table: expected shape [{b}, max_blocks >= 1] int32, got {_describe(block_table)}")
    if not isinstance(n_comp, torch.Tensor) or n_comp.dtype != torch.int32 or n_comp.device != device:
        raise ValueError(f"n_comp: expected an int32 tensor [b] or [b, s_q] on {device}, got {_describe(n_comp)}")
    if tuple(n_comp.shape) not in ((b,), (b, s_q)):
        raise ValueError(f"n_comp: expected shape [{b}] or [{b}, {s_q}], got {_describe(n_comp)}")
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise ValueError(f"topk: expected a positive int, got {_describe(topk)}")
    capacity = block_table.shape[1] * page
    if max_n_comp is None:
        max_n = capacity
    elif isinstance(max_n_comp, bool) or not isinstance(max_n_comp, int) or not 0 <= max_n_comp <= capacity:
        raise ValueError(
            f"max_n_comp: expected an int in [0, max_blocks * page = {capacity}], got {_describe(max_n_comp)}"
        )
    else:
        max_n = max_n_comp
    return _Call(b, s_q, heads, page, fp8, topk, max_n, n_comp.dim() == 2)


def _check_out(
    out: object, b: int, s_q: int, topk: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor] | None:
    if out is None:
        return None
    if not isinstance(out, tuple) or len(out) != 2:
        raise ValueError(f"out: expected a tuple (indices, topk_length), got {_describe(out)}")
    idx, length = out
    _require_tensor("out[0] (indices)", idx, (torch.int32,), 3, device)
    _require_tensor("out[1] (topk_length)", length, (torch.int32,), 2, device)
    if tuple(idx.shape) != (b, s_q, topk):
        raise ValueError(f"out[0] (indices): expected shape {(b, s_q, topk)} int32, got {_describe(idx)}")
    if tuple(length.shape) != (b, s_q):
        raise ValueError(f"out[1] (topk_length): expected shape {(b, s_q)} int32, got {_describe(length)}")
    return idx, length


def _workspace(workspace: object, numel: int, device: torch.device) -> torch.Tensor:
    if workspace is None:
        return torch.empty(numel, dtype=torch.int32, device=device)
    workspace = _require_tensor("workspace", workspace, (torch.int32,), 1, device)
    if workspace.numel() < numel:
        raise ValueError(
            f"workspace: expected at least {numel} int32 elements (indexer_workspace_numel), got {_describe(workspace)}"
        )
    return workspace


def _launch_scores(
    call: _Call,
    cfg: IndexerConfig,
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    keys: torch.Tensor,
    hist: torch.Tensor,
    n_pad: int,
    topk_gate: int,
) -> None:
    """Score kernel: keys of every visible row of tokens with more than ``topk_gate`` rows, plus histogram pass 0."""
    hist.zero_()
    k_words = index_k_cache.view(torch.int32) if call.fp8 else index_k_cache  # FP8: [num_blocks, page, 33] words
    grid = (triton.cdiv(max(call.max_n, 1), cfg.rows_per_program), call.b, triton.cdiv(call.s_q, cfg.s_block))
    _indexer_score_kernel[grid](
        p_q=q_idx,
        p_w=weights,
        p_k=k_words,
        p_bt=block_table,
        p_ncomp=n_comp,
        p_keys=keys,
        p_hist=hist,
        stride_qb=q_idx.stride(0),
        stride_qs=q_idx.stride(1),
        stride_qh=q_idx.stride(2),
        stride_wb=weights.stride(0),
        stride_ws=weights.stride(1),
        stride_kb=k_words.stride(0),
        stride_kp=k_words.stride(1),
        stride_btb=block_table.stride(0),
        stride_nb=n_comp.stride(0),
        stride_ns=n_comp.stride(1) if call.per_token else 0,
        stride_keys=n_pad,
        max_n=call.max_n,
        topk=topk_gate,
        rows_per_program=cfg.rows_per_program,
        S_Q=call.s_q,
        S_BLOCK=cfg.s_block,
        H=call.heads,
        D=INDEX_DIM,
        PAGE=call.page,
        PER_TOKEN=call.per_token,
        FP8=call.fp8,
        DOT_PRECISION="ieee" if q_idx.dtype == torch.float32 else "tf32",
        BLOCK_N=cfg.block_n,
        BLOCK_HIST=cfg.block_sel,
        NB=HIST_BINS,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )


def lightning_indexer(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    topk: int,
    *,
    max_n_comp: int | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    workspace: torch.Tensor | None = None,
    select_chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k compressed rows per query token (global cache slots), exactly as :func:`lightning_indexer_ref`.

    Args:
        q_idx: ``[b, s_q, h, 128]`` fp16/bf16 (fp32 for the interpreter lane) indexer queries, h ∈ {16, 32, 64, 128}
            (64 for DeepSeek-V4); unit stride in the last dimension.
        weights: ``[b, s_q, h]`` fp32 head weights, already including ``128^-0.5 · h^-0.5``.
        index_k_cache: ``[num_blocks, page, 128]`` rows of q_idx's dtype, or ``[num_blocks, page, 132]`` uint8 FP8 rows
            (128 e4m3 codes + one little-endian fp32 scale); any page size; unit stride in the last dimension.
        block_table: ``[b, max_blocks]`` int32; entries for pages holding visible rows must be valid block ids.
        n_comp: ``[b]`` int32 (token ``s`` sees ``n_comp[b] - (s_q - 1 - s)`` rows) or ``[b, s_q]`` int32 (explicit).
        topk: rows to keep per token (512 V4-Flash, 1024 V4-Pro).
        max_n_comp: static upper bound on visible rows (default ``max_blocks · page``); sizes the grids and the
            workspace, and visible counts above it are clamped to it. With ``max_n_comp <= topk`` no scoring runs.
        out: optional preallocated ``(indices [b, s_q, topk] int32, topk_length [b, s_q] int32)``.
        workspace: optional int32 buffer of at least :func:`indexer_workspace_numel` elements (else allocated).
        select_chunk: keys per select program (power of two ≥ 16; default chosen from the shapes).

    Returns:
        ``(indices, topk_length)``: ``indices [b, s_q, topk]`` int32 global slots
        ``block_table[b, i // page] · page + i % page`` of the selected rows in ascending row order, −1 padded;
        ``topk_length [b, s_q]`` int32 ``= min(topk, n_vis)``. Reduce it to the sparse decode's per-request ``[b]``
        with :func:`wavemla.reference.indexer.topk_length_per_request`.

    Example::

        idx, length = lightning_indexer(q_idx, weights, index_k_cache, block_table, n_comp, 512, max_n_comp=65536)
    """
    call = _validate(q_idx, weights, index_k_cache, block_table, n_comp, topk, max_n_comp)
    device = q_idx.device
    checked = _check_out(out, call.b, call.s_q, call.topk, device)
    if checked is None:
        indices = torch.empty((call.b, call.s_q, call.topk), dtype=torch.int32, device=device)
        lengths = torch.empty((call.b, call.s_q), dtype=torch.int32, device=device)
    else:
        indices, lengths = checked
    cfg = choose_config(call.b, call.s_q, call.heads, call.max_n, select_chunk=select_chunk)
    layout = workspace_layout(call.b, call.s_q, call.max_n, cfg)
    ws = _workspace(workspace, layout.numel, device)
    tokens = call.b * call.s_q
    keys = ws[layout.keys : layout.hist]
    hist = ws[layout.hist : layout.counts]
    counts = ws[layout.counts : layout.thresh]
    thresh = ws[layout.thresh : layout.numel]
    common = {
        "p_ncomp": n_comp,
        "stride_nb": n_comp.stride(0),
        "stride_ns": n_comp.stride(1) if call.per_token else 0,
        "max_n": call.max_n,
        "topk": call.topk,
        "chunk": cfg.chunk,
        "S_Q": call.s_q,
        "PER_TOKEN": call.per_token,
    }
    select_grid = (layout.n_chunks, tokens)
    if call.max_n > call.topk:  # static: otherwise no token can have more than topk rows
        _launch_scores(
            call, cfg, q_idx, weights, index_k_cache, block_table, n_comp, keys, hist, layout.n_pad, call.topk
        )
        for pass_ in (1, 2):
            _indexer_hist_kernel[select_grid](
                p_keys=keys,
                p_hist=hist,
                stride_keys=layout.n_pad,
                PASS=pass_,
                NB=HIST_BINS,
                BLOCK_SEL=cfg.block_sel,
                num_warps=4,
                **common,
            )
        _indexer_count_kernel[select_grid](
            p_keys=keys,
            p_hist=hist,
            p_counts=counts,
            p_thresh=thresh,
            stride_keys=layout.n_pad,
            n_chunks=layout.n_chunks,
            NB=HIST_BINS,
            BLOCK_SEL=cfg.block_sel,
            num_warps=4,
            **common,
        )
    _indexer_compact_kernel[select_grid](
        p_keys=keys,
        p_bt=block_table,
        p_counts=counts,
        p_thresh=thresh,
        p_idx=indices,
        p_len=lengths,
        stride_btb=block_table.stride(0),
        stride_keys=layout.n_pad,
        stride_ib=indices.stride(0),
        stride_is=indices.stride(1),
        stride_lb=lengths.stride(0),
        stride_ls=lengths.stride(1),
        n_chunks=layout.n_chunks,
        PAGE=call.page,
        BLOCK_SEL=cfg.block_sel,
        BLOCK_C=min(1024, _next_pow2(layout.n_chunks)),
        num_warps=4,
        **common,
    )
    return indices, lengths


def indexer_scores(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    *,
    max_n_comp: int | None = None,
) -> torch.Tensor:
    """The score kernel alone: fp32 ``[b, s_q, max_n_comp]`` index scores, −inf where a token sees no row.

    Same arguments as :func:`lightning_indexer`. Scores are those the selection ranks (NaN reported as −inf, −0 as
    +0). Meant for checks and debugging; the selection path never materialises floats.

    Example::

        scores = indexer_scores(q_idx, weights, index_k_cache, block_table, n_comp)   # fp32 [b, s_q, max_n]
    """
    call = _validate(q_idx, weights, index_k_cache, block_table, n_comp, 1, max_n_comp)
    device = q_idx.device
    cfg = choose_config(call.b, call.s_q, call.heads, call.max_n)
    n_pad = max(call.max_n, 1)
    keys = torch.empty((call.b * call.s_q, n_pad), dtype=torch.int32, device=device)
    hist = torch.empty(call.b * call.s_q * HIST_PASSES * HIST_BINS, dtype=torch.int32, device=device)
    if call.max_n > 0:
        _launch_scores(call, cfg, q_idx, weights, index_k_cache, block_table, n_comp, keys, hist, n_pad, 0)
    bits = keys ^ ((keys >> 31) & 0x7FFFFFFF)  # the key map is its own inverse
    scores = bits.view(torch.float32).view(call.b, call.s_q, n_pad)[:, :, : call.max_n]
    n = n_comp.long()
    if n.dim() == 1:
        n = n[:, None] - torch.arange(call.s_q - 1, -1, -1, device=device)[None, :]
    n = n.clamp(0, call.max_n)
    rows = torch.arange(call.max_n, device=device)
    visible = rows[None, None, :] < n[:, :, None]
    return torch.where(visible, scores, torch.full_like(scores, -math.inf))


# ------------------------------------------------------------------------------------------------- compile checking
def _production_variants(heads: int, page: int) -> list[tuple[object, str, dict[str, object], int, int]]:
    """(kernel, variant, argument values, num_warps, num_stages) of a V4-Flash decode call: b=32, 256K rows, topk 512.

    Pointers are given by their Triton type; integers by value, so that the compile check specialises them the way
    the JIT launcher would (divisible by 16 or not).
    """
    b, max_n, topk = 32, 262144, 512
    blocks = max_n // page
    out: list[tuple[object, str, dict[str, object], int, int]] = []
    for fmt in ("bf16", "fp8"):
        fp8 = fmt == "fp8"
        for s_q in (1, 2):
            cfg = choose_config(b, s_q, heads, max_n)
            layout = workspace_layout(b, s_q, max_n, cfg)
            row = INDEX_DIM if not fp8 else FP8_ROW_BYTES // 4
            args: dict[str, object] = {
                "p_q": "*bf16",
                "p_w": "*fp32",
                "p_k": "*i32" if fp8 else "*bf16",
                "p_bt": "*i32",
                "p_ncomp": "*i32",
                "p_keys": "*i32",
                "p_hist": "*i32",
                "stride_qb": s_q * heads * INDEX_DIM,
                "stride_qs": heads * INDEX_DIM,
                "stride_qh": INDEX_DIM,
                "stride_wb": s_q * heads,
                "stride_ws": heads,
                "stride_kb": page * row,
                "stride_kp": row,
                "stride_btb": blocks,
                "stride_nb": 1,
                "stride_ns": 0,
                "stride_keys": layout.n_pad,
                "max_n": max_n,
                "topk": topk,
                "rows_per_program": cfg.rows_per_program,
                "S_Q": s_q,
                "S_BLOCK": cfg.s_block,
                "H": heads,
                "D": INDEX_DIM,
                "PAGE": page,
                "PER_TOKEN": False,
                "FP8": fp8,
                "DOT_PRECISION": "tf32",
                "BLOCK_N": cfg.block_n,
                "BLOCK_HIST": cfg.block_sel,
                "NB": HIST_BINS,
            }
            out.append((_indexer_score_kernel, f"{fmt} s_q={s_q}", args, cfg.num_warps, cfg.num_stages))
    cfg = choose_config(b, 1, heads, max_n)
    layout = workspace_layout(b, 1, max_n, cfg)
    select: dict[str, object] = {
        "p_keys": "*i32",
        "p_ncomp": "*i32",
        "stride_nb": 1,
        "stride_ns": 0,
        "stride_keys": layout.n_pad,
        "max_n": max_n,
        "topk": topk,
        "chunk": cfg.chunk,
        "S_Q": 1,
        "PER_TOKEN": False,
    }
    for pass_ in (1, 2):
        args = {**select, "p_hist": "*i32", "PASS": pass_, "NB": HIST_BINS, "BLOCK_SEL": cfg.block_sel}
        out.append((_indexer_hist_kernel, f"pass {pass_}", args, 4, 3))
    args = {
        **select,
        "p_hist": "*i32",
        "p_counts": "*i32",
        "p_thresh": "*i32",
        "n_chunks": layout.n_chunks,
        "NB": HIST_BINS,
        "BLOCK_SEL": cfg.block_sel,
    }
    out.append((_indexer_count_kernel, "", args, 4, 3))
    args = {
        **select,
        "p_bt": "*i32",
        "p_counts": "*i32",
        "p_thresh": "*i32",
        "p_idx": "*i32",
        "p_len": "*i32",
        "stride_btb": blocks,
        "stride_ib": topk,
        "stride_is": topk,
        "stride_lb": 1,
        "stride_ls": 1,
        "n_chunks": layout.n_chunks,
        "PAGE": page,
        "BLOCK_SEL": cfg.block_sel,
        "BLOCK_C": min(1024, _next_pow2(layout.n_chunks)),
    }
    out.append((_indexer_compact_kernel, "", args, 4, 3))
    return out


def compile_report(arch: int, *, heads: int = 64, page: int = 64) -> list[dict[str, object]]:
    """Compile every kernel this module launches for ``sm_<arch>`` (no GPU needed) and report its resources.

    The variants are those of a V4-Flash decode call (bf16 and FP8 index-K, s_q 1 and 2, page 64 by default).
    Needs JIT kernels: call it in a process where the Triton interpreter is off. Returns one dict per variant:
    kernel, variant, arch, shared (bytes of shared memory), num_warps, num_stages, pipelined (async copies found).
    """
    if _interpreted():
        raise RuntimeError("compile_report: the Triton interpreter is active; compile from a process without it")
    from triton.backends.compiler import GPUTarget

    target = GPUTarget("cuda", arch, 32)
    reports: list[dict[str, object]] = []
    for fn, variant, args, num_warps, num_stages in _production_variants(heads, page):
        assert isinstance(fn, triton.runtime.JITFunction)
        signature: dict[str, str] = {}
        constexprs: dict[str, object] = {}
        attrs: dict[tuple[int, ...], list[list[object]]] = {}
        for name in fn.arg_names:
            value = args[name]
            index = (fn.arg_names.index(name),)
            if name.isupper():
                signature[name] = "constexpr"
                constexprs[name] = value
            elif isinstance(value, str):
                signature[name] = value
                attrs[index] = [["tt.divisibility", 16]]  # torch allocations are 256-byte aligned
            else:
                assert isinstance(value, int)
                signature[name] = "i32"
                if value % 16 == 0:
                    attrs[index] = [["tt.divisibility", 16]]
        src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        compiled = triton.compile(src, target=target, options={"num_warps": num_warps, "num_stages": num_stages})
        ttgir = compiled.asm.get("ttgir", "")
        reports.append(
            {
                "kernel": fn.__name__,
                "variant": variant,
                "arch": arch,
                "shared": int(compiled.metadata.shared),
                "num_warps": int(compiled.metadata.num_warps),
                "num_stages": num_stages,
                "pipelined": "async_copy" in ttgir or "async_tma" in ttgir,
            }
        )
    return reports
