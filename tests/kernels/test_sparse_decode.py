"""Sparse decode kernel vs the fp64 reference: CPU interpreter lane (fp16, small shapes) and GPU lane (bf16, FP8)."""

from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE, HAS_CUDA, capture_graph, gpu_lacks_e4m3_cvt
from wavemla import config, sparse_mla_decode
from wavemla.reference import quantize_model1, sparse_decode_ref
from wavemla.testing import TOLERANCES, assert_close, make_sparse_decode_inputs

LANE = "gpu" if HAS_CUDA else "interp"
SMALL_DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16


def check(inputs, **overrides):
    """Run kernel (first, before the reference allocates) and reference on the same inputs and compare."""
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    kwargs.update(overrides)
    out, lse = sparse_mla_decode(**kwargs)
    ref_kwargs = {
        "topk_length": kwargs.get("topk_length"),
        "extra_kv_cache": kwargs.get("extra_kv_cache"),
        "extra_indices": kwargs.get("extra_indices"),
        "extra_topk_length": kwargs.get("extra_topk_length"),
        "attn_sink": kwargs.get("attn_sink"),
        "softmax_scale": kwargs.get("softmax_scale"),
    }
    ref_out, ref_lse = sparse_decode_ref(kwargs["q"], kwargs["kv_cache"], kwargs["indices"], **ref_kwargs)
    assert out.dtype == kwargs["q"].dtype and out.shape == kwargs["q"].shape
    assert lse.dtype == torch.float32 and lse.shape == (out.shape[0], out.shape[2], out.shape[1])
    assert_close("out", out, ref_out, TOLERANCES[("out", LANE)])
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
    return out, lse


CASES = [
    pytest.param(dict(batch=2, h_q=16, topk=64, page=64), id="B2-H16-swa64-p64-rows"),
    pytest.param(dict(batch=2, h_q=16, topk=64, page=64, fp8=True), id="B2-H16-swa64-p64-fp8"),
    pytest.param(dict(batch=3, h_q=3, topk=40, page=61, extra_topk=50, extra_page=69), id="B3-H3-p61-x69"),
    pytest.param(dict(batch=1, h_q=1, topk=33, page=1, fp8=True), id="B1-H1-p1-fp8"),
    pytest.param(dict(batch=2, h_q=63, topk=48, page=256, extra_topk=70, extra_page=2, fp8=True), id="B2-H63-p256-x2"),
    pytest.param(dict(batch=2, h_q=64, topk=64, page=64, extra_topk=96, extra_pool=300, fp8=True), id="B2-H64-csa"),
    pytest.param(dict(batch=2, s_q=3, h_q=16, topk=40, page=16, extra_topk=40, fp8=True), id="B2-S3-H16"),
    pytest.param(dict(batch=2, h_q=16, topk=64, page=64, invalid_fraction=0.3, fp8=True), id="B2-H16-invalid30"),
]


@pytest.mark.parametrize("shape", CASES)
def test_matches_reference(shape):
    fp8 = shape.pop("fp8", False)
    inputs = make_sparse_decode_inputs(**shape, fp8=fp8, dtype=SMALL_DTYPE, device=DEVICE, seed=1)
    check(inputs)


FORCED = [dict(WAVEMLA_NUM_SPLITS=3), dict(WAVEMLA_TARGET_CTAS=7), dict(WAVEMLA_TARGET_CTAS=1)]


@pytest.mark.parametrize("forced", FORCED)
def test_split_and_combine(forced):
    """Tokens cut across programs (combine path) and programs spanning several tokens."""
    inputs = make_sparse_decode_inputs(
        batch=3,
        s_q=2,
        h_q=16,
        topk=48,
        page=32,
        extra_topk=80,
        extra_page=16,
        fp8=True,
        dtype=SMALL_DTYPE,
        device=DEVICE,
        seed=2,
    )
    with config.override(**forced):
        check(inputs)


# 64-row tiles: cut tokens are merged inside the split kernel by the program that writes their last piece
MERGE_IN_KERNEL = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1)


@pytest.mark.parametrize(
    "forced", [dict(WAVEMLA_NUM_SPLITS=3), dict(WAVEMLA_TARGET_CTAS=4), dict(WAVEMLA_TARGET_CTAS=11)], ids=str
)
def test_split_merged_in_kernel(forced):
    """Tokens cut across programs with 64-row tiles: the program writing a token's last piece merges it (no combine
    launch), and leaves every piece counter at zero for the next call, which must give the same bits."""
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=3, s_q=2, h_q=16, topk=100, page=32, extra_topk=160, extra_page=16, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=4,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    with config.override(**MERGE_IN_KERNEL, **forced):
        first = check(inputs, metadata=meta)
        assert meta.plan is not None and meta.plan.merge_in_kernel and meta.plan.needs_combine
        assert meta.counts is not None and int(meta.counts.abs().sum()) == 0
        again = check(inputs, metadata=meta)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


@pytest.mark.parametrize("splits", [2, 3])
def test_two_piece_merge_and_lean_normalization(splits, monkeypatch):
    """Tokens cut into two pieces are merged by ``_merge_two_out`` and every segment is normalized by one product
    per element (launcher options ``merge_pair`` and ``lean_norm``, on by default): against the reference, and
    against the general merge and the per-element division (both off) within two units in the last place of each
    head's largest output (the fp16 partials can round one unit apart, and pieces can cancel), with the same lse
    bits. Three
    pieces a token take the general merge either way (the normalization still differs)."""
    import wavemla.kernels.sparse_decode as sd
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=3, s_q=2, h_q=16, topk=100, page=32, extra_topk=160, extra_page=16, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=8,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    with config.override(**MERGE_IN_KERNEL, WAVEMLA_NUM_SPLITS=splits):
        lean = check(inputs, metadata=meta)
        p = meta.plan
        assert p is not None and p.merge_in_kernel and p.needs_combine and p.units_per_part * splits >= p.n_tiles
        split = sd.sparse_decode_split
        monkeypatch.setattr(
            sd, "sparse_decode_split", lambda **kw: split(**{**kw, "merge_pair": False, "lean_norm": False})
        )
        general = check(inputs, metadata=meta)
    assert torch.equal(lean[1], general[1])
    a, b = lean[0].float(), general[0].float()
    ulp = torch.finfo(lean[0].dtype).eps * b.abs().amax(dim=-1, keepdim=True)  # at each head's largest output
    assert bool(((a - b).abs() <= 2 * ulp).all()), float((a - b).abs().max())


_MERGE_PTX = """
import json, sys
sys.path.insert(0, sys.argv[1])
from wavemla.kernels.sparse_decode import _sparse_mla_decode_kernel
from wavemla.resources import _sparse_decode_spec, compile_for_target
out = []
for arch, bh, nw in ((90, 64, 8), (90, 16, 4), (80, 16, 4)):
    spec = _sparse_decode_spec(bh, 64, 1, True, "fp16", arch)
    c = compile_for_target(
        _sparse_mla_decode_kernel, arch=arch, num_warps=nw, num_stages=1, pointers=spec["pointers"],
        ints=spec["ints"], constexprs=spec["constexprs"], fp32=("qk_scale",), unspecialized=spec["unspecialized"],
    )
    ptx = c.asm["ptx"]
    out.append([arch, bh, ptx.count("atom.acq_rel.gpu.global.add.u32"), ptx.count("bar.red.or.pred"),
                ptx.count("ld.acquire"), ptx.count("red.release")])
print(json.dumps(out))
"""


def test_merge_decision_is_one_atomic_and_one_barrier_reduction():
    """A cut token's merging program is chosen by one thread's acquire-release atomic add, whose result reaches
    every thread through one barrier with an OR reduction (``_completes_count``), never by threads reading the count
    back on their own (a reduction over those reads can be folded away, and a CTA then splits between merging and
    not). Checked in the PTX of the 64-row tiles that merge in the kernel, built for sm_90 and sm_80 without a GPU
    (a clean environment, so the kernel is a JIT function, not the interpreter's)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import wavemla

    src = str(Path(wavemla.__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, "-c", _MERGE_PTX, src], capture_output=True, text=True, env={}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for arch, bh, n_atom, n_bar_red, n_ld_acquire, n_red_release in json.loads(proc.stdout):
        assert (n_atom, n_bar_red, n_ld_acquire, n_red_release) == (1, 1, 0, 0), (arch, bh)


def check_bf16_q(inputs, meta):
    """A bf16-q call over FP8 rows against the reference: output and lse on the GPU; under the interpreter, which
    rounds bf16 outputs its own way, the lse only (callers hold the output to another run's bits)."""
    if LANE == "gpu":
        return check(inputs, metadata=meta)
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    out, lse = sparse_mla_decode(**kwargs, metadata=meta)
    ref_kwargs = {k: v for k, v in kwargs.items() if k not in ("q", "kv_cache", "indices")}
    _, ref_lse = sparse_decode_ref(kwargs["q"], kwargs["kv_cache"], kwargs["indices"], **ref_kwargs)
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
    return out, lse


def _bf16_q_inputs():
    """A bf16 q over FP8 rows (two query tokens of 16 heads, both lists): the inputs, and the call's keywords."""
    inputs = make_sparse_decode_inputs(
        batch=3, s_q=2, h_q=16, topk=48, page=32, extra_topk=80, extra_page=16, fp8=True, dtype=torch.bfloat16,
        device=DEVICE, seed=7,
    )  # fmt: skip
    return inputs, {k: v for k, v in inputs.items() if v is not None}


@pytest.mark.parametrize(
    "forced", [dict(WAVEMLA_TARGET_CTAS=1), dict(WAVEMLA_TARGET_CTAS=4), dict(WAVEMLA_TARGET_CTAS=6)], ids=str
)
def test_bf16_q_over_fp8_rows(forced, monkeypatch):
    """A bf16 q over FP8 rows is converted to fp16 in the kernel and reloaded through per-program scratch rows,
    which a program reuses for every token it runs (one program for all tokens, cut tokens, one token each): the
    same bits as q converted before the launch. (The interpreter rounds bf16 outputs its own way, so there the
    output is held to those bits and the lse to the reference.)"""
    import wavemla.kernels.sparse_decode as sd
    from wavemla import get_mla_metadata

    inputs, kwargs = _bf16_q_inputs()
    meta, _ = get_mla_metadata()
    with config.override(**forced, WAVEMLA_NUM_STAGES=1):  # the register tile (staged tiles convert in registers)
        out, lse = check_bf16_q(inputs, meta)
        assert meta.plan is not None and meta.plan.q_scratch  # 16-row tiles, 3 tiles or more per program
        assert meta.q_ws is not None and meta.q_ws.dtype == torch.float16
        assert meta.q_ws.shape == (meta.plan.programs, meta.plan.config.block_h, 512)
        split = sd.sparse_decode_split
        monkeypatch.setattr(sd, "sparse_decode_split", lambda **kw: split(**{**kw, "q_ws": None, "q": kw["q"].half()}))
        out2, lse2 = sparse_mla_decode(**kwargs, metadata=meta)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)


def test_bf16_q_over_fp8_rows_staged(monkeypatch):
    """Staged FP8 tiles convert a bf16 q in registers (no scratch rows, no conversion kernel): the same bits as q
    converted before the launch."""
    import wavemla.kernels.sparse_decode as sd
    from wavemla import get_mla_metadata

    inputs, kwargs = _bf16_q_inputs()
    meta, _ = get_mla_metadata()
    with config.override(**STAGED, WAVEMLA_TARGET_CTAS=4):
        out, lse = check_bf16_q(inputs, meta)
        assert meta.plan is not None and meta.plan.config.num_stages == 3 and meta.plan.units_per_part >= 3
        assert not meta.plan.q_scratch and meta.q_ws is None
        split = sd.sparse_decode_split
        monkeypatch.setattr(sd, "sparse_decode_split", lambda **kw: split(**{**kw, "q": kw["q"].half()}))
        out2, lse2 = sparse_mla_decode(**kwargs, metadata=meta)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)


def test_merge_in_column_chunks_gives_the_same_bits(monkeypatch):
    """Cut tokens of 64-row plans are merged 128 output columns at a time: the same bits as all 512 at once."""
    import wavemla.kernels.sparse_decode as sd
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=3, s_q=2, h_q=16, topk=100, page=32, extra_topk=160, extra_page=16, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=5,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    with config.override(**MERGE_IN_KERNEL, WAVEMLA_TARGET_CTAS=4):
        chunked = check(inputs, metadata=meta)
        assert meta.plan is not None and meta.plan.merge_in_kernel and meta.plan.needs_combine
        split = sd.sparse_decode_split
        monkeypatch.setattr(sd, "sparse_decode_split", lambda **kw: split(**{**kw, "merge_chunk": 0}))
        whole = check(inputs, metadata=meta)
    assert torch.equal(chunked[0], whole[0]) and torch.equal(chunked[1], whole[1])


@pytest.mark.parametrize("chunk", [-128, 96, 1024])
def test_merge_chunk_must_divide_the_head_dim(chunk, monkeypatch):
    """The in-kernel merge's column chunk must be 0 or a power of two dividing 512: anything else is refused."""
    import wavemla.kernels.sparse_decode as sd

    inputs = make_sparse_decode_inputs(batch=1, h_q=16, topk=64, page=64, fp8=True, dtype=SMALL_DTYPE, device=DEVICE)
    split = sd.sparse_decode_split
    monkeypatch.setattr(sd, "sparse_decode_split", lambda **kw: split(**{**kw, "merge_chunk": chunk}))
    with pytest.raises(ValueError, match="merge_chunk"):
        sparse_mla_decode(**{k: v for k, v in inputs.items() if v is not None})


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # the interpreter's numpy cast of 7e4 to fp16
def test_q_conversion_kernel():
    """The kernel that converts a bf16 q to fp16 before the split kernel gives torch's bits, strided q included."""
    from wavemla.kernels.sparse_decode import _q_to_f16

    q = torch.randn(3, 2, 20, 512, device=DEVICE).to(torch.bfloat16) * 300
    q[0, 0, 0, :4] = torch.tensor([float("inf"), float("-inf"), 7e4, -1e-8])
    for x in (q, q.transpose(1, 2)):
        got = _q_to_f16(x, pdl=False)
        assert got.dtype == torch.float16 and got.shape == x.shape and got.is_contiguous()
        assert torch.equal(got, x.to(torch.float16))


@pytest.mark.parametrize("block_n", [32, 64])
def test_bf16_q_converted_before_the_split_kernel(block_n, monkeypatch):
    """64-head plans of 3+ tiles per program get a bf16 q converted by a kernel ahead of the split kernel (on sm_90+
    the split kernel launches behind it and prefetches its first tile before waiting for q): the same bits as an
    fp16 q passed straight in."""
    import wavemla.kernels.sparse_decode as sd
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=3, s_q=1, h_q=16, topk=64, page=32, extra_topk=96, extra_page=16, fp8=True, dtype=torch.bfloat16,
        device=DEVICE, seed=8,
    )  # fmt: skip
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    meta, _ = get_mla_metadata()
    forced = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=block_n, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1)
    with config.override(**forced, WAVEMLA_TARGET_CTAS=2 if block_n == 64 else 4):
        out, lse = check_bf16_q(inputs, meta)
        assert meta.plan is not None and meta.plan.units_per_part >= 3 and not meta.plan.q_scratch
        split = sd.sparse_decode_split
        monkeypatch.setattr(sd, "sparse_decode_split", lambda **kw: split(**{**kw, "q": kw["q"].half()}))
        out2, lse2 = sparse_mla_decode(**kwargs, metadata=meta)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)


@pytest.mark.parametrize("splits", [18, 3], ids=["wide-merge", "loop-merge"])
def test_combine_merges_many_and_few_pieces(splits):
    """18 one-tile pieces per token go to the combine kernel that loads every piece at once; 3 pieces to the one
    that loops over them in slot order (16-row tiles: 8 + 10 tiles per token)."""
    from wavemla import get_mla_metadata
    from wavemla.kernels.combine import _WIDE_FROM_PIECES

    inputs = make_sparse_decode_inputs(
        batch=2, s_q=2, h_q=16, topk=128, page=32, extra_topk=160, extra_page=16, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=8,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    knobs = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_SPLITS=splits)
    with config.override(**knobs):
        check(inputs, metadata=meta)
    p = meta.plan
    assert p is not None and p.n_tiles == 18 and p.needs_combine and not p.merge_in_kernel
    bound = (p.n_tiles + p.units_per_part - 2) // p.units_per_part + 1
    assert (bound >= _WIDE_FROM_PIECES) == (splits == 18), bound


def _base(**kw):
    args = dict(batch=2, h_q=16, topk=40, page=32, extra_topk=40, extra_page=16, fp8=True, dtype=SMALL_DTYPE)
    args.update(kw)
    return make_sparse_decode_inputs(**args, device=DEVICE, seed=3)


def test_all_indices_invalid_gives_zero_and_inf_lse():
    inputs = _base()
    inputs["indices"].fill_(-1)
    inputs["extra_indices"].fill_(-1)
    out, lse = check(inputs)
    assert torch.all(out == 0) and torch.all(torch.isinf(lse) & (lse > 0))


@pytest.mark.parametrize("bad", [-(2**31), -1, "slots", 2**31 - 1], ids=["int32min", "minus1", "slots", "int32max"])
def test_out_of_range_indices_are_ignored(bad):
    inputs = _base()
    kv = inputs["kv_cache"]
    value = kv.shape[0] * kv.shape[1] if bad == "slots" else bad
    inputs["indices"][:, :, ::3] = value
    inputs["extra_indices"][:, :, 1::4] = value
    check(inputs)


@pytest.mark.parametrize("lengths", [(0, 0), (0, 40), (40, 0), (100, 1000), (7, 33), (-5, 3)], ids=str)
def test_topk_length(lengths):
    inputs = _base()
    b = inputs["q"].shape[0]
    tl_ = torch.tensor([lengths[0]] + [17] * (b - 1), dtype=torch.int32, device=DEVICE)
    xl = torch.tensor([lengths[1]] * b, dtype=torch.int32, device=DEVICE)
    check(inputs, topk_length=tl_, extra_topk_length=xl)


@pytest.mark.parametrize("sink", [float("inf"), float("-inf"), 30.0], ids=["plus-inf", "minus-inf", "large"])
def test_sink_extremes(sink):
    inputs = _base()
    inputs["attn_sink"] = torch.full_like(inputs["attn_sink"], sink)
    inputs["attn_sink"][0] = 0.5
    out, _ = check(inputs)
    if sink == float("inf"):
        assert torch.all(out[:, :, 1:] == 0)


def test_no_sink_and_custom_scale():
    inputs = _base()
    inputs["attn_sink"] = None
    check(inputs, softmax_scale=0.02)


def test_bf16_rows_nan_poison_does_not_leak():
    """Unused rows of a row cache are NaN; the kernel must never touch them."""
    inputs = make_sparse_decode_inputs(
        batch=2,
        h_q=16,
        topk=40,
        page=16,
        extra_topk=24,
        extra_page=8,
        fp8=False,
        dtype=SMALL_DTYPE,
        device=DEVICE,
        seed=4,
    )
    assert torch.isnan(inputs["kv_cache"]).any()
    out, lse = check(inputs)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()


def test_duplicate_indices_count_twice():
    inputs = _base(extra_topk=0)
    inputs.pop("extra_kv_cache", None)
    inputs.pop("extra_indices", None)
    inputs["indices"][:, :, 20:] = inputs["indices"][:, :, :20]
    check(inputs)


def test_fp8_codec_dequantized_rows_equal_reference_rows():
    """The kernel's FP8 decode is exact: an FP8 cache and the same rows stored as fp16 give the same result (both
    compute in fp16, so only summation order can differ)."""
    inputs = _base(extra_topk=0)
    rows = torch.randn(8, 32, 1, 512)
    cache = quantize_model1(rows).to(DEVICE)
    from wavemla.reference import dequantize_model1

    as_rows = dequantize_model1(cache, torch.float16)
    q = inputs["q"].to(torch.float16)
    idx = torch.randint(0, 256, inputs["indices"].shape, dtype=torch.int32, device=DEVICE)
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1):
        a, la = sparse_mla_decode(q, cache, idx)
        b, lb = sparse_mla_decode(q, as_rows, idx)
    assert_close("lse", la, lb, TOLERANCES[("lse", LANE)])
    assert_close("out", a, b, TOLERANCES[("out", LANE)])


def test_deterministic_bits():
    inputs = _base()
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    with config.override(WAVEMLA_NUM_SPLITS=2):
        a = sparse_mla_decode(**kwargs)
        b = sparse_mla_decode(**kwargs)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("splits", [1, 3])
def test_fp8_decode_paths_give_identical_bits(splits):
    """The hardware e4m3 conversion and the bit-assembly decode produce the same fp16 rows, hence the same bits
    (on the GPU lane this compares the two instruction sequences; on sm_80/86 only the bit path exists)."""
    if gpu_lacks_e4m3_cvt():
        pytest.skip("no e4m3 conversion before sm_89")
    kwargs = {k: v for k, v in _base().items() if v is not None}
    with config.override(WAVEMLA_NUM_SPLITS=splits, WAVEMLA_FP8_DECODE="bits"):
        a = sparse_mla_decode(**kwargs)
    with config.override(WAVEMLA_NUM_SPLITS=splits, WAVEMLA_FP8_DECODE="cvt"):
        b = sparse_mla_decode(**kwargs)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# Staged FP8 tiles (num_stages > 1): index entries a chunk at a time, raw rows staged by Triton's pipeliner, a row's
# seven nope blocks apart (kernels/sparse_decode.py, _attend_tiles_staged)
STAGED = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=3)
STAGED_CASES = [
    pytest.param(dict(batch=2, h_q=16, topk=64, page=64), STAGED, id="h16-p64"),
    pytest.param(
        dict(batch=3, h_q=20, topk=40, page=61, extra_topk=50, extra_page=69, invalid_fraction=0.3),
        STAGED,
        id="h20-p61-x69-invalid",
    ),
    # a list past one chunk of index entries (16 tiles of 32), tokens cut between programs (the combine merges them)
    pytest.param(
        dict(batch=2, s_q=2, h_q=16, topk=40, page=16, extra_topk=600, extra_page=2),
        {**STAGED, "WAVEMLA_TARGET_CTAS": 7},
        id="s2-x600-cut",
    ),
    pytest.param(
        dict(batch=2, h_q=16, topk=48, page=32, extra_topk=80, extra_page=16),
        {**STAGED, "WAVEMLA_BLOCK_N": 16, "WAVEMLA_NUM_STAGES": 2, "WAVEMLA_NUM_SPLITS": 3},
        id="16x16x4x2-split",
    ),
]


@pytest.mark.parametrize("shape, knobs", STAGED_CASES)
def test_fp8_staged_tiles_match_reference(shape, knobs):
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(**shape, fp8=True, dtype=SMALL_DTYPE, device=DEVICE, seed=21)
    if shape["batch"] == 3:  # per-request lengths, one of them empty
        inputs["topk_length"] = torch.tensor([40, 0, 17], dtype=torch.int32, device=DEVICE)
        inputs["extra_topk_length"] = torch.tensor([3, 50, 0], dtype=torch.int32, device=DEVICE)
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        check(inputs, metadata=meta)
    assert meta.plan is not None and meta.plan.config.num_stages == knobs["WAVEMLA_NUM_STAGES"]


def test_fp8_staged_tiles_need_8_byte_aligned_pages(monkeypatch):
    """Staged tiles load a row's scale bytes as one 8-byte word, so a cache whose pages start only 2-byte aligned (as
    the API allows) runs the register-decoded tile at the same plan: right outputs either way."""
    import wavemla.kernels.sparse_decode as sd

    inputs = make_sparse_decode_inputs(
        batch=2, h_q=16, topk=64, page=16, extra_topk=40, extra_page=4, fp8=True, dtype=SMALL_DTYPE, device=DEVICE,
        seed=23,
    )  # fmt: skip
    kv = inputs["kv_cache"]
    nb, page = kv.shape[0], kv.shape[1]
    stride0 = page * 584 + 2  # even (the API's bound), not a multiple of 8
    buf = torch.zeros(2 + nb * stride0, dtype=kv.dtype, device=DEVICE)
    odd = buf[2:].as_strided(kv.shape, (stride0, 584, 584, 1))
    odd.copy_(kv)
    stages = []
    kernel = sd._sparse_mla_decode_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(**kw):
                stages.append(kw["NUM_STAGES"])
                return kernel[grid](**kw)

            return launch

    monkeypatch.setattr(sd, "_sparse_mla_decode_kernel", Spy())
    # every launch through Triton's path and so through the spy: a replay of the first call's launches would take
    # the compiled kernel and not the spy, which it cannot record (it has no JIT function)
    with config.override(**STAGED, WAVEMLA_LAUNCH="triton"):
        check(inputs)
        check({**inputs, "kv_cache": odd})
    assert stages == [3, 1]


def test_fp8_staged_decodes_give_the_same_bits():
    """Staged FP8 tiles decode e4m3 by the hardware conversion (the value) or by bit assembly (the value x 2^-8), and
    rescale by the matching power of two: the same scores, weights and outputs, bit for bit."""
    if gpu_lacks_e4m3_cvt():
        pytest.skip("no e4m3 conversion before sm_89")
    inputs = make_sparse_decode_inputs(
        batch=2, s_q=2, h_q=16, topk=40, page=16, extra_topk=70, extra_page=4, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=22,
    )  # fmt: skip
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    got = []
    for decode in ("bits", "cvt"):
        with config.override(**STAGED, WAVEMLA_NUM_SPLITS=2, WAVEMLA_FP8_DECODE=decode):
            got.append(sparse_mla_decode(**kwargs))
    assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])


# --- GPU lane: production shapes and dtypes --------------------------------------------------------------------

GPU_CASES = [
    pytest.param(dict(batch=8, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048), id="csa"),
    pytest.param(dict(batch=4, h_q=64, topk=128, page=256, extra_topk=1024, extra_page=2), id="hca-b4"),
    pytest.param(dict(batch=5, s_q=2, h_q=128, topk=128, page=256, extra_topk=512, extra_page=64), id="csa-s2-h128"),
    pytest.param(dict(batch=3, h_q=16, topk=128, page=256, extra_topk=512, extra_page=64), id="csa-h16"),
    pytest.param(dict(batch=67, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=999), id="b67"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "bf16"])
@pytest.mark.parametrize("shape", GPU_CASES)
def test_gpu_dsv4_shapes(shape, fp8):
    inputs = make_sparse_decode_inputs(**shape, fp8=fp8, dtype=torch.bfloat16, device="cuda", seed=5)
    check(inputs)


@pytest.mark.gpu
def test_gpu_cuda_graph_replay_matches_eager():
    inputs = make_sparse_decode_inputs(
        batch=16, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, fp8=True, device="cuda", seed=6
    )
    from wavemla import get_mla_metadata

    meta, _ = get_mla_metadata()
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    eager = sparse_mla_decode(**kwargs, metadata=meta)
    graph, captured = capture_graph(lambda: sparse_mla_decode(**kwargs, metadata=meta))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured[0], eager[0]) and torch.equal(captured[1], eager[1])


@pytest.mark.parametrize(
    ("is_fp8", "block_h", "block_n", "on"),
    [
        (True, 64, 64, True),  # h=64/128, s_q 1 and 2: 5-9% faster on the H200
        (True, 16, 32, True),  # h=16: 7% faster at b=96
        (True, 16, 16, True),
        (True, 64, 32, False),  # 2-3% slower
        (False, 64, 64, False),  # row caches: not measured
        (False, 16, 32, False),
    ],
)
def test_l2_policies_follow_the_measured_rule(is_fp8, block_h, block_n, on):
    from wavemla.kernels.sparse_decode import l2_policies

    assert l2_policies(is_fp8, block_h, block_n) is on


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        # launches: FP8 64x64, FP8 64x32, FP8 16x32, bf16 rows 64x64
        ("auto", (True, False, True, False)),
        ("on", (True, True, True, True)),
        ("off", (False, False, False, False)),
    ],
)
def test_l2_policies_knob_decides_the_launch(choice, expected):
    from wavemla.kernels.sparse_decode import launch_l2_policies

    launches = [(True, 64, 64), (True, 64, 32), (True, 16, 32), (False, 64, 64)]
    with config.override(WAVEMLA_L2_POLICIES=choice):
        assert tuple(launch_l2_policies(*launch) for launch in launches) == expected


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [64, 32], ids=["64-row", "32-row"])
def test_gpu_l2_policies_knob_keeps_the_bits(block_n):
    """The policies change where lines live in L2, not the arithmetic: on and off give the same bits (the
    interpreter has no L2 policies, so this runs on the GPU only)."""
    inputs = make_sparse_decode_inputs(batch=3, h_q=64, topk=128, page=64, extra_topk=128, extra_page=16,
                                       extra_pool=256, fp8=True, device=DEVICE, seed=3)  # fmt: skip
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    results = []
    for choice in ("on", "off"):
        with config.override(WAVEMLA_L2_POLICIES=choice, WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=block_n):
            results.append(sparse_mla_decode(**kwargs))
    (o_on, lse_on), (o_off, lse_off) = results
    assert torch.equal(o_on, o_off) and torch.equal(lse_on, lse_off)


@pytest.mark.parametrize(
    ("is_fp8", "block_n", "on"),
    [(True, 64, True), (True, 32, False), (True, 16, False), (False, 64, False)],
    ids=["fp8-64", "fp8-32", "fp8-16", "rows-64"],
)
def test_l2_prefetch_follows_the_measured_rule(is_fp8, block_n, on):
    """The next tile's rows go to L2 ahead of their gather in FP8 tiles of more than 32 rows (measured faster on the
    H200); 32-row tiles prefetch their raw rows into registers instead."""
    from wavemla.kernels.sparse_decode import l2_prefetch_next

    assert l2_prefetch_next(is_fp8, block_n) is on


@pytest.mark.parametrize(
    ("is_fp8", "block_h", "arch", "on"),
    [(True, 64, 90, True), (True, 64, 100, False), (True, 64, 120, False), (True, 64, 80, False),
     (True, 16, 90, False), (False, 64, 90, False)],
)  # fmt: skip
def test_p_scratch_only_on_hopper_64_head_fp8_tiles(is_fp8, block_h, arch, on, monkeypatch):
    """P goes through scratch rows where it was measured faster (sm_90, warpgroup MMA, FP8 64-head tiles): the grid
    times one tile's P and its rescale factors, in fp16 elements."""
    import wavemla.kernels.sparse_decode as sd

    monkeypatch.setattr(sd, "device_arch", lambda device: arch)
    expected = 3 * (block_h * 64 + 2 * block_h) if on else 0
    assert sd.p_scratch_elems(is_fp8, block_h, 64, 3, "cuda:0") == expected


def test_p_scratch_used_by_the_interpreter():
    """Under the interpreter the path runs on the CPU (its tests), for FP8 64-head tiles only."""
    from wavemla.device import triton_interpreting
    from wavemla.kernels.sparse_decode import p_scratch_elems

    assert p_scratch_elems(True, 64, 32, 2, "cpu") == (2 * (64 * 32 + 128) if triton_interpreting() else 0)
    assert p_scratch_elems(False, 64, 32, 2, "cpu") == 0


@pytest.mark.parametrize("block_n", [64, 32], ids=["64-row", "32-row"])
@pytest.mark.parametrize("splits", [1, 3], ids=["whole", "split"])
def test_p_through_scratch_rows_matches_reference(block_n, splits):
    """64-head FP8 tiles pass P and the rescale factors to the PV dot through per-program scratch rows (on sm_90
    and under the interpreter): the result matches the reference, whole and cut tokens, and repeats bit for bit."""
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=3, h_q=64, topk=96, page=64, extra_topk=160, extra_page=16, extra_pool=320, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=11,
    )  # fmt: skip
    knobs = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=block_n, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)
    with config.override(**knobs, WAVEMLA_NUM_SPLITS=splits):
        meta, _ = get_mla_metadata()
        out, lse = check(inputs, metadata=meta)
        uses = meta.p_ws is not None
        out2, lse2 = check(inputs, metadata=meta)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    if not HAS_CUDA:
        assert uses


def test_p_scratch_argument_checked():
    """The launcher refuses a scratch too small or of another dtype, naming the argument."""
    from wavemla.kernels.sparse_decode import sparse_decode_split

    with pytest.raises(ValueError, match="p_ws"):
        sparse_decode_split(
            q=torch.zeros(1, 1, 64, 512), out=torch.zeros(1), lse=torch.zeros(1), o_ws=None, lse_ws=None,
            counts=None, kv=torch.zeros(1), indices=torch.zeros(1, 1, 64, dtype=torch.int32), topk_length=None,
            extra_kv=None, extra_indices=None, extra_topk_length=None, attn_sink=None, is_fp8=True,
            softmax_scale=0.1, block_h=64, block_n=64, num_warps=8, num_stages=1, units_per_part=1, num_parts=1,
            p_ws=torch.zeros(10, dtype=torch.float16),
        )  # fmt: skip


def test_extra_cache_without_its_indices_refused():
    """The launcher refuses an extra cache given without extra indices, naming the argument."""
    from wavemla.kernels.sparse_decode import sparse_decode_split

    with pytest.raises(ValueError, match="extra_indices"):
        sparse_decode_split(
            q=torch.zeros(1, 1, 16, 512, dtype=torch.float16), out=torch.zeros(1), lse=torch.zeros(1), o_ws=None,
            lse_ws=None, counts=None, kv=torch.zeros(1, 64, 1, 512, dtype=torch.float16),
            indices=torch.zeros(1, 1, 64, dtype=torch.int32), topk_length=None,
            extra_kv=torch.zeros(1, 64, 1, 512, dtype=torch.float16), extra_indices=None, extra_topk_length=None,
            attn_sink=None, is_fp8=False, softmax_scale=0.1, block_h=16, block_n=32, num_warps=4, num_stages=1,
            units_per_part=1, num_parts=1,
        )  # fmt: skip


def _spread_parts(tokens: int, n_tiles: int, parts: int) -> tuple[int, int]:
    """(units of the leftover tokens a part runs, units of whole tokens after them) of a spread partition."""
    whole, left = divmod(tokens, parts)
    return -(-left * n_tiles // parts), whole * n_tiles


SPREAD = [
    pytest.param(16, False, 5, 4, id="16-row-tiles-combine-5-tokens-4-parts"),  # 1 leftover token, 1 whole a part
    pytest.param(16, False, 10, 4, id="16-row-tiles-combine-10-tokens-4-parts"),  # 2 leftover, 2 whole a part
    pytest.param(64, True, 7, 3, id="64-row-tiles-merged-in-kernel-7-tokens-3-parts"),
]


@pytest.mark.parametrize(("block_n", "merge_in_kernel", "tokens", "parts"), SPREAD)
def test_spread_partition_matches_reference(block_n: int, merge_in_kernel: bool, tokens: int, parts: int) -> None:
    """Whole tokens first, the leftover spread (``whole_units``): every part runs a run of the first tokens' tiles,
    then whole tokens; the cut tokens are merged by the combine kernel over them alone (16-row tiles) or in the split
    kernel (64-row tiles, which also leaves the counters zero). Query tokens of two positions, so cut tokens and
    whole ones share requests."""
    _check_spread(block_n, merge_in_kernel, tokens, parts, s_q=1 if tokens % 2 else 2, seed=11)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.integers(2, 6),
    whole=st.integers(1, 2),
    left_share=st.floats(0.0, 1.0),
    wide=st.booleans(),
    two_positions=st.booleans(),
    lengths=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_spread_partition_any_leftover(
    parts: int, whole: int, left_share: float, wide: bool, two_positions: bool, lengths: bool, seed: int
) -> None:
    """Any number of leftover tokens (1 .. parts - 1, the planner takes at most 128), 1 or 2 whole tokens a part, both
    merges, per-request list lengths from 0 up and a tenth of the entries invalid: the reference's answer."""
    left = 1 + round(left_share * (parts - 2))
    tokens = whole * parts + left
    s_q = 2 if two_positions and tokens % 2 == 0 else 1
    _check_spread(64 if wide else 16, wide, tokens, parts, s_q=s_q, seed=seed, lengths=lengths, invalid=0.1)


def _check_spread(
    block_n: int, merge_in_kernel: bool, tokens: int, parts: int, *, s_q: int, seed: int, lengths: bool = False,
    invalid: float = 0.0,
) -> None:  # fmt: skip
    """The split kernel on a spread partition of ``tokens`` query tokens over ``parts`` parts (then the combine over
    the cut tokens, unless ``merge_in_kernel``) against the fp64 reference. ``lengths``: random per-request list
    lengths for both lists."""
    from wavemla.plan import spread_slots

    def spread(n_tiles: int) -> tuple[dict[str, int], int, int, int]:
        upp, whole_units = _spread_parts(tokens, n_tiles, parts)
        cut = tokens - parts * (whole_units // n_tiles)
        rows = spread_slots(cut - 1, n_tiles, upp)[1] + 1
        return dict(units_per_part=upp, num_parts=parts, whole_units=whole_units), rows, cut, n_tiles

    _check_partition(block_n, merge_in_kernel, tokens, spread, s_q=s_q, seed=seed, topk=64, extra_topk=96,
                     lengths=lengths, invalid=invalid)  # fmt: skip


def _check_partition(
    block_n: int, merge_in_kernel: bool, tokens: int, partition: Any, *, s_q: int, seed: int, topk: int,
    extra_topk: int, lengths: bool = False, invalid: float = 0.0,
) -> None:  # fmt: skip
    """The split kernel on ``tokens`` query tokens of 16 heads (FP8 rows, ``topk`` + ``extra_topk`` entries), then the
    combine (unless ``merge_in_kernel``, which must leave the counters zero), against the fp64 reference.
    ``partition(n_tiles)`` gives the split kernel's partition keywords, the workspace rows, the tokens the combine
    merges (the first ones; 0: none cut) and the units a token occupies. ``lengths``: random per-request list lengths
    for both lists."""
    from wavemla.kernels.combine import sparse_decode_combine
    from wavemla.kernels.sparse_decode import sparse_decode_split

    h, b = 16, tokens // s_q
    inputs = make_sparse_decode_inputs(
        batch=b, s_q=s_q, h_q=h, topk=topk, page=32, extra_topk=extra_topk, extra_page=16, fp8=True,
        dtype=SMALL_DTYPE, device=DEVICE, seed=seed, invalid_fraction=invalid,
    )  # fmt: skip
    inputs = {k: inputs.get(k) for k in ("q", "kv_cache", "indices", "topk_length", "extra_kv_cache", "extra_indices",
                                          "extra_topk_length", "attn_sink")}  # fmt: skip
    if lengths:
        g = torch.Generator().manual_seed(seed)
        inputs["topk_length"] = torch.randint(0, topk + 1, (b,), generator=g, dtype=torch.int32).to(DEVICE)
        inputs["extra_topk_length"] = torch.randint(0, extra_topk + 1, (b,), generator=g, dtype=torch.int32).to(DEVICE)
    q, kv, kv_x = inputs["q"], inputs["kv_cache"], inputs["extra_kv_cache"]
    assert q is not None and kv is not None and kv_x is not None
    split_kw, rows, cut, token_units = partition(-(-topk // block_n) - (-extra_topk // block_n))
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=DEVICE)
    o_ws = torch.full((rows, h, 512), float("nan"), dtype=torch.float16, device=DEVICE)
    lse_ws = torch.full((rows, h), float("nan"), dtype=torch.float32, device=DEVICE)
    counts = torch.zeros(tokens * 2, dtype=torch.int32, device=DEVICE)
    sparse_decode_split(
        q=q, out=out, lse=lse, o_ws=o_ws, lse_ws=lse_ws, counts=counts, kv=kv.view(torch.uint8),
        indices=inputs["indices"], topk_length=inputs["topk_length"], extra_kv=kv_x.view(torch.uint8),
        extra_indices=inputs["extra_indices"], extra_topk_length=inputs["extra_topk_length"],
        attn_sink=inputs["attn_sink"], is_fp8=True, softmax_scale=512**-0.5, block_h=h, block_n=block_n,
        num_warps=4, num_stages=1, merge_in_kernel=merge_in_kernel, **split_kw,
    )  # fmt: skip
    if not merge_in_kernel and cut:
        sparse_decode_combine(
            out=out.view(tokens, 1, h, 512)[:cut], lse=lse.view(tokens, 1, h)[:cut], o_ws=o_ws, lse_ws=lse_ws,
            attn_sink=inputs["attn_sink"], n_tiles=token_units, units_per_part=split_kw["units_per_part"],
        )  # fmt: skip
    else:
        assert int(counts.abs().sum()) == 0
    ref_out, ref_lse = sparse_decode_ref(
        q, kv, inputs["indices"], topk_length=inputs["topk_length"], extra_kv_cache=inputs["extra_kv_cache"],
        extra_indices=inputs["extra_indices"], extra_topk_length=inputs["extra_topk_length"],
        attn_sink=inputs["attn_sink"], softmax_scale=512**-0.5,
    )  # fmt: skip
    assert_close("out", out, ref_out, TOLERANCES[("out", LANE)])
    assert_close("lse", lse.transpose(1, 2), ref_lse, TOLERANCES[("lse", LANE)])


@pytest.mark.parametrize("whole_units", [-10, 5, 30])
def test_spread_partition_arguments_checked(whole_units: int) -> None:
    """``whole_units`` must be whole tokens that leave at most ``num_parts · units_per_part`` units to cut."""
    from wavemla.kernels.sparse_decode import sparse_decode_split

    inputs = _base(batch=5)
    q = inputs["q"]
    assert q is not None
    with pytest.raises(ValueError, match="whole_units"):
        sparse_decode_split(
            q=q, out=torch.empty_like(q), lse=torch.empty(q.shape[:3], device=DEVICE), o_ws=None, lse_ws=None,
            counts=None, kv=inputs["kv_cache"].view(torch.uint8), indices=inputs["indices"], topk_length=None,
            extra_kv=None, extra_indices=None, extra_topk_length=None, attn_sink=None, is_fp8=True,
            softmax_scale=0.1, block_h=16, block_n=16, num_warps=4, num_stages=1, units_per_part=1, num_parts=4,
            whole_units=whole_units,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("batch", "ctas", "seed", "expect"),
    [
        # one whole token a program after a 3-tile run of the first token, the only one cut
        pytest.param(
            5,
            4,
            12,
            dict(units_per_part=3, whole_units=10, token_units=0, num_parts=4, rows=4, segments=2),
            id="spread",
        ),
        # each token padded to 12 units and cut into 4 pieces of at most 3 tiles, one a program
        pytest.param(
            2,
            8,
            13,
            dict(units_per_part=3, whole_units=0, token_units=12, num_parts=8, rows=10, segments=1),
            id="padded",
        ),
    ],
)
def test_spread_and_padded_plans_through_the_api(batch: int, ctas: int, seed: int, expect: dict[str, int]) -> None:
    """Plans that spread the leftover token and that pad tokens (CSA h=64 on an H200's plan, ``ctas`` program slots
    forced) against the reference, twice on one metadata object with the same bits (the counters left zero). On an
    H200 the warp-specialized kernel runs them and the combine kernel merges the cut tokens; elsewhere the Triton
    kernel, merging them itself. The planner takes these plans for the warp-specialized kernel's costs, which it
    prices only where Gluon is present (Triton 3.6 and newer)."""
    from wavemla import get_mla_metadata
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.HAVE_GLUON:
        pytest.skip("the H200 plans these shapes for the warp-specialized kernel, which needs Gluon (Triton >= 3.6)")

    inputs = make_sparse_decode_inputs(
        batch=batch, h_q=64, topk=128, page=64, extra_topk=512, extra_page=64, extra_pool=600, fp8=True,
        dtype=SMALL_DTYPE, device=DEVICE, seed=seed,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    with config.override(WAVEMLA_TARGET_CTAS=ctas, WAVEMLA_GPU="h200"):
        first = check(inputs, metadata=meta)
        p = meta.plan
        assert p is not None
        got = {k: getattr(p, k) for k in ("units_per_part", "whole_units", "token_units", "num_parts")}
        got.update(rows=p.workspace_rows(batch), segments=p.segments_per_program)
        assert got == expect
        assert meta.counts is not None and int(meta.counts.abs().sum()) == 0
        again = check(inputs, metadata=meta)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


@pytest.mark.parametrize(
    ("knobs", "batch", "s_q", "ctas", "expect"),
    [
        # staged 16x32 tiles (5 a token), 6 query tokens over 4 parts: 1 whole token, then 2 leftover ones
        pytest.param(STAGED, 3, 2, 4, dict(units_per_part=3, whole_units=5, num_parts=4), id="staged-16x32-combine"),
        # 16x32 register tiles, q through the scratch rows, 7 tokens over 3 parts: 2 whole tokens, then 1 leftover
        pytest.param(
            dict(STAGED, WAVEMLA_NUM_STAGES=1),
            7,
            1,
            3,
            dict(units_per_part=2, whole_units=10, num_parts=3, q_scratch=True),
            id="16x32-q-scratch",
        ),
    ],
)
def test_spread_planned_for_the_triton_kernel(knobs, batch, s_q, ctas, expect):
    """The planner's spread for the Triton split kernel (16 heads, ``ctas`` slots forced; the combine kernel merges
    the leftover tokens): the reference's answer, twice on one metadata object with the same bits."""
    from wavemla import get_mla_metadata

    inputs = make_sparse_decode_inputs(
        batch=batch, s_q=s_q, h_q=16, topk=64, page=32, extra_topk=96, extra_page=16, fp8=True, dtype=SMALL_DTYPE,
        device=DEVICE, seed=batch,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    with config.override(**knobs, WAVEMLA_TARGET_CTAS=ctas, WAVEMLA_GPU="h100"):
        first = check(inputs, metadata=meta)
        p = meta.plan
        assert p is not None and p.n_tiles == 5  # 64 + 96 rows
        assert {k: getattr(p, k) for k in expect} == expect and not p.merge_in_kernel
        again = check(inputs, metadata=meta)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


# Padded tokens (``token_units``): each token's tiles, then empty units up to a multiple of the part size, so every
# program runs one piece of one token. 64 + 200 index entries: 17 tiles of 16 rows, 5 of 64.
_PAD_TOPK, _PAD_EXTRA = 64, 200


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.integers(2, 17),
    wide=st.booleans(),
    tokens=st.integers(1, 4),
    two_positions=st.booleans(),
    lengths=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_padded_partition_matches_reference(
    pieces: int, wide: bool, tokens: int, two_positions: bool, lengths: bool, seed: int
) -> None:
    """Tokens cut into ``pieces`` pieces of ``ceil(n_tiles / pieces)`` tiles (padded with empty units where that does
    not divide the tiles; where it does, the uniform partition of that size), merged by the combine kernel (16-row
    tiles) or in the split kernel (64-row tiles, which leaves the counters zero), with per-request list lengths from
    0 up and a tenth of the entries invalid: the reference's answer."""
    block_n = 64 if wide else 16
    n_tiles = -(-_PAD_TOPK // block_n) - (-_PAD_EXTRA // block_n)
    upp = -(-n_tiles // min(pieces, n_tiles))
    span = -(-n_tiles // upp) * upp
    s_q = 2 if two_positions and tokens % 2 == 0 else 1
    _check_padded(block_n, wide, tokens, upp, span if n_tiles % upp else 0, s_q=s_q, seed=seed, lengths=lengths,
                  invalid=0.1)  # fmt: skip


def test_padded_partition_at_the_sizes_the_planner_offers() -> None:
    """Every padded size of a 17-tile token (16-row tiles: 3 pieces of 6, 4 of 5, 5 of 4, 6 of 3, 9 of 2) and of a
    5-tile one (64-row tiles: 2 pieces of 3), three tokens of one position."""
    for upp in (6, 5, 4, 3, 2):
        _check_padded(16, False, 3, upp, -(-17 // upp) * upp, s_q=1, seed=upp)
    _check_padded(64, True, 3, 3, 6, s_q=1, seed=7)


def _check_padded(
    block_n: int, merge_in_kernel: bool, tokens: int, upp: int, token_units: int, *, s_q: int, seed: int,
    lengths: bool = False, invalid: float = 0.0,
) -> None:  # fmt: skip
    """The split kernel with ``upp`` units a part over tokens padded to ``token_units`` (0: not padded), then the
    combine (unless ``merge_in_kernel``), against the fp64 reference; the workspace rows are the plan's count."""

    def padded(n_tiles: int) -> tuple[dict[str, int], int, int, int]:
        span = token_units or n_tiles
        parts = -(-tokens * span // upp)
        cut = tokens if upp < n_tiles else 0
        split_kw = dict(units_per_part=upp, num_parts=parts, token_units=token_units)
        return split_kw, tokens + (parts if cut else 0), cut, span

    _check_partition(block_n, merge_in_kernel, tokens, padded, s_q=s_q, seed=seed, topk=_PAD_TOPK,
                     extra_topk=_PAD_EXTRA, lengths=lengths, invalid=invalid)  # fmt: skip


@pytest.mark.parametrize(
    ("upp", "token_units", "others"),
    [(3, 9, {}), (3, 11, {}), (3, 15, {}), (0, 12, {}), (3, 12, {"whole_units": 12}), (3, 12, {"pieces_tiles": 3})],
    ids=["short", "not-a-multiple", "a-part-of-padding", "no-units", "with-spread", "with-pieces"],
)
def test_padded_partition_arguments_checked(upp: int, token_units: int, others: dict[str, int]) -> None:
    """``token_units`` must be a token's 10 tiles padded to a multiple of ``units_per_part`` (by less than one part),
    and excludes batch-invariant pieces and a spread partition."""
    from wavemla.kernels.sparse_decode import sparse_decode_split

    inputs = make_sparse_decode_inputs(
        batch=2, h_q=16, topk=64, page=64, extra_topk=96, extra_page=16, fp8=True, dtype=SMALL_DTYPE, device=DEVICE,
        seed=3,
    )  # fmt: skip
    q = inputs["q"]
    assert q is not None
    with pytest.raises(ValueError, match="token_units"):
        sparse_decode_split(
            q=q, out=torch.empty_like(q), lse=torch.empty(q.shape[:3], device=DEVICE), o_ws=None, lse_ws=None,
            counts=None, kv=inputs["kv_cache"].view(torch.uint8), indices=inputs["indices"], topk_length=None,
            extra_kv=inputs["extra_kv_cache"].view(torch.uint8), extra_indices=inputs["extra_indices"],
            extra_topk_length=None, attn_sink=None, is_fp8=True, softmax_scale=0.1, block_h=16, block_n=16,
            num_warps=4, num_stages=1, units_per_part=upp, num_parts=8, token_units=token_units, **others,
        )  # fmt: skip
