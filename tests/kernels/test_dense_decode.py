"""Paged dense decode vs the fp64 reference: CPU interpreter lane (fp16 rows and FP8 V3.2, small shapes) and GPU lane
(bf16 and FP8 at DeepSeek-V3 shapes, CUDA-graph capture). Also: the device scheduler against its Python definition."""

import functools

import pytest
import torch

from tests.conftest import DEVICE, HAS_CUDA
from wavemla import config, dense_mla_decode, flash_mla_with_kvcache, get_mla_metadata
from wavemla.device import device_arch
from wavemla.kernels import dense_decode as dense_decode_kernels
from wavemla.kernels.dense_decode import dense_decode_schedule
from wavemla.plan import dense_schedule
from wavemla.reference import dense_decode_ref
from wavemla.testing import (
    BLOCK_TABLE_PAD,
    TOLERANCES,
    assert_close,
    dense_out_tolerance,
    make_dense_decode_inputs,
)

LANE = "gpu" if HAS_CUDA else "interp"
SMALL_DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16


def check(inputs, *, causal=False, softmax_scale=None, metadata=None):
    """Run the kernel (first, before the reference allocates) and the reference on the same inputs; compare."""
    out, lse = dense_mla_decode(**inputs, causal=causal, softmax_scale=softmax_scale, metadata=metadata)
    ref_out, ref_lse = dense_decode_ref(**inputs, causal=causal, softmax_scale=softmax_scale)
    q = inputs["q"]
    b, s_q, h_q, _ = q.shape
    assert out.dtype == q.dtype and out.shape == (b, s_q, h_q, 512)
    assert lse.dtype == torch.float32 and lse.shape == (b, h_q, s_q)
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
    return out, lse


CASES = [
    pytest.param(dict(lengths=[50, 0, 17], h_q=16, page=16), False, id="B3-H16-p16-len0"),
    pytest.param(dict(lengths=[1, 5], h_q=1, page=1), False, id="B2-H1-p1-len1"),
    pytest.param(dict(lengths=[70, 130], h_q=3, page=61, d_qk=512), False, id="B2-H3-p61-d512"),
    pytest.param(dict(lengths=[100, 1], h_q=64, page=64), False, id="B2-H64-p64"),
    pytest.param(dict(lengths=[65], h_q=128, page=64), False, id="B1-H128-p64"),
    pytest.param(dict(lengths=[1, 0, 300, 2], h_q=16, page=16), False, id="B4-H16-skewed"),
    pytest.param(dict(lengths=[2, 40], s_q=4, h_q=16, page=16), True, id="B2-S4-H16-causal-short"),
    pytest.param(dict(lengths=[33, 9], s_q=3, h_q=3, page=8), True, id="B2-S3-H3-causal"),
    pytest.param(dict(lengths=[33, 9], s_q=2, h_q=16, page=8), False, id="B2-S2-H16-not-causal"),
    pytest.param(dict(lengths=[90, 33], h_q=16, page=64, fp8=True), False, id="B2-H16-p64-fp8"),
    pytest.param(dict(lengths=[3, 70], s_q=2, h_q=16, page=61, fp8=True), True, id="B2-S2-H16-p61-fp8-causal"),
    pytest.param(dict(lengths=[0, 1], h_q=3, page=1, fp8=True), False, id="B2-H3-p1-fp8-len01"),
    # more speculative tokens than MTP's (s_q > 4): every token a causal row of its own; some see no key
    pytest.param(dict(lengths=[40, 3, 0, 129], s_q=8, h_q=3, page=16), True, id="B4-S8-H3-spec-causal"),
    pytest.param(dict(lengths=[70, 5], s_q=6, h_q=16, page=16, fp8="tensor"), True, id="B2-S6-H16-fp8t-causal"),
]


@pytest.mark.parametrize(("shape", "causal"), CASES)
def test_matches_reference(shape, causal):
    inputs = make_dense_decode_inputs(**shape, dtype=SMALL_DTYPE, device=DEVICE, seed=1)
    check(inputs, causal=causal)


# Keys-major 64-row tiles (wgmma on sm_90) and the chunked block ids of the row path, forced through the tile knobs:
# pages that hold whole tiles (64, 128: one block id per tile) and pages that do not (16, 61: one id per key).
KEYS_MAJOR = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2)
KEYS_MAJOR_P3 = {**KEYS_MAJOR, "WAVEMLA_TARGET_CTAS": 3}
N16_P5 = dict(WAVEMLA_BLOCK_N=16, WAVEMLA_TARGET_CTAS=5)
N16_P3 = dict(WAVEMLA_BLOCK_N=16, WAVEMLA_TARGET_CTAS=3)
TILE_CASES = [
    pytest.param(dict(lengths=[150, 0, 17, 64], h_q=64, page=64), False, KEYS_MAJOR, id="km-B4-H64-p64-len0"),
    pytest.param(dict(lengths=[70, 3], s_q=2, h_q=32, page=16, d_qk=512), True, KEYS_MAJOR, id="km-S2-H32-p16-d512"),
    pytest.param(dict(lengths=[130, 61, 1], h_q=3, page=61), False, KEYS_MAJOR, id="km-B3-H3-p61"),
    pytest.param(dict(lengths=[200, 33], s_q=4, h_q=16, page=128), True, KEYS_MAJOR, id="km-S4-H16-p128-causal"),
    pytest.param(dict(lengths=[65, 0], h_q=128, page=64), False, KEYS_MAJOR, id="km-B2-H128-p64"),
    # past one chunk of block ids (CHUNK_TILES tiles of 16 keys = 512 keys), segments starting inside a chunk
    pytest.param(dict(lengths=[1100, 5, 600], h_q=16, page=64), False, N16_P5, id="chunks-B3-H16-p64-n16"),
    pytest.param(dict(lengths=[1100, 530], s_q=2, h_q=8, page=61), True, N16_P3, id="chunks-S2-H8-p61-n16"),
    pytest.param(dict(lengths=[1100, 40], h_q=64, page=64), False, KEYS_MAJOR_P3, id="km-chunks-B2-H64-p64"),
]


@pytest.mark.parametrize(("shape", "causal", "knobs"), TILE_CASES)
def test_tile_paths_match_reference(shape, causal, knobs):
    inputs = make_dense_decode_inputs(**shape, dtype=SMALL_DTYPE, device=DEVICE, seed=11)
    with config.override(**knobs):
        check(inputs, causal=causal)


@pytest.mark.parametrize("knobs", [KEYS_MAJOR, dict(WAVEMLA_BLOCK_H=16)], ids=["keys-major", "rows"])
def test_split_p_matches_reference(knobs, monkeypatch):
    """The two-dot P (bf16(P) + bf16(P - bf16(P)) on bf16 rows), run on fp16 rows here: the interpreter's bf16 dot
    is not real bf16, and the split is the same arithmetic in either 16-bit type."""
    monkeypatch.setattr(dense_decode_kernels, "split_p", lambda is_fp8, dtype: not is_fp8)
    inputs = make_dense_decode_inputs(lengths=[2, 90, 0], s_q=2, h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE,
                                      seed=12)  # fmt: skip
    with config.override(**knobs):
        check(inputs, causal=True)


FP8_ROWS64 = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)


@pytest.mark.parametrize(
    ("fp8", "knobs", "lengths", "seed"),
    [(False, KEYS_MAJOR, [150, 0, 17, 64], 13), (True, FP8_ROWS64, [150, 0, 17, 100], 16)],
    ids=["keys-major", "fp8-64-rows"],
)
def test_p_scratch_rows_match_p_in_registers(fp8, knobs, lengths, seed):
    """Keys-major tiles (Pᵀ) and 64-row FP8 tiles (P) pass the weights to the PV dot through the metadata's scratch
    rows (on sm_90, and under the interpreter); with them removed the kernel keeps P in registers. Both meet the
    reference and agree closely (the two dots of QKᵀ are summed in another order)."""
    inputs = make_dense_decode_inputs(lengths=lengths, s_q=2, h_q=32, page=16, fp8=fp8, dtype=SMALL_DTYPE,
                                      device=DEVICE, seed=seed)  # fmt: skip
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        out, lse = check(inputs, causal=True, metadata=meta)
        if HAS_CUDA and device_arch(DEVICE) != 90:  # the kernels' architecture: TRITON_OVERRIDE_ARCH, else the GPU's
            assert meta.p_ws is None
            return
        # the split kernel's compute dtype: fp16 for FP8 rows, q's for row caches
        assert meta.p_ws is not None and meta.p_ws.dtype == (torch.float16 if fp8 else inputs["q"].dtype)
        bare, _ = get_mla_metadata()
        dense_mla_decode(**inputs, causal=True, metadata=bare)
        bare.p_ws = None
        out_r, lse_r = check(inputs, causal=True, metadata=bare)
    assert (out.float() - out_r.float()).abs().max().item() <= 1e-2 * out_r.float().abs().max().item()
    assert torch.allclose(lse, lse_r, rtol=1e-5, atol=1e-5)


# FP8 V3.2 tiles staged by the pipeliner (num_stages > 1: raw bytes through cp.async, the four 128-wide blocks of a
# row apart, each scale applied to its dot's scores and weights): 16- and 32-row blocks, and 64-row blocks with P
# through scratch rows on sm_90; pages holding whole tiles and pages that do not, past one chunk of block ids.
FP8_STAGED = [
    pytest.param(dict(lengths=[90, 0, 33, 64], h_q=16, page=64), False,
                 dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=3),
                 id="16x32x4x3-p64-len0"),
    pytest.param(dict(lengths=[3, 170], s_q=2, h_q=16, page=61), True,
                 dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_STAGES=2, WAVEMLA_TARGET_CTAS=3),
                 id="16x16x2-S2-p61-causal"),
    pytest.param(dict(lengths=[150, 17], s_q=2, h_q=16, page=16), True,
                 dict(WAVEMLA_BLOCK_H=32, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=3),
                 id="32x32x8x3-S2-p16-causal"),
    pytest.param(dict(lengths=[150, 0, 17, 100], s_q=2, h_q=32, page=16), True,
                 dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2),
                 id="64x32x8x2-S2-p16-causal"),
    pytest.param(dict(lengths=[1100, 5, 600], h_q=8, page=64), False,
                 dict(WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_STAGES=3, WAVEMLA_TARGET_CTAS=5), id="chunks-16x16x3-p64"),
]  # fmt: skip


@pytest.mark.parametrize("fp8", [True, "tensor"], ids=["v32", "per-tensor"])
@pytest.mark.parametrize(("shape", "causal", "knobs"), FP8_STAGED)
def test_fp8_staged_tiles_match_reference(shape, causal, knobs, fp8):
    """Both FP8 formats: the V3.2 rows' per-block scales, and per-tensor rows' one scale (descale_k)."""
    inputs = make_dense_decode_inputs(**shape, fp8=fp8, dtype=SMALL_DTYPE, device=DEVICE, seed=17)
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        check(inputs, causal=causal, metadata=meta)
    assert meta.dense_plan is not None and meta.dense_plan.config.num_stages == knobs["WAVEMLA_NUM_STAGES"]


# Per-tensor FP8 rows (an engine's fp8 KV cache: 576 e4m3 codes a token, one scale as descale_k) along the FP8 tile
# paths the staged cases above do not take: the planner's register-prefetched tiles (pages that hold whole tiles and
# pages that do not, causal MTP, empty requests) and 64-row tiles with P through scratch rows on sm_90.
FP8_TENSOR = [
    pytest.param(dict(lengths=[90, 0, 33], h_q=16, page=64), False, {}, id="planned-p64-len0"),
    pytest.param(dict(lengths=[3, 70], s_q=2, h_q=16, page=61), True, {}, id="planned-S2-p61-causal"),
    pytest.param(dict(lengths=[0, 1], h_q=3, page=1), False, {}, id="planned-H3-p1-len01"),
    pytest.param(dict(lengths=[150, 0, 17, 100], s_q=2, h_q=32, page=16), True, FP8_ROWS64, id="64x32x8x1-S2-p16"),
]


@pytest.mark.parametrize(("shape", "causal", "knobs"), FP8_TENSOR)
def test_fp8_tensor_rows_match_reference(shape, causal, knobs):
    inputs = make_dense_decode_inputs(**shape, fp8="tensor", dtype=SMALL_DTYPE, device=DEVICE, seed=18)
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        check(inputs, causal=causal, metadata=meta)
    if "WAVEMLA_NUM_STAGES" in knobs:
        assert meta.dense_plan is not None and meta.dense_plan.config.num_stages == knobs["WAVEMLA_NUM_STAGES"]


@pytest.mark.parametrize("stages", [1, 3], ids=["registers", "staged"])
def test_fp8_tensor_scale_is_read_on_the_device(stages):
    """The kernel reads descale_k where it lies: a new value written into the same tensor (as an engine that updates
    a layer's k_scale in place, or a CUDA graph replaying after it) gives the reference's answer for that value
    through the same metadata, and equals the call made with a fresh tensor of it."""
    knobs = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=stages)
    inputs = make_dense_decode_inputs(lengths=[70, 5], h_q=16, page=16, fp8="tensor", dtype=SMALL_DTYPE,
                                      device=DEVICE, seed=19)  # fmt: skip
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        check(inputs, metadata=meta)
        inputs["descale_k"].fill_(0.0139)
        out, lse = check(inputs, metadata=meta)
        fresh = dense_mla_decode(**{**inputs, "descale_k": torch.tensor([0.0139], device=DEVICE)})
    assert torch.equal(out, fresh[0]) and torch.equal(lse, fresh[1])


@pytest.mark.parametrize("stages", [1, 3], ids=["registers", "staged"])
@pytest.mark.parametrize("fp8", ["tensor", "v32"])
def test_fp8_q_with_descale_q(fp8, stages):
    """FlashMLA's FP8 q over an FP8 cache: e4m3 codes with their scale as descale_q (not a power of two), converted
    exactly and scaled in the scores; the output is bf16 and meets the reference on q's decoded values."""
    knobs = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=stages)
    inputs = make_dense_decode_inputs(lengths=[70, 0, 33], s_q=2, h_q=16, page=16, fp8=fp8, dtype=SMALL_DTYPE,
                                      device=DEVICE, seed=20)  # fmt: skip
    descale_q = torch.tensor([1 / 300], device=DEVICE)
    inputs["q"] = (inputs["q"].float() / descale_q).to(torch.float8_e4m3fn)
    with config.override(**knobs):
        out, lse = dense_mla_decode(**inputs, descale_q=descale_q, causal=True)
    ref_out, ref_lse = dense_decode_ref(**inputs, descale_q=descale_q, causal=True)
    assert out.dtype == torch.bfloat16 and out.shape == (3, 2, 16, 512)
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE, out.dtype))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])


def test_fp8_staged_decodes_give_the_same_bits(monkeypatch):
    """Staged FP8 tiles decode e4m3 by the hardware conversion (the value) or by bit assembly (the value x 2^-8),
    and rescale by the matching power of two: the same scores, weights and outputs, bit for bit."""
    if HAS_CUDA and device_arch(DEVICE) < 89:
        pytest.skip("no e4m3 conversion before sm_89")
    launch = dense_decode_kernels.dense_decode_split
    inputs = make_dense_decode_inputs(lengths=[90, 33, 0], s_q=2, h_q=16, page=16, fp8=True, dtype=SMALL_DTYPE,
                                      device=DEVICE, seed=18)  # fmt: skip
    got = []
    for cvt in (True, False):
        monkeypatch.setattr(dense_decode_kernels, "dense_decode_split", functools.partial(launch, e4m3_cvt=cvt))
        with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_STAGES=3):
            got.append(dense_mla_decode(**inputs, causal=True))
    assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])


def test_keys_major_rescale_with_rising_scores():
    """Keys-major tiles (with scratch rows for Pᵀ on sm_90 and under the interpreter) over keys whose rope parts are
    scaled up along the sequence (the values stay N(0, 1)), in one part so that one program walks every tile of a
    request: the running maximum moves on every tile, and a rescale of the accumulator that is skipped or applied
    after the tile's PV product fails the reference."""
    lengths = [300, 129, 0]
    inputs = make_dense_decode_inputs(lengths=lengths, h_q=32, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=15)
    cache, table = inputs["k_cache"], inputs["block_table"].cpu()
    for i, n in enumerate(lengths):
        for j in range(n):
            cache[int(table[i, j // 16]), j % 16, :, 512:] *= 1.0 + j / 32
    with config.override(**KEYS_MAJOR, WAVEMLA_TARGET_CTAS=1):
        meta, _ = get_mla_metadata()
        check(inputs, softmax_scale=1.0, metadata=meta)
    assert meta.dense_plan is not None and meta.dense_plan.num_parts == 1


def test_dense_p_knob_may_change_after_planning(monkeypatch):
    """Metadata planned under ``single`` (scratch rows for Pᵀ where the tile uses them) serves a call under
    ``split`` too: that call keeps P in registers and gives the bits of metadata planned under ``split``. On the
    CPU lane the knob is made to reach fp16 rows as it reaches bf16 ones (the interpreter's bf16 dot is not real)."""
    if not HAS_CUDA:
        monkeypatch.setattr(
            dense_decode_kernels,
            "split_p",
            lambda is_fp8, dtype: not is_fp8 and config.get("WAVEMLA_DENSE_P") == "split",
        )
    inputs = make_dense_decode_inputs(lengths=[90, 33], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=14)
    with config.override(**KEYS_MAJOR):
        meta, _ = get_mla_metadata()
        dense_mla_decode(**inputs, metadata=meta)
        if meta.p_ws is None:
            pytest.skip("this device keeps P in registers")
        with config.override(WAVEMLA_DENSE_P="split"):
            out, lse = dense_mla_decode(**inputs, metadata=meta)
            fresh, _ = get_mla_metadata()
            out_f, lse_f = dense_mla_decode(**inputs, metadata=fresh)
    assert torch.equal(out, out_f) and torch.equal(lse, lse_f)


def test_p_scratch_rows_are_checked():
    inputs = make_dense_decode_inputs(lengths=[20], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE)
    meta, _ = get_mla_metadata()
    with config.override(**KEYS_MAJOR):
        dense_mla_decode(**inputs, metadata=meta)
    if meta.p_ws is None:
        pytest.skip("this device keeps P in registers")
    meta.p_ws = meta.p_ws[:-1]
    with config.override(**KEYS_MAJOR), pytest.raises(ValueError, match="p_ws"):
        dense_mla_decode(**inputs, metadata=meta)


@pytest.mark.parametrize(("fp8", "ahead"), [(False, 1), (False, 2), (True, 1), (True, -1)])
def test_l2_ahead_is_checked(monkeypatch, fp8, ahead):
    """The split launcher's L2 prefetch distance: 0, or at least 2 with FP8 rows; anything else names the argument."""
    launch = dense_decode_kernels.dense_decode_split
    monkeypatch.setattr(dense_decode_kernels, "dense_decode_split", functools.partial(launch, l2_ahead=ahead))
    inputs = make_dense_decode_inputs(lengths=[20], h_q=16, page=16, fp8=fp8, dtype=SMALL_DTYPE, device=DEVICE)
    with pytest.raises(ValueError, match="l2_ahead"):
        dense_mla_decode(**inputs)


def test_l2_ahead_default_follows_the_rows():
    assert dense_decode_kernels.l2_ahead_tiles(True) == 2
    assert dense_decode_kernels.l2_ahead_tiles(False) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("ahead", [2, 3, 7])
def test_gpu_fp8_l2_prefetch_keeps_the_bits(monkeypatch, ahead):
    """FP8 rows with the next tiles prefetched into L2 (prefetches past a segment's last tile and across pages
    included): the same bits as without the prefetch."""
    inputs = make_dense_decode_inputs(lengths=[3000, 64 * 5 + 3, 0, 129], h_q=64, page=64, fp8=True, device="cuda",
                                      seed=12)  # fmt: skip
    launch = dense_decode_kernels.dense_decode_split
    monkeypatch.setattr(dense_decode_kernels, "dense_decode_split", functools.partial(launch, l2_ahead=0))
    out0, lse0 = dense_mla_decode(**inputs)
    monkeypatch.setattr(dense_decode_kernels, "dense_decode_split", functools.partial(launch, l2_ahead=ahead))
    out, lse = dense_mla_decode(**inputs)
    assert torch.equal(out, out0) and torch.equal(lse, lse0)


def test_poison_and_padding_are_present():
    """The inputs the tests use do hold NaN past every length and huge block-table padding."""
    rows = make_dense_decode_inputs(lengths=[5, 20], page=16, dtype=SMALL_DTYPE)
    assert torch.isnan(rows["k_cache"]).any() and (rows["block_table"] == BLOCK_TABLE_PAD).any()
    fp8 = make_dense_decode_inputs(lengths=[5, 20], page=16, fp8=True)
    assert (fp8["k_cache"] == 0xFF).any()


@pytest.mark.parametrize("slots", [1, 3, 7, 40], ids=lambda s: f"slots{s}")
def test_split_and_combine(slots):
    """One part (no combine), few parts (requests cut and parts spanning requests), more parts than tiles."""
    inputs = make_dense_decode_inputs(lengths=[70, 3, 0, 150, 16], s_q=2, h_q=16, page=16, dtype=SMALL_DTYPE,
                                      device=DEVICE, seed=2)  # fmt: skip
    with config.override(WAVEMLA_TARGET_CTAS=slots, WAVEMLA_BLOCK_N=16):
        check(inputs, causal=True)


@pytest.mark.parametrize("fp8", [False, True], ids=["rows", "fp8"])
def test_partials_take_the_compute_dtype(fp8):
    """Cut requests' partials are of the dtype the value rows are computed in (fp16 for FP8 rows, q's for rows), or
    fp32 where WAVEMLA_DENSE_P=split keeps 16 bits of bf16 weights: the call makes that workspace, and the launcher
    refuses another dtype, naming o_ws."""
    assert dense_decode_kernels.partials_dtype(True, torch.bfloat16) == torch.float16
    assert dense_decode_kernels.partials_dtype(False, torch.float16) == torch.float16
    assert dense_decode_kernels.partials_dtype(False, torch.bfloat16) == torch.bfloat16
    with config.override(WAVEMLA_DENSE_P="split"):
        assert dense_decode_kernels.partials_dtype(False, torch.bfloat16) == torch.float32
        assert dense_decode_kernels.partials_dtype(True, torch.bfloat16) == torch.float16
    inputs = make_dense_decode_inputs(lengths=[70, 150], h_q=16, page=16, dtype=SMALL_DTYPE, fp8=fp8, device=DEVICE,
                                      seed=2)  # fmt: skip
    with config.override(WAVEMLA_TARGET_CTAS=5, WAVEMLA_BLOCK_N=16):
        meta, _ = get_mla_metadata()
        check(inputs, metadata=meta)
    plan = meta.dense_plan
    want = torch.float16 if fp8 else SMALL_DTYPE
    assert plan is not None and plan.num_parts > 1 and list(meta.dense_o_ws) == [want]
    c = plan.config
    kv = inputs["k_cache"].view(torch.uint8) if fp8 else inputs["k_cache"]
    for wrong in (torch.float32, torch.bfloat16 if want == torch.float16 else torch.float16):
        with pytest.raises(ValueError, match="o_ws"):
            dense_decode_kernels.dense_decode_split(
                q=inputs["q"], out=torch.empty(2, 1, 16, 512, dtype=SMALL_DTYPE, device=DEVICE),
                lse=torch.empty(2, 1, 16, device=DEVICE), o_ws=meta.dense_o_ws[want].to(wrong),
                lse_ws=meta.lse_ws, kv=kv, block_table=inputs["block_table"],
                cache_seqlens=inputs["cache_seqlens"], sched=meta.sched, is_fp8=fp8, causal=False,
                softmax_scale=0.1, block_h=c.block_h, block_n=c.block_n, num_warps=c.num_warps,
                num_stages=c.num_stages, num_parts=plan.num_parts,
            )  # fmt: skip


def test_block_ids_outside_the_cache_are_excluded():
    inputs = make_dense_decode_inputs(lengths=[80, 40], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=3)
    nb = inputs["k_cache"].shape[0]
    inputs["block_table"][0, 1] = -1
    inputs["block_table"][0, 3] = nb
    inputs["block_table"][1, 0] = 2**31 - 1
    check(inputs)


# Tiles wider than a page (one block id per key): a request's last tile holds keys past its length whose block ids
# lie past its pages, or past its block-table row (pages of 1 and 96 against tiles of 32 and 64 keys).
TABLE_READ_CASES = [
    pytest.param(dict(lengths=[1, 33, 0], page=1), dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32), id="rows-p1"),
    pytest.param(dict(lengths=[70, 1], page=96), KEYS_MAJOR, id="keys-major-p96"),
    pytest.param(dict(lengths=[1, 33], page=1, fp8=True),
                 dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_STAGES=2), id="fp8-staged-p1"),
    pytest.param(dict(lengths=[1, 33], page=1, fp8=True),
                 dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_STAGES=1), id="fp8-registers-p1"),
]  # fmt: skip


@pytest.mark.skipif(HAS_CUDA, reason="records the interpreter's loads")
@pytest.mark.parametrize(("shape", "knobs"), TABLE_READ_CASES)
def test_block_table_entries_past_a_length_are_never_read(shape, knobs, monkeypatch):
    """Every block-table entry the kernels load lies inside a request's pages (``j < ceil(L / page)``): none of the
    padding past them, and nothing past the row (here 64 spare entries of a wider buffer, so that a stray read lands
    in memory the test owns)."""
    from triton.runtime import interpreter

    inputs = make_dense_decode_inputs(**shape, h_q=16, dtype=SMALL_DTYPE, device=DEVICE, seed=21, spare_blocks=0)
    table = inputs["block_table"]
    b, mb = table.shape
    buf = torch.full((b, mb + 64), BLOCK_TABLE_PAD, dtype=torch.int32, device=DEVICE)
    buf[:, :mb] = table
    inputs["block_table"] = buf[:, :mb]
    page = shape["page"]
    allowed = {buf.data_ptr() + 4 * (i * buf.stride(0) + j) for i, n in enumerate(shape["lengths"])
               for j in range(-(-n // page))}  # fmt: skip
    lo, hi = buf.data_ptr(), buf.data_ptr() + 4 * buf.numel()
    read: set[int] = set()
    load = interpreter.InterpreterBuilder.create_masked_load

    def recorded(self, ptrs, mask, *args):
        addr = ptrs.data[mask.data.astype(bool)] if mask is not None else ptrs.data
        read.update(int(a) for a in addr.ravel() if lo <= a < hi)
        return load(self, ptrs, mask, *args)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", recorded)
    with config.override(**knobs):
        out, lse = dense_mla_decode(**inputs)
    monkeypatch.undo()
    stray = sorted(((a - lo) // 4 // buf.stride(0), (a - lo) // 4 % buf.stride(0)) for a in read - allowed)
    assert not stray, f"block-table entries (request, column) read past the lengths: {stray}"
    assert read == allowed
    ref_out, ref_lse = dense_decode_ref(**inputs)
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])


@pytest.mark.parametrize("knobs", [{}, KEYS_MAJOR], ids=["planned", "64x64"])
def test_a_cache_of_no_blocks_excludes_every_key(knobs):
    """Every block id lies outside a cache of no blocks: out 0, lse +inf (the 64x64 tile at h = 64 and pages of
    64 is where sm_90 would otherwise pick the TMA kernel, which cannot describe an empty cache)."""
    inputs = make_dense_decode_inputs(lengths=[70, 0, 5], h_q=64, page=64, dtype=SMALL_DTYPE, device=DEVICE, seed=3)
    inputs["k_cache"] = inputs["k_cache"][:0]
    with config.override(**knobs):
        out, lse = dense_mla_decode(**inputs)
    assert out.shape == (3, 1, 64, 512) and lse.shape == (3, 64, 1)
    assert torch.all(out == 0) and torch.all(lse == float("inf"))


def test_query_rows_past_int32_offsets_are_refused():
    """The split kernel offsets a request's query rows ``(s, h)`` from its first in int32: a q whose last row lies
    2^31 elements or more past its first (here 3 tokens 2^30 elements apart), or a request of so many query rows
    that its output's do, is refused before any launch, not read at a wrapped address (a segfault under the
    interpreter)."""
    inputs = make_dense_decode_inputs(lengths=[5], s_q=3, h_q=1, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=1)
    # 4 GB of address space, never touched: the refusal comes first
    inputs["q"] = torch.empty_strided((1, 3, 1, 576), (3 * 2**30, 2**30, 576, 1), dtype=SMALL_DTYPE, device=DEVICE)
    with pytest.raises(ValueError, match=r"^q: a request's 3·1 query rows span 2147483648 elements"):
        dense_mla_decode(**inputs)
    # 2^22 + 1 rows of 512 outputs: the output's last row is past int32 while q (its rows 2 elements apart) is not
    rows = 2**22 + 1
    inputs["q"] = torch.empty_strided((1, rows, 1, 576), (0, 2, 576, 1), dtype=SMALL_DTYPE, device=DEVICE)
    with pytest.raises(ValueError, match=r"^q: a request's 4194305·1 query rows span 2147483648 elements"):
        dense_mla_decode(**inputs)


def test_lengths_are_clamped_to_the_block_table():
    # full pages (no poisoned tail): a length past the table's capacity reads exactly the table's pages
    inputs = make_dense_decode_inputs(lengths=[48, 32], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=4,
                                      spare_blocks=0)  # fmt: skip
    inputs["block_table"][1, 2:] = inputs["block_table"][0, :1]  # a real page past request 1's length
    inputs["cache_seqlens"] = torch.tensor([10_000, -7], dtype=torch.int32, device=DEVICE)
    out, lse = check(inputs)
    assert torch.all(out[1] == 0) and torch.all(torch.isinf(lse[1]))


def test_custom_scale_and_d512():
    inputs = make_dense_decode_inputs(lengths=[30], h_q=16, page=16, d_qk=512, dtype=SMALL_DTYPE, device=DEVICE,
                                      seed=5)  # fmt: skip
    check(inputs, softmax_scale=0.3)


def test_flash_mla_entry_point_runs_dense_without_indices():
    inputs = make_dense_decode_inputs(lengths=[37, 5], s_q=2, h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE,
                                      seed=6)  # fmt: skip
    meta, _ = get_mla_metadata()
    args = (inputs["q"], inputs["k_cache"], inputs["block_table"], inputs["cache_seqlens"], 512, meta)
    out, lse = flash_mla_with_kvcache(*args, causal=True)
    ref_out, ref_lse = dense_decode_ref(**inputs, causal=True)
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
    # the metadata is reused by a second layer of the same step; new lengths in place are rescheduled
    inputs["cache_seqlens"].copy_(torch.tensor([20, 2], dtype=torch.int32))
    out2, lse2 = flash_mla_with_kvcache(*args, causal=True)
    ref_out, ref_lse = dense_decode_ref(**inputs, causal=True)
    assert_close("out", out2, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse2, ref_lse, TOLERANCES[("lse", LANE)])


def test_batch_invariance_is_refused_not_ignored():
    """The dense schedule balances the whole batch's lengths, so a request's cut points (and bits) depend on the
    others: the knob or the argument asking for invariance is refused, by both calls, even for a signature whose
    launches were recorded; batch_invariant=False runs with the knob set."""
    inputs = make_dense_decode_inputs(lengths=[37, 5], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=8)
    meta, _ = get_mla_metadata()
    args = (inputs["q"], inputs["k_cache"], inputs["block_table"], inputs["cache_seqlens"], 512, meta)
    free = dense_mla_decode(**inputs)
    with pytest.raises(ValueError, match=r"^batch_invariant: the dense decode has no batch-invariant mode"):
        dense_mla_decode(**inputs, batch_invariant=True)
    with config.override(WAVEMLA_BATCH_INVARIANT=True):
        with pytest.raises(ValueError, match=r"^batch_invariant: .*unset WAVEMLA_BATCH_INVARIANT"):
            dense_mla_decode(**inputs)
        with pytest.raises(ValueError, match=r"^batch_invariant: "):
            flash_mla_with_kvcache(*args)
        out, lse = dense_mla_decode(**inputs, batch_invariant=False)
    assert torch.equal(out, free[0]) and torch.equal(lse, free[1])


def test_reuse_schedule_skips_the_scheduler_within_a_step():
    inputs = make_dense_decode_inputs(lengths=[37, 5, 60], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=7)
    meta, _ = get_mla_metadata()
    first = dense_mla_decode(**inputs, metadata=meta)
    meta.sched.fill_(0)  # a stale schedule: if the scheduler ran again, it would be rewritten
    meta.req.fill_(0)
    again = dense_mla_decode(**inputs, metadata=meta)  # default: scheduled again, same result
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    sched = meta.sched.clone()
    dense_mla_decode(**inputs, metadata=meta, reuse_schedule=True)
    assert torch.equal(meta.sched, sched)


def test_deterministic_bits():
    inputs = make_dense_decode_inputs(lengths=[90, 7], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=8)
    with config.override(WAVEMLA_TARGET_CTAS=5):
        a = dense_mla_decode(**inputs)
        b = dense_mla_decode(**inputs)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# --- the device scheduler ---------------------------------------------------------------------------------------

SCHEDULES = [
    pytest.param([4096, 1, 1, 300], 8, 3, 64, id="skewed-P8"),
    pytest.param([0], 132, 5, 64, id="one-empty-P132"),
    pytest.param([5] * 37, 4, 2, 16, id="uniform-P4"),
    pytest.param([100_000, 0, 7, 2**31 - 1, -3], 13, 1, 32, id="clamped-P13"),
    pytest.param(list(range(0, 3000, 7)), 264, 4, 64, id="B429-P264"),
    # more requests than one chunk of the scheduler (1024 at a time)
    pytest.param([(i * 37) % 900 for i in range(1500)], 132, 2, 64, id="B1500-P132"),
]


@pytest.mark.parametrize("cut_units", [-1, 0, 4])
@pytest.mark.parametrize(("lengths", "parts", "overhead", "block_n"), SCHEDULES)
def test_scheduler_kernel_matches_its_definition(lengths, parts, overhead, block_n, cut_units):
    max_seqlen = 8192
    seqlens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
    sched = torch.full((parts, 4), -7, dtype=torch.int32, device=DEVICE)
    req = torch.full((len(lengths), 4), -7, dtype=torch.int32, device=DEVICE)
    dense_decode_schedule(cache_seqlens=seqlens, sched=sched, req=req, max_seqlen=max_seqlen, num_parts=parts,
                          segment_overhead=overhead, block_n=block_n, cut_units=cut_units)  # fmt: skip
    want = dense_schedule(lengths, parts, overhead, block_n, max_seqlen, cut_units)
    assert [tuple(r) for r in sched.tolist()] == list(want.parts)
    assert [tuple(r[:2]) for r in req.tolist()] == list(want.request_parts)


@pytest.mark.parametrize("align", ["auto", "off"])
@pytest.mark.parametrize(("h_q", "page", "knobs"), [(16, 16, {}), (64, 64, KEYS_MAJOR)], ids=["h16", "h64-64x64"])
def test_a_part_per_request_matches_reference(align, h_q, page, knobs):
    """Even lengths under the part count: with the aligned partition every request is finished whole by its own part
    (the combine has nothing to merge); with it off they are cut; both give the reference's answer (h = 64 with the
    64x64 tile: the warp-specialized kernel on sm_90)."""
    inputs = make_dense_decode_inputs(lengths=[200, 190, 200], h_q=h_q, page=page, dtype=SMALL_DTYPE, device=DEVICE,
                                      seed=5)  # fmt: skip
    with config.override(**knobs, WAVEMLA_TARGET_CTAS=4, WAVEMLA_DENSE_ALIGN=align):
        meta, _ = get_mla_metadata()
        check(inputs, metadata=meta)
    pieces = (meta.req[:, 1] - meta.req[:, 0] + 1).tolist()
    assert meta.dense_plan.num_parts == 4
    assert (pieces == [1, 1, 1]) == (align == "auto")
    if align == "auto":
        assert meta.sched[3].tolist() == [3, 0, 3, 0]  # the part past the batch holds nothing


def test_scheduler_gives_each_request_a_part_where_that_costs_less_than_cutting():
    """Even lengths under the part count: a part per request, none cut (the parts past b hold nothing), once the
    heaviest request (18 units) costs at most a balanced part (12) plus the segment overhead (2) plus ``cut_units``;
    a smaller ``cut_units``, -1, uneven lengths or more requests than parts keep the balanced partition."""
    lengths = [1000] * 7 + [900]
    aligned = dense_schedule(lengths, 12, 2, 64, 8192, cut_units=4)
    assert aligned.parts == tuple((min(p, 8), 0, min(p + 1, 8), 0) for p in range(12))
    assert aligned.request_parts == tuple((r, r) for r in range(8))
    for other in (dense_schedule(lengths, 12, 2, 64, 8192, cut_units=c) for c in (3, -1)):
        assert other.request_parts[1] == (1, 3)  # cut between parts
    assert dense_schedule([4000] + [100] * 7, 12, 2, 64, 8192, cut_units=4).request_parts[0] == (0, 8)
    assert dense_schedule(lengths * 2, 12, 2, 64, 8192, cut_units=4).request_parts[1] == (0, 1)
    seqlens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
    sched = torch.full((12, 4), -7, dtype=torch.int32, device=DEVICE)
    req = torch.full((8, 4), -7, dtype=torch.int32, device=DEVICE)
    dense_decode_schedule(cache_seqlens=seqlens, sched=sched, req=req, max_seqlen=8192, num_parts=12,
                          segment_overhead=2, block_n=64, cut_units=4)  # fmt: skip
    assert [tuple(r) for r in sched.tolist()] == list(aligned.parts)
    assert [tuple(r[:2]) for r in req.tolist()] == list(aligned.request_parts)
    with pytest.raises(ValueError, match="cut_units"):
        dense_decode_schedule(cache_seqlens=seqlens, sched=sched, req=req, max_seqlen=8192, num_parts=12,
                              segment_overhead=2, block_n=64, cut_units=-2)  # fmt: skip


def test_schedule_covers_every_unit_once_and_balances_skewed_lengths():
    lengths = [65536, 1, 2, 0, 9000, 128, 1, 30000] + [1] * 24
    parts, overhead, block_n = 132, 5, 64
    s = dense_schedule(lengths, parts, overhead, block_n, 1 << 20)
    units = [max(-(-n // block_n), 1) for n in lengths]
    seen = [[0] * n for n in units]
    for rb, tb, re, te in s.parts:
        r, t = rb, tb
        while (r, t) < (re, te) and r < len(units):
            seen[r][t] += 1
            t += 1
            if t == units[r]:
                r, t = r + 1, 0
    assert all(c == 1 for row in seen for c in row)
    ideal = s.total_weight / parts
    assert max(s.part_weights) <= ideal + 2 * overhead + 1
    # and a uniform split by request would be far worse: the longest request alone is 1024 tiles
    assert max(s.part_weights) < 1024 / 4


# --- GPU lane: production shapes, bf16 and FP8, graph capture ---------------------------------------------------

GPU_CASES = [
    pytest.param(dict(lengths=[4096] * 8, h_q=128, page=64), False, id="v3-h128-b8-4k"),
    pytest.param(dict(lengths=[1, 20000, 0, 333, 4097, 64, 65, 8000], h_q=16, page=64), False, id="skewed-h16"),
    pytest.param(dict(lengths=[4000, 17, 1030], s_q=2, h_q=64, page=64), True, id="mtp-s2-h64-causal"),
    pytest.param(dict(lengths=[1000, 2000], s_q=4, h_q=3, page=61, d_qk=512), True, id="s4-h3-p61-d512"),
    pytest.param(dict(lengths=[3000] * 33, h_q=64, page=1), False, id="b33-page1"),
    pytest.param(dict(lengths=[4000, 17, 1030, 6], s_q=8, h_q=16, page=64), True, id="spec-s8-h16-causal"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", [False, True, "tensor"], ids=["bf16", "fp8", "fp8-tensor"])
@pytest.mark.parametrize(("shape", "causal"), GPU_CASES)
def test_gpu_v3_shapes(shape, causal, fp8):
    if fp8 and shape.get("d_qk", 576) != 576:
        pytest.skip("FP8 rows are 576 wide")
    inputs = make_dense_decode_inputs(**shape, fp8=fp8, dtype=torch.bfloat16, device="cuda", seed=9)
    check(inputs, causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "causal"), GPU_CASES)
def test_gpu_split_p_within_flashmla_tolerance(shape, causal):
    """``WAVEMLA_DENSE_P=split`` (bf16(P) plus bf16(P - bf16(P)), two dots) on bf16 rows: within FlashMLA's own
    output tolerance, unwidened, and not bit-equal to the one-dot default (so the knob reached the kernel)."""
    inputs = make_dense_decode_inputs(**shape, dtype=torch.bfloat16, device="cuda", seed=9)
    with config.override(WAVEMLA_DENSE_P="split"):
        out, lse = dense_mla_decode(**inputs, causal=causal)
    single_out, _ = dense_mla_decode(**inputs, causal=causal)
    ref_out, ref_lse = dense_decode_ref(**inputs, causal=causal)
    assert_close("out", out, ref_out, TOLERANCES[("out", "gpu")])
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", "gpu")])
    assert not torch.equal(out, single_out)


def test_dense_p_knob_picks_the_p_dots():
    """One dot of P under the default ``single``; two only for bf16 rows under ``split``."""
    assert not dense_decode_kernels.split_p(False, torch.bfloat16)
    with config.override(WAVEMLA_DENSE_P="split"):
        assert dense_decode_kernels.split_p(False, torch.bfloat16)
        assert not dense_decode_kernels.split_p(False, torch.float16)
        assert not dense_decode_kernels.split_p(True, torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", [False, True, "tensor"], ids=["bf16", "fp8", "fp8-tensor"])
def test_gpu_cuda_graph_replay_matches_eager_with_new_lengths(fp8):
    """Capture once; replay after changing the lengths in place: the scheduler inside the graph rebalances (and, for
    per-tensor FP8 rows, after changing descale_k in place: the graph reads the new scale)."""
    # pages for the longest length each request takes below; shorter lengths leave valid rows unread
    inputs = make_dense_decode_inputs(lengths=[3000, 5100, 700, 2, 5000, 4000], s_q=2, h_q=64, page=64, fp8=fp8,
                                      device="cuda", seed=10)  # fmt: skip
    meta, _ = get_mla_metadata()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        dense_mla_decode(**inputs, causal=True, metadata=meta)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            captured = dense_mla_decode(**inputs, causal=True, metadata=meta)
    torch.cuda.synchronize()
    for i, lengths in enumerate(([3000, 10, 700, 1, 5000, 64], [0, 5100, 1, 2, 3, 4000])):
        inputs["cache_seqlens"].copy_(torch.tensor(lengths, dtype=torch.int32))
        if "descale_k" in inputs:
            inputs["descale_k"].fill_(0.0101 + 0.003 * i)
        graph.replay()
        torch.cuda.synchronize()
        eager = dense_mla_decode(**inputs, causal=True, metadata=meta)
        assert torch.equal(captured[0], eager[0]) and torch.equal(captured[1], eager[1])
        ref_out, ref_lse = dense_decode_ref(**inputs, causal=True)
        assert_close("out", captured[0], ref_out, dense_out_tolerance(inputs["k_cache"], "gpu"))
        assert_close("lse", captured[1], ref_lse, TOLERANCES[("lse", "gpu")])


# The warp-specialized Gluon split kernel (kernels/dense_decode_ws.py): sm_90, bf16/fp16 rows of width 576, pages of
# a multiple of 64 keys, s_q·h a multiple of 64. On other GPUs and under the interpreter the Triton kernel runs.
WS_CASES = [
    pytest.param(dict(lengths=[150, 0, 17, 64, 1], h_q=64, page=64), False, {}, id="h64-p64-len0"),
    pytest.param(dict(lengths=[1100, 40, 3], h_q=64, page=128), False, {"WAVEMLA_TARGET_CTAS": 3}, id="h64-p128-cut"),
    pytest.param(dict(lengths=[65, 0, 700], h_q=128, page=64), False, {}, id="h128-p64"),
    pytest.param(dict(lengths=[4000, 17, 1030], s_q=2, h_q=64, page=64), True, {}, id="s2-h64-causal"),
    pytest.param(dict(lengths=[200, 33, 2], s_q=4, h_q=16, page=256), True, {"WAVEMLA_TARGET_CTAS": 5}, id="s4-h16"),
    pytest.param(dict(lengths=[300, 1000], s_q=2, h_q=128, page=64), True, {}, id="s2-h128-causal"),
    pytest.param(dict(lengths=[300, 1000, 5], s_q=8, h_q=16, page=64), True, {}, id="s8-h16-causal"),
]


def _ws_runs(inputs, causal, knobs):
    """The call's split kernel with the Gluon kernel allowed (on) and forbidden (off), each checked against the
    reference; returns ((out, lse, kernel name) on, the same off). Both write partials of q's dtype."""
    runs = []
    for ws in ("on", "off"):
        with config.override(**KEYS_MAJOR, **knobs, WAVEMLA_DENSE_WS=ws):
            meta, _ = get_mla_metadata()
            out, lse = check(inputs, causal=causal, metadata=meta)
            name = meta.split_kernel.name
            runs.append((out, lse, name))
            assert list(meta.dense_o_ws) == [inputs["q"].dtype]
    return runs


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize(("shape", "causal", "knobs"), WS_CASES)
def test_gpu_warp_specialized_kernel_matches_reference(shape, causal, knobs, dtype):
    """NaN past every length in the last pages, padded block tables, empty requests, requests cut between parts:
    the Gluon kernel meets the reference where it runs, and the Triton kernel's output closely."""
    from wavemla.kernels import dense_decode_ws

    inputs = make_dense_decode_inputs(**shape, dtype=dtype, device="cuda", seed=21)
    (out, lse, name), (out_t, lse_t, name_t) = _ws_runs(inputs, causal, knobs)
    runs_ws = device_arch(DEVICE) == 90 and dense_decode_ws.HAVE_GLUON
    assert ("_dense_mla_decode_ws_kernel" in name) == runs_ws and "ws" not in name_t
    assert (out.float() - out_t.float()).abs().max().item() <= 1e-2 * out_t.float().abs().max().item()
    assert torch.allclose(lse, lse_t, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_warp_specialized_kernel_skips_blocks_outside_the_cache():
    inputs = make_dense_decode_inputs(lengths=[300, 200], h_q=64, page=64, device="cuda", seed=22)
    nb = inputs["k_cache"].shape[0]
    inputs["block_table"][0, 1] = -1
    inputs["block_table"][0, 3] = nb
    inputs["block_table"][1, 0] = 2**31 - 1
    (out, _, _), (out_t, _, _) = _ws_runs(inputs, False, {})
    assert (out.float() - out_t.float()).abs().max().item() <= 1e-2 * out_t.float().abs().max().item()


@pytest.mark.gpu
def test_gpu_warp_specialized_kernel_is_deterministic_and_graph_safe():
    inputs = make_dense_decode_inputs(lengths=[3000, 5100, 700, 2], h_q=64, page=64, device="cuda", seed=23)
    meta, _ = get_mla_metadata()
    first = dense_mla_decode(**inputs, metadata=meta)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            captured = dense_mla_decode(**inputs, metadata=meta)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured[0], first[0]) and torch.equal(captured[1], first[1])
        again = dense_mla_decode(**inputs, metadata=meta)
        assert torch.equal(again[0], first[0]) and torch.equal(again[1], first[1])


def test_a_captured_call_leaves_no_schedule_to_reuse(monkeypatch):
    """Under CUDA-graph capture the scheduler is recorded, not run: the metadata holds no schedule to reuse until an
    uncaptured call (or the graph's replay, which the engine orders) writes one."""
    import wavemla.api as api

    inputs = make_dense_decode_inputs(lengths=[37, 5], h_q=16, page=16, dtype=SMALL_DTYPE, device=DEVICE, seed=9)
    meta, _ = get_mla_metadata()
    monkeypatch.setattr(api, "_capturing", lambda t: True)
    dense_mla_decode(**inputs, metadata=meta)
    assert not meta.scheduled
    dense_mla_decode(**inputs, metadata=meta)  # the replayed launches: still captured
    assert not meta.scheduled
    monkeypatch.setattr(api, "_capturing", lambda t: False)
    meta.sched.fill_(0)
    first = dense_mla_decode(**inputs, metadata=meta, reuse_schedule=True)  # nothing to reuse: scheduled now
    assert meta.scheduled
    assert torch.equal(first[0], dense_mla_decode(**inputs)[0])
