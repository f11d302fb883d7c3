"""The planner: purity, knob overrides, the SM120 targets, the H200 choices, wave cliffs of the model, host cost."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton

from wavemla import config
from wavemla import plan as plan_mod
from wavemla.config import KnobError
from wavemla.device import KIB, PRESETS, SMEM_ALLOC_UNIT, SMEM_RESERVED_PER_BLOCK, DeviceSpec
from wavemla.plan import (
    _SM90_BUSY,
    _SM90_TABLE,
    _SM90_WS,
    _SM90_WS_BUSY,
    _SM90_WS_MERGE_SAVE_US,
    _SPILL_STACK_MAX,
    KernelConfig,
    Plan,
    PlanError,
    Workload,
    candidate_configs,
    clear_caches,
    evaluate,
    plan,
    static_resources,
)

PRO = PRESETS["rtx-pro-6000"]
PRO_SLOTS = 2 * 188  # two 16x16 programs per SM
H200 = PRESETS["h200"]
MODES = {"csa": (128, 512), "hca": (128, 1024), "swa": (128, 0)}  # (SWA window, compressed top-k)
RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@pytest.fixture(autouse=True)
def environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private environment (no knobs set, an empty resource cache) and no cached plans, before and after."""
    env: dict[str, str] = {"WAVEMLA_CACHE_DIR": str(tmp_path / "cache")}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    clear_caches()
    yield env
    config.reload()
    clear_caches()


def dsv4(batch: int, h: int = 64, mode: str = "csa", s_q: int = 1, fp8: bool = True) -> Workload:
    window, topk = MODES[mode]
    return Workload(batch=batch, s_q=s_q, h_q=h, topk=window, extra_topk=topk, is_fp8=fp8)


# ---------------------------------------------------------------- purity


def test_plan_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA query, no compile, no launch, no child process: every such call raises while planning."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the planner touched the GPU, the compiler or a subprocess")

    for name in ("is_available", "device_count", "current_device", "get_device_properties", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, forbidden)
    monkeypatch.setattr(triton, "compile", forbidden)
    monkeypatch.setattr(triton.runtime.jit.JITFunction, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    first = [plan(dsv4(b, h, mode), spec) for spec in PRESETS.values() for h in (1, 16, 64, 128)
             for mode in MODES for b in (1, 7, 96)]  # fmt: skip
    clear_caches()
    again = [plan(dsv4(b, h, mode), spec) for spec in PRESETS.values() for h in (1, 16, 64, 128)
             for mode in MODES for b in (1, 7, 96)]  # fmt: skip
    assert first == again  # same inputs, same plan, cached or not


def test_plan_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="workload"):
        plan("csa", PRO)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device"):
        plan(dsv4(1), "rtx-pro-6000")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        pytest.param({"batch": -1}, "batch", id="negative-batch"),
        pytest.param({"batch": True}, "batch", id="bool-batch"),
        pytest.param({"h_q": 0}, "h_q", id="no-heads"),
        pytest.param({"topk": 1.5}, "topk", id="float-topk"),
        pytest.param({"dtype": "fp32"}, "dtype", id="fp32"),
        pytest.param({"is_fp8": "false"}, "^is_fp8: expected a bool", id="str-is-fp8"),
        pytest.param({"is_fp8": None}, "^is_fp8: expected a bool", id="none-is-fp8"),
    ],
)
def test_workload_errors_name_the_field(kwargs: dict[str, object], says: str) -> None:
    base: dict[str, object] = {"batch": 1, "s_q": 1, "h_q": 64, "topk": 128, "extra_topk": 512}
    with pytest.raises(ValueError, match=says):
        Workload(**{**base, **kwargs})  # type: ignore[arg-type]


def test_nothing_to_attend_to() -> None:
    with pytest.raises(PlanError, match="topk and extra_topk are both 0"):
        plan(Workload(batch=1, s_q=1, h_q=64, topk=0), H200)


# ---------------------------------------------------------------- knob overrides: applied last, named when invalid


def test_override_forces_the_tile() -> None:
    with config.override(WAVEMLA_BLOCK_H=32, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8):
        p = plan(dsv4(64), H200)
    assert p.config == KernelConfig(32, 32, 8, 1)
    assert any("forced by WAVEMLA_BLOCK_H=32, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8" in r for r in p.reasons)
    assert plan(dsv4(64), H200).config == KernelConfig(64, 64, 8, 1)  # the knob is part of the cache key


def test_override_wins_over_the_occupancy_floor() -> None:
    """On a 100 KB/SM part the planner keeps 2-programs/SM tiles, unless a knob asks for another one."""
    assert plan(dsv4(64), PRO).programs_per_sm == 2
    with config.override(WAVEMLA_BLOCK_H=32):
        p = plan(dsv4(64), PRO)
    assert p.config == KernelConfig(32, 32, 4, 1)
    assert p.programs_per_sm == 1


def test_spilling_configurations_are_left_out_where_no_tile_was_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without measured tile times (every arch but sm_90) a configuration whose compiled stack frame exceeds
    _SPILL_STACK_MAX bytes per thread is not costed while one within it fits (the model does not price spills;
    along the mma.sync paths such tiles ran 2-15x slower). A knob still forces one; sm_90 keeps its measured pick."""
    a100 = PRESETS["a100"]
    wl = dsv4(64)
    p = plan(wl, a100)
    assert (static_resources(p.config, wl, a100).stack_bytes or 0) <= _SPILL_STACK_MAX
    left = [r for r in p.reasons if "B of stack per thread on sm_80" in r]
    assert left, p.reasons
    for cfg in candidate_configs(wl):  # every tile shape for 64 heads
        res = static_resources(cfg, wl, a100)
        fits = a100.blocks_per_sm(res.smem_bytes, res.regs_per_thread, cfg.num_warps) >= 1
        spills = (res.stack_bytes or 0) > _SPILL_STACK_MAX
        assert any(r.startswith(cfg.label + ": left out") for r in left) == (fits and spills), cfg
        assert (cfg in candidate_configs(wl, a100)) == (not spills), cfg
    assert plan(wl, H200).config == KernelConfig(64, 64, 8, 1)  # sm_90: measured tile times, no floor
    with config.override(WAVEMLA_BLOCK_H=32, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8):
        assert plan(wl, a100).config == KernelConfig(32, 32, 8, 1)
    # nothing within the bound: every configuration is costed again, and the plan says so
    monkeypatch.setattr(plan_mod, "_SPILL_STACK_MAX", -1)
    clear_caches()
    p = plan(wl, a100)
    assert any("every configuration spills more than -1 B per thread on a100" in r for r in p.reasons)


@pytest.mark.parametrize("gpu", sorted(name for name, spec in PRESETS.items() if spec.arch != 90))
def test_no_preset_off_sm90_plans_a_spilling_tile(gpu: str) -> None:
    """Every DSV4 shape (h 16/64/128, CSA/HCA, s_q 1/2, FP8 and bf16 rows) on every preset without measured tile
    times plans a configuration within the spill bound, or says that none fits it."""
    device = PRESETS[gpu]
    for h in (16, 64, 128):
        for mode in ("csa", "hca"):
            for s_q in (1, 2):
                for fp8 in (True, False):
                    for b in (1, 32, 96):
                        wl = dsv4(b, h=h, mode=mode, s_q=s_q, fp8=fp8)
                        p = plan(wl, device)
                        stack = static_resources(p.config, wl, device).stack_bytes or 0
                        assert stack <= _SPILL_STACK_MAX or any("every configuration spills" in r for r in p.reasons)


def test_override_that_cannot_fit_names_the_knobs() -> None:
    with (
        pytest.raises(PlanError, match=r"WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64: no kernel configuration fits"),
        config.override(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64),
    ):
        plan(dsv4(64), PRO)


@pytest.mark.parametrize(
    ("name", "raw"),
    [("WAVEMLA_BLOCK_H", "17"), ("WAVEMLA_NUM_WARPS", "5"), ("WAVEMLA_NUM_STAGES", "x"), ("WAVEMLA_TARGET_CTAS", "0"),
     ("WAVEMLA_BATCH_INVARIANT", "maybe")],
)  # fmt: skip
def test_invalid_knob_values_raise_knob_error(environ: dict[str, str], name: str, raw: str) -> None:
    environ[name] = raw
    with pytest.raises(KnobError, match=name):
        plan(dsv4(64), H200)


def test_an_explicit_batch_invariant_answer_is_not_overridden_by_the_knob() -> None:
    """``Workload.batch_invariant``: None leaves the mode to the knob; True or False decides it whatever the knob."""
    free = plan(dsv4(8), H200)
    invariant = plan(dataclasses.replace(dsv4(8), batch_invariant=True), H200)
    assert free.pieces_tiles is None and invariant.pieces_tiles is not None
    with config.override(WAVEMLA_BATCH_INVARIANT=True):
        assert plan(dsv4(8), H200) == invariant
        choices = plan_mod._invariant_choice.cache_info().currsize
        assert plan(dataclasses.replace(dsv4(9), batch_invariant=True), H200).pieces_tiles == invariant.pieces_tiles
        assert plan_mod._invariant_choice.cache_info().currsize == choices  # asked by the knob or not: one choice
        assert plan(dataclasses.replace(dsv4(8), batch_invariant=False), H200) == free
    with pytest.raises(ValueError, match=r"^batch_invariant: expected a bool or None"):
        dataclasses.replace(dsv4(8), batch_invariant="false")  # type: ignore[arg-type]


def test_num_splits_must_divide_the_tiles_in_batch_invariant_mode() -> None:
    n_tiles = 10  # 64x64 tiles: 2 SWA + 8 CSA
    with (
        pytest.raises(PlanError, match="WAVEMLA_NUM_SPLITS=3"),
        config.override(WAVEMLA_BATCH_INVARIANT=True, WAVEMLA_NUM_SPLITS=3, WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64),
    ):
        plan(dsv4(8), H200)
    with config.override(WAVEMLA_BATCH_INVARIANT=True, WAVEMLA_NUM_SPLITS=5, WAVEMLA_BLOCK_H=64,
                         WAVEMLA_BLOCK_N=64):  # fmt: skip
        p = plan(dsv4(8), H200)
    assert p.n_tiles == n_tiles and p.units_per_part == 2
    assert any("batch-invariant: 5 fixed piece(s) of 2 tiles" in r for r in p.reasons)


def test_batch_invariant_refusal_names_the_workload_asked_for() -> None:
    """A forced tile that fits nowhere fails while the invariant choice plans its reference batches: the error names
    the call's workload (its batch, batch-invariant), not a reference batch's."""
    asked = dataclasses.replace(dsv4(7), batch_invariant=True)
    with (
        config.override(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=2, WAVEMLA_NUM_STAGES=3),
        pytest.raises(PlanError) as refused,
    ):
        plan(asked, PRO)
    message = str(refused.value)
    assert f"{asked!r} in batch-invariant mode" in message and "batch=32" not in message
    assert "WAVEMLA_BLOCK_H=64" in message and "does not fit" in message


def test_batch_invariant_num_splits_takes_a_tile_it_divides() -> None:
    """WAVEMLA_NUM_SPLITS in batch-invariant mode is honoured by any tile whose token it divides: 4 pieces do not
    divide 64x64's 10 tiles a CSA token but do 64x32's 20, so the plan takes a tile of 20 (or 40) tiles; only where
    no tile's count is divisible is it refused, naming the knob and the counts."""
    with config.override(WAVEMLA_BATCH_INVARIANT=True, WAVEMLA_NUM_SPLITS=4):
        p = plan(dsv4(8), H200)
    assert p.n_tiles % 4 == 0 and p.pieces_tiles == p.n_tiles // 4
    assert any("4 fixed piece(s)" in r for r in p.reasons)
    with (
        pytest.raises(PlanError, match=r"WAVEMLA_NUM_SPLITS=7 must divide .*64x64x8x1: 10 tiles"),
        config.override(WAVEMLA_BATCH_INVARIANT=True, WAVEMLA_NUM_SPLITS=7),
    ):
        plan(dsv4(8), H200)


def test_num_splits_and_target_ctas() -> None:
    with config.override(WAVEMLA_NUM_SPLITS=4):
        p = plan(dsv4(32), H200)
    assert p.units_per_part == -(-p.n_tiles // 4) and p.needs_combine
    with config.override(WAVEMLA_TARGET_CTAS=100):
        q = plan(dsv4(32), H200)
    assert q.slots == 100 and q.programs <= 100 * q.waves


# ---------------------------------------------------------------- candidates and resources


def test_candidates_keep_h200_shapes_and_drop_one_program_tiles_on_sm120() -> None:
    w = dsv4(64)
    shapes = [KernelConfig(64, 64, 8, 1), KernelConfig(64, 32, 8, 1), KernelConfig(32, 32, 8, 1),
              KernelConfig(16, 32, 4, 3), KernelConfig(16, 32, 4, 1), KernelConfig(16, 16, 4, 1)]  # fmt: skip
    assert candidate_configs(w) == shapes
    with config.override(WAVEMLA_SPARSE_WS="off"):  # the Triton kernel's tiles alone
        clear_caches()
        assert candidate_configs(w, H200) == shapes
    clear_caches()
    # the 16x32 FP8 tile with row prefetch compiles to 50 KB on sm_120, so two of them fit an SM; the staged one
    # (83 KB) does not
    assert candidate_configs(w, PRO) == [KernelConfig(16, 32, 4, 1), KernelConfig(16, 16, 4, 1)]
    assert candidate_configs(dsv4(64, fp8=False), PRO) == [KernelConfig(16, 16, 4, 2)]


def test_narrow_tiles_beside_the_warp_specialized_kernel_only_for_two_tokens() -> None:
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.applies(arch=90, is_fp8=True, h_q=64, block_h=64, block_n=64):
        pytest.skip("this Triton has no warp-specialized sparse kernel: the 64x64 tile is the Triton kernel's")
    wide = [KernelConfig(64, 64, 8, 1), KernelConfig(64, 32, 8, 1)]
    for w in (dsv4(3), dsv4(2, s_q=2), dsv4(3, mode="hca"), dsv4(200), dsv4(3, h=128)):
        assert candidate_configs(w, H200) == wide, w
        p = plan(w, H200)
        assert p.config.block_h == 64
        narrow = KernelConfig(16, 32, 4, 1).label
        assert any(r.startswith(f"{narrow}: left out, {w.tokens} query tokens beside the warp-specialized kernel")
                   for r in p.reasons)  # fmt: skip
    for w in (dsv4(1), dsv4(2), dsv4(1, s_q=2), dsv4(1, h=128), dsv4(1, mode="hca")):
        assert KernelConfig(16, 32, 4, 1) in candidate_configs(w, H200), w
    assert plan(dsv4(1), H200).config == KernelConfig(16, 32, 4, 1)  # 16.0 us measured against 19.0
    # no warp-specialized kernel beside them: 16 heads, bf16 rows, the knob, or another GPU
    assert KernelConfig(16, 32, 4, 1) in candidate_configs(dsv4(8, h=16), H200)
    assert KernelConfig(16, 32, 4, 2) in candidate_configs(dsv4(8, fp8=False), H200)
    with config.override(WAVEMLA_SPARSE_WS="off"):
        clear_caches()
        assert KernelConfig(16, 32, 4, 1) in candidate_configs(dsv4(8), H200)
    with config.override(WAVEMLA_NUM_WARPS=4):  # a forced tile knob applies to every shape, narrow ones included
        clear_caches()
        assert KernelConfig(16, 32, 4, 1) in candidate_configs(dsv4(8), H200)
    clear_caches()
    assert KernelConfig(16, 32, 4, 1) in candidate_configs(dsv4(8), PRO)


def test_h200_costs_come_from_its_measurements() -> None:
    from wavemla.kernels import sparse_decode_ws

    with config.override(WAVEMLA_SPARSE_WS="off"):  # the Triton kernel's tiles
        clear_caches()
        for (bh, bn, nw, ns, fp8), measured in _SM90_TABLE.items():
            res = static_resources(KernelConfig(bh, bn, nw, ns), dsv4(1, fp8=fp8), H200)
            assert res.source == "table" and res.tile_us == measured.tile_us
        p = plan(dsv4(128), H200)  # 128 of 132 slots busy: the measured tile, slowed by the busy fraction
        assert p.tile_us == pytest.approx(_SM90_TABLE[(64, 64, 8, 1, True)].tile_us * (1 + _SM90_BUSY * 128 / 132))
    clear_caches()
    if sparse_decode_ws.HAVE_GLUON:  # 64x64 FP8 tiles run the warp-specialized kernel, priced by its own costs
        res = static_resources(KernelConfig(64, 64, 8, 1), dsv4(1), H200)
        assert res == dataclasses.replace(_SM90_WS, note=res.note) and res.smem_bytes == 207296
        assert (
            static_resources(KernelConfig(64, 32, 8, 1), dsv4(1), H200).tile_us
            == _SM90_TABLE[(64, 32, 8, 1, True)].tile_us
        )
        p = plan(dsv4(128), H200)
        assert p.tile_us == pytest.approx(_SM90_WS.tile_us * (1 + _SM90_WS_BUSY * 128 / 132))


# Runs of one day by the planner they measured, in order: before the measured merge terms, with them
# (``*-merge-model.json``), with a cut token's pieces counted exactly (``*-exact-pieces.json``), with the re-chosen
# 64x64 and 64x32 tile costs (``*-refit8.json``), with the warp-specialized kernel's costs re-fitted to its curves
# (``*-ws-refit.json``) and chosen by the picks they make (``*-ws-refit2.json``), with the combine priced by what it
# moves (``*-ws-combine.json``), the small batches' plans (``*-ws-small-b.json``) and cut tokens merged in that kernel
# (``*-ws-merge.json``); then the staged 16x32 tiles priced at the register tile's ratio (``*-staged-ratio.json``), and
# the 16x32 tiles' shared-SM time at 16 heads (``*-shared-tile.json``).
_PLANNER_RUNS = ("-merge-model", "-exact-pieces", "-refit8", "-ws-refit", "-ws-refit2", "-ws-combine", "-ws-small-b",
                 "-ws-merge", "-staged-ratio", "-shared-tile")  # fmt: skip


def _planner_run(name: str) -> int:
    return max((i + 1 for i, tag in enumerate(_PLANNER_RUNS) if tag in name), default=0)


def _h200_records() -> list[dict[str, object]]:
    """The newest measurement of every (mode, h_q, s_q, FP8, batch) point: files in date order, and on one day in
    the order of the planners they measured (``_PLANNER_RUNS``)."""
    paths = sorted(
        RESULTS.glob("2026-1[12]-*-h200-sparse-decode-*.json"),
        key=lambda p: (p.name[:10], _planner_run(p.name), p.name),
    )
    rows: dict[tuple[object, ...], dict[str, object]] = {}
    for path in paths:
        for r in json.loads(path.read_text())["records"]:
            if r["provider"] == "wavemla":
                rows[(r["mode"], r["h_q"], r["s_q"], r["fp8"], r["batch"])] = r
    return list(rows.values())


def test_h200_choices_are_the_measured_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """At every b = 1..256 of the eight curves the H200 plans are those the benchmark runs measured (tile and
    partition; the small batches' plans were also timed against every other plan the planner can offer there,
    benchmarks/experiments/gpu_small_b.sh). The runs had the warp-specialized kernel, whose costs price 64x64 FP8
    tiles where Gluon is present. Where the planner now spreads the leftover tokens past a perfect fit (measured
    against the curves' plans by benchmarks/experiments/ws_spread.py, see plan._SPREAD_MAX_LEFT), or pads tokens
    (``Plan.token_units``, measured against the curves' plans by benchmarks/experiments/pad_ab.py), the plan it would
    make without that partition is the measured one."""
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.HAVE_GLUON:
        pytest.skip("Triton without Gluon: the planner prices the Triton kernel, the runs measured the other one")
    records = _h200_records()
    assert len(records) == 8 * 256  # every b = 1..256 of the eight curves (h = 16/64/128, s_q = 1/2, CSA and HCA)
    spread: list[dict[str, object]] = []
    padded: list[dict[str, object]] = []
    fine: list[dict[str, object]] = []
    for r in records:
        p = plan(dsv4(r["batch"], r["h_q"], r["mode"], r["s_q"], r["fp8"]), H200)  # type: ignore[arg-type]
        if p.whole_units and not r.get("whole_units"):  # measured before the planner spread
            spread.append(r)
            continue
        if p.token_units and not r.get("token_units"):  # measured before the planner padded tokens
            padded.append(r)
            continue
        got = (str(p.config), p.units_per_part, p.whole_units, p.token_units)
        if got != (r["config"], r["units_per_part"], r.get("whole_units", 0), r.get("token_units", 0)):
            fine.append(r)  # measured before fine cuts were kept off shared SMs: checked without that rule below
    assert padded  # small batches of every curve
    # the 16-head small batches whose measured plans cut tokens into 8+ pieces over 1.5+ programs an SM
    assert {(r["mode"], r["s_q"]) for r in fine} == {("csa", 1), ("hca", 1)}, fine
    assert all(r["h_q"] == 16 and int(r["batch"]) < 30 for r in fine), fine  # type: ignore[call-overload]
    monkeypatch.setattr(plan_mod, "_FINE_CUT_PIECES", 10**9)
    clear_caches()
    for r in fine:
        p = plan(dsv4(r["batch"], r["h_q"], r["mode"], r["s_q"], r["fp8"]), H200)  # type: ignore[arg-type]
        assert (str(p.config), p.units_per_part) == (r["config"], r["units_per_part"]), r
        assert p.programs >= 1.5 * H200.num_sms and plan_mod.max_pieces(p.n_tiles, p.units_per_part) >= 8, r
    monkeypatch.undo()
    clear_caches()
    monkeypatch.setattr(plan_mod._Coster, "spread", lambda self: None)
    monkeypatch.setattr(plan_mod._Coster, "padded", lambda self: [])
    clear_caches()
    for r in spread + padded:
        p = plan(dsv4(r["batch"], r["h_q"], r["mode"], r["s_q"], r["fp8"]), H200)  # type: ignore[arg-type]
        assert (str(p.config), p.units_per_part) == (r["config"], r["units_per_part"]), r
    clear_caches()
    # up to spread_max_left query tokens past a multiple of the parts (132 a head block: 66 with 128 heads); never in
    # these 16-head curves (s_q = 1: fewer query tokens than the 264 slots of two programs an SM)
    for r in spread:
        parts = 132 // (int(r["h_q"]) // 64)  # type: ignore[call-overload]
        tokens = int(r["batch"]) * int(r["s_q"])  # type: ignore[call-overload]
        n_tiles = plan(dsv4(r["batch"], r["h_q"], r["mode"], r["s_q"], r["fp8"]), H200).n_tiles  # type: ignore[arg-type]
        assert tokens >= parts and 1 <= tokens % parts <= plan_mod.spread_max_left(n_tiles), r


def test_a_16x32_fp8_tile_beside_another_program_costs_its_shared_time_at_16_heads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 16x32 FP8 tile whose SM holds two programs is priced at the shared-SM time (2.9 µs against 2.3) where a part
    is one head block (h=16); alone on its SM, or in parts of 4 head blocks (h=64), at the one time."""
    cfg = KernelConfig(16, 32, 4, 1)

    def tiles(w: Workload) -> tuple[float, float]:
        now = evaluate(w, H200, cfg, 20).tile_us
        key = (16, 32, 4, 1, True)
        monkeypatch.setitem(
            plan_mod._SM90_TABLE, key, dataclasses.replace(plan_mod._SM90_TABLE[key], shared_tile_us=None)
        )
        plan_mod.clear_caches()
        one = evaluate(w, H200, cfg, 20).tile_us
        monkeypatch.undo()
        plan_mod.clear_caches()
        return now, one

    with config.override(WAVEMLA_SPARSE_WS="off"):
        now, one = tiles(dsv4(172, 16))  # 172 programs on 132 SMs: two share 40 of them
        assert now == pytest.approx(one * 2.9 / 2.3)
        now, one = tiles(dsv4(132, 16))  # one program an SM
        assert now == pytest.approx(one)
        now, one = tiles(dsv4(172, 64))  # 4 head blocks a part
        assert now == pytest.approx(one)


def test_q_goes_through_the_kernel_scratch_where_it_measured_faster() -> None:
    """16x32 plans of 3+ tiles per program convert q in the kernel; 64-head plans (the dependent-launch conversion
    kernel measured faster) and programs of 1-2 tiles do not; and every plan says how many token segments its
    busiest program starts (programs start at multiples of gcd(units_per_part, n_tiles) into a token). (The Triton
    kernel's plans: the warp-specialized kernel converts q itself.)"""
    with config.override(WAVEMLA_SPARSE_WS="off"):
        by_tile = {(p.config.block_h, p.config.block_n): p for b in range(1, 257) for p in [plan(dsv4(b), H200)]}
        assert {(64, 64), (64, 32), (16, 32)} <= set(by_tile)
        for b in range(1, 257):
            p = plan(dsv4(b), H200)
            expected = p.units_per_part >= 3 and p.config.block_h < 64 and p.config.num_stages == 1
            assert p.q_scratch == expected, (b, p.config, p.units_per_part)
    p = evaluate(dsv4(80), H200, KernelConfig(64, 64, 8, 1), 7)  # tokens of 10 tiles, programs of 7: gcd 1
    assert p.segments_per_program == 2
    assert evaluate(dsv4(80), H200, KernelConfig(64, 64, 8, 1), 5).segments_per_program == 1
    assert evaluate(dsv4(80), H200, KernelConfig(64, 64, 8, 1), 20).segments_per_program == 2
    assert evaluate(dsv4(80), H200, KernelConfig(64, 64, 8, 1), 15).segments_per_program == 2  # starts at 0 or 5


# ---------------------------------------------------------------- SM120 (99 KB/block, 100 KB/SM): fit and occupancy


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@pytest.mark.parametrize("mode", ["csa", "hca"])
@pytest.mark.parametrize("h", [64, 16])
def test_sm120_plans_fit_99kb_and_run_two_programs_per_sm(h: int, mode: str) -> None:
    for b in range(48, 97):
        p = plan(dsv4(b, h, mode), PRO)
        smem = p.resources.smem_bytes
        assert p.resources.source == "compiled", p.resources
        assert smem + SMEM_RESERVED_PER_BLOCK <= 99 * KIB, (b, p.config, smem)
        assert p.programs_per_sm >= 2, (b, p.config)
        assert 2 * (_round_up(smem, SMEM_ALLOC_UNIT) + SMEM_RESERVED_PER_BLOCK) <= PRO.smem_per_sm
        assert p.active_per_sm >= 2  # the launch does put two programs on an SM
        assert p.waves == 1


def test_sm120_tail_efficiency_h64_csa() -> None:
    """188 SMs x 2 slots: every batch from 48 to 96 keeps at least 85% of the program slots busy."""
    tails = {b: plan(dsv4(b), PRO).tail_efficiency for b in range(48, 97)}
    worst = min(tails, key=tails.__getitem__)
    assert tails[worst] >= 0.85, f"b={worst}: tail efficiency {tails[worst]:.3f}"


@pytest.mark.parametrize("name", ["rtx-5090", "dgx-spark", "rtx-4090", "l40s", "rtx-3090"])
def test_other_100kb_parts_run_two_programs_per_sm(name: str) -> None:
    p = plan(dsv4(64), PRESETS[name])
    assert p.programs_per_sm >= 2 and p.resources.smem_bytes + SMEM_RESERVED_PER_BLOCK <= 99 * KIB


def test_field_case_96_requests_do_not_spill_into_a_second_wave() -> None:
    """A 188-SM card once ran C80 faster than C96: 192 programs on 188 slots left a second wave of 4. The planner
    sizes programs to the slots, so 96 requests cost less per request than 80."""
    p80, p96 = plan(dsv4(80), PRO), plan(dsv4(96), PRO)
    assert p96.waves == 1 and p96.programs <= p96.slots
    assert p96.predicted_us / 96 < p80.predicted_us / 80


# ---------------------------------------------------------------- wave cliffs of the model


def _curve(spec: DeviceSpec, h: int, mode: str, s_q: int) -> list[Plan]:
    return [plan(dsv4(b, h, mode, s_q), spec) for b in range(1, 258)]


SHAPES = [(h, mode, s_q) for h in (16, 64, 128) for mode in MODES for s_q in (1, 2)]


@pytest.mark.parametrize("gpu", ["h200", "rtx-pro-6000"])
def test_no_launch_needs_a_second_wave(gpu: str) -> None:
    for h, mode, s_q in SHAPES:
        curve = _curve(PRESETS[gpu], h, mode, s_q)
        assert all(p.waves == 1 for p in curve), (gpu, h, mode, s_q)


@pytest.mark.parametrize("gpu", ["h200", "rtx-pro-6000"])
def test_one_more_request_costs_at_most_one_more_tile_per_program(gpu: str) -> None:
    """The plan for b+1 is never worse than b's plan grown by one tile per program (or to the next cut-free size):
    the search never skips the small step and jumps to a longer program or a second wave."""
    spec = PRESETS[gpu]
    for h, mode, s_q in SHAPES:
        curve = _curve(spec, h, mode, s_q)
        for b in range(1, 257):
            p, q = curve[b - 1], curve[b]
            if p.config not in candidate_configs(dsv4(b + 1, h, mode, s_q), spec):
                continue  # b's tile is not offered at b+1 (beside the warp-specialized kernel from 3 tokens on)
            step = evaluate(dsv4(b + 1, h, mode, s_q), spec, p.config, p.units_per_part + 1)
            whole = -(-(p.units_per_part + 1) // p.n_tiles) * p.n_tiles
            token = evaluate(dsv4(b + 1, h, mode, s_q), spec, p.config, whole)
            # on 100 KB/SM parts the planner does not aim below two programs per SM (plan._slot_levels)
            floor = min(2, p.programs_per_sm) if spec.smem_per_sm <= 100 * KIB else 1
            options = [x.predicted_us for x in (step, token) if x.active_per_sm >= floor]
            if options:
                assert q.predicted_us <= min(options) + 1e-6, (gpu, h, mode, s_q, b)


@pytest.mark.parametrize("gpu", ["h200", "rtx-pro-6000"])
def test_per_request_cliffs_come_from_tile_or_token_granularity(gpu: str) -> None:
    """Predicted µs per request at b+1 within 5% of b, except where the kernel's granularity forces a step:

    - programs of fewer than 20 tiles (one more tile is more than 5% of a program);
    - b fits the slots without cutting a token and b+1 must cut, paying the combine;
    - b+1 stays cut-free by taking at most one more token per program (cutting would cost more);
    - b+1's busiest program starts one more token segment (H200: each costs dependent memory round trips).

    Anything else (a jump at long programs with the same cut state) would be a wave cliff of the planner.
    """
    spec = PRESETS[gpu]
    unexplained = []
    for h, mode, s_q in SHAPES:
        curve = _curve(spec, h, mode, s_q)
        for b in range(1, 257):
            p, q = curve[b - 1], curve[b]
            if q.predicted_us / (b + 1) <= 1.05 * p.predicted_us / b:
                continue
            # a spread plan's programs hold their run of leftover tiles and their whole tokens
            fine_grain = q.units_per_part + q.whole_units < 20
            combine_appears = not p.needs_combine and q.needs_combine
            one_token_more = (not q.needs_combine and q.config == p.config
                              and q.units_per_part - p.units_per_part - p.whole_units <= q.n_tiles)  # fmt: skip
            more_segments = q.segments_per_program > p.segments_per_program
            if not (fine_grain or combine_appears or one_token_more or more_segments):
                unexplained.append((h, mode, s_q, b, str(p.config), p.units_per_part, str(q.config), q.units_per_part))
    assert not unexplained


@pytest.mark.parametrize("mode", ["csa", "hca"])
def test_sm120_fine_tiles_have_no_cliff_except_after_perfect_fits(mode: str) -> None:
    """With 16x16 tiles (40-72 per token) one more request never costs more than 5% per request, except right after
    a batch that fills every slot without cutting a token (the next one pays the combine). The planner itself now
    prefers 16x32 tiles there (two fit an SM since the row-prefetch kernel), whose steps are tile-granular."""
    with config.override(WAVEMLA_BLOCK_N=16):
        curve = _curve(PRO, 64, mode, 1)
    cliffs = {b for b in range(1, 257) if curve[b].predicted_us / (b + 1) > 1.05 * curve[b - 1].predicted_us / b}
    perfect = {b for b in range(1, 257) if not curve[b - 1].needs_combine and curve[b - 1].programs == PRO_SLOTS}
    assert cliffs <= perfect, sorted(cliffs - perfect)
    assert 94 in perfect  # 94 tokens x 4 head blocks = 376 slots, one token per program


# ---------------------------------------------------------------- evaluate, reasons, host cost


def test_evaluate_costs_a_given_choice_with_the_same_model() -> None:
    p = plan(dsv4(64), PRO)
    same = evaluate(dsv4(64), PRO, p.config, p.units_per_part)
    assert same.predicted_us == pytest.approx(p.predicted_us) and same.programs == p.programs
    assert evaluate(dsv4(64), PRO, p.config, p.units_per_part + 3).predicted_us > p.predicted_us
    with pytest.raises(PlanError, match="does not fit rtx-pro-6000"):
        evaluate(dsv4(64), PRO, KernelConfig(64, 64, 8, 1), 4)
    with pytest.raises(ValueError, match="units_per_part"):
        evaluate(dsv4(64), PRO, p.config, 0)


def test_reasons_cover_every_candidate_and_end_with_the_partition() -> None:
    p = plan(dsv4(80), PRO)
    text = "\n".join(p.reasons)
    for c in ("BLOCK_H=64 BLOCK_N=64", "BLOCK_H=32 BLOCK_N=32", "BLOCK_H=16 BLOCK_N=32", "BLOCK_H=16 BLOCK_N=16"):
        assert c in text
    assert "does not fit" in text and "left out" in text
    assert "tail efficiency" in p.reasons[-1] and f"{p.programs} programs" in p.reasons[-1]


def test_max_pieces_is_the_most_programs_a_token_spans() -> None:
    for n_tiles in range(1, 40):
        for upp in range(1, 60):
            spans = [((t + 1) * n_tiles - 1) // upp - t * n_tiles // upp + 1 for t in range(2 * upp)]
            assert plan_mod.max_pieces(n_tiles, upp) == max(spans), (n_tiles, upp)


def test_reasons_say_how_tokens_are_cut_and_merged() -> None:
    """The partition's reason names the pieces a cut token can have and what merges them (H200 picks: CSA b=34 in
    two pieces, b=67 in up to three, 32-row tiles at b=8 through the combine kernel, none cut at b=128; tokens padded
    where WAVEMLA_NUM_SPLITS asks for pieces that do not divide a token), for the Triton kernel and for the
    warp-specialized one, which leaves tokens cut between programs to the combine kernel, merges batch-invariant
    pieces in the program that ran all of a token's, and is offered padded tokens (CSA b=34 in 3 pieces of 4 tiles)."""
    from wavemla.kernels import sparse_decode_ws

    with config.override(WAVEMLA_SPARSE_WS="off"):
        said = {b: plan(dsv4(b), H200).reasons[-1] for b in (8, 34, 67, 128)}
        invariant = plan(dataclasses.replace(dsv4(128), batch_invariant=True), H200).reasons[-1]
        with config.override(WAVEMLA_NUM_SPLITS=4):
            forced = plan(dsv4(32), H200)
    assert said[8].endswith("into up to 5 pieces, merged by the combine kernel")
    assert said[34].endswith("into 2 pieces, merged by the split kernel's two-piece merge")
    assert "into up to 3 pieces, merged by the split kernel (the two-piece merge" in said[67]
    assert said[128].endswith("no token cut")
    assert invariant.endswith("2 pieces a token, merged in their programs")
    assert (forced.units_per_part, forced.token_units, forced.num_parts) == (3, 12, 128)
    assert "WAVEMLA_NUM_SPLITS=4: 4 piece(s) of at most 3 tiles per token" in forced.reasons
    assert "tokens padded to 12 units, each cut into 4 pieces of at most 3 tiles" in forced.reasons[-1]
    assert forced.reasons[-1].endswith("merged by the program whose piece completes the token")  # 64-row tiles
    if sparse_decode_ws.HAVE_GLUON:  # the H200 picks priced with the warp-specialized kernel's costs
        ws = {b: plan(dsv4(b), H200) for b in (1, 8, 34)}
        held = plan(dataclasses.replace(dsv4(128, 64, "hca"), batch_invariant=True), H200).reasons[-1]
        mixed = plan(dataclasses.replace(dsv4(133, 64, "hca"), batch_invariant=True), H200).reasons[-1]
        assert ws[1].config.block_h == 16  # 16-row tiles: the Triton kernel
        assert ws[8].reasons[-1].endswith("into up to 5 pieces, merged by the combine kernel")
        assert "tokens padded to 12 units, each cut into 3 pieces of at most 4 tiles" in ws[34].reasons[-1]
        assert ws[34].reasons[-1].endswith("merged by the combine kernel")
        assert held.endswith("2 pieces a token, merged in their programs")
        assert mixed.endswith(
            "2 pieces a token, merged in their program where it ran all of a token's, by the combine kernel where "
            "they were cut between programs"
        )


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_spread_taken_past_every_perfect_fit_up_to_its_limit(gpu: str) -> None:
    """Past a perfect fit by 1 to 32 query tokens the spread (whole tokens first, the leftover spread) is the plan at
    64 heads, CSA and HCA: timed faster than the uniform plan at 41 points of 4 to 32 leftover tokens on an H100 SXM,
    where the model had taken the uniform plan with the wide merge's per-token term in the spread's combine. HCA
    tokens (18 tiles) are offered it to 128 leftover tokens and take it at least to 64 (faster at 11 of 11 points of
    33 to 98 there); CSA tokens (10 tiles: within 2% either way to 64, slower beyond) only to 32 (the notes under
    plan._SPREAD_MAX_LEFT). Its combine is priced by bytes and a launch."""
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.HAVE_GLUON:
        pytest.skip("Triton without Gluon: the spread is the warp-specialized kernel's")
    spec = PRESETS[gpu]
    for mode, taken in (("csa", 32), ("hca", 64)):
        for b in range(133, 133 + taken):
            p = plan(dsv4(b, 64, mode), spec)
            assert p.whole_units == p.n_tiles and p.cut_tokens(b) == b - 132, (gpu, mode, b)
            left, row = b - 132, 64 * 512 * 2
            slots = (plan_mod.spread_slots(t, p.n_tiles, p.units_per_part) for t in range(left))
            pieces = sum(z - a + 1 for a, z in slots)
            bytes_us = (pieces + left) * row / (spec.mem_gbps * plan_mod._DRAM_EFFICIENCY * 1e3)
            combine = plan_mod._LAUNCH_US + plan_mod._SM90_WS_COMBINE_US + bytes_us
            assert p.combine_us == pytest.approx(combine), (gpu, mode, b)
        limit = plan_mod.spread_max_left(plan(dsv4(133, 64, mode), spec).n_tiles)
        assert limit == (plan_mod._SPREAD_MAX_LEFT if mode == "csa" else plan_mod._SPREAD_MAX_LEFT_LONG)
        assert plan(dsv4(133 + limit, 64, mode), spec).whole_units == 0


@pytest.mark.parametrize(
    ("gpu", "h", "s_q", "batch"),
    [("h100", 16, 2, 133), ("h100", 16, 2, 150), ("h200", 16, 2, 140), ("rtx-pro-6000", 16, 2, 190),
     ("dgx-spark", 16, 1, 120), ("a100", 16, 2, 120)],
)  # fmt: skip
def test_spread_offered_to_the_triton_kernel(
    gpu: str, h: int, s_q: int, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Triton split kernel gets the spread too (whole tokens first, the leftover spread) where it runs one head
    block and leaves the cut tokens to the combine kernel: one program a slot at the configuration's occupancy, one
    wave, only the leftover tokens cut, priced cheaper than the plan it replaces; q's scratch rows follow the
    program's whole run."""
    from wavemla.kernels.sparse_decode import spread_cut_units

    spec = PRESETS[gpu]
    with config.override(WAVEMLA_SPARSE_WS="off"):
        clear_caches()
        p = plan(dsv4(batch, h, "csa", s_q), spec)
        tokens = batch * s_q
        assert p.whole_units and p.whole_units % p.n_tiles == 0, (gpu, p.reasons)
        assert p.programs == p.slots == p.programs_per_sm * spec.num_sms and p.waves == 1
        assert p.num_parts * p.num_head_blocks == p.programs
        cut = p.cut_tokens(tokens)
        assert 1 <= cut <= plan_mod.spread_max_left(p.n_tiles) and p.units_per_part < p.n_tiles
        assert spread_cut_units(tokens * p.n_tiles, p.n_tiles, p.num_parts, p.units_per_part, p.whole_units) == (
            cut * p.n_tiles
        )
        assert p.q_scratch == (
            p.units_per_part + p.whole_units >= plan_mod.Q_CONVERT_MIN_TILES
            and p.config.block_h < 64
            and p.config.num_stages == 1
        )
        assert any("whole tokens first, the leftover spread" in r for r in p.reasons)
        assert not p.merge_in_kernel and p.num_head_blocks == 1
        pieces = sum(z - a + 1 for a, z in (plan_mod.spread_slots(t, p.n_tiles, p.units_per_part) for t in range(cut)))
        combine = plan_mod._combine_us(cut, pieces, h, spec, plan_mod._workspace_bytes(dsv4(batch, h), spec))
        scale = plan_mod._STAGED_FP8_RATIO if p.config.num_stages > 1 else 1.0
        assert p.combine_us == pytest.approx(combine * scale)
        monkeypatch.setattr(plan_mod._Coster, "spread", lambda self: None)
        clear_caches()
        uniform = plan(dsv4(batch, h, "csa", s_q), spec)
        assert uniform.whole_units == 0 and p.predicted_us < uniform.predicted_us
    clear_caches()


def test_no_triton_spread_where_it_measured_no_faster() -> None:
    """Fewer query tokens than parts (16 heads, s_q = 1, b <= 256 on 132 SMs at two programs an SM): no spread. Nor
    for the Triton kernel's tiles that merge cut tokens themselves (64x64: 0.98-1.08 of the uniform plan's time at
    64 and 128 heads on an H100 SXM) or run several head blocks (16x32 at 64 heads: 0.96-1.02), forced here."""
    for b in (67, 133, 200, 256):
        assert plan(dsv4(b, 16), PRESETS["h100"]).whole_units == 0
    # points where the model prices the spread cheaper, were it offered there
    for knobs, points in (
        (dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1),
         (("csa", 133), ("csa", 140), ("hca", 135))),
        (dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=3),
         (("csa", 67), ("hca", 80), ("csa", 133))),
    ):  # fmt: skip
        with config.override(WAVEMLA_SPARSE_WS="off", **knobs):
            clear_caches()
            for mode, b in points:
                p = plan(dsv4(b, 64, mode), PRESETS["h100"])
                assert p.whole_units == 0 and (p.merge_in_kernel or p.num_head_blocks > 1), (knobs, mode, b)
    clear_caches()


def test_combine_bytes_at_the_h200_rate_on_sm90() -> None:
    """On sm_90 parts the Triton combine's bytes are priced at the H200 preset's rate, where the term was fitted: an
    H100 SXM then cuts 16-head tokens where whole-token programs at 1.3-1.7 an SM measured slower (CSA b = 172 in
    14-tile programs 69.9 µs against 78.2 in 20-tile ones; plan._COMBINE_SM90_GBPS); other arches keep their DRAM."""
    h100, h200 = PRESETS["h100"], PRESETS["h200"]
    assert h200.mem_gbps == plan_mod._COMBINE_SM90_GBPS
    assert plan_mod._combine_us(100, 200, 16, h100, 4) == plan_mod._combine_us(100, 200, 16, h200, 4)
    l40s = PRESETS["l40s"]
    slow = l40s.mem_gbps * plan_mod._DRAM_EFFICIENCY * 1e3
    assert plan_mod._combine_us(100, 200, 16, l40s, 2) == pytest.approx(
        plan_mod._LAUNCH_US + 2 * 300 * 16 * 512 * 2 / slow
    )
    for b, s_q, mode, upp in ((172, 1, "csa", 14), (213, 1, "hca", 30), (86, 2, "csa", 14), (205, 2, "csa", 32)):
        p = plan(dsv4(b, 16, mode, s_q), h100)
        assert (str(p.config), p.units_per_part) == ("16x32x4x3", upp), (b, s_q, mode)


def test_ws_merges_cut_tokens_where_it_measured_no_slower() -> None:
    """The warp-specialized kernel merges the tokens cut between its programs itself (no combine launch) in default
    plans whose programs hold a token's tiles or more and cut tokens into two pieces (CSA b=170 in 13-tile programs),
    priced as the combine less _SM90_WS_MERGE_SAVE_US; shorter programs (b=64, 5 tiles), tokens of more pieces
    (b=8) and batch-invariant plans keep the combine, unless WAVEMLA_SPARSE_WS_MERGE says otherwise; the Triton
    kernel's plans never set it."""
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.HAVE_GLUON:
        pytest.skip("Triton without Gluon: no warp-specialized kernel to merge in")
    p = plan(dsv4(170), H200)
    assert p.ws_merge and p.needs_combine and p.units_per_part >= p.n_tiles
    assert p.reasons[-1].endswith("into 2 pieces, merged by the program whose piece completes the token")
    with config.override(WAVEMLA_SPARSE_WS_MERGE="off"):
        off = plan(dsv4(170), H200)
    assert not off.ws_merge and off.units_per_part == p.units_per_part
    assert off.combine_us - p.combine_us == pytest.approx(_SM90_WS_MERGE_SAVE_US)
    assert off.predicted_us - p.predicted_us == pytest.approx(_SM90_WS_MERGE_SAVE_US)
    short, many = plan(dsv4(64), H200), plan(dsv4(8), H200)
    assert short.needs_combine and short.units_per_part < short.n_tiles and not short.ws_merge
    assert many.needs_combine and not many.ws_merge
    mixed = dataclasses.replace(dsv4(133, 64, "hca"), batch_invariant=True)
    assert plan(mixed, H200).needs_combine and not plan(mixed, H200).ws_merge
    with config.override(WAVEMLA_SPARSE_WS_MERGE="on"):
        assert plan(dsv4(8), H200).ws_merge and plan(dsv4(64), H200).ws_merge and plan(mixed, H200).ws_merge
        said = plan(mixed, H200).reasons[-1]
        assert said.endswith("by the program whose piece completes the token where they were cut between programs")
        assert not plan(dsv4(128), H200).ws_merge  # no token cut
    with config.override(WAVEMLA_SPARSE_WS="off"):
        assert not plan(dsv4(170), H200).ws_merge
    with pytest.raises(KnobError, match="WAVEMLA_SPARSE_WS_MERGE"), config.override(WAVEMLA_SPARSE_WS_MERGE="yes"):
        plan(dsv4(170), H200)


def test_host_cost() -> None:
    """Plans are cached per (workload, device, knobs): a repeated call costs a dictionary lookup. Measured on a
    2-core CI machine: ~0.1-0.2 ms uncached, ~2 µs cached; the bounds are generous."""
    workloads = [dsv4(b, h, mode) for b in range(1, 65) for h in (16, 64) for mode in ("csa", "hca")]
    plan(workloads[0], H200)  # load the resource table once
    clear_caches()
    t0 = time.perf_counter()
    for w in workloads:
        plan(w, H200)
    uncached = (time.perf_counter() - t0) / len(workloads)
    t0 = time.perf_counter()
    for _ in range(20):
        for w in workloads:
            plan(w, H200)
    cached = (time.perf_counter() - t0) / (20 * len(workloads))
    print(f"plan(): {uncached * 1e6:.0f} us uncached, {cached * 1e6:.2f} us cached")
    assert uncached < 5e-3
    assert cached < 20e-6


@pytest.mark.parametrize("mode", ["csa", "hca"])
def test_h200_batch_invariant_plans_are_the_measured_ones(mode: str) -> None:
    """DeepSeek-V4 shapes in batch-invariant mode on the H200, Triton kernel: 64x64 tiles in 2 pieces per token (the
    measured best); from b = 96 a program holds whole tokens and merges their pieces itself, so no combine is
    launched. With the warp-specialized kernel the model chooses 2 pieces per token too: a program holding whole
    tokens (b = 96, 128, 200, 256) merges their pieces itself and no combine is launched; otherwise the combine
    kernel merges the tokens cut between programs."""
    from wavemla.kernels import sparse_decode_ws

    with config.override(WAVEMLA_SPARSE_WS="off"):
        for b in (1, 32, 64, 96, 128, 148, 256):
            p = plan(dataclasses.replace(dsv4(b, 64, mode), batch_invariant=True), H200)
            assert (p.config.block_h, p.config.block_n, p.n_tiles // p.pieces_tiles) == (64, 64, 2), (b, p.config)
            assert any("measured best on an H200" in r for r in p.reasons)
            assert p.writes_partials and p.workspace_rows(b) > 0
            if b in (96, 128, 256):
                assert p.units_per_part % p.n_tiles == 0 and not p.needs_combine, (b, p.units_per_part)
    if not sparse_decode_ws.HAVE_GLUON:
        return
    for b in (1, 32, 64, 96, 128, 148, 200, 256):
        p = plan(dataclasses.replace(dsv4(b, 64, mode), batch_invariant=True), H200)
        assert (p.config.block_h, p.config.block_n, p.n_tiles // p.pieces_tiles) == (64, 64, 2), (b, p.config)
        assert not any("measured best on an H200" in r for r in p.reasons)
        assert p.writes_partials and p.units_per_part % p.pieces_tiles == 0
        held = p.units_per_part % p.n_tiles == 0
        assert p.needs_combine != held and held == (b in (96, 128, 200, 256)), (b, p.units_per_part)


def test_stage_and_warp_knobs_leave_the_warp_specialized_kernels_plan_alone() -> None:
    """WAVEMLA_NUM_STAGES and WAVEMLA_NUM_WARPS do not reach the warp-specialized sm_90 kernel (it keeps its own two
    stages and three warpgroups, config.py): where it takes the 64x64 tile, its plan (partition, programs per SM,
    predicted time) is the one without them. Priced at the staged FP8 tiles' ratio, 64x64 plans under
    WAVEMLA_NUM_STAGES=3 left the spread at CSA b = 133; counted at 16 warps of 168 registers, the kernel was refused
    as not fitting."""
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.applies(arch=90, is_fp8=True, h_q=64, block_h=64, block_n=64):
        pytest.skip("this Triton has no warp-specialized sparse kernel")
    tile = {"WAVEMLA_BLOCK_H": 64, "WAVEMLA_BLOCK_N": 64}
    for w in (dsv4(8), dsv4(64), dsv4(133), dsv4(150, 64, "hca"), dataclasses.replace(dsv4(48), batch_invariant=True)):
        with config.override(**tile):
            base = plan(w, H200)
        for knobs in ({"WAVEMLA_NUM_STAGES": 2}, {"WAVEMLA_NUM_STAGES": 3}, {"WAVEMLA_NUM_WARPS": 16},
                      {"WAVEMLA_NUM_WARPS": 4}):  # fmt: skip
            with config.override(**tile, **knobs):
                p = plan(w, H200)
            assert plan_mod._sparse_ws(p.config, w, H200), (w, knobs)
            got = (p.units_per_part, p.whole_units, p.token_units, p.pieces_tiles, p.programs_per_sm)
            assert got == (base.units_per_part, base.whole_units, base.token_units, base.pieces_tiles, 1), (w, knobs)
            assert p.predicted_us == pytest.approx(base.predicted_us), (w, knobs)


def test_plan_says_where_the_warp_specialized_kernel_runs():
    """The plan's reasons name the sm_90 Gluon kernel where the API will launch it (64x64 FP8 tiles with h_q a
    multiple of 64 on sm_90), and only there; the knob that forbids it is part of the plan's key."""
    from wavemla.kernels import sparse_decode_ws

    def says(p: Plan) -> bool:
        return any("warp-specialized sm_90 kernel" in r for r in p.reasons)

    big = plan(dsv4(128), H200)
    assert (big.config.block_h, big.config.block_n) == (64, 64)
    assert says(big) == sparse_decode_ws.HAVE_GLUON
    assert not says(plan(dsv4(1), H200))  # 16-row tiles: the Triton kernel
    assert not says(plan(dsv4(128), PRO))
    assert not says(plan(dsv4(128, fp8=False), H200))
    with config.override(WAVEMLA_SPARSE_WS="off"):
        assert not says(plan(dsv4(128), H200))


def test_staged_fp8_tile_priced_at_the_register_tiles_partition() -> None:
    """A staged FP8 16x32 plan costs the register tile's plan at the same partition times the measured ratio, so
    both choose the same partition on the H200 (two programs per SM either way); a tile forced by its shape keeps the
    register decode; beside the warp-specialized kernel the staged tile is left out, with its reason."""
    from wavemla.kernels import sparse_decode_ws

    staged, register = KernelConfig(16, 32, 4, plan_mod.STAGED_FP8_STAGES), KernelConfig(16, 32, 4, 1)
    for b in (8, 64, 159, 256):
        w = dsv4(b, h=16)
        a, r = evaluate(w, H200, staged, 13), evaluate(w, H200, register, 13)
        assert a.predicted_us == pytest.approx(r.predicted_us * plan_mod._STAGED_FP8_RATIO)
        p = plan(w, H200)
        assert p.config == staged and not p.q_scratch
        with config.override(WAVEMLA_NUM_STAGES=1):
            assert plan(w, H200).units_per_part == p.units_per_part
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32):
        assert plan(dsv4(64, h=16), H200).config == register
    if sparse_decode_ws.applies(arch=90, is_fp8=True, h_q=64, block_h=64, block_n=64):
        p = plan(dsv4(2, h=128), H200)
        assert p.config == KernelConfig(64, 64, 8, 1)
        assert any(r.startswith(f"{staged.label}: left out, staged tiles") for r in p.reasons)


def test_clear_caches_makes_the_first_calls_stale() -> None:
    """Fresh metadata objects replay the first call of their signature (``api._FIRST_CALLS``) only until the planner's
    caches are cleared: then the next such call plans again."""
    from wavemla import api

    sig = ("a call signature",)
    first = object()
    api._FIRST_CALLS.put(api._first_call_key(sig), first)
    assert api._FIRST_CALLS.get(api._first_call_key(sig)) is first
    clear_caches()
    assert api._FIRST_CALLS.get(api._first_call_key(sig)) is None


def test_padded_plans_run_one_piece_of_one_token_a_program() -> None:
    """Wherever a preset's plan pads tokens (only the warp-specialized sm_90 kernel's plans: the h100 and h200
    presets, small batches of every shape): the padding is under one part, a whole number of parts a token, one wave,
    one token segment a program, and the workspace holds the tokens and one slot a part. The model prices them under
    the same configuration's unpadded partition of the same part size."""
    from wavemla.kernels import sparse_decode_ws

    seen = 0
    for name, spec in PRESETS.items():
        for h, mode, s_q in SHAPES:
            for b in range(1, 129):  # padding pays only where programs are shorter than a token
                p = plan(dsv4(b, h, mode, s_q), spec)
                if not p.token_units:
                    continue
                seen += 1
                tokens = b * s_q
                assert spec.arch == 90 and plan_mod._sparse_ws(p.config, dsv4(b, h, mode, s_q), spec), (name, b)
                assert p.token_units % p.units_per_part == 0 and 0 < p.token_units - p.n_tiles < p.units_per_part
                assert p.units_per_part < p.n_tiles and p.whole_units == 0 and p.pieces_tiles is None
                assert p.num_parts == tokens * p.token_units // p.units_per_part, (name, b)
                assert p.waves == 1 and p.segments_per_program == 1 and p.needs_combine
                assert p.workspace_rows(tokens) == tokens + p.num_parts
                same = evaluate(dsv4(b, h, mode, s_q), spec, p.config, p.units_per_part)
                assert p.predicted_us < same.predicted_us, (name, b, p.predicted_us, same.predicted_us)
    assert seen > 0 if sparse_decode_ws.HAVE_GLUON else seen == 0


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_fine_cuts_kept_off_shared_sms_on_sm90(gpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """16 heads, CSA b = 21: the model prices 2 tiles a program lowest (10 pieces a token, 210 programs at two an
    SM), which measured 27.1 µs on an H100 SXM against 21.5 for 4 tiles at one program an SM (plan._FINE_CUT_PIECES).
    The planner takes the 4 tiles and says what it left out; with the rule off it takes the 2 again; a forced slot
    count (WAVEMLA_TARGET_CTAS) is left as asked."""
    dev = PRESETS[gpu]
    p = plan(dsv4(21, 16, "csa"), dev)
    assert (p.units_per_part, p.programs) == (4, 105)
    assert any("2 tiles/program not offered though priced lower" in r for r in p.reasons), p.reasons
    with config.override(WAVEMLA_TARGET_CTAS=2 * dev.num_sms):
        assert plan(dsv4(21, 16, "csa"), dev).units_per_part == 2
    monkeypatch.setattr(plan_mod, "_FINE_CUT_PIECES", 10**9)
    clear_caches()
    q = plan(dsv4(21, 16, "csa"), dev)
    assert (q.units_per_part, q.programs) == (2, 210) and q.predicted_us < p.predicted_us
    assert not any("not offered" in r for r in q.reasons)
    monkeypatch.undo()
    clear_caches()


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_no_sm90_plan_cuts_tokens_finely_over_shared_sms(gpu: str) -> None:
    """Over the 16-head curves (CSA and HCA, s_q 1 and 2, b = 1..256) no uniform plan on an sm_90 part cuts a token
    into 8+ pieces at 1.5+ programs an SM. (Spread plans cut only their leftover tokens, after whole ones, in programs
    of a token's tiles and more: measured faster than the uniform plans, plan._SPREAD_MAX_LEFT.)"""
    dev = PRESETS[gpu]
    for mode in ("csa", "hca"):
        for s_q in (1, 2):
            for b in range(1, 257):
                p = plan(dsv4(b, 16, mode, s_q), dev)
                if p.whole_units:
                    continue
                fine = p.units_per_part < p.n_tiles and plan_mod.max_pieces(p.n_tiles, p.units_per_part) >= 8
                assert not (fine and p.programs >= 1.5 * dev.num_sms), (mode, s_q, b, p.units_per_part, p.programs)


@pytest.mark.parametrize("gpu", ["l40s", "rtx-pro-6000", "a100"])
def test_fine_cut_rule_only_where_measured(gpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off sm_90 the planner's 16-head plans are those it makes without the rule (it was measured on sm_90 only)."""
    dev = PRESETS[gpu]
    with_rule = [plan(dsv4(b, 16, mode), dev) for mode in ("csa", "hca") for b in range(1, 65)]
    monkeypatch.setattr(plan_mod, "_FINE_CUT_PIECES", 10**9)
    clear_caches()
    without = [plan(dsv4(b, 16, mode), dev) for mode in ("csa", "hca") for b in range(1, 65)]
    monkeypatch.undo()
    clear_caches()
    assert [(p.config, p.units_per_part) for p in with_rule] == [(p.config, p.units_per_part) for p in without]


# ---------------------------------------------------------------- enormous batches


def _every_whole_token_count(tokens: int, num_hb: int, slots: int) -> list[int]:
    """Every whole-token program size up to one token a slot and one more: what the partition search costed before it
    kept only those that can win (plan._whole_token_counts)."""
    return list(range(1, -(-tokens // max(slots // num_hb, 1)) + 2))


BIG_BATCHES = [*range(1, 40), 64, 95, 96, 97, 131, 132, 133, 188, 189, 255, 256, 257, 376, 377, 500, 1000, 1033, 2048,
               4099, 9973]  # fmt: skip


@pytest.mark.parametrize("gpu", sorted(PRESETS))
@pytest.mark.parametrize("knobs", [{}, {"WAVEMLA_TARGET_CTAS": 7}, {"WAVEMLA_TARGET_CTAS": 100}],
                         ids=["free", "ctas7", "ctas100"])  # fmt: skip
def test_pruned_whole_token_sizes_keep_every_plan(gpu: str, knobs: dict[str, int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Costing only the whole-token program sizes that can win picks the plans costing every size picked."""
    dev = PRESETS[gpu]
    shapes = [(h, mode, s_q, fp8) for h, mode, s_q in ((16, "csa", 1), (64, "hca", 1), (128, "csa", 2), (64, "swa", 2))
              for fp8 in (True, False)]  # fmt: skip
    with config.override(**knobs):
        pruned = [plan(dsv4(b, h, mode, s_q, fp8), dev) for h, mode, s_q, fp8 in shapes for b in BIG_BATCHES]
        monkeypatch.setattr(plan_mod, "_whole_token_counts", _every_whole_token_count)
        clear_caches()
        every = [plan(dsv4(b, h, mode, s_q, fp8), dev) for h, mode, s_q, fp8 in shapes for b in BIG_BATCHES]
    assert pruned == every


def test_an_enormous_batch_plans_quickly() -> None:
    """10^7 requests: the partition search's steps grow with the square root of the batch (it took seconds)."""
    plan(dsv4(1), H200)  # load the resource table once
    clear_caches()
    t0 = time.perf_counter()
    p = plan(dsv4(10_000_000), H200)
    q = plan(dsv4(10_000_000, 16, "hca", 2), PRO)
    assert time.perf_counter() - t0 < 1.0
    for w, x in ((dsv4(10_000_000), p), (dsv4(10_000_000, 16, "hca", 2), q)):
        units = w.tokens * x.n_tiles
        assert x.num_parts * x.units_per_part >= units > (x.num_parts - 1) * x.units_per_part
        assert x.waves == -(-x.programs // x.slots)


def test_an_enormous_index_list_plans_quickly() -> None:
    """A token of ~2.7·10^8 tiles (a 2^33-entry list) plans in well under a second: the equal-piece sizes (the tile
    count's divisors) and the padded ones (``ceil(tiles / k)``) are found in steps of about the tile count's square
    root; a step per piece count took most of a minute on an H200 preset, and 10^11 entries (`wavemla plan --window
    100000000000`) minutes. The sizes are the same."""
    plan(dsv4(1), H200)  # load the resource table once
    clear_caches()
    w = Workload(batch=1, s_q=1, h_q=64, topk=2**33, extra_topk=512, is_fp8=True)
    t0 = time.perf_counter()
    p = plan(w, H200)
    assert time.perf_counter() - t0 < 5.0
    assert p.n_tiles > 2**27
    for n in (1, 2, 12, 97, 360, 1024, 2**13 * 3**5):
        assert plan_mod._even_sizes(n) == tuple(d for d in range(1, n + 1) if n % d == 0), n
        assert plan_mod._piece_sizes(n) == sorted({-(-n // k) for k in range(2, n + 1)}), n
