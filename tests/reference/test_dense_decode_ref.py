"""The dense-decode reference and the V3.2 FP8 codec: layout bytes, exact decode, FlashMLA's semantics, edge cases."""

from __future__ import annotations

import math

import pytest
import torch

from wavemla.reference import dense_decode_ref, dequantize_v32, quantize_v32
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
    assert scales[0, 2] == 2.0**-22  # an all-zero tile: amax floored at 1e-4
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


def test_fp8_cache_is_dequantized_first() -> None:
    inputs = make_dense_decode_inputs(lengths=[9, 4], h_q=3, page=4, fp8=True, dtype=torch.float32)
    rows = dequantize_v32(inputs["k_cache"])
    out8, lse8 = dense_decode_ref(**inputs)
    out, lse = dense_decode_ref(**{**inputs, "k_cache": rows})
    torch.testing.assert_close(out8, out, equal_nan=True)
    torch.testing.assert_close(lse8, lse)
