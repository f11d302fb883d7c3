"""The dense planner: purity, presets for every GPU, SM120 fit, knob overrides, and the balance of the partition the
device scheduler makes (its Python definition, :func:`wavemla.plan.dense_schedule`)."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wavemla import config
from wavemla.device import KIB, PRESETS
from wavemla.plan import (
    DENSE_D_QK,
    DenseWorkload,
    KernelConfig,
    PlanError,
    all_dense_candidate_configs,
    clear_caches,
    clear_dense_caches,
    dense_candidate_configs,
    dense_schedule,
    dense_static_resources,
    plan_dense,
)

H200 = PRESETS["h200"]
PRO = PRESETS["rtx-pro-6000"]


@pytest.fixture(autouse=True)
def environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    env: dict[str, str] = {"WAVEMLA_CACHE_DIR": str(tmp_path / "cache")}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    clear_caches()
    clear_dense_caches()
    yield env
    config.reload()
    clear_caches()
    clear_dense_caches()


def v3(batch: int, h: int = 128, s_q: int = 1, fp8: bool = False, seqlen: int = 16384, d_qk: int = 576):
    return DenseWorkload(batch=batch, s_q=s_q, h_q=h, d_qk=d_qk, max_seqlen=seqlen, is_fp8=fp8)


def test_plan_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the planner touched the GPU, the compiler or a subprocess")

    for name in ("is_available", "device_count", "current_device", "get_device_properties", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, forbidden)
    monkeypatch.setattr(triton, "compile", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    shapes = [v3(b, h, s, fp8) for b in (1, 64) for h in (1, 16, 128) for s in (1, 2) for fp8 in (False, True)]
    first = [plan_dense(w, spec) for spec in PRESETS.values() for w in shapes]
    clear_dense_caches()
    assert first == [plan_dense(w, spec) for spec in PRESETS.values() for w in shapes]


@pytest.mark.parametrize("gpu", sorted(PRESETS))
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_every_preset_gets_a_plan_that_fits(gpu: str, fp8: bool) -> None:
    spec = PRESETS[gpu]
    for h in (1, 16, 64, 128):
        p = plan_dense(v3(32, h, fp8=fp8), spec)
        assert p.resources.smem_bytes <= spec.smem_per_block
        assert p.programs_per_sm >= 1 and p.num_parts >= 1
        # the number of programs is fixed by the device: one wave of the configuration's slots
        assert p.programs <= p.programs_per_sm * spec.num_sms
        assert p.programs == p.num_parts * p.num_row_blocks
        assert 1 <= p.segment_overhead <= 16
        assert p.reasons and "parts" in p.reasons[-1]


@pytest.mark.parametrize("h", [16, 64, 128])
def test_sm120_fp8_fits_99kb_from_compiled_resources(h: int) -> None:
    p = plan_dense(v3(64, h, fp8=True), PRO)
    assert p.resources.smem_bytes <= 99 * KIB
    assert p.resources.source == "compiled", p.resources.note
    for cfg in dense_candidate_configs(v3(64, h, fp8=True)):
        res = dense_static_resources(cfg, v3(64, h, fp8=True), PRO)
        fits = res.smem_bytes <= PRO.smem_per_block
        assert fits == (f"{cfg.label}: does not fit" not in " ".join(p.reasons)), cfg


def test_table_covers_every_candidate() -> None:
    for cfg, fp8 in all_dense_candidate_configs():
        for spec in (H200, PRO, PRESETS["a100"], PRESETS["rtx-4090"], PRESETS["b200"], PRESETS["rtx-3090"]):
            w = v3(8, 64, fp8=fp8)
            assert dense_static_resources(cfg, w, spec).source == "compiled", (cfg, fp8, spec.name)


def test_parts_follow_the_device_and_configuration_not_the_batch() -> None:
    """Static programs: for a configuration, the part count is a multiple of the SM count over its row blocks
    whatever the batch (lengths are not an input at all)."""
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=2):
        plans = [plan_dense(v3(b, 16), H200) for b in (8, 64, 128)]
    assert all(p.num_parts % H200.num_sms == 0 and p.num_parts <= p.programs_per_sm * H200.num_sms for p in plans)


def test_rows_share_kv_tiles_across_query_tokens() -> None:
    one = plan_dense(v3(32, 16, s_q=1), H200)
    mtp = plan_dense(v3(32, 16, s_q=4), H200)
    assert mtp.num_row_blocks == -(-64 // mtp.config.block_h) and one.num_row_blocks == 1


def test_knobs_force_the_tile_and_slots() -> None:
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=2,
                         WAVEMLA_TARGET_CTAS=7):  # fmt: skip
        p = plan_dense(v3(8, 16), H200)
    assert p.config == KernelConfig(16, 32, 4, 2) and p.num_parts == 7
    assert any("forced by" in r for r in p.reasons)


@pytest.mark.parametrize(
    "knobs",
    [{}, dict(WAVEMLA_TARGET_CTAS=7), dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_STAGES=3)],
    ids=["planner", "slots", "tile"],
)
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
def test_num_splits_is_refused_naming_the_knob(knobs: dict[str, object], fp8: bool) -> None:
    """The dense schedule balances the whole batch's tiles over its parts and cannot cut each request into a fixed
    number of pieces: a plan under WAVEMLA_NUM_SPLITS is refused, naming it, not made as if it were unset."""
    w = v3(64, 16, fp8=fp8)
    free = plan_dense(w, H200)
    with config.override(**knobs, WAVEMLA_NUM_SPLITS=3), \
            pytest.raises(PlanError, match=r"^WAVEMLA_NUM_SPLITS=3: .*WAVEMLA_TARGET_CTAS"):  # fmt: skip
        plan_dense(w, H200)
    assert plan_dense(w, H200) == free  # nothing of the refused call is kept


def test_slots_below_the_row_blocks_give_one_part_and_say_so() -> None:
    """Every row block of a request needs a program of its own, so WAVEMLA_TARGET_CTAS below the row blocks gives
    one part (a program per row block), and the plan says the knob was exceeded; at or above them, the programs
    stay within the slots."""
    tile = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_STAGES=3)
    for slots in range(1, 10):
        with config.override(**tile, WAVEMLA_TARGET_CTAS=slots):
            p = plan_dense(v3(8, 64), H200)  # 4 row blocks of 16 rows
        assert p.num_row_blocks == 4 and p.num_parts == max(1, slots // 4)
        exceeded = [r for r in p.reasons if r.startswith(f"WAVEMLA_TARGET_CTAS={slots}:")]
        if slots < 4:
            assert p.programs == 4 and len(exceeded) == 1 and "4 row blocks" in exceeded[0], p.reasons
        else:
            assert p.programs <= slots and not exceeded, p.reasons


def test_forced_tile_that_cannot_fit_names_the_knobs() -> None:
    with config.override(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_STAGES=3), \
            pytest.raises(PlanError, match="WAVEMLA_BLOCK_H=64"):  # fmt: skip
        plan_dense(v3(8, 128), PRO)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (dict(batch=-1, s_q=1, h_q=1), "batch"),
        (dict(batch=1, s_q=0, h_q=1), "s_q"),
        (dict(batch=1, s_q=1, h_q=1, d_qk=128), "d_qk"),
        (dict(batch=1, s_q=1, h_q=1, d_qk=512, is_fp8=True), "d_qk"),
        (dict(batch=1, s_q=1, h_q=1, dtype="fp32"), "dtype"),
        (dict(batch=1, s_q=1, h_q=1, is_fp8="false"), "^is_fp8: expected a bool"),
        (dict(batch=1, s_q=1, h_q=1, is_fp8=1), "^is_fp8: expected a bool"),
    ],
)
def test_workload_errors_name_the_field(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        DenseWorkload(**kwargs)  # type: ignore[arg-type]


def test_work_list_must_fit_int32() -> None:
    with pytest.raises(PlanError, match="int32"):
        plan_dense(DenseWorkload(batch=4096, s_q=1, h_q=16, max_seqlen=1 << 30), H200)


def test_int32_is_checked_per_tile_not_for_the_whole_plan() -> None:
    """A work list that overflows int32 in 16- or 32-key tiles but not in 64-key tiles is planned with the 64-key
    tile (as forcing it does), not refused."""
    w = DenseWorkload(batch=4096, s_q=1, h_q=128, max_seqlen=1 << 24, page=1024)
    p = plan_dense(w, H200)
    assert p.block_n == 64
    assert w.batch * (-(-w.max_seqlen // p.block_n) + p.segment_overhead) <= 2**31 - 1
    assert any("int32" in r for r in p.reasons)
    with config.override(WAVEMLA_BLOCK_N=64):
        assert plan_dense(w, H200).block_n == 64


def test_plan_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="workload"):
        plan_dense("v3", H200)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device"):
        plan_dense(v3(1), "h200")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the partition the scheduler makes


SKEWED = [
    pytest.param([65536] + [64] * 63, id="one-long-63-short"),
    pytest.param([1, 2, 0, 130000, 17, 4096, 0, 9000], id="mixed-with-empty"),
    pytest.param([16384 if i % 8 == 0 else 512 for i in range(128)], id="b128-1in8-long"),
    pytest.param([4096] * 32, id="uniform-b32"),
]


@pytest.mark.parametrize("lengths", SKEWED)
@pytest.mark.parametrize("gpu", ["h200", "rtx-pro-6000"])
def test_partition_is_balanced_for_skewed_lengths(lengths: list[int], gpu: str) -> None:
    p = plan_dense(v3(len(lengths), 16, seqlen=1 << 17), PRESETS[gpu])
    s = dense_schedule(lengths, p.num_parts, p.segment_overhead, p.block_n, 1 << 17)
    ideal = s.total_weight / p.num_parts
    # every part within one segment overhead (plus rounding) of the ideal share, however skewed the lengths
    assert max(s.part_weights) <= ideal + 2 * p.segment_overhead + 1
    units = sum(max(-(-n // p.block_n), 1) for n in lengths)
    assert sum(w - 0 for w in s.part_weights) >= units
    # a part holds pieces of consecutive requests; the combine sees each request's parts as a contiguous range
    for first, last in s.request_parts:
        assert 0 <= first <= last < p.num_parts


def test_partition_cuts_long_requests_over_many_parts() -> None:
    s = dense_schedule([131072, 1, 1], num_parts=132, overhead=3, block_n=64, max_seqlen=1 << 17)
    first, last = s.request_parts[0]
    assert last - first + 1 >= 120  # the long request is spread over (almost) every part
    assert s.request_parts[1] == s.request_parts[2] == (131, 131)


def test_schedule_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="num_parts"):
        dense_schedule([1], 0, 1, 64, 64)


@pytest.mark.parametrize("cut_units", [-1, 0, 4])
def test_schedule_of_no_requests_is_empty_parts(cut_units: int) -> None:
    """b = 0: every part holds nothing (what the device scheduler's aligned form writes), not a traceback."""
    s = dense_schedule([], num_parts=4, overhead=3, block_n=64, max_seqlen=4096, cut_units=cut_units)
    assert s.parts == ((0, 0, 0, 0),) * 4
    assert s.request_parts == () and s.part_weights == (0, 0, 0, 0) and s.total_weight == 0


def test_dense_combine_shape_follows_the_pieces_a_request_can_have():
    from wavemla.plan import dense_combine_pieces, dense_combine_shape

    assert dense_combine_pieces(1, 132) == 132 and dense_combine_shape(1, 132) == (32, 16)
    assert dense_combine_pieces(4, 264) == 67 and dense_combine_shape(4, 264) == (32, 16)
    assert dense_combine_pieces(8, 264) == 34 and dense_combine_shape(8, 264) == (32, 64)
    assert dense_combine_pieces(16, 264) == 18 and dense_combine_shape(16, 264) == (32, 64)
    assert dense_combine_pieces(32, 264) == 10 and dense_combine_shape(32, 264) == (16, 32)
    assert dense_combine_pieces(32, 132) == 6 and dense_combine_shape(32, 132) == (8, 128)
    assert dense_combine_pieces(128, 264) == 4 and dense_combine_shape(128, 264) == (4, 128)
    # a combine of 32 pieces a step is priced at 16 a step, as the parts were measured: one short request keeps 16
    # parts (17 pieces), which pricing 32 a step would take to 66
    assert plan_dense(DenseWorkload(batch=1, s_q=1, h_q=16, max_seqlen=1024), H200).num_parts == 16


def test_short_single_requests_take_fewer_parts_than_sms():
    """One short request cut into a piece per SM leaves the combine 132 pieces to merge: the planner prices the
    combine's steps and also tries SMs / 2, / 4, ... parts (measured on the H200: b=1 h=16 s_k 1K 69.0 -> 18.4 µs)."""
    short = plan_dense(DenseWorkload(batch=1, s_q=1, h_q=16, max_seqlen=1024 + 64), H200)
    assert short.num_parts < H200.num_sms
    long = plan_dense(DenseWorkload(batch=128, s_q=1, h_q=16, max_seqlen=16384 + 64), H200)
    assert long.num_parts >= H200.num_sms


def test_h16_bf16_picks_do_not_flip_with_the_parity_of_b():
    """The tile model once held 16x64 tiles at one program per SM equal to 16x32 at two and flipped between them at
    odd and even b (measured 11-19% slower at every odd b = 19..65, s_k 4K); from b = 10 the pick is one tile."""
    shapes = [DenseWorkload(batch=b, s_q=1, h_q=16, max_seqlen=4096 + 64) for b in range(10, 129)]
    assert len({plan_dense(w, H200).config for w in shapes}) == 1


@pytest.mark.parametrize("s_q", [1, 2])
def test_16_key_row_tiles_yield_where_32_key_tiles_run_two_per_sm(s_q: int) -> None:
    """On sm_90 the 32-key row tile runs two programs per SM, as the 16-key one does, with twice the bytes in flight:
    measured on an H100 SXM at h = 16, 1.00-1.08x faster at b = 32..128 (4K and 16K keys), 1.33x on an H200. The
    H100 preset had picked the 16-key tile; where the 32-key tile runs one program per SM it stays a candidate."""
    h100 = PRESETS["h100"]
    for b, s_k in [(8, 16384), (32, 4096), (32, 16384), (128, 16384)]:
        p = plan_dense(DenseWorkload(batch=b, s_q=s_q, h_q=16, max_seqlen=s_k + 64), h100)
        assert p.config.block_n == 32, (b, s_k, p.config)
        assert any("BLOCK_N=16" in r and "not priced" in r for r in p.reasons)
    a100 = plan_dense(DenseWorkload(batch=32, s_q=1, h_q=16, max_seqlen=16384 + 64), PRESETS["a100"])
    assert not any("not priced" in r for r in a100.reasons)
    fp8 = plan_dense(DenseWorkload(batch=32, s_q=1, h_q=16, max_seqlen=16384 + 64, is_fp8=True), h100)
    assert not any("not priced" in r for r in fp8.reasons)
    with config.override(WAVEMLA_BLOCK_N=16):
        forced = plan_dense(DenseWorkload(batch=32, s_q=1, h_q=16, max_seqlen=16384 + 64), h100)
    assert forced.config.block_n == 16


def test_warp_specialized_kernel_is_priced_where_it_runs() -> None:
    """On sm_90 with Gluon, 64x64 bf16 tiles in 64-key pages run the warp-specialized kernel: the plan says so and
    prices it below the Triton tile; other pages, FP8 rows, other GPUs and the knob set to off do not."""
    from wavemla.kernels import dense_decode_ws

    wl = DenseWorkload(batch=128, s_q=1, h_q=64, max_seqlen=16384)
    p = plan_dense(wl, H200)
    assert p.config.block_h == 64 and p.config.block_n == 64
    ws = any("warp-specialized" in r for r in p.reasons)
    assert ws == dense_decode_ws.HAVE_GLUON
    for other in (
        DenseWorkload(batch=128, s_q=1, h_q=64, max_seqlen=16384, page=32),
        DenseWorkload(batch=128, s_q=1, h_q=64, max_seqlen=16384, is_fp8=True),
        DenseWorkload(batch=128, s_q=1, h_q=48, max_seqlen=16384),
    ):
        assert not any("warp-specialized" in r for r in plan_dense(other, H200).reasons), other
    assert not any("warp-specialized" in r for r in plan_dense(wl, PRO).reasons)
    with config.override(WAVEMLA_DENSE_WS="off"):  # the knob is part of the plan's key: no cache clearing
        off = plan_dense(wl, H200)
    assert not any("warp-specialized" in r for r in off.reasons)
    with config.override(WAVEMLA_DENSE_P="split"):  # two dots of P on bf16 rows: the Triton kernel
        assert not any("warp-specialized" in r for r in plan_dense(wl, H200).reasons)
    if dense_decode_ws.HAVE_GLUON:
        assert p.predicted_us < off.predicted_us


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_stage_and_warp_knobs_leave_the_warp_specialized_kernels_plan_alone(gpu: str) -> None:
    """WAVEMLA_NUM_STAGES and WAVEMLA_NUM_WARPS do not reach the dense warp-specialized sm_90 kernel (it keeps its
    own two stages and three warpgroups, config.py): where it takes the 64x64 tile, its plan (parts, programs per SM,
    resources, predicted time) is the one without them. Counted as the Triton kernel at three stages (294,912 B
    estimated), the tile was refused as not fitting under WAVEMLA_NUM_STAGES=3."""
    from wavemla import plan as plan_mod
    from wavemla.kernels import dense_decode_ws

    spec = PRESETS[gpu]
    workloads = [v3(8, 64), v3(128, 64), v3(60, 128, seqlen=4096), v3(4, 16, s_q=4)]
    if not dense_decode_ws.applies(arch=90, is_fp8=False, d_qk=576, dtype="bf16", page=64, rows=64, block_h=64,
                                   block_n=64):  # fmt: skip
        pytest.skip("this Triton has no warp-specialized dense kernel")
    tile = {"WAVEMLA_BLOCK_H": 64, "WAVEMLA_BLOCK_N": 64}
    for w in workloads:
        with config.override(**tile):
            base = plan_dense(w, spec)
        for knobs in ({"WAVEMLA_NUM_STAGES": 1}, {"WAVEMLA_NUM_STAGES": 3}, {"WAVEMLA_NUM_WARPS": 2},
                      {"WAVEMLA_NUM_WARPS": 16}):  # fmt: skip
            with config.override(**tile, **knobs):
                p = plan_dense(w, spec)
            assert plan_mod._dense_ws(p.config, w, spec), (w, knobs)
            got = (p.num_parts, p.programs, p.programs_per_sm, p.segment_overhead, p.resources)
            assert got == (base.num_parts, base.programs, 1, base.segment_overhead, base.resources), (w, knobs)
            assert p.predicted_us == pytest.approx(base.predicted_us), (w, knobs)


def test_scheduler_may_align_parts_with_requests() -> None:
    """The plan prices cutting requests (``cut_units``, tile units) and, at capacity, a part per request where that
    is cheaper (batches a little under the part count); WAVEMLA_DENSE_ALIGN=off never aligns."""
    under = plan_dense(DenseWorkload(batch=128, s_q=1, h_q=64, max_seqlen=4096), H200)
    assert under.num_parts >= 128 and under.cut_units > 0
    assert "a part per request" in under.reasons[-1]
    assert dense_schedule([4096] * 128, under.num_parts, under.segment_overhead, 64, 4096,
                          under.cut_units).request_parts == tuple((r, r) for r in range(128))  # fmt: skip
    far_under = plan_dense(DenseWorkload(batch=64, s_q=1, h_q=64, max_seqlen=4096), H200)
    assert "a part per request" not in far_under.reasons[-1] and far_under.cut_units >= 0
    with config.override(WAVEMLA_DENSE_ALIGN="off"):  # part of the plan's key
        off = plan_dense(DenseWorkload(batch=128, s_q=1, h_q=64, max_seqlen=4096), H200)
    assert off.cut_units == -1 and "a part per request" not in off.reasons[-1]


def test_dense_workload_page_is_checked() -> None:
    with pytest.raises(ValueError, match="page"):
        DenseWorkload(batch=1, s_q=1, h_q=16, page=0)


# ---------------------------------------------------------------- properties over every preset and a grid of shapes

# the autouse fixture's environment holds for every example (the plan caches are keyed by the knobs)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def dense_workloads(draw: st.DrawFn) -> DenseWorkload:
    fp8 = draw(st.booleans())
    return DenseWorkload(
        batch=draw(st.integers(1, 512)),
        s_q=draw(st.integers(1, 4)),
        h_q=draw(st.integers(1, 128)),
        d_qk=576 if fp8 else draw(st.sampled_from(DENSE_D_QK)),
        max_seqlen=draw(st.integers(1, 1 << 20)),
        is_fp8=fp8,
        dtype=draw(st.sampled_from(["bf16", "fp16"])),
        page=draw(st.sampled_from([1, 16, 64, 100, 128, 1024])),
    )


@PROPERTY
@given(gpu=st.sampled_from(sorted(PRESETS)), w=dense_workloads(), longer=st.integers(0, 1 << 20))
def test_every_plan_is_in_bounds_and_prices_more_keys_no_cheaper(gpu: str, w: DenseWorkload, longer: int) -> None:
    spec = PRESETS[gpu]
    p = plan_dense(w, spec)
    assert p.config in dense_candidate_configs(w)
    res = p.resources
    assert res.smem_bytes <= spec.smem_per_block
    assert p.programs_per_sm == spec.blocks_per_sm(res.smem_bytes, res.regs_per_thread, p.num_warps) >= 1
    assert 1 <= p.active_per_sm <= p.programs_per_sm
    assert p.num_row_blocks == -(-w.rows // p.block_h)
    assert p.num_parts >= 1 and p.programs == p.num_parts * p.num_row_blocks <= p.programs_per_sm * spec.num_sms
    assert 1 <= p.segment_overhead <= 16 and p.cut_units >= 0
    assert 0 < p.tile_us < float("inf") and 0 < p.predicted_us < float("inf")
    assert w.batch * (-(-w.max_seqlen // p.block_n) + p.segment_overhead) <= 2**31 - 1  # the device's work units
    more = plan_dense(dataclasses.replace(w, max_seqlen=w.max_seqlen + longer), spec)
    assert more.predicted_us >= p.predicted_us * (1 - 1e-9), (p.reasons[-1], more.reasons[-1])


@PROPERTY
@given(
    cases=st.lists(st.tuples(st.sampled_from(sorted(PRESETS)), dense_workloads()), min_size=1, max_size=4),
    knobs=st.sampled_from([
        dict(WAVEMLA_TARGET_CTAS=7),
        dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=2),
        dict(WAVEMLA_BLOCK_N=64),
        dict(WAVEMLA_DENSE_WS="off", WAVEMLA_DENSE_ALIGN="off"),
        dict(WAVEMLA_DENSE_P="split"),
        dict(WAVEMLA_NUM_SPLITS=3),  # refused: the plans after it must not see it
    ]),
)  # fmt: skip
def test_plans_do_not_depend_on_call_order_or_earlier_knobs(
    cases: list[tuple[str, DenseWorkload]], knobs: dict[str, object]
) -> None:
    """Same inputs, same plan: fresh, after plans for other presets in the other order, and after plans under
    knob overrides (which a cache must not hand back once the knobs are gone)."""
    clear_dense_caches()
    fresh = [plan_dense(w, PRESETS[g]) for g, w in cases]
    clear_dense_caches()
    with config.override(**knobs):
        for g, w in reversed(cases):
            try:
                plan_dense(w, PRESETS[g])
            except PlanError as e:
                assert any(k in str(e) for k in knobs) or "int32" in str(e), e
    assert [plan_dense(w, PRESETS[g]) for g, w in reversed(cases)][::-1] == fresh


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(-5, 5000), max_size=12),
    num_parts=st.integers(1, 40),
    overhead=st.integers(0, 16),
    block_n=st.sampled_from([16, 32, 64]),
    max_seqlen=st.integers(1, 4096),
    cut_units=st.integers(-1, 20),
)
def test_schedule_covers_every_tile_once(
    lengths: list[int], num_parts: int, overhead: int, block_n: int, max_seqlen: int, cut_units: int
) -> None:
    """The parts cut the ``(request, tile)`` list into consecutive ranges that cover each tile exactly once;
    ``request_parts`` names exactly the parts holding some of a request's tiles (the partials the combine merges),
    and ``part_weights`` what each part holds."""
    s = dense_schedule(lengths, num_parts, overhead, block_n, max_seqlen, cut_units)
    units = [max(-(-min(max(n, 0), max_seqlen) // block_n), 1) for n in lengths]
    start = [sum(units[:r]) for r in range(len(units) + 1)]

    def at(r: int, t: int) -> int:
        return start[r] + t if r < len(units) else start[-1]

    spans = [(at(rb, tb), at(re, te)) for rb, tb, re, te in s.parts]
    assert len(spans) == num_parts and spans[0][0] == 0 and spans[-1][1] == start[-1]
    assert all(a <= z for a, z in spans) and all(spans[i][1] == spans[i + 1][0] for i in range(num_parts - 1))
    assert s.total_weight == start[-1] + overhead * len(units)
    for p, (a, z) in enumerate(spans):
        held = [r for r in range(len(units)) if start[r] < z and start[r + 1] > a]
        assert s.part_weights[p] == z - a + overhead * len(held)
    for r in range(len(units)):
        parts = [p for p, (a, z) in enumerate(spans) if start[r] < z and start[r + 1] > a]
        assert s.request_parts[r] == (parts[0], parts[-1]) and parts == list(range(parts[0], parts[-1] + 1))
