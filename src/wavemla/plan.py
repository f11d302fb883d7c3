"""The planner: a pure function from a decode workload and a GPU description to launch choices.

``plan(workload, device) -> Plan`` picks the tile shape (BLOCK_H query heads by BLOCK_N KV rows), warps and pipeline
depth, and how the flattened work list ``(query token, KV tile)`` is cut into programs. It never queries a GPU and
never launches anything, so plans for any GPU can be made and tested on a CPU from a :class:`DeviceSpec` preset.

Work partition. Every query token owns ``n_tiles`` tiles (its main-cache tiles, then its extra-cache tiles), the
same for all tokens because index lists have a static width. Program ``p`` takes units
``[p·u, (p+1)·u)`` of the ``T·n_tiles`` units of one head block, with ``u = units_per_part``. A token cut by a program
boundary is finished by the combine kernel. Choosing ``u`` is a balance problem on ``C`` program slots (resident
programs per SM × SMs): the time of a launch is ``ceil(programs / C)`` waves of the longest program, and a program
costs its tiles plus a fixed cost per token segment it touches (load q, write the result). The planner evaluates
``u`` at every wave count and at every multiple of ``n_tiles`` (no cut token), and takes the cheapest, counting the
combine when a cut exists. Because ``u`` is continuous rather than a split count per request, adding one request
never adds a whole wave of work: the extra units spread over all programs.

Overrides from :mod:`wavemla.config` are applied last; one the kernel cannot honour raises :class:`PlanError`
naming the knob.

Example::

    from wavemla.device import get_spec
    p = plan(Workload(batch=96, s_q=1, h_q=64, topk=128, extra_topk=512, is_fp8=True), get_spec("rtx-pro-6000"))
    print(p.block_h, p.num_parts, p.waves, p.tail_efficiency, p.reasons)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from wavemla import config
from wavemla.device import DeviceSpec


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
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        if self.s_q < 1 or self.h_q < 1:
            raise ValueError("s_q and h_q must be >= 1")
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


@dataclass(frozen=True)
class Resources:
    """Static per-program resources of a kernel configuration on one architecture."""

    smem_bytes: int
    regs_per_thread: int
    source: str  # "compiled" (read from a cubin), "table" (measured) or "estimate"
    tile_us: float | None = None  # measured time of one tile in one program at this config's occupancy


@dataclass(frozen=True)
class Plan:
    """Launch choices for one workload on one device, and why."""

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
# compiled kernel on an H200 (Triton 3.6: n_regs, shared memory). Other architectures use the estimate below until
# their cubins are measured.
_SM90_TABLE: dict[tuple[int, int, int, int, bool], Resources] = {
    # FP8 MODEL1 rows (tile µs from benchmarks/results: CSA h=64 at b=128 on an H200)
    (64, 64, 8, 1, True): Resources(131072, 255, "table", tile_us=10.4),
    (64, 32, 8, 1, True): Resources(98304, 255, "table", tile_us=6.5),
    (32, 32, 8, 1, True): Resources(98304, 255, "table", tile_us=8.6),  # spills 164 B: slow
    (16, 32, 4, 1, True): Resources(81920, 255, "table", tile_us=5.7),
    # bf16 rows (Triton pipelines the row gather into shared memory at 2 stages)
    (64, 64, 8, 2, False): Resources(197632, 255, "table", tile_us=7.9),
    (64, 32, 8, 2, False): Resources(131200, 255, "table", tile_us=4.5),
    (16, 32, 4, 2, False): Resources(50304, 255, "table", tile_us=3.6),
}

# Cost model, calibrated on an H200 (benchmarks/results): one tile costs a fixed latency (index load, then the
# dependent row gather) plus a per-row part that grows with the heads sharing the row; writing a token segment
# costs its output bytes at one SM's share of DRAM bandwidth; each launch costs a few µs inside a CUDA graph.
_TILE_LATENCY_US = 1.8
_ROW_US = 0.0625  # per KV row: gather + FP8 decode
_ROW_HEAD64_US = 0.0625  # per KV row for 64 heads of QK^T + PV on an H200 SM; scaled by heads and tensor rate
_PROGRAM_US = 1.0
_LAUNCH_US = 3.0
_H200_BF16_TFLOPS_PER_SM = 989.5 / 132


def candidate_configs(workload: Workload) -> list[KernelConfig]:
    """Kernel configurations to consider for this workload (the planner costs each one that fits)."""
    h = workload.h_q
    ns = 1 if workload.is_fp8 else 2  # rows feed tl.dot directly, so Triton can pipeline them (measured faster)
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


def static_resources(cfg: KernelConfig, workload: Workload, device: DeviceSpec) -> Resources:
    """Resources of ``cfg`` on ``device``: the measured table where known, else an estimate."""
    key = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, workload.is_fp8)
    if device.arch == 90 and key in _SM90_TABLE:
        return _SM90_TABLE[key]
    # Estimate: q tile + two KV tile copies (one per dot operand layout) per pipeline stage in shared memory;
    # registers at the cap ptxas applies so that one program fits the register file.
    smem = cfg.block_h * 512 * 2 + 2 * cfg.block_n * 512 * 2 * max(cfg.num_stages, 1)
    regs = min(device.max_regs_per_thread, device.regs_per_sm // (cfg.num_warps * 32))
    return Resources(smem, regs, "estimate")


def _tile_us(
    cfg: KernelConfig, workload: Workload, device: DeviceSpec, occupancy: int = 1, measured: float | None = None
) -> float:
    """One tile of one program; programs resident on the same SM share its issue and tensor throughput."""
    if measured is not None:
        return measured
    rate = (device.bf16_tflops / device.num_sms) / _H200_BF16_TFLOPS_PER_SM
    per_row = (_ROW_US if workload.is_fp8 else _ROW_US / 2) + _ROW_HEAD64_US * cfg.block_h / 64 / rate
    return _TILE_LATENCY_US + cfg.block_n * per_row * occupancy


def _segment_us(cfg: KernelConfig, device: DeviceSpec, cut: bool) -> float:
    """Writing one token segment: an fp32 partial (cut) or the bf16 output, at one SM's share of bandwidth."""
    per_sm_gbps = device.mem_gbps * 0.85 / device.num_sms
    return cfg.block_h * 512 * (4 if cut else 2) / (per_sm_gbps * 1e3)


def _combine_us(tokens: int, parts: int, h: int, device: DeviceSpec) -> float:
    """The combine launch: write + read of the fp32 partial workspace."""
    return _LAUNCH_US + 2 * (tokens + parts) * h * 512 * 4 / (device.mem_gbps * 0.85 * 1e3)


def _partition(
    tokens: int, n_tiles: int, h: int, num_hb: int, slots: int, cfg: KernelConfig, workload: Workload,
    device: DeviceSpec, occupancy: int, measured: float | None,
) -> tuple[int, int, float]:
    """(units_per_part, num_parts, predicted µs) minimizing waves × longest program (+ combine when cut)."""
    total = tokens * n_tiles
    if total == 0:
        return 1, 0, 0.0
    tile = _tile_us(cfg, workload, device, occupancy, measured)
    slots_per_hb = max(slots // num_hb, 1)
    candidates = {n_tiles * k for k in range(1, math.ceil(tokens / slots_per_hb) + 2)}
    for waves in range(1, 5):
        candidates.add(max(1, math.ceil(total / (waves * slots_per_hb))))
    best: tuple[float, int, int] | None = None
    for upp in sorted(candidates):
        upp = min(upp, total)
        parts = math.ceil(total / upp)
        cut = upp % n_tiles != 0 and parts > 1
        waves = math.ceil(parts * num_hb / slots)
        segments = math.ceil(upp / n_tiles) + (1 if cut else 0)
        program = upp * tile + segments * _segment_us(cfg, device, cut) + _PROGRAM_US
        t = _LAUNCH_US + waves * program + (_combine_us(tokens, parts, h, device) if cut else 0.0)
        if best is None or t < best[0] - 1e-9:
            best = (t, upp, parts)
    assert best is not None
    return best[1], best[2], best[0]


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


def plan(workload: Workload, device: DeviceSpec) -> Plan:
    """Choose the kernel configuration and work partition for ``workload`` on ``device`` (pure; see module doc)."""
    overrides = (
        config.get("WAVEMLA_BLOCK_H"),
        config.get("WAVEMLA_BLOCK_N"),
        config.get("WAVEMLA_NUM_WARPS"),
        config.get("WAVEMLA_NUM_STAGES"),
        config.get("WAVEMLA_NUM_SPLITS"),
        config.get("WAVEMLA_TARGET_CTAS"),
        config.get("WAVEMLA_BATCH_INVARIANT"),
    )
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


@functools.lru_cache(maxsize=4096)
def _plan_cached(workload: Workload, device: DeviceSpec, overrides: tuple[object, ...]) -> Plan:
    reasons: list[str] = []
    invariant = workload.batch_invariant or bool(config.get("WAVEMLA_BATCH_INVARIANT"))
    forced_splits = config.get("WAVEMLA_NUM_SPLITS")
    seen: set[KernelConfig] = set()
    best: Plan | None = None
    for base in candidate_configs(workload):
        cfg = _override_config(base)
        if cfg in seen:
            continue
        seen.add(cfg)
        if cfg.block_h not in (16, 32, 64) or cfg.block_n not in (16, 32, 64):
            raise PlanError("WAVEMLA_BLOCK_H / WAVEMLA_BLOCK_N: the kernel supports 16, 32 or 64")
        res = static_resources(cfg, workload, device)
        occ = device.blocks_per_sm(res.smem_bytes, res.regs_per_thread, cfg.num_warps)
        label = f"BLOCK_H={cfg.block_h} BLOCK_N={cfg.block_n} warps={cfg.num_warps} stages={cfg.num_stages}"
        if occ < 1:
            reasons.append(f"{label}: {res.smem_bytes // 1024} KB smem ({res.source}) does not fit {device.name}")
            continue
        candidate = _plan_config(workload, device, cfg, res, occ, invariant, forced_splits)
        reasons.append(f"{label}: {occ} program(s)/SM, predicted {candidate.predicted_us:.1f} us")
        if best is None or candidate.predicted_us < best.predicted_us - 1e-9:
            best = candidate
    if best is None:
        raise PlanError(f"no kernel configuration fits {device.name} for {workload}; " + "; ".join(reasons))
    return dataclasses.replace(best, reasons=(*reasons, *best.reasons))


def _plan_config(
    workload: Workload,
    device: DeviceSpec,
    cfg: KernelConfig,
    res: Resources,
    occ: int,
    invariant: bool,
    forced_splits: int | None,
) -> Plan:
    num_hb = math.ceil(workload.h_q / cfg.block_h)
    n_main = math.ceil(workload.topk / cfg.block_n)
    n_tiles = n_main + math.ceil(workload.extra_topk / cfg.block_n)
    if n_tiles == 0:
        raise PlanError("topk and extra_topk are both 0: there is nothing to attend to")
    slots = config.get("WAVEMLA_TARGET_CTAS") or occ * device.num_sms
    tokens = workload.tokens
    notes: list[str] = []
    if invariant or forced_splits is not None:
        pieces = min(_fixed_pieces(n_tiles, num_hb, slots, forced_splits, invariant), n_tiles)
        upp = n_tiles // pieces if n_tiles % pieces == 0 else math.ceil(n_tiles / pieces)
        parts = math.ceil(tokens * n_tiles / upp) if tokens else 0
        cut = parts > 0 and upp % n_tiles != 0
        waves = math.ceil(parts * num_hb / slots) if parts else 0
        tile = _tile_us(cfg, workload, device, occ, res.tile_us)
        program = upp * tile + 2 * _segment_us(cfg, device, cut) + _PROGRAM_US
        predicted = _LAUNCH_US + waves * program + (_combine_us(tokens, parts, workload.h_q, device) if cut else 0.0)
        why = "batch-invariant" if invariant else f"WAVEMLA_NUM_SPLITS={forced_splits}"
        notes.append(f"{why}: {pieces} fixed piece(s) of {upp} tiles per token")
    else:
        upp, parts, predicted = _partition(
            tokens, n_tiles, workload.h_q, num_hb, slots, cfg, workload, device, occ, res.tile_us
        )
    needs_combine = parts > 0 and upp % n_tiles != 0
    programs = parts * num_hb
    waves = max(1, math.ceil(programs / slots)) if programs else 0
    tail = programs / (waves * slots) if waves else 1.0
    notes.append(
        f"{tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: "
        f"{upp} tiles/program, {programs} programs, {waves} wave(s), tail efficiency {tail:.2f}"
        + (", combine needed" if needs_combine else ", no token cut")
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
        predicted_us=predicted,
        resources=res,
        reasons=tuple(notes),
    )
