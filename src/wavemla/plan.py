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
capped at 80 KB of shared memory with 4 to 12 of 48 warps active and the SMs stalled on memory).

Work partition. Every query token owns ``n_tiles`` tiles (its main-cache tiles, then its extra-cache tiles), the
same for all tokens because index lists have a static width. Program ``p`` takes units ``[p·u, (p+1)·u)`` of the
``T·n_tiles`` units of one head block, with ``u = units_per_part``. A token cut by a program boundary is finished by
the combine kernel. The time of a launch is its waves times the longest program; a program costs its tiles (one
tile slows down as more programs share the SM) plus a fixed cost per token segment it touches. The planner costs
``u`` at the smallest value for each wave count and each number of programs per SM, at every multiple of
``n_tiles`` (no cut token) and at every even split of a token, and keeps the cheapest, combine included. Because
``u`` is continuous rather than a split count per request, adding one request never adds a whole wave: the extra
units spread over all programs. ``tail_efficiency`` is the busy fraction of the launch's program slots.

Overrides from :mod:`wavemla.config` are applied last; one the kernel or the device cannot honour raises
:class:`PlanError` naming the knob.

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
    """

    batch: int
    s_q: int
    h_q: int
    topk: int
    extra_topk: int = 0
    is_fp8: bool = True
    dtype: str = "bf16"
    batch_invariant: bool = False

    def __post_init__(self) -> None:
        for name in ("batch", "s_q", "h_q", "topk", "extra_topk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
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
    stack_bytes: int | None = None  # per-thread stack frame (spills) from the cubin, when compiled
    note: str = ""  # where the numbers come from, for reasons


@dataclass(frozen=True)
class Plan:
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
    combine_us: float = 0.0  # predicted time of the combine launch (0: no token cut), included in predicted_us

    @property
    def block_h(self) -> int:
        return self.config.block_h

    @property
    def block_n(self) -> int:
        return self.config.block_n

    def workspace_rows(self, tokens: int) -> int:
        """Rows of the split workspace (query tokens + parts); 0 when no token is cut."""
        return tokens + self.num_parts if self.needs_combine else 0


# Static resources of the split kernel per (block_h, block_n, num_warps, num_stages, is_fp8) on sm_90, read from the
# compiled kernel on an H200 (Triton 3.6: n_regs, shared memory), with the time of one tile measured there. These
# win over the compiled table on sm_90: they carry a measured tile cost.
_SM90_TABLE: dict[tuple[int, int, int, int, bool], Resources] = {
    # FP8 MODEL1 rows: tile µs = median time / tiles per program at CSA h=64, b=128, from
    # benchmarks/results/2026-11-30-h200-kernel-variants.log (v5 rows; 32x32x8 from the v3 row)
    (64, 64, 8, 1, True): Resources(131072, 255, "table", tile_us=10.4),
    (64, 32, 8, 1, True): Resources(98304, 255, "table", tile_us=6.5),
    (32, 32, 8, 1, True): Resources(98304, 255, "table", tile_us=8.6),  # spills 164 B: slow
    (16, 32, 4, 1, True): Resources(81920, 255, "table", tile_us=5.7),
    # bf16 rows (Triton pipelines the row gather into shared memory at 2 stages); v2ns2 rows of the same log
    (64, 64, 8, 2, False): Resources(197632, 255, "table", tile_us=7.9),
    (64, 32, 8, 2, False): Resources(131200, 255, "table", tile_us=4.5),
    (16, 32, 4, 2, False): Resources(50304, 255, "table", tile_us=3.6),
}

_MEASURED_ARCH = 90

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
_ROW_BYTES_FP8 = 584  # MODEL1: 448 e4m3 + 64 bf16 rope + 8 scale bytes
_ROW_BYTES_BF16 = 1024

# Parts whose SMs have this little shared memory (sm_86, sm_89, sm_120, sm_121) need two programs per SM.
_SMEM_CAPPED_PER_SM = 100 * KIB
_MIN_PROGRAMS_PER_SM_CAPPED = 2
# An architecture missing from the compiled table uses the entry of a binary-compatible one.
_TABLE_ARCH_FALLBACK = {121: 120}


def _base_configs(h: int, is_fp8: bool) -> list[KernelConfig]:
    ns = 1 if is_fp8 else 2  # bf16 rows feed tl.dot directly, so Triton can pipeline them (measured faster)
    if h <= 16:
        return [KernelConfig(16, 32, 4, ns), KernelConfig(16, 16, 4, ns)]
    if h <= 32:
        return [KernelConfig(32, 32, 8, ns), KernelConfig(16, 32, 4, ns), KernelConfig(16, 16, 4, ns)]
    return [
        KernelConfig(64, 64, 8, ns),
        KernelConfig(64, 32, 8, ns),
        KernelConfig(32, 32, 8, ns),
        KernelConfig(16, 32, 4, ns),
        KernelConfig(16, 16, 4, ns),
    ]


def _smem_capped(device: DeviceSpec) -> bool:
    return device.smem_per_sm <= _SMEM_CAPPED_PER_SM


def _candidates(workload: Workload, device: DeviceSpec | None) -> tuple[list[KernelConfig], list[KernelConfig], str]:
    """(configurations to cost, configurations left out by the occupancy floor, a note when the floor gave way)."""
    base = _base_configs(workload.h_q, workload.is_fp8)
    if device is None or not _smem_capped(device):
        return base, [], ""
    dense = [
        c for c in base if _occupancy(c, static_resources(c, workload, device), device) >= _MIN_PROGRAMS_PER_SM_CAPPED
    ]
    if not dense:
        return base, [], f"no configuration fits {_MIN_PROGRAMS_PER_SM_CAPPED} programs/SM on {device.name}"
    return dense, [c for c in base if c not in dense], ""


def candidate_configs(workload: Workload, device: DeviceSpec | None = None) -> list[KernelConfig]:
    """Kernel configurations to consider for this workload (the planner costs each one that fits).

    Without a device: every shape for the head count. On a 100 KB/SM part: only those that fit two programs per SM
    (from their compiled resources), unless none does.
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
        config.get("WAVEMLA_CACHE_DIR"),
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _static_resources(
    cfg: KernelConfig, is_fp8: bool, arch: int, max_regs: int, regs_per_sm: int, cache_dir: str | None
) -> Resources:
    del cache_dir  # part of the cache key only: resources.lookup reads the knob's directory
    from wavemla import resources  # not at import time: `python -m wavemla.resources` imports this module

    key = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, is_fp8)
    if arch == _MEASURED_ARCH and key in _SM90_TABLE:
        return dataclasses.replace(_SM90_TABLE[key], note="measured on an H200")
    table_arch = _TABLE_ARCH_FALLBACK.get(arch, arch)
    hit = resources.lookup(cfg, is_fp8, table_arch)
    if hit is not None:
        r, where = hit
        note = where + ("" if table_arch == arch else f", sm_{table_arch} entry")
        return Resources(r.smem_bytes, r.regs, "compiled", stack_bytes=r.stack_bytes, note=note)
    # Estimate: q tile + two KV tile copies (one per dot operand layout) per pipeline stage in shared memory;
    # registers at the cap ptxas applies so that one program fits the register file.
    smem = cfg.block_h * 512 * 2 + 2 * cfg.block_n * 512 * 2 * max(cfg.num_stages, 1)
    regs = min(max_regs, regs_per_sm // (cfg.num_warps * 32))
    return Resources(smem, regs, "estimate", note="estimated (not in the compiled table)")


def _occupancy(cfg: KernelConfig, res: Resources, device: DeviceSpec) -> int:
    return _blocks_per_sm(device, res.smem_bytes, res.regs_per_thread, cfg.num_warps)


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

    The kernel keeps partials of FP8 caches in fp16 (half the traffic of fp32). On sm_90 the model is the one
    fitted to the H200 measurements, taken when partials were fp32, so it keeps charging 4 bytes there (and the
    H200 choices stay those measured) until the H200 is re-measured; elsewhere it charges what the kernel moves.
    """
    return 2 if workload.is_fp8 and device.arch != _MEASURED_ARCH else 4


def _segment_us(cfg: KernelConfig, device: DeviceSpec, cut: bool, ws_bytes: int) -> float:
    """Writing one token segment: a partial (cut) or the bf16 output, at one SM's share of bandwidth."""
    per_sm_gbps = device.mem_gbps * _DRAM_EFFICIENCY / device.num_sms
    return cfg.block_h * 512 * (ws_bytes if cut else 2) / (per_sm_gbps * 1e3)


def _combine_us(tokens: int, parts: int, h: int, device: DeviceSpec, ws_bytes: int) -> float:
    """The combine launch: write + read of the partial workspace, sized for every token and part."""
    return _LAUNCH_US + 2 * (tokens + parts) * h * 512 * ws_bytes / (device.mem_gbps * _DRAM_EFFICIENCY * 1e3)


@dataclass(frozen=True)
class _Split:
    upp: int
    parts: int
    waves: int
    active: int
    tile_us: float
    predicted_us: float
    combine_us: float


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
        self.seg_cut = _segment_us(cfg, device, True, ws_bytes)
        self.seg_whole = _segment_us(cfg, device, False, ws_bytes)
        self.combine_base = _combine_us(tokens, 0, workload.h_q, device, ws_bytes)
        self.combine_per_part = _combine_us(tokens, 1, workload.h_q, device, ws_bytes) - self.combine_base
        self.tiles = [_tile_us(cfg, workload, device, a, res.tile_us, num_hb) for a in range(occ + 1)]

    def __call__(self, upp: int) -> _Split:
        n_tiles = self.n_tiles
        parts = -(-self.total // upp)
        programs = parts * self.num_hb
        cut = parts > 1 and upp % n_tiles != 0
        waves = -(-programs // self.slots)
        # the busiest SM: full waves hold `occ` programs per SM; a single partial wave spreads one per SM first
        active = self.occ if waves > 1 else max(1, min(self.occ, -(-programs // self.num_sms)))
        tile = self.tiles[active]
        whole = -(-upp // n_tiles)
        program = (
            upp * tile + (whole + 1) * self.seg_cut + _PROGRAM_US
            if cut
            else upp * tile + whole * self.seg_whole + _PROGRAM_US
        )
        combine = self.combine_base + parts * self.combine_per_part if cut else 0.0
        return _Split(upp, parts, waves, active, tile, _LAUNCH_US + waves * program + combine, combine)


@functools.lru_cache(maxsize=256)
def _even_sizes(n_tiles: int) -> tuple[int, ...]:
    """Program sizes that split a token of ``n_tiles`` tiles into equal pieces, ascending."""
    return tuple(sorted({n_tiles // d for d in range(1, n_tiles + 1) if n_tiles % d == 0}))


def _partition(cost: _Coster, device: DeviceSpec, forced_slots: bool) -> _Split:
    """The cheapest units_per_part (see the module doc for the candidates)."""
    total, n_tiles, num_hb, slots = cost.total, cost.n_tiles, cost.num_hb, cost.slots
    # Slot levels: one program per SM, two, ... up to the occupancy (fewer programs per SM run faster each).
    levels = {slots} if forced_slots else {min(k * device.num_sms, slots) for k in range(1, cost.occ + 1)}
    candidates: set[int] = set()
    for level in levels:
        parts_per_wave = max(level // num_hb, 1)
        for waves in range(1, 5):
            u = max(1, -(-total // (waves * parts_per_wave)))
            candidates.add(u)
            candidates.add(-(-u // n_tiles) * n_tiles)  # the next cut-free size
            if u < n_tiles:  # the next size that splits every token into equal pieces
                candidates.add(next(e for e in _even_sizes(n_tiles) if e >= u))
    candidates.update(n_tiles * k for k in range(1, -(-cost.tokens // max(slots // num_hb, 1)) + 2))
    best: _Split | None = None
    for u in sorted(candidates):
        s = cost(min(u, total))
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
_PLAN_KNOBS = (*_TILE_KNOBS, "WAVEMLA_NUM_SPLITS", "WAVEMLA_TARGET_CTAS", "WAVEMLA_BATCH_INVARIANT",
               "WAVEMLA_CACHE_DIR")  # fmt: skip


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
    return _plan_cached(workload, device, overrides)


# Batch-invariant mode cuts every token into the same pieces whatever the batch; the piece count is sized for
# this many query tokens in flight, a batch-independent constant.
_INVARIANT_REFERENCE_TOKENS = 32


def _fixed_pieces(n_tiles: int, num_hb: int, slots: int, forced: int | None, invariant: bool) -> int:
    if forced is not None:
        if invariant and n_tiles % forced:
            raise PlanError(
                f"WAVEMLA_NUM_SPLITS={forced} must divide the {n_tiles} tiles per token in batch-invariant mode"
            )
        return forced
    target = max(1, slots // (_INVARIANT_REFERENCE_TOKENS * num_hb))
    return max(d for d in range(1, n_tiles + 1) if n_tiles % d == 0 and d <= target)


def _fit(
    cfg: KernelConfig, workload: Workload, device: DeviceSpec, reasons: list[str]
) -> tuple[Resources, int] | None:
    """(resources, programs per SM) of ``cfg`` on ``device``, or None with the reason appended when it does not fit."""
    res = static_resources(cfg, workload, device)
    occ = _occupancy(cfg, res, device)
    if occ < 1:
        why = device.occupancy_reason(res.smem_bytes, res.regs_per_thread, cfg.num_warps)
        reasons.append(f"{cfg.label}: does not fit ({res.note}): {why}")
        return None
    return res, occ


@functools.lru_cache(maxsize=4096)
def _plan_cached(workload: Workload, device: DeviceSpec, overrides: tuple[object, ...]) -> Plan:
    reasons: list[str] = []
    invariant = workload.batch_invariant or bool(config.get("WAVEMLA_BATCH_INVARIANT"))
    forced_splits = config.get("WAVEMLA_NUM_SPLITS")
    if invariant and workload.batch != _INVARIANT_REFERENCE_TOKENS:
        # The configuration (hence the bits) must not depend on the batch: choose it once, for a fixed reference
        # batch, and keep it for every batch size; only the number of programs changes with b.
        ref = _plan_cached(dataclasses.replace(workload, batch=_INVARIANT_REFERENCE_TOKENS), device, overrides)
        res = static_resources(ref.config, workload, device)
        occ = _occupancy(ref.config, res, device)
        fixed = _plan_config(workload, device, ref.config, res, occ, True, forced_splits)
        note = f"batch-invariant: {ref.config.label} chosen at b={_INVARIANT_REFERENCE_TOKENS} and kept for every batch"
        return dataclasses.replace(fixed, reasons=(note, *fixed.reasons))
    del overrides  # part of the cache key only: the knobs are read again below
    forced = {k: config.get(k) for k in _TILE_KNOBS if config.get(k) is not None}
    kept, dropped, note = _candidates(workload, device)
    if note:
        reasons.append(note)
    if forced:
        reasons.append("forced by " + ", ".join(f"{k}={v}" for k, v in forced.items()))
    else:
        for cfg in dropped:  # shown with what the model alone would predict for them
            fit = _fit(cfg, workload, device, reasons)
            if fit is None:
                continue
            res, occ = fit
            alone = _plan_config(workload, device, cfg, res, occ, invariant, forced_splits)
            reasons.append(
                f"{cfg.label}: left out, {res.smem_bytes // KIB} KB smem gives {occ} program/SM on a "
                f"{device.smem_per_sm // KIB} KB/SM part, latency-bound below {_MIN_PROGRAMS_PER_SM_CAPPED} "
                f"(the cost model alone predicts {alone.predicted_us:.1f} us)"
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
        candidate_plan = _plan_config(workload, device, cfg, res, occ, invariant, forced_splits)
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
            + device.occupancy_reason(res.smem_bytes, res.regs_per_thread, cfg.num_warps)
        )
    return _plan_config(workload, device, cfg, res, occ, False, None, units_per_part)


def clear_caches() -> None:
    """Forget cached plans and resources (after the on-disk resource cache changed in this process)."""
    _plan_cached.cache_clear()
    _static_resources.cache_clear()


def _plan_config(
    workload: Workload,
    device: DeviceSpec,
    cfg: KernelConfig,
    res: Resources,
    occ: int,
    invariant: bool,
    forced_splits: int | None,
    units_per_part: int | None = None,
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
    if tokens == 0:
        split = _Split(1, 0, 0, 0, 0.0, 0.0, 0.0)
    elif units_per_part is not None:
        split = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)(
            min(units_per_part, tokens * n_tiles)
        )
        notes.append(f"evaluated at {units_per_part} tiles per program")
    elif invariant or forced_splits is not None:
        pieces = min(_fixed_pieces(n_tiles, num_hb, slots, forced_splits, invariant), n_tiles)
        upp = n_tiles // pieces if n_tiles % pieces == 0 else math.ceil(n_tiles / pieces)
        split = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)(upp)
        why = "batch-invariant" if invariant else f"WAVEMLA_NUM_SPLITS={forced_splits}"
        notes.append(f"{why}: {pieces} fixed piece(s) of {upp} tiles per token")
    else:
        cost = _Coster(tokens, n_tiles, num_hb, slots, occ, cfg, workload, device, res)
        split = _partition(cost, device, forced_slots=target is not None)
    upp, parts = split.upp, split.parts
    needs_combine = parts > 1 and upp % n_tiles != 0
    programs = parts * num_hb
    waves = split.waves
    tail = tokens * n_tiles * num_hb / (waves * slots * upp) if waves else 1.0
    notes.append(
        f"{tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: "
        f"{upp} tiles/program, {programs} programs, {waves} wave(s), {split.active} active/SM, "
        f"tail efficiency {tail:.2f}" + (", combine needed" if needs_combine else ", no token cut")
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
    )
