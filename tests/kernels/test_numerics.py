"""Numeric robustness: large magnitudes, all-equal scores, infinite sinks, a single valid row, and the FP8 range
limit of the fp16 compute path. No NaN or Inf where the reference has none; NaN in q or in an attended row gives NaN
in out and lse on every split and merge path, as in the reference (docs/reliability.md, "NaN and Inf that a query
reads").

Magnitudes stay inside what each format holds: fp16 rows and q up to 1e4 (fp16 max 65504); FP8 MODEL1 rows up to
1e4 (UE8M0 tile scale 2^5). Outputs of a large-magnitude case are compared after dividing both sides by the
magnitude — FlashMLA's tolerances are calibrated for unit-scale latents and relative accuracy does not depend on
scale. FP8 rows are decoded and computed in fp16, so a tile whose scale exceeds 2^7 (|values| > 57344) overflows
(docs/reliability.md, "Numeric limits"); the test past that limit is a strict xfail that turns red once the kernel
handles it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.conftest import DEVICE, HAS_CUDA
from wavemla import config, sparse_mla_decode
from wavemla.reference import sparse_decode_ref
from wavemla.reference.fp8 import page_views, quantize_model1
from wavemla.testing import TOLERANCES, assert_close, bf16_weights_tolerance
from wavemla.tools.stress import first_difference

LANE = "gpu" if HAS_CUDA else "interp"
DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16
SPLITS = [pytest.param(None, id="planner"), pytest.param(3, id="splits3")]


def _splits(n: int | None) -> Any:
    return config.override(WAVEMLA_NUM_SPLITS=n)


def make(
    *,
    b: int = 2,
    s_q: int = 1,
    h: int = 16,
    blocks: int = 4,
    page: int = 16,
    topk: int = 40,
    fp8: bool,
    q_scale: float = 1.0,
    kv_scale: float = 1.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Uniform q and rows in [-scale, scale] (so the scale is the exact maximum), random valid indices, a sink."""
    gen = torch.Generator().manual_seed(seed)
    rows = (torch.rand((blocks, page, 1, 512), generator=gen) * 2 - 1) * kv_scale
    cache = quantize_model1(rows) if fp8 else rows.to(DTYPE)
    q = ((torch.rand((b, s_q, h, 512), generator=gen) * 2 - 1) * q_scale).to(DTYPE)
    idx = torch.randint(0, blocks * page, (b, s_q, topk), generator=gen, dtype=torch.int32)
    sink = torch.randn(h, generator=gen)
    return {"q": q, "kv_cache": cache, "indices": idx, "attn_sink": sink}


def on_device(inputs: dict[str, Any]) -> dict[str, Any]:
    from wavemla.testing import _to_device

    return {k: (_to_device(v, DEVICE) if k == "kv_cache" else v.to(DEVICE)) for k, v in inputs.items()}


def run_both(inputs: dict[str, Any], **extra: Any) -> tuple[Any, Any, Any, Any]:
    kw = {**on_device(inputs), **extra}
    out, lse = sparse_mla_decode(**kw)  # kernel first, before the reference allocates
    ref_kw = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_out, ref_lse = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **ref_kw)
    return out, lse, ref_out, ref_lse


def assert_matches(out: Any, lse: Any, ref_out: Any, ref_lse: Any, scale: Any = 1.0) -> None:
    """Same inf/NaN positions as the reference (so none where it has none), values within tolerance after
    dividing outputs by ``scale`` (a number, or a [512] tensor of per-dimension magnitudes)."""
    if isinstance(scale, torch.Tensor):
        scale = scale.double().to(out.device)
    assert_close("out", out.double() / scale, ref_out.to(out.device) / scale, TOLERANCES[("out", LANE)])
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])


@pytest.mark.parametrize("splits", SPLITS)
@pytest.mark.parametrize("mag", [1e2, 1e3, 1e4])
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "rows"])
def test_large_q_and_kv_magnitudes(fp8: bool, mag: float, splits: int | None) -> None:
    """|q|, |kv| up to mag: scores reach ~1e9, the softmax is one-hot, exp2 underflows for all but the maximum."""
    inputs = make(fp8=fp8, q_scale=mag, kv_scale=mag, seed=1)
    with _splits(splits):
        out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isfinite(ref_out).all() and torch.isfinite(ref_lse).all()
    assert_matches(out, lse, ref_out, ref_lse, scale=mag)


@pytest.mark.parametrize("splits", SPLITS)
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "rows"])
def test_all_equal_scores(fp8: bool, splits: int | None) -> None:
    """q = 0: every score is 0, the weights are uniform over the valid rows and lse = log(count)."""
    inputs = make(fp8=fp8, seed=2)
    inputs["q"] = torch.zeros_like(inputs["q"])
    with _splits(splits):
        out, lse, ref_out, ref_lse = run_both(inputs, attn_sink=None)
    assert_matches(out, lse, ref_out, ref_lse)
    expected = torch.full(lse.shape, 40.0, dtype=torch.float64).log()
    torch.testing.assert_close(lse.double().cpu(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "rows"])
def test_identical_rows(fp8: bool) -> None:
    """Every index points at one row: the output is that row (times the sink factor) whatever q is."""
    inputs = make(fp8=fp8, q_scale=30.0, seed=3)
    inputs["indices"].fill_(5)
    out, lse, ref_out, ref_lse = run_both(inputs)
    assert_matches(out, lse, ref_out, ref_lse)


@pytest.mark.parametrize("splits", SPLITS)
@pytest.mark.parametrize("sink", ["+inf", "-inf", "mixed"])
def test_infinite_sinks(sink: str, splits: int | None) -> None:
    """+inf: output exactly 0, lse unchanged; -inf: bit-identical to no sink; also for a token with no valid row."""
    inputs = make(fp8=True, b=3, seed=4)
    inputs["indices"][2] = -1  # request 2 has no valid row: out 0, lse +inf whatever the sink
    h = inputs["q"].shape[2]
    values = {"+inf": [float("inf")] * h, "-inf": [float("-inf")] * h}
    values["mixed"] = [float("inf") if i % 3 == 0 else float("-inf") if i % 3 == 1 else 0.5 for i in range(h)]
    inputs["attn_sink"] = torch.tensor(values[sink])
    with _splits(splits):
        out, lse, ref_out, ref_lse = run_both(inputs)
        plain_out, plain_lse = sparse_mla_decode(**{**on_device(inputs), "attn_sink": None})
    assert_matches(out, lse, ref_out, ref_lse)
    assert first_difference(lse, plain_lse) is None, "the sink must not enter lse"
    plus = inputs["attn_sink"] == float("inf")
    minus = inputs["attn_sink"] == float("-inf")
    assert torch.all(out[:, :, plus.to(out.device)] == 0)
    diff = first_difference(out[:, :, minus.to(out.device)], plain_out[:, :, minus.to(out.device)])
    assert diff is None, f"sink -inf changed the output: {diff}"
    assert torch.all(out[2] == 0) and torch.all(torch.isposinf(lse[2]))


@pytest.mark.parametrize("splits", SPLITS)
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "rows"])
def test_single_valid_row(fp8: bool, splits: int | None) -> None:
    """One valid entry per token, at a random position, the rest −1 or past topk_length: out = that row times the
    sink factor, lse = its score. With splits, every other piece of the token is empty (lse −inf in the combine)."""
    inputs = make(fp8=fp8, b=3, s_q=2, q_scale=20.0, seed=5)
    idx = inputs["indices"]
    gen = torch.Generator().manual_seed(6)
    keep = torch.randint(0, idx.shape[2], idx.shape[:2], generator=gen)
    mask = torch.arange(idx.shape[2]).view(1, 1, -1) != keep[..., None]
    idx[mask] = -1
    idx[0, :, -1] = 7  # request 0: a valid entry past its topk_length must be ignored
    lengths = torch.tensor([idx.shape[2] - 1, idx.shape[2], idx.shape[2] + 5], dtype=torch.int32)
    keep[0] = keep[0].clamp_max(idx.shape[2] - 2)
    idx[0] = -1
    idx[0, torch.arange(2), keep[0]] = 3
    idx[0, :, -1] = 7
    with _splits(splits):
        out, lse, ref_out, ref_lse = run_both(inputs, topk_length=lengths.to(DEVICE))
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    assert_close("out", out.double(), ref_out.to(out.device), TOLERANCES[("out", LANE)])
    # With one valid row, lse is a single scaled dot product whose 512 terms (q up to 20, rows up to 1) sum to
    # ~1e4 times the result: the kernel's fp32 accumulation (whose order is the backend's) is held to 2^-21 of the
    # terms' magnitude (8 roundings of 2^-24), on top of the lse tolerance. The terms' magnitude per (b, h, s_q):
    # softmax scale x sum |q| (every row element is at most 1 in magnitude).
    terms = (inputs["q"].double().abs().sum(-1) * 512**-0.5).transpose(1, 2).to(lse.device)
    tol = TOLERANCES[("lse", LANE)]
    err = (lse.double() - ref_lse.to(lse.device)).abs()
    bound = tol.abs + tol.rel * ref_lse.to(lse.device).abs() + terms * 2.0**-21
    worst = int(err.argmax())
    assert bool((err <= bound).all()), (
        f"lse: error {float(err.flatten()[worst]):.3g} above its bound {float(bound.flatten()[worst]):.3g}"
    )


def _tile_magnitudes(scale_byte: int) -> torch.Tensor:
    """Per-dimension magnitude of :func:`_fp8_with_tile_scale` rows (tile 0 large, the rest unit)."""
    mags = torch.ones(512, dtype=torch.float64)
    mags[:64] = 448.0 * 2.0 ** (scale_byte - 127)
    return mags


def _fp8_with_tile_scale(scale_byte: int) -> dict[str, Any]:
    """One 8-row page whose first nope tile has UE8M0 scale byte ``scale_byte`` (value 2^(byte-127)) and codes
    filling the e4m3 range; the other tiles and the rope hold unit-scale values."""
    gen = torch.Generator().manual_seed(7)
    rows = torch.rand((1, 8, 1, 512), generator=gen) * 2 - 1
    rows[..., :64] *= 448.0 * 2.0 ** (scale_byte - 127)
    cache = quantize_model1(rows)
    _, scales = page_views(cache)
    assert int(scales[..., 0].max()) == scale_byte
    q = ((torch.rand((1, 1, 16, 512), generator=gen) * 2 - 1) / 512).to(DTYPE)
    return {"q": q, "kv_cache": cache, "indices": torch.arange(8, dtype=torch.int32).view(1, 1, 8)}


@pytest.mark.parametrize("scale_byte", [127, 130, 134], ids=["2^0", "2^3", "2^7"])
def test_fp8_tile_scales_up_to_2_pow_7(scale_byte: int) -> None:
    """Up to the documented limit (tile scale 2^7: |values| <= 57344) the fp16 path is exact and finite."""
    inputs = _fp8_with_tile_scale(scale_byte)
    out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    assert_matches(out, lse, ref_out, ref_lse, scale=_tile_magnitudes(scale_byte))


@pytest.mark.xfail(
    strict=True,
    reason="FP8 rows are decoded in fp16: a tile scale of 2^8 is +inf in fp16 (docs/reliability.md, Numeric limits)",
)
def test_fp8_tile_scale_beyond_fp16() -> None:
    inputs = _fp8_with_tile_scale(135)
    out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isfinite(ref_out).all()
    assert_matches(out, lse, ref_out, ref_lse, scale=_tile_magnitudes(135))


@pytest.mark.xfail(
    strict=True,
    reason="FP8 rope values are bf16 converted to fp16: |x| >= 65536 is +inf (docs/reliability.md, Numeric limits)",
)
def test_fp8_rope_beyond_fp16() -> None:
    inputs = _fp8_with_tile_scale(127)
    rows_rope = inputs["kv_cache"]
    data, _ = page_views(rows_rope)
    rope = data[..., 448:].contiguous().view(torch.bfloat16)
    rope[0, 3, 5] = 70000.0
    data[..., 448:] = rope.view(torch.uint8).view(data[..., 448:].shape)
    out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isfinite(ref_out).all()
    assert_matches(out, lse, ref_out, ref_lse, scale=70000.0)


def _cancelling_bf16_rows() -> dict[str, Any]:
    """One token, one head, two bf16 rows whose weighted sum nearly cancels. q = e0; row 0 = -4·e1, row 1 =
    -6.21875·e0 + 6·e1, so row 1's softmax weight relative to row 0's, exp(-6.21875 / sqrt(512)) ≈ 0.7597, is not a
    bf16 value: rounded to bf16 (0.7578) it moves output 1 (≈ 0.317) by about 0.0067."""
    q = torch.zeros(1, 1, 1, 512, dtype=torch.bfloat16)
    q[0, 0, 0, 0] = 1.0
    kv = torch.zeros(1, 2, 1, 512, dtype=torch.bfloat16)
    kv[0, 0, 0, 1] = -4.0
    kv[0, 1, 0, 0] = -6.21875
    kv[0, 1, 0, 1] = 6.0
    return {"q": q, "kv_cache": kv, "indices": torch.tensor([[[0, 1]]], dtype=torch.int32)}


@pytest.mark.gpu
@pytest.mark.xfail(
    strict=True,
    reason="bf16 row caches round the softmax weights to bf16 for PV: an output that nearly cancels misses "
    "abs 1e-3 (docs/reliability.md, Numeric limits)",
)
def test_gpu_bf16_rows_cancelling_output_within_flashmla_tolerance() -> None:
    out, lse, ref_out, ref_lse = run_both(_cancelling_bf16_rows())
    assert_matches(out, lse, ref_out, ref_lse)


@pytest.mark.gpu
def test_gpu_bf16_rows_cancelling_output_within_the_weight_rounding_bound() -> None:
    """The same case within the bound of bf16 weights (testing.bf16_weights_tolerance: 2^-8 · max|v|)."""
    case = _cancelling_bf16_rows()
    out, lse, ref_out, ref_lse = run_both(case)
    tol = bf16_weights_tolerance(TOLERANCES[("out", "gpu")], case["kv_cache"].float().abs().max().item())
    assert_close("out", out.double(), ref_out.to(out.device), tol)
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", "gpu")])


@pytest.mark.gpu
@pytest.mark.xfail(
    strict=True,
    reason="with an FP8 cache a bf16 q is converted to fp16: |q| >= 65536 is +inf (docs/reliability.md)",
)
def test_gpu_bf16_q_beyond_fp16_with_fp8_cache() -> None:
    inputs = make(fp8=True, b=1, seed=8)
    inputs["q"] = inputs["q"].to(torch.bfloat16)
    inputs["q"][0, 0, 0, 0] = 70000.0
    out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isfinite(ref_out).all()
    assert_matches(out, lse, ref_out, ref_lse)


# ---------------------------------------------------------------------------------------------- NaN in the inputs
# A NaN score (NaN in q, or in a row a query attends) makes the softmax sum NaN. Every path must keep it NaN, as the
# reference does, in the output and in lse: read as "nothing seen" it became out 0 / lse +inf (a token held by one
# program) or dropped its piece from the merge (a finite lse of the other pieces, for a cut token).
NAN_SPARSE_PATHS = [
    pytest.param(dict(WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_SPLITS=1), id="whole"),
    pytest.param(dict(WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_SPLITS=3), id="combine-loop"),
    pytest.param(dict(WAVEMLA_BLOCK_N=16, WAVEMLA_NUM_SPLITS=16), id="combine-wide"),
    pytest.param(dict(WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_SPLITS=2), id="kernel-pair"),
    pytest.param(dict(WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_SPLITS=4), id="kernel-merge"),
]


def _nan_case(poison: str) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Rows of 256 valid entries a token (16 tiles of 16 rows, 4 of 64) and one poisoned input; returns the inputs
    and the (b, s, h) prefix of the outputs it reaches: "row" (NaN in a row token (0, 0) attends: every head),
    "q" (NaN in head 3 of token (0, 0)) or "inf-row" (+inf in a row token (0, 0) attends)."""
    inputs = make(fp8=False, blocks=16, topk=256, seed=9)
    slot = int(inputs["indices"][0, 0, 100])
    inputs["indices"][1:, :][inputs["indices"][1:, :] == slot] = (slot + 1) % 256  # request 1 never reads it
    if poison == "q":
        inputs["q"][0, 0, 3, 7] = float("nan")
        return inputs, (0, 0, 3)
    inputs["kv_cache"].view(-1, 512)[slot, 200] = float("nan") if poison == "row" else float("inf")
    return inputs, (0, 0)


@pytest.mark.parametrize("knobs", NAN_SPARSE_PATHS)
@pytest.mark.parametrize("poison", ["row", "q"])
def test_nan_input_gives_nan_output_and_lse(poison: str, knobs: dict[str, int]) -> None:
    inputs, hit = _nan_case(poison)
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1, **knobs):
        out, lse, ref_out, ref_lse = run_both(inputs)
    assert torch.isnan(ref_out[hit]).all() and int(torch.isnan(ref_out).sum()) == ref_out[hit].numel()
    assert_matches(out, lse, ref_out, ref_lse)  # NaN exactly where the reference has it, out and lse


@pytest.mark.parametrize("knobs", NAN_SPARSE_PATHS)
def test_inf_in_an_attended_row_gives_a_non_finite_lse(knobs: dict[str, int]) -> None:
    """+inf in a row: heads whose score is +inf get NaN outputs and lse NaN (the reference's lse is +inf: inf - inf
    in the online softmax is NaN); heads whose score is -inf get that row weight 0 and a NaN in its column (0·inf),
    with a finite lse, as in the reference. Never a finite lse where the reference's is infinite."""
    inputs, _ = _nan_case("inf-row")
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1, **knobs):
        out, lse, ref_out, ref_lse = run_both(inputs)
    ref_lse = ref_lse.to(lse.device)
    plus = torch.isposinf(ref_lse)
    assert bool(plus[0, :, 0].any()) and not bool(plus[0, :, 0].all())  # both kinds of heads
    assert torch.isnan(lse[plus]).all(), lse[plus]
    assert_close("lse", lse[~plus], ref_lse[~plus], TOLERANCES[("lse", LANE)])
    assert_close("out", out.double(), ref_out.to(out.device), TOLERANCES[("out", LANE)])


@pytest.mark.parametrize(
    ("knobs", "cut"),
    [
        pytest.param(dict(WAVEMLA_NUM_STAGES=1, WAVEMLA_TARGET_CTAS=1), False, id="whole"),
        pytest.param(dict(WAVEMLA_NUM_STAGES=3, WAVEMLA_TARGET_CTAS=1), False, id="whole-staged"),
        pytest.param(dict(WAVEMLA_NUM_STAGES=1, WAVEMLA_TARGET_CTAS=8, WAVEMLA_DENSE_ALIGN="off"), True, id="cut"),
    ],
)
@pytest.mark.parametrize("poison", ["row", "q"])
def test_dense_nan_input_gives_nan_output_and_lse(poison: str, knobs: dict[str, Any], cut: bool) -> None:
    """The dense decode, whole requests and requests cut between programs (merged by the combine kernel)."""
    from wavemla import dense_mla_decode, get_mla_metadata
    from wavemla.reference import dense_decode_ref
    from wavemla.testing import dense_out_tolerance, make_dense_decode_inputs

    inputs = make_dense_decode_inputs(lengths=[40, 33], h_q=16, page=16, dtype=DTYPE, device=DEVICE, seed=33)
    if poison == "q":
        inputs["q"][0, 0, 3, 7] = float("nan")
        hit: tuple[int, ...] = (0, 0, 3)
    else:
        inputs["k_cache"][int(inputs["block_table"][0, 1]), 5, 0, 100] = float("nan")  # key 21 of request 0
        hit = (0,)
    meta, _ = get_mla_metadata()
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, **knobs):
        out, lse = dense_mla_decode(**inputs, metadata=meta)
    assert meta.req is not None and (int(meta.req[0, 1]) > int(meta.req[0, 0])) == cut, meta.req
    ref_out, ref_lse = dense_decode_ref(**inputs)
    assert torch.isnan(ref_out[hit]).all() and int(torch.isnan(ref_out).sum()) == ref_out[hit].numel()
    assert_close("out", out, ref_out, dense_out_tolerance(inputs["k_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])
