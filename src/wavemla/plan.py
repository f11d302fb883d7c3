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
    source: str  # "compiled" (read from a cubin) or "table"


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


# Static resources of the split kernel per (block_h, block_n, num_warps, num_stages, is_fp8) on sm_90, read from
# cubins compiled on a CPU machine (triton.compile with GPUTarget("cuda", 90, 32), cuobjdump -res-usage). The
# resources module recomputes them for any arch; this table is the fallback when compiling is not possible.
_SM90_TABLE: dict[tuple[int, int, int, int, bool], Resources] = {
    (32, 32, 8, 1, True): Resources(98304, 180, "table"),
    (16, 32, 4, 1, True): Resources(81920, 185, "table"),
    (32, 16, 4, 1, True): Resources(65536, 255, "table"),
    (16, 32, 4, 1, False): Resources(81920, 240, "table"),
    (64, 32, 8, 1, True): Resources(131072, 255, "table"),
}

# Per-tile cost model (µs on an H100-class SM, scaled by the device's tensor rate). A tile is BLOCK_N rows for
# BLOCK_H heads: 2·BLOCK_H·BLOCK_N·512·2 FLOP plus the gather and FP8 decode of BLOCK_N rows.
_MMA_EFFICIENCY = 0.35  # fraction of dense bf16 peak a Triton mma.sync tile loop reaches (calibrated on H200)
_DEQUANT_NS_PER_ROW = 6.0  # FP8 MODEL1 decode of one 512-wide row by one program, ns (calibrated on H200)
_SEGMENT_US = 0.6  # per token segment: load q, write the output or a partial
_PROGRAM_US = 1.0  # per program: launch ramp and prologue
_COMBINE_US = 3.0  # the combine launch


def candidate_configs(workload: Workload) -> list[KernelConfig]:
    """Configurations the kernel supports for this workload, best first by static reasoning."""
    h = workload.h_q
    if h <= 16:
        return [KernelConfig(16, 32, 4, 1), KernelConfig(32, 16, 4, 1)]
    return [KernelConfig(32, 32, 8, 1), KernelConfig(16, 32, 4, 1), KernelConfig(32, 16, 4, 1)]


def static_resources(cfg: KernelConfig, workload: Workload, device: DeviceSpec) -> Resources:
    """Resources of ``cfg`` on ``device``: the compiled table where known, else a conservative estimate."""
    key = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, workload.is_fp8)
    if key in _SM90_TABLE:
        return _SM90_TABLE[key]
    # Estimate: q tile + two KV tile copies (one per dot operand layout) in shared memory.
    smem = cfg.block_h * 512 * 2 + 2 * cfg.block_n * 512 * 2
    return Resources(smem, 255, "estimate")


def _tile_us(cfg: KernelConfig, workload: Workload, device: DeviceSpec) -> float:
    flops = 4.0 * cfg.block_h * cfg.block_n * 512
    per_sm_tflops = device.bf16_tflops / device.num_sms * _MMA_EFFICIENCY
    mma_us = flops / (per_sm_tflops * 1e6)
    dequant_us = cfg.block_n * _DEQUANT_NS_PER_ROW / 1000.0 if workload.is_fp8 else 0.0
    return mma_us + dequant_us


def _partition(
    tokens: int, n_tiles: int, num_hb: int, slots: int, tile_us: float, allow_cut: bool
) -> tuple[int, int, float]:
    """(units_per_part, num_parts, predicted µs) minimizing waves × longest program (+ combine when cut)."""
    total = tokens * n_tiles
    if total == 0:
        return 1, 0, 0.0
    slots_per_hb = max(slots // num_hb, 1)
    candidates = {n_tiles * k for k in range(1, math.ceil(tokens / slots_per_hb) + 2)}
    if allow_cut:
        for waves in range(1, 5):
            candidates.add(max(1, math.ceil(total / (waves * slots_per_hb))))
    best: tuple[float, int, int] | None = None
    for upp in sorted(candidates):
        upp = min(upp, total)
        parts = math.ceil(total / upp)
        cut = upp % n_tiles != 0 and parts > 1
        if cut and not allow_cut:
            continue
        waves = math.ceil(parts * num_hb / slots)
        segments = math.ceil(upp / n_tiles) + (1 if cut else 0)
        t = waves * (upp * tile_us + segments * _SEGMENT_US + _PROGRAM_US) + (_COMBINE_US if cut else 0.0)
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


@functools.lru_cache(maxsize=4096)
def _plan_cached(workload: Workload, device: DeviceSpec, overrides: tuple[object, ...]) -> Plan:
    reasons: list[str] = []
    chosen: tuple[KernelConfig, Resources, int] | None = None
    for cfg in candidate_configs(workload):
        cfg = _override_config(cfg)
        res = static_resources(cfg, workload, device)
        occ = device.blocks_per_sm(res.smem_bytes, res.regs_per_thread, cfg.num_warps)
        if occ >= 1:
            chosen = (cfg, res, occ)
            reasons.append(
                f"BLOCK_H={cfg.block_h} BLOCK_N={cfg.block_n} warps={cfg.num_warps}: {res.smem_bytes // 1024} KB smem, "
                f"{res.regs_per_thread} regs ({res.source}) -> {occ} program(s)/SM on {device.name}"
            )
            break
        reasons.append(f"BLOCK_H={cfg.block_h} BLOCK_N={cfg.block_n}: does not fit on {device.name}")
    if chosen is None:
        raise PlanError(f"no kernel configuration fits {device.name} for {workload}")
    cfg, res, occ = chosen
    if cfg.block_h not in (16, 32, 64) or cfg.block_n not in (16, 32, 64):
        raise PlanError("WAVEMLA_BLOCK_H / WAVEMLA_BLOCK_N: the kernel supports 16, 32 or 64")

    num_hb = math.ceil(workload.h_q / cfg.block_h)
    n_main = math.ceil(workload.topk / cfg.block_n)
    n_tiles = n_main + math.ceil(workload.extra_topk / cfg.block_n)
    if n_tiles == 0:
        raise PlanError("topk and extra_topk are both 0: there is nothing to attend to")
    slots = config.get("WAVEMLA_TARGET_CTAS") or occ * device.num_sms
    tile_us = _tile_us(cfg, workload, device)
    forced_splits = config.get("WAVEMLA_NUM_SPLITS")
    if workload.batch_invariant or config.get("WAVEMLA_BATCH_INVARIANT"):
        # Split boundaries may depend only on the request itself: cut each token at the same tile boundaries
        # whatever the batch (splits dividing n_tiles evenly), and merge in program order.
        splits = forced_splits or 1
        if n_tiles % splits:
            raise PlanError(
                f"WAVEMLA_NUM_SPLITS={splits} must divide the {n_tiles} tiles per token in batch-invariant mode"
            )
        upp = n_tiles // splits
        parts = math.ceil(workload.tokens * n_tiles / upp)
        reasons.append(f"batch-invariant: {splits} fixed piece(s) per token")
        predicted = math.ceil(parts * num_hb / slots) * (upp * tile_us + _SEGMENT_US + _PROGRAM_US)
    elif forced_splits is not None:
        upp = max(1, math.ceil(n_tiles / forced_splits))
        parts = math.ceil(workload.tokens * n_tiles / upp)
        reasons.append(f"WAVEMLA_NUM_SPLITS={forced_splits}: {upp} tiles per piece")
        predicted = math.ceil(parts * num_hb / slots) * (upp * tile_us + 2 * _SEGMENT_US + _PROGRAM_US)
    else:
        upp, parts, predicted = _partition(workload.tokens, n_tiles, num_hb, slots, tile_us, allow_cut=True)
    if workload.tokens == 0:
        upp, parts, predicted = 1, 0, 0.0
    needs_combine = parts > 0 and upp % n_tiles != 0
    programs = parts * num_hb
    waves = max(1, math.ceil(programs / slots)) if programs else 0
    tail = programs / (waves * slots) if waves else 1.0
    reasons.append(
        f"{workload.tokens} token(s) x {n_tiles} tiles x {num_hb} head block(s) over {slots} slots: "
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
        reasons=tuple(reasons),
    )
