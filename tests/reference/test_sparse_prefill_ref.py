"""The sparse prefill reference by hand: one token's numbers worked out, and the edge semantics it defines."""

import math

import torch

from wavemla.reference.sparse_prefill import sparse_prefill_ref


def _rows(*vals):
    """kv ``[n, 1, 4]`` with row i = vals[i] in column 0 and zeros elsewhere (d_qk 4, d_v 4)."""
    kv = torch.zeros((len(vals), 1, 4), dtype=torch.float64)
    kv[:, 0, 0] = torch.tensor(vals, dtype=torch.float64)
    return kv


def test_one_token_by_hand():
    kv = _rows(1.0, 2.0, 3.0)
    q = torch.tensor([[[1.0, 0, 0, 0]]], dtype=torch.float64)  # [s_q=1, h=1, 4]
    idx = torch.tensor([[[0, 2, -1, 7]]], dtype=torch.int32)  # rows 0 and 2; -1 and 7 (>= s_kv) are invalid
    out, mx, lse = sparse_prefill_ref(q, kv, idx, sm_scale=0.5, d_v=4)
    s = [0.5, 1.5]
    want_lse = math.log(math.exp(s[0]) + math.exp(s[1]))
    assert math.isclose(lse.item(), want_lse, rel_tol=1e-12)
    assert math.isclose(mx.item(), 1.5, rel_tol=1e-12)
    want_out = (math.exp(s[0]) * 1.0 + math.exp(s[1]) * 3.0) / math.exp(want_lse)
    assert math.isclose(out[0, 0, 0].item(), want_out, rel_tol=1e-12)


def test_sink_enters_the_denominator_only():
    kv = _rows(1.0, 2.0)
    q = torch.tensor([[[1.0, 0, 0, 0]]], dtype=torch.float64)
    idx = torch.tensor([[[0, 1]]], dtype=torch.int32)
    plain, _, lse = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4)
    sunk, mx, lse_s = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4, attn_sink=torch.tensor([0.25]))
    factor = math.exp(lse.item()) / (math.exp(lse.item()) + math.exp(0.25))
    assert torch.allclose(sunk, plain * factor) and torch.equal(lse, lse_s) and mx.item() == 2.0
    zero, _, _ = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4, attn_sink=torch.tensor([math.inf]))
    same, _, _ = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4, attn_sink=torch.tensor([-math.inf]))
    assert (zero == 0).all() and torch.equal(same, plain)


def test_topk_length_and_no_valid_row():
    kv = _rows(1.0, 2.0, 3.0)
    q = torch.ones((3, 2, 4), dtype=torch.float64)
    idx = torch.tensor([[[0, 1, 2]], [[2, 1, 0]], [[0, 1, 2]]], dtype=torch.int32)
    length = torch.tensor([1, 99, -3], dtype=torch.int32)  # one entry; all (above topk); none (below 0)
    out, mx, lse = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4, topk_length=length)
    assert torch.allclose(out[0, :, 0], torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert torch.allclose(mx[1], torch.tensor([3.0, 3.0], dtype=torch.float64))
    assert (out[2] == 0).all() and (mx[2] == -math.inf).all() and (lse[2] == math.inf).all()


def test_rope_columns_score_but_are_not_values():
    """d_qk 576: the last 64 columns enter q·k, the output holds the first 512 only."""
    kv = torch.zeros((2, 1, 576), dtype=torch.float64)
    kv[0, 0, 536:] = 1.0  # 40 of row 0's 64 rope columns: it differs from row 1 there only
    kv[:, 0, 0] = torch.tensor([10.0, 20.0], dtype=torch.float64)
    q = torch.zeros((1, 1, 576), dtype=torch.float64)
    q[0, 0, 512:] = 1.0
    idx = torch.tensor([[[0, 1]]], dtype=torch.int32)
    out, mx, _ = sparse_prefill_ref(q, kv, idx, sm_scale=1.0)
    assert out.shape == (1, 1, 512)
    assert mx.item() == 40.0  # row 0: 40 rope columns of 1
    w0 = math.exp(40.0) / (math.exp(40.0) + 1.0)
    assert math.isclose(out[0, 0, 0].item(), 10.0 * w0 + 20.0 * (1 - w0), rel_tol=1e-12)


def test_an_empty_index_list_gives_zero_output():
    """topk 0 (the kernel accepts it): every token has no row, so out 0, max_logits -inf, lse +inf."""
    kv = _rows(1.0, 2.0)
    q = torch.ones((2, 3, 4), dtype=torch.float64)
    idx = torch.zeros((2, 1, 0), dtype=torch.int32)
    out, mx, lse = sparse_prefill_ref(q, kv, idx, sm_scale=1.0, d_v=4, attn_sink=torch.zeros(3))
    assert out.shape == (2, 3, 4) and mx.shape == lse.shape == (2, 3)
    assert (out == 0).all() and (mx == -math.inf).all() and (lse == math.inf).all()
