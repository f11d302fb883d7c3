"""The indexer reference against hand-worked cases and an independent brute force (sorted tuples, no torch.sort)."""

from __future__ import annotations

import math

import pytest
import torch

from wavemla.reference.indexer import (
    csa_visible_rows,
    dequantize_index_k,
    index_k_rows,
    indexer_scores_ref,
    lightning_indexer_ref,
    quantize_index_k,
    quantize_index_q,
    rows_to_slots,
    select_topk_rows,
    topk_length_per_request,
    visible_rows,
)


def _brute_force(q, w, rows_by_request, n_vis, topk, table, page):
    """Per token: Python floats, explicit loops over heads, sorted (-score, row) tuples."""
    b, s_q = n_vis.shape
    idx = torch.full((b, s_q, topk), -1, dtype=torch.int32)
    for i_b in range(b):
        for i_s in range(s_q):
            n = int(n_vis[i_b, i_s])
            if n <= topk:
                chosen = list(range(n))
            else:
                scored = []
                for i in range(n):
                    k = rows_by_request[i_b][i]
                    total = 0.0
                    for h in range(q.shape[2]):
                        total += float(w[i_b, i_s, h]) * max(0.0, float(q[i_b, i_s, h].double() @ k))
                    scored.append((-total, i))
                chosen = sorted(i for _, i in sorted(scored)[:topk])
            for j, i in enumerate(chosen):
                idx[i_b, i_s, j] = int(table[i_b, i // page]) * page + i % page
    return idx


def _rows_by_request(cache_rows, table, page, n):
    return [[cache_rows[int(table[r, i // page]), i % page] for i in range(n)] for r in range(table.shape[0])]


# ------------------------------------------------------------------------------------------------------- FP8 codec
def test_quantize_layout_and_scale_rule():
    rows = torch.zeros(4, 128)
    rows[0, 3] = 448.0  # amax 448 -> scale 1
    rows[1, 0] = -449.0  # just above -> scale 2
    rows[2, 5] = 224.0  # amax/448 = 1/2 exactly -> scale 1/2
    # row 3 all zero -> amax floored at 1e-4 -> scale 2^ceil(log2(1e-4/448)) = 2^-22
    cache = quantize_index_k(rows)
    assert cache.dtype == torch.uint8 and cache.shape == (4, 132)
    scales = cache[:, 128:].contiguous().view(torch.float32).flatten()
    assert scales.tolist() == [1.0, 2.0, 0.5, 2.0**-22]
    assert math.ceil(math.log2(1e-4 / 448)) == -22
    # little-endian fp32 bytes of 2.0 = 0x40000000
    assert cache[1, 128:].tolist() == [0, 0, 0, 0x40]
    codes = cache[:, :128].view(torch.float8_e4m3fn).float()
    assert codes[0, 3] == 448.0 and codes[2, 5] == 448.0 and codes[3].abs().sum() == 0
    assert codes[1, 0] == -224.0  # -449 / 2 = -224.5; e4m3 spacing in [128, 256) is 16, so it rounds to -224
    assert dequantize_index_k(cache)[1, 0] == -448.0


def test_quantize_roundtrip_error_and_idempotence():
    g = torch.Generator().manual_seed(1)
    rows = torch.randn(64, 128, generator=g) * torch.logspace(-3, 3, 64)[:, None]
    cache = quantize_index_k(rows)
    back = dequantize_index_k(cache)
    scale = cache[:, 128:].contiguous().view(torch.float32)
    # power-of-two scales, codes within the e4m3 range
    assert torch.equal(torch.frexp(scale).mantissa, torch.full_like(scale, 0.5))
    assert back.div(scale).abs().max() <= 448
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 for normal codes, absolute <= 2^-10 · scale below them
    err = (back - rows).abs()
    bound = torch.maximum(rows.abs() * 2.0**-4, scale * 2.0**-10)
    assert bool((err <= bound).all())
    # re-quantizing dequantized rows is lossless (the bytes may differ: a rounded-down amax can halve the scale)
    assert torch.equal(dequantize_index_k(quantize_index_k(back)), back)


def test_quantize_rejects_bad_input():
    with pytest.raises(ValueError, match="rows"):
        quantize_index_k(torch.zeros(3, 64))
    with pytest.raises(ValueError, match="rows"):
        quantize_index_k(torch.zeros(3, 128, dtype=torch.int32))
    with pytest.raises(ValueError, match="cache"):
        dequantize_index_k(torch.zeros(3, 132))
    with pytest.raises(ValueError, match="cache"):
        dequantize_index_k(torch.zeros(3, 128, dtype=torch.uint8))
    with pytest.raises(ValueError, match="layout"):
        quantize_index_k(torch.zeros(2, 4, 128), layout="blocked")
    with pytest.raises(ValueError, match="rows"):
        quantize_index_k(torch.zeros(128), layout="paged")
    with pytest.raises(ValueError, match="cache"):
        dequantize_index_k(torch.zeros(132, dtype=torch.uint8), layout="paged")


def test_paged_layout_holds_the_same_rows_page_split():
    """vLLM's V3.2 indexer cache: per page, the code rows at a 128-byte pitch, then the fp32 scales."""
    rows = torch.randn(3, 8, 128, generator=torch.Generator().manual_seed(1)) * 10
    per_row = quantize_index_k(rows)
    paged = quantize_index_k(rows, layout="paged")
    assert paged.shape == per_row.shape == (3, 8, 132) and paged.dtype == torch.uint8
    flat = paged.view(3, 8 * 132)
    assert torch.equal(flat[:, : 8 * 128].view(3, 8, 128), per_row[..., :128])  # codes, row after row
    assert torch.equal(flat[:, 8 * 128 :].view(3, 8, 4), per_row[..., 128:])  # then every row's scale
    assert torch.equal(dequantize_index_k(paged, layout="paged"), dequantize_index_k(per_row))


# ----------------------------------------------------------------------------------------------------- MXFP4 codec
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def test_mxfp4_bytes_by_hand():
    """OCP MX layout: value 2j in the low nibble of byte j, e2m1 sign bit 3, one e8m0 exponent byte per 32 values."""
    rows = torch.zeros(1, 128)
    rows[0, 0], rows[0, 1] = 1.5, -6.0  # block 0: amax 6 -> scale 1 (E = 127); codes 3 and 8 + 7
    rows[0, 32] = 0.75  # block 1: amax 0.75 -> 0.75 / 6 = 2^-3 exactly -> scale 2^-3 (E = 124), 0.75 / 2^-3 = 6
    rows[0, 64:96] = 3.0  # block 2: amax 3 -> scale 2^-1 (E = 126), every value 6
    # block 3 all zero: amax floored at 1e-4 -> scale 2^ceil(log2(1e-4 / 6)) = 2^-15 (E = 112), codes 0
    cache = quantize_index_k(rows, fmt="mxfp4")
    assert cache.dtype == torch.uint8 and cache.shape == (1, 68)
    assert cache[0, 0] == 3 | (15 << 4)
    assert cache[0, 16] == 7 and cache[0, 32] == 7 | (7 << 4) and cache[0, 48] == 0
    assert cache[0, 64:].tolist() == [127, 124, 126, 112]
    assert torch.equal(dequantize_index_k(cache), rows)


def test_mxfp4_rounds_to_nearest_even():
    """Halfway values go to the even code (mantissa bit 0), as SGLang's fused DeepSeek-V4 packer rounds; the block's
    largest value sets a scale that keeps every value within ±6."""
    halves = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    rows = torch.zeros(1, 128)
    rows[0, :7] = torch.tensor(halves)
    rows[0, 7] = 6.0  # block amax 6: scale 1
    rows[0, 8:15] = -torch.tensor(halves)
    got = dequantize_index_k(quantize_index_k(rows, fmt="mxfp4"))[0]
    assert got[:7].tolist() == want and got[8:15].tolist() == [-x for x in want]
    codes = torch.arange(16, dtype=torch.uint8)
    cache = torch.zeros(16, 68, dtype=torch.uint8)
    cache[:, 0] = codes | (codes << 4)
    cache[:, 64:] = 127
    decoded = dequantize_index_k(cache)[:, :2]
    assert decoded[:, 0].tolist() == list(E2M1) + [-v for v in E2M1] and torch.equal(decoded[:, 0], decoded[:, 1])


def test_mxfp4_scale_bytes_extremes():
    """Exponent byte E gives 2^(E - 127) exactly, 0 and 254 included (fp64 where fp32 cannot hold it); 255 is NaN."""
    cache = torch.zeros(1, 68, dtype=torch.uint8)
    cache[0, :] = 0x77  # every value 6.0
    cache[0, 64:] = torch.tensor([0, 254, 255, 127], dtype=torch.uint8)
    rows = index_k_rows(cache.view(1, 1, 68))[0, 0]
    assert rows.dtype == torch.float64
    assert rows[0] == 6.0 * 2.0**-127 and rows[32] == 6.0 * 2.0**127
    assert bool(torch.isnan(rows[64:96]).all()) and bool((rows[96:] == 6.0).all())


def test_mxfp4_roundtrip_layouts_and_error():
    g = torch.Generator().manual_seed(2)
    rows = torch.randn(3, 8, 128, generator=g) * torch.logspace(-4, 4, 8)[None, :, None]
    per_row = quantize_index_k(rows, fmt="mxfp4")
    paged = quantize_index_k(rows, layout="paged", fmt="mxfp4")
    assert paged.shape == per_row.shape == (3, 8, 68)
    flat = paged.view(3, 8 * 68)
    assert torch.equal(flat[:, : 8 * 64].view(3, 8, 64), per_row[..., :64])  # code rows at a 64-byte pitch
    assert torch.equal(flat[:, 8 * 64 :].view(3, 8, 4), per_row[..., 64:])  # then every row's exponents
    back = dequantize_index_k(paged, layout="paged")
    assert torch.equal(back, dequantize_index_k(per_row))
    # e2m1 keeps 1 mantissa bit: |error| <= the block's scale (half the widest step, 4 -> 6 times the scale)
    scale = torch.ldexp(torch.ones(3, 8, 4), per_row[..., 64:].long() - 127)
    bound = scale.repeat_interleave(32, dim=-1)
    assert bool(((back - rows).abs() <= bound).all())
    assert torch.equal(dequantize_index_k(quantize_index_k(back, fmt="mxfp4")), back)  # lossless again
    with pytest.raises(ValueError, match="fmt"):
        quantize_index_k(rows, fmt="nvfp4")


# ---------------------------------------------------------------------------------------------------- visibility
def test_visible_rows_conventions():
    n = torch.tensor([10, 1, 0], dtype=torch.int32)
    assert visible_rows(n, 3).tolist() == [[8, 9, 10], [0, 0, 1], [0, 0, 0]]
    assert visible_rows(n, 1).tolist() == [[10], [1], [0]]
    assert visible_rows(n, 3, max_n_comp=9).tolist() == [[8, 9, 9], [0, 0, 1], [0, 0, 0]]
    explicit = torch.tensor([[3, 7], [5, 5], [-2, 0]], dtype=torch.int32)
    assert visible_rows(explicit, 2).tolist() == [[3, 7], [5, 5], [0, 0]]
    with pytest.raises(ValueError, match="n_comp"):
        visible_rows(explicit, 3)


def test_csa_visible_rows():
    pos = torch.tensor([[0, 2, 3, 4], [6, 7, 8, 2047]])
    assert csa_visible_rows(pos).tolist() == [[0, 0, 1, 1], [1, 2, 2, 512]]
    assert csa_visible_rows(pos, ratio=128).tolist() == [[0, 0, 0, 0], [0, 0, 0, 16]]
    with pytest.raises(ValueError, match="ratio"):
        csa_visible_rows(pos, ratio=0)


# ------------------------------------------------------------------------------------------------------ selection
def test_select_topk_rows_ties_nan_and_short():
    s = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, float("nan"), 3.0])
    assert select_topk_rows(s, 7, 2).tolist() == [1, 2]  # four-way tie at 3: lowest rows first
    assert select_topk_rows(s, 7, 4).tolist() == [1, 2, 4, 6]
    assert select_topk_rows(s, 7, 5).tolist() == [1, 2, 3, 4, 6]
    assert select_topk_rows(s, 7, 6).tolist() == [0, 1, 2, 3, 4, 6]  # NaN ranks last
    assert select_topk_rows(s, 3, 5).tolist() == [0, 1, 2]  # short: all visible rows, unscored
    z = torch.tensor([0.0, -0.0, 0.0, -1.0])
    assert select_topk_rows(z, 4, 2).tolist() == [0, 1]  # -0 == +0


def test_rows_to_slots_and_hand_example():
    table = torch.tensor([[5, 2, 7]], dtype=torch.int32)
    assert rows_to_slots(torch.tensor([0, 3, 4, 8]), table[0], 3).tolist() == [15, 6, 7, 23]
    # one head, weight 1: score of row i is max(0, k_i[0]) with q = e_0
    page = 3
    cache = torch.zeros(8, page, 128)
    values = [4.0, -1.0, 9.0, 9.0, 2.0, 7.0, 9.0, 0.5]  # rows 0..7 of the request
    for i, v in enumerate(values):
        cache[int(table[0, i // page]), i % page, 0] = v
    q = torch.zeros(1, 1, 16, 128)
    q[0, 0, 0, 0] = 1.0
    w = torch.zeros(1, 1, 16)
    w[0, 0, 0] = 1.0
    idx, length = lightning_indexer_ref(q, w, cache, table, torch.tensor([8], dtype=torch.int32), 4)
    # top-4: the 9s at rows 2, 3, 6 then 7.0 at row 5 -> rows [2, 3, 5, 6]
    assert idx.tolist() == [[[5 * 3 + 2, 2 * 3 + 0, 2 * 3 + 2, 7 * 3 + 0]]]
    assert length.tolist() == [[4]]
    idx, length = lightning_indexer_ref(q, w, cache, table, torch.tensor([8], dtype=torch.int32), 2)
    assert idx.tolist() == [[[17, 6]]]  # rows 2 and 3 win the three-way tie at 9
    idx, length = lightning_indexer_ref(q, w, cache, table, torch.tensor([2], dtype=torch.int32), 4)
    assert idx.tolist() == [[[15, 16, -1, -1]]] and length.tolist() == [[2]]


@pytest.mark.parametrize(
    ("b", "s_q", "page", "n_comp", "topk", "fp8"),
    [
        pytest.param(2, 1, 4, [13, 3], 5, False, id="B2-S1-P4-short-and-long"),
        pytest.param(1, 3, 5, [17], 6, False, id="B1-S3-P5-per-token-visibility"),
        pytest.param(2, 2, 1, [9, 0], 4, True, id="B2-S2-P1-fp8-empty-request"),
    ],
)
def test_reference_matches_brute_force(b, s_q, page, n_comp, topk, fp8):
    g = torch.Generator().manual_seed(7)
    heads = 16
    width = -(-max(n_comp) // page) + 1
    blocks = b * width + 2
    table = torch.randperm(blocks, generator=g)[: b * width].view(b, width).to(torch.int32)
    rows = torch.randint(-2, 3, (blocks, page, 128), generator=g).float()
    cache = quantize_index_k(rows) if fp8 else rows
    q = torch.randint(-2, 3, (b, s_q, heads, 128), generator=g).float()
    w = torch.randint(-3, 4, (b, s_q, heads), generator=g).float() / 4
    n = torch.tensor(n_comp, dtype=torch.int32)
    idx, length = lightning_indexer_ref(q, w, cache, table, n, topk)
    n_vis = visible_rows(n, s_q)
    dense = dequantize_index_k(cache).double() if fp8 else rows.double()
    expect = _brute_force(q, w, _rows_by_request(dense, table, page, int(n.max())), n_vis, topk, table, page)
    assert torch.equal(idx, expect)
    assert torch.equal(length, n_vis.clamp_max(topk).to(torch.int32))


def test_scores_ref_marks_invisible_rows():
    g = torch.Generator().manual_seed(3)
    page = 4
    cache = torch.randn(6, page, 128, generator=g)
    cache[5] = float("nan")  # a block no request uses
    table = torch.tensor([[2, 0, 5], [1, 3, 5]], dtype=torch.int32)
    q = torch.randn(2, 2, 16, 128, generator=g)
    w = torch.randn(2, 2, 16, generator=g)
    scores = indexer_scores_ref(q, w, cache, table, torch.tensor([6, 8], dtype=torch.int32))
    assert scores.shape == (2, 2, 12)
    vis = visible_rows(torch.tensor([6, 8]), 2)
    for i_b in range(2):
        for i_s in range(2):
            n = int(vis[i_b, i_s])
            assert bool(torch.isfinite(scores[i_b, i_s, :n]).all())
            assert bool((scores[i_b, i_s, n:] == -math.inf).all())
    # row 5 of request 0 is slot (0, 1): the score equals the formula
    k = cache[0, 1].double()
    want = (torch.relu(q[0, 1].double() @ k) * w[0, 1].double()).sum()
    assert scores[0, 1, 5].item() == pytest.approx(want.item(), rel=1e-12)


def test_topk_length_per_request():
    lengths = torch.tensor([[511, 512], [0, 3]], dtype=torch.int32)
    assert topk_length_per_request(lengths).tolist() == [512, 3]
    same = torch.tensor([[7, 7], [2, 2]], dtype=torch.int32)
    assert topk_length_per_request(same, require_uniform=True).tolist() == [7, 2]
    with pytest.raises(ValueError, match="topk_length"):
        topk_length_per_request(lengths, require_uniform=True)
    with pytest.raises(ValueError, match="topk_length"):
        topk_length_per_request(lengths.long())
    flat = torch.tensor([4, 5], dtype=torch.int32)
    assert topk_length_per_request(flat) is flat


def test_reference_rejects_bad_topk():
    with pytest.raises(ValueError, match="topk"):
        lightning_indexer_ref(
            torch.zeros(1, 1, 16, 128),
            torch.zeros(1, 1, 16),
            torch.zeros(1, 4, 128),
            torch.zeros(1, 1, dtype=torch.int32),
            torch.zeros(1, dtype=torch.int32),
            0,
        )


def test_quantize_index_q_folds_the_scale_into_the_weights():
    """Per-head power-of-two scales, codes within e4m3 range, and scores of (codes, folded weights) equal those of
    the dequantized queries with the original weights (a positive scale commutes with ReLU)."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 1, 4, 128, generator=gen) * torch.tensor([1e-3, 0.5, 3.0, 300.0]).view(1, 1, 4, 1)
    w = torch.randn(2, 1, 4, generator=gen)
    codes, w8 = quantize_index_q(q, w)
    assert codes.dtype == torch.float8_e4m3fn and codes.shape == q.shape and w8.dtype == torch.float32
    scale = w8 / w
    assert torch.all(scale > 0) and torch.equal(torch.exp2(torch.log2(scale).round()), scale)
    assert codes.float().abs().amax() <= 448
    deq = codes.double() * scale.double()[..., None]
    assert torch.allclose(deq, q.double(), rtol=2**-3, atol=0)  # e4m3: 3 mantissa bits
    cache = quantize_index_k(torch.randn(2, 8, 128, generator=gen))
    table = torch.tensor([[0], [1]], dtype=torch.int32)
    n_comp = torch.tensor([8, 8], dtype=torch.int32)
    folded = indexer_scores_ref(codes.float(), w8, cache, table, n_comp)
    plain = indexer_scores_ref(deq.float(), w, cache, table, n_comp)
    assert torch.allclose(folded, plain, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="q_idx"):
        quantize_index_q(torch.zeros(2, 4, 64), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="weights"):
        quantize_index_q(q, w[..., :3])
