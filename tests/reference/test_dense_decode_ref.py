"""The dense-decode reference and its FP8 codecs (V3.2 and per-tensor rows): layout bytes, exact decode, FlashMLA's
semantics, edge cases."""

from __future__ import annotations

import math

import pytest
import torch

from wavemla.reference import (
    dense_decode_ref,
    dequantize_fp8_rows,
    dequantize_v32,
    quantize_fp8_rows,
    quantize_v32,
    sparse_decode_ref,
)
from wavemla.reference.fp8_v32 import BYTES_PER_TOKEN, v32_parts
from wavemla.testing import BLOCK_TABLE_PAD, make_dense_decode_inputs


def test_v32_layout_bytes() -> None:
    rows = torch.zeros(1, 2, 1, 576)
    rows[0, 0, 0, :128] = 448.0  # tile 0: scale 1
    rows[0, 0, 0, 128:256] = 0.5  # tile 1: amax 0.5 -> scale 2^-9 (0.5/448 rounded up to a power of two)
    rows[0, 0, 0, 512:] = 1.5
    cache = quantize_v32(rows)
    assert cache.shape == (1, 2, 1, BYTES_PER_TOKEN) and cache.dtype == torch.uint8 and cache.stride(1) == 656
    codes, scales, rope = v32_parts(cache[0, :, 0])
    assert scales[0, 0] == 1.0 and scales[0, 1] == 2.0**-9
    assert scales[0, 2] == 2.0**-13  # an all-zero tile: amax / 448 floored at 1e-4
    assert codes[0, 0].item() == torch.tensor(448.0).to(torch.float8_e4m3fn).view(torch.uint8).item()
    assert torch.all(rope[0] == 1.5)
    assert torch.equal(cache[0, 0, 0, 512:516], torch.tensor([1.0], dtype=torch.float32).view(torch.uint8))


def test_v32_round_trip_is_exact_on_decoded_values() -> None:
    rows = torch.randn(3, 7, 1, 576) * 5
    once = dequantize_v32(quantize_v32(rows))
    assert torch.equal(dequantize_v32(quantize_v32(once)), once)
    nope_err = (once - rows)[..., :512].abs() / rows[..., :512].abs().clamp_min(1e-3)
    assert float(nope_err.median()) < 0.05  # e4m3: 3 mantissa bits
    assert torch.equal(once[..., 512:], rows[..., 512:].to(torch.bfloat16).float())
    with pytest.raises(ValueError, match="rows"):
        quantize_v32(torch.zeros(1, 2, 1, 512))
    with pytest.raises(ValueError, match="cache"):
        dequantize_v32(torch.zeros(1, 2, 1, 584, dtype=torch.uint8))


def test_v32_scale_floor_applies_to_amax_over_448() -> None:
    """FlashMLA's tests/quant.py floors ``amax / 448`` (not amax) at 1e-4: no tile scale is below 2^-13, and a tiny
    value in a tile of small amax underflows to 0 as it does there."""
    rows = torch.zeros(1, 1, 1, 576)
    rows[0, 0, 0, 128] = 0.01  # tile 1: 0.01 / 448 < 1e-4 -> 2^-13 (a floor on amax would give 2^-15)
    rows[0, 0, 0, 129] = 6e-8  # 6e-8 / 2^-13 is below half the least e4m3 subnormal (2^-10): code 0
    rows[0, 0, 0, 256] = 0.0896  # tile 2: 0.0896 / 448 = 2e-4 -> 2^-12, above the floor
    rows[0, 0, 0, 384] = 0.5  # tile 3: 2^-9
    cache = quantize_v32(rows)
    _, scales, _ = v32_parts(cache[0, :, 0])
    assert scales[0].tolist() == [2.0**-13, 2.0**-13, 2.0**-12, 2.0**-9]
    back = dequantize_v32(cache)[0, 0, 0]
    assert back[128] == 0.009765625 and back[129] == 0.0


def test_v32_decode_is_exact_with_any_scale() -> None:
    """A V3.2 cache may carry scales that are not powers of two (vLLM writes amax / 448): the fp64 references read
    code · scale exactly, not rounded to fp32."""
    cache = quantize_v32(torch.zeros(1, 1, 1, 576))
    scale = torch.tensor([0.1], dtype=torch.float32)
    cache[0, 0, 0, :512] = torch.tensor(3.0).to(torch.float8_e4m3fn).view(torch.uint8)
    cache[0, 0, 0, 512:528] = scale.repeat(4).view(torch.uint8)
    exact = 3.0 * scale.item()  # 3 · fp32(0.1) = 0.30000000447034836; in fp32 it rounds to 0.30000001192092896
    assert dequantize_v32(cache, torch.float64)[0, 0, 0, 0].item() == exact
    assert dequantize_v32(cache)[0, 0, 0, 0].item() == torch.tensor(exact).float().item()  # rounded once
    q = torch.zeros(1, 1, 1, 576, dtype=torch.float64)
    q[..., 0] = 1.0
    out, _ = sparse_decode_ref(q, cache, torch.zeros(1, 1, 1, dtype=torch.int32), softmax_scale=1.0)
    assert out[0, 0, 0, 0].item() == exact
    table = torch.zeros(1, 1, dtype=torch.int32)
    out, _ = dense_decode_ref(q, cache, table, torch.ones(1, dtype=torch.int32), softmax_scale=1.0)
    assert out[0, 0, 0, 0].item() == exact


def naive(q, rows, table, lengths, causal, scale):
    """Loop form of the definition (one query row at a time)."""
    b, s_q, h, _ = q.shape
    page = rows.shape[1]
    out = torch.zeros(b, s_q, h, 512, dtype=torch.float64)
    lse = torch.full((b, h, s_q), math.inf, dtype=torch.float64)
    for i in range(b):
        n = max(0, min(int(lengths[i]), table.shape[1] * page))
        for s in range(s_q):
            keys = [j for j in range(n) if not causal or j <= n - s_q + s]
            keys = [j for j in keys if 0 <= int(table[i, j // page]) < rows.shape[0]]
            if not keys:
                continue
            k = torch.stack([rows[int(table[i, j // page]), j % page, 0].double() for j in keys])
            for hh in range(h):
                sc = (k @ q[i, s, hh].double()) * scale
                w = torch.softmax(sc, 0)
                out[i, s, hh] = w @ k[:, :512]
                lse[i, hh, s] = torch.logsumexp(sc, 0)
    return out, lse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_qk", [576, 512])
def test_reference_matches_the_loop_form(causal: bool, d_qk: int) -> None:
    inputs = make_dense_decode_inputs(lengths=[0, 1, 3, 20], s_q=3, h_q=2, d_qk=d_qk, page=4, dtype=torch.float32)
    inputs["block_table"][3, 1] = -1  # a page that is not a block: its keys are excluded
    out, lse = dense_decode_ref(**inputs, causal=causal)
    want_out, want_lse = naive(inputs["q"], inputs["k_cache"], inputs["block_table"], inputs["cache_seqlens"].tolist(),
                               causal, d_qk**-0.5)  # fmt: skip
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse)


def test_no_key_means_zero_output_and_inf_lse_and_padding_is_never_read() -> None:
    inputs = make_dense_decode_inputs(lengths=[0, 2, 5], s_q=4, h_q=2, page=4, dtype=torch.float32)
    assert (inputs["block_table"] == BLOCK_TABLE_PAD).any() and torch.isnan(inputs["k_cache"]).any()
    out, lse = dense_decode_ref(**inputs, causal=True)
    assert torch.isfinite(out).all()
    assert torch.all(out[0] == 0) and torch.all(torch.isinf(lse[0]))
    # request 1 has 2 keys and 4 query tokens: tokens 0 and 1 see none (2 - 4 + s < 0), tokens 2, 3 see 1 and 2
    assert torch.all(torch.isinf(lse[1, :, :2])) and torch.isfinite(lse[1, :, 2:]).all()
    assert torch.all(out[1, :2] == 0)
    # not causal: every token sees every key
    _, lse_all = dense_decode_ref(**inputs, causal=False)
    assert torch.isfinite(lse_all[1:]).all()


@pytest.mark.parametrize("fp8", [False, True], ids=["rows", "v32"])
def test_a_cache_of_no_blocks_excludes_every_key(fp8: bool) -> None:
    """Every block id lies outside a cache of no blocks (the API accepts one): out 0 and lse +inf for every query,
    whatever the lengths, as for invalid block ids."""
    inputs = make_dense_decode_inputs(lengths=[7, 0, 3], s_q=2, h_q=2, page=4, dtype=torch.float32)
    rows = inputs["k_cache"][:0]
    inputs["k_cache"] = quantize_v32(rows) if fp8 else rows
    out, lse = dense_decode_ref(**inputs)
    assert out.shape == (3, 2, 2, 512) and torch.all(out == 0) and torch.all(lse == math.inf)


def test_fp8_cache_is_dequantized_first() -> None:
    inputs = make_dense_decode_inputs(lengths=[9, 4], h_q=3, page=4, fp8=True, dtype=torch.float32)
    rows = dequantize_v32(inputs["k_cache"])
    out8, lse8 = dense_decode_ref(**inputs)
    out, lse = dense_decode_ref(**{**inputs, "k_cache": rows})
    torch.testing.assert_close(out8, out, equal_nan=True)
    torch.testing.assert_close(lse8, lse)


def test_fp8_rows_codec() -> None:
    """Per-tensor FP8 rows: codes of x / scale (e4m3, clamped to ±448), the scale amax / 448 by default; decoded
    values are codes times the scale, and coding them again with that scale gives the same codes."""
    rows = torch.randn(3, 5, 1, 576) * 4
    cache, scale = quantize_fp8_rows(rows)
    assert cache.shape == (3, 5, 1, 576) and cache.dtype == torch.float8_e4m3fn
    assert scale.shape == (1,) and scale.dtype == torch.float32 and math.isclose(scale.item(), rows.abs().max() / 448)
    back = dequantize_fp8_rows(cache, scale)
    assert float(back.abs().max()) <= 448 * scale.item() * (1 + 1e-6)
    assert torch.equal(quantize_fp8_rows(back, scale.item())[0].view(torch.uint8), cache.view(torch.uint8))
    assert torch.equal(dequantize_fp8_rows(cache.view(torch.uint8), scale), back)  # uint8 bytes read alike
    zeros, one = quantize_fp8_rows(torch.zeros(1, 2, 1, 576))
    assert one.item() == 1.0 and not zeros.view(torch.uint8).any()
    clamped, _ = quantize_fp8_rows(torch.full((1, 1, 1, 576), 1e6), 1)  # an int scale is a number too
    assert torch.all(clamped.float() == 448)
    for bad, message in (
        (lambda: quantize_fp8_rows(torch.zeros(1, 2, 1, 512)), "rows"),
        (lambda: quantize_fp8_rows(rows, 0.0), "scale"),
        (lambda: quantize_fp8_rows(rows, float("inf")), "scale"),
        (lambda: quantize_fp8_rows(rows, True), "scale"),  # type: ignore[arg-type]
        (lambda: dequantize_fp8_rows(torch.zeros(1, 2, 1, 656, dtype=torch.uint8), scale), "cache"),
        (lambda: dequantize_fp8_rows(cache, torch.ones(2)), "scale"),
    ):
        with pytest.raises(ValueError, match=f"^{message}"):
            bad()


def test_fp8_rows_cache_is_dequantized_first_and_q_descaled() -> None:
    """The reference over a per-tensor FP8 cache is the reference over its decoded rows; descale_q multiplies q."""
    inputs = make_dense_decode_inputs(lengths=[9, 4], h_q=3, page=4, fp8="tensor", dtype=torch.float32)
    rows = dequantize_fp8_rows(inputs["k_cache"], inputs["descale_k"])
    out8, lse8 = dense_decode_ref(**inputs)
    rest = {k: v for k, v in inputs.items() if k != "descale_k"}
    out, lse = dense_decode_ref(**{**rest, "k_cache": rows})
    torch.testing.assert_close(out8, out, equal_nan=True)
    torch.testing.assert_close(lse8, lse)
    half = torch.tensor([0.5])
    out_q, lse_q = dense_decode_ref(**{**inputs, "q": inputs["q"] * 2}, descale_q=half)
    torch.testing.assert_close(out_q, out8)
    torch.testing.assert_close(lse_q, lse8)
    with pytest.raises(ValueError, match=r"^descale_k: required"):
        dense_decode_ref(**rest)
    with pytest.raises(ValueError, match=r"^descale_k: only"):
        dense_decode_ref(**{**rest, "k_cache": rows}, descale_k=half)
    with pytest.raises(ValueError, match=r"^descale_q"):
        dense_decode_ref(**inputs, descale_q=torch.ones(2))
