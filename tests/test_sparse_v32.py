"""DeepSeek-V3.2's sparse decode through the sparse call (q 576 wide): the dense decode's kernels over each token's
compacted index list, checked against the fp64 reference (``sparse_decode_ref`` reads V3.2's 576-wide rows)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wavemla
from tests.conftest import DEVICE
from wavemla import config
from wavemla.reference import sparse_decode_ref
from wavemla.reference.fp8_v32 import quantize_v32
from wavemla.testing import TOLERANCES, assert_close, dense_out_tolerance

LANE = "gpu" if DEVICE == "cuda" else "interp"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16


def _inputs(b: int, s_q: int, h_q: int, topk: int, *, page: int, blocks: int, fp8: bool, seed: int) -> dict:
    """q, a V3.2 cache (FP8 656-byte records or 576-wide rows of q's dtype) and index lists with invalid entries
    (-1, out of range, both ends of int32) spread through them."""
    gen = torch.Generator().manual_seed(seed)
    slots = blocks * page
    rows = torch.randn(blocks, page, 1, 576, generator=gen)
    cache = quantize_v32(rows) if fp8 else rows.to(DTYPE)
    idx = torch.randint(0, slots, (b, s_q, topk), generator=gen, dtype=torch.int32)
    bad = torch.rand(b, s_q, topk, generator=gen) < 0.3
    junk = torch.tensor([-1, slots, 2**31 - 1, -(2**31)], dtype=torch.int32)
    idx = torch.where(bad, junk[torch.randint(0, 4, (b, s_q, topk), generator=gen)], idx)
    q = (torch.randn(b, s_q, h_q, 576, generator=gen) * 0.5).to(DTYPE)
    return {"q": q.to(DEVICE), "kv_cache": cache.to(DEVICE), "indices": idx.to(DEVICE)}


def _pages_apart(cache: torch.Tensor, gap: int) -> torch.Tensor:
    """``cache`` with ``gap`` poisoned rows (NaN rows, 0xFF bytes) after each page: a view whose pages start
    ``page + gap`` rows apart, as a hybrid allocator puts other layers' pages between a cache's."""
    blocks, page, _, width = cache.shape
    wide = torch.empty((blocks, page + gap, 1, width), dtype=cache.dtype, device=cache.device)
    if cache.dtype in (torch.uint8, torch.float8_e4m3fn):
        wide.view(torch.uint8).fill_(0xFF)
    else:
        wide.fill_(float("nan"))
    wide[:, :page] = cache
    return wide[:, :page]


def _check(x: dict, **kwargs: object) -> None:
    out, lse = wavemla.sparse_mla_decode(**x, **kwargs)
    ref_out, ref_lse = sparse_decode_ref(**x, **kwargs)  # type: ignore[arg-type]
    assert out.shape == (*x["q"].shape[:3], 512) and out.dtype == x["q"].dtype
    assert lse.shape == (x["q"].shape[0], x["q"].shape[2], x["q"].shape[1]) and lse.dtype == torch.float32
    assert_close("out", out, ref_out, dense_out_tolerance(x["kv_cache"], LANE))
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", LANE)])


@pytest.mark.parametrize("fp8", [True, False], ids=["fp8-656", "rows-576"])
@pytest.mark.parametrize(("s_q", "page"), [(1, 64), (2, 1), (2, 16)])
def test_matches_the_reference(fp8: bool, s_q: int, page: int) -> None:
    x = _inputs(3, s_q, 16, 96, page=page, blocks=max(1, 256 // page), fp8=fp8, seed=s_q + page)
    _check(x)
    _check(x, softmax_scale=0.05)


def test_topk_length_sink_and_empty_tokens() -> None:
    """Per-request lengths (0, inside, beyond topk), a sink of -inf, +inf and finite values, and a request whose
    entries are all invalid (out 0, lse +inf)."""
    x = _inputs(4, 2, 16, 64, page=32, blocks=8, fp8=True, seed=9)
    x["indices"][3] = -1
    length = torch.tensor([0, 17, 64, 1000], dtype=torch.int32, device=DEVICE)
    sink = torch.linspace(-3, 3, 16, device=DEVICE)
    sink[0], sink[1] = -math.inf, math.inf
    _check(x, topk_length=length, attn_sink=sink)
    out, lse = wavemla.sparse_mla_decode(**x, topk_length=length, attn_sink=sink)
    assert bool((out[0] == 0).all() and (out[3] == 0).all()) and bool(torch.isinf(lse[0]).all())
    assert bool((out[1:3, :, 1] == 0).all())  # sink +inf


@settings(max_examples=16, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    b=st.integers(1, 3),
    s_q=st.integers(1, 6),
    h_q=st.sampled_from([1, 3, 16]),
    topk=st.integers(1, 100),
    page=st.sampled_from([1, 7, 64]),
    fp8=st.booleans(),
    lengths=st.sampled_from(["none", "mixed"]),
    sink=st.booleans(),
    views=st.booleans(),
    gap=st.sampled_from([0, 3]),
    out=st.sampled_from(["none", "contiguous", "strided"]),
    seed=st.integers(0, 2**16),
)
def test_random_calls_match_the_reference(
    b: int, s_q: int, h_q: int, topk: int, page: int, fp8: bool, lengths: str, sink: bool, views: bool, gap: int,
    out: str, seed: int,
) -> None:  # fmt: skip
    """Shapes (s_q past 4 too), pages (back to back or rows apart), lengths (negative, zero, inside, beyond topk),
    sinks, inputs that are views (q every other head of a wider tensor, lists cut from longer ones, the FP8 cache as
    float8_e4m3fn) and a caller's ``out`` (contiguous or strided, NaN-filled) drawn at random."""
    x = _inputs(b, s_q, h_q, topk, page=page, blocks=max(1, 200 // page), fp8=fp8, seed=seed)
    if gap:
        x["kv_cache"] = _pages_apart(x["kv_cache"], gap)
    if views:
        wide_q = torch.full((b, s_q, 2 * h_q, 576), float("nan"), dtype=DTYPE, device=DEVICE)
        wide_q[:, :, ::2] = x["q"]
        wide_idx = torch.full((b, s_q, topk + 5), 7, dtype=torch.int32, device=DEVICE)
        wide_idx[..., :topk] = x["indices"]
        x["q"], x["indices"] = wide_q[:, :, ::2], wide_idx[..., :topk]
        if fp8:
            x["kv_cache"] = x["kv_cache"].view(torch.float8_e4m3fn)
    kwargs: dict = {}
    if lengths == "mixed":
        choices = torch.tensor([-5, 0, topk // 2, topk, topk + 9], dtype=torch.int32)
        kwargs["topk_length"] = choices[torch.arange(b) % 5].to(DEVICE)
    if sink:
        kwargs["attn_sink"] = (torch.randn(h_q, generator=torch.Generator().manual_seed(seed)) * 2).to(DEVICE)
    _check(x, **kwargs)
    if out != "none":
        want, want_lse = wavemla.sparse_mla_decode(**x, **kwargs)
        shape = (b, s_q, h_q, 512) if out == "contiguous" else (h_q, s_q, b, 512)
        buf = torch.full(shape, float("nan"), dtype=DTYPE, device=DEVICE)
        buf = buf if out == "contiguous" else buf.permute(2, 1, 0, 3)
        got, lse = wavemla.sparse_mla_decode(**x, **kwargs, out=buf)
        assert got is buf and torch.equal(buf, want) and torch.equal(lse, want_lse)


@pytest.mark.parametrize("fp8", [True, False], ids=["fp8-656", "rows-576"])
def test_pages_apart_and_many_query_tokens(fp8: bool) -> None:
    """vLLM's V3.2 decode: a step's T query tokens as one request's (``[1, T, h_q, 576]``, T past 4) with one length,
    over a cache whose pages start rows apart (other layers' pages between them, poisoned here: NaN rows, 0xFF
    bytes), as its hybrid allocator lays caches out."""
    page, blocks, gap = 16, 12, 5
    x = _inputs(1, 9, 16, 40, page=page, blocks=blocks, fp8=fp8, seed=11)
    dense = x["kv_cache"]
    x["kv_cache"] = _pages_apart(dense, gap)
    assert x["kv_cache"].stride(0) == (page + gap) * dense.shape[-1]
    length = torch.tensor([33], dtype=torch.int32, device=DEVICE)
    _check(x, topk_length=length, attn_sink=torch.linspace(-1, 1, 16, device=DEVICE))
    out, lse = wavemla.sparse_mla_decode(**x, topk_length=length)
    want, want_lse = wavemla.sparse_mla_decode(**{**x, "kv_cache": dense}, topk_length=length)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)  # the same rows, wherever the pages lie


def test_invalid_entries_are_never_read() -> None:
    """Every slot no valid entry names holds NaN: the output stays the reference's."""
    x = _inputs(2, 2, 16, 80, page=8, blocks=32, fp8=False, seed=4)
    named = torch.zeros(32 * 8, dtype=torch.bool, device=DEVICE)
    idx = x["indices"].long()
    ok = (idx >= 0) & (idx < 32 * 8)
    named[idx[ok]] = True
    rows = x["kv_cache"].view(-1, 576)
    rows[~named] = float("nan")
    _check(x)


def test_the_flashmla_call_and_out() -> None:
    """FlashMLA's call (``is_fp8_kvcache`` with the 656-byte cache, no block table) and a caller's ``out``."""
    x = _inputs(2, 1, 16, 64, page=64, blocks=4, fp8=True, seed=2)
    ref, ref_lse = wavemla.sparse_mla_decode(**x)
    sched, _ = wavemla.get_mla_metadata()
    out = torch.full_like(ref, float("nan"))
    got, lse = wavemla.flash_mla_with_kvcache(
        x["q"], x["kv_cache"], None, None, 512, sched, is_fp8_kvcache=True, indices=x["indices"], out=out
    )
    assert got is out and torch.equal(out, ref) and torch.equal(lse, ref_lse)
    got, _ = wavemla.flash_mla_with_kvcache(
        x["q"], x["kv_cache"], None, None, 512, sched, is_fp8_kvcache=True, indices=x["indices"]
    )
    assert torch.equal(got, ref)  # the metadata's second call


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_sink_with_the_callers_out(layout: str) -> None:
    """With a sink, the output reaches a caller's ``out`` scaled: written by the dense decode and scaled in place
    where ``out`` is contiguous, scaled into it from the decode's own tensor where it is not; the call returns it."""
    x = _inputs(2, 2, 16, 64, page=16, blocks=8, fp8=True, seed=5)
    sink = torch.linspace(-2, 2, 16, device=DEVICE)
    ref, ref_lse = wavemla.sparse_mla_decode(**x, attn_sink=sink)
    if layout == "contiguous":
        out = torch.full((2, 2, 16, 512), float("nan"), dtype=DTYPE, device=DEVICE)
    else:
        out = torch.full((16, 2, 2, 512), float("nan"), dtype=DTYPE, device=DEVICE).permute(1, 2, 0, 3)
    got, lse = wavemla.sparse_mla_decode(**x, attn_sink=sink, out=out)
    assert got is out and torch.equal(out, ref) and torch.equal(lse, ref_lse)
    _check(x, attn_sink=sink)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extra_kv_cache": "kv"}, r"^extra_kv_cache: DeepSeek-V4's second cache; DeepSeek-V3\.2's sparse decode"),
        ({"batch_invariant": True}, r"^batch_invariant: DeepSeek-V3\.2's sparse decode \(q of 576\) has no"),
        ({"kv_cache": "wide"}, r"^kv_cache: DeepSeek-V3\.2's FP8 cache has 656 bytes per token, got 584"),
        ({"kv_cache": "rows512"}, r"^kv_cache: DeepSeek-V3\.2's sparse decode reads 576-wide rows of q's dtype"),
        ({"kv_cache": "torn"}, r"^kv_cache: DeepSeek-V3\.2's sparse decode reads the cache as rows of 656: its rows"),
        ({"q": "no-tokens"}, r"^q: s_q \(dim 1\) must be at least 1, got 0"),
        ({"attn_sink": "short"}, r"^attn_sink: expected a \[h_q=16\] fp32 tensor"),
        ({"indices": "empty"}, r"^indices: topk is 0"),
    ],
)
def test_refusals_name_the_argument(change: dict, message: str) -> None:
    x = _inputs(1, 1, 16, 32, page=64, blocks=2, fp8=True, seed=1)
    made = {
        "kv": x["kv_cache"],
        "wide": torch.zeros(2, 64, 1, 584, dtype=torch.uint8, device=DEVICE),
        "rows512": torch.zeros(2, 64, 1, 512, dtype=DTYPE, device=DEVICE),
        # pages 42,312 bytes apart (64 rows and half a row): not a whole number of 656-byte rows
        "torn": torch.zeros(2, 42312, dtype=torch.uint8, device=DEVICE)[:, : 64 * 656].view(2, 64, 1, 656),
        "no-tokens": torch.zeros(1, 0, 16, 576, dtype=DTYPE, device=DEVICE),
        "short": torch.zeros(8, device=DEVICE),
        "empty": torch.zeros(1, 1, 0, dtype=torch.int32, device=DEVICE),
    }
    kwargs = {k: made.get(v, v) if isinstance(v, str) else v for k, v in change.items()}
    if "extra_kv_cache" in kwargs:
        kwargs["extra_indices"] = x["indices"]
    with pytest.raises(ValueError, match=message):
        wavemla.sparse_mla_decode(**{**x, **kwargs})


def test_the_knob_asking_for_invariance_is_refused() -> None:
    x = _inputs(1, 1, 16, 32, page=64, blocks=2, fp8=True, seed=1)
    with config.override(WAVEMLA_BATCH_INVARIANT=True), pytest.raises(ValueError, match=r"^batch_invariant: "):
        wavemla.sparse_mla_decode(**x)
    wavemla.sparse_mla_decode(**x, batch_invariant=False)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA-graph capture")
def test_gpu_graph_capture_with_new_lists() -> None:
    """No host read: the call records into a CUDA graph and replays on new index lists and lengths (h = 128,
    FlashMLA's DeepSeek-V3.2 shape, 2048 entries, a sink)."""
    x = _inputs(4, 2, 128, 2048, page=64, blocks=256, fp8=True, seed=7)
    x["topk_length"] = torch.tensor([2048, 100, 0, 1500], dtype=torch.int32, device=DEVICE)
    x["attn_sink"] = torch.linspace(-4, 4, 128, device=DEVICE)
    sched, _ = wavemla.get_mla_metadata()
    out = torch.empty(4, 2, 128, 512, dtype=DTYPE, device=DEVICE)
    lse_box = []
    wavemla.sparse_mla_decode(**x, metadata=sched, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lse_box.append(wavemla.sparse_mla_decode(**x, metadata=sched, out=out)[1])
    new = _inputs(4, 2, 128, 2048, page=64, blocks=256, fp8=True, seed=8)["indices"]
    x["indices"].copy_(new)
    x["topk_length"].copy_(torch.tensor([7, 2048, 1024, 0], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    ref_out, ref_lse = sparse_decode_ref(**x)
    assert_close("out", out, ref_out, dense_out_tolerance(x["kv_cache"], "gpu"))
    assert_close("lse", lse_box[0], ref_lse, TOLERANCES[("lse", "gpu")])


def test_list_and_sink_kernels_launch_under_qs_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list compaction and the sink's scaling run inside the guard that makes q's device the current one, as the
    dense decode between them does: with q on a GPU other than the current one they would otherwise launch on the
    current GPU with pointers into the other."""
    import contextlib

    from wavemla.kernels import launch, v32_lists

    guarded: list[bool] = []
    active = [0]

    @contextlib.contextmanager
    def guard(device: torch.device):  # type: ignore[no-untyped-def]
        active[0] += 1
        try:
            yield
        finally:
            active[0] -= 1

    def watch(fn):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            guarded.append(active[0] > 0)
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(launch, "device_guard", guard)
    monkeypatch.setattr(v32_lists, "compact_lists", watch(v32_lists.compact_lists))
    monkeypatch.setattr(v32_lists, "scale_by_sink", watch(v32_lists.scale_by_sink))
    x = _inputs(2, 1, 16, 32, page=16, blocks=4, fp8=True, seed=3)
    wavemla.sparse_mla_decode(**x, attn_sink=torch.zeros(16, device=DEVICE))
    assert guarded == [True, True]
