"""The e4m3 decode helpers (wavemla.kernels.fp8) against torch's float8_e4m3fn, all 256 codes."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from tests.conftest import DEVICE, HAS_CUDA, gpu_lacks_e4m3_cvt
from wavemla import config, dense_mla_decode, sparse_mla_decode
from wavemla.device import triton_interpreting
from wavemla.kernels.fp8 import e4m3_f16, e4m3_times_256_inv_f16
from wavemla.reference import dense_decode_ref, sparse_decode_ref
from wavemla.reference.fp8 import page_views
from wavemla.testing import (
    TOLERANCES,
    assert_close,
    dense_out_tolerance,
    make_dense_decode_inputs,
    make_sparse_decode_inputs,
)

CODES = torch.arange(256, dtype=torch.int32).to(torch.uint8)
LANE = "gpu" if HAS_CUDA else "interp"
SMALL_DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16
# register-decoded tiles (one stage) and staged tiles (Triton's pipeliner, the e4m3 conversion in the tile loop)
TILES = [
    pytest.param(
        dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1), id="registers"
    ),
    pytest.param(dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=3), id="staged"),
]


@triton.jit
def _decode_kernel(
    p_x, p_out, HELPER: tl.constexpr, E4M3_CVT: tl.constexpr, ASM: tl.constexpr, NAN_CODES: tl.constexpr
):
    o = tl.arange(0, 256)
    b_x = tl.load(p_x + o)
    b_y = e4m3_times_256_inv_f16(b_x, NAN_CODES) if HELPER else e4m3_f16(b_x, E4M3_CVT, ASM)
    tl.store(p_out + o, b_y)


def _decode(helper: bool, cvt: bool, asm: bool, nan_codes: bool = True) -> torch.Tensor:
    x = CODES.to(DEVICE)
    out = torch.empty(256, dtype=torch.float16, device=DEVICE)
    _decode_kernel[(1,)](x, out, HELPER=helper, E4M3_CVT=cvt, ASM=asm, NAN_CODES=nan_codes)
    return out.cpu().double()


# (helper, E4M3_CVT, ASM, decoded value / e4m3 value): the bit assembly gives e4m3 x 2^-8
PATHS = [
    pytest.param(True, False, False, 2.0**-8, id="times-256-inv"),
    pytest.param(False, False, False, 2.0**-8, id="bits"),
    pytest.param(False, True, False, 1.0, id="cvt"),
    pytest.param(False, False, True, 2.0**-8, id="bits-asm"),
    pytest.param(False, True, True, 1.0, id="cvt-asm"),
]


@pytest.mark.parametrize(("helper", "cvt", "asm", "factor"), PATHS)
def test_every_code_decodes_as_torch_float8_e4m3fn(helper: bool, cvt: bool, asm: bool, factor: float) -> None:
    """NaN exactly where torch gives NaN (0x7F, 0xFF: the bit form once made them ±480), the exact value (times
    2^-8 for the bit assembly) everywhere else, signed zeros and subnormals included."""
    if asm and (DEVICE != "cuda" or triton_interpreting()):
        pytest.skip("inline assembly needs a GPU")
    if cvt and DEVICE == "cuda" and gpu_lacks_e4m3_cvt():
        pytest.skip("no hardware e4m3 conversion on this GPU")
    got = _decode(helper, cvt, asm)
    want = CODES.view(torch.float8_e4m3fn).double() * factor
    nan = torch.isnan(want)
    assert nan.nonzero().flatten().tolist() == [0x7F, 0xFF]
    # Triton's interpreter emulates the float8e4nv conversion without NaNs (0x7F gives 480); the hardware gives NaN
    if not (cvt and triton_interpreting()):
        assert torch.equal(torch.isnan(got), nan), f"NaN at codes {torch.isnan(got).nonzero().flatten().tolist()}"
    assert torch.equal(got[~nan], want[~nan])
    assert torch.equal(torch.signbit(got[~nan]), torch.signbit(want[~nan]))


def test_the_fast_helper_keeps_every_finite_code_and_reads_nan_codes_as_480() -> None:
    """Without ``NAN_CODES`` (the dense decode's register-decoded tiles) the helper is exact for every finite code and
    reads the NaN codes as ±1.875, i.e. ±480 x 2^-8."""
    got = _decode(True, False, False, nan_codes=False)
    want = CODES.view(torch.float8_e4m3fn).double() * 2.0**-8
    nan = torch.isnan(want)
    assert torch.equal(got[~nan], want[~nan]) and torch.equal(torch.signbit(got), torch.signbit(CODES.view(torch.int8)))
    assert got[0x7F].item() == 1.875 and got[0xFF].item() == -1.875


@pytest.mark.parametrize("splits", [None, 2], ids=["planner", "splits2"])
@pytest.mark.parametrize("code", [0x7F, 0xFF])
@pytest.mark.parametrize("knobs", TILES)
def test_sparse_decode_nan_code_in_an_attended_row_gives_nan(
    knobs: dict[str, int], code: int, splits: int | None
) -> None:
    """A NaN code in a row one query attends makes that query's outputs and lse NaN, as in the reference, also when
    its rows are cut into pieces that the combine merges; the bit decode once read it as ±480 x the scale and gave
    finite outputs, and the NaN score sum once read as "no row seen" (lse +inf, or the other pieces' finite lse)."""
    inputs = make_sparse_decode_inputs(batch=2, h_q=16, topk=40, page=16, extra_topk=24, extra_page=8, fp8=True,
                                       dtype=SMALL_DTYPE, device=DEVICE, seed=31)  # fmt: skip
    slot = int(inputs["indices"][0, 0, 5])
    data, _ = page_views(inputs["kv_cache"])
    data[slot // 16, slot % 16, 200] = code  # a nope code of the fourth 64-wide block
    kwargs = {k: v for k, v in inputs.items() if v is not None}
    with config.override(**knobs, WAVEMLA_FP8_DECODE="bits", WAVEMLA_NUM_SPLITS=splits):
        out, lse = sparse_mla_decode(**kwargs)
    ref_out, ref_lse = sparse_decode_ref(
        inputs["q"], inputs["kv_cache"], inputs["indices"], extra_kv_cache=inputs["extra_kv_cache"],
        extra_indices=inputs["extra_indices"], attn_sink=inputs["attn_sink"],
    )  # fmt: skip
    assert torch.isnan(ref_out[0, 0]).all() and not torch.isnan(ref_out[1]).any()
    assert torch.isnan(ref_lse[0]).all()
    assert_close("out", out, ref_out, TOLERANCES[("out", LANE)])
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])


@pytest.mark.parametrize("ctas", [1, None], ids=["whole", "planner"])
@pytest.mark.parametrize(("fp8", "byte"), [(True, 300), ("tensor", 540)], ids=["v32-latent", "tensor-rope"])
@pytest.mark.parametrize("knobs", [t for t in TILES if t.id == "staged"])
def test_dense_decode_nan_code_in_an_attended_row_gives_nan(
    knobs: dict[str, int], fp8: bool | str, byte: int, ctas: int | None
) -> None:
    """The dense decode's staged FP8 tiles (V3.2 rows; per-tensor rows, whose rope is e4m3 too): a NaN code in a key
    request 0 attends makes its outputs and lse NaN, as in the reference, and leaves request 1 alone, whether one
    program holds the request (``ctas`` 1: it once read as "no key seen", out 0 and lse +inf) or the combine merges
    its pieces. (The register-decoded tiles read the NaN codes as ±480 on every architecture: NaN-exact bit
    assembly measured 2-3% slower there.)"""
    inputs = make_dense_decode_inputs(lengths=[40, 33], h_q=16, page=16, fp8=fp8, dtype=SMALL_DTYPE, device=DEVICE,
                                      seed=32)  # fmt: skip
    key = 21
    block = int(inputs["block_table"][0, key // 16])
    inputs["k_cache"].view(torch.uint8)[block, key % 16, 0, byte] = 0x7F
    with config.override(**knobs, WAVEMLA_FP8_DECODE="bits", WAVEMLA_TARGET_CTAS=ctas):
        out, lse = dense_mla_decode(**inputs)
    ref_out, ref_lse = dense_decode_ref(**inputs)
    assert torch.isnan(ref_out[0]).all() and not torch.isnan(ref_out[1]).any() and torch.isnan(ref_lse[0]).all()
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
