"""DeepSeek-V4 lightning indexer: fused index scores + exact, deterministic top-k (CSA layers).

Semantics are those of :mod:`wavemla.reference.indexer` (visibility, ties to the lower row, ascending row order, −1
padding, short rows taken without scoring). A score kernel is followed by one of three selects (``choose_config``
picks, ``select=`` forces); every grid depends only on static shapes and the ``max_n_comp`` bound, so the whole call
is CUDA-graph capturable (no host sync, no data-dependent host branch):

1. ``_indexer_score_kernel`` — grid (row chunks, B, token groups). Rows are gathered through the block table; a K
   tile ``[BLOCK_N, 128]`` is the M side of ``tl.dot`` against the transposed q tile of ``S_BLOCK`` tokens
   ``[128, S_BLOCK·H]``; ReLU, the weighted head sum (a reduction along each logit row) and (FP8) the row scale
   follow. Each score is stored as an order-preserving int32 *key*.

Per-token select (``select="token"``), one kernel:

2. ``_indexer_select_kernel`` — grid (T,), one program per query token. A sorted sample of the token's keys gives
   four thresholds; one walk over the keys counts those at or above each (one walker per thread, each over a
   contiguous row range), which brackets the k-th key with a short candidate list (about 1.5 topk keys); a second
   walk copies the candidates with their rows into the list in row order; radix passes over the list (8 bits each,
   from the highest bit the bracket leaves open, until the k-th key's bucket is taken whole) find ``thr`` and
   ``need_eq``; the list is written out as global slots. More walks split the bracket when the sample misled (or a
   tie at the k-th key holds more keys than the list).

Spread select (``select="spread"``, at most ``SPREAD_MAX_TOKENS`` query tokens), the per-token select's walks split
among ``parts`` programs per token, two kernels:

2. ``_indexer_spread_count_kernel`` — grid (T · parts,). Every part sorts the same sample into the same four
   thresholds, counts the keys of its own rows at or above each, and copies its keys at or above the lowest, with
   their rows, into its region of the workspace.
3. ``_indexer_spread_rank_kernel`` — grid (T,). The parts' counts bracket the k-th key; the candidates are gathered
   from the regions in row order into the token's list, ranked by the radix passes and written out as in the
   per-token select. Where the sample misled (or a region overflowed, or a tie filled the list) the program runs
   the whole per-token select itself.

Chunked select (``select="chunked"``), five kernels after a memset of the histograms, grid (chunks, T):

2. ``_indexer_hist_kernel`` PASS=0 / 1 / 2. Pass 0 histograms the top 8 key bits of its chunk in registers and adds
   the 256 bins once; passes 1 and 2 derive from the histograms so far the key prefix the k-th largest key must
   have, and the keys that match it (few) add their next 12 bits with one integer atomic each (exact and
   order-free, hence deterministic).
3. ``_indexer_count_kernel`` — the three histograms give the exact k-th key ``thr`` and ``need_eq`` (how many keys
   equal to ``thr`` are taken); each chunk counts its keys ``> thr`` and ``== thr``.
4. ``_indexer_compact_kernel`` — each chunk starts from the counts of the chunks before it and writes its selected
   rows (all ``> thr``, and ``== thr`` while the global tie rank is ``< need_eq``) in row order, as global slots.
   Chunk 0 also writes the −1 padding and ``topk_length``.

All find the k-th key exactly from integer counts, so the selected set never depends on the launch configuration
or the path: the three return the same bits.

MXFP4 rows (68 bytes: e2m1 code pairs and one e8m0 exponent per 32 values, DeepSeek-V4's indexer format in SGLang
and vLLM) are decoded exactly into e4m3 bytes or fp16 words; the logit is then four dots of 32 values, each scaled
by its block's power of two before the ReLU.

FP8 rows hold e4m3 codes and a power-of-two fp32 scale. On sm_89 and newer the codes are converted by the hardware
(``WAVEMLA_FP8_DECODE``); with float8_e4m3fn queries (DeepSeek's indexer: q quantized, its scale folded into the
head weights) the logit dot runs on the FP8 tensor cores, codes times codes being exact in fp32. On sm_80/86 the
codes are decoded by bit assembly — the e4m3 sign/exponent/mantissa bits placed in an fp16 word give
``code · 2^-8`` exactly, subnormals included — and an exact power of two on the score undoes the 2^-8.

Example::

    idx, length = lightning_indexer(q_idx, weights, index_k_cache, block_table, n_comp, 512)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from wavemla import config
from wavemla.device import fp8_decode_path
from wavemla.kernels import launch
from wavemla.kernels.fp8 import e4m3_times_256_inv_f16
from wavemla.reference.indexer import INDEX_K_LAYOUTS, MXFP4_ROW_BYTES

INDEX_DIM = 128
FP8_ROW_BYTES = INDEX_DIM + 4
SUPPORTED_HEADS = (16, 32, 64, 128)
HIST0_BINS = 256  # pass 0: key bits 31..24, histogrammed in registers
HIST_BINS = 4096  # passes 1 and 2: key bits 23..12 and 11..0, only keys matching the higher digits, in memory
MAX_TOKENS = 65535  # grid dimension 1 of the select kernels is B·S
MAX_ROWS = 2**30  # max_n_comp and topk at most: the kernels' row indices, the ends of their row ranges and their
# output positions are int32
SELECT_PATHS = ("token", "chunked", "spread")
# Per-token select (one program per query token). Its list of candidate keys and their rows fills the token's
# histogram region of the workspace, which that path leaves unused (and unzeroed).
TOKEN_LIST_CAP = 4096
assert TOKEN_LIST_CAP < 1 << 13, "_resolve_bucket packs a list's counts into 13 bits"
TOKEN_SELECT_WARPS = 16  # one walker per thread: 512 walkers, four keys (16 bytes) per load
PART_META = 8  # spread select, head of a part's region: t0..t3, then the part's counts of keys >= t0..t3
TOKEN_MIN_TOKENS = 16  # this many query tokens or more: the per-token select
TOKEN_MAX_ROWS = 65536  # visible rows up to this bound (256 KB of keys per program): the per-token select
# Spread select (a token's walks split among several programs, then one program per token ranks the candidates).
SPREAD_MAX_TOKENS = 64  # the path exists up to this many query tokens (measured slower than per-token at 128)
SPREAD_PROGRAMS = 256  # first-launch programs aimed at: about two per SM of a 132-SM part
SPREAD_MAX_PARTS = 8
SPREAD_MIN_PART_ROWS = 2048  # rows per part at least (four keys per walker): fewer parts for shorter rows
SPREAD_MIN_ROWS = 16384  # the default picks the spread select from this many rows on (when tokens allow)
WIDE_LIST_TOKENS = 32  # from this many query tokens the list's register block doubles, up to WIDE_LIST_KEYS
WIDE_LIST_KEYS = 2048
# MXFP4 rows on a GPU with the e4m3 conversion: codes decoded four at a time by byte permutes (inline PTX) rather than
# one at a time; the values are the same.
FP4_PERMUTE_DECODE = True
_Q_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn)


# ----------------------------------------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class IndexerConfig:
    """Launch choices of one indexer call; every field depends on static shapes only."""

    block_n: int  # K rows per tile of the score kernel
    s_block: int  # query tokens sharing one K tile (one gather, S_BLOCK·H dot rows)
    num_warps: int
    num_stages: int
    rows_per_program: int  # rows one score program walks (a multiple of block_n)
    chunk: int  # keys one select program walks (chunked select)
    block_sel: int  # keys per select-loop iteration (chunked select)
    select: str  # "token": a program per query token; "spread": its walks over parts; "chunked": over key chunks
    list_cap: int  # per-token select: most candidate keys a token's list holds
    sample: int  # per-token select: keys sorted to guess the k-th key
    select_warps: int  # per-token select: warps of its program (one walker per thread)
    block_list: int  # per-token select: list keys per step of its radix passes and output (the first stay in registers)
    list_whole: int  # per-token and spread selects: tokens with at most this many rows list every key (no sample)
    parts: int  # spread select: programs per token of its first launch (0: more than SPREAD_MAX_TOKENS tokens)
    part_cap: int  # spread select: candidate keys one part's region holds
    reasons: tuple[str, ...]


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def spread_parts(tokens: int, max_n_comp: int) -> tuple[int, int]:
    """``(parts, part_cap)`` of the spread select for these static shapes; ``(0, 0)`` where the path does not exist.

    Parts double from 2 while ``tokens · parts`` stays within about ``SPREAD_PROGRAMS`` programs and each part keeps
    ``SPREAD_MIN_PART_ROWS`` rows, up to ``SPREAD_MAX_PARTS``. A part's region holds its rows or the per-token list's
    ``TOKEN_LIST_CAP`` keys, whichever is fewer.
    """
    if tokens > SPREAD_MAX_TOKENS:
        return 0, 0
    parts = 2
    while (
        parts < SPREAD_MAX_PARTS
        and tokens * parts * 2 <= SPREAD_PROGRAMS
        and max_n_comp >= 2 * parts * SPREAD_MIN_PART_ROWS
    ):
        parts *= 2
    rows = -(-max(max_n_comp, 1) // parts)
    return parts, min(TOKEN_LIST_CAP, -(-rows // 16) * 16)


def wave_rows(programs_per_chunk: int, max_n: int, block_n: int, slots: int) -> int | None:
    """Rows per score program that make the score grid one wave of ``slots`` resident programs, or None where the
    ``programs_per_chunk`` query-token groups (one program each per row chunk) outnumber the slots.

    Every token group's rows are cut into ``slots // programs_per_chunk`` equal chunks of whole ``block_n`` tiles, so
    every program starts at once and they end together: a fraction of a wave would leave slots idle at the end,
    more programs would pay more starts (the q tile, the pipeline's first tiles). Measured on an H100 SXM, FP8
    page-split rows, 32K rows, 3 programs an SM: the score kernel 26.5 -> 22.7 µs at b = 8, 65.9 -> 63.3 at b = 32,
    115.0 -> 112.4 at b = 64, 213.6 -> 209.6 at b = 128 against about 1024 programs (2.59 waves), and slower with
    4096 (benchmarks/experiments/idx_rpp.py, 2026-12-07-h100-idx-rpp-51b171a.json).
    """
    if programs_per_chunk < 1 or slots < programs_per_chunk:
        return None
    chunks = slots // programs_per_chunk
    per = -(-max(max_n, 1) // chunks)
    return -(-per // block_n) * block_n


def choose_config(
    b: int,
    s_q: int,
    heads: int,
    max_n_comp: int,
    *,
    select_chunk: int | None = None,
    kv_fp8: bool = True,
    topk: int = 512,
    select: str | None = None,
    kv_fp4: bool = False,
) -> IndexerConfig:
    """Pick tiles and the select path for a call from static shapes and the index-K format (pure; no device query).

    ``select_chunk`` forces the keys per program of the chunked select (a power of two ≥ 16); ``select`` forces the
    select path (``"token"``, ``"chunked"`` or ``"spread"``). A value that cannot be honoured raises ValueError
    naming it. The workspace depends on ``select_chunk`` (chunk counts), never on ``kv_fp8``, ``topk`` or
    ``select``.
    """
    reasons: list[str] = []
    s_block = 2 if s_q >= 2 and heads <= 64 else 1
    reasons.append(
        f"s_block={s_block}: "
        + ("two tokens share each gathered K tile (128 dot rows)" if s_block == 2 else "one token per K tile")
    )
    cols = s_block * heads
    if kv_fp4:
        block_n, num_warps, num_stages = 64, 4, 4
        reasons.append(
            "block_n=64, num_warps=4, num_stages=4: MXFP4 rows (68 bytes) take four dots of 32 values, each with its "
            f"own block scale; two logit tiles {block_n}x{cols} fp32 (the sum and one block's dot) are live at once"
        )
    elif kv_fp8:
        block_n, num_warps, num_stages = 128, 4, 5
        reasons.append(
            "block_n=128, num_warps=4, num_stages=5: one warpgroup takes the 128 gathered rows as two 64-row M halves "
            "of the logit dot (faster on the H200 than two warpgroups); five stages give the gathered K tile two "
            f"16 KB buffers (the block-table load takes the first stages), within 100 KB of shared memory on "
            f"sm_86/89/120; logits {block_n}x{cols} fp32 at {block_n * cols // 128} registers per thread"
        )
    else:
        block_n, num_warps, num_stages = 64, 4, 3
        reasons.append(
            "block_n=64, num_warps=4, num_stages=3: one warpgroup, 64 gathered rows as the M side of the logit dot; "
            "16 KB bf16 K tiles (deeper pipelines measured no faster on the H200)"
        )
    groups = -(-s_q // s_block)
    target = -(-(b * groups * max(max_n_comp, 1)) // 1024)
    rows_per_program = min(4096, max(block_n, _next_pow2(target)))
    reasons.append(
        f"rows_per_program={rows_per_program}: about 1024 score programs (several waves of resident programs on a "
        "132-SM part), each amortising its q-tile load and histogram flush over many rows; on a GPU the launcher "
        "sizes them to one wave of the programs the compiled kernel keeps resident where the tokens fit one "
        "(wave_rows)"
    )
    tokens = b * s_q
    if select_chunk is None:
        chunk = min(65536, max(2048, _next_pow2(-(-(tokens * max(max_n_comp, 1)) // 2048))))
        reasons.append(
            f"chunk={chunk}: about 2048 select programs, so each walks its keys in a few latency-bound iterations"
        )
    else:
        if (
            isinstance(select_chunk, bool)
            or not isinstance(select_chunk, int)
            or select_chunk < 16
            or select_chunk & (select_chunk - 1)
        ):
            raise ValueError(f"select_chunk: expected a power of two >= 16, got {select_chunk!r}")
        chunk = select_chunk
        reasons.append(f"chunk={chunk}: forced by select_chunk")
    block_sel = min(1024, chunk)
    parts, part_cap = spread_parts(tokens, max_n_comp)
    path = _choose_select(tokens, max_n_comp, topk, select, parts, reasons)
    sample = min(2048, max(256, _next_pow2(max_n_comp // 64)))
    # A list holds about 1.5 topk keys, a few over 2 topk: a program whose list outgrows the register block loads
    # the rest again in every radix pass and in the output, and the call waits for its slowest token. With many
    # tokens one such list is likely, so the block doubles (H200, FP8 32K rows: spread rank kernel 21 -> 18 µs at
    # b = 32 and 64); with few it is unlikely and the larger block only costs (b = 1 and 8: +2 µs), as it does
    # where no token has more rows than are listed whole (no list can outgrow the block then).
    block_list = min(TOKEN_LIST_CAP, max(256, _next_pow2(2 * topk)))
    list_whole = block_list  # the tokens that skip the sample do not change with the block
    wide = tokens >= WIDE_LIST_TOKENS and block_list < WIDE_LIST_KEYS and max_n_comp > list_whole
    if wide:
        block_list *= 2
    if path == "spread":
        reasons.append(
            f"parts={parts}, part_cap={part_cap}: {tokens}x{parts} programs count and list the keys, each over "
            f"{-(-max_n_comp // parts)} rows at most; then one program per token ranks the candidates"
        )
    if path in ("token", "spread"):
        reasons.append(
            f"sample={sample}: about one sampled key per 64 rows puts the k-th key near sample rank topk / 64 (8 for "
            "top-512), enough to bracket it within a list of about 1.5 topk keys; sorting the sample stays cheap"
        )
        reasons.append(
            f"select_warps={TOKEN_SELECT_WARPS}, list_cap={TOKEN_LIST_CAP}, block_list={block_list}: "
            f"{32 * TOKEN_SELECT_WARPS} walkers (one per thread) keep 32 KB of key loads in flight; a list of about "
            f"1.5 topk keys fits the first {block_list} that stay in registers through the radix passes"
            + (
                f" (doubled at {WIDE_LIST_TOKENS} query tokens or more: the longest of their lists sets the select's "
                "time)"
                if wide
                else ""
            )
        )
    return IndexerConfig(
        block_n=block_n,
        s_block=s_block,
        num_warps=num_warps,
        num_stages=num_stages,
        rows_per_program=rows_per_program,
        chunk=chunk,
        block_sel=block_sel,
        select=path,
        list_cap=TOKEN_LIST_CAP,
        sample=sample,
        select_warps=TOKEN_SELECT_WARPS,
        block_list=block_list,
        list_whole=list_whole,
        parts=parts,
        part_cap=part_cap,
        reasons=tuple(reasons),
    )


def spread_gather(parts: int, part_cap: int) -> int:
    """Region entries per part that the spread select's rank program loads in one step (about 4096 in all)."""
    return max(16, min(_next_pow2(part_cap), 4096 // parts))


def _choose_select(tokens: int, max_n_comp: int, topk: int, select: str | None, parts: int, reasons: list[str]) -> str:
    """The select path: chunks for few tokens over very long rows; a token's walks spread over several programs
    for up to SPREAD_MAX_TOKENS tokens over long rows; otherwise one program per token."""
    if select is not None:
        if select not in SELECT_PATHS:
            raise ValueError(f"select: expected one of {SELECT_PATHS} or None, got {select!r}")
        if select in ("token", "spread") and topk > TOKEN_LIST_CAP:
            raise ValueError(f"select: {select!r} keeps at most {TOKEN_LIST_CAP} rows per token, got topk={topk}")
        if select == "spread" and parts == 0:
            raise ValueError(f"select: 'spread' takes at most {SPREAD_MAX_TOKENS} query tokens, got {tokens}")
        reasons.append(f"select={select}: forced by select")
        return select
    if topk > TOKEN_LIST_CAP // 2:
        reasons.append(f"select=chunked: topk={topk} leaves the per-token list ({TOKEN_LIST_CAP} keys) too little room")
        return "chunked"
    if tokens < TOKEN_MIN_TOKENS and max_n_comp > TOKEN_MAX_ROWS:
        reasons.append(
            f"select=chunked: {tokens} query tokens over up to {max_n_comp} rows: chunks spread each token's keys "
            "over every SM"
        )
        return "chunked"
    if parts and max_n_comp >= SPREAD_MIN_ROWS:
        reasons.append(
            f"select=spread: {tokens} query tokens over up to {max_n_comp} rows: a program per token would walk "
            f"its keys alone on {tokens} SMs; {parts} programs per token walk a part each"
        )
        return "spread"
    if tokens >= TOKEN_MIN_TOKENS:
        reasons.append(
            f"select=token: {tokens} query tokens, one program (one SM) each: one launch instead of five, each key "
            "read twice instead of five times"
        )
        return "token"
    reasons.append(
        f"select=token: max_n_comp={max_n_comp} <= {TOKEN_MAX_ROWS}: one program walks at most "
        f"{TOKEN_MAX_ROWS * 4 // 1024} KB of keys, less time than five launches"
    )
    return "token"


@dataclass(frozen=True)
class WorkspaceLayout:
    """Element offsets (int32) of the indexer workspace regions."""

    n_pad: int  # keys per token (chunks · chunk)
    n_chunks: int
    keys: int  # [T, n_pad]
    hist: int  # [T, HIST0_BINS + 2 · HIST_BINS]  (zeroed every call)
    counts: int  # [T, n_chunks, 2]
    thresh: int  # [T, 2]
    parts: int  # [T, parts, _PART_META + 2 · part_cap]  (spread select; empty past SPREAD_MAX_TOKENS tokens)
    numel: int


def workspace_layout(b: int, s_q: int, max_n_comp: int, config: IndexerConfig) -> WorkspaceLayout:
    tokens = b * s_q
    n_chunks = max(1, -(-max_n_comp // config.chunk))
    n_pad = n_chunks * config.chunk
    keys = 0
    hist = keys + tokens * n_pad
    counts = hist + tokens * (HIST0_BINS + 2 * HIST_BINS)
    thresh = counts + tokens * n_chunks * 2
    parts = thresh + tokens * 2
    numel = parts + tokens * config.parts * (PART_META + 2 * config.part_cap)
    return WorkspaceLayout(n_pad, n_chunks, keys, hist, counts, thresh, parts, numel)


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
        b_n = tl.load(p_ncomp + i_b.to(tl.int64) * stride_nb + o_safe.to(tl.int64) * stride_ns)
    else:
        # the last query token sees all n_comp rows, each earlier token one fewer (a negative count is 0 before the
        # shift: n_comp = -2^31 minus a shift would wrap around in int32)
        b_n = tl.maximum(tl.load(p_ncomp + i_b.to(tl.int64) * stride_nb + o_safe * 0), 0) - (S_Q - 1 - o_safe)
    b_n = tl.minimum(tl.maximum(b_n, 0), max_n)
    return tl.where(o_s < S_Q, b_n, 0)


@triton.jit
def _e4m3_operand(b_code, DTYPE: tl.constexpr, E4M3_CVT: tl.constexpr):
    """uint8 e4m3 codes -> dot operand of ``DTYPE``: the code itself (hardware conversion) or ``code × 2^-8``.

    Without the conversion (sm_80/86) the codes go through :func:`~wavemla.kernels.fp8.e4m3_times_256_inv_f16`; the
    caller undoes the 2^-8 with an exact power-of-two factor on the score.
    """
    if E4M3_CVT:
        b_x = b_code.to(tl.float8e4nv, bitcast=True)
        if DTYPE != tl.float8e4nv:  # noqa: SIM300 (DTYPE is the constexpr argument)
            b_x = b_x.to(DTYPE)
    else:
        b_x = e4m3_times_256_inv_f16(b_code)
        if DTYPE != tl.float16:  # noqa: SIM300
            b_x = b_x.to(DTYPE)
    return b_x


# One packed register of four e2m1 code pairs -> the e4m3 bytes of its four low codes ($0) and four high codes ($1):
# each byte's code magnitudes compressed into prmt selector nibbles, looked up in two registers of e4m3 magnitudes
# (0, 0.5, 1, 1.5 | 2, 3, 4, 6), and the sign bits (bit 3 of a code) moved to bit 7 of the byte. Byte i of either
# output depends on byte i of the input only, so the result does not depend on how the elements were packed.
_E2M1_TO_E4M3_PTX = tl.constexpr("""
{
.reg .b32 lut0, lut1, m, c, s;
mov.b32 lut0, 0x3C383000;
mov.b32 lut1, 0x4C484440;
and.b32 m, $2, 0x07070707;
shr.b32 c, m, 4;
or.b32 c, c, m;
prmt.b32 c, c, 0, 0x20;
prmt.b32 $0, lut0, lut1, c;
and.b32 s, $2, 0x08080808;
shl.b32 s, s, 4;
or.b32 $0, $0, s;
shr.b32 m, $2, 4;
and.b32 m, m, 0x07070707;
shr.b32 c, m, 4;
or.b32 c, c, m;
prmt.b32 c, c, 0, 0x20;
prmt.b32 $1, lut0, lut1, c;
and.b32 s, $2, 0x80808080;
or.b32 $1, $1, s;
}
""")


@triton.jit
def _e2m1_operand(b_byte, DTYPE: tl.constexpr, E4M3_CVT: tl.constexpr, ASM: tl.constexpr):
    """uint8 ``[N, 16]`` of packed e2m1 pairs (value 2j low nibble, 2j + 1 high) -> dot operand ``[N, 32]``, exact.

    ``ASM`` (a GPU with the e4m3 conversion): four codes at a time by byte permutes (``_E2M1_TO_E4M3_PTX``; the
    interpreter runs no PTX). Otherwise one code at a time: magnitude codes 2..7 are ``2^(m // 2 − 1) · (1 + (m % 2)
    / 2)``, the code's three bits shifted into an e4m3 or fp16 word's exponent and top mantissa bit plus the exponent
    of 0.5; codes 0 and 1 (0 and 0.5) are special. e4m3 bytes are converted by the hardware where it has the
    conversion, fp16 words everywhere else.
    """
    if ASM:
        b_lo, b_hi = tl.inline_asm_elementwise(
            _E2M1_TO_E4M3_PTX, "=r,=r,r", [b_byte], dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4
        )
        b_x = tl.interleave(b_lo, b_hi).to(tl.float8e4nv, bitcast=True)
        if DTYPE != tl.float8e4nv:  # noqa: SIM300 (DTYPE is the constexpr argument)
            b_x = b_x.to(DTYPE)
        return b_x
    b_nib = tl.interleave(b_byte & 15, b_byte >> 4).to(tl.int32)
    b_mag = b_nib & 7
    if E4M3_CVT:
        b_bits = tl.where(b_mag < 2, b_mag * 0x30, (b_mag << 2) + 0x30) | ((b_nib & 8) << 4)
        b_x = b_bits.to(tl.uint8).to(tl.float8e4nv, bitcast=True)
        if DTYPE != tl.float8e4nv:  # noqa: SIM300
            b_x = b_x.to(DTYPE)
    else:
        b_h = tl.where(b_mag < 2, b_mag * 0x3800, (b_mag << 9) + 0x3800) | ((b_nib & 8) << 12)
        b_x = b_h.to(tl.uint16).to(tl.float16, bitcast=True)
        if DTYPE != tl.float16:  # noqa: SIM300
            b_x = b_x.to(DTYPE)
    return b_x


@triton.jit
def _e8m0_scale(b_words, G: tl.constexpr):
    """fp32 ``2^(E − 127)`` of block ``G``'s exponent byte ``E`` of each int32 word (E = 255: NaN; E = 0: 2^-127)."""
    b_e = (b_words >> (8 * G)) & 255
    b_s = (tl.maximum(b_e, 1) << 23).to(tl.float32, bitcast=True)
    b_s = tl.where(b_e == 0, b_s * 0.5, b_s)
    return tl.where(b_e == 255, float("nan"), b_s)


@triton.jit
def _fp4_block_logits(
    p_k,
    o_code,
    m_n,
    b_words,
    b_qt,
    G: tl.constexpr,
    DTYPE: tl.constexpr,
    E4M3_CVT: tl.constexpr,
    PRECISION: tl.constexpr,
    SCORE_SCALE: tl.constexpr,
    ASM: tl.constexpr,
):
    """Block ``G`` of MXFP4 rows against its 32 query values: ``[BLOCK_N, cols]`` fp32, its block scale applied.

    ``SCORE_SCALE`` (the power of two bit-assembled FP8 queries are short of) is applied first, so that a product
    under fp32's normal range is rounded once."""
    o_b = tl.arange(0, 16)
    b_byte = tl.load(p_k + o_code[:, None] + (16 * G + o_b)[None, :], mask=m_n[:, None], other=0)
    b_k = _e2m1_operand(b_byte, DTYPE, E4M3_CVT, ASM)
    b_dot = tl.dot(b_k, b_qt, input_precision=PRECISION)
    if SCORE_SCALE != 1.0:
        b_dot = b_dot * SCORE_SCALE
    return b_dot * _e8m0_scale(b_words, G)[:, None]


@triton.jit
def _q_block(p_qrow, m_m, G: tl.constexpr, Q_FP8: tl.constexpr, DTYPE: tl.constexpr, E4M3_CVT: tl.constexpr):
    """Values ``[32G, 32G + 32)`` of the query rows ``p_qrow [cols, 1]`` as the transposed operand ``[32, cols]``."""
    b_q = tl.load(p_qrow + 32 * G + tl.arange(0, 32)[None, :], mask=m_m[:, None], other=0)
    if Q_FP8:  # noqa: SIM108 (a constexpr branch)
        b_q = _e4m3_operand(b_q, DTYPE, E4M3_CVT)
    else:
        b_q = b_q.to(DTYPE)
    return tl.trans(b_q)


@triton.jit
def _fp4_offsets(o_blk, o_row, o_r, D: tl.constexpr, PAGE: tl.constexpr, KV_PAGED: tl.constexpr):
    """MXFP4 rows: byte offset of each row's codes and word offset of its four exponent bytes (``o_r``: each row's
    int64 position in its page)."""
    if KV_PAGED:  # a page's 64-byte code rows, then its exponent words
        o_code = o_blk * 4 + o_r * (D // 2)
        o_scale = o_blk + PAGE * (D // 8) + o_r
    else:  # each row's 64 code bytes, then its exponent word (word D/8 of the row)
        o_code = o_row * 4
        o_scale = o_row + D // 8
    return o_code, o_scale


@triton.jit
def _store_keys(
    b_logit,
    b_w,
    b_scale,
    SCALED: tl.constexpr,
    o_n,
    m_active,
    b_nvis,
    p_keys,
    o_tok,
    stride_keys,
    S_BLOCK: tl.constexpr,
    H: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """ReLU, the weighted head sum, the rows' positive scale (``SCALED``), the key; stored for the visible rows of
    the active tokens."""
    # ReLU that keeps NaN (a plain max returns 0 on GPUs): a NaN row scores NaN and so ranks as -inf
    b_logit = tl.maximum(b_logit, 0.0, propagate_nan=tl.PropagateNan.ALL) * b_w[None, :]
    if S_BLOCK == 1:
        b_score = tl.sum(b_logit, axis=1)[:, None]  # [BLOCK_N, 1], no relayout
    else:
        b_score = tl.sum(tl.reshape(b_logit, [BLOCK_N, S_BLOCK, H]), axis=2)  # [BLOCK_N, S_BLOCK]
    if SCALED:
        b_score = b_score * b_scale[:, None]  # exact: the scales are powers of two
    b_key = _score_key(b_score)
    m_key = m_active[None, :] & (o_n[:, None] < b_nvis[None, :])
    tl.store(p_keys + (o_tok * stride_keys)[None, :] + o_n[:, None], b_key, mask=m_key)


@triton.jit
def _score_key(b_score):
    """fp32 score -> int32 key with the same order (signed compare); NaN ranks as −inf and −0 as +0."""
    b_score = tl.where(b_score == b_score, b_score, float("-inf"))
    b_score = tl.where(b_score == 0.0, 0.0, b_score)
    b_bits = b_score.to(tl.int32, bitcast=True)
    return b_bits ^ ((b_bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _resolve_digit(b_h, rem, NB: tl.constexpr):
    """Digit of the ``rem``-th largest key in a histogram ``b_h [NB]``, and the rank left inside that digit's bucket."""
    o_bin = tl.arange(0, NB)
    b_ge = tl.sum(b_h, 0) - tl.cumsum(b_h, 0) + b_h  # keys with digit >= bin; non-increasing
    i_d = tl.sum((b_ge >= rem).to(tl.int32), 0) - 1
    n_above = tl.sum(tl.where(o_bin > i_d, b_h, 0), 0)
    return i_d, rem - n_above


@triton.jit
def _resolve_bucket(b_h, rem, NB: tl.constexpr):
    """Digit of the ``rem``-th largest key in a histogram ``b_h [NB]`` of at most 256 bins and counts below 2^13
    (a list of at most ``TOKEN_LIST_CAP`` keys), the rank left inside that digit's bucket, and the bucket's count:
    one scan and one reduction.

    The bins with at least ``rem`` keys at or above them are the digit's and those below it; among them the digit's
    has the fewest such keys, and the highest bin of those that tie. So the minimum of (keys at or above, 255 − bin,
    count) packed into one int64 gives all three."""
    tl.static_assert(NB <= 256)
    b_ge = tl.cumsum(b_h, 0, reverse=True)  # keys with digit >= bin; non-increasing
    o_bin = tl.arange(0, NB)
    packed = (b_ge.to(tl.int64) << 21) | ((NB - 1 - o_bin).to(tl.int64) << 13) | b_h.to(tl.int64)
    best = tl.min(tl.where(b_ge >= rem, packed, 2**63 - 1), 0)
    n_d = (best & 8191).to(tl.int32)
    ge_d = (best >> 21).to(tl.int32)
    i_d = NB - 1 - ((best >> 13) & (NB - 1)).to(tl.int32)
    return i_d, rem - (ge_d - n_d), n_d


@triton.jit
def _indexer_score_kernel(
    p_q,
    p_w,
    p_k,
    p_kw,
    p_bt,
    p_ncomp,
    p_keys,
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
    KV_FP8: tl.constexpr,
    KV_FP4: tl.constexpr,
    KV_PAGED: tl.constexpr,
    Q_FP8: tl.constexpr,
    E4M3_CVT: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    SCORE_SCALE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FP4_ASM: tl.constexpr = False,
):
    """Keys of rows [i_n·rows_per_program, +rows_per_program) of token group i_g of request i_b.

    Logits are computed transposed, ``K_tile [BLOCK_N, D] · qᵀ [D, S_BLOCK·H]``: the gathered rows are the dot's
    M side (64-row wgmma halves on sm_90) and the head sum is a reduction along each row. FP8 and MXFP4 rows:
    ``stride_kb`` and ``stride_kp`` count 4-byte words. With per-row scales (``KV_PAGED`` off) every row starts at a
    multiple of 4 bytes and loads as 32-bit vectors; in the page-split layout a page's code rows sit at 128-byte
    (FP8) or 64-byte (MXFP4) pitch (16-byte vectors) and its scales follow them. MXFP4 rows take four dots, one per
    block of 32 values, each scaled by its block's power of two before the ReLU (the blocks' scales differ, so they
    cannot move past it as an FP8 row's one scale does).
    """
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
        o_m = tl.arange(0, S_BLOCK * H)  # dot column m = token (m // H) of the group, head m % H
        o_ms = i_g * S_BLOCK + o_m // H
        m_m = o_ms < S_Q
        o_d = tl.arange(0, D)
        # int64 offsets: q and the weights may be views whose strides span more than 2^31 elements
        o_mh = (o_m % H).to(tl.int64)
        p_qrow = p_q + i_b.to(tl.int64) * stride_qb + o_ms[:, None].to(tl.int64) * stride_qs + o_mh[:, None] * stride_qh
        if KV_FP4:  # the q tile by blocks of 32 values, one dot each
            b_qt0 = _q_block(p_qrow, m_m, 0, Q_FP8, DOT_DTYPE, E4M3_CVT)
            b_qt1 = _q_block(p_qrow, m_m, 1, Q_FP8, DOT_DTYPE, E4M3_CVT)
            b_qt2 = _q_block(p_qrow, m_m, 2, Q_FP8, DOT_DTYPE, E4M3_CVT)
            b_qt3 = _q_block(p_qrow, m_m, 3, Q_FP8, DOT_DTYPE, E4M3_CVT)
        else:
            b_q = tl.load(p_qrow + o_d[None, :], mask=m_m[:, None], other=0)
            if Q_FP8:
                b_q = _e4m3_operand(b_q, DOT_DTYPE, E4M3_CVT)
            b_qt = tl.trans(b_q)  # [D, S_BLOCK·H]
        b_w = tl.load(p_w + i_b.to(tl.int64) * stride_wb + o_ms.to(tl.int64) * stride_ws + o_mh, mask=m_m, other=0.0)
        o_tok = (i_b * S_Q + o_s).to(tl.int64)
        p_bt_row = p_bt + i_b.to(tl.int64) * stride_btb
        for i_row in range(row_lo, row_hi, BLOCK_N):
            o_n = i_row + tl.arange(0, BLOCK_N)
            m_n = o_n < row_hi
            o_nu = o_n.to(tl.uint32)  # rows are >= 0: unsigned division by the page needs no sign fix-up
            b_blk = tl.load(p_bt_row + o_nu // PAGE, mask=m_n, other=0)
            o_blk = b_blk.to(tl.int64) * stride_kb
            o_r = (o_nu % PAGE).to(tl.int64)  # (row in page) · row stride can pass 2^32 in a page-major view
            o_row = o_blk + o_r * stride_kp
            if KV_FP4:
                o_code, o_scale = _fp4_offsets(o_blk, o_row, o_r, D, PAGE, KV_PAGED)
                b_words = tl.load(p_kw + o_scale, mask=m_n, other=0)
                b_logit = _fp4_block_logits(
                    p_k, o_code, m_n, b_words, b_qt0, 0, DOT_DTYPE, E4M3_CVT, DOT_PRECISION, SCORE_SCALE, FP4_ASM
                )
                b_logit += _fp4_block_logits(
                    p_k, o_code, m_n, b_words, b_qt1, 1, DOT_DTYPE, E4M3_CVT, DOT_PRECISION, SCORE_SCALE, FP4_ASM
                )
                b_logit += _fp4_block_logits(
                    p_k, o_code, m_n, b_words, b_qt2, 2, DOT_DTYPE, E4M3_CVT, DOT_PRECISION, SCORE_SCALE, FP4_ASM
                )
                b_logit += _fp4_block_logits(
                    p_k, o_code, m_n, b_words, b_qt3, 3, DOT_DTYPE, E4M3_CVT, DOT_PRECISION, SCORE_SCALE, FP4_ASM
                )
                b_scale = tl.full([BLOCK_N], 1.0, tl.float32)  # applied to each block above
            elif KV_FP8:
                if KV_PAGED:
                    o_code = o_blk * 4 + o_r * D  # byte offset of the row's codes
                    o_scale = o_blk + PAGE * (D // 4) + o_r  # word of its scale
                else:
                    o_code = o_row * 4
                    o_scale = o_row + D // 4  # the row's fp32 scale is its word D/4
                b_code = tl.load(p_k + o_code[:, None] + o_d[None, :], mask=m_n[:, None], other=0)
                b_k = _e4m3_operand(b_code, DOT_DTYPE, E4M3_CVT)
                # scale > 0 commutes with ReLU, so it multiplies the score after the head sum
                b_scale = tl.load(p_kw + o_scale, mask=m_n, other=0).to(tl.float32, bitcast=True) * SCORE_SCALE
                b_logit = tl.dot(b_k, b_qt, input_precision=DOT_PRECISION)  # [BLOCK_N, S_BLOCK·H] fp32
            else:
                b_k = tl.load(p_k + o_row[:, None] + o_d[None, :], mask=m_n[:, None], other=0.0)
                b_logit = tl.dot(b_k, b_qt, input_precision=DOT_PRECISION)  # [BLOCK_N, S_BLOCK·H] fp32
                b_scale = tl.full([BLOCK_N], 1.0, tl.float32)
            _store_keys(b_logit, b_w, b_scale, KV_FP8, o_n, m_active, b_nvis, p_keys, o_tok, stride_keys, S_BLOCK,
                        H, BLOCK_N)  # fmt: skip


@triton.jit
def _store_slots(p_out, p_bt_row, o_pos, o_row, m_sel, PAGE: tl.constexpr):
    """Write rows ``o_row`` as global cache slots ``block_table[row // PAGE] · PAGE + row % PAGE`` at ``o_pos``."""
    b_blk = tl.load(p_bt_row + o_row // PAGE, mask=m_sel, other=0)
    tl.store(p_out + o_pos, b_blk * PAGE + o_row % PAGE, mask=m_sel)


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
    NB0: tl.constexpr,
    NB: tl.constexpr,
    BLOCK_SEL: tl.constexpr,
):
    """Histogram pass 0 (key bits 31..24), 1 (bits 23..12) or 2 (bits 11..0) of one chunk of a token's keys.

    Pass 0 counts every key in registers and adds the 256 bins once. Passes 1 and 2 count only the keys whose higher
    bits equal the k-th key's (few), one integer atomic each; the other keys cost a load and a compare. Integer adds
    are exact and order-free, so the histograms are deterministic.
    """
    i_c = tl.program_id(0)
    i_t = tl.program_id(1)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    row_lo = i_c * chunk
    if (n_vis > topk) & (row_lo < n_vis):
        p_h = p_hist + i_t.to(tl.int64) * (NB0 + 2 * NB)
        row_hi = tl.minimum(row_lo + chunk, n_vis)
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        if PASS == 0:
            b_h0 = tl.zeros([NB0], dtype=tl.int32)
            for i_row in range(row_lo, row_hi, BLOCK_SEL):
                o_n = i_row + tl.arange(0, BLOCK_SEL)
                m_n = o_n < row_hi
                b_key = tl.load(p_row_keys + o_n, mask=m_n, other=0)
                b_h0 += tl.histogram((b_key >> 24) + NB0 // 2, NB0, mask=m_n)
            tl.atomic_add(p_h + tl.arange(0, NB0), b_h0, mask=b_h0 > 0, sem="relaxed")
        else:
            i_d, rem = _resolve_digit(tl.load(p_h + tl.arange(0, NB0)), topk, NB0)
            prefix = i_d - NB0 // 2
            if PASS == 2:
                i_d, rem = _resolve_digit(tl.load(p_h + NB0 + tl.arange(0, NB)), rem, NB)
                prefix = prefix * NB + i_d
            p_dst = p_h + NB0 + (PASS - 1) * NB
            for i_row in range(row_lo, row_hi, BLOCK_SEL):
                o_n = i_row + tl.arange(0, BLOCK_SEL)
                m_n = o_n < row_hi
                b_key = tl.load(p_row_keys + o_n, mask=m_n, other=0)
                if PASS == 1:
                    m_match = m_n & ((b_key >> 24) == prefix)
                    b_digit = (b_key >> 12) & (NB - 1)
                else:
                    m_match = m_n & ((b_key >> 12) == prefix)
                    b_digit = b_key & (NB - 1)
                tl.atomic_add(p_dst + b_digit, 1, mask=m_match, sem="relaxed")


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
    NB0: tl.constexpr,
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
        p_h = p_hist + i_t.to(tl.int64) * (NB0 + 2 * NB)
        i_d0, rem = _resolve_digit(tl.load(p_h + tl.arange(0, NB0)), topk, NB0)
        i_d1, rem = _resolve_digit(tl.load(p_h + NB0 + tl.arange(0, NB)), rem, NB)
        i_d2, rem = _resolve_digit(tl.load(p_h + NB0 + NB + tl.arange(0, NB)), rem, NB)
        thr = ((i_d0 - NB0 // 2) * NB + i_d1) * NB + i_d2  # the k-th largest key, exactly
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
    p_out = p_idx + i_b.to(tl.int64) * stride_ib + i_s.to(tl.int64) * stride_is
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
                _store_slots(p_out, p_bt_row, base + tl.cumsum(b_sel, 0) - 1, o_n, m_sel, PAGE)
                base += tl.sum(b_sel, 0)
                eq_seen += tl.sum(m_eq.to(tl.int32), 0)
        else:
            for i_row in range(row_lo, row_hi, BLOCK_SEL):
                o_n = i_row + tl.arange(0, BLOCK_SEL)
                _store_slots(p_out, p_bt_row, o_n, o_n, o_n < row_hi, PAGE)
    if i_c == 0:
        for i_k in range(0, topk, BLOCK_SEL):
            o_k = i_k + tl.arange(0, BLOCK_SEL)
            tl.store(p_out + o_k, tl.full([BLOCK_SEL], -1, tl.int32), mask=(o_k >= length) & (o_k < topk))
        tl.store(p_len + i_b.to(tl.int64) * stride_lb + i_s.to(tl.int64) * stride_ls, length)


# Keys are int32; these bound every key the score kernel writes (−inf is 0x807FFFFF, +inf 0x7F800000).
_KEY_FLOOR = tl.constexpr(-(2**31))  # below every key: padding of the walkers' loads
_KEY_CEIL = tl.constexpr(2**31 - 1)  # above every key: no key is >= it
_WALK_UNROLL = tl.constexpr(4)  # walker steps per loop iteration: four 16-byte loads in flight per thread


@triton.jit
def _load_walk_step(p_row_keys, o_n, o_end):
    """Four consecutive keys per walker, ``o_n [walkers, 4]``, loaded as one 16-byte vector per thread and returned
    as four ``[walkers]`` columns (key 0, 1, 2, 3 of each walker's four)."""
    b_key = tl.load(p_row_keys + o_n, mask=o_n < o_end[:, None], other=_KEY_FLOOR)
    b_even, b_odd = tl.split(tl.reshape(b_key, [o_n.shape[0], 2, 2]))
    b_k0, b_k2 = tl.split(b_even)
    b_k1, b_k3 = tl.split(b_odd)
    return b_k0, b_k1, b_k2, b_k3


@triton.jit
def _count_ge(b_k0, b_k1, b_k2, b_k3, t):
    """Per walker, how many of its four keys are ``>= t``."""
    return (b_k0 >= t).to(tl.int32) + (b_k1 >= t).to(tl.int32) + (b_k2 >= t).to(tl.int32) + (b_k3 >= t).to(tl.int32)


@triton.jit
def _walker_counts(p_row_keys, o_start, o_end, span, t0, t1, t2, t3):
    """Per-walker counts of the keys ``>= t0 .. t3`` (each threshold above ``_KEY_FLOOR``).

    Walker ``w`` (one per thread) reads rows ``[o_start[w], o_end[w])`` four keys at a time, so each count is a sum
    inside one thread.
    """
    o_v = tl.arange(0, 4)[None, :]
    c0 = tl.zeros(o_start.shape, dtype=tl.int32)
    c1 = tl.zeros(o_start.shape, dtype=tl.int32)
    c2 = tl.zeros(o_start.shape, dtype=tl.int32)
    c3 = tl.zeros(o_start.shape, dtype=tl.int32)
    for i_v in tl.range(0, span, 4, loop_unroll_factor=_WALK_UNROLL):
        b_k0, b_k1, b_k2, b_k3 = _load_walk_step(p_row_keys, o_start[:, None] + i_v + o_v, o_end)
        c0 += _count_ge(b_k0, b_k1, b_k2, b_k3, t0)
        c1 += _count_ge(b_k0, b_k1, b_k2, b_k3, t1)
        c2 += _count_ge(b_k0, b_k1, b_k2, b_k3, t2)
        c3 += _count_ge(b_k0, b_k1, b_k2, b_k3, t3)
    return c0, c1, c2, c3


@triton.jit
def _narrow(t, b_cnt, topk, lo, cnt_lo, b_lo, hi, b_hi):
    """Tighten the bracket ``[lo, hi)`` of the k-th key with a threshold ``t`` whose per-walker counts are ``b_cnt``.

    Invariant: at least ``topk`` keys are ``>= lo`` (``cnt_lo`` of them, ``b_lo`` per walker) and fewer than
    ``topk`` are ``>= hi`` (``b_hi`` per walker). Thresholds are offered in ascending order.
    """
    cnt = tl.sum(b_cnt, 0)
    up = cnt >= topk
    down = (cnt < topk) & (t < hi)
    lo = tl.where(up, t, lo)
    cnt_lo = tl.where(up, cnt, cnt_lo)
    b_lo = tl.where(up, b_cnt, b_lo)
    hi = tl.where(down, t, hi)
    b_hi = tl.where(down, b_cnt, b_hi)
    return lo, cnt_lo, b_lo, hi, b_hi


@triton.jit
def _bracket_step(p_row_keys, o_start, o_end, span, topk, t0, t1, t2, t3, lo, cnt_lo, b_lo, hi, b_hi):
    """One walk over the token's keys: counts at four ascending thresholds, then the tightened bracket."""
    c0, c1, c2, c3 = _walker_counts(p_row_keys, o_start, o_end, span, t0, t1, t2, t3)
    lo, cnt_lo, b_lo, hi, b_hi = _narrow(t0, c0, topk, lo, cnt_lo, b_lo, hi, b_hi)
    lo, cnt_lo, b_lo, hi, b_hi = _narrow(t1, c1, topk, lo, cnt_lo, b_lo, hi, b_hi)
    lo, cnt_lo, b_lo, hi, b_hi = _narrow(t2, c2, topk, lo, cnt_lo, b_lo, hi, b_hi)
    lo, cnt_lo, b_lo, hi, b_hi = _narrow(t3, c3, topk, lo, cnt_lo, b_lo, hi, b_hi)
    return lo, cnt_lo, b_lo, hi, b_hi


@triton.jit
def _sample_key(b_sorted, rank, SAMPLE: tl.constexpr):
    """The ``rank``-th largest (1-based, rounded up and clamped to the sample) of an ascending sample."""
    i_r = tl.minimum(tl.maximum(tl.math.ceil(rank).to(tl.int32), 1), SAMPLE)
    return tl.sum(tl.where(tl.arange(0, SAMPLE) == SAMPLE - i_r, b_sorted, 0), 0)


@triton.jit
def _sample_ladder(p_row_keys, n_vis, topk, SAMPLE: tl.constexpr):
    """Four ascending thresholds that likely have just over ``topk`` keys at or above them (a guess, never trusted).

    ``SAMPLE`` keys at evenly spaced rows are sorted; the k-th key is expected near sample rank
    ``r = topk · SAMPLE / n_vis``. The thresholds are the sample keys at ranks ``r + a·(√r + 1)``, a = 8, 2, 1,
    1/2: the lowest almost surely has ``topk`` keys at or above it, the highest (enough about 3 times in 4 in a
    simulation of fp32 score distributions) leaves the shortest list. Equal sample keys (ties) become consecutive
    keys, so that a tie at the k-th key shows in the counts.
    """
    o_i = tl.arange(0, SAMPLE)
    b_sorted = tl.sort(tl.load(p_row_keys + (o_i.to(tl.int64) * n_vis) // SAMPLE), 0)
    rank = (topk * SAMPLE) / n_vis
    spread = tl.sqrt(rank) + 1.0
    t0 = _sample_key(b_sorted, rank + 8.0 * spread, SAMPLE)
    t1 = tl.maximum(_sample_key(b_sorted, rank + 2.0 * spread, SAMPLE), t0 + 1)
    t2 = tl.maximum(_sample_key(b_sorted, rank + spread, SAMPLE), t1 + 1)
    t3 = tl.maximum(_sample_key(b_sorted, rank + 0.5 * spread, SAMPLE), t2 + 1)
    return t0, t1, t2, t3


@triton.jit
def _compact_key(b_key, o_n, p_list_keys, p_list_rows, t_ge, t_eq, need_eq, b_pos, b_eq_seen):
    """One key per walker (``[walkers]``): append it to the list at ``b_pos`` if it is selected."""
    m_sel = b_key >= t_ge
    if need_eq > 0:
        m_eq = b_key == t_eq
        m_sel = m_sel | (m_eq & (b_eq_seen < need_eq))  # ties: lowest rows first
        b_eq_seen += m_eq.to(tl.int32)
    tl.store(p_list_keys + b_pos, b_key, mask=m_sel)
    tl.store(p_list_rows + b_pos, o_n, mask=m_sel)
    return b_pos + m_sel.to(tl.int32), b_eq_seen


@triton.jit
def _compact_four(b_k0, b_k1, b_k2, b_k3, o_n, p_list_keys, p_list_rows, t_ge, t_eq, need_eq, b_pos, b_eq_seen):
    """Rows ``o_n .. o_n + 3`` of each walker, in order, through :func:`_compact_key`."""
    args = (p_list_keys, p_list_rows, t_ge, t_eq, need_eq)
    b_pos, b_eq_seen = _compact_key(b_k0, o_n, *args, b_pos, b_eq_seen)
    b_pos, b_eq_seen = _compact_key(b_k1, o_n + 1, *args, b_pos, b_eq_seen)
    b_pos, b_eq_seen = _compact_key(b_k2, o_n + 2, *args, b_pos, b_eq_seen)
    b_pos, b_eq_seen = _compact_key(b_k3, o_n + 3, *args, b_pos, b_eq_seen)
    return b_pos, b_eq_seen


@triton.jit
def _walker_compact(p_row_keys, p_list_keys, p_list_rows, o_start, o_end, span, t_ge, t_eq, need_eq, b_pos, b_eq_seen):
    """Copy the keys ``>= t_ge``, and the first ``need_eq`` keys ``== t_eq``, with their rows into the list.

    Walker ``w`` writes from list position ``b_pos[w]`` on, in row order, so the list is in ascending row order;
    ``b_eq_seen[w]`` counts the keys ``== t_eq`` of the walkers before it. Positions are running counts inside one
    thread (no scan across threads). The 16 keys of a step are loaded before its stores (which could alias them for
    all the compiler knows). Returns the largest key walked.
    """
    o_v = tl.arange(0, 4)[None, :]
    b_max = tl.full(o_start.shape, _KEY_FLOOR, tl.int32)
    for i_v in range(0, span, 16):
        o_n = o_start + i_v
        b_k0, b_k1, b_k2, b_k3 = _load_walk_step(p_row_keys, o_n[:, None] + o_v, o_end)
        b_k4, b_k5, b_k6, b_k7 = _load_walk_step(p_row_keys, o_n[:, None] + 4 + o_v, o_end)
        b_k8, b_k9, b_k10, b_k11 = _load_walk_step(p_row_keys, o_n[:, None] + 8 + o_v, o_end)
        b_k12, b_k13, b_k14, b_k15 = _load_walk_step(p_row_keys, o_n[:, None] + 12 + o_v, o_end)
        b_max = tl.maximum(b_max, tl.maximum(tl.maximum(b_k0, b_k1), tl.maximum(b_k2, b_k3)))
        b_max = tl.maximum(b_max, tl.maximum(tl.maximum(b_k4, b_k5), tl.maximum(b_k6, b_k7)))
        b_max = tl.maximum(b_max, tl.maximum(tl.maximum(b_k8, b_k9), tl.maximum(b_k10, b_k11)))
        b_max = tl.maximum(b_max, tl.maximum(tl.maximum(b_k12, b_k13), tl.maximum(b_k14, b_k15)))
        args = (p_list_keys, p_list_rows, t_ge, t_eq, need_eq)
        b_pos, b_eq_seen = _compact_four(b_k0, b_k1, b_k2, b_k3, o_n, *args, b_pos, b_eq_seen)
        b_pos, b_eq_seen = _compact_four(b_k4, b_k5, b_k6, b_k7, o_n + 4, *args, b_pos, b_eq_seen)
        b_pos, b_eq_seen = _compact_four(b_k8, b_k9, b_k10, b_k11, o_n + 8, *args, b_pos, b_eq_seen)
        b_pos, b_eq_seen = _compact_four(b_k12, b_k13, b_k14, b_k15, o_n + 12, *args, b_pos, b_eq_seen)
    return tl.max(b_max, 0)


@triton.jit
def _digit_hist(b_u, m_u, shift, w, prefix):
    """Histogram (256 bins, the first ``2^w`` used) of key bits ``[shift, shift + w)`` over the (order-preserving,
    unsigned) keys whose higher bits equal ``prefix``."""
    b_digit = (b_u >> shift).to(tl.int32, bitcast=True) & ((1 << w) - 1)
    return tl.histogram(b_digit, 256, mask=m_u & (((b_u >> shift) >> w) == prefix))


@triton.jit
def _count_above(b_u, m_u, shift, w, prefix):
    """How many of the keys have bits from ``shift + w`` on greater than ``prefix``."""
    return tl.sum((m_u & (((b_u >> shift) >> w) > prefix)).to(tl.int32), 0)


@triton.jit
def _halve_bits(u, n, S: tl.constexpr):
    big = (u >> S) != 0
    return tl.where(big, u >> S, u), n + tl.where(big, S, 0)


@triton.jit
def _significant_bits(u):
    """Bits up to the highest set one of an unsigned 32-bit ``u`` (0 for 0): a binary search."""
    n = tl.zeros_like(u.to(tl.int32, bitcast=True))
    u, n = _halve_bits(u, n, 16)
    u, n = _halve_bits(u, n, 8)
    u, n = _halve_bits(u, n, 4)
    u, n = _halve_bits(u, n, 2)
    u, n = _halve_bits(u, n, 1)
    return n + (u != 0).to(tl.int32)


@triton.jit
def _list_kth(p_list_keys, m, lo, hi, topk, BLOCK_L: tl.constexpr):
    """The ``topk``-th largest of the ``m`` list keys, exactly: ``(thr, need_eq, n_eq)``.

    The list holds every key ``>= lo`` and the k-th key lies in ``[lo, hi]``, so only the key bits up to the highest
    bit where ``lo`` and ``hi`` differ are unknown: radix passes over them from the top, 8 bits each (the last one
    what is left), each histogramming the keys that match the digits found so far. The passes stop once every key of
    the k-th key's bucket is taken (its rank in the bucket is the bucket's count); ``thr`` is then the lowest key the
    bucket can hold, and every key from it on is taken. ``need_eq`` keys equal to ``thr`` are taken, of the ``n_eq``
    in the list (equal counts: every key ``>= thr``). The first ``BLOCK_L`` keys stay in registers across passes.
    """
    u_lo = (lo ^ _KEY_FLOOR).to(tl.uint32, bitcast=True)  # flipping the sign bit orders keys as unsigned
    hi_bit = _significant_bits(u_lo ^ (hi ^ _KEY_FLOOR).to(tl.uint32, bitcast=True))  # bits from here on are known
    w = tl.minimum(hi_bit, 8)
    shift = hi_bit - w
    prefix = (u_lo >> shift) >> w  # the known bits: those of lo (and hi)
    o_l = tl.arange(0, BLOCK_L)
    m_l0 = o_l < m
    b_u0 = (tl.load(p_list_keys + o_l, mask=m_l0, other=0) ^ _KEY_FLOOR).to(tl.uint32, bitcast=True)
    # keys above the bracket (their known bits exceed hi's): all taken
    n_above = _count_above(b_u0, m_l0, shift, w, prefix)
    for i_l in range(BLOCK_L, m, BLOCK_L):
        m_l = i_l + o_l < m
        b_u = (tl.load(p_list_keys + i_l + o_l, mask=m_l, other=0) ^ _KEY_FLOOR).to(tl.uint32, bitcast=True)
        n_above += _count_above(b_u, m_l, shift, w, prefix)
    rem = topk - n_above  # >= 1: fewer than topk keys are above hi
    n_eq = tl.zeros_like(m) - 1
    i_pass = tl.zeros_like(m)
    while (i_pass == 0) | ((hi_bit > 0) & (rem != n_eq)):
        w = tl.minimum(hi_bit, 8)
        shift = hi_bit - w
        b_h = _digit_hist(b_u0, m_l0, shift, w, prefix)
        for i_l in range(BLOCK_L, m, BLOCK_L):
            m_l = i_l + o_l < m
            b_u = (tl.load(p_list_keys + i_l + o_l, mask=m_l, other=0) ^ _KEY_FLOOR).to(tl.uint32, bitcast=True)
            b_h += _digit_hist(b_u, m_l, shift, w, prefix)
        i_d, rem, n_eq = _resolve_bucket(b_h, rem, 256)
        prefix = (prefix << w) | i_d.to(tl.uint32)
        hi_bit = shift
        i_pass += 1
    thr = (prefix << hi_bit).to(tl.int32, bitcast=True) ^ _KEY_FLOOR  # the bucket's lowest key
    return thr, rem, n_eq


@triton.jit
def _walk_select(
    p_row_keys,
    p_list_keys,
    p_list_rows,
    n_vis,
    topk,
    CAP: tl.constexpr,
    SAMPLE: tl.constexpr,
    WALKERS: tl.constexpr,
    BLOCK_L: tl.constexpr,
    WHOLE: tl.constexpr,
):
    """Steps 1–3 of the per-token select over all ``n_vis > topk`` keys of a token (see
    :func:`_indexer_select_kernel`): the list in ascending row order and its k-th key, ``(m_list, thr, need_eq,
    n_eq)`` as :func:`_emit_list` takes them."""
    # walkers own whole 16-byte groups of keys (vector loads); the rows past n_vis up to the next multiple of 4
    # are this token's own workspace and get a key below every real key
    n_vis4 = tl.cdiv(n_vis, 4) * 4
    o_tail = n_vis + tl.arange(0, 4)
    tl.store(p_row_keys + o_tail, tl.full([4], _KEY_FLOOR, tl.int32), mask=o_tail < n_vis4)
    tl.debug_barrier()
    span = tl.cdiv(tl.cdiv(n_vis, WALKERS), 4) * 4  # rows per walker, whole 16-byte groups
    o_start = tl.arange(0, WALKERS) * span
    o_end = tl.minimum(o_start + span, n_vis4)
    # the bracket [lo, hi): every real key is >= _KEY_FLOOR + 1, none is >= _KEY_CEIL
    lo = tl.zeros_like(n_vis) + (_KEY_FLOOR + 1)
    cnt_lo = n_vis
    b_lo = tl.minimum(tl.maximum(n_vis - o_start, 0), span)
    hi = tl.zeros_like(n_vis) + _KEY_CEIL
    b_hi = tl.zeros([WALKERS], dtype=tl.int32)
    if (n_vis > CAP) | (n_vis > WHOLE):  # else every key is listed (at most the list's register block)
        t0, t1, t2, t3 = _sample_ladder(p_row_keys, n_vis, topk, SAMPLE)
        lo, cnt_lo, b_lo, hi, b_hi = _bracket_step(
            p_row_keys, o_start, o_end, span, topk, t0, t1, t2, t3, lo, cnt_lo, b_lo, hi, b_hi
        )
        while (cnt_lo > CAP) & (hi.to(tl.int64) - lo > 1):
            gap = hi.to(tl.int64) - lo  # >= 2: the thresholds ascend and lo + 1 < hi
            t1 = (lo + tl.maximum(gap // 4, 1)).to(tl.int32)
            t2 = (lo + gap // 2).to(tl.int32)
            t3 = (lo + gap - gap // 4).to(tl.int32)
            lo, cnt_lo, b_lo, hi, b_hi = _bracket_step(
                p_row_keys, o_start, o_end, span, topk, lo + 1, t1, t2, t3, lo, cnt_lo, b_lo, hi, b_hi
            )
    if cnt_lo <= CAP:
        # the list: every key >= lo
        m_list = cnt_lo
        need_eq = tl.zeros_like(n_vis)
        t_ge = lo
        b_eq_seen = tl.zeros([WALKERS], dtype=tl.int32)
        b_base = tl.cumsum(b_lo, 0) - b_lo
        hi_in = hi - 1
    else:
        # hi == lo + 1: lo is the k-th key, tied more than CAP times; the list: keys > lo, first ties == lo
        need_eq = topk - tl.sum(b_hi, 0)
        m_list = tl.sum(b_hi, 0) + need_eq  # = topk
        t_ge = hi
        b_eq = b_lo - b_hi
        b_eq_seen = tl.cumsum(b_eq, 0) - b_eq
        b_base = tl.cumsum(b_hi, 0) - b_hi + tl.minimum(b_eq_seen, need_eq)
        hi_in = lo
    key_max = _walker_compact(
        p_row_keys, p_list_keys, p_list_rows, o_start, o_end, span, t_ge, lo, need_eq, b_base, b_eq_seen
    )
    tl.debug_barrier()  # the list is read back by other threads
    thr, need_eq, n_eq = _list_kth(p_list_keys, m_list, lo, tl.minimum(hi_in, key_max), topk, BLOCK_L)
    return m_list, thr, need_eq, n_eq


@triton.jit
def _emit_list(
    p_list_keys, p_list_rows, m_list, thr, need_eq, n_eq, p_out, p_bt_row, PAGE: tl.constexpr, BLOCK_L: tl.constexpr
):
    """Step 4: the list's keys ``> thr``, and ``== thr`` while their rank is ``< need_eq`` (ties go to the lower
    rows; ``n_eq`` keys of the list equal ``thr``), in list order, as global slots."""
    o_l = tl.arange(0, BLOCK_L)
    base = 0
    eq_seen = 0
    for i_l in range(0, m_list, BLOCK_L):
        m_l = i_l + o_l < m_list
        b_key = tl.load(p_list_keys + i_l + o_l, mask=m_l, other=_KEY_FLOOR)
        o_row = tl.load(p_list_rows + i_l + o_l, mask=m_l, other=0)  # with the keys: one round trip
        m_sel = b_key > thr
        if n_eq == need_eq:
            m_sel = m_sel | (b_key == thr)
        else:
            m_eq = b_key == thr
            b_eq_rank = eq_seen + tl.cumsum(m_eq.to(tl.int32), 0) - 1
            m_sel = m_sel | (m_eq & (b_eq_rank < need_eq))  # ties: lowest rows first
            eq_seen += tl.sum(m_eq.to(tl.int32), 0)
        b_sel = m_sel.to(tl.int32)
        _store_slots(p_out, p_bt_row, base + tl.cumsum(b_sel, 0) - 1, o_row, m_sel, PAGE)
        base += tl.sum(b_sel, 0)


@triton.jit
def _emit_rest(p_out, p_bt_row, p_len, n_vis, length, topk, PAGE: tl.constexpr, BLOCK_L: tl.constexpr):
    """A token with ``n_vis <= topk`` takes rows ``0 .. n_vis - 1`` unscored; every token: −1 padding, its length."""
    o_l = tl.arange(0, BLOCK_L)
    if n_vis <= topk:
        for i_l in range(0, n_vis, BLOCK_L):
            _store_slots(p_out, p_bt_row, i_l + o_l, i_l + o_l, i_l + o_l < n_vis, PAGE)
    for i_k in range(0, topk, BLOCK_L):
        o_k = i_k + o_l
        tl.store(p_out + o_k, tl.full([BLOCK_L], -1, tl.int32), mask=(o_k >= length) & (o_k < topk))
    tl.store(p_len, length)


@triton.jit
def _indexer_select_kernel(
    p_keys,
    p_list,
    p_bt,
    p_ncomp,
    p_idx,
    p_len,
    stride_btb,
    stride_nb,
    stride_ns,
    stride_keys,
    stride_list,
    stride_ib,
    stride_is,
    stride_lb,
    stride_ls,
    max_n,
    topk,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    PAGE: tl.constexpr,
    CAP: tl.constexpr,
    SAMPLE: tl.constexpr,
    WALKERS: tl.constexpr,
    BLOCK_L: tl.constexpr,
    WHOLE: tl.constexpr,
):
    """The whole exact top-k of one query token (program ``i_t``): its indices and ``topk_length``.

    1. **Bracket.** ``WALKERS`` walkers (one per thread) split the token's rows into contiguous ranges. A sorted
       sample gives four thresholds; one walk counts, per walker, the keys at or above each, which brackets the k-th
       key in ``[lo, hi)``: at least ``topk`` keys are ``>= lo``, fewer are ``>= hi``. While more than ``CAP`` keys
       are ``>= lo``, further walks split the bracket four ways (the first split at ``lo + 1``, so that a tie at the
       k-th key ends the search). Tokens with ``n_vis <= min(CAP, WHOLE)`` skip the sample (every key is
       listed); tokens with ``n_vis <= topk`` take rows ``0 .. n_vis - 1``, unscored.
    2. **List.** A walk copies every key ``>= lo`` with its row into the token's list, walker after walker from
       offsets given by the counts: ascending row order, at most ``CAP`` entries, no scan across threads. (If the
       bracket shrank to one key value held by more than ``CAP`` keys, the list takes the keys above it and the
       first ``need_eq`` equal to it.)
    3. **k-th key.** Radix passes over the list's keys, 8 bits each, only over the bits up to the highest one where
       ``lo`` and the largest key below ``hi`` differ, until the k-th key's bucket is taken whole: ``thr`` and
       ``need_eq``, the number of keys ``== thr`` that are taken (:func:`_list_kth`).
    4. **Output.** The list in order: keys ``> thr``, and ``== thr`` while their rank is ``< need_eq`` (ties go to
       the lower rows), as global slots; −1 padding and ``topk_length``.

    Counts are integer and exact, so the result never depends on scheduling or on the launch configuration.
    """
    i_t = tl.program_id(0)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    p_out = p_idx + i_b.to(tl.int64) * stride_ib + i_s.to(tl.int64) * stride_is
    p_bt_row = p_bt + i_b.to(tl.int64) * stride_btb
    if n_vis > topk:
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        p_list_keys = p_list + i_t.to(tl.int64) * stride_list
        p_list_rows = p_list_keys + CAP
        m_list, thr, need_eq, n_eq = _walk_select(
            p_row_keys, p_list_keys, p_list_rows, n_vis, topk, CAP, SAMPLE, WALKERS, BLOCK_L, WHOLE
        )
        _emit_list(p_list_keys, p_list_rows, m_list, thr, need_eq, n_eq, p_out, p_bt_row, PAGE, BLOCK_L)
    p_len_tok = p_len + i_b.to(tl.int64) * stride_lb + i_s.to(tl.int64) * stride_ls
    _emit_rest(p_out, p_bt_row, p_len_tok, n_vis, tl.minimum(n_vis, topk), topk, PAGE, BLOCK_L)


_PART_META = tl.constexpr(PART_META)


@triton.jit
def _indexer_spread_count_kernel(
    p_keys,
    p_parts,
    p_ncomp,
    stride_nb,
    stride_ns,
    stride_keys,
    stride_parts,
    max_n,
    topk,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    PARTS: tl.constexpr,
    PART_CAP: tl.constexpr,
    CAP: tl.constexpr,
    SAMPLE: tl.constexpr,
    WALKERS: tl.constexpr,
    BLOCK_L: tl.constexpr,
    WHOLE: tl.constexpr,
):
    """Spread select, first launch: part ``i_p`` of token ``i_t`` (program ``i_t · PARTS + i_p``).

    For a token that the per-token select would sample (``n_vis > topk`` and more keys than its list or register
    block hold), every part sorts the same sample into the same four thresholds ``t0 < .. < t3``, counts its own
    rows' keys at or above each, and copies its keys ``>= t0`` with their rows, in row order, into its region
    (when they fit its ``PART_CAP``). The region's first ``_PART_META`` entries get the thresholds and the counts.
    """
    i_t = tl.program_id(0) // PARTS
    i_p = tl.program_id(0) % PARTS
    n_vis = _visible_rows(p_ncomp, i_t // S_Q, i_t % S_Q, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    if (n_vis > topk) & ((n_vis > CAP) | (n_vis > WHOLE)):
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        p_part = p_parts + i_t.to(tl.int64) * stride_parts + i_p * (_PART_META + 2 * PART_CAP)
        n_vis4 = tl.cdiv(n_vis, 4) * 4
        part = tl.cdiv(tl.cdiv(n_vis4, PARTS), 16) * 16  # rows per part: whole 16-key walker steps
        o_first = i_p * part
        o_last = tl.minimum(o_first + part, n_vis4)
        if (o_first < n_vis4) & (o_last == n_vis4):  # the part holding the last 16-byte group pads it
            o_tail = n_vis + tl.arange(0, 4)
            tl.store(p_row_keys + o_tail, tl.full([4], _KEY_FLOOR, tl.int32), mask=o_tail < n_vis4)
            tl.debug_barrier()
        span = tl.cdiv(tl.cdiv(tl.maximum(o_last - o_first, 0), WALKERS), 4) * 4
        o_start = o_first + tl.arange(0, WALKERS) * span
        o_end = tl.minimum(o_start + span, o_last)
        t0, t1, t2, t3 = _sample_ladder(p_row_keys, n_vis, topk, SAMPLE)
        c0, c1, c2, c3 = _walker_counts(p_row_keys, o_start, o_end, span, t0, t1, t2, t3)
        n0 = tl.sum(c0, 0)
        if n0 <= PART_CAP:
            b_none = tl.zeros([WALKERS], dtype=tl.int32)
            _walker_compact(
                p_row_keys,
                p_part + _PART_META,
                p_part + _PART_META + PART_CAP,
                o_start,
                o_end,
                span,
                t0,
                t0,
                0,
                tl.cumsum(c0, 0) - c0,
                b_none,
            )
        o_m = tl.arange(0, _PART_META)
        meta = tl.where(o_m == 0, t0, tl.where(o_m == 1, t1, tl.where(o_m == 2, t2, t3)))
        meta = tl.where(o_m == 4, n0, meta)
        meta = tl.where(o_m == 5, tl.sum(c1, 0), meta)
        meta = tl.where(o_m == 6, tl.sum(c2, 0), meta)
        meta = tl.where(o_m == 7, tl.sum(c3, 0), meta)
        tl.store(p_part + o_m, meta)


@triton.jit
def _indexer_spread_rank_kernel(
    p_keys,
    p_parts,
    p_list,
    p_bt,
    p_ncomp,
    p_idx,
    p_len,
    stride_btb,
    stride_nb,
    stride_ns,
    stride_keys,
    stride_parts,
    stride_list,
    stride_ib,
    stride_is,
    stride_lb,
    stride_ls,
    max_n,
    topk,
    S_Q: tl.constexpr,
    PER_TOKEN: tl.constexpr,
    PAGE: tl.constexpr,
    PARTS: tl.constexpr,
    PART_CAP: tl.constexpr,
    CAP: tl.constexpr,
    SAMPLE: tl.constexpr,
    WALKERS: tl.constexpr,
    BLOCK_L: tl.constexpr,
    WHOLE: tl.constexpr,
    GATHER: tl.constexpr,
):
    """Spread select, second launch: token ``i_t``'s indices and ``topk_length`` from its parts.

    The parts' counts add up to the token's counts at ``t0 .. t3``, which bracket the k-th key in ``[lo, hi)`` as
    one walk of the per-token select would. When ``t0`` has at least ``topk`` keys at or above it, every part's
    keys ``>= t0`` fitted its region, and at most ``CAP`` keys are ``>= lo``, the keys ``>= lo`` are gathered from
    the regions (part after part: ascending row order) into the token's list and ranked as in the per-token select
    (steps 3 and 4 of :func:`_indexer_select_kernel`). Otherwise, and for tokens the per-token select lists whole,
    this program runs the whole per-token select itself. Both give the same bits.
    """
    i_t = tl.program_id(0)
    i_b = i_t // S_Q
    i_s = i_t % S_Q
    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)
    p_out = p_idx + i_b.to(tl.int64) * stride_ib + i_s.to(tl.int64) * stride_is
    p_bt_row = p_bt + i_b.to(tl.int64) * stride_btb
    if n_vis > topk:
        p_row_keys = p_keys + i_t.to(tl.int64) * stride_keys
        p_list_keys = p_list + i_t.to(tl.int64) * stride_list
        p_list_rows = p_list_keys + CAP
        m_list = tl.zeros_like(n_vis)
        thr = tl.zeros_like(n_vis)
        need_eq = tl.zeros_like(n_vis)
        n_eq = tl.zeros_like(n_vis)
        gathered = tl.zeros_like(n_vis)  # 1 once the parts' lists are gathered
        if (n_vis > CAP) | (n_vis > WHOLE):  # the tokens the parts counted
            p_token = p_parts + i_t.to(tl.int64) * stride_parts
            o_p = tl.arange(0, PARTS) * (_PART_META + 2 * PART_CAP)
            t0 = tl.load(p_token)
            t1 = tl.load(p_token + 1)
            t2 = tl.load(p_token + 2)
            t3 = tl.load(p_token + 3)
            n_part = tl.load(p_token + o_p + 4)  # per part: its keys >= t0, the length of its region's list
            b_c1 = tl.load(p_token + o_p + 5)
            b_c2 = tl.load(p_token + o_p + 6)
            b_c3 = tl.load(p_token + o_p + 7)
            c0 = tl.sum(n_part, 0)
            c1 = tl.sum(b_c1, 0)
            c2 = tl.sum(b_c2, 0)
            c3 = tl.sum(b_c3, 0)
            # lo: the highest threshold with >= topk keys at or above it; hi: the next one (none: _KEY_CEIL)
            lo = tl.where(c3 >= topk, t3, tl.where(c2 >= topk, t2, tl.where(c1 >= topk, t1, t0)))
            cnt_lo = tl.where(c3 >= topk, c3, tl.where(c2 >= topk, c2, tl.where(c1 >= topk, c1, c0)))
            b_lo = tl.where(c3 >= topk, b_c3, tl.where(c2 >= topk, b_c2, tl.where(c1 >= topk, b_c1, n_part)))
            hi = tl.where(c1 < topk, t1, tl.where(c2 < topk, t2, tl.where(c3 < topk, t3, _KEY_CEIL)))
            if (c0 >= topk) & (tl.max(n_part, 0) <= PART_CAP) & (cnt_lo <= CAP):
                # every part's keys >= lo go to the list from the part's offset on: all parts in one round trip
                o_g = tl.arange(0, GATHER)[None, :]
                p_region = p_token + o_p[:, None] + _PART_META
                b_pos = tl.cumsum(b_lo, 0) - b_lo
                b_max = tl.full([PARTS, GATHER], _KEY_FLOOR, tl.int32)
                for i_g in range(0, tl.max(n_part, 0), GATHER):
                    m_g = i_g + o_g < n_part[:, None]
                    b_key = tl.load(p_region + i_g + o_g, mask=m_g, other=_KEY_FLOOR)
                    o_row = tl.load(p_region + PART_CAP + i_g + o_g, mask=m_g, other=0)  # with the keys: one trip
                    m_sel = b_key >= lo
                    b_sel = m_sel.to(tl.int32)
                    o_pos = b_pos[:, None] + tl.cumsum(b_sel, 1) - 1
                    tl.store(p_list_keys + o_pos, b_key, mask=m_sel)
                    tl.store(p_list_rows + o_pos, o_row, mask=m_sel)
                    b_pos += tl.sum(b_sel, 1)
                    b_max = tl.maximum(b_max, tl.where(m_sel, b_key, _KEY_FLOOR))
                tl.debug_barrier()  # the list is read back by other threads
                m_list = cnt_lo
                key_max = tl.max(tl.max(b_max, 1), 0)
                thr, need_eq, n_eq = _list_kth(p_list_keys, m_list, lo, tl.minimum(hi - 1, key_max), topk, BLOCK_L)
                gathered += 1
        if gathered == 0:
            m_list, thr, need_eq, n_eq = _walk_select(
                p_row_keys, p_list_keys, p_list_rows, n_vis, topk, CAP, SAMPLE, WALKERS, BLOCK_L, WHOLE
            )
        _emit_list(p_list_keys, p_list_rows, m_list, thr, need_eq, n_eq, p_out, p_bt_row, PAGE, BLOCK_L)
    p_len_tok = p_len + i_b.to(tl.int64) * stride_lb + i_s.to(tl.int64) * stride_ls
    _emit_rest(p_out, p_bt_row, p_len_tok, n_vis, tl.minimum(n_vis, topk), topk, PAGE, BLOCK_L)


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
    paged: bool = False
    fp4: bool = False  # the byte rows are MXFP4 (68 bytes), not FP8 (132)


def _validate(
    q_idx: object,
    weights: object,
    index_k_cache: object,
    block_table: object,
    n_comp: object,
    topk: object,
    max_n_comp: object,
    index_k_layout: object = "rows",
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
    if q_idx.dtype == torch.float8_e4m3fn and not (
        isinstance(index_k_cache, torch.Tensor) and index_k_cache.dtype == torch.uint8
    ):
        raise ValueError(
            f"q_idx: float8_e4m3fn queries need FP8 or MXFP4 index-K rows (uint8 [num_blocks, page, {FP8_ROW_BYTES} "
            f"or {MXFP4_ROW_BYTES}]), got index_k_cache {_describe(index_k_cache)}"
        )
    weights = _require_tensor("weights", weights, (torch.float32,), 3, device)
    if tuple(weights.shape) != (b, s_q, heads):
        raise ValueError(f"weights: expected shape {(b, s_q, heads)} fp32, got {_describe(weights)}")
    if not isinstance(index_k_cache, torch.Tensor):
        raise ValueError(f"index_k_cache: expected a torch.Tensor, got {_describe(index_k_cache)}")
    fp8 = index_k_cache.dtype == torch.uint8
    fp4 = False
    if fp8:
        _require_tensor("index_k_cache", index_k_cache, (torch.uint8,), 3, device)
        if index_k_cache.shape[2] not in (FP8_ROW_BYTES, MXFP4_ROW_BYTES):
            raise ValueError(
                f"index_k_cache: expected FP8 rows [num_blocks, page, {FP8_ROW_BYTES}] or MXFP4 rows [num_blocks, "
                f"page, {MXFP4_ROW_BYTES}] uint8, got {_describe(index_k_cache)}"
            )
        fp4 = index_k_cache.shape[2] == MXFP4_ROW_BYTES
        if index_k_cache.stride(0) % 4 or index_k_cache.stride(1) % 4 or index_k_cache.data_ptr() % 4:
            raise ValueError(
                f"index_k_cache: {'MXFP4' if fp4 else 'FP8'} rows are read as int32 words; expected byte strides and a "
                f"start address that are multiples of 4, got {_describe(index_k_cache)}"
            )
    else:
        _require_tensor("index_k_cache", index_k_cache, (q_idx.dtype, torch.uint8), 3, device)
        if index_k_cache.shape[2] != INDEX_DIM:
            raise ValueError(
                f"index_k_cache: expected rows [num_blocks, page, {INDEX_DIM}] {q_idx.dtype} (the dtype of q_idx), "
                f"FP8 rows [num_blocks, page, {FP8_ROW_BYTES}] or MXFP4 rows [num_blocks, page, {MXFP4_ROW_BYTES}] "
                f"uint8, got {_describe(index_k_cache)}"
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
    if topk > MAX_ROWS:  # the -1 padding loops step to topk in int32 blocks: past 2^31 they would wrap around
        raise ValueError(f"topk: expected at most 2^30 = {MAX_ROWS} entries per token, got {topk}")
    capacity = block_table.shape[1] * page
    if max_n_comp is None:
        max_n = capacity
    elif isinstance(max_n_comp, bool) or not isinstance(max_n_comp, int) or not 0 <= max_n_comp <= capacity:
        raise ValueError(
            f"max_n_comp: expected an int in [0, max_blocks * page = {capacity}], got {_describe(max_n_comp)}"
        )
    else:
        max_n = max_n_comp
    if max_n > MAX_ROWS:
        default = " (max_blocks * page by default: pass a smaller max_n_comp)" if max_n_comp is None else ""
        raise ValueError(f"max_n_comp: expected at most 2^30 = {MAX_ROWS} rows, got {max_n}{default}")
    if index_k_layout not in INDEX_K_LAYOUTS:
        raise ValueError(f"index_k_layout: expected one of {INDEX_K_LAYOUTS}, got {_describe(index_k_layout)}")
    paged = index_k_layout == "paged"
    if paged and not fp8:
        raise ValueError(
            f"index_k_layout: 'paged' is a layout of FP8 and MXFP4 rows, got index_k_cache {_describe(index_k_cache)}"
        )
    width = index_k_cache.shape[2]
    if paged and index_k_cache.stride(1) != width:
        raise ValueError(
            f"index_k_cache: layout 'paged' needs each page's {page} x {width} bytes contiguous, got "
            f"{_describe(index_k_cache)}"
        )
    return _Call(b, s_q, heads, page, fp8, topk, max_n, n_comp.dim() == 2, paged, fp4)


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
        return launch.scratch(torch.empty(numel, dtype=torch.int32, device=device))
    workspace = _require_tensor("workspace", workspace, (torch.int32,), 1, device)
    if workspace.numel() < numel:
        raise ValueError(
            f"workspace: expected at least {numel} int32 elements (indexer_workspace_numel), got {_describe(workspace)}"
        )
    return workspace


def _dot_setup(q_idx: torch.Tensor, fp8: bool, fp4: bool = False) -> dict[str, object]:
    """Constexprs that decide how the score kernel's dot reads e4m3 (and e2m1) codes on ``q_idx``'s device.

    ``fp8``: the rows are bytes (FP8, or MXFP4 with ``fp4``)."""
    q_fp8 = q_idx.dtype == torch.float8_e4m3fn
    cvt = (fp8 or q_fp8) and fp8_decode_path(q_idx.device) == "cvt"
    q_tl = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}.get(q_idx.dtype)
    # FP8 queries: FP8 x FP8 on the tensor cores where they exist; the interpreter multiplies fp8 bits, so fp16 there
    fp8_dot = tl.float8e4nv if cvt and q_idx.device.type == "cuda" else tl.float16
    dot_dtype = fp8_dot if q_fp8 else q_tl
    scale = 1.0
    if fp8 and not fp4 and not cvt:
        scale *= 256.0  # bit-assembled K codes are code · 2^-8 (MXFP4 codes: the kernel's own factor)
    if q_fp8 and not cvt:
        scale *= 256.0  # and so are bit-assembled q codes
    return {
        "Q_FP8": q_fp8,
        "E4M3_CVT": cvt,
        "DOT_DTYPE": dot_dtype,
        "DOT_PRECISION": "ieee" if q_idx.dtype == torch.float32 else "tf32",
        "SCORE_SCALE": scale,
    }


def _launch_scores(
    call: _Call,
    cfg: IndexerConfig,
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    keys: torch.Tensor,
    n_pad: int,
    topk_gate: int,
) -> None:
    """Score kernel: keys of every visible row of tokens with more than ``topk_gate`` rows."""
    # FP8 rows: codes read through the byte view, the scale word through an int32 view; strides in 4-byte words
    k_words = index_k_cache.view(torch.int32) if call.fp8 else index_k_cache
    q_arg = q_idx.view(torch.uint8) if q_idx.dtype == torch.float8_e4m3fn else q_idx
    dot = _dot_setup(q_idx, call.fp8, call.fp4)
    args = dict(
        p_q=q_arg,
        p_w=weights,
        p_k=index_k_cache,
        p_kw=k_words,
        p_bt=block_table,
        p_ncomp=n_comp,
        p_keys=keys,
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
        rows_per_program=cfg.rows_per_program,  # set below
        S_Q=call.s_q,
        S_BLOCK=cfg.s_block,
        H=call.heads,
        D=INDEX_DIM,
        PAGE=call.page,
        PER_TOKEN=call.per_token,
        KV_FP8=call.fp8 and not call.fp4,
        KV_FP4=call.fp4,
        KV_PAGED=call.paged,
        BLOCK_N=cfg.block_n,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
        **dot,
        FP4_ASM=call.fp4 and FP4_PERMUTE_DECODE and bool(dot["E4M3_CVT"]) and q_idx.device.type == "cuda",
    )
    groups = triton.cdiv(call.s_q, cfg.s_block)
    on_gpu = q_idx.device.type == "cuda" and not _interpreted()
    slots = _resident_score_programs(q_idx.device, args) if on_gpu else None
    rows = wave_rows(call.b * groups, call.max_n, cfg.block_n, slots) if slots else None
    args["rows_per_program"] = rows = rows or cfg.rows_per_program
    launch.run(_indexer_score_kernel, (triton.cdiv(max(call.max_n, 1), rows), call.b, groups), **args)


# (device index, WAVEMLA_GPU, the score kernel's specialisation but its runtime integers) -> programs resident
_RESIDENT: dict[tuple[Any, ...], int] = {}


def _resident_score_programs(device: torch.device, args: dict[str, Any]) -> int:
    """Score programs the GPU keeps resident at once (SMs × programs an SM), from the registers and shared memory
    of the kernel Triton compiles for ``args`` (compiled ahead of its launch, once per specialisation)."""
    # the constexprs (upper case), launch options and tensor dtypes: not the strides and lengths, which vary by call
    # and the preset the planner plans for instead of this GPU (WAVEMLA_GPU), whose SMs the grid then fills
    key = (device.index, config.get("WAVEMLA_GPU"), *(v.dtype if isinstance(v, torch.Tensor) else v
           for k, v in args.items() if k.isupper() or k.startswith("num_") or isinstance(v, torch.Tensor)))  # fmt: skip
    if key not in _RESIDENT:
        from wavemla.api import _device_spec  # the planner's view of the GPU (wavemla.api imports this module)

        kernel = _indexer_score_kernel.warmup(grid=(1,), **args)
        kernel._init_handles()  # loads the module: n_regs comes with it
        spec = _device_spec(device)
        per_sm = spec.blocks_per_sm(int(kernel.metadata.shared), int(kernel.n_regs), int(args["num_warps"]))
        _RESIDENT[key] = spec.num_sms * per_sm
    return _RESIDENT[key]


def _list_stride(call: _Call, cfg: IndexerConfig) -> int:
    """Elements between two tokens' candidate lists: a token's list lives in its (unzeroed) histogram region."""
    stride_list = HIST0_BINS + 2 * HIST_BINS
    assert 2 * cfg.list_cap <= stride_list, "the list keys and rows must fit a token's histogram region"
    assert call.topk <= cfg.list_cap, "a tie at the k-th key can fill the list with topk rows"
    return stride_list


def _launch_token_select(
    call: _Call,
    cfg: IndexerConfig,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    keys: torch.Tensor,
    hist: torch.Tensor,
    n_pad: int,
    indices: torch.Tensor,
    lengths: torch.Tensor,
) -> None:
    """Per-token select: one program per query token; its candidate list lives in its (unzeroed) histogram region."""
    stride_list = _list_stride(call, cfg)
    launch.run(
        _indexer_select_kernel,
        (call.b * call.s_q,),
        p_keys=keys,
        p_list=hist,
        p_bt=block_table,
        p_ncomp=n_comp,
        p_idx=indices,
        p_len=lengths,
        stride_btb=block_table.stride(0),
        stride_nb=n_comp.stride(0),
        stride_ns=n_comp.stride(1) if call.per_token else 0,
        stride_keys=n_pad,
        stride_list=stride_list,
        stride_ib=indices.stride(0),
        stride_is=indices.stride(1),
        stride_lb=lengths.stride(0),
        stride_ls=lengths.stride(1),
        max_n=call.max_n,
        topk=call.topk,
        S_Q=call.s_q,
        PER_TOKEN=call.per_token,
        PAGE=call.page,
        CAP=cfg.list_cap,
        SAMPLE=cfg.sample,
        WALKERS=32 * cfg.select_warps,
        BLOCK_L=cfg.block_list,
        WHOLE=cfg.list_whole,
        num_warps=cfg.select_warps,
    )


def _launch_spread_select(
    call: _Call,
    cfg: IndexerConfig,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    keys: torch.Tensor,
    parts: torch.Tensor,
    hist: torch.Tensor,
    n_pad: int,
    indices: torch.Tensor,
    lengths: torch.Tensor,
) -> None:
    """Spread select: ``parts`` programs per token count and list their rows' keys, then one program per token ranks
    the candidates (its list, as in the per-token select, in its unzeroed histogram region)."""
    stride_list = _list_stride(call, cfg)
    tokens = call.b * call.s_q
    shared = {
        "p_keys": keys,
        "p_parts": parts,
        "p_ncomp": n_comp,
        "stride_nb": n_comp.stride(0),
        "stride_ns": n_comp.stride(1) if call.per_token else 0,
        "stride_keys": n_pad,
        "stride_parts": cfg.parts * (PART_META + 2 * cfg.part_cap),
        "max_n": call.max_n,
        "topk": call.topk,
        "S_Q": call.s_q,
        "PER_TOKEN": call.per_token,
        "PARTS": cfg.parts,
        "PART_CAP": cfg.part_cap,
        "CAP": cfg.list_cap,
        "SAMPLE": cfg.sample,
        "WALKERS": 32 * cfg.select_warps,
        "BLOCK_L": cfg.block_list,
        "WHOLE": cfg.list_whole,
        "num_warps": cfg.select_warps,
    }
    if call.max_n > call.topk:  # static: otherwise no token can have more than topk rows
        launch.run(_indexer_spread_count_kernel, (tokens * cfg.parts,), **shared)
    launch.run(
        _indexer_spread_rank_kernel,
        (tokens,),
        p_list=hist,
        p_bt=block_table,
        p_idx=indices,
        p_len=lengths,
        stride_btb=block_table.stride(0),
        stride_list=stride_list,
        stride_ib=indices.stride(0),
        stride_is=indices.stride(1),
        stride_lb=lengths.stride(0),
        stride_ls=lengths.stride(1),
        PAGE=call.page,
        GATHER=spread_gather(cfg.parts, cfg.part_cap),
        **shared,
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
    index_k_layout: str = "rows",
    select: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k compressed rows per query token (global cache slots), exactly as :func:`lightning_indexer_ref`.

    Args:
        q_idx: ``[b, s_q, h, 128]`` fp16/bf16 (fp32 for the interpreter lane) indexer queries, or float8_e4m3fn
            with byte rows, h ∈ {16, 32, 64, 128} (64 for DeepSeek-V4); unit stride in the last dimension.
        weights: ``[b, s_q, h]`` fp32 head weights, already including ``128^-0.5 · h^-0.5``.
        index_k_cache: ``[num_blocks, page, 128]`` rows of q_idx's dtype, ``[num_blocks, page, 132]`` uint8 FP8 rows
            (128 e4m3 codes + one little-endian fp32 scale) or ``[num_blocks, page, 68]`` uint8 MXFP4 rows (64 bytes
            of e2m1 pairs + four e8m0 block exponents); any page size; unit stride in the last dimension.
        block_table: ``[b, max_blocks]`` int32; entries for pages holding visible rows must be valid block ids.
        n_comp: ``[b]`` int32 (token ``s`` sees ``n_comp[b] - (s_q - 1 - s)`` rows) or ``[b, s_q]`` int32 (explicit).
        topk: rows to keep per token (512 V4-Flash, 1024 V4-Pro).
        max_n_comp: static upper bound on visible rows (default ``max_blocks · page``; at most 2^30); sizes the
            grids and the workspace, and visible counts above it are clamped to it. With ``max_n_comp <= topk`` no
            scoring runs.
        out: optional preallocated ``(indices [b, s_q, topk] int32, topk_length [b, s_q] int32)``.
        workspace: optional int32 buffer of at least :func:`indexer_workspace_numel` elements (else allocated).
        select_chunk: keys per program of the chunked select (power of two ≥ 16; default chosen from the shapes).
            Never changes the result.
        index_k_layout: byte layout of FP8 and MXFP4 rows: ``"rows"`` (each row's codes then its scale bytes, as
            :func:`~wavemla.reference.indexer.quantize_index_k` writes by default) or ``"paged"`` (a page's code
            rows, then the page's scale bytes, each page contiguous: vLLM's V3.2 FP8 cache, and SGLang's and vLLM's
            DeepSeek-V4 MXFP4 caches).
        select: the top-k path, ``"token"`` (one program per query token), ``"spread"`` (a token's walks split
            among several programs, then one program per token; at most 64 query tokens) or ``"chunked"``
            (histogram, count and compact kernels over key chunks); default (None) chosen from the shapes
            (``choose_config(...).select``). ``"token"`` and ``"spread"`` need ``topk <= 4096``. Never changes the
            result.

    Returns:
        ``(indices, topk_length)``: ``indices [b, s_q, topk]`` int32 global slots
        ``block_table[b, i // page] · page + i % page`` of the selected rows in ascending row order, −1 padded;
        ``topk_length [b, s_q]`` int32 ``= min(topk, n_vis)``. Reduce it to the sparse decode's per-request ``[b]``
        with :func:`wavemla.reference.indexer.topk_length_per_request`.

    Example::

        idx, length = lightning_indexer(q_idx, weights, index_k_cache, block_table, n_comp, 512, max_n_comp=65536)
    """
    # A call with the signature of one made before launches that call's kernels again (kernels.launch).
    given = out if isinstance(out, tuple) and len(out) == 2 else (None, None)
    tensors = (q_idx, weights, index_k_cache, block_table, n_comp, *given, workspace)
    scalars = (topk, max_n_comp, select_chunk, index_k_layout, select, out is None)
    key: tuple[object, ...] | None = None
    if launch.replayable(tensors, scalars) and (out is None or all(t is not None for t in given)):
        key, ptrs = launch.call_key(tensors, scalars)
        kept = _REPLAYS.get(key)
        if kept is not None and (kept_replay := kept[0]) is not None:
            out_shapes = kept[1]
            if out is None:
                idx_out = torch.empty(out_shapes[0], dtype=torch.int32, device=q_idx.device)
                len_out = torch.empty(out_shapes[1], dtype=torch.int32, device=q_idx.device)
                inputs = (*tensors[:5], idx_out, len_out, workspace)
                kept_replay.launch(inputs, (*ptrs[:5], idx_out.data_ptr(), len_out.data_ptr(), *ptrs[5:]))
                return idx_out, len_out
            kept_replay.launch(tensors, ptrs)
            return given  # type: ignore[return-value]
    # a replay ran above only for q on the current GPU (launch.replayable); Triton launches on the current GPU
    with launch.device_guard(q_idx.device if isinstance(q_idx, torch.Tensor) else None):
        call = _validate(q_idx, weights, index_k_cache, block_table, n_comp, topk, max_n_comp, index_k_layout)
        device = q_idx.device
        checked = _check_out(out, call.b, call.s_q, call.topk, device)
        if checked is None:
            indices = torch.empty((call.b, call.s_q, call.topk), dtype=torch.int32, device=device)
            lengths = torch.empty((call.b, call.s_q), dtype=torch.int32, device=device)
        else:
            indices, lengths = checked
        with launch.recording() as rec:
            _indexer_launches(call, q_idx, weights, index_k_cache, block_table, n_comp, indices, lengths, workspace,
                              select_chunk, select)  # fmt: skip
    if key is not None and key not in _REPLAYS:
        try:
            replay: launch.Replay | None = launch.Replay(rec, (*tensors[:5], indices, lengths, workspace), ())
        except launch.NotReplayable:
            replay = None  # remembered: calls of this signature are not recorded again
        _REPLAYS.put(key, (replay, (tuple(indices.shape), tuple(lengths.shape))))
    return indices, lengths


# Launch replays of recent indexer calls by signature (kernels.launch), least recently used first.
# Values: (the replay, None where the signature cannot be replayed; the outputs' shapes).
_REPLAYS = launch.ReplayCache(16)


def _indexer_launches(
    call: _Call,
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    indices: torch.Tensor,
    lengths: torch.Tensor,
    workspace: torch.Tensor | None,
    select_chunk: int | None,
    select: str | None,
) -> None:
    """The indexer's launches for a validated call: scores, then the select ``choose_config`` picks."""
    device = q_idx.device
    cfg = choose_config(
        call.b,
        call.s_q,
        call.heads,
        call.max_n,
        select_chunk=select_chunk,
        kv_fp8=call.fp8,
        topk=call.topk,
        select=select,
        kv_fp4=call.fp4,
    )
    layout = workspace_layout(call.b, call.s_q, call.max_n, cfg)
    ws = _workspace(workspace, layout.numel, device)
    keys = ws[layout.keys : layout.hist]
    hist = ws[layout.hist : layout.counts]
    counts = ws[layout.counts : layout.thresh]
    thresh = ws[layout.thresh : layout.parts]
    if cfg.select in ("token", "spread"):
        if call.max_n > call.topk:  # static: otherwise no token can have more than topk rows
            _launch_scores(call, cfg, q_idx, weights, index_k_cache, block_table, n_comp, keys, layout.n_pad, call.topk)
        if cfg.select == "token":
            _launch_token_select(call, cfg, block_table, n_comp, keys, hist, layout.n_pad, indices, lengths)
        else:
            parts = ws[layout.parts : layout.numel]
            _launch_spread_select(call, cfg, block_table, n_comp, keys, parts, hist, layout.n_pad, indices, lengths)
        return
    common = {
        "p_ncomp": n_comp,
        "stride_nb": n_comp.stride(0),
        "stride_ns": n_comp.stride(1) if call.per_token else 0,
        "stride_keys": layout.n_pad,
        "max_n": call.max_n,
        "topk": call.topk,
        "chunk": cfg.chunk,
        "S_Q": call.s_q,
        "PER_TOKEN": call.per_token,
        "BLOCK_SEL": cfg.block_sel,
        "num_warps": 4,
    }
    select_grid = (layout.n_chunks, call.b * call.s_q)
    if call.max_n > call.topk:  # static: otherwise no token can have more than topk rows
        launch.untracked("histograms zeroed by torch")
        hist.zero_()
        _launch_scores(call, cfg, q_idx, weights, index_k_cache, block_table, n_comp, keys, layout.n_pad, call.topk)
        for pass_ in (0, 1, 2):
            launch.run(
                _indexer_hist_kernel,
                select_grid,
                p_keys=keys,
                p_hist=hist,
                PASS=pass_,
                NB0=HIST0_BINS,
                NB=HIST_BINS,
                **common,
            )
        launch.run(
            _indexer_count_kernel,
            select_grid,
            p_keys=keys,
            p_hist=hist,
            p_counts=counts,
            p_thresh=thresh,
            n_chunks=layout.n_chunks,
            NB0=HIST0_BINS,
            NB=HIST_BINS,
            **common,
        )
    launch.run(
        _indexer_compact_kernel,
        select_grid,
        p_keys=keys,
        p_bt=block_table,
        p_counts=counts,
        p_thresh=thresh,
        p_idx=indices,
        p_len=lengths,
        stride_btb=block_table.stride(0),
        stride_ib=indices.stride(0),
        stride_is=indices.stride(1),
        stride_lb=lengths.stride(0),
        stride_ls=lengths.stride(1),
        n_chunks=layout.n_chunks,
        PAGE=call.page,
        BLOCK_C=min(1024, _next_pow2(layout.n_chunks)),
        **common,
    )


def indexer_scores(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    *,
    max_n_comp: int | None = None,
    index_k_layout: str = "rows",
) -> torch.Tensor:
    """The score kernel alone: fp32 ``[b, s_q, max_n_comp]`` index scores, −inf where a token sees no row.

    Same arguments as :func:`lightning_indexer`. Scores are those the selection ranks (NaN reported as −inf, −0 as
    +0). Meant for checks and debugging; the selection path never materialises floats.

    Example::

        scores = indexer_scores(q_idx, weights, index_k_cache, block_table, n_comp)   # fp32 [b, s_q, max_n]
    """
    call = _validate(q_idx, weights, index_k_cache, block_table, n_comp, 1, max_n_comp, index_k_layout)
    device = q_idx.device
    cfg = choose_config(call.b, call.s_q, call.heads, call.max_n, kv_fp8=call.fp8, kv_fp4=call.fp4)
    n_pad = max(call.max_n, 1)
    keys = torch.empty((call.b * call.s_q, n_pad), dtype=torch.int32, device=device)
    if call.max_n > 0:
        with launch.device_guard(device):
            _launch_scores(call, cfg, q_idx, weights, index_k_cache, block_table, n_comp, keys, n_pad, 0)
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
def _production_variants(heads: int, page: int, arch: int) -> list[tuple[object, str, dict[str, object], int, int]]:
    """(kernel, variant, argument values, num_warps, num_stages) of a V4-Flash decode call: b=32, 256K rows, topk 512.

    Score-kernel variants: bf16 rows with bf16 q, FP8 rows with bf16 q, FP8 rows with FP8 q (DeepSeek's path), MXFP4
    rows (page-split) with bf16 and with FP8 q, at s_q 1 and 2, specialised for ``sm_<arch>`` the way the launcher
    would (hardware e4m3 conversion, FP8 dots and the MXFP4 byte-permute decode on sm_89+). Pointers are given by
    their Triton type; integers by value, so that the compile check specialises them the way the JIT launcher would
    (divisible by 16 or not).
    """
    b, max_n, topk = 32, 262144, 512
    blocks = max_n // page
    cvt = arch >= 89
    out: list[tuple[object, str, dict[str, object], int, int]] = []
    for fmt in ("bf16", "fp8", "fp8q", "fp8q paged", "fp4 paged", "fp4q paged"):
        fp8 = fmt != "bf16"
        fp4 = fmt.startswith("fp4")
        q_fp8 = fmt.startswith(("fp8q", "fp4q"))
        for s_q in (1, 2):
            cfg = choose_config(b, s_q, heads, max_n, kv_fp8=fp8, kv_fp4=fp4)
            layout = workspace_layout(b, s_q, max_n, cfg)
            row = INDEX_DIM if not fp8 else (MXFP4_ROW_BYTES if fp4 else FP8_ROW_BYTES) // 4
            scale = (1.0 if cvt or not fp8 or fp4 else 256.0) * (1.0 if cvt or not q_fp8 else 256.0)
            args: dict[str, object] = {
                "p_q": "*u8" if q_fp8 else "*bf16",
                "p_w": "*fp32",
                "p_k": "*u8" if fp8 else "*bf16",
                "p_kw": "*i32" if fp8 else "*bf16",
                "p_bt": "*i32",
                "p_ncomp": "*i32",
                "p_keys": "*i32",
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
                "KV_FP8": fp8 and not fp4,
                "KV_FP4": fp4,
                "KV_PAGED": fmt.endswith("paged"),
                "Q_FP8": q_fp8,
                "E4M3_CVT": cvt and fp8,
                "DOT_DTYPE": (tl.float8e4nv if cvt else tl.float16) if q_fp8 else tl.bfloat16,
                "DOT_PRECISION": "tf32",
                "SCORE_SCALE": scale,
                "BLOCK_N": cfg.block_n,
                "FP4_ASM": fp4 and cvt and FP4_PERMUTE_DECODE,
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
        "BLOCK_SEL": cfg.block_sel,
    }
    for pass_ in (0, 1, 2):
        args = {**select, "p_hist": "*i32", "PASS": pass_, "NB0": HIST0_BINS, "NB": HIST_BINS}
        out.append((_indexer_hist_kernel, f"pass {pass_}", args, 4, 3))
    args = {
        **select,
        "p_hist": "*i32",
        "p_counts": "*i32",
        "p_thresh": "*i32",
        "n_chunks": layout.n_chunks,
        "NB0": HIST0_BINS,
        "NB": HIST_BINS,
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
        "BLOCK_C": min(1024, _next_pow2(layout.n_chunks)),
    }
    out.append((_indexer_compact_kernel, "", args, 4, 3))
    token = choose_config(b, 1, heads, max_n, topk=topk, select="token")
    args = {
        "p_keys": "*i32",
        "p_list": "*i32",
        "p_bt": "*i32",
        "p_ncomp": "*i32",
        "p_idx": "*i32",
        "p_len": "*i32",
        "stride_btb": blocks,
        "stride_nb": 1,
        "stride_ns": 0,
        "stride_keys": layout.n_pad,
        "stride_list": HIST0_BINS + 2 * HIST_BINS,
        "stride_ib": topk,
        "stride_is": topk,
        "stride_lb": 1,
        "stride_ls": 1,
        "max_n": max_n,
        "topk": topk,
        "S_Q": 1,
        "PER_TOKEN": False,
        "PAGE": page,
        "CAP": token.list_cap,
        "SAMPLE": token.sample,
        "WALKERS": 32 * token.select_warps,
        "BLOCK_L": token.block_list,
        "WHOLE": token.list_whole,
    }
    out.append((_indexer_select_kernel, "per token", args, token.select_warps, 3))
    spread = choose_config(b, 1, heads, max_n, topk=topk, select="spread")
    spread_args: dict[str, object] = {
        "p_keys": "*i32",
        "p_parts": "*i32",
        "p_ncomp": "*i32",
        "stride_nb": 1,
        "stride_ns": 0,
        "stride_keys": layout.n_pad,
        "stride_parts": spread.parts * (PART_META + 2 * spread.part_cap),
        "max_n": max_n,
        "topk": topk,
        "S_Q": 1,
        "PER_TOKEN": False,
        "PARTS": spread.parts,
        "PART_CAP": spread.part_cap,
        "CAP": spread.list_cap,
        "SAMPLE": spread.sample,
        "WALKERS": 32 * spread.select_warps,
        "BLOCK_L": spread.block_list,
        "WHOLE": spread.list_whole,
    }
    out.append((_indexer_spread_count_kernel, "spread", spread_args, spread.select_warps, 3))
    args = {
        **spread_args,
        "p_list": "*i32",
        "p_bt": "*i32",
        "p_idx": "*i32",
        "p_len": "*i32",
        "stride_btb": blocks,
        "stride_list": HIST0_BINS + 2 * HIST_BINS,
        "stride_ib": topk,
        "stride_is": topk,
        "stride_lb": 1,
        "stride_ls": 1,
        "PAGE": page,
        "GATHER": spread_gather(spread.parts, spread.part_cap),
    }
    out.append((_indexer_spread_rank_kernel, "spread", args, spread.select_warps, 3))
    return out


def compile_variant(fn: object, args: dict[str, object], *, arch: int, num_warps: int, num_stages: int) -> Any:
    """Compile one kernel variant of :func:`_production_variants` for ``sm_<arch>`` (no GPU needed): its upper-case
    arguments are constexprs, the rest pointer types (strings) and ints. Returns Triton's compiled kernel."""
    from wavemla.resources import compile_for_target

    return compile_for_target(
        fn,
        arch=arch,
        num_warps=num_warps,
        num_stages=num_stages,
        pointers={k: v for k, v in args.items() if not k.isupper() and isinstance(v, str)},
        ints={k: v for k, v in args.items() if not k.isupper() and isinstance(v, int)},
        constexprs={k: v for k, v in args.items() if k.isupper()},
    )


def compile_report(arch: int, *, heads: int = 64, page: int = 64) -> list[dict[str, object]]:
    """Compile every kernel this module launches for ``sm_<arch>`` (no GPU needed) and report its resources.

    The variants are those of a V4-Flash decode call (bf16 and FP8 index-K, s_q 1 and 2, page 64 by default).
    Needs JIT kernels: call it in a process where the Triton interpreter is off. Returns one dict per variant:
    kernel, variant, arch, shared (bytes of shared memory), num_warps, num_stages, pipelined (async copies found).
    """
    if _interpreted():
        raise RuntimeError("compile_report: the Triton interpreter is active; compile from a process without it")
    reports: list[dict[str, object]] = []
    for fn, variant, args, num_warps, num_stages in _production_variants(heads, page, arch):
        assert isinstance(fn, triton.runtime.JITFunction)
        compiled = compile_variant(fn, args, arch=arch, num_warps=num_warps, num_stages=num_stages)
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
