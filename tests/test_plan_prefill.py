"""The sparse prefill's planner: tiles that fit every preset GPU, the narrowing rules, and its resource table."""

import dataclasses

import pytest
import triton
from hypothesis import given, settings
from hypothesis import strategies as st

from wavemla import resources
from wavemla.device import PRESETS, get_spec
from wavemla.plan import (
    PREFILL_D_QK,
    PREFILL_MAX_SPLITS,
    PlanError,
    PrefillWorkload,
    _prefill_resources,
    all_prefill_configs,
    plan_sparse_prefill,
    prefill_splits,
)
from wavemla.resources import ARCHES, resource_key

WORKLOADS = [PrefillWorkload(s_q, h, topk, d) for s_q in (1, 64, 4096) for h in (1, 16, 63, 64, 128)
             for topk, d in ((640, 512), (2048, 576))]  # fmt: skip


@pytest.mark.parametrize("gpu", sorted(PRESETS))
def test_every_plan_fits_the_gpu_and_is_compiled(gpu):
    spec = get_spec(gpu)
    for w in WORKLOADS:
        p = plan_sparse_prefill(w, spec)
        assert p.resources.source == "compiled", (gpu, w, p.resources.note)
        assert p.resources.smem_bytes <= spec.smem_per_block, (gpu, w, p.config)
        assert p.programs_per_sm >= 1 and p.programs == w.s_q * -(-w.h_q // p.block_h) * p.splits
        tiles = -(-w.topk // p.block_n)
        assert p.splits == 1 or (p.splits * p.piece_tiles >= tiles > (p.splits - 1) * p.piece_tiles), (gpu, w)
        assert p.block_h <= max(16, 1 << (w.h_q - 1).bit_length()), (gpu, w, p.config)
        assert p.reasons and p.d_v == 512


def test_hopper_takes_the_widest_tile_and_sm120_one_within_99_kb():
    w = PrefillWorkload(4096, 64, 640)
    assert str(plan_sparse_prefill(w, get_spec("h200")).config) == "64x64x8x3"
    sm120 = plan_sparse_prefill(w, get_spec("rtx-pro-6000"))
    assert sm120.resources.smem_bytes <= 99 * 1024 and sm120.block_h < 64


def test_few_tokens_take_16_head_blocks_and_cut_lists():
    p = plan_sparse_prefill(PrefillWorkload(4, 64, 640), get_spec("h200"))
    assert p.block_h == 16 and (p.splits, p.piece_tiles, p.programs) == (5, 4, 80)  # 16 whole lists of 20 tiles
    assert any("16-head blocks" in r for r in p.reasons) and any("cut into 5 pieces" in r for r in p.reasons)


@pytest.mark.parametrize(
    ("s_q", "want"),
    [(16, "16x32x4x2/4"), (32, "64x64x8x3/4"), (64, "64x64x8x3/2"), (100, "64x64x8x3/1"), (4096, "64x64x8x3/1")],
)
def test_short_calls_take_the_measured_best(s_q, want):
    """DeepSeek-V4 at 64 heads on a 132-SM Hopper: the plan the H100 tile-and-pieces grid measured fastest (or within
    1%) at each size (benchmarks/experiments/prefill_pieces_grid.py; docs/sparse-prefill.md)."""
    p = plan_sparse_prefill(PrefillWorkload(s_q, 64, 640), get_spec("h100"))
    assert f"{p.config}/{p.splits}" == want
    assert p.programs <= 132 * p.programs_per_sm or p.splits == 1  # pieces never make a second wave


@pytest.mark.parametrize(
    ("programs", "slots", "tiles", "want"),
    [
        (16, 132, 20, (5, 4)),  # as many pieces as fill the slots, of at least 4 tiles
        (16, 264, 20, (5, 4)),  # the tiles bound the pieces
        (40, 264, 64, (6, 11)),  # 6 pieces fill 240 of 264 slots; 6 x 11 tiles cover 64
        (1, 264, 640, (16, 40)),  # at most 16 pieces
        (70, 132, 64, (1, 64)),  # two pieces would not fit one wave: whole lists
        (64, 132, 10, (2, 5)),  # 2-tile pieces at least (64-row tiles)
        (8, 132, 7, (1, 7)),  # too short to cut
        (0, 132, 20, (1, 20)),
    ],
)
def test_prefill_splits(programs, slots, tiles, want):
    splits, piece_tiles = prefill_splits(programs, slots, tiles, 2 if tiles == 10 else 4)
    assert (splits, piece_tiles) == want
    assert splits * piece_tiles >= tiles and (splits - 1) * piece_tiles < tiles


@settings(max_examples=300, deadline=None)
@given(
    gpu=st.sampled_from(sorted(PRESETS)),
    s_q=st.integers(0, 1 << 16),
    h_q=st.integers(1, 128),
    topk=st.integers(0, 2048),
    d_qk=st.sampled_from(PREFILL_D_QK),
)
def test_every_plan_is_resident_and_its_pieces_cover_each_list_once(gpu, s_q, h_q, topk, d_qk):
    """Any shape on any preset: a tile that fits a block and an SM, programs for every (token, head block, piece),
    pieces of at least one tile that cover the list exactly (the last one possibly short), never a second wave of
    pieces, and the same plan when asked again."""
    spec = get_spec(gpu)
    w = PrefillWorkload(s_q, h_q, topk, d_qk)
    p = plan_sparse_prefill(w, spec)
    assert p.config in all_prefill_configs()
    res = p.resources
    assert res.smem_bytes <= spec.smem_per_block
    assert p.programs_per_sm == spec.blocks_per_sm(res.smem_bytes, res.regs_per_thread, p.num_warps) >= 1
    assert p.programs == s_q * -(-h_q // p.block_h) * p.splits
    tiles = -(-topk // p.block_n)
    assert 1 <= p.splits <= PREFILL_MAX_SPLITS
    if p.splits == 1:
        assert p.piece_tiles == tiles
    else:
        assert p.piece_tiles >= 1 and (p.splits - 1) * p.piece_tiles < tiles <= p.splits * p.piece_tiles
        assert p.programs <= spec.num_sms * p.programs_per_sm
    assert plan_sparse_prefill(w, spec) == p


def test_no_tile_fits_is_a_named_error():
    tiny = dataclasses.replace(get_spec("h200"), smem_per_block=8 * 1024)
    with pytest.raises(PlanError, match="no prefill tile fits"):
        plan_sparse_prefill(PrefillWorkload(64, 64, 640), tiny)


def test_tiles_that_cannot_be_resident_are_not_taken():
    """A tile within the per-block shared memory that no SM can hold (here: too few registers for 8 warps of 255)
    is passed over for one that runs, and where none runs the error is a PlanError naming the reason."""
    h200 = get_spec("h200")
    small_rf = dataclasses.replace(h200, regs_per_sm=32 * 1024)
    for w in (PrefillWorkload(64, 64, 640), PrefillWorkload(4096, 128, 2048, 576), PrefillWorkload(1, 16, 64)):
        p = plan_sparse_prefill(w, small_rf)
        assert p.programs_per_sm >= 1 and p.num_warps == 4, (w, p.config)
        assert p.programs_per_sm == small_rf.blocks_per_sm(p.resources.smem_bytes, p.resources.regs_per_thread,
                                                           p.num_warps)  # fmt: skip
    with pytest.raises(PlanError, match=r"no prefill tile fits.*registers"):
        plan_sparse_prefill(PrefillWorkload(64, 64, 640), dataclasses.replace(h200, regs_per_sm=16 * 1024))


@pytest.mark.parametrize(
    ("field", "value"), [("s_q", -1), ("h_q", 0), ("h_q", 129), ("topk", 1.5), ("d_qk", 256), ("s_q", True)]
)
def test_workload_checks_name_the_field(field, value):
    args = {"s_q": 8, "h_q": 64, "topk": 640, "d_qk": 512, field: value}
    with pytest.raises(ValueError, match=f"^{field}:"):
        PrefillWorkload(**args)


def test_table_covers_every_tile_on_every_arch():
    version, kernel, table = resources.committed_table(resources.PREFILL_KERNEL)
    assert kernel.startswith("sparse_prefill@")
    wanted = {
        resource_key(kernel, c.block_h, c.block_n, c.num_warps, c.num_stages, False, arch, version)
        for c in all_prefill_configs()
        for arch in ARCHES
    }
    assert set(table) == wanted
    for r in table.values():
        assert 1 <= r.regs <= 255 and r.shared_bytes > 0, r


def test_table_was_built_from_the_current_kernel_source():
    _, kernel, _ = resources.committed_table(resources.PREFILL_KERNEL)
    assert kernel == resources.kernel_id(resources.PREFILL_KERNEL), (
        "the sparse prefill kernel changed since its resource table was generated: "
        "run `python -m wavemla.resources --write --kernel sparse_prefill`"
    )


def test_estimate_without_a_table_entry(monkeypatch):
    monkeypatch.setattr(resources, "lookup", lambda *a, **k: None)
    _prefill_resources.cache_clear()
    try:
        r = _prefill_resources(all_prefill_configs()[0], 90, 512, "none")
        assert r.source == "estimate" and r.smem_bytes == 2 * 512 * (64 + 3 * 64)
    finally:
        _prefill_resources.cache_clear()


def test_sm120_tile_compiles_and_matches_the_table(tmp_path, monkeypatch):
    """The tile every 99 KB part plans, compiled for sm_120 here: its shared memory fits and equals the table's row
    when Triton and the kernel source are the table's."""
    from wavemla import config

    monkeypatch.setattr(config, "_environ", lambda: {"WAVEMLA_CACHE_DIR": str(tmp_path)})
    config.reload()
    try:
        cfg = plan_sparse_prefill(PrefillWorkload(4096, 64, 640), get_spec("rtx-pro-6000")).config
        (got,) = resources.compile_resources([cfg], arches=[120], is_fp8=False, kernel=resources.PREFILL_KERNEL)
    finally:
        monkeypatch.undo()
        config.reload()
    assert got.smem_bytes <= 99 * 1024
    version, kernel, table = resources.committed_table(resources.PREFILL_KERNEL)
    if version == triton.__version__ and kernel == resources.kernel_id(resources.PREFILL_KERNEL):
        t = table[got.key]
        assert (got.shared_bytes, got.regs, got.stack_bytes) == (t.shared_bytes, t.regs, t.stack_bytes)


_CUT_BUILDS = """
import json
from wavemla import resources as r
from wavemla.kernels.sparse_prefill import _sparse_prefill_combine_kernel, _sparse_prefill_kernel
from wavemla.plan import all_prefill_configs
out = []
# the tiles a cut plan takes: the widest that fits on some preset (64x64x8x3 on sm_80/90, 64x32x8x2 on sm_100,
# 32x32x4x2 on 99 KB parts) and the 16-head one
CUT_TILES = ("64x64x8x3", "64x32x8x2", "32x32x4x2", "16x32x4x2")
for arch in r.ARCHES:
    for c in [c for c in all_prefill_configs() if str(c) in CUT_TILES]:
        shared = []
        for splits in (1, 4):
            spec = r._sparse_prefill_spec(c.block_h, c.block_n, c.num_stages)
            spec["constexprs"]["SPLITS"] = splits
            k = r.compile_for_target(_sparse_prefill_kernel, arch=arch, num_warps=c.num_warps,
                                     num_stages=c.num_stages, pointers=spec["pointers"], ints=spec["ints"],
                                     constexprs=spec["constexprs"], fp32=spec["fp32"],
                                     unspecialized=spec["unspecialized"])
            shared.append(int(k.metadata.shared))
        out.append([arch, str(c), shared])
    ptr = {n: "*fp32" for n in ("p_part", "p_part_max", "p_part_lse", "p_sink", "p_max", "p_lse")}
    k = r.compile_for_target(_sparse_prefill_combine_kernel, arch=arch, num_warps=4, num_stages=1,
                             pointers={**ptr, "p_out": "*bf16"}, ints={"H": 64, "stride_ot": 32768, "stride_oh": 512},
                             constexprs={"HAS_SINK": True, "D": 512, "SPLITS": 16, "BLOCK_H": 16}, unspecialized=("T",))
    out.append([arch, "combine", [int(k.metadata.shared)]])
print(json.dumps(out))
"""


def test_cut_plans_take_the_tiles_compiled_below():
    """Every cut plan on every preset takes one of the tiles the compile check below builds."""
    for gpu in sorted(PRESETS):
        for w in WORKLOADS:
            p = plan_sparse_prefill(w, get_spec(gpu))
            assert p.splits == 1 or str(p.config) in ("64x64x8x3", "64x32x8x2", "32x32x4x2", "16x32x4x2"), (gpu, w)


def test_cut_builds_and_their_combine_compile_for_every_arch():
    """A plan that cuts lists runs the split kernel's SPLITS > 1 build and the combine: both compile for sm_80..sm_120
    (offline, Triton's interpreter off), and the cut build needs the shared memory of the build without pieces,
    which is what the planner reads for the tile."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from wavemla import config

    src = str(Path(resources.__file__).resolve().parents[1])
    env = {**config.environ_without("TRITON_INTERPRET"), "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", _CUT_BUILDS], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(rows) == len(ARCHES) * 5
    for arch, name, shared in rows:
        if name != "combine":
            whole, cut = shared
            assert cut == whole, (arch, name, shared)


@pytest.fixture
def knobs(monkeypatch, tmp_path):
    """A private environment for the knobs (no knob set) that a test fills."""
    from wavemla import config

    env = {"WAVEMLA_CACHE_DIR": str(tmp_path)}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    yield env
    monkeypatch.undo()
    config.reload()


@pytest.mark.parametrize(
    ("name", "raw"),
    [("WAVEMLA_BLOCK_H", "48"), ("WAVEMLA_BLOCK_N", "x"), ("WAVEMLA_NUM_WARPS", "5"), ("WAVEMLA_NUM_STAGES", "4"),
     ("WAVEMLA_NUM_SPLITS", "0"), ("WAVEMLA_TARGET_CTAS", "0"), ("WAVEMLA_BATCH_INVARIANT", "maybe")],
)  # fmt: skip
def test_invalid_plan_knobs_are_refused_as_in_the_decode(knobs, name, raw):
    """The prefill planner reads the decode's plan knobs, so a bad value is a KnobError naming it here too."""
    from wavemla.config import KnobError

    knobs[name] = raw
    with pytest.raises(KnobError, match=name):
        plan_sparse_prefill(PrefillWorkload(64, 64, 640), get_spec("h200"))


def test_tile_knobs_set_the_decode_not_the_prefill(knobs):
    """Valid tile, split and slot knobs choose the decode kernels' launch: the prefill keeps its own tiles, and its
    reasons say which knobs it left alone."""
    w = PrefillWorkload(64, 64, 640)
    free = plan_sparse_prefill(w, get_spec("h200"))
    knobs.update({"WAVEMLA_BLOCK_H": "16", "WAVEMLA_NUM_WARPS": "2", "WAVEMLA_NUM_SPLITS": "3",
                  "WAVEMLA_TARGET_CTAS": "7"})  # fmt: skip
    from wavemla import config

    config.reload()
    p = plan_sparse_prefill(w, get_spec("h200"))
    assert (p.config, p.splits, p.programs) == (free.config, free.splits, free.programs)
    said = [r for r in p.reasons if "not applied" in r]
    assert said and all(k in said[0] for k in ("WAVEMLA_BLOCK_H=16", "WAVEMLA_NUM_WARPS=2", "WAVEMLA_NUM_SPLITS=3",
                                               "WAVEMLA_TARGET_CTAS=7"))  # fmt: skip
    assert not any("not applied" in r for r in free.reasons)


def test_batch_invariant_prefill_keeps_whole_lists_and_one_tile(knobs):
    """WAVEMLA_BATCH_INVARIANT: a token's bits must not depend on the tokens beside it, so the prefill neither cuts
    short calls' lists into pieces nor narrows their head blocks: every token count runs the same tile whole."""
    from wavemla import config

    h200 = get_spec("h200")
    assert plan_sparse_prefill(PrefillWorkload(4, 64, 640), h200).splits > 1  # a short call is cut by default
    knobs["WAVEMLA_BATCH_INVARIANT"] = "1"
    config.reload()
    plans = [plan_sparse_prefill(PrefillWorkload(s_q, 64, 640), h200) for s_q in (1, 4, 16, 64, 4096)]
    assert {(str(p.config), p.splits) for p in plans} == {("64x64x8x3", 1)}
    assert all(p.piece_tiles == 10 for p in plans)
    assert any("batch-invariant" in r for r in plans[0].reasons)
