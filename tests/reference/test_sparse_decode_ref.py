"""The sparse decode reference against the spec's loop form (one softmax over main and extra rows, the sink in the
denominator only) and the inputs it refuses."""

import math

import pytest
import torch

from wavemla.reference import sparse_decode_ref


def _loop_form(q, rows, sink, scale):
    """The spec's per-head formula for one query token: M = max(max_r s_r, sink), o = Σ e^(s_r-M) row_r / (Σ e^(s_r-M)
    + e^(sink-M)); lse = log Σ e^(s_r) without the sink."""
    out = torch.zeros(q.shape[0], 512, dtype=torch.float64)
    lse = torch.full((q.shape[0],), math.inf, dtype=torch.float64)
    if not rows:
        return out, lse
    r = torch.stack(rows)
    for h in range(q.shape[0]):
        s = (r @ q[h]) * scale
        m = max(float(s.max()), float(sink[h]))
        p = torch.exp(s - m)
        out[h] = (p @ r[:, :512]) / (p.sum() + math.exp(float(sink[h]) - m))
        lse[h] = torch.logsumexp(s, 0)
    return out, lse


@pytest.mark.parametrize("d", [512, 576], ids=["dsv4", "v32"])
def test_reference_matches_the_loop_form(d: int) -> None:
    g = torch.Generator().manual_seed(5)
    b, s_q, h, scale = 3, 2, 4, 0.07
    kv = torch.randn(5, 16, 1, d, generator=g, dtype=torch.float64)
    extra = torch.randn(4, 8, 1, d, generator=g, dtype=torch.float64)
    q = torch.randn(b, s_q, h, d, generator=g, dtype=torch.float64)
    idx = torch.randint(-3, 5 * 16 + 5, (b, s_q, 20), generator=g, dtype=torch.int32)  # -1..-3 and past the end
    e_idx = torch.randint(-1, 4 * 8 + 3, (b, s_q, 9), generator=g, dtype=torch.int32)
    length = torch.tensor([20, 7, -2], dtype=torch.int32)
    e_length = torch.tensor([3, 100, 9], dtype=torch.int32)
    sink = torch.randn(h, generator=g)
    out, lse = sparse_decode_ref(q, kv, idx, topk_length=length, extra_kv_cache=extra, extra_indices=e_idx,
                                 extra_topk_length=e_length, attn_sink=sink, softmax_scale=scale)  # fmt: skip
    main, more = kv.reshape(-1, d), extra.reshape(-1, d)
    for i in range(b):
        for s in range(s_q):
            rows = [main[j] for n, j in enumerate(idx[i, s].tolist()) if n < length[i] and 0 <= j < main.shape[0]]
            rows += [more[j] for n, j in enumerate(e_idx[i, s].tolist()) if n < e_length[i] and 0 <= j < more.shape[0]]
            want_out, want_lse = _loop_form(q[i, s], rows, sink.double(), scale)
            torch.testing.assert_close(out[i, s], want_out, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(lse[i, :, s], want_lse, rtol=1e-12, atol=1e-12)


def test_extra_indices_without_their_cache_refused() -> None:
    """Extra index lists with no extra cache would silently drop those rows from the softmax."""
    q = torch.randn(1, 1, 2, 512, dtype=torch.float64)
    kv = torch.randn(1, 4, 1, 512, dtype=torch.float64)
    idx = torch.zeros(1, 1, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="extra_kv_cache"):
        sparse_decode_ref(q, kv, idx, extra_indices=idx)
    with pytest.raises(ValueError, match="extra_kv_cache"):
        sparse_decode_ref(q, kv, idx, extra_topk_length=torch.ones(1, dtype=torch.int32))
