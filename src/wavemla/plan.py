"""The planner: a pure function from a decode workload and a GPU description to launch choices.

``plan(workload, device) -> Plan`` picks the tile shape (BLOCK_H query heads by BLOCK_N KV rows), warps and pipeline
depth, and how the flattened work list ``(query token, KV tile)`` is cut into programs. It never queries a GPU,
never compiles and never launches anything, so plans for any GPU can be made and tested on a CPU from a
:class:`DeviceSpec` preset. docs/planner.md describes the model; this docstring is the summary.

Resources. A configuration's shared memory, registers and spill bytes decide how many programs an SM holds. They
come from, in order: the H200 measurements (``_SM90_TABLE``, which also carry a measured tile time), the on-disk
cache of :mod:`wavemla.resources` for the installed Triton, the table of compiled resources committed with the
package (every configuration the planner can pick on sm_80/86/89/90/100/120), and last an estimate.

Candidates. :func:`candidate_configs` lists tile shapes by head count. On parts with 100 KB of shared memory per SM
(sm_86, sm_89, sm_120, sm_121) it keeps only those that fit two programs per SM when any does: with one program per
SM these parts are memory-latency bound (a profile of an RTX PRO 6000 running DSV4 decode showed attention kernels
capped at 80 KB of shared memory with 4 to 12 of 48 warps active and the SMs stalled on memory). Where no tile
time was measured (every arch but sm_90) it also leaves out configurations whose compiled stack frame exceeds
``_SPILL_STACK_MAX`` bytes per thread when one within it fits: the cost model does not price spills.

Work partition. Every query token owns ``n_tiles`` tiles (its main-cache tiles, then its extra-cache tiles), the same
for all tokens because index lists have a static width. Program ``p`` takes units ``[p·u, (p+1)·u)`` of the
``T·n_tiles`` units of one head block, with ``u = units_per_part``. A token cut by a program boundary is finished by the
program that writes its last piece, or with tiles under 64 rows by the combine kernel (``Plan.merge_in_kernel``). The
time of a launch is its waves times the longest program; a program costs its tiles (one tile slows down as more programs
share the SM) plus a fixed cost per token segment it touches. The planner costs ``u`` at the smallest value for each
wave count and each number of programs per SM, at every multiple of ``n_tiles`` (no cut token) and at every even split
of a token, and keeps the cheapest, merge of cut tokens included. Because ``u`` is continuous rather than a split count
per request, adding one request never adds a whole wave: the extra units spread over all programs. It also costs
padded tokens (``Plan.token_units``): where ``u = ceil(n_tiles / k)`` does not divide a token's tiles, every token is
padded with empty units to ``k·u``, so each program runs one piece of one token and none starts a second token
segment. ``tail_efficiency`` is the busy fraction of the launch's program slots.

Overrides from :mod:`wavemla.config` are applied last; one the kernel or the device cannot honour raises
:class:`PlanError` naming the knob.

The paged dense decode has its own planner in the last section of this file (``DenseWorkload``, ``plan_dense``,
``DensePlan``, ``dense_schedule``): it fixes the tile and the number of parts; a device scheduler assigns the work
from the actual lengths (docs/dense-decode.md).

Example::

    from wavemla.device import get_spec
    p = plan(Workload(batch=96, s_q=1, h_q=64, topk=128, extra_topk=512, is_fp8=True), get_spec("rtx-pro-6000"))
    print(p.config, p.programs_per_sm, p.waves, p.tail_efficiency, p.reasons[-1])
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from wavemla import config
from wavemla.device import KIB, DeviceSpec


class PlanError(ValueError):
    """No launch configuration satisfies the workload, the device and the knob overrides."""


@dataclass(frozen=True)
class Workload:
    """One sparse-decode call, described by static shapes only.

    ``topk`` is the width of the main index list, ``extra_topk`` of the extra one (0: no extra cache).
    ``batch_invariant``: True or False asks for the batch-invariant plan or not, whatever the knob; None (the default)
    leaves it to ``WAVEMLA_BATCH_INVARIANT``.
    """

    batch: int
    s_q: int
    h_q: int
    topk: int
    extra_topk: int = 0
    is_fp8: bool = True
    dtype: str = "bf16"
    batch_invariant: bool | None = None

    def __post_init__(self) -> None:
        for name in ("batch", "s_q", "h_q", "topk", "extra_topk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        if not isinstance(self.is_fp8, bool):  # a string such as "false" is truthy: it would plan FP8
            raise ValueError(f"is_fp8: expected a bool, got {self.is_fp8!r}")
        if self.batch_invariant is not None and not isinstance(self.batch_invariant, bool):
            raise ValueError(f"batch_invariant: expected a bool or None, got {self.batch_invariant!r}")
        if self.s_q < 1 or self.h_q < 1:
            raise ValueError(f"s_q and h_q: must be >= 1, got s_q={self.s_q}, h_q={self.h_q}")
        if self.dtype not in ("bf16", "fp16"):
            raise ValueError(f"dtype: expected 'bf16' or 'fp16', got {self.dtype!r}")

    @property
    def tokens(self) -> int:
        return self.batch * self.s_q


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time shape of the split kernel."""

    block_h: int
    block_n: int
    num_warps: int
    num_stages: int

    def __str__(self) -> str:
        return f"{self.block_h}x{self.block_n}x{self.num_warps}x{self.num_stages}"

    @property
    def label(self) -> str:
        return f"BLOCK_H={self.block_h} BLOCK_N={self.block_n} warps={self.num_warps} stages={self.num_stages}"


@dataclass(frozen=True)
class Resources:
    """Static per-program resources of a kernel configuration on one architecture."""

    smem_bytes: int
    regs_per_thread: int
    source: str  # "table" (H200 measured), "compiled" (from a cubin: disk cache or packaged table) or "estimate"
    tile_us: float | None = None  # measured time of one tile in one program at this config's occupancy
    segment_us: float | None = None  # measured start of a token segment in a program (sm_90 FP8 table entries)
    first_segment_us: float | None = None  # the same for a program's first segment (None: segment_us)
    shared_tile_us: float | None = None  # measured tile time where two or more programs share an SM (None: tile_us)
    stack_bytes: int | None = None  # per-thread stack frame (spills) from the cubin, when compiled
    note: str = ""  # where the numbers come from, for reasons
    num_warps: int | None = None  # warps a program launches where the kernel keeps its own (None: the config's)


def max_pieces(n_tiles: int, units_per_part: int) -> int:
    """The most pieces a token of ``n_tiles`` tiles is cut into when every program takes ``units_per_part``
    consecutive tiles of the flattened (token, tile) space. Tokens start at multiples of ``n_tiles``, so at offsets
    into a program that are multiples of ``g = gcd(n_tiles, units_per_part)``; the worst starts ``units_per_part - g``
    tiles into one."""
    g = math.gcd(n_tiles, units_per_part)
    return (units_per_part - g + n_tiles - 1) // units_per_part + 1


def segments_per_program(n_tiles: int, units_per_part: int) -> int:
    """Token segments in the busiest program when every program takes ``units_per_part`` consecutive tiles of the
    flattened (token, tile) space: programs start at multiples of ``gcd(units_per_part, n_tiles)`` tiles into a
    token, so the worst start is that many tiles before a token's end."""
    g = math.gcd(units_per_part, n_tiles)
    return -(-(n_tiles - g + units_per_part) // n_tiles)


def tiles_label(units_per_part: int, whole_units: int = 0, token_units: int = 0) -> str:
    """A sparse plan's tiles a program as the tools print it: ``U+W`` for a spread plan (its run of the leftover
    tokens' tiles, then its whole tokens' units), ``U/T`` for a padded one (its tiles, then the units a token
    occupies), else ``U``."""
    if whole_units:
        return f"{units_per_part}+{whole_units}"
    if token_units:
        return f"{units_per_part}/{token_units}"
    return str(units_per_part)


def spread_max_left(n_tiles: int) -> int:
    """The most leftover query tokens past a perfect fit that the spread partition is offered for tokens of ``n_tiles``
    tiles (see _SPREAD_MAX_LEFT)."""
    return _SPREAD_MAX_LEFT_LONG if n_tiles > _SPREAD_LONG_TILES else _SPREAD_MAX_LEFT


def spread_slots(token: int, n_tiles: int, units_per_part: int) -> tuple[int, int]:
    """A cut token's first and last workspace slots: its pieces are the runs of ``units_per_part`` units of the
    flattened (token, tile) space that hold its tiles, slot ``token + run``."""
    return token + token * n_tiles // units_per_part, token + ((token + 1) * n_tiles - 1) // units_per_part


def _cut_note(cfg: KernelConfig, n_tiles: int, upp: int, pieces_tiles: int | None, needs_combine: bool,
              ws: bool = False, ws_merge: bool = False) -> str:  # fmt: skip
    """How a plan's tokens are cut and merged, for its reasons (``ws``: the warp-specialized sm_90 kernel runs, which
    merges batch-invariant pieces where one program ran all of a token's, and tokens cut between programs itself
    where ``ws_merge``, else leaves them to the combine kernel)."""
    if pieces_tiles is not None and pieces_tiles < n_tiles:  # batch-invariant pieces
        pieces = n_tiles // pieces_tiles
        if not needs_combine:
            return f", {pieces} pieces a token, merged in their programs"
        if ws:
            between = "by the program whose piece completes the token" if ws_merge else "by the combine kernel"
            return (
                f", {pieces} pieces a token, merged in their program where it ran all of a token's, {between} where "
                "they were cut between programs"
            )
    elif needs_combine:
        pieces = max_pieces(n_tiles, upp)
    else:
        return ", no token cut"
    into = "into 2 pieces" if pieces <= 2 else f"into up to {pieces} pieces"
    if ws_merge:
        return f", tokens cut between programs {into}, merged by the program whose piece completes the token"
    if ws or not merges_in_kernel(cfg):
        return f", tokens cut between programs {into}, merged by the combine kernel"
    if pieces <= 2:
        return f", tokens cut between programs {into}, merged by the split kernel's two-piece merge"
    return (
        f", tokens cut between programs {into}, merged by the split kernel (the two-piece merge for tokens of two"
        ", the general merge for more)"
    )


def merges_in_kernel(cfg: KernelConfig) -> bool:
    """Whether the split kernel merges cut tokens itself for this tile shape (see :attr:`Plan.merge_in_kernel`)."""
    return cfg.block_n >= 64


class _Tiled:
    """The tile shape of a plan's ``config`` (a KernelConfig), read as the plan's own."""

    config: KernelConfig

    @property
    def block_h(self) -> int:
        return self.config.block_h

    @property
    def block_n(self) -> int:
        return self.config.block_n

    @property
    def num_warps(self) -> int:
        return self.config.num_warps

    @property
    def num_stages(self) -> int:
        return self.config.num_stages


@dataclass(frozen=True)
class Plan(_Tiled):
    """Launch choices for one workload on one device, and why.

    ``programs_per_sm`` is how many programs of the configuration an SM can hold; ``active_per_sm`` how many the
    launch puts on its busiest SM. ``tail_efficiency`` is the fraction of the launch's program slots (waves x
    slots x units per program) that does work.
    """

    config: KernelConfig
    num_head_blocks: int
    n_tiles_main: int
    n_tiles: int
    units_per_part: int
    num_parts: int
    needs_combine: bool
    programs: int
    slots: int
    programs_per_sm: int
    waves: int
    tail_efficiency: float
    predicted_us: float
    resources: Resources
    reasons: tuple[str, ...] = field(default_factory=tuple)
    active_per_sm: int = 1
    tile_us: float = 0.0  # predicted time of one tile in one program at active_per_sm
    combine_us: float = 0.0  # predicted cost of merging cut tokens (0: no token cut), included in predicted_us
    # Batch-invariant plans: the fixed piece (tiles) every token is cut into; a program runs units_per_part / pieces
    # _tiles whole pieces, each written to its own workspace slot. None: a program's units are one piece.
    pieces_tiles: int | None = None
    # The warp-specialized sm_90 kernel merges the tokens cut between its programs itself (a count per token, head
    # block and math warpgroup; the piece completing it merges) instead of launching the combine kernel.
    ws_merge: bool = False
    # Whole tokens first, the leftover spread (see _SPREAD_MAX_LEFT): each of the num_parts parts runs
    # units_per_part units of the leftover tokens (the first b·s_q - num_parts·whole_units/n_tiles query tokens,
    # the only ones cut), then whole_units units of whole tokens. 0: one uniform range of units_per_part a part.
    whole_units: int = 0
    # Padded tokens: each token occupies this many units of the work list, its tiles and then empty ones up to a
    # multiple of units_per_part, so that every program runs one piece of one token (no program starts a second token
    # segment) where units_per_part does not divide a token's tiles; the kernels skip the empty units. 0: a token
    # occupies its n_tiles units.
    token_units: int = 0

    @property
    def unit_tiles(self) -> int:
        """Units a token occupies in the work list the kernels and the combine walk (:attr:`token_units`, or
        ``n_tiles``)."""
        return self.token_units or self.n_tiles

    @property
    def slot_units(self) -> int:
        """Units per workspace slot: a token's partial from units ``[k·slot_units, (k+1)·slot_units)`` lands in slot
        ``token + k``."""
        return self.pieces_tiles if self.pieces_tiles is not None else self.units_per_part

    @property
    def writes_partials(self) -> bool:
        """Whether the split kernel writes partials to the workspace: tokens cut between programs, or batch-invariant
        pieces (merged by the program that writes a token's last piece, or by the combine kernel)."""
        return self.needs_combine or (self.pieces_tiles is not None and self.pieces_tiles < self.n_tiles)

    @property
    def merge_in_kernel(self) -> bool:
        """Whether the split kernel merges cut tokens itself (the program writing a token's last piece) rather than
        leaving them to the combine kernel. Chosen by tile: on the H200 (h=64, FP8) the in-kernel merge measured
        faster with 64-row tiles (CSA b=148: 120.1 vs 131.1 µs; b=48: 60.7 vs 65.9) and slower with 16- and 32-row
        tiles, where small batches cut each token into many pieces and the combine spreads their merge over every
        head (CSA b=1: 33.9 vs 22.4 µs; b=32: 54.3 vs 46.8). In-kernel figures from
        benchmarks/results/2026-11-30-h200-fused-merge.log, combine figures from the same GPU's
        2026-11-30-h200-sparse-decode-h64.json. Either way the merge is the same code in the same order, so the bits
        do not change. (This is the Triton kernel's choice: the warp-specialized sm_90 kernel's is :attr:`ws_merge`,
        docs/sparse-decode.md.)"""
        return merges_in_kernel(self.config)

    @property
    def q_scratch(self) -> bool:
        """Whether a bf16 q over FP8 rows is converted to fp16 inside the split kernel through per-program scratch
        rows, rather than by a conversion kernel launched before it (programs of 3 tiles or more) or in registers
        (1 or 2 tiles: no extra launch, and the registers last only a short loop). Only 16-head tiles use the
        scratch rows. H200 measurements, CSA h=64, each pair in one run:

        - 64-head tiles take the conversion kernel, which the split kernel is launched behind (programmatic
          dependent launch), prefetching its first tile's rows into L2 while q converts. 64x64: 2-6% faster than
          the scratch rows at CSA b = 34..256 (b=128: 80.3 vs 84.9 µs, b=256: 149.8 vs 157.1) and 0-3% at HCA
          (2026-11-30-h200-qpath.log). 64x32: the scratch rows were slower even against a plain torch conversion,
          the row prefetch already filling the register file (b=32: 46.1 vs 45.8; 2026-11-30-h200-q-scratch.log).
        - 16x32 tiles: the scratch rows measured faster than a torch conversion before the split kernel (b=8: 26.8
          vs 29.6; same log) and are a wash against the dependent launch: CSA b=8 27.5 vs 29.6 µs, b=12 and 16
          equal, HCA b=8 and 16 38.3 vs 37.6 and 47.3 vs 46.3 (2026-11-30-h200-qpath16.log).
        - Registers beat both for one-tile programs (b=1, 16x32: 17.6 vs 20.5).

        Staged FP8 tiles (``num_stages`` > 1) convert q in registers as eight 64-wide blocks.

        The fp16 values are the same either way."""
        tiles = self.units_per_part + self.whole_units  # a spread plan's program: its run, then its whole tokens
        return tiles >= Q_CONVERT_MIN_TILES and self.config.block_h < 64 and self.config.num_stages == 1

    @property
    def segments_per_program(self) -> int:
        """Token segments in the busiest program (:func:`segments_per_program`; a spread plan's run of cut units and
        its whole tokens)."""
        if self.whole_units:
            return 1 + self.whole_units // self.n_tiles
        if self.token_units:
            return 1
        return segments_per_program(self.n_tiles, self.units_per_part)

    def cut_tokens(self, tokens: int) -> int:
        """Query tokens (of ``tokens``) a spread plan cuts between programs: the first ones, merged by the combine
        kernel or in the split kernel (:attr:`ws_merge`). 0 for other plans."""
        return tokens - self.num_parts * (self.whole_units // self.n_tiles) if self.whole_units else 0

    def workspace_rows(self, tokens: int) -> int:
        """Rows of the split workspace (query tokens + slots); 0 when no partial is written. A spread plan's cut
        tokens use slots up to the last one's last (:func:`spread_slots`)."""
        if not self.writes_partials:
            return 0
        if self.whole_units:
            cut = self.cut_tokens(tokens)
            return spread_slots(cut - 1, self.n_tiles, self.units_per_part)[1] + 1
        return tokens + -(-tokens * self.unit_tiles // self.slot_units)


# Pipeline stages of the split kernel's staged FP8 tiles, and their time against the register tile's at the same
# partition. On the H200 (benchmarks/experiments/gpu_sparse_staged.sh 1980344, 2026-12-03-h200-sparse-staged-1980344
# .json) the 16x32 staged tile took 0.90-0.95 of the register tile's time at h=16 CSA/HCA b = 32..256 and at h=64 in
# 16-head tiles, the same at b = 8: a staged plan is priced as the register tile's at its partition times this ratio
# (so both choose the same partition where both run as many programs per SM). Pricing its tile alone 0.3 µs cheaper
# (2.0 µs) instead let the combine's fixed cost pick whole-token programs at CSA h=16 b = 159..171, measured 76.5-77.6
# µs (2026-12-03-h200-sparse-decode-curve-h16-staged.json) against 63.5-64.4 for the 13-tile programs this ratio
# picks there (-changed-h16-staged-ratio.json).
STAGED_FP8_STAGES = 3
_STAGED_FP8_RATIO = 0.93


def staged_fp8(is_fp8: bool, num_stages: int) -> bool:
    """Whether the sparse split kernel runs FP8 rows as staged tiles (kernels/sparse_decode.py,
    ``_attend_tiles_staged``): at ``num_stages`` > 1; at 1 the raw rows are decoded in registers."""
    return is_fp8 and num_stages > 1


# The 16x32 FP8 tiles' time where two programs share an SM (a launch of more programs than SMs), for parts of one
# head block (h <= 16): fitted to the 16-head b = 1..256 curves of the register and staged tiles
# (benchmarks/experiments/fit_shared_tile.py, 2026-12-03-fit-shared-tile.txt: rms log error 7-8% against 17% at one
# time of 2.3 µs, predicted / measured 0.96-1.02 in each group, where one time gave 0.78-0.91 for those launches).
# The h=16 plans it moved were timed against the plans before, three times (benchmarks/experiments/
# gpu_shared_tile.sh, 2026-12-03-h200-shared-tile-ab-{1,2,3}.json): 16 of 18 faster by 5-25% (CSA b = 172..184:
# 77.1-78.2 -> 67.1-68.4 µs), HCA b=6 within 1%, HCA b=7 and b=10 5% and 11% slower (21.5 -> 22.6, 23.6 -> 26.2 µs).
# The 36 moved batches of the curves, re-measured as the curves were (-changed-h16{,-hca}-shared-tile.json): CSA
# 1285.7 -> 1142.6 µs over 24, HCA 1135.9 -> 1056.2 over 12; the slower picks are near-ties in the model.
# Parts of more head blocks keep one time: the fit saw none, and at h=64 (4 head blocks a part, whose programs read
# the same rows from L2) one time ranks the measured HCA b = 8..11 picks the right way round (the 16x32 entry below).
_SHARED_16X32_US = 2.9

# Static resources of the split kernel per (block_h, block_n, num_warps, num_stages, is_fp8) on sm_90, read from the
# compiled kernel on an H200 (Triton 3.6: n_regs, shared memory), with the time of one tile measured there. These
# win over the compiled table on sm_90: they carry a measured tile cost.
_SM90_TABLE: dict[tuple[int, int, int, int, bool], Resources] = {
    # FP8 MODEL1 rows: tile, segment and first-segment µs of 64x64x8, 64x32x8 and 16x32x4 fitted, with _SM90_BUSY,
    # to 72 measured (tile, tiles per program) points at CSA/HCA h=64 b = 1..256 that ran today's launch path
    # (benchmarks/experiments/fit_sm90.py over benchmarks/results/2026-11-30-h200-refit.json and -qpath.json, output
    # in 2026-11-30-h200-fit-sm90.txt: rms log error 4-9% per configuration; the fitted values rank 2 of 38 pairs of
    # partitions measured >3% apart at one batch the wrong way round). 64x32 programs of 3+ tiles start their first
    # segment behind the q conversion with its rows prefetched: that start fits at 0. 16x32: tile 2.4 and first
    # segment 4.5 as fitted, moved to 2.3 and 4.0 (rms 8.3 -> 8.9%) so that the model ranks the measured choices at
    # HCA b = 8..11 (16x32, 6 tiles: 34.9-38.5 µs against 64x32, 3 tiles: 40.3-44.8; the b = 1..256 curves) the
    # measured way round. 16x16x4: an earlier fit (2026-11-30-h200-partition-grid.json, with _SEGMENT_US); 32x32x8:
    # the time of an earlier kernel (2026-11-30-h200-kernel-variants.log). Shared memory: the kernel compiled by the
    # H200's Triton 3.6 for sm_90 (64-head FP8 tiles: with P's scratch rows, 8 KB and 4 KB more than before). The
    # tile times predate the next-tile L2 prefetch and P's scratch rows (3-9% faster on 64-head tiles,
    # 2026-12-01-h200-tile-loop-pws.log). A re-fit of 64x64 alone to the new curves (tile 4.15, segment 3.75, first
    # segment 7.0 µs; rms 3.4% against 15.3%, 2026-12-01-h200-fit-sm90.txt) changed 116 of their 1,536 plans and
    # measured 2.7% slower over them (64x64 in place of 64x32 at b = 10-33: 17-22% slower;
    # 2026-12-01-h200-refit64-rejected.log). The 64x64 and 64x32 values below were then re-chosen by the picks they
    # make (benchmarks/experiments/fit_tiles.py over 132 measured partitions of the current kernel at 54 (shape,
    # batch) points, 2026-12-01-h200-fit-tiles.txt): the sum of pick / fastest - 1 fell from 0.46 to 0.14 and the
    # pairs ranked the wrong way round from 12 to 3 of 89; of the value sets tied there, this one moves the fewest
    # of the 2,048 curve plans (22: HCA at 12-33 tokens to 64x64, and at h=128 or s_q=2 b = 172..187 to whole
    # tokens), each timed against the plan before in one run (-tile32-ab.json, -refit8-ab.json): 21 faster by up to
    # 6%, HCA h=64 b = 21 0.7% slower. Before: 64x64 5.0 / 3.5 / 8.25, 64x32 3.2 / 2.75 / 0.
    (64, 64, 8, 1, True): Resources(139264, 255, "table", tile_us=4.5, segment_us=3.0, first_segment_us=9.5),
    (64, 32, 8, 1, True): Resources(102400, 255, "table", tile_us=3.2, segment_us=3.25, first_segment_us=0.0),
    (32, 32, 8, 1, True): Resources(67584, 255, "table", tile_us=8.6),  # spills: slow
    (16, 32, 4, 1, True): Resources(
        50176, 255, "table", tile_us=2.3, segment_us=3.5, first_segment_us=4.0, shared_tile_us=_SHARED_16X32_US
    ),
    # Staged 16x32 FP8 tiles (kernels/sparse_decode.py, _attend_tiles_staged): the register tile's costs, the plan
    # then priced at _STAGED_FP8_RATIO of them (CSA b=256, 20 tiles a program: 85.8 -> 78.9 µs; HCA b=256, 36 tiles:
    # 144.2 -> 129.9). Shared memory and registers: the kernel compiled for sm_90 by Triton 3.6 (regs.py).
    (16, 32, 4, STAGED_FP8_STAGES, True): Resources(
        83456, 255, "table", tile_us=2.3, segment_us=3.5, first_segment_us=4.0, shared_tile_us=_SHARED_16X32_US
    ),
    (16, 16, 4, 1, True): Resources(33280, 255, "table", tile_us=5.0),
    # bf16 rows (Triton pipelines the row gather into shared memory at 2 stages): tile µs from the v2ns2 rows of the
    # same log; shared memory of the current kernel (index prefetch) compiled by Triton 3.6 for sm_90
    (64, 64, 8, 2, False): Resources(197632, 255, "table", tile_us=7.9),
    (64, 32, 8, 2, False): Resources(131328, 255, "table", tile_us=4.5),
    (16, 32, 4, 2, False): Resources(50432, 223, "table", tile_us=3.6),
}

# The warp-specialized sm_90 kernel (kernels/sparse_decode_ws.py), which runs in place of the Triton kernel's 64x64
# FP8 tiles wherever it applies: 207,296 B of shared memory (one program per SM; the 168 registers are the register
# file over its 384 threads, which its partitions hold as 112 (gather) and 192/200 (math)) and its own cost model
# (_Coster._ws): a program costs its tiles (tile_us, times 1 + _SM90_WS_BUSY x the fraction of slots busy), a fixed
# start (first_segment_us + _PROGRAM_US: q staged, the gather getting ahead, the epilogue) and segment_us for each
# further token segment. Tokens cut between programs are merged by the combine kernel, priced by the cut tokens'
# fp16 partials read and their outputs written at DRAM bandwidth, its launch and _SM90_WS_COMBINE_US, plus
# _SM90_WS_WIDE_US per token where it loads every piece at once (16+ pieces rounded up: one program per token, head
# and 128 columns; CSA b = 3..9 in 1-tile programs, 10 pieces a token, took 1.7 µs more per token, 2-tile programs
# 0.3). First fitted by coordinate descent (benchmarks/experiments/fit_ws.py) to 69 measured partitions at CSA/HCA
# h=64, b = 1..256 (2026-12-02-h200-ws-grid-c6b0e72.json) and the six b = 1..256 curves of its first costs
# (2026-12-02-h200-sparse-decode-curve-*-ws.json; 2026-12-02-h200-fit-ws.txt); the values are then chosen by the
# picks they make (benchmarks/experiments/choose_ws.py; 2026-12-02-ws-combine-candidate.log): over the 127 (shape,
# batch) points measured with two or more plans, summed pick / fastest - 1 of 0.77 (1.70 with the combine priced as
# the Triton kernel's 4-byte partials of every piece), rms log error 5.0% over 1,660 64x64 points. The 328 curve
# plans those values moved, re-measured (-sparse-decode-changed-*-ws-combine.json): geo-mean 0.966 of the plans
# they replaced, 155 faster by more than 3%, 4 slower by 3.1-4.7%.
_SM90_WS = Resources(207296, 168, "table", tile_us=3.7, segment_us=6.0, first_segment_us=5.0, num_warps=12)
_SM90_WS_BUSY = 0.2
_SM90_WS_COMBINE_US = 2.0
_SM90_WS_WIDE_US = 1.2
# Each wave after the first: CSA h=64 b=256 in 128 programs of two whole tokens took 116.1 µs on that grid, against
# 2 x 60.9 - 3 (launch) for b=128 in programs of one token: a program's second segment starts with the gather already
# ahead, a second wave's programs start cold.
_SM90_WS_WAVE_US = 3.0
# Batch-invariant pieces under that kernel: a piece boundary inside a token keeps the staged q and the gather's run of
# tiles (the math writes the piece's partial and starts a new softmax), and a token whose pieces all ran in one
# program is merged there (its partials read back from L2, the output written: _SM90_WS_HELD_US per piece); only
# tokens cut between programs go to the combine kernel. A first merge, loading each 64-column box of a piece in
# turn, measured (bi_cost.py, 2026-12-02-h200-ws-held-023726f.log) CSA 2 pieces of 5 tiles 15 µs and HCA 6 of 3
# tiles 52 µs per held token over the whole-token plan: 3.5 µs a piece boundary, 5.75 µs a merged piece. Loading
# two boxes and the lse of a piece at once, then also a piece ahead, a held two-piece token cost 12.9 (CSA) and 13.8
# µs (HCA) more (2026-12-02-h200-ws-held-23fa0e2.log, -ws-held-final-bc1850b.log): one boundary, two pieces at 4.9.
# That merge was unrolled code run once per held token, 3,591 SASS instructions for the two math warpgroups
# (2026-12-02-sparse-ws-ptx-size-triton36.txt), and its cost was mostly instruction fetch (Nsight Compute at CSA
# b=128: warps waiting for an instruction in 16.5% of the samples, 5.5% in the default build). As one loop over (box,
# piece) a held two-piece token costs 6.6 µs (CSA) and 7.6 µs (HCA) over the whole-token plan at b=128
# (gpu_ws_merge_loop.sh, 2026-12-02-h200-ws-merge-loop.json): one boundary, two pieces at 1.8. The price stays 4.9: at
# 1.8 no h=64 s_q=1 partition moves, but CSA at h=128 and s_q=2 and HCA at h=192 go from whole tokens to two pieces.
# Measured for CSA h=128 (gpu_bi_h128.sh, 2026-12-02-h200-bi-h128.json), that takes the worst batch-invariant/default
# ratio over b = 32..128 from 1.28 to 1.17 but b = 64..128 from 0.98-1.07 to 1.15-1.17. (The in-program merge with
# two head blocks or two query tokens, which HCA at h=128 and s_q=2 run, passes its GPU tests:
# test_sparse_decode_ws.py's s2- and h128-batch-invariant-mixed cases, 2026-12-02-h200-ws-merge-a7453e3.log.)
_SM90_WS_PIECE_US = 3.5
_SM90_WS_HELD_US = 4.9
# Tokens cut between programs of that kernel merged in it (Plan.ws_merge): each math warpgroup counts its piece once
# its partial is stored, and the one whose count completes merges the token's columns (the loop merge above), so no
# combine kernel runs. Timed against the combine on the same partitions (partition_sweep.py :merge=on/off, this
# kernel's build: 2026-12-02-h200-ws-merge-a7453e3.json), the merge sits at the end of a program, where the combine
# it replaces cost 12-13 µs (2026-12-02-h200-combine-share.json), and took part of that back in programs of a token's
# tiles or more cutting tokens in two: CSA b=133, 148 (11-12 tiles), 200 (16) 2.9, 0.2, 3.5 µs faster, HCA b=133, 148
# (19-21 tiles) 3.7 and 3.5. Shorter programs, two pieces a token: CSA b=64 (5, 6 tiles) 0.6 and 0.5 µs slower, b=32
# (5) 1.3, HCA b=64 (9) 1.7. Tokens of 3 pieces or more: 2.4-8.1 µs slower (CSA b=8..32, HCA b=16), except CSA b=16 in
# 1-tile programs (two waves) 3.3 faster. Batch-invariant plans were no faster with it (bi_cost.py, the same run:
# 2026-12-02-h200-bi-cost-ws-merge-a7453e3.json). So the planner uses it for
# default plans whose tokens are cut into at most _SM90_WS_MERGE_MAX_PIECES pieces by programs of at least a token's
# tiles, priced as the combine less _SM90_WS_MERGE_SAVE_US (WAVEMLA_SPARSE_WS_MERGE=on: every cut token, priced so).
_SM90_WS_MERGE_MAX_PIECES = 2
_SM90_WS_MERGE_SAVE_US = 2.0
# Beside that kernel, the Triton kernel's tiles of under 64 heads (16x32, 16x16, 32x32) are offered for at most this
# many query tokens (b x s_q). Every plan the planner can offer at b = 1..6 and 8 (16x32 in 1-, 2- and 4-tile
# programs, the warp-specialized 64x64 in 1-, 2- and 3-tile programs; CSA and HCA at h=64, s_q=2 and h=128) was
# timed on an H200 (benchmarks/experiments/gpu_small_b.sh, 2026-12-02-h200-small-b.json): 16x32 was fastest only at 1
# and 2 tokens (CSA h=64 b=1: 16.0 us against 19.0, b=2: 18.0 against 20.8) or within 2% of the warp-specialized
# plan; from 3 tokens on the warp-specialized plan measured fastest or within 1.5%, and 16x32 plans measured
# 18-39% above the model's prediction wherever a launch of them held more programs than SMs and fewer than two a SM
# (CSA b=3 in 1-tile programs: predicted 20.1, measured 26.1; b=4 in 2-tile programs: 21.4 and 29.1; HCA b=4 in
# 4-tile programs: 26.4 and 36.7), which picked 16x32 at CSA b=3 and 4, HCA b=3 and s_q=2 b=2 at 1.19-1.32x the
# fastest plan. The model does not price what slows those launches, so the planner does not offer them there.
_SM90_NARROW_MAX_TOKENS = 2
# Whole tokens first, the leftover spread (Plan.whole_units), offered to that kernel's default plans past a perfect
# fit: at b·s_q = P·W + L query tokens over P parts (W ≥ 1), each program runs a run of U = ⌈L·n/P⌉ tiles of the L
# leftover tokens, then W whole tokens, so only those L tokens are cut (and merged by the combine kernel) and the
# busiest program holds W·n + U tiles in W + 1 segments, where the uniform partition cuts nearly every token.
# Measured with the kernel's two ranges written into a copy of it (benchmarks/experiments/ws_spread.py, gpu_spread.sh
# cb9c37a, 2026-12-03-h200-ws-spread-cb9c37a.json, outputs checked against the fp64 reference) against the planner's
# plan: L = 1 or 2 took 0.90-0.94 of its time (CSA h=64 b=133 79.9 → 72.2 µs, HCA 112.9 → 105.2; s_q=2 b=67 CSA 77.7
# → 70.4, HCA 109.1 → 100.4; h=128 b=67 CSA 74.8 → 68.4, HCA 107.1 → 100.5). Further from the fit the measured gain
# came and went (CSA b=140, L=8: 84.7 against 81.9; b=148, L=16: 82.0 against 84.7), which the model does not
# explain, so it is offered only up to _SPREAD_MAX_LEFT leftover tokens, where the model also prices it cheaper.
# That was 2 until the package's kernel (its own two ranges, cut tokens' partials by TMA) was timed further out on an
# H100 SXM (benchmarks/experiments/spread_ab.py --max-left 8, `bash benchmarks/experiments/gpu_spread_left.sh
# bbaba26`, 2026-12-06-h100-spread-left-bbaba26.json; every output checked against the fp64 reference): at 11 of
# the 24 points of L = 3 to 8 where the H100 preset's model then spreads (CSA h=64 b=135 and 136, s_q=2 b=68 and
# 134, h=128 b=69, 73 and 135; HCA b=135, s_q=2 b=134, h=128 b=69 and 74) the spread took 0.909-0.946 of the uniform
# plan's time, and the per-request step from the batch before fell to -6.0 to +1.9% (uniform: +1.9 to +10.9%).
# With the combine priced as below, the spread forced further out on the H100 took 0.903-0.990 of the uniform plan's
# time at 16 points of L = 9 to 16 (`gpu_spread_wide.sh 345223c`, 2026-12-06-h100-spread-wide-345223c.{json,log}:
# CSA h=64 b=141 75.6 against 78.3 µs, HCA b=148 107.4 against 114.8, HCA s_q=2 b=74 101.7 against 112.6) and
# 0.895-0.970 at 9 points of L = 17 to 32 (2026-12-06-h100-spread32-110d3a6.{json,log}: HCA b=149 107.6 against 115.3,
# b=164 121.5 against 126.2, s_q=2 b=78 107.5 against 120.1), every output checked, so it is offered up to 32.
# Further out (spread_ab.py --force on 27f3f5e, 2026-12-06-h100-spread64-27f3f5e.{json,log} for L = 33 to 64,
# -spread128-27f3f5e.{json,log} for 65 to 124; 28 points, every output checked) it depends on the token's tiles.
# HCA tokens (18 tiles): 0.907-0.978 of the uniform plan's time at 64 and 128 heads, s_q 1 and 2, to L = 98 (HCA b=196
# 128.2 against 138.0 µs, s_q=2 b=83 116.4 against 126.4, s_q=2 b=100 132.7 against 146.3), 1.024 at 128 heads L = 108
# and 1.057 at b=256 (L = 124), where the model takes the uniform plan. CSA tokens (10 tiles): within 2% either way to
# L = 64 at 64 heads (b=170 1.007, 184 1.018, 196 0.961) and 1.037-1.142 beyond (b=200, 220, 240), 0.956-1.062 at
# s_q=2 and 128 heads. Offered to 128 leftover tokens for every token, the model deciding (ccf4385, `bash
# benchmarks/experiments/gpu_spread128.sh ccf4385`, 2026-12-06-h100-spread128-curves-ccf4385.log and
# -curve-*-ccf4385.json, against the curves of 0ecbb7f), the HCA curves took a median 0.922-0.963 of their time over the
# batches it spread (b = 165..234 at 64 heads, 83..117 at s_q=2 and 128 heads) and CSA h=64 1.021 (up to 1.078 at
# b = 199..211). So tokens of more than _SPREAD_LONG_TILES tiles are offered it to _SPREAD_MAX_LEFT_LONG leftover
# tokens, the model deciding, and shorter ones to 32. Per-request steps above 5% then sit where the leftover run
# U = ceil(L·n/P) grows past a divisor of the token's n tiles (HCA U = 6 -> 7 and 9 -> 10: b = 176 -> 177 +8.5% and
# 198 -> 199 +8.8%, s_q=2 88 -> 89 +5.7% and 99 -> 100 +8.3%, h=128 99 -> 100 +7.4%; at 32: 198 -> 199 +5.5%, s_q=2
# 99 -> 100 +5.6%, h=128 99 -> 100 +5.3%): runs that straddle two tokens give their programs a third segment, which the
# model does not price. Those HCA batches ran at most 1.6% slower than in the curves of 0ecbb7f, a median 4-8% faster.
# With the kernel's rows loaded evict_first (6d722f1) h=64's two fell under 5% and s_q=2's to +6% and +7%
# (2026-12-06-h100-curve-*-around-steps-6d722f1.json).
_SPREAD_MAX_LEFT = 32
_SPREAD_LONG_TILES = 12
_SPREAD_MAX_LEFT_LONG = 128
# The spread's combine is priced by its bytes and a launch, without the wide merge's per-token term that the uniform
# partitions' one-tile pieces carry (_SM90_WS_WIDE_US a token). With that term (1.2 µs a leftover token) the H100
# preset's model put the spread 2-16 µs (typically 7-10) too dear against the uniform plan at 16 points past a perfect
# fit by 4 to 8 leftover tokens where it then chose the uniform plan; timed there with the spread forced
# (benchmarks/experiments/spread_ab.py --force, `bash benchmarks/experiments/gpu_spread_force.sh 0e72816` on an H100
# SXM, 2026-12-06-h100-spread-force-0e72816.{json,log}; every output checked against the fp64 reference) the spread took
# 0.902-0.979 of the uniform plan's time at 15 of them (CSA h=64 b=137 71.6 against 76.1 µs, b=140 74.0 against 77.5;
# HCA b=136 98.0 against 107.5, b=140 103.5 against 111.3; HCA s_q=2 b=70 98.4 against 109.1) and 1.017 at CSA h=128
# b=72 (71.9 against 70.7), its per-request step from the batch before -0.6 to +2.6% (uniform: -0.4 to +11.2%).
# The Triton split kernel takes the same two ranges and is offered the spread too where it runs one head block and
# leaves the cut tokens to the combine kernel, one program a slot at its occupancy, priced as its uniform partitions
# are (a cut segment for the leftover run, a whole one a whole token, the combine over the leftover tokens alone).
# Against the uniform plan on an H100 SXM (spread_ab.py, `bash benchmarks/experiments/gpu_spread_triton.sh ca0002d`,
# 2026-12-06-h100-spread-triton-*-ca0002d.{json,log}; CUDA graph, L2 flushed, median of 10 in 3 alternated rounds,
# every output checked against the fp64 reference): 16 heads, s_q = 2, staged 16x32 tiles two an SM (264 parts),
# 0.912-0.978 at all 9 points of b = 133..196 (CSA b=133 84.8 against 92.3 µs, the per-request step from b=132 +5.0%
# against +14.4%; HCA b=133 134.0 against 141.0); 64x32 tiles at 64 heads (forced, the warp-specialized kernel off)
# 0.936-0.971 at 5 points (CSA b=133 118.1 against 126.0). Where the kernel merges cut tokens itself (64x64 tiles:
# the program writing a leftover token's last piece merges all of its pieces) it took 0.98-1.08 at 9 points (CSA
# h=64 b=150 99.6 against 92.0), and with four 16-head blocks a token (16x32 tiles at 64 heads) 0.955-1.023 at 8, so
# those keep the uniform partition.

_MEASURED_ARCH = 90
# The combine's bytes on sm_90, at the H200 preset's DRAM rate (GB/s) where its price was fitted. Priced at an H100
# SXM's 3,350 GB/s the model took whole-token programs at one to two programs an SM at 16 heads (CSA b = 172..184,
# HCA b = 213..220, s_q = 2 CSA b = 86..92, 205..217, HCA 228..234): on the four 16-head curves whole-token plans
# measured a median 0.96-1.05 of its prediction, cut ones 0.90-0.94 (benchmarks/experiments/plan_moves.py --bias on
# 2026-12-06-h100-curve-{csa,hca}-h16-s{1,2}-ca0002d.json; the steps CSA 171 -> 172 +18%, HCA 212 -> 213 +12%,
# s_q = 2 CSA 85 -> 86 +12%, 204 -> 205 +13%). At this rate the H100 preset's picks move at 58 of the 2,560 points of
# the ten 16-, 64- and 128-head curves, none on the H200 (plan_moves.py --set, the points in
# 2026-12-06-plan-moves-combine-rate-spread.txt). Timed against the plans they replace on an H100 SXM
# (benchmarks/experiments/partition_sweep.py, 2026-12-06-h100-combine-rate-ab-a1259d3.{json,log}; CUDA graph, L2
# flushed, median of 15, every output checked against the fp64 reference), 16 heads: CSA b=172 69.9 against 78.2 µs,
# HCA b=213 121.9 against 130.0, s_q = 2 CSA b=86 70.9 against 77.0, b=205 136.2 against 148.7, HCA b=228 234.2
# against 247.5, CSA b=8 16.9 against 17.5: the steps there +3.3 to +4.8%. (The warp-specialized kernel's combine,
# _Coster._ws_combine, keeps the part's DRAM rate: its spread and merge picks were timed on an H100 SXM priced so.
# At this rate it would move 33 H100 points, none on the H200: HCA spreads at h = 64 b = 235..242, s_q = 2 and
# h = 128 b = 118..121, 184..187, 250..253, which timed 0.969-0.994 of the uniform plans they replace, and 128-head
# CSA b = 1 to 64x64 tiles, 17.6 against 15.9 µs for 16x32 (benchmarks/experiments/gpu_h16_partitions.sh,
# 2026-12-06-h100-ws-combine-rate-ab-d9b0eb6.json): not taken.)
_COMBINE_SM90_GBPS = 4800.0  # the H200 preset's mem_gbps


# The paged dense decode's FP8 V3.2 tiles: the model ranks them (a row's decode priced at 0.02 µs picks the fastest
# tile measured at h = 16, 32 and 64), and its times ran 0.42-0.84 of those measured on the H200 (docs/dense-decode.md,
# "Planner"; h = 128 at 4K keys, b = 128: 433.7 predicted against 992.7 µs, 2026-12-01-h200-dense-fp8curve-h128.json;
# on an H100 SXM, DeepSeek-V3.2's sparse decode over these tiles at b = 128: 267.5 µs from `wavemla plan --gpu h100
# --mode dense --page 1 --heads 128 --seqlen 2048 --batch 128` against 578.8 measured, 2026-12-05-h100-v32-sparse-*).
_DENSE_FP8_TIMES = "0.42-0.84"


def prediction_basis(device: DeviceSpec, *, dense_fp8: bool = False) -> str:
    """What the predicted times on ``device`` rest on, in one sentence (``wavemla plan`` prints it); ``dense_fp8``:
    the workload is the paged dense decode over FP8 V3.2 rows, whose times the model does not fit."""
    if device.arch == _MEASURED_ARCH:
        basis = "predicted µs: the cost model with its tile costs fitted to runs on an H200 (sm_90)"
        if dense_fp8:
            basis += (
                f"; for FP8 V3.2 rows it ranks the tiles, and its times ran {_DENSE_FP8_TIMES} of those measured there"
            )
        return basis
    return (
        f"predicted µs: the cost model fitted on an H200, scaled to this GPU's tensor rate and bandwidth; no "
        f"sm_{device.arch} tile has been timed, so they rank configurations rather than predict this GPU's times"
    )


# Cost model, calibrated on an H200 (benchmarks/results): one tile costs a fixed latency (index load, then the
# dependent row gather) plus a per-row part that grows with the heads sharing the row; writing a token segment
# costs its output bytes at one SM's share of DRAM bandwidth; each launch costs a few µs inside a CUDA graph.
_TILE_LATENCY_US = 1.8
_ROW_US = 0.0625  # per KV row: gather + FP8 decode
_ROW_HEAD64_US = 0.0625  # per KV row for 64 heads of QK^T + PV on an H200 SM; scaled by heads and tensor rate
_PROGRAM_US = 1.0
_LAUNCH_US = 3.0
_H200_BF16_TFLOPS_PER_SM = 989.5 / 132
_DRAM_EFFICIENCY = 0.85
# How much faster an SM reads data it just wrote (from L2) than its share of DRAM bandwidth: H200 L2 delivers about
# 100 GB/s to one SM (64 B/clock at 1.6-1.9 GHz) against a ~31 GB/s share of DRAM.
_L2_OVER_DRAM_PER_SM = 3.0
# Starting a token segment in a program: q staged, the first index and row loads not yet overlapped (dependent
# memory round trips). Charged only with the measured FP8 tile times (sm_90, FP8 rows); entries that carry no fitted
# segment cost of their own use this one, fitted with the earlier grid.
_SEGMENT_US = 10.0
# The in-kernel merge of a cut token (64-row tiles) where the tile times were measured (sm_90, FP8 rows): a token of
# two pieces goes through the two-piece merge (kernels/sparse_decode.py, _merge_two_out: weights and row scale
# once, about 1,250 instructions a warp), a token of more through the general merge, whose code runs once per piece
# and column chunk (about 2,270 instructions a warp for two pieces, 450 more for each further one). The merging
# program pays _MERGE_PAIR_US for two pieces, _MERGE_US + (pieces - 2) x _MERGE_PIECE_US for more. Chosen on an
# 88-point partition grid of the current kernel (CSA/HCA h=64, b = 12..256; benchmarks/experiments/fit_merge.py over
# 2026-12-01-h200-refit7.json, output in -fit-merge.txt) with the tile and segment costs above unchanged: among the
# triples whose picks cost least against the fastest measured partition of each batch (summed excess 0.21, against
# 0.44 with every merge priced by its bytes), the one with a non-zero two-piece merge. The values are below the
# merges' own time (the general merge of two pieces took 6.8 µs in the segment stamps of
# 2026-11-30-h200-seg-phases-l2.log; the two-piece merge took 3.5-4 µs off it, 2026-12-01-h200-merge-pair.log)
# because the 64x64 tile and segment costs already overpredict this kernel by 10-25%.
# Elsewhere the merge is priced by its bytes (_Coster._merge).
_MERGE_PAIR_US = 1.0
_MERGE_US = 6.0
_MERGE_PIECE_US = 1.0
# Tokens cut fine over SMs shared by two programs: on sm_90 the split kernel's cut plans that put a token into
# _FINE_CUT_PIECES pieces or more are not offered at _FINE_CUT_PROGRAMS_PER_SM programs an SM or more (where the
# model prices them as it does fewer programs). On an H100 SXM at 16 heads (staged 16x32 tiles; benchmarks/experiments/
# partition_sweep.py and split_alone.py, CUDA graph, L2 flushed, median of 15, every output checked;
# 2026-12-06-h100-h16-partitions-d9b0eb6.{json,log}, -h16-split-alone-d9b0eb6.{json,log},
# -h16-short-shared-ab.{json,log}):
# CSA tokens in 10 pieces of 2 tiles took 21.6-23.4 µs at 160-200 programs and 27.2-27.4 at 210-220 (b = 16..22; the
# split kernel alone: the combine and the dependent launch add nothing), HCA tokens in 9-18 pieces 1.03-1.16x the
# model's time from 198-216 programs on (s_q = 1 and 2) and 0.96-1.02x below; tokens in 5 pieces (CSA, 4 tiles) ran at
# the model's time up to 260 programs (b = 40, 44, 52: 30.2-31.3 µs against 29.9-31.7 predicted; b = 48's 66.0 a
# disturbed timing). The plans taken instead
# measured 0.79-0.93 of those they replace at CSA b = 20..26 (b = 21: 21.5 against 27.1 µs, 4 tiles a program at one
# an SM) and s_q = 2 b = 10, 13, 0.84-0.99 at HCA b = 12..29 and s_q = 2 b = 7..13, and 1.05 at HCA b = 17 (27.6 against
# 26.3: 204 programs, at the boundary). The H200's curves step the same way (2026-12-03-h200-sparse-decode-curve-h16-
# staged.json: CSA 10 pieces 22.9 µs at 140 programs, 28.4-30.2 at 150-260; 4 pieces at b = 27, 23.9).
_FINE_CUT_PIECES = 8
_FINE_CUT_PROGRAMS_PER_SM = 1.5
# Programs of at least this many tiles get a bf16 q over FP8 rows converted outside the registers: by the kernel
# that runs before the split kernel (kernels/sparse_decode.py) or through scratch rows (Plan.q_scratch); smaller
# programs convert it in registers.
Q_CONVERT_MIN_TILES = 3
# A measured tile slows down as more of the GPU's program slots run: its time is multiplied by 1 + _SM90_BUSY x the
# fraction of slots busy (fitted with the table above; e.g. CSA 64x64, 10 tiles per program: 76.1 µs on 80 SMs,
# 85.5 on 132).
_SM90_BUSY = 0.3
_ROW_BYTES_FP8 = 584  # MODEL1: 448 e4m3 + 64 bf16 rope + 8 scale bytes
_ROW_BYTES_BF16 = 1024

# Parts whose SMs have this little shared memory (sm_86, sm_89, sm_120, sm_121) need two programs per SM.
_SMEM_CAPPED_PER_SM = 100 * KIB
_MIN_PROGRAMS_PER_SM_CAPPED = 2
# Where no tile time was measured (every arch but sm_90), configurations whose compiled stack frame (spills) exceeds
# this many bytes per thread are left out when one within it fits: the cost model does not price spills. Along the
# mma.sync code paths, run on an H200 with Triton building for sm_80 and sm_120 (TRITON_OVERRIDE_ARCH; CSA h=64
# b=64, benchmarks/results/2026-12-01-h200-portable-tiles-sm80.log and -sm120.log), 16x32x4x1 (232/256 B of stack
# in the committed table) took 88.0 and 80.5 µs, 16x16x4x1 (8/128 B) 115.0 and 107.7, 32x32x8x1 (1400/688 B) 196.7
# and 179.5, 64x64x8x1 (3136/2632 B) 197.5 and 794.6, 64x32x8x1 (6424/5608 B) 1157.0 and 1216.0.
_SPILL_STACK_MAX = 1024
# An architecture missing from the compiled table uses the entry of one that builds every plannable configuration of
# the three kernels alike: sm_121 (DGX Spark) sm_120's; sm_103 (B300) sm_100's (compiled offline, every sparse decode,
# dense decode and prefill configuration of the tables: the same shared memory and stack bytes with Triton 3.6 and
# 3.9, the same registers but one configuration's 166 against 168 with 3.9, so sm_100's rows never undercount;
# benchmarks/experiments/sm103_resources.py, benchmarks/results/2026-12-07-sm103-vs-sm100-resources.txt).
_TABLE_ARCH_FALLBACK = {121: 120, 103: 100}


def _base_configs(h: int, is_fp8: bool) -> list[KernelConfig]:
    ns = 1 if is_fp8 else 2  # bf16 rows feed tl.dot directly, so Triton can pipeline them (measured faster)
    # FP8 rows in 16x32 tiles also staged (STAGED_FP8_STAGES: the raw rows through cp.async, a row's blocks apart)
    staged = [KernelConfig(16, 32, 4, STAGED_FP8_STAGES)] if is_fp8 else []
    if h <= 16:
        return [*staged, KernelConfig(16, 32, 4, ns), KernelConfig(16, 16, 4, ns)]
    if h <= 32:
        return [KernelConfig(32, 32, 8, ns), *staged, KernelConfig(16, 32, 4, ns), KernelConfig(16, 16, 4, ns)]
    return [
        KernelConfig(64, 64, 8, ns),
        KernelConfig(64, 32, 8, ns),
        KernelConfig(32, 32, 8, ns),
        *staged,
        KernelConfig(16, 32, 4, ns),
        KernelConfig(16, 16, 4, ns),
    ]


def _smem_capped(device: DeviceSpec) -> bool:
    return device.smem_per_sm <= _SMEM_CAPPED_PER_SM


def _candidates(
    workload: Workload, device: DeviceSpec | None
) -> tuple[list[KernelConfig], list[tuple[KernelConfig, str]], str]:
    """(configurations to cost, configurations left out with why — ``"occupancy"``, ``"spills"``, ``"narrow"`` or
    ``"staged"`` (beside the warp-specialized kernel, see _SM90_NARROW_MAX_TOKENS) —, a note when a floor gave way
    because nothing passed it)."""
    base = _base_configs(workload.h_q, workload.is_fp8)
    if workload.is_fp8 and _tile_forced() and config.get("WAVEMLA_NUM_STAGES") is None:
        # a tile forced by its shape keeps the register-decoded FP8 tiles (stages 1), as before staged tiles existed
        base = [c for c in base if not staged_fp8(workload.is_fp8, c.num_stages)]
    if device is None:
        return base, [], ""
    kept, dropped, notes = base, [], []
    if _smem_capped(device):
        floor = _MIN_PROGRAMS_PER_SM_CAPPED
        dense = [c for c in kept if _occupancy(c, static_resources(c, workload, device), device) >= floor]
        if dense:
            dropped += [(c, "occupancy") for c in kept if c not in dense]
            kept = dense
        else:
            notes.append(f"no configuration fits {_MIN_PROGRAMS_PER_SM_CAPPED} programs/SM on {device.name}")
    if device.arch != _MEASURED_ARCH:
        lean = [c for c in kept if (static_resources(c, workload, device).stack_bytes or 0) <= _SPILL_STACK_MAX]
        if lean:
            dropped += [(c, "spills") for c in kept if c not in lean]
            kept = lean
        else:
            notes.append(f"every configuration spills more than {_SPILL_STACK_MAX} B per thread on {device.name}")
    elif (
        workload.tokens > _SM90_NARROW_MAX_TOKENS
        and _sparse_ws(KernelConfig(64, 64, 8, 1), workload, device)
        and not _tile_forced()  # a forced tile is applied to every shape, as before
    ):
        wide = [c for c in kept if c.block_h >= 64]
        if wide:
            dropped += [(c, "narrow") for c in kept if c not in wide]
            kept = wide
    elif _sparse_ws(KernelConfig(64, 64, 8, 1), workload, device) and not _tile_forced():
        # Beside the warp-specialized kernel (1-2 query tokens) the narrow tiles are the register ones: the staged
        # tile measured 0.3-0.8 µs faster than them there, but at h=128 b=2 the model took it (160 programs, past
        # the SM count and short of two a SM, where it underprices narrow tiles) over the 64x64 tile: 27.9 against
        # 23.5 µs (benchmarks/experiments/gpu_sparse_staged2.sh 3391ec6, 2026-12-03-h200-sparse-staged2-3391ec6.log)
        register = [c for c in kept if c.block_h >= 64 or not staged_fp8(workload.is_fp8, c.num_stages)]
        dropped += [(c, "staged") for c in kept if c not in register]
        kept = register
    return kept, dropped, "; ".join(notes)


def candidate_configs(workload: Workload, device: DeviceSpec | None = None) -> list[KernelConfig]:
    """Kernel configurations to consider for this workload (the planner costs each one that fits).

    Without a device: every shape for the head count. On a 100 KB/SM part: only those that fit two programs per SM
    (from their compiled resources), unless none does. Off sm_90: only those spilling at most ``_SPILL_STACK_MAX``
    bytes of stack per thread, unless none does. On sm_90 where the warp-specialized kernel runs the 64x64 tile and
    no tile knob is set: only tiles of 64 heads above ``_SM90_NARROW_MAX_TOKENS`` query tokens.
    """
    return _candidates(workload, device)[0]


def all_candidate_configs() -> list[tuple[KernelConfig, bool]]:
    """Every (configuration, is_fp8) :func:`candidate_configs` can return, for any head count and device."""
    out: list[tuple[KernelConfig, bool]] = []
    for is_fp8 in (True, False):
        for h in (16, 32, 64):
            for cfg in _base_configs(h, is_fp8):
                if (cfg, is_fp8) not in out:
                    out.append((cfg, is_fp8))
    return out


def static_resources(cfg: KernelConfig, workload: Workload, device: DeviceSpec) -> Resources:
    """Resources of ``cfg`` on ``device``: H200 measurements, else compiled (cache or packaged table), else an
    estimate."""
    return _static_resources(
        cfg, workload.is_fp8, device.arch, device.max_regs_per_thread, device.regs_per_sm,
        config.get("WAVEMLA_CACHE_DIR"), _sparse_ws(cfg, workload, device),
    )  # fmt: skip


def _compiled_resources(cfg: KernelConfig, is_fp8: bool, arch: int, kernel: str) -> Resources | None:
    """``kernel``'s compiled resources of ``cfg`` on ``arch`` (or the table's stand-in architecture for it, named in
    the note), or None where neither the cache nor the committed table has them."""
    from wavemla import resources

    table_arch = _TABLE_ARCH_FALLBACK.get(arch, arch)
    hit = resources.lookup(cfg, is_fp8, table_arch, kernel=kernel)
    if hit is None:
        return None
    r, where = hit
    note = where + ("" if table_arch == arch else f", sm_{table_arch} entry")
    return Resources(r.smem_bytes, r.regs, "compiled", stack_bytes=r.stack_bytes, note=note)


@functools.lru_cache(maxsize=1024)
def _static_resources(
    cfg: KernelConfig, is_fp8: bool, arch: int, max_regs: int, regs_per_sm: int, cache_dir: str | None, ws: bool
) -> Resources:
    del cache_dir  # part of the cache key only: resources.lookup reads the knob's directory
    from wavemla import resources  # not at import time: `python -m wavemla.resources` imports this module

    if ws:
        return dataclasses.replace(_SM90_WS, note="warp-specialized kernel, measured on an H200")
    key = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, is_fp8)
    if arch == _MEASURED_ARCH and key in _SM90_TABLE:
        return dataclasses.replace(_SM90_TABLE[key], note="measured on an H200")
    compiled = _compiled_resources(cfg, is_fp8, arch, resources.KERNEL)
    if compiled is not None:
        return compiled
    # Estimate: q tile + two KV tile copies (one per dot operand layout) per pipeline stage in shared memory;
    # registers at the cap ptxas applies so that one program fits the register file.
    smem = cfg.block_h * 512 * 2 + 2 * cfg.block_n * 512 * 2 * max(cfg.num_stages, 1)
    regs = min(max_regs, regs_per_sm // (cfg.num_warps * 32))
    return Resources(smem, regs, "estimate", note="estimated (not in the compiled table)")


def _warps(cfg: KernelConfig, res: Resources) -> int:
    """Warps a program of ``cfg`` launches: the kernel's own where it keeps them (the warp-specialized sm_90 kernel's
    three warpgroups, whatever WAVEMLA_NUM_WARPS says), else the configuration's."""
    return res.num_warps or cfg.num_warps


def _occupancy(cfg: KernelConfig, res: Resources, device: DeviceSpec) -> int:
    return _blocks_per_sm(device, res.smem_bytes, res.regs_per_thread, _warps(cfg, res))


@functools.lru_cache(maxsize=1024)
def _blocks_per_sm(device: DeviceSpec, smem: int, regs: int, warps: int) -> int:
    return device.blocks_per_sm(smem, regs, warps)


def _tile_us(
    cfg: KernelConfig,
    workload: Workload,
    device: DeviceSpec,
    occupancy: int = 1,
    measured: float | None = None,
    num_hb: int = 1,
) -> float:
    """One tile of one program when ``occupancy`` programs share the SM (their issue, tensor and DRAM throughput).

    A row costs the larger of its issue work (gather + decode, then QK^T and PV for BLOCK_H heads at the part's
    tensor rate) and its DRAM bytes at the SM's share of bandwidth; the ``num_hb`` head blocks of one part read the
    same rows, adjacent in launch order, so DRAM serves each row once and L2 the rest.
    """
    if measured is not None:
        return measured
    rate = (device.bf16_tflops / device.num_sms) / _H200_BF16_TFLOPS_PER_SM
    issue = (_ROW_US if workload.is_fp8 else _ROW_US / 2) + _ROW_HEAD64_US * cfg.block_h / 64 / rate
    row_bytes = _ROW_BYTES_FP8 if workload.is_fp8 else _ROW_BYTES_BF16
    dram = row_bytes / num_hb / (device.mem_gbps * _DRAM_EFFICIENCY * 1e3 / device.num_sms)
    return _TILE_LATENCY_US + cfg.block_n * max(issue, dram) * occupancy


def _workspace_bytes(workload: Workload, device: DeviceSpec) -> int:
    """Bytes per element of a cut token's partial, as the cost model charges them.

    The kernel keeps partials of FP8 caches in fp16 (half the traffic of fp32). On sm_90 the measured tile times
    and the segment cost were fitted with the model charging 4 bytes (its first fit dates from fp32 partials), so it
    keeps charging 4 there; elsewhere it charges what the kernel moves.
    """
    return 2 if workload.is_fp8 and device.arch != _MEASURED_ARCH else 4


def _segment_us(cfg: KernelConfig, device: DeviceSpec, cut: bool, ws_bytes: int) -> float:
    """Writing one token segment: a partial (cut) or the bf16 output, at one SM's share of bandwidth."""
    per_sm_gbps = device.mem_gbps * _DRAM_EFFICIENCY / device.num_sms
    return cfg.block_h * 512 * (ws_bytes if cut else 2) / (per_sm_gbps * 1e3)


def _combine_us(tokens: int, parts: int, h: int, device: DeviceSpec, ws_bytes: int) -> float:
    """The combine kernel merging cut tokens (plans with tiles under 64 rows; with 64-row tiles the split kernel
    merges them, see :meth:`_Coster._merge`): write + read of the partial workspace, sized for every token and
    part, plus a launch. On the measured arch the bytes go at the H200's rate, whatever the part's DRAM: the term
    was fitted there with the tile times, and the partials (a few MB) stay in the 50 MB L2 of both sm_90 presets
    (see _COMBINE_SM90_GBPS)."""
    gbps = _COMBINE_SM90_GBPS if device.arch == _MEASURED_ARCH else device.mem_gbps
    return _LAUNCH_US + 2 * (tokens + parts) * h * 512 * ws_bytes / (gbps * _DRAM_EFFICIENCY * 1e3)


def _register_q_slow(cfg: KernelConfig, workload: Workload) -> bool:
    """Whether programs of under ``Q_CONVERT_MIN_TILES`` tiles are kept out of the partition search for ``cfg``.

    With 64 heads and 32-row tiles a q converted in registers stays there next to the prefetched rows of the next
    tile. Measured on the H200 (CSA h=64, benchmarks/results/2026-11-30-h200-refit.json): b=8 with 2 tiles per
    program 38.9 µs and b=12 46.2, where 16x32 tiles take 27.8 and 30.4 and the model, fitted to the conversion-kernel
    path, predicts 28.7 and 32.1 (2026-11-30-h200-fit-sm90.txt). The cost model does not price that path, so the
    planner does not offer it; 16-head tiles hold a quarter of the q and are fine."""
    return workload.is_fp8 and workload.dtype != "fp16" and cfg.block_h >= 64 and cfg.block_n <= 32


@dataclass(frozen=True)
class _Split:
    upp: int
    parts: int
    waves: int
    active: int
    tile_us: float
    predicted_us: float
    combine_us: float
    ws_merge: bool = False
    whole: int = 0  # spread partitions: units of whole tokens each part runs after its run of upp cut units
    padded: int = 0  # padded partitions: units a token occupies (its tiles, then empty ones up to a multiple of upp)
    fine_cut_skipped: int = 0  # tiles a program of the cheaper-priced partition not offered (_FINE_CUT_PIECES)


class _Coster:
    """Predicted time of a uniform partition with ``upp`` units per program, for one configuration and workload.

    Everything that does not depend on ``upp`` is computed once here: the planner costs a few dozen sizes per
    configuration.
    """

    def __init__(
        self, tokens: int, n_tiles: int, num_hb: int, slots: int, occ: int, cfg: KernelConfig, workload: Workload,
        device: DeviceSpec, res: Resources,
    ) -> None:  # fmt: skip
        self.tokens, self.n_tiles, self.num_hb, self.slots, self.occ = tokens, n_tiles, num_hb, slots, occ
        self.total = tokens * n_tiles
        self.num_sms = device.num_sms
        ws_bytes = _workspace_bytes(workload, device)
        self.device, self.ws_bytes = device, ws_bytes
        self.seg_cut = _segment_us(cfg, device, True, ws_bytes)
        self.seg_whole = _segment_us(cfg, device, False, ws_bytes)
        self.combine_base = _combine_us(tokens, 0, workload.h_q, device, ws_bytes)
        self.combine_per_part = _combine_us(tokens, 1, workload.h_q, device, ws_bytes) - self.combine_base
        # the warp-specialized kernel merges tokens cut between programs itself or leaves them to the combine kernel
        self.ws = ws = _sparse_ws(cfg, workload, device)
        self.ws_merge = config.get("WAVEMLA_SPARSE_WS_MERGE")
        self.in_kernel = merges_in_kernel(cfg) and not ws
        # The smallest partition offered: see _register_q_slow.
        self.min_upp = min(Q_CONVERT_MIN_TILES, self.total) if _register_q_slow(cfg, workload) else 1
        # tokens cut into many pieces are kept off SMs shared by two programs (see _FINE_CUT_PIECES)
        self.fine_cut_rule = device.arch == _MEASURED_ARCH and workload.is_fp8 and not ws and occ > 1 and num_hb == 1
        # the measured FP8 tile times were fitted with the segment start charged apart (see _SEGMENT_US)
        measured_fp8 = res.tile_us is not None and workload.is_fp8
        self.segment_us = (_SEGMENT_US if res.segment_us is None else res.segment_us) if measured_fp8 else 0.0
        first = res.first_segment_us if res.first_segment_us is not None else self.segment_us
        self.first_segment_us = first if measured_fp8 else 0.0
        self.busy = (_SM90_WS_BUSY if ws else _SM90_BUSY) if measured_fp8 else 0.0
        self.h_q = workload.h_q
        self.dram_bytes_per_us = device.mem_gbps * _DRAM_EFFICIENCY * 1e3
        # the measured merge terms are those of the split kernel's merge in 64-head, 64-row tiles (the only measured
        # tile that merges in the kernel); a combine kernel's merges keep their bytes
        self.measured_merge = measured_fp8 and self.in_kernel
        # a measured tile shared with other programs of the SM: its own time where it was fitted (parts of one head
        # block; with more, the programs beside it read the same rows from L2)
        shared = res.tile_us if res.shared_tile_us is None or num_hb > 1 else res.shared_tile_us
        self.tiles = [
            _tile_us(cfg, workload, device, a, shared if a > 1 else res.tile_us, num_hb) for a in range(occ + 1)
        ]
        # staged FP8 tiles: the register tile's price at the same partition, times their measured ratio (the
        # Triton kernel's: the warp-specialized one keeps its own stages, WAVEMLA_NUM_STAGES does not reach it)
        self.scale = _STAGED_FP8_RATIO if staged_fp8(workload.is_fp8, cfg.num_stages) and not ws else 1.0

    def __call__(self, upp: int, piece: int | None = None, padded: bool = False) -> _Split:
        """Cost of ``upp`` units per program (:meth:`_cost`), staged FP8 tiles' at ``self.scale`` of it."""
        s = self._cost(upp, piece, padded)
        if self.scale == 1.0:
            return s
        return dataclasses.replace(s, tile_us=s.tile_us * self.scale, predicted_us=s.predicted_us * self.scale)

    def _cost(self, upp: int, piece: int | None = None, padded: bool = False) -> _Split:
        """Cost of ``upp`` units per program; ``piece`` (batch-invariant plans): every token is cut into pieces of
        this many tiles, ``upp`` is a multiple of it and each piece writes its own partial. ``padded`` (``upp`` under
        a token's tiles, not dividing them): every token is padded with empty units to a multiple of ``upp``
        (:attr:`Plan.token_units`), so each program runs one piece of one token: one segment, no straddle."""
        n_tiles = self.n_tiles
        if padded:
            if piece is not None or not 1 <= upp < n_tiles or n_tiles % upp == 0:
                raise ValueError(f"padded: needs no pieces and upp under and not dividing {n_tiles} tiles, got {upp}")
            span = -(-n_tiles // upp) * upp
            parts = self.tokens * (span // upp)
        else:
            span = 0
            parts = -(-self.total // upp)
        programs = parts * self.num_hb
        waves = -(-programs // self.slots)
        active, tile = self._busiest(programs, waves)
        if self.ws:
            return self._ws(upp, piece, parts, waves, active, tile, span)
        if span:
            # one piece of one token a program: a partial written, merged in the kernel or by the combine
            program = upp * tile + self.seg_cut + _PROGRAM_US + self._starts(1)
            if self.in_kernel:
                program += self._merge(span // upp)
            combine = 0.0 if self.in_kernel else self.combine_base + parts * self.combine_per_part
            later = (waves - 1) * max(0.0, self.segment_us - self.first_segment_us)
            return _Split(upp, parts, waves, active, tile, _LAUNCH_US + waves * program + later + combine, combine,
                          padded=span)  # fmt: skip
        if piece is not None:
            cut = piece < n_tiles
            program = upp * tile + (upp // piece) * (self.seg_cut if cut else self.seg_whole) + _PROGRAM_US
            program += self._starts(upp // piece)
            if cut:
                # tokens whose pieces all run here are merged in the program (pieces read back from L2, output
                # written); tokens cut between programs are merged by a program (64-row tiles) or by the combine
                merge = self._merge(n_tiles // piece)
                program += (upp // n_tiles) * merge
                cut = upp % n_tiles != 0
                if cut and self.in_kernel:
                    program += self._merge(n_tiles // piece)
            slots = self.total // piece
        else:
            cut = parts > 1 and upp % n_tiles != 0
            whole = -(-upp // n_tiles)
            program = (
                upp * tile + (whole + 1) * self.seg_cut + _PROGRAM_US
                if cut
                else upp * tile + whole * self.seg_whole + _PROGRAM_US
            )
            # the busiest program's token segments (see Plan.segments_per_program)
            program += self._starts(segments_per_program(n_tiles, upp))
            if cut and self.in_kernel:
                # the program writing a token's last piece merges it: at most one such token per program
                program += self._merge(max_pieces(n_tiles, upp))
            slots = parts
        combine = self.combine_base + slots * self.combine_per_part if cut and not self.in_kernel else 0.0
        # only the first wave's programs start behind the q conversion (a cheaper first segment, see _SM90_TABLE)
        later = (waves - 1) * max(0.0, self.segment_us - self.first_segment_us)
        return _Split(upp, parts, waves, active, tile, _LAUNCH_US + waves * program + later + combine, combine)

    def _ws(self, upp: int, piece: int | None, parts: int, waves: int, active: int, tile: float,
            span: int = 0) -> _Split:  # fmt: skip
        """The warp-specialized kernel's cost (see _SM90_WS): a program's tiles, its fixed cost (first segment: q
        staged, the gather ahead of the math, the epilogue) and each further token segment; batch-invariant pieces
        inside a token and the tokens held whole merged in the program (_SM90_WS_PIECE_US, _SM90_WS_HELD_US); tokens
        cut between programs merged by the combine kernel, or in the kernel (_SM90_WS_MERGE_SAVE_US less). ``span``:
        tokens padded to that many units (:meth:`_cost`), one segment a program and a piece a program."""
        from wavemla.kernels.combine import wide_merge

        n_tiles = self.n_tiles
        segments = 1 if span else segments_per_program(n_tiles, upp)
        program = upp * tile + self.first_segment_us + (segments - 1) * self.segment_us + _PROGRAM_US
        # at most one token cut at each program boundary, every token where programs are shorter than a token
        cut_tokens = min(self.tokens, parts - 1) if upp % n_tiles else 0
        if span:
            cut, slot_units, pieces = True, upp, parts
        elif piece is not None:
            slot_units, cut = piece, piece < n_tiles and cut_tokens > 0
            if piece < n_tiles:  # further pieces of a token, and the tokens held whole, merged here
                held_pieces = (upp // n_tiles) * (n_tiles // piece)
                program += (upp // piece - segments) * _SM90_WS_PIECE_US + held_pieces * _SM90_WS_HELD_US
            pieces = cut_tokens * (n_tiles // piece)
        else:
            cut, slot_units = parts > 1 and upp % n_tiles != 0, upp
            pieces = cut_tokens + parts - 1
        combine, merge = 0.0, False
        if cut:
            combine = self._ws_combine(pieces, cut_tokens)
            if wide_merge(span or n_tiles, slot_units):  # one combine program per token, head and 128 columns
                combine += self.tokens * _SM90_WS_WIDE_US
            # merged in the kernel: default plans of programs of a token's tiles or more cutting tokens in two
            merge = self.ws_merge == "on" or (
                self.ws_merge == "auto"
                and piece is None
                and upp >= n_tiles
                and max_pieces(n_tiles, upp) <= _SM90_WS_MERGE_MAX_PIECES
            )
            if merge:
                combine -= _SM90_WS_MERGE_SAVE_US
        # a later wave's programs start cold, without a gather already running ahead into their rows
        later = (waves - 1) * _SM90_WS_WAVE_US
        return _Split(upp, parts, waves, active, tile, _LAUNCH_US + waves * program + later + combine, combine, merge,
                      padded=span)  # fmt: skip

    def spread(self) -> _Split | None:
        """Whole tokens first, the leftover spread (see _SPREAD_MAX_LEFT): a partition of ``tokens = P·W + L`` over
        one program per slot and head block, one wave, or None where it does not apply (the warp-specialized kernel
        at more than one program per SM; the Triton kernel where it merges cut tokens itself or runs more than one
        head block, where it measured no faster; no whole token a part, no leftover token, or more than
        :func:`spread_max_left` of them). The warp-specialized kernel is priced by its measured costs; the Triton
        kernel as its uniform partitions are (:meth:`_cost`), a cut segment for the leftover run and a whole one for
        each whole token, with only the leftover tokens merged (the notes under _SPREAD_MAX_LEFT)."""
        n_tiles = self.n_tiles
        parts = self.slots // self.num_hb
        if parts < 1 or (self.ws and self.occ != 1) or (not self.ws and (self.in_kernel or self.num_hb > 1)):
            return None
        whole, left = divmod(self.tokens, parts)
        if whole < 1 or not 1 <= left <= spread_max_left(n_tiles):
            return None
        upp = -(-left * n_tiles // parts)
        if upp >= n_tiles:  # as many parts as leftover tokens, nearly: nothing to spread
            return None
        programs = parts * self.num_hb
        pieces = sum(last - first + 1 for first, last in (spread_slots(t, n_tiles, upp) for t in range(left)))
        active, tile = self._busiest(programs)  # one program an SM for the warp-specialized kernel (occ 1)
        if not self.ws:
            program = (whole * n_tiles + upp) * tile + self.seg_cut + whole * self.seg_whole + _PROGRAM_US
            program += self._starts(whole + 1)
            combine = _combine_us(left, pieces, self.h_q, self.device, self.ws_bytes)
            predicted = _LAUNCH_US + program + combine
            return _Split(upp, parts, 1, active, tile * self.scale, predicted * self.scale, combine * self.scale,
                          whole=whole * n_tiles)  # fmt: skip
        program = (whole * n_tiles + upp) * tile + self.first_segment_us + whole * self.segment_us + _PROGRAM_US
        # no per-token term for the wide merge here (see the note under _SPREAD_MAX_LEFT)
        combine = self._ws_combine(pieces, left)
        merge = self.ws_merge == "on"
        if merge:
            combine -= _SM90_WS_MERGE_SAVE_US
        return _Split(upp, parts, 1, 1, tile, _LAUNCH_US + program + combine, combine, merge, whole * n_tiles)

    def _busiest(self, programs: int, waves: int = 1) -> tuple[int, float]:
        """(programs on the busiest SM, a tile's time there) for ``programs`` in ``waves``: full waves hold ``occ``
        programs per SM, a single partial wave spreads one per SM first; measured tiles slow down as more of the
        GPU's slots run programs (gathers contend for L2 and DRAM)."""
        active = self.occ if waves > 1 else max(1, min(self.occ, -(-programs // self.num_sms)))
        return active, self.tiles[active] * (1.0 + self.busy * min(programs, self.slots) / self.slots)

    def fine_cut(self, s: _Split) -> bool:
        """Whether the uniform partition ``s`` cuts tokens into many pieces over shared SMs: not offered
        (_FINE_CUT_PIECES)."""
        return (
            self.fine_cut_rule
            and s.upp < self.n_tiles
            and max_pieces(self.n_tiles, s.upp) >= _FINE_CUT_PIECES
            and s.parts * self.num_hb >= _FINE_CUT_PROGRAMS_PER_SM * self.num_sms
        )

    def _ws_combine(self, pieces: int, tokens: int) -> float:
        """The combine kernel after the warp-specialized kernel: a launch, its fixed cost, and ``pieces`` fp16 partials
        read and ``tokens`` bf16 outputs written at the device's DRAM bandwidth."""
        return _LAUNCH_US + _SM90_WS_COMBINE_US + (pieces + tokens) * self.h_q * 512 * 2 / self.dram_bytes_per_us

    def padded(self) -> list[_Split]:
        """The padded partitions (:meth:`_cost`) the planner offers: for each count ``k`` of pieces a token, pieces
        of ``ceil(n_tiles / k)`` tiles where that size does not divide the token (where it does, the uniform partition
        of that size cuts tokens at the same places). Only to the warp-specialized kernel: against the unpadded plans on
        an H100 SXM (benchmarks/experiments/pad_ab.py, `bash benchmarks/experiments/gpu_pad.sh d076f9c`,
        2026-12-06-h100-pad-ab-d076f9c.json; CUDA graph, L2 flushed, median of 10 in 3 alternated rounds, every output
        checked against the fp64 reference) it took 0.857-0.999 of their time at 19 points of h = 64/128, s_q = 1/2,
        CSA and HCA (CSA h=64 b=27 29.5 against 34.4 µs: the per-request step from b=26 +0.3% against +17.0%), where
        the Triton kernel's staged 16x32 tiles at h = 16, two programs to an SM, took 0.910-1.106 at 8 points (b = 14,
        27, 34 and HCA b = 30 slower)."""
        if not self.ws:
            return []
        n_tiles = self.n_tiles
        return [self(u, padded=True) for u in _piece_sizes(n_tiles) if n_tiles % u and u >= self.min_upp]

    def _starts(self, segments: int) -> float:
        """Starting ``segments`` token segments (or batch-invariant pieces) in one program."""
        return self.first_segment_us + (segments - 1) * self.segment_us if segments > 0 else 0.0

    def _merge(self, pieces: int) -> float:
        """One program merging a token of ``pieces`` partials: the measured merge where the split kernel merges and
        the tile times were measured (see _MERGE_PAIR_US), else its bytes: the partials read back from L2 and the
        output written. (The count handshake of pieces written by other programs fitted at no measurable cost.)"""
        if self.measured_merge:
            return _MERGE_PAIR_US if pieces <= 2 else _MERGE_US + (pieces - 2) * _MERGE_PIECE_US
        return pieces * self.seg_cut / _L2_OVER_DRAM_PER_SM + self.seg_whole


def _piece_sizes(n_tiles: int) -> list[int]:
    """The sizes ``ceil(n_tiles / k)`` of a token cut into ``k`` = 2 .. ``n_tiles`` pieces, ascending, each once:
    a step per size, not per ``k``, about twice the square root of ``n_tiles`` steps (a step per ``k`` took minutes
    for lists of 10^10 tiles)."""
    sizes = []
    k = 2
    while k <= n_tiles:
        size = -(-n_tiles // k)
        sizes.append(size)
        if size == 1:
            break
        k = (n_tiles - 1) // (size - 1) + 1  # the first k of a smaller size: n_tiles / k <= size - 1
    return sizes[::-1]


@functools.lru_cache(maxsize=256)
def _even_sizes(n_tiles: int) -> tuple[int, ...]:
    """Program sizes that split a token of ``n_tiles`` tiles into equal pieces (its divisors), ascending. Found in
    pairs up to the square root: a count of every piece number took minutes for lists of 10^10 tiles."""
    small = [d for d in range(1, math.isqrt(n_tiles) + 1) if n_tiles % d == 0]
    return tuple(sorted({*small, *(n_tiles // d for d in small)}))


def _min_active(cost: _Coster, device: DeviceSpec) -> int:
    """The fewest programs per SM a partition may run: two on 100 KB/SM parts (one leaves them latency-bound; see the
    module doc) unless the configuration holds only one, else one."""
    return min(_MIN_PROGRAMS_PER_SM_CAPPED, cost.occ) if _smem_capped(device) else 1


def _slot_levels(cost: _Coster, device: DeviceSpec) -> set[int]:
    """Program slots a partition may aim for: one program per SM, two, ... up to the occupancy. On 100 KB/SM parts
    a level below two programs per SM is not offered (one program per SM leaves them latency-bound; see the module
    doc), unless the configuration holds only one."""
    low = _min_active(cost, device)
    return {min(k * device.num_sms, cost.slots) for k in range(low, cost.occ + 1)}


def _whole_token_counts(tokens: int, num_hb: int, slots: int) -> list[int]:
    """Whole tokens a program (``k``) worth costing among ``1 .. ceil(tokens / parts) + 1``, ``parts`` the parts one
    wave of ``slots`` holds.

    Programs of ``k`` whole tokens cut none, and in a launch of two or more waves every tile costs the same (all
    ``occ`` slots busy), so at a given wave count a larger ``k`` only adds tiles and segments: of the ``k`` giving
    one wave count only the smallest can be the cheapest. Costing that one (and every ``k`` of one wave, where the
    tile's price depends on the programs) picks what costing every ``k`` picks, in a number of steps that grows
    with the square root of the batch rather than with the batch (10^7 requests took seconds)."""
    last = -(-tokens // max(slots // num_hb, 1)) + 1
    counts = [k for k in (1, 2) if k <= last]  # small programs may be raised to the smallest offered size
    k = 1
    while k <= last:
        parts = -(-tokens // k)
        waves = -(-parts * num_hb // slots)
        if waves <= 1:
            counts.extend(range(k, last + 1))
            break
        counts.append(k)
        fewer = (waves - 1) * slots // num_hb  # the most parts that fit one wave fewer
        if fewer < 1:
            break  # no k gives fewer waves: the larger ones cost more at this count
        k = max(k + 1, -(-tokens // fewer))  # the smallest k whose parts fit that
    return counts


def _partition(cost: _Coster, device: DeviceSpec, forced_slots: bool, pad: bool = True) -> _Split:
    """The cheapest units_per_part (see the module doc for the candidates); ``pad`` offers padded tokens too."""
    total, n_tiles, num_hb, slots = cost.total, cost.n_tiles, cost.num_hb, cost.slots
    # Slot levels: one program per SM, two, ... up to the occupancy (fewer programs per SM run faster each).
    levels = {slots} if forced_slots else _slot_levels(cost, device)
    candidates: set[int] = set()
    for level in levels:
        parts_per_wave = max(level // num_hb, 1)
        for waves in range(1, 5):
            u = max(1, -(-total // (waves * parts_per_wave)))
            candidates.add(u)
            candidates.add(-(-u // n_tiles) * n_tiles)  # the next cut-free size
            if u < n_tiles:  # the next size that splits every token into equal pieces
                candidates.add(next(e for e in _even_sizes(n_tiles) if e >= u))
            if cost.segment_us:  # the next sizes that start programs at fewer offsets into a token (fewer segments)
                candidates.update(-(-u // g) * g for g in _even_sizes(n_tiles))
    candidates.update(n_tiles * k for k in _whole_token_counts(cost.tokens, num_hb, slots))
    best: _Split | None = None
    skipped: _Split | None = None
    for u in sorted({max(u, cost.min_upp) for u in candidates}):
        s = cost(min(u, total))
        if not forced_slots and cost.fine_cut(s):
            if skipped is None or s.predicted_us < skipped.predicted_us - 1e-9:
                skipped = s
            continue
        if best is None or s.predicted_us < best.predicted_us - 1e-9:
            best = s
    assert best is not None  # a token's tiles a program (a candidate) cut nothing: never left out as a fine cut
    if skipped is not None and skipped.predicted_us < best.predicted_us - 1e-9:
        best = dataclasses.replace(best, fine_cut_skipped=skipped.upp)
    # padded partitions, held to the slot levels' floor of programs per SM (_slot_levels)
    low = 1 if forced_slots else _min_active(cost, device)
    for s in cost.padded() if pad else []:
        if s.active >= low and s.predicted_us < best.predicted_us - 1e-9:
            best = s
    spread = cost.spread()
    if spread is not None and spread.predicted_us < best.predicted_us - 1e-9:
        return spread
    return best


def _invariant_partition(cost: _Coster, device: DeviceSpec, piece: int, forced_slots: bool) -> _Split:
    """The cheapest whole number of fixed pieces per program (batch-invariant plans; see :func:`_partition`)."""
    pieces_total = cost.total // piece
    per_token = cost.n_tiles // piece
    levels = {cost.slots} if forced_slots else _slot_levels(cost, device)
    candidates = {1, pieces_total, per_token}
    for level in levels:
        parts_per_wave = max(level // cost.num_hb, 1)
        for waves in range(1, 5):
            k = max(1, -(-pieces_total // (waves * parts_per_wave)))
            candidates.add(k)
            candidates.add(-(-k // per_token) * per_token)  # whole tokens per program: no token cut between them
    best: _Split | None = None
    for k in sorted(c for c in candidates if 1 <= c <= pieces_total):
        s = cost(k * piece, piece=piece)
        if best is None or s.predicted_us < best.predicted_us - 1e-9:
            best = s
    assert best is not None
    return best


def _override_config(cfg: KernelConfig) -> KernelConfig:
    bh = config.get("WAVEMLA_BLOCK_H")
    bn = config.get("WAVEMLA_BLOCK_N")
    nw = config.get("WAVEMLA_NUM_WARPS")
    ns = config.get("WAVEMLA_NUM_STAGES")
    return KernelConfig(
        block_h=cfg.block_h if bh is None else bh,
        block_n=cfg.block_n if bn is None else bn,
        num_warps=cfg.num_warps if nw is None else nw,
        num_stages=cfg.num_stages if ns is None else ns,
    )


_TILE_KNOBS = ("WAVEMLA_BLOCK_H", "WAVEMLA_BLOCK_N", "WAVEMLA_NUM_WARPS", "WAVEMLA_NUM_STAGES")


def _tile_forced() -> bool:
    """Whether a tile knob is set (it is then applied to every candidate shape)."""
    return any(config.get(k) is not None for k in _TILE_KNOBS)


def forced_tile_knobs() -> dict[str, object]:
    """The tile knobs that are set, with their values (for errors that name them)."""
    return {k: config.get(k) for k in _TILE_KNOBS if config.get(k) is not None}


_PLAN_KNOBS = (*_TILE_KNOBS, "WAVEMLA_NUM_SPLITS", "WAVEMLA_TARGET_CTAS", "WAVEMLA_BATCH_INVARIANT",
               "WAVEMLA_CACHE_DIR", "WAVEMLA_SPARSE_WS", "WAVEMLA_SPARSE_WS_MERGE")  # fmt: skip


def plan(workload: Workload, device: DeviceSpec) -> Plan:
    """Choose the kernel configuration and work partition for ``workload`` on ``device`` (pure; see module doc).

    Raises :class:`PlanError` when no configuration fits (naming the knobs that forced it) and
    :class:`~wavemla.config.KnobError` when a knob's value is invalid.
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload: expected a Workload, got {type(workload).__name__}")
    if not isinstance(device, DeviceSpec):
        raise TypeError(f"device: expected a DeviceSpec, got {type(device).__name__}")
    overrides = tuple(config.get(k) for k in _PLAN_KNOBS)
    invariant = workload.batch_invariant
    if invariant is None:
        invariant = bool(config.get("WAVEMLA_BATCH_INVARIANT"))
    return _plan_cached(workload, device, overrides, invariant)


# Batch-invariant mode fixes the configuration and cuts every token into the same pieces whatever the batch. Both
# are chosen once per workload shape: the pair whose predicted time is closest to the free planner's over these
# batch sizes (the worst ratio is minimized), so the fixed choice costs least where batches are large enough to
# matter. Only the number of pieces per program then varies with the batch.
_INVARIANT_REFERENCE_BATCHES = (32, 64, 128, 256)
# On sm_90 the DeepSeek-V4 decode shapes use the (BLOCK_N, pieces per token) measured best on an H200 instead:
# the cost model ranks whole configurations poorly when few SMs are busy (a tile runs faster on a half-idle GPU)
# and picked 32-row tiles in 4 pieces for HCA, 1.24-1.53x the default plan, where 64-row tiles in 2 pieces measure
# 0.94-1.16x (benchmarks/results/2026-11-30-h200-bi-sweep.log). Key: (h_q, s_q, topk, extra_topk, is_fp8); value:
# (BLOCK_H, BLOCK_N, pieces per token). Where the warp-specialized kernel runs those tiles the model chooses, with
# that kernel's costs (_SM90_WS_PIECE_US, _SM90_WS_HELD_US): the table measured the Triton kernel.
_SM90_INVARIANT_MEASURED: dict[tuple[int, int, int, int, bool], tuple[int, int, int]] = {
    (64, 1, 128, 512, True): (64, 64, 2),  # CSA: 0.86-1.09x the default plan for b = 32..256
    (64, 1, 128, 1024, True): (64, 64, 2),  # HCA: 0.94-1.16x
}


def _fixed_pieces(n_tiles: int, forced: int | None, invariant: bool) -> int:
    """Pieces per token forced by WAVEMLA_NUM_SPLITS (in batch-invariant mode it must divide the tiles)."""
    assert forced is not None
    if invariant and n_tiles % forced:
        raise PlanError(
            f"WAVEMLA_NUM_SPLITS={forced} must divide the {n_tiles} tiles per token in batch-invariant mode"
        )
    return forced


@functools.lru_cache(maxsize=1024)
def _invariant_choice(
    workload: Workload, device: DeviceSpec, overrides: tuple[object, ...]
) -> tuple[KernelConfig, int, float, bool]:
    """(configuration, pieces per token, worst predicted ratio, from the measured table) of the batch-invariant
    plans of ``workload``'s shape (its batch is ignored): the measured pair on sm_90 for the DeepSeek-V4 shapes
    (``_SM90_INVARIANT_MEASURED``, unless a knob forces the tile or the pieces); otherwise, among the fitting
    configurations (or the one the tile knobs force) and every piece count dividing the token's tiles (or the one
    WAVEMLA_NUM_SPLITS forces, with the configurations whose tiles it divides), the pair whose predicted time is at
    most the smallest multiple of the free planner's over ``_INVARIANT_REFERENCE_BATCHES``."""
    forced_splits = config.get("WAVEMLA_NUM_SPLITS")
    # the reference: the free planner's plans without padded tokens, those the pieces were chosen and measured
    # against (padding moves only small batches' plans, b = 32 among the references)
    free = {
        b: _plan_cached(
            dataclasses.replace(workload, batch=b, batch_invariant=False), device, overrides, False, pad=False
        )
        for b in _INVARIANT_REFERENCE_BATCHES
    }
    kept, _, _ = _candidates(workload, device)
    configs = list(dict.fromkeys(_override_config(c) for c in kept))  # tile knobs applied, duplicates dropped
    measured = None
    if device.arch == _MEASURED_ARCH and forced_splits is None and not _tile_forced():
        key = (workload.h_q, workload.s_q, workload.topk, workload.extra_topk, workload.is_fp8)
        measured = _SM90_INVARIANT_MEASURED.get(key)
        if measured is not None and _sparse_ws(KernelConfig(measured[0], measured[1], 8, 1), workload, device):
            measured = None  # measured with the Triton kernel: the warp-specialized one is priced by the model
        if measured is not None:
            configs = [c for c in configs if (c.block_h, c.block_n) == measured[:2]][:1] or configs
    best: tuple[float, int, KernelConfig] | None = None
    undivided: dict[KernelConfig, int] = {}  # fitting tiles whose token WAVEMLA_NUM_SPLITS does not divide
    for cfg in configs:
        fit = _fit(cfg, workload, device, [])
        if fit is None:
            continue
        res, occ = fit
        n_tiles = math.ceil(workload.topk / cfg.block_n) + math.ceil(workload.extra_topk / cfg.block_n)
        if forced_splits is not None:
            if n_tiles % forced_splits:  # another tile may honour the knob: this one cannot
                undivided[cfg] = n_tiles
                continue
            options = [forced_splits]
        elif measured is not None and (cfg.block_h, cfg.block_n) == measured[:2]:
            options = [measured[2]]
        else:
            options = [d for d in range(1, n_tiles + 1) if n_tiles % d == 0]
        for pieces in options:
            worst = max(
                _plan_config(dataclasses.replace(workload, batch=b), device, cfg, res, occ, True, None, pieces=pieces)
                .predicted_us / free[b].predicted_us
                for b in _INVARIANT_REFERENCE_BATCHES
            )  # fmt: skip
            if best is None or (worst, pieces) < best[:2]:
                best = (worst, pieces, cfg)
    if best is None and undivided:
        tiles = ", ".join(f"{c}: {n} tiles" for c, n in undivided.items())
        raise PlanError(
            f"WAVEMLA_NUM_SPLITS={forced_splits} must divide the tiles per token in batch-invariant mode; the "
            f"configurations that fit {device.name} give {tiles}"
        )
    if best is None:
        raise PlanError(f"no kernel configuration fits {device.name} for {workload} in batch-invariant mode")
    worst, pieces, cfg = best
    return cfg, pieces, worst, measured is not None and (cfg.block_h, cfg.block_n, pieces) == measured


def _fit(cfg: KernelConfig, workload: Workload, device: DeviceSpec, reasons: list[str]) -> tuple[Resources, int] | None:
    """(resources, programs per SM) of ``cfg`` on ``device``, or None with the reason appended when it does not fit."""
    return _fit_resources(cfg, static_resources(cfg, workload, device), device, reasons)


def _fit_resources(
    cfg: KernelConfig, res: Resources, device: DeviceSpec, reasons: list[str]
) -> tuple[Resources, int] | None:
    """(res, programs per SM), or None with the reason appended when one program of ``cfg`` does not fit."""
    occ = _occupancy(cfg, res, device)
    if occ < 1:
        why = device.occupancy_reason(res.smem_bytes, res.regs_per_thread, _warps(cfg, res))
        reasons.append(f"{cfg.label}: does not fit ({res.note}): {why}")
        return None
    return res, occ


@functools.lru_cache(maxsize=4096)
def _plan_cached(
    workload: Workload, device: DeviceSpec, overrides: tuple[object, ...], invariant: bool, pad: bool = True
) -> Plan:
    """The plan (see :func:`plan`); ``pad`` False leaves padded-token partitions out (:meth:`_Coster.padded`)."""
    reasons: list[str] = []
    forced_splits = config.get("WAVEMLA_NUM_SPLITS")
    if invariant:
        # The configuration and the pieces (hence the bits) must not depend on the batch: chosen once per shape
        # (_invariant_choice), kept for every batch size; only the number of programs changes with b.
        # one shape, one choice: the stand-in asks for the mode however the call asked (argument or knob)
        shape = dataclasses.replace(workload, batch=1, batch_invariant=True)
        try:
            cfg, pieces, worst, from_table = _invariant_choice(shape, device, overrides)
        except PlanError as exc:  # raised for the stand-in or a reference batch: name the workload asked for instead
            message = str(exc).replace(repr(shape), repr(workload))
            for b in _INVARIANT_REFERENCE_BATCHES:
                reference = dataclasses.replace(workload, batch=b, batch_invariant=False)
                message = message.replace(repr(reference), f"{workload!r} in batch-invariant mode")
            raise PlanError(message) from None
        res = static_resources(cfg, workload, device)
        occ = _occupancy(cfg, res, device)
        fixed = _plan_config(workload, device, cfg, res, occ, True, forced_splits, pieces=pieces)
        refs = ", ".join(str(b) for b in _INVARIANT_REFERENCE_BATCHES)
        why = "measured best on an H200; the model predicts" if from_table else "predicted"
        note = (
            f"batch-invariant: {cfg.label} with {pieces} piece(s) per token kept for every batch ({why} at most "
            f"{worst:.2f}x the free plan at b = {refs})"
        )
        return dataclasses.replace(fixed, reasons=(note, *fixed.reasons))
    del overrides  # part of the cache key only: the knobs are read again below
    forced = forced_tile_knobs()
    kept, dropped, note = _candidates(workload, device)
    if note:
        reasons.append(note)
    if forced:
        reasons.append("forced by " + ", ".join(f"{k}={v}" for k, v in forced.items()))
    else:
        for cfg, why in dropped:  # shown with what the model alone would predict for them
            fit = _fit(cfg, workload, device, reasons)
            if fit is None:
                continue
            res, occ = fit
            alone = _plan_config(workload, device, cfg, res, occ, invariant, forced_splits)
            if why == "occupancy":
                because = (
                    f"{res.smem_bytes // KIB} KB smem gives {occ} program/SM on a {device.smem_per_sm // KIB} KB/SM "
                    f"part, latency-bound below {_MIN_PROGRAMS_PER_SM_CAPPED}"
                )
            elif why == "spills":
                because = (
                    f"{res.stack_bytes} B of stack per thread on sm_{device.arch} (spills; over {_SPILL_STACK_MAX} B "
                    "ran 2-15x slower along the mma.sync paths)"
                )
            elif why == "staged":
                because = (
                    "staged tiles are not offered beside the warp-specialized kernel (where the cost model "
                    "underprices narrow tiles, one was picked over it and measured slower; docs/planner.md, "
                    "Candidates)"
                )
            else:
                because = (
                    f"{workload.tokens} query tokens beside the warp-specialized kernel (tiles of under 64 heads "
                    f"measured slower than it from {_SM90_NARROW_MAX_TOKENS + 1} tokens on, where the cost model "
                    "underprices them; docs/planner.md, Candidates)"
                )
            reasons.append(
                f"{cfg.label}: left out, {because} (the cost model alone predicts {alone.predicted_us:.1f} us)"
            )
    seen: set[KernelConfig] = set()
    best: Plan | None = None
    for candidate in kept:
        cfg = _override_config(candidate)
        if cfg in seen:
            continue
        seen.add(cfg)
        fit = _fit(cfg, workload, device, reasons)
        if fit is None:
            continue
        res, occ = fit
        candidate_plan = _plan_config(workload, device, cfg, res, occ, invariant, forced_splits, pad=pad)
        reasons.append(
            f"{cfg.label}: {res.smem_bytes // KIB} KB smem, {res.regs_per_thread} regs"
            + (f", {res.stack_bytes} B stack" if res.stack_bytes else "")
            + f" ({res.note}); {occ} program(s)/SM, predicted {candidate_plan.predicted_us:.1f} us"
        )
        if best is None or candidate_plan.predicted_us < best.predicted_us - 1e-9:
            best = candidate_plan
    if best is None:
        knobs = ", ".join(f"{k}={v}" for k, v in forced.items())
        prefix = f"{knobs}: " if knobs else ""
        raise PlanError(f"{prefix}no kernel configuration fits {device.name} for {workload}; " + "; ".join(reasons))
    return dataclasses.replace(best, reasons=(*reasons, *best.reasons))


def evaluate(workload: Workload, device: DeviceSpec, cfg: KernelConfig, units_per_part: int) -> Plan:
    """The plan for ``cfg`` with ``units_per_part`` tiles per program, costed by the same model (no search).

    For what-if questions: how much slower would the kernel be with another tile shape or partition? Raises
    :class:`PlanError` when ``cfg`` does not fit ``device``.
    """
    if not isinstance(units_per_part, int) or isinstance(units_per_part, bool) or units_per_part < 1:
        raise ValueError(f"units_per_part: expected a positive int, got {units_per_part!r}")
    res = static_resources(cfg, workload, device)
    occ = _occupancy(cfg, res, device)
    if occ < 1:
        raise PlanError(
            f"cfg: {cfg.label} does not fit {device.name}: "
            + device.occupancy_reason(res.smem_bytes, res.regs_per_thread, _warps(cfg, res))
        )
    return _plan_config(workload, device, cfg, res, occ, False, None, units_per_part)


# Bumped by clear_caches(): what keeps plans across calls keys them by it (wavemla.api's record of the first call of
# each signature, which fresh metadata objects replay).
_GENERATION = [0]


def generation() -> int:
    """How many times :func:`clear_caches` has run in this process."""
    return _GENERATION[0]


def clear_caches() -> None:
    """Forget cached plans and resources (after the on-disk resource cache changed in this process), and with them
    the first calls that fresh metadata objects would replay (:data:`wavemla.api._FIRST_CALLS`, keyed by
    :func:`generation`): the next such call plans again."""
    _plan_cached.cache_clear()
    _invariant_choice.cache_clear()
    _static_resources.cache_clear()
    _GENERATION[0] += 1


def _plan_config(
    workload: Workload,
    device: DeviceSpec,
    cfg: KernelConfig,
    res: Resources,
    occ: int,
    invariant: bool,
    forced_splits: int | None,
    units_per_part: int | None = None,
    pieces: int | None = None,
    pad: bool = True,
) -> Plan:
    num_hb = math.ceil(workload.h_q / cfg.block_h)
    n_main = math.ceil(workload.topk / cfg.block_n)
    n_tiles = n_main + math.ceil(workload.extra_topk / cfg.block_n)
    if n_tiles == 0:
        raise PlanError("topk and extra_topk are both 0: there is nothing to attend to")
    target = config.get("WAVEMLA_TARGET_CTAS")
    slots = target or occ * device.num_sms
    tokens = workload.tokens
    notes: list[str] = []
    pieces_tiles: int | None = None
    if tokens == 0:
        split = _Split(1, 0, 0, 0, 0.0, 0.0, 0.0)
    elif units_per_part is not None:
        split = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)(
            min(units_per_part, tokens * n_tiles)
        )
        notes.append(f"evaluated at {units_per_part} tiles per program")
    elif invariant:
        assert pieces is not None and n_tiles % pieces == 0
        pieces_tiles = n_tiles // pieces
        split = _invariant_partition(
            _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res), device, pieces_tiles,
            forced_slots=target is not None,
        )  # fmt: skip
        notes.append(
            f"batch-invariant: {pieces} fixed piece(s) of {pieces_tiles} tiles per token, "
            f"{split.upp // pieces_tiles} piece(s) per program"
        )
    elif forced_splits is not None:
        pieces = min(_fixed_pieces(n_tiles, forced_splits, False), n_tiles)
        upp = math.ceil(n_tiles / pieces)
        # a size that does not divide the token's tiles pads the tokens: every token is cut at the same places
        split = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)(upp, padded=n_tiles % upp != 0)
        got = math.ceil(n_tiles / upp)
        notes.append(f"WAVEMLA_NUM_SPLITS={forced_splits}: {got} piece(s) of at most {upp} tiles per token")
    else:
        cost = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)
        split = _partition(cost, device, forced_slots=target is not None, pad=pad)
    upp, parts = split.upp, split.parts
    # batch-invariant pieces of a token that lies inside one program are merged there (kernels/sparse_decode.py)
    needs_combine = (
        pieces_tiles < n_tiles and upp % n_tiles != 0 if pieces_tiles is not None else parts > 1 and upp % n_tiles != 0
    )
    programs = parts * num_hb
    waves = split.waves
    tail = tokens * n_tiles * num_hb / (waves * slots * (upp + split.whole)) if waves else 1.0
    ws = _sparse_ws(cfg, workload, device)
    if split.fine_cut_skipped:
        notes.append(
            f"{split.fine_cut_skipped} tiles/program not offered though priced lower: it cuts tokens into "
            f"{_FINE_CUT_PIECES}+ pieces over {_FINE_CUT_PROGRAMS_PER_SM:g}+ programs an SM, measured slower than "
            f"priced on sm_90"
        )
    if ws:
        notes.append(
            "runs the warp-specialized sm_90 kernel (kernels/sparse_decode_ws.py) where q's head rows are packed and "
            "the cache pages 16-byte aligned, priced by its own measured costs (elsewhere the Triton kernel runs "
            "this plan)"
        )
    if split.whole:
        left = tokens - parts * (split.whole // n_tiles)
        pieces = max(b - a + 1 for a, b in (spread_slots(t, n_tiles, upp) for t in range(left)))
        merged = "the program whose piece completes the token" if split.ws_merge else "the combine kernel"
        notes.append(
            f"{tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: whole tokens first, "
            f"the leftover spread: each of {programs} programs runs {upp} tile(s) of the {left} leftover token(s), "
            f"then {split.whole // n_tiles} whole token(s) ({upp + split.whole} tiles), {waves} wave(s), "
            f"{split.active} active/SM, tail efficiency {tail:.2f}, the leftover tokens cut into up to {pieces} "
            f"pieces, merged by {merged}"
        )
    elif split.padded:
        merged = (
            "the program whose piece completes the token"
            if split.ws_merge or (not ws and merges_in_kernel(cfg))
            else "the combine kernel"
        )
        notes.append(
            f"{tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: tokens padded to "
            f"{split.padded} units, each cut into {split.padded // upp} pieces of at most {upp} tiles, one piece a "
            f"program (none starts a second token): {programs} programs, {waves} wave(s), {split.active} active/SM, "
            f"tail efficiency {tail:.2f}, merged by {merged}"
        )
    else:
        notes.append(
            f"{tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: "
            f"{upp} tiles/program, {programs} programs, {waves} wave(s), {split.active} active/SM, "
            f"tail efficiency {tail:.2f}"
            + _cut_note(cfg, n_tiles, upp, pieces_tiles, needs_combine, ws, split.ws_merge)
        )
    return Plan(
        config=cfg,
        num_head_blocks=num_hb,
        n_tiles_main=n_main,
        n_tiles=n_tiles,
        units_per_part=upp,
        num_parts=parts,
        needs_combine=needs_combine,
        programs=programs,
        slots=slots,
        programs_per_sm=occ,
        waves=waves,
        tail_efficiency=tail,
        predicted_us=split.predicted_us,
        resources=res,
        reasons=tuple(notes),
        active_per_sm=split.active,
        tile_us=split.tile_us,
        combine_us=split.combine_us,
        pieces_tiles=pieces_tiles,
        ws_merge=split.ws_merge,
        whole_units=split.whole,
        token_units=split.padded,
    )


# =====================================================================================================================
# Dense decode (DeepSeek-V3 / Kimi-K2 / GLM paged MLA). Nothing above this line is used by it except the shared
# types (KernelConfig, Resources, PlanError), the knob helpers and the occupancy rules.
# =====================================================================================================================
#
# The dense kernel streams every key of every request, so the work per request is data-dependent (cache_seqlens
# lives on the device). The planner therefore fixes only what static shapes decide: the tile configuration, the
# number of parts (programs per row block), and the per-segment overhead the device scheduler charges; the
# assignment of (request, tile) work to parts is made on the device by kernels/dense_decode.py's scheduler from the
# actual lengths (FlashMLA's get_decoding_sched_meta scheme: a contiguous partition of the flattened work list into
# equal weight, each request segment weighing its tiles plus a fixed overhead).

DENSE_D_V = 512
DENSE_D_QK = (576, 512)

# Dense cost model (µs, bytes). Partly calibrated (the wgmma efficiency, one program per SM, the combine's steps);
# the constants say where they come from.
_DENSE_LATENCY_US = 1.5  # DRAM latency under load on HBM parts (H100/H200 microbenchmarks report ~1-2 µs loaded)
_DENSE_MMA_EFFICIENCY = 0.5  # fraction of the tensor peak a Triton mma.sync loop with a BLOCK_N-row tile reaches
_DENSE_WGMMA_EFFICIENCY = 0.76  # the same for wgmma, operands in shared memory, N = 64 query rows (fitted, below)
# An SM running one program streams its tiles at this fraction of the rate two programs reach (H200: bf16 h=16,
# b=128, 16x64x4x3 at one program per SM 66% / 75% of copy bandwidth at s_k 4K / 16K, 16x32x4x3 at two 73% / 82%;
# FP8 16x64x8x1 against 16x32x4x1 6-8% slower at b >= 32; 2026-11-30-h200-dense-cal.log; at b = 11..15, s_k 4K,
# 12-18% slower, 2026-11-30-h200-dense-curve2-bf16-h16.json, where 0.9 still let the model flip between the two at
# odd b). With the wgmma efficiency at 0.8 (0.6 before) the model picks the measured best of the candidate tiles, or
# one within 3%, at 48 of 54 shapes of that grid with b >= 8 (before: 43), the worst pick 1.08x the best (before
# 1.18x; benchmarks/experiments/fit_dense.py). Re-fitted to 0.7 on the kernel with one bf16 dot of P and Sᵀ split
# over the warpgroups (bf16 h = 64 and 128, b = 8..128, s_k 4K, the three tiles forced: 2026-12-01-h200-dense-
# crossover2.json and -crossover.json): 1 miss of 13 shapes, worst pick 1.05x (h = 64, b = 24), where 0.8 missed 3,
# worst 1.19x (keys-major tiles at h = 64 b = 16..24 and h = 128 b = 8, where 16x32 row tiles measure faster); 0.75
# misses as few but moves to keys-major at h = 64 from b = 15 (measured crossover 24..32), 0.7 from b = 21, and at
# h = 128 from b = 12 (measured 8..16). The 2026-11-30 grid, of the earlier kernel: 7 misses of 54 at 0.7, 6 at 0.8.
# 0.68 after the same two tiles forced at s_k 16K, h = 64 and 128, b = 2..16 (2026-12-01-h200-dense-crossover16k.json:
# keys-major from b = 6 at h = 64 and b = 3 at h = 128) and the planner's h = 64 curve at 4K, where 0.7 took keys-major
# tiles at b = 21 and 23, 7-10% slower per request than 16x32 at b = 20 and 22 (-dense-curve-verify-bf16-h64.json):
# over those 16 and the 12 crossover2 points with b >= 2, 0 picks more than 3% slower than the best (0.7: 2, 0.66: 1,
# 0.64: 3); it moves to keys-major at h = 64 from b = 23 at 4K (alternating with 16x32 up to b = 27, where the two
# are within a few percent) and b = 6 at 16K, at h = 128 from b = 14 and 3. 0.76 on the kernel whose keys-major tiles
# compute the rope and latent dots of Sᵀ apart (9-19% faster): the three tiles forced at s_k 4K, h = 64 and 128,
# b = 4..128, and the two at 16K, b = 2..16 (2026-12-01-h200-dense-apart-crossover{4k,16k}.json): 0 of 32 picks more
# than 3% slower than the best (0.68: 4, up to 1.14x; 0.74-0.78: 0; 0.82: 1). Keys-major from b = 4 (h = 64) and
# b = 2 (h = 128) at 16K, as measured; at 4K from b = 15-17 (h = 64; the two within 2.4% at b = 12 and 16) and b = 9.
# 64-row FP8 tiles take it too since they pass P through scratch rows on sm_90 (QKᵀ and the accumulator split over
# the warpgroups, 22% faster): the three FP8 tiles forced at h = 64 and 128, b = 1..12, s_k 4K and 16K
# (2026-12-01-h200-dense-fp8cross{4k,16k}.json), picks more than 3% slower than the best 3 of 22 (up to 1.10x: 32x32
# tiles at h = 64 b = 4 and h = 128 b = 2, 4K; h = 64 b = 1, 16K), from 5 (up to 1.21x: 32x32 at h = 64 b = 6 and
# h = 128 b = 3). A dearer FP8 decode (0.08 µs a row) missed none there but moved the h = 16 FP8 picks from 16x64
# to 16x32 tiles, measured 4-30% slower (-dense-fp8table.json), so the decode cost stays.
_DENSE_ONE_PROGRAM_DRAM = 0.85
# The warp-specialized sm_90 kernel (kernels/dense_decode_ws.py): its load warp keeps the next tile in flight during
# the math, and its two math warpgroups split QKᵀ (32 keys each) and exchange the row maxima and P through shared
# memory. Fitted on the H200 at h = 128, b = 128, s_k 16K, where it is bound by its MMAs and their exchanges:
# 1,220.9 µs for 496.5 tiles per SM, 2.46 µs a tile against 1.19 at the bf16 tensor peak
# (2026-12-02-h200-dense-ws-split.log).
_DENSE_WS_MMA_EFFICIENCY = 0.48
# Its resources, its own whatever WAVEMLA_NUM_WARPS and WAVEMLA_NUM_STAGES say (config.py): two key stages, three
# warpgroups (12 warps) of at most 168 registers a thread, 231,008 B of shared memory as compiled for sm_90
# (docs/dense-decode.md): one program an SM. Counted as the Triton kernel at the knobs' warps and stages, the tile
# was dropped as not fitting under WAVEMLA_NUM_STAGES=3 (294,912 B estimated) though this kernel would run it.
_DENSE_SM90_WS = Resources(231008, 168, "table", num_warps=12, note="warp-specialized kernel, compiled for sm_90")
_DENSE_FP8_DECODE_ROW_US = 0.02  # e4m3 bit decode + scale of one 512-value row on one SM (~40 cycles at 2 GHz)
# The same for staged FP8 tiles (num_stages > 1). Against the tiles forced on the H200 at h = 16, 32 and 64, b = 1..128,
# 4K keys (benchmarks/experiments/gpu_dense_fp8_staged{,2}.sh, 2026-12-03-h200-dense-fp8-staged{,2}.log), with the
# candidate lists of _dense_base_configs, the model picks the fastest measured tile (or one within 3%) at 0.02-0.06
# (benchmarks/experiments/fit_dense_fp8.py). What decides the value is the parts: at 0.04 16x32x4x3 ran one program
# per SM instead of two (h = 16 b = 128 4K: 282.9 µs against 227.6; 2026-12-03-h200-dense-fp8-final-b301506.log),
# since the model charges the decode to every program on the SM where two programs hide each other's waits. The
# model prices FP8 tiles low (predicted / measured 0.42-0.84 over those tiles at 0.02): it ranks, it does not time.
_DENSE_FP8_STAGED_ROW_US = 0.02
_DENSE_SCHEDULER_US = 3.0  # the one-program scheduler launch inside a CUDA graph
# One step of a combine program (kernels/combine.py merges a request's pieces a group a step, the group's loads
# issued together): alone on an H200 the combine took 9.4-9.9 µs with one step and 14.0 with 8 steps of 16 pieces
# (b=1 h=16, 127 pieces; 2026-11-30-h200-dense-combine-micro.log).
_DENSE_COMBINE_STEP_US = 0.75
# What cutting requests costs against a part per request, as a share of the combine's estimated merge: fitted to the
# break-even batches of the warp-specialized kernel on the H200 (bf16, 4K keys, gpu_dense_align.sh fa02e49,
# 2026-12-02-h200-dense-align-fa02e49.log): a part per request measured even with the balanced partition at h = 64
# b = 116 (132 parts; 1.005) and h = 128 b = 60 (66 parts; 1.002), faster from b = 124 and 64 (0.951-0.972) and
# slower at h = 128 b = 56 (1.059), where the whole estimate (6 and 7 tile units) had aligned from b = 116 and 56.
# Half of it aligned h = 128 from b = 59, 4% above b = 58 on the b = 1..128 curve (gpu_dense_ws_curves.sh 3415f88,
# 2026-12-02-h200-dense-ws-curve-h128-3415f88.json: 167.2 -> 173.9 us); 0.35 starts at b = 60 (h = 64: b = 121).
# The combine runs partly beside the split's last programs, so its time alone overstates what a cut costs.
_DENSE_CUT_SHARE = 0.35
_DENSE_MAX_OVERHEAD_TILES = 16
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class DenseWorkload:
    """One dense-decode call, described by static shapes only.

    ``max_seqlen`` is the capacity of the block table (``max_blocks · page``): lengths are device data, so the
    planner prices a call at this bound and the scheduler balances what the lengths really are.
    """

    batch: int
    s_q: int
    h_q: int
    d_qk: int = 576
    max_seqlen: int = 4096
    is_fp8: bool = False
    dtype: str = "bf16"
    page: int = 64

    def __post_init__(self) -> None:
        for name in ("batch", "s_q", "h_q", "d_qk", "max_seqlen", "page"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        if not isinstance(self.is_fp8, bool):  # a string such as "false" is truthy: it would plan FP8
            raise ValueError(f"is_fp8: expected a bool, got {self.is_fp8!r}")
        if self.s_q < 1 or self.h_q < 1:
            raise ValueError(f"s_q and h_q: must be >= 1, got s_q={self.s_q}, h_q={self.h_q}")
        if self.d_qk not in DENSE_D_QK:
            raise ValueError(f"d_qk: expected 576 or 512, got {self.d_qk}")
        if self.is_fp8 and self.d_qk != 576:
            raise ValueError("d_qk: the FP8 V3.2 cache holds 576-wide rows")
        if self.dtype not in ("bf16", "fp16"):
            raise ValueError(f"dtype: expected 'bf16' or 'fp16', got {self.dtype!r}")
        if self.page < 1:
            raise ValueError(f"page: must be >= 1, got {self.page}")

    @property
    def rows(self) -> int:
        """Query rows per request: every query token of a request shares its keys, so ``s_q · h_q`` rows read each
        KV tile once (FlashMLA regroups q the same way)."""
        return self.s_q * self.h_q

    @property
    def row_bytes(self) -> int:
        """Bytes of one cached key row: 656 for FP8 V3.2, else 2 · d_qk."""
        return 656 if self.is_fp8 else 2 * self.d_qk


@dataclass(frozen=True)
class DensePlan(_Tiled):
    """Launch choices for one dense workload on one device, and why.

    ``num_parts`` programs per row block run the split kernel (``programs = num_parts · num_row_blocks``); the
    device scheduler gives each part a contiguous range of the ``(request, tile)`` list of equal weight, where a
    request segment weighs its tiles plus ``segment_overhead`` tiles. The split workspace has
    ``batch + num_parts`` slots (a request cut by part boundaries leaves one partial per part it touches, in slot
    ``request + part``).
    """

    config: KernelConfig
    num_row_blocks: int
    num_parts: int
    programs: int
    programs_per_sm: int
    active_per_sm: int
    segment_overhead: int
    tile_us: float
    predicted_us: float
    resources: Resources
    reasons: tuple[str, ...] = field(default_factory=tuple)
    # what cutting requests costs, in tile units (the combine's merge beyond its launch): the scheduler gives each
    # request a part of its own where that beats a balanced partition by this much (dense_schedule; -1: never)
    cut_units: int = -1

    def workspace_rows(self, batch: int) -> int:
        """Slots of the split workspace: every request plus every part (partials of cut requests)."""
        return batch + self.num_parts


def _dense_base_configs(rows: int, is_fp8: bool) -> list[KernelConfig]:
    """Candidate tiles by query rows (``s_q · h_q``). BLOCK_H covers the rows that share a KV tile. bf16/fp16 rows
    are staged through shared memory by Triton's pipeliner, tile ``i + NUM_STAGES - 1`` in flight while tile ``i`` is
    computed (block ids come a chunk at a time, so no stage goes to a block-table load). FP8 rows in 16-row tiles
    are staged the same way (``num_stages`` 3, the raw bytes); in 32- and 64-row tiles they are decoded in registers
    with the next tile prefetched by hand (``num_stages`` 1). The 16-row tiles fit 99 KB per block (sm_86/89/120)."""
    if is_fp8:
        # 16-row tiles staged (num_stages 3: raw bytes through cp.async, the scale blocks apart); on the H200 they
        # beat the register-prefetched 16-, 32- and 64-row tiles up to 32 query rows (h = 16: 0.71-0.89 of 16x64x8x1
        # at b = 8..128; h = 32: 0.86 of 32x32x8x1) and at h = 64 b = 1 (0.96 of 16x32x8x1), the 64-row register
        # tile beyond (h = 64 b = 8: 16x32x4x3 1.13x of 64x32x8x1); staged 32-row tiles gained nothing
        # (2026-12-03-h200-dense-fp8-staged{,2}.log). 16x16x4x3 measured 1.2-1.4x slower than 16x32x4x3 (h = 32).
        # 16x16x4x2 (45.8 KB on sm_120) is for the parts with 100 KB of shared memory per SM (sm_86/89/120), where
        # 16x32x4x3 (94 KB) runs one program per SM and it runs two; unmeasured there, and never the H200's pick
        # (its picks at 1K-64K keys are the same with and without it).
        if rows <= 32:
            return [KernelConfig(16, 32, 4, 3), KernelConfig(16, 16, 4, 2)]
        return [KernelConfig(64, 32, 8, 1), KernelConfig(32, 32, 8, 1), KernelConfig(16, 32, 4, 3),
                KernelConfig(16, 16, 4, 2)]  # fmt: skip
    # Rows at 3 stages: 2 tile buffers with mma.sync (its operands are read into registers, freeing a buffer), one
    # tile in flight during the math; at 2 stages the one buffer serializes load and math. 64x64x8x2 runs
    # keys-major (wgmma on sm_90, see kernels/dense_decode.keys_major): 64 query rows per program share each tile,
    # but its 2 buffers of 64 keys (230 KB with q) leave no third, so each tile's load follows the previous math.
    if rows <= 16:
        return [KernelConfig(16, 32, 4, 3), KernelConfig(16, 64, 4, 3), KernelConfig(16, 16, 4, 3)]
    if rows <= 32:
        return [KernelConfig(32, 32, 8, 3), KernelConfig(16, 32, 4, 3), KernelConfig(16, 16, 4, 3)]
    return [KernelConfig(64, 64, 8, 2), KernelConfig(32, 32, 8, 3), KernelConfig(16, 32, 4, 3),
            KernelConfig(16, 16, 4, 3)]  # fmt: skip


def dense_candidate_configs(workload: DenseWorkload) -> list[KernelConfig]:
    """Kernel configurations the dense planner costs for this workload (each one that fits the device)."""
    return _dense_base_configs(workload.rows, workload.is_fp8)


def all_dense_candidate_configs() -> list[tuple[KernelConfig, bool]]:
    """Every (configuration, is_fp8) :func:`dense_candidate_configs` can return (the compiled table's rows)."""
    out: list[tuple[KernelConfig, bool]] = []
    for is_fp8 in (True, False):
        for rows in (16, 32, 64):
            for cfg in _dense_base_configs(rows, is_fp8):
                if (cfg, is_fp8) not in out:
                    out.append((cfg, is_fp8))
    return out


def dense_static_resources(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec) -> Resources:
    """Resources of the dense split kernel at ``cfg`` on ``device``: compiled (disk cache or packaged table), else
    an estimate."""
    return _dense_static_resources(cfg, workload.is_fp8, device.arch, device.max_regs_per_thread, device.regs_per_sm,
                                   config.get("WAVEMLA_CACHE_DIR"))  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _dense_static_resources(
    cfg: KernelConfig, is_fp8: bool, arch: int, max_regs: int, regs_per_sm: int, cache_dir: str | None
) -> Resources:
    del cache_dir  # part of the cache key only: resources.lookup reads the knob's directory
    from wavemla import resources

    compiled = _compiled_resources(cfg, is_fp8, arch, resources.DENSE_KERNEL)
    if compiled is not None:
        return compiled
    # Estimate: the q tile plus the KV tile (rows: one copy per pipeline stage; FP8: the decoded fp16 tile twice,
    # once per dot operand layout), 576-wide elements of 2 bytes.
    q = cfg.block_h * 576 * 2
    kv = cfg.block_n * 576 * 2 * (2 if is_fp8 else max(cfg.num_stages, 1))
    regs = min(max_regs, regs_per_sm // (cfg.num_warps * 32))
    return Resources(q + kv, regs, "estimate", note="estimated (not in the compiled table)")


def _dense_tile_us(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec, active: int, num_rb: int) -> float:
    """SM time of one KV tile for one program when ``active`` programs share the SM.

    The largest of three: the tile's DRAM bytes for all ``active`` programs at the SM's share of bandwidth (the row
    blocks of a part read the same tile, adjacent in launch order, so DRAM serves it once); one program's own time
    per tile; and the tensor-core work (plus the FP8 decode) of all ``active`` programs. A program whose next tile
    is in flight during the math (rows at 3 stages; FP8 rows by a register prefetch) takes the larger of the loaded
    latency and its math; one whose tile load follows the previous tile's math (rows at 1-2 stages, the
    keys-major 64x64x8x2 included) takes their sum. Where the warp-specialized kernel runs (:func:`_dense_ws`), its
    load warp keeps the next tile in flight during the math.
    """
    ws = _dense_ws(cfg, workload, device)
    tile_bytes = cfg.block_n * workload.row_bytes
    share = device.mem_gbps * _DRAM_EFFICIENCY * 1e3 / device.num_sms  # bytes per µs per SM
    if active == 1:
        share *= _DENSE_ONE_PROGRAM_DRAM
    dram = active * tile_bytes / num_rb / share
    mma = _dense_tile_flops(cfg, workload, ws) / (device.bf16_tflops * 1e6 / device.num_sms * _dense_mma_efficiency(
        cfg, workload, device, ws))  # fmt: skip
    decode = cfg.block_n * _dense_fp8_row_us(cfg) if workload.is_fp8 else 0.0
    overlapped = ws or workload.is_fp8 or cfg.num_stages >= 3
    own = max(_DENSE_LATENCY_US, mma + decode) if overlapped else _DENSE_LATENCY_US + mma + decode
    return max(dram, own, active * (mma + decode))


def _dense_fp8_row_us(cfg: KernelConfig) -> float:
    """Decode cost of one FP8 V3.2 row in a tile of ``cfg``: staged tiles (``num_stages`` > 1) convert e4m3 alone,
    register-prefetched tiles assemble the bits and scale them (kernels/dense_decode.py)."""
    return _DENSE_FP8_STAGED_ROW_US if cfg.num_stages > 1 else _DENSE_FP8_DECODE_ROW_US


def _dense_tile_flops(cfg: KernelConfig, workload: DenseWorkload, ws: bool = False) -> float:
    """Tensor FLOPs one program issues per tile: ``QKᵀ`` over d_qk and ``PV`` over 512 (twice for bf16 rows, whose
    P went in as bf16(P) + bf16(P - bf16(P))). Keys-major with more warps than the 64-key M needs repeats ``QKᵀ`` in
    each warpgroup (Triton lays chained dots out with every warp along M). These are the forms of the kernel the
    fitted constants were measured on; the shipped one-dot P (``WAVEMLA_DENSE_P=single``) and, on sm_90, the
    keys-major tile's split Sᵀ run 1-15% faster than the model predicts from them (H200: docs/dense-decode.md).
    The warp-specialized kernel (``ws``) issues each dot once, P in one dot."""
    if ws:
        return 2.0 * cfg.block_h * cfg.block_n * (workload.d_qk + DENSE_D_V)
    pv = 2 if (not workload.is_fp8 and workload.dtype == "bf16") else 1
    qk_repeat = max(1, cfg.num_warps * 16 // cfg.block_n) if _dense_keys_major(workload, cfg) else 1
    return 2.0 * cfg.block_h * cfg.block_n * (workload.d_qk * qk_repeat + DENSE_D_V * pv)


def _sparse_ws(cfg: KernelConfig, workload: Workload, device: DeviceSpec) -> bool:
    """Whether the sparse split kernel runs warp-specialized (the kernel module's own rule, imported)."""
    from wavemla.kernels.sparse_decode_ws import applies

    return applies(arch=device.arch, is_fp8=workload.is_fp8, h_q=workload.h_q, block_h=cfg.block_h,
                   block_n=cfg.block_n)  # fmt: skip


def _dense_ws(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec) -> bool:
    """Whether the split kernel runs warp-specialized (the kernel module's own rule, imported)."""
    from wavemla.kernels.dense_decode_ws import applies

    return applies(arch=device.arch, is_fp8=workload.is_fp8, d_qk=workload.d_qk, dtype=workload.dtype,
                   page=workload.page, rows=workload.rows, block_h=cfg.block_h, block_n=cfg.block_n)  # fmt: skip


def _dense_keys_major(workload: DenseWorkload, cfg: KernelConfig) -> bool:
    """The split kernel's own rule for running a tile transposed (imported, not repeated)."""
    from wavemla.kernels.dense_decode import keys_major

    return keys_major(workload.is_fp8, cfg.block_h)


def _dense_mma_efficiency(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec, ws: bool = False) -> float:
    """Fraction of the bf16 tensor peak the tile loop reaches: the warp-specialized kernel (``ws``), wgmma with the
    dots split over the warpgroups (keys-major tiles and 64-row FP8 tiles on sm_90) or mma.sync."""
    from wavemla.kernels.dense_decode import fp8_rows64

    if ws:
        return _DENSE_WS_MMA_EFFICIENCY
    if device.arch == 90 and (_dense_keys_major(workload, cfg) or fp8_rows64(workload.is_fp8, cfg.block_h)):
        return _DENSE_WGMMA_EFFICIENCY
    return _DENSE_MMA_EFFICIENCY


def _dense_segment_us(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec) -> float:
    """A request segment's fixed cost in one program: the q tile in, the output (or fp32 partial) out, at the SM's
    share of bandwidth, plus one loaded latency to fill the pipeline."""
    share = device.mem_gbps * _DRAM_EFFICIENCY * 1e3 / device.num_sms
    q_bytes = cfg.block_h * workload.d_qk * 2
    out_bytes = cfg.block_h * DENSE_D_V * 4
    return _DENSE_LATENCY_US + (q_bytes + out_bytes) / share


def plan_dense(workload: DenseWorkload, device: DeviceSpec) -> DensePlan:
    """Choose the tile configuration, the number of parts and the segment overhead for a dense decode (pure).

    Raises :class:`PlanError` when no configuration fits (naming the knobs that forced it) or the work list cannot be
    indexed in int32 in the tiles of any that fits, and :class:`~wavemla.config.KnobError` when a knob's value is
    invalid. Honours the tile knobs (``WAVEMLA_BLOCK_H``, ``WAVEMLA_BLOCK_N``, ``WAVEMLA_NUM_WARPS``,
    ``WAVEMLA_NUM_STAGES``) and ``WAVEMLA_TARGET_CTAS`` (program slots: ``slots // row blocks`` parts, at least one,
    so fewer slots than row blocks still take a program per row block), applied last; refuses
    ``WAVEMLA_NUM_SPLITS`` (:class:`PlanError`): the schedule balances the batch's tiles, it cuts no request into a
    fixed number of pieces.

    Example::

        p = plan_dense(DenseWorkload(batch=64, s_q=1, h_q=16, max_seqlen=16384), get_spec("h200"))
        print(p.config, p.num_parts, p.segment_overhead, p.reasons[-1])
    """
    if not isinstance(workload, DenseWorkload):
        raise TypeError(f"workload: expected a DenseWorkload, got {type(workload).__name__}")
    if not isinstance(device, DeviceSpec):
        raise TypeError(f"device: expected a DeviceSpec, got {type(device).__name__}")
    # WAVEMLA_DENSE_WS and WAVEMLA_DENSE_P decide which split kernel a 64x64 tile runs: part of the plan's key
    overrides = (*(config.get(k) for k in _PLAN_KNOBS), config.get("WAVEMLA_DENSE_WS"), config.get("WAVEMLA_DENSE_P"),
                 config.get("WAVEMLA_DENSE_ALIGN"))  # fmt: skip
    return _plan_dense_cached(workload, device, overrides)


def _dense_fit(
    cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec, reasons: list[str]
) -> tuple[Resources, int] | None:
    """(res, programs per SM) of ``cfg``: the warp-specialized kernel's own where it runs the tile (its warps and
    stages are not the configuration's), else the Triton kernel's; None with the reason appended where it does not
    fit."""
    ws = _dense_ws(cfg, workload, device)
    res = _DENSE_SM90_WS if ws else dense_static_resources(cfg, workload, device)
    return _fit_resources(cfg, res, device, reasons)


@functools.lru_cache(maxsize=4096)
def _plan_dense_cached(workload: DenseWorkload, device: DeviceSpec, overrides: tuple[object, ...]) -> DensePlan:
    del overrides  # part of the cache key only: the knobs are read again below
    splits = config.get("WAVEMLA_NUM_SPLITS")
    if splits is not None:
        raise PlanError(
            f"WAVEMLA_NUM_SPLITS={splits}: the dense decode (and DeepSeek-V3.2's sparse decode, which runs it) cannot "
            "cut each request into a fixed number of pieces: its device scheduler balances the whole batch's tiles "
            "over the parts; unset it (WAVEMLA_TARGET_CTAS sets the program slots the parts fill)"
        )
    reasons: list[str] = []
    forced = forced_tile_knobs()
    if forced:
        reasons.append("forced by " + ", ".join(f"{k}={v}" for k, v in forced.items()))
    target = config.get("WAVEMLA_TARGET_CTAS")
    best: DensePlan | None = None
    overflow: PlanError | None = None  # the first tile whose work list exceeds int32 (others may not: fewer tiles)
    seen: set[KernelConfig] = set()
    for candidate in dense_candidate_configs(workload):
        cfg = _override_config(candidate)
        if cfg in seen:
            continue
        seen.add(cfg)
        fit = _dense_fit(cfg, workload, device, reasons)
        if fit is None:
            continue
        res, occ = fit
        if not forced and _dense_short_tile_dominated(cfg, workload, device, occ):
            reasons.append(
                f"{cfg.label}: {res.smem_bytes // KIB} KB smem, {occ} program(s)/SM; not priced: the 32-key tile "
                f"runs as many programs per SM (two or more) with twice the bytes in flight"
            )
            continue
        too_many: PlanError | None = None
        for slots in [target] if target is not None else _dense_slot_levels(device, occ, workload, cfg):
            try:
                p = _dense_plan_config(workload, device, cfg, res, occ, slots)
            except PlanError as e:  # int32 work units: a tile of more keys may index the list
                too_many = e
                continue
            if best is None or p.predicted_us < best.predicted_us - 1e-9:
                best = p
        reasons.append(
            f"{cfg.label}: {res.smem_bytes // KIB} KB smem, {res.regs_per_thread} regs"
            + (f", {res.stack_bytes} B stack" if res.stack_bytes else "")
            + f" ({res.note}); {occ} program(s)/SM"
            + (f"; {too_many}" if too_many is not None else "")
        )
        overflow = overflow or too_many
    if best is None:
        knobs = ", ".join(f"{k}={v}" for k, v in forced.items())
        prefix = f"{knobs}: " if knobs else ""
        if overflow is not None:
            raise PlanError(f"{prefix}{overflow}")
        raise PlanError(f"{prefix}no kernel configuration fits {device.name} for {workload}; " + "; ".join(reasons))
    if target is not None and best.num_row_blocks > target:
        reasons.append(
            f"WAVEMLA_TARGET_CTAS={target}: exceeded, one part over the {best.num_row_blocks} row blocks of "
            f"{workload.rows} query rows in {best.config.block_h}-row tiles (a program each)"
        )
    return dataclasses.replace(best, reasons=(*reasons, *best.reasons))


def _dense_short_tile_dominated(cfg: KernelConfig, workload: DenseWorkload, device: DeviceSpec, occ: int) -> bool:
    """Whether ``cfg`` is a 16-key row tile whose 32-key twin (same rows, warps and stages) runs as many programs per
    SM, two or more. The two then differ only in the bytes each program keeps in flight (one tile during the math:
    18 KB against 37 KB), which the model does not price; it held them within 1-2% and picked the 16-key tile on
    the H100 preset by the rounding of the segment overhead to whole tiles. Measured on sm_90 (bf16 h = 16, each
    tile forced, CUDA graph, L2 flushed): on an H100 SXM the 16-key tile took 1.00-1.08x the 32-key tile's time at
    b = 32/64/128 with 4K and 16K keys (uniform lengths; the planner prices the block table's capacity;
    2026-12-06-h100-dense-h16-tiles-682fc73.json), on an H200 1.33x at b = 32, 16K
    (2026-12-06-h200-dense-h16-probe-8e1440e-{1,2}.json). Only with skewed lengths, where most requests hold 128-512
    keys, was it faster (H100: 0.93-0.99x). Where the 32-key tile runs one program per SM (sm_80/86/89/120) the
    16-key tile stays a candidate."""
    if workload.is_fp8 or cfg.block_n != 16:
        return False
    twin = dataclasses.replace(cfg, block_n=32)
    twin_res = dense_static_resources(twin, workload, device)
    twin_occ = _occupancy(twin, twin_res, device)
    return twin_occ >= max(2, occ)


def dense_combine_pieces(batch: int, num_parts: int) -> int:
    """The pieces a request is cut into when ``num_parts`` parts share ``batch`` requests of the block table's
    capacity (uniform lengths): at most about ``num_parts / batch + 1``; skewed lengths can give a long request
    more."""
    return min(num_parts, -(-num_parts // max(batch, 1)) + 1)


def dense_combine_shape(batch: int, num_parts: int) -> tuple[int, int]:
    """(pieces per step, output columns per program) of the dense combine (kernels/combine.py) for ``batch``
    requests cut by ``num_parts`` parts, by the pieces a request can have (:func:`dense_combine_pieces`).

    Measured alone on an H200 (``benchmarks/experiments/dense_combine_micro.py``,
    ``2026-11-30-h200-dense-combine-micro.log``, CUDA-graph replay, median of 50): the previous combine, one piece
    per memory round trip over 128 columns, took 57.1 µs for b=1 h=16 cut into 127 pieces, 19.3 for b=1 h=128 in
    33, 15.5-17.7 at b=128 with 2-3; a group loaded as one ``[pieces, rows, columns]`` tensor (reduced across
    threads: shuffles and shared memory) 23.2 at 127 pieces but 28-148 at b=128; the group's pieces as separate
    loads of an unrolled loop, 16 pieces over 32 columns, 14.0 at 127 pieces, 9.8 at 33, 9.5-9.9 at 5-17, and 4
    pieces over 128 columns 9.4-13.5 at b=128.

    Past 16 pieces, 32 a step (``benchmarks/experiments/dense_combine_shapes.py --many`` and ``--skewed``,
    ``2026-12-03-h200-dense-combine-many-a268b5a.json``, ``-dense-combine-skewed-59525d7.json``, L2 flushed, median
    of 30, 15 cases of 17-212 pieces in the longest request, h = 16/64/128, uniform and skewed lengths): over 64
    columns 0.85-0.96 of 16 pieces over 32 in every case; over 16 columns 0.72-0.84 where a request can have 64 or
    more (b=1 h=64 in 132 parts: 19.2 -> 13.8 µs; b=8 h=16 skewed in 264: 28.2 -> 21.2) but up to 1.21 at 17-34.
    """
    pieces = dense_combine_pieces(batch, num_parts)
    if pieces <= 4:
        return 4, 128
    if pieces <= 8:
        return 8, 128
    if pieces <= 16:
        return 16, 32
    if pieces < 64:
        return 32, 64
    return 32, 16


def _dense_slot_levels(device: DeviceSpec, occ: int, workload: DenseWorkload, cfg: KernelConfig) -> list[int]:
    """Program slots the dense planner prices: every whole number of programs per SM up to the occupancy, and for
    small work fewer programs than SMs (halving down to one part per row block): a request cut into a piece per
    slot leaves the combine many pieces to merge, which can cost more than a short split saves."""
    levels = [k * device.num_sms for k in range(1, occ + 1)]
    rows = math.ceil(workload.rows / cfg.block_h)
    slots = device.num_sms // 2
    while slots >= rows:
        levels.append(slots)
        slots //= 2
    return levels


def _dense_plan_config(
    workload: DenseWorkload, device: DeviceSpec, cfg: KernelConfig, res: Resources, occ: int, slots: int
) -> DensePlan:
    """The plan of ``cfg`` over ``slots`` program slots, priced for requests at the block table's capacity."""
    num_rb = math.ceil(workload.rows / cfg.block_h)
    parts = max(1, slots // num_rb)
    programs = parts * num_rb
    active = max(1, min(occ, -(-programs // device.num_sms)))
    tile = _dense_tile_us(cfg, workload, device, active, num_rb)
    segment = _dense_segment_us(cfg, workload, device)
    overhead = max(1, min(_DENSE_MAX_OVERHEAD_TILES, math.ceil(segment / tile)))
    tiles = max(1, math.ceil(workload.max_seqlen / cfg.block_n))
    weight = workload.batch * (tiles + overhead)
    if weight > _INT32_MAX:
        raise PlanError(
            f"batch {workload.batch} x ({tiles} tiles + {overhead}) = {weight} work units exceed int32: "
            "use a smaller block table (max_blocks · page) or batch"
        )
    # Balanced: every part carries ceil(weight / parts) units, plus one segment overhead for the request it starts
    # inside; a request is cut only where a part boundary falls, and each cut costs one partial in the combine.
    per_part = -(-weight // parts) + overhead
    split_us = per_part * tile
    cut = workload.batch > 0 and parts > 1
    share = device.mem_gbps * _DRAM_EFFICIENCY * 1e3
    combine = 0.0
    if cut:
        # priced at 16 pieces a step where the combine runs 32 (dense_combine_shape): the parts were chosen, and the
        # curves measured, with that price; 32 a step measured 0.72-0.96 of its time, so it stays an upper bound
        group = min(dense_combine_shape(workload.batch, parts)[0], 16)
        combine = _LAUNCH_US + -(-dense_combine_pieces(workload.batch, parts) // group) * _DENSE_COMBINE_STEP_US
        # 4-byte partials, as when _DENSE_CUT_SHARE was fitted. They are 2 bytes since (kernels/dense_decode.py,
        # partials_dtype), which the curves at 4K show costs here overstate by about 3% (2026-12-03-h200-dense-ws-
        # curve-h{64,128}-3f5211a.json: predicted over measured 1.13 and 1.15, against 1.10 and 1.13), but priced
        # at 2 bytes the part-per-request window would move from b = 121 and 60 to 123 and 61 (not measured), and the
        # curves show no step at the present edges (h = 64: 185.4 us cut at b = 120, 182.1 whole at b = 121; h = 128:
        # 167.5 at b = 59, 169.4 at b = 60).
        combine += 2 * (workload.batch + parts) * workload.rows * DENSE_D_V * 4 / share
    # Aligned (dense_schedule): a part per request where the heaviest request costs no more than a balanced part plus
    # what cutting costs, _DENSE_CUT_SHARE of the combine's merge beyond its launch (which still runs, with nothing to
    # merge); priced here at capacity.
    cut_units = -1
    if config.get("WAVEMLA_DENSE_ALIGN") != "off":
        cut_units = max(0, round(_DENSE_CUT_SHARE * (combine - _LAUNCH_US) / tile)) if cut else 0
    aligned = cut and dense_schedule_aligned(workload.batch, parts, overhead, tiles + overhead, weight, cut_units)
    if aligned:
        split_us, combine = (tiles + overhead) * tile, _LAUNCH_US
    predicted = _DENSE_SCHEDULER_US + _LAUNCH_US + split_us + combine
    kernel = " (warp-specialized sm_90 kernel)" if _dense_ws(cfg, workload, device) else ""
    share_note = (
        f"a part per request ({tiles + overhead} tile units, none cut)" if aligned else f"{per_part} tile units/part"
    )
    note = (
        f"{cfg.label}{kernel} over {slots} slots: {parts} parts x {num_rb} row block(s) = {programs} programs, "
        f"{active} active/SM; tile {tile:.2f} us, segment overhead {overhead} tile(s); at capacity "
        f"({workload.batch} x {tiles} tiles) {share_note}, predicted {predicted:.1f} us"
    )
    return DensePlan(
        config=cfg,
        num_row_blocks=num_rb,
        num_parts=parts,
        programs=programs,
        programs_per_sm=occ,
        active_per_sm=active,
        segment_overhead=overhead,
        tile_us=tile,
        predicted_us=predicted,
        resources=res,
        reasons=(note,),
        cut_units=cut_units,
    )


def clear_dense_caches() -> None:
    """Forget cached dense plans and resources."""
    _plan_dense_cached.cache_clear()
    _dense_static_resources.cache_clear()


def dense_schedule_aligned(batch: int, num_parts: int, overhead: int, max_weight: int, total: int,
                           cut_units: int) -> bool:  # fmt: skip
    """Whether the dense schedule gives each request a part of its own (:func:`dense_schedule`, "Aligned"): the
    heaviest request costs no more than a balanced part plus what cutting requests costs."""
    return cut_units >= 0 and 0 < batch <= num_parts and max_weight <= -(-total // num_parts) + overhead + cut_units


@dataclass(frozen=True)
class DenseSchedule:
    """What the device scheduler computes from the lengths (see :func:`dense_schedule`).

    ``parts[p] = (first request, first tile, end request, end tile)``, the end exclusive; ``request_parts[r] =
    (first part, last part)`` touching request ``r``; ``part_weights[p]`` the weight part ``p`` carries (its units
    plus ``overhead`` for each request segment it holds).
    """

    parts: tuple[tuple[int, int, int, int], ...]
    request_parts: tuple[tuple[int, int], ...]
    part_weights: tuple[int, ...]
    total_weight: int


def dense_schedule(
    lengths: list[int], num_parts: int, overhead: int, block_n: int, max_seqlen: int, cut_units: int = -1
) -> DenseSchedule:  # fmt: skip
    """The dense work partition for these lengths, in plain Python: the definition the device scheduler
    (kernels/dense_decode.py) must reproduce exactly, and a way to inspect a plan's balance for given lengths.

    Request ``r`` has ``n_r = max(ceil(clamp(L_r, 0, max_seqlen) / block_n), 1)`` units and weighs ``w_r = n_r +
    overhead``; with ``C_r`` the exclusive weight prefix and ``W`` the total, part ``p`` starts at weight
    ``x_p = floor(p·W / P)``: in the last request with ``C_r <= x_p``, at tile ``clamp(x_p - C_r - overhead, 0,
    n_r - 1)``.

    Aligned: with ``cut_units >= 0`` (what cutting requests costs, in units: the partials, the combine's merge),
    ``b <= P`` and ``max(w_r) <= ceil(W / P) + overhead + cut_units``, part ``p < b`` holds request ``p`` whole and
    the parts past ``b`` hold nothing: no request is cut, at the price of the heaviest request's weight instead of a
    balanced share (batches a little under the part count with even lengths).

    Example::

        s = dense_schedule([4096, 1, 1, 300], num_parts=8, overhead=3, block_n=64, max_seqlen=8192)
        s.part_weights          # within one request segment overhead of W / P each
    """
    if num_parts < 1 or overhead < 0 or block_n < 1:
        raise ValueError(f"num_parts, overhead, block_n: expected >= 1, >= 0, >= 1, got {num_parts}, {overhead}, "
                         f"{block_n}")  # fmt: skip
    units = [max(-(-min(max(n, 0), max_seqlen) // block_n), 1) for n in lengths]
    prefix, unit_prefix = [0], [0]
    for n in units:
        prefix.append(prefix[-1] + n + overhead)
        unit_prefix.append(unit_prefix[-1] + n)
    total = prefix[-1]
    b = len(units)
    if b == 0:  # no work: every part holds nothing
        return DenseSchedule(((0, 0, 0, 0),) * num_parts, (), (0,) * num_parts, 0)
    if dense_schedule_aligned(b, num_parts, overhead, max(units, default=0) + overhead, total, cut_units):
        parts = tuple((min(p, b), 0, min(p + 1, b), 0) for p in range(num_parts))
        return DenseSchedule(parts, tuple((r, r) for r in range(b)),
                             tuple(units[p] + overhead if p < b else 0 for p in range(num_parts)), total)  # fmt: skip
    begins: list[tuple[int, int]] = []
    for p in range(num_parts):
        x = p * total // num_parts
        r = max(i for i in range(b) if prefix[i] <= x)
        begins.append((r, min(max(x - prefix[r] - overhead, 0), units[r] - 1)))
    ends = [*begins[1:], (b, 0)]
    parts = tuple((rb, tb, re, te) for (rb, tb), (re, te) in zip(begins, ends, strict=True))

    def part_of(x: int) -> int:
        return min(((x + 1) * num_parts - 1) // total, num_parts - 1)

    request_parts = tuple(
        (part_of(prefix[r] + overhead), part_of(prefix[r + 1] - 1)) for r in range(b)
    )  # fmt: skip
    weights = []
    for (rb, tb), (re, te) in zip(begins, ends, strict=True):
        start = unit_prefix[rb] + tb
        stop = unit_prefix[re] + te if re < b else unit_prefix[b]
        segments = sum(1 for r in range(b) if unit_prefix[r] < stop and unit_prefix[r + 1] > start)
        weights.append(stop - start + segments * overhead)
    return DenseSchedule(parts, request_parts, tuple(weights), total)


# ---------------------------------------------------------------------------------------------------------------------
# Sparse prefill (FlashMLA's flash_mla_sparse_fwd): whole query tokens per program, one tile shape per GPU.

PREFILL_D_QK = (512, 576)
PREFILL_D_V = 512


@dataclass(frozen=True)
class PrefillWorkload:
    """One sparse-prefill call by static shapes: ``s_q`` query tokens of ``h_q`` heads, ``topk`` index entries each,
    rows ``d_qk`` wide (512: DeepSeek-V4; 576: DeepSeek-V3.2)."""

    s_q: int
    h_q: int
    topk: int
    d_qk: int = 512

    def __post_init__(self) -> None:
        for name in ("s_q", "h_q", "topk", "d_qk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        if not 1 <= self.h_q <= 128:
            raise ValueError(f"h_q: expected 1..128, got {self.h_q}")
        if self.d_qk not in PREFILL_D_QK:
            raise ValueError(f"d_qk: expected 512 or 576, got {self.d_qk}")


@dataclass(frozen=True)
class PrefillPlan(_Tiled):
    """The sparse prefill's launch: ``config.block_h`` heads of one token per program over ``config.block_n``-row
    tiles, ``programs`` programs, ``programs_per_sm`` of them resident on an SM."""

    config: KernelConfig
    d_v: int
    resources: Resources
    programs: int
    programs_per_sm: int
    reasons: tuple[str, ...] = field(default_factory=tuple)
    splits: int = 1  # pieces each token's list is cut into (one program each), merged by a second launch
    piece_tiles: int = 0  # tiles of BLOCK_N entries a piece holds (the whole list's where splits is 1)


# Fastest first where measured (H100, docs/sparse-prefill.md). Shared memory holds q's head block and the gathered
# row tiles in flight (Triton's pipeliner keeps the next tiles' loads going while one is computed); the [block_h,
# 512] fp32 accumulator lives in registers: 64 heads over 8 warps are 128 registers a thread, and 64-head tiles spill
# a little everywhere but with wgmma at 32 rows. Three stages took 0.75 of two's time at DeepSeek-V3.2's 2048 rows of
# 576 and the same at DeepSeek-V4's 640 rows of 512.
_PREFILL_TILES = (
    KernelConfig(64, 64, 8, 3), KernelConfig(64, 64, 8, 2), KernelConfig(64, 32, 8, 2), KernelConfig(32, 32, 4, 2),
    KernelConfig(16, 32, 4, 2), KernelConfig(16, 16, 4, 1),
)  # fmt: skip


def all_prefill_configs() -> list[KernelConfig]:
    """Every tile the prefill planner can pick (the packaged resource table covers each on sm_80..sm_120)."""
    return list(_PREFILL_TILES)


@functools.lru_cache(maxsize=256)
def _prefill_resources(cfg: KernelConfig, arch: int, d_qk: int, cache_dir: str | None) -> Resources:
    """Compiled resources of a prefill tile (the d_qk 576 build, which bounds 512), else an estimate: q's head
    block and the staged row tiles, 16-bit elements."""
    del cache_dir  # part of the cache key only: resources.lookup reads the knob's directory
    from wavemla import resources

    compiled = _compiled_resources(cfg, False, arch, resources.PREFILL_KERNEL)
    if compiled is not None:
        return compiled
    smem = 2 * d_qk * (cfg.block_h + cfg.num_stages * cfg.block_n)
    return Resources(smem, 255, "estimate", note="estimated (not in the compiled table)")


def plan_sparse_prefill(workload: PrefillWorkload, device: DeviceSpec) -> PrefillPlan:
    """The first tile of the list (fastest first where measured) whose compiled shared memory fits the device's
    per-block limit, narrowed where the launch would waste it: a head block never exceeds the heads (rounded up to
    16, the dot's least M); where whole lists fill under one wave of program slots, each list is cut into as many
    pieces as fit one wave (:func:`prefill_splits`); and where that still leaves a third of the slots idle, 16-head
    blocks are taken if they keep more of one wave busy (:data:`PREFILL_NARROW_BELOW`).

    Example::

        p = plan_sparse_prefill(PrefillWorkload(s_q=4096, h_q=64, topk=640), get_spec("rtx-pro-6000"))
        str(p.config), p.programs_per_sm, p.splits   # ("32x32x4x2", 1, 1)
        p = plan_sparse_prefill(PrefillWorkload(s_q=16, h_q=64, topk=640), get_spec("h200"))
        str(p.config), p.splits, p.piece_tiles       # ("16x32x4x2", 4, 5): 256 programs of 5 tiles
    """
    # The decode's plan knobs are read here too, so that a bad value is refused (KnobError) whichever call reads it
    # first. The tile, split and slot knobs set the decode kernels' launch: the prefill keeps its own tiles (the list
    # below, measured for it) and says so. WAVEMLA_BATCH_INVARIANT is honoured: whole lists, one tile per head count.
    knobs = {k: config.get(k) for k in _PLAN_KNOBS}
    invariant = bool(knobs["WAVEMLA_BATCH_INVARIANT"])
    unused = [f"{k}={knobs[k]}" for k in (*_TILE_KNOBS, "WAVEMLA_NUM_SPLITS", "WAVEMLA_TARGET_CTAS")
              if knobs[k] is not None]  # fmt: skip
    cache = knobs["WAVEMLA_CACHE_DIR"]
    fitting: list[tuple[KernelConfig, Resources]] = []
    why = ""  # the smallest tile's limit where none fits
    for c in _PREFILL_TILES:
        r = _prefill_resources(c, device.arch, workload.d_qk, cache)
        if r.smem_bytes > device.smem_per_block:
            why = f"{device.smem_per_block} B of shared memory per block"
        elif _blocks_per_sm(device, r.smem_bytes, r.regs_per_thread, c.num_warps) < 1:  # registers, threads
            why = f"{c}: {device.occupancy_reason(r.smem_bytes, r.regs_per_thread, c.num_warps)}"
        else:
            fitting.append((c, r))
    if not fitting:
        raise PlanError(f"{device.name}: no prefill tile fits {why}")
    cfg, res = fitting[0]
    limit = device.smem_per_block // KIB
    reasons = [f"{cfg}: the first listed tile within {limit} KB a block ({res.smem_bytes} B, {res.note})"]
    if unused:
        reasons.insert(0, f"{', '.join(unused)} not applied: they set the decode kernels' launch, the prefill takes "
                          "its own tiles")  # fmt: skip
    heads16 = max(16, 1 << (workload.h_q - 1).bit_length())
    if cfg.block_h > heads16:
        cfg, res = next((c, r) for c, r in fitting if c.block_h <= heads16)
        reasons.append(f"{cfg}: {workload.h_q} heads fill {cfg.block_h}-head blocks")
    wide = _prefill_launch(workload, device, cfg, res, cut=not invariant)
    if invariant:
        reasons.append(
            "batch-invariant (WAVEMLA_BATCH_INVARIANT): whole lists in this tile whatever the token count, so a "
            "token's bits do not depend on the tokens beside it"
        )
    elif wide.fill < PREFILL_NARROW_BELOW and cfg.block_h > 16:
        c16, r16 = next((c, r) for c, r in fitting if c.block_h == 16)
        narrow = _prefill_launch(workload, device, c16, r16)
        if narrow.fill > wide.fill and narrow.programs <= device.num_sms * narrow.per_sm:  # one wave
            reasons.append(
                f"{c16}: {workload.s_q} tokens keep {wide.fill:.0%} of the slots busy with {cfg.block_h}-head "
                f"blocks, {narrow.fill:.0%} with 16-head blocks"
            )
            cfg, res, wide = c16, r16, narrow
    programs, per_sm, splits, piece_tiles = wide.programs, wide.per_sm, wide.splits, wide.piece_tiles
    if splits > 1:
        reasons.append(
            f"{programs // splits} programs fill under one wave of {device.num_sms * per_sm} slots: each list cut into "
            f"{splits} pieces of {piece_tiles} tiles, merged by a second launch"
        )
    reasons.append(f"{programs} programs, {per_sm} per SM on {device.num_sms} SMs")
    return PrefillPlan(config=cfg, d_v=PREFILL_D_V, resources=res, programs=programs, programs_per_sm=per_sm,
                       reasons=tuple(reasons), splits=splits, piece_tiles=piece_tiles)  # fmt: skip


@dataclass(frozen=True)
class _PrefillLaunch:
    programs: int  # with the pieces
    per_sm: int
    splits: int
    piece_tiles: int
    fill: float  # the busy fraction of its waves' slots (tail efficiency)


def _prefill_launch(workload: PrefillWorkload, device: DeviceSpec, cfg: KernelConfig, res: Resources,
                    cut: bool = True) -> _PrefillLaunch:  # fmt: skip
    """A tile's launch for ``workload``: its programs, cut into pieces where whole lists fill under one wave (and
    ``cut``)."""
    per_sm = _blocks_per_sm(device, res.smem_bytes, res.regs_per_thread, cfg.num_warps)
    programs = workload.s_q * -(-workload.h_q // cfg.block_h)
    slots = device.num_sms * per_sm
    min_tiles = max(1, PREFILL_MIN_PIECE_ROWS // cfg.block_n)
    tiles = -(-workload.topk // cfg.block_n)
    splits, piece_tiles = prefill_splits(programs, slots, tiles, min_tiles) if cut else (1, tiles)
    total = programs * splits
    return _PrefillLaunch(total, per_sm, splits, piece_tiles, total / (-(-total // slots) * slots) if total else 0.0)


# A short prefill cuts each token's list into pieces of at least this many rows (2 tiles of 64 or 4 of 32), at most
# this many pieces, as many as fill one wave of program slots; and where the widest tile, cut so, keeps under this
# fraction of its waves' slots busy, 16-head blocks are taken if they keep more busy in one wave. H100, DeepSeek-V4
# shapes (64 heads, 640-entry lists; benchmarks/experiments/prefill_pieces_grid.py,
# 2026-12-05-h100-prefill-pieces-grid-d1c6e0b.json): 16 tokens
# 16x32 in 4 pieces 28.4 µs (64x64 in 5: 33.1); 32 tokens 64x64 in 4 40.3 (best 40.2); 64 tokens 64x64 in 2 55.6
# (best; whole 60.0); 100 tokens 64x64 whole 61.2 (16-head blocks 108.7, two pieces 98.6: past one wave).
PREFILL_MIN_PIECE_ROWS = 128
PREFILL_MAX_SPLITS = 16
PREFILL_NARROW_BELOW = 2 / 3


def prefill_splits(programs: int, slots: int, tiles: int, min_tiles: int = 4) -> tuple[int, int]:
    """(pieces per token list, tiles per piece) for a prefill launch of ``programs`` whole-list programs on
    ``slots`` program slots, over lists of ``tiles`` tiles: as many pieces as fit one wave of the slots, each of at
    least ``min_tiles`` tiles, at most :data:`PREFILL_MAX_SPLITS`; (1, tiles) where fewer than two pieces fit.

    Example::

        prefill_splits(16, 132, 20)     # (5, 4): 80 programs of 4 tiles instead of 16 of 20
        prefill_splits(64, 132, 10, 2)  # (2, 5): 128 programs, one wave
    """
    if programs <= 0 or tiles < 2 * min_tiles:
        return 1, tiles
    splits = min(slots // programs, tiles // min_tiles, PREFILL_MAX_SPLITS)
    if splits < 2:
        return 1, tiles
    piece_tiles = -(-tiles // splits)
    return -(-tiles // piece_tiles), piece_tiles
