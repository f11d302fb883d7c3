"""The public calls' engine-facing parts: ``out`` (the decodes write into a caller's buffer, as vLLM's DeepSeek-V4
decode passes ``out=output.unsqueeze(1)``) and the metadata's ``have_initialized`` (FlashMLA's, which engines reset)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

import wavemla
from tests.conftest import DEVICE
from wavemla import config
from wavemla.api import _check_out
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs

DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16  # the interpreter's bf16 tl.dot is wrong
H_Q = 16


def sparse_inputs(batch: int = 3, seed: int = 5) -> dict[str, Any]:
    return make_sparse_decode_inputs(batch=batch, h_q=H_Q, topk=64, page=64, extra_topk=64, extra_page=16,
                                     dtype=DTYPE, device=DEVICE, invalid_fraction=0.1, seed=seed)  # fmt: skip


def dense_inputs(seed: int = 5) -> dict[str, Any]:
    return make_dense_decode_inputs(lengths=[70, 0, 129], h_q=H_Q, page=64, dtype=DTYPE, device=DEVICE, seed=seed)


def padded_heads(b: int, s_q: int) -> torch.Tensor:
    """A view of 16 heads inside a 19-head buffer: not contiguous, so the result is copied in."""
    return torch.full((b, s_q, H_Q + 3, 512), float("nan"), dtype=DTYPE, device=DEVICE)[:, :, :H_Q]


def misaligned(b: int, s_q: int) -> torch.Tensor:
    """Contiguous, but 2 bytes past a 16-byte boundary: the result is copied in."""
    flat = torch.full((b * s_q * H_Q * 512 + 8,), float("nan"), dtype=DTYPE, device=DEVICE)
    out = flat[1 : 1 + b * s_q * H_Q * 512].view(b, s_q, H_Q, 512)
    assert out.data_ptr() % 16 and out.is_contiguous()
    return out


def vllm_style(b: int, s_q: int) -> torch.Tensor:
    """vLLM's ``output.unsqueeze(1)`` of a ``[tokens, heads, 512]`` buffer (contiguous; dim 1 has one element)."""
    assert s_q == 1
    return torch.full((b, H_Q, 512), float("nan"), dtype=DTYPE, device=DEVICE).unsqueeze(1)


def contiguous(b: int, s_q: int) -> torch.Tensor:
    return torch.full((b, s_q, H_Q, 512), float("nan"), dtype=DTYPE, device=DEVICE)


OUTS: list[Callable[[int, int], torch.Tensor]] = [contiguous, vllm_style, padded_heads, misaligned]
OUT_IDS = ["contiguous", "vllm-unsqueeze", "padded-heads", "misaligned"]


DECODES = {"sparse": (sparse_inputs, wavemla.sparse_mla_decode), "dense": (dense_inputs, wavemla.dense_mla_decode)}


@pytest.mark.parametrize("decode", sorted(DECODES))
@pytest.mark.parametrize("make_out", OUTS, ids=OUT_IDS)
def test_decode_writes_out(make_out: Callable[[int, int], torch.Tensor], decode: str) -> None:
    make_inputs, call = DECODES[decode]
    x = make_inputs()
    ref_out, ref_lse = call(**x)
    out = make_out(3, 1)
    got, lse = call(**x, out=out)
    assert got is out
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


@pytest.mark.parametrize("make_out, direct", list(zip(OUTS, [True, True, False, False], strict=True)), ids=OUT_IDS)
def test_out_is_written_directly_where_its_layout_allows(make_out: Callable[[int, int], torch.Tensor], direct: bool):
    """Contiguous and 16-byte aligned (dimensions of one element may have any stride): the kernels get out's memory
    with a contiguous tensor's strides; otherwise None (the result is computed apart and copied in)."""
    x = sparse_inputs()
    out = make_out(3, 1)
    target = _check_out(out, x["q"], 512, ("q", "kv_cache"), (x["q"], x["kv_cache"]))
    if not direct:
        assert target is None
        return
    assert target is not None and target.data_ptr() == out.data_ptr()
    assert target.stride() == (H_Q * 512, H_Q * 512, 512, 1) and target.shape == out.shape


def test_flash_mla_call_passes_out_through() -> None:
    """vLLM's DeepSeek-V4 call: FlashMLA's keywords plus ``out``, the returned output unused."""
    x = sparse_inputs()
    x["topk_length"] = torch.tensor([64, 20, 0], dtype=torch.int32, device=DEVICE)
    x["extra_topk_length"] = torch.tensor([5, 64, 33], dtype=torch.int32, device=DEVICE)
    ref_out, _ = wavemla.sparse_mla_decode(**x)
    output = torch.full((3, H_Q, 512), float("nan"), dtype=DTYPE, device=DEVICE)
    sched, _ = wavemla.get_mla_metadata()
    wavemla.flash_mla_with_kvcache(
        q=x["q"], k_cache=x["kv_cache"], block_table=None, head_dim_v=512, tile_scheduler_metadata=sched,
        cache_seqlens=None, is_fp8_kvcache=True, indices=x["indices"], topk_length=x["topk_length"],
        softmax_scale=None, attn_sink=x["attn_sink"], extra_k_cache=x["extra_kv_cache"],
        extra_indices_in_kvcache=x["extra_indices"], extra_topk_length=x["extra_topk_length"],
        out=output.unsqueeze(1),
    )  # fmt: skip
    assert torch.equal(output, ref_out[:, 0])

    d = dense_inputs()
    ref_dense, _ = wavemla.dense_mla_decode(**d)
    out = contiguous(3, 1)
    got, _ = wavemla.flash_mla_with_kvcache(
        d["q"], d["k_cache"], d["block_table"], d["cache_seqlens"], 512, wavemla.get_mla_metadata()[0], out=out
    )
    assert got is out and torch.equal(out, ref_dense)


def test_empty_batch_returns_out_untouched() -> None:
    x = sparse_inputs()
    x = {k: (v[:0] if isinstance(v, torch.Tensor) and k not in ("kv_cache", "extra_kv_cache", "attn_sink") else v)
         for k, v in x.items()}  # fmt: skip
    out = contiguous(0, 1)
    got, lse = wavemla.sparse_mla_decode(**x, out=out)
    assert got is out and lse.shape == (0, H_Q, 1)


def bad_outs(q: torch.Tensor) -> list[tuple[Any, str]]:
    b, s_q, h_q, _ = q.shape
    return [
        (q.new_empty(b, s_q, h_q, 512).tolist(), r"out: expected a torch\.Tensor, got list"),
        (q.new_empty(b, s_q, h_q + 1, 512), r"out: expected \[3, 1, 16, 512\] torch\.(bfloat16|float16) on"),
        (q.new_empty(b + 1, s_q, h_q, 512), r"out: expected \[3, 1, 16, 512\]"),
        (q.new_empty(b, s_q, h_q, 512, dtype=torch.float32), r"out: expected .* got \[3, 1, 16, 512\] torch\.float32"),
        (q.new_empty(1, 1, 1, 512).expand(b, s_q, h_q, 512), r"out: a zero stride makes elements share memory"),
    ]


def test_bad_out_names_the_argument() -> None:
    x = sparse_inputs()
    for out, message in bad_outs(x["q"]):
        with pytest.raises(ValueError, match=message):
            wavemla.sparse_mla_decode(**x, out=out)
    d = dense_inputs()
    for out, message in bad_outs(d["q"]):
        with pytest.raises(ValueError, match=message):
            wavemla.dense_mla_decode(**d, out=out)


def test_out_sharing_an_inputs_memory_is_refused() -> None:
    """The kernels read q (and every other input) while they write out: an aliased out would race."""
    x = sparse_inputs()
    with pytest.raises(ValueError, match=r"^out: shares memory with q \(the kernels read q while they write out\)"):
        wavemla.sparse_mla_decode(**x, out=x["q"])
    big = torch.zeros(x["kv_cache"].numel() // 2, dtype=DTYPE, device=DEVICE)  # the cache's bytes seen as q's dtype
    cache = big.view(torch.uint8).view(x["kv_cache"].shape)
    cache.copy_(x["kv_cache"].view(torch.uint8))
    alias = big[: 3 * H_Q * 512].view(3, 1, H_Q, 512)
    with pytest.raises(ValueError, match=r"^out: shares memory with kv_cache"):
        wavemla.sparse_mla_decode(**{**x, "kv_cache": cache}, out=alias)
    d = dense_inputs()
    with pytest.raises(ValueError, match=r"^out: shares memory with q"):
        wavemla.dense_mla_decode(**d, out=d["q"][..., :512])


def test_batch_invariant_false_runs_the_default_plan_with_the_knob_set() -> None:
    """The plan a call records follows its ``batch_invariant`` argument; the knob decides only where it is None."""
    x = sparse_inputs()
    plans = {}
    for name, knob, arg in (("free", False, None), ("knob", True, None), ("false", True, False)):
        sched, _ = wavemla.get_mla_metadata()
        with config.override(WAVEMLA_BATCH_INVARIANT=knob):
            wavemla.sparse_mla_decode(**x, metadata=sched, batch_invariant=arg)
        assert sched.plan is not None
        plans[name] = sched.plan
    assert plans["knob"].pieces_tiles is not None
    assert plans["false"] == plans["free"] and plans["false"].pieces_tiles is None


def test_have_initialized_resets_the_plan() -> None:
    """Engines set ``have_initialized = False`` on FlashMLA's metadata to have the next call plan again (SGLang's
    FlashMLA backend does so before CUDA-graph capture): the next call plans for its own shape."""
    sched, _ = wavemla.get_mla_metadata()
    assert sched.have_initialized is False
    with pytest.raises(ValueError, match=r"^have_initialized: only False can be set"):
        sched.have_initialized = True
    x = sparse_inputs()
    ref_out, ref_lse = wavemla.sparse_mla_decode(**x)
    wavemla.sparse_mla_decode(**x, metadata=sched)
    assert sched.have_initialized is True and sched.buffers()
    sched.have_initialized = True  # already planned: nothing changes
    assert sched.have_initialized is True
    d = dense_inputs()
    with pytest.raises(ValueError, match=r"^metadata \(tile_scheduler_metadata\): planned for"):
        wavemla.dense_mla_decode(**d, metadata=sched)
    sched.have_initialized = False
    assert sched.have_initialized is False and sched.buffers() == [] and sched.plan is None and sched.replays == []
    wavemla.dense_mla_decode(**d, metadata=sched)  # planned again, for the dense shape
    sched.have_initialized = False
    out, lse = wavemla.sparse_mla_decode(**x, metadata=sched)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="launch replays and CUDA graphs need a GPU")
def test_gpu_out_through_replays_and_graphs() -> None:
    """A metadata object's second call replays the first's launches (kernels.launch) into a new out; a CUDA graph
    captured with a static out writes it on every replay (vLLM's pattern)."""
    x = sparse_inputs(batch=8)
    ref_out, _ = wavemla.sparse_mla_decode(**x)
    sched, _ = wavemla.get_mla_metadata()
    for make_out in OUTS:
        for _ in range(2):  # the second call goes through the replay
            out = make_out(8, 1)
            got, _ = wavemla.sparse_mla_decode(**x, metadata=sched, out=out)
            assert got is out and torch.equal(out, ref_out)

    static: dict[str, Any] = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in x.items()}
    output = torch.empty((8, H_Q, 512), dtype=DTYPE, device=DEVICE)
    graph_sched, _ = wavemla.get_mla_metadata()
    wavemla.sparse_mla_decode(**static, metadata=graph_sched, out=output.unsqueeze(1))  # plan, compile
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        wavemla.sparse_mla_decode(**static, metadata=graph_sched, out=output.unsqueeze(1))
    for seed in (11, 12):
        new = sparse_inputs(batch=8, seed=seed)
        for k, v in new.items():
            if isinstance(v, torch.Tensor):
                static[k].copy_(v)
        output.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(output, wavemla.sparse_mla_decode(**new)[0][:, 0])


def test_a_v32_q_over_a_v4_cache_names_the_cache() -> None:
    """A 576-wide q with indices is DeepSeek-V3.2's sparse decode (tests/test_sparse_v32.py): over DeepSeek-V4's MODEL1
    cache it is refused naming the cache; another width names q."""
    x = {k: v for k, v in sparse_inputs().items() if not k.startswith("extra_")}
    q = torch.zeros((*x["q"].shape[:3], 576), dtype=DTYPE, device=DEVICE)
    with pytest.raises(ValueError, match=r"^kv_cache: DeepSeek-V3\.2's FP8 cache has 656 bytes per token, got 584"):
        wavemla.sparse_mla_decode(**{**x, "q": q})
    q = torch.zeros((*x["q"].shape[:3], 640), dtype=DTYPE, device=DEVICE)
    with pytest.raises(ValueError, match=r"^q: expected head_dim 512 \(DeepSeek-V4 latent\) or 576 .*got 640"):
        wavemla.sparse_mla_decode(**{**x, "q": q})


@pytest.mark.parametrize(
    ("record", "named"),
    [
        (528, r"528 \(DeepSeek-V4\.1's MXFP8 record, 512 e4m3 values"),
        (288, r"288 \(DeepSeek-V4\.1's FP4 record"),
        (656, r"656 \(the V3\.2 FP8 record.*dense decode"),
        (576, r"576 \(per-tensor FP8 rows .*read by the dense decode with descale_k"),
        (600, "600$"),
    ],
)
def test_another_deepseek_record_is_named(record: int, named: str) -> None:
    """An FP8 cache of another DeepSeek record than MODEL1's 584 bytes: refused, naming the record where it knows it
    (engines write DeepSeek-V4.1's 528-byte MXFP8 and 288-byte FP4 records: vLLM 0.34 on SM100 GPUs)."""
    x = sparse_inputs()
    kv = torch.zeros(4, 64, 1, record, dtype=torch.uint8, device=DEVICE)
    with pytest.raises(ValueError, match=rf"^kv_cache: an FP8 MODEL1 cache has 584 bytes per token, got {named}"):
        wavemla.sparse_mla_decode(**{**x, "kv_cache": kv})


def test_an_unknown_gpu_preset_is_named_on_either_lane() -> None:
    """``WAVEMLA_GPU`` naming no preset fails planning with an error naming the knob, on a CPU tensor as on a GPU
    one (the interpreter's lane plans for the preset too)."""
    from wavemla import config

    with config.override(WAVEMLA_GPU="h300"), pytest.raises(ValueError, match=r"^WAVEMLA_GPU='h300': "):
        wavemla.sparse_mla_decode(**sparse_inputs())


def test_backward_through_a_call_is_refused_naming_the_inputs() -> None:
    """The kernels compute no gradients: where autograd records and an argument needs one, a backward pass through
    any output raises naming those arguments, instead of leaving them without; the values are those of the call
    under ``torch.no_grad``. The DeepSeek-V3.2 decode, whose dense decode inside it scales its output in place,
    runs so too."""
    from tests.test_sparse_v32 import _inputs as v32_inputs

    x = sparse_inputs()
    with torch.no_grad():
        want_out, want_lse = wavemla.sparse_mla_decode(**x)
    q = x["q"].clone().requires_grad_()
    out, lse = wavemla.sparse_mla_decode(**{**x, "q": q})
    assert torch.equal(out.detach(), want_out) and torch.equal(lse.detach(), want_lse)
    for result in (out, lse):
        with pytest.raises(RuntimeError, match=r"^q: wavemla's attention kernels compute no gradients"):
            result.float().sum().backward(retain_graph=True)
    v = v32_inputs(2, 1, 16, 32, page=16, blocks=4, fp8=True, seed=3)
    sink = torch.zeros(16, device=DEVICE, requires_grad=True)
    out, _ = wavemla.sparse_mla_decode(**{**v, "q": v["q"].clone().requires_grad_()}, attn_sink=sink)
    with pytest.raises(RuntimeError, match=r"^q, attn_sink: wavemla's attention kernels compute no gradients"):
        out.float().sum().backward()


def far_apart_rows(page: int, token_stride: int, seed: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    """(a one-block row cache whose ``page`` rows lie ``token_stride`` elements apart, the same rows back to back):
    the memory between rows is allocated, never written."""
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn((1, page, 1, 512), generator=gen).to(DTYPE).to(DEVICE)
    flat = torch.empty((page - 1) * token_stride + 512, dtype=DTYPE, device=DEVICE)
    cache = flat.as_strided((1, page, 1, 512), (page * token_stride, token_stride, 512, 1))
    cache.copy_(rows)
    return cache, rows


def test_rows_of_a_page_past_int32_offsets_are_refused() -> None:
    """The kernels address a row inside its page as ``row · stride(1)`` in int32: a row cache whose page stride puts
    a page's last row 2^31 elements or more past its first is refused, naming the cache (it read memory before
    the cache, an illegal address on a GPU); below that the call is the one over the same rows back to back."""
    token_stride = 2**30 + 512  # rows 0 and 1 in reach, row 2 at 2^31 + 1024 elements
    q = torch.randn((1, 1, 4, 512), generator=torch.Generator().manual_seed(1)).to(DTYPE).to(DEVICE)
    none = torch.full((1, 1, 4), -1, dtype=torch.int32, device=DEVICE)  # nothing read: no fault before the fix
    far, _ = far_apart_rows(3, token_stride)
    message = r"a page's last row lies 2147484672 elements past its first"
    with pytest.raises(ValueError, match=rf"^kv_cache: {message}"):
        wavemla.sparse_mla_decode(q, far, none)
    near, _ = far_apart_rows(3, 512)
    with pytest.raises(ValueError, match=rf"^extra_kv_cache: {message}"):
        wavemla.sparse_mla_decode(q, near, none, extra_kv_cache=far, extra_indices=none)
    table, no_keys = torch.zeros((1, 1), dtype=torch.int32, device=DEVICE), torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match=rf"^k_cache: {message}"):
        wavemla.dense_mla_decode(q, far, table, no_keys.to(DEVICE))
    far, rows = far_apart_rows(2, token_stride)
    idx = torch.tensor([[[1, 0, -1, 1]]], dtype=torch.int32, device=DEVICE)
    got, want = wavemla.sparse_mla_decode(q, far, idx), wavemla.sparse_mla_decode(q, rows, idx)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    two = torch.full((1,), 2, dtype=torch.int32, device=DEVICE)
    got, want = wavemla.dense_mla_decode(q, far, table, two), wavemla.dense_mla_decode(q, rows, table, two)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_a_row_cache_not_of_qs_dtype_is_named_before_the_extra_cache() -> None:
    """kv_cache rows of another dtype than q's, beside extra_kv_cache rows of q's dtype: the error names kv_cache,
    the cache that does not match q (not extra_kv_cache, which does)."""
    x = make_sparse_decode_inputs(batch=2, h_q=4, topk=8, page=8, extra_topk=8, extra_page=8, fp8=False,
                                  dtype=torch.float16, device=DEVICE, seed=1)  # fmt: skip
    other = x["kv_cache"].to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"^kv_cache: bf16/fp16 rows must match q's dtype torch\.float16"):
        wavemla.sparse_mla_decode(**{**x, "kv_cache": other})


def test_the_planner_describes_the_gpu_of_the_call_not_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU a call is planned for is that of its tensors, whichever GPU is current: the spec is kept per device,
    so one read off the current GPU would plan every later call on the other for the wrong GPU (SM count, shared
    memory). FlashMLA's legacy schedule and the sparse prefill ask for it outside the call's device guard."""
    from wavemla import api, config
    from wavemla.device import DeviceSpec, get_spec

    def from_torch(device: Any = None) -> DeviceSpec:  # GPU 1 an H100, the current GPU (0) an H200
        return get_spec("h100" if device is not None and torch.device(device).index == 1 else "h200")

    monkeypatch.setattr(DeviceSpec, "from_torch", staticmethod(from_torch))
    monkeypatch.setattr(api, "_SPECS", {})
    with config.override(WAVEMLA_GPU=None):
        assert api._device_spec(torch.device("cuda", 1)) == get_spec("h100")
        assert api._device_spec(torch.device("cuda", 0)) == get_spec("h200")


def test_the_prefills_lengths_are_refused_as_per_token() -> None:
    """The sparse prefill takes one length per query token (``[s_q]``; it has no batch): a wrong shape is refused
    naming s_q, not b."""
    q = torch.zeros((3, 4, 512), dtype=torch.float16, device=DEVICE)
    kv = torch.zeros((8, 1, 512), dtype=torch.float16, device=DEVICE)
    idx = torch.zeros((3, 1, 4), dtype=torch.int32, device=DEVICE)
    lengths = torch.zeros(4, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match=r"^topk_length: expected shape \[s_q=3\], got \[4\]$"):
        wavemla.sparse_mla_prefill(q, kv, idx, 0.1, topk_length=lengths)


@pytest.mark.parametrize("value", ["false", 0, 1.0], ids=["str", "int", "float"])
def test_batch_invariant_must_be_a_bool(value: Any) -> None:
    """A string "false" read as True (``bool("false")``): both decodes take a bool or None, else refuse naming it."""
    from wavemla import dense_mla_decode, sparse_mla_decode

    with pytest.raises(ValueError, match=r"^batch_invariant: expected a bool or None, got "):
        sparse_mla_decode(**sparse_inputs(), batch_invariant=value)
    with pytest.raises(ValueError, match=r"^batch_invariant: expected a bool or None, got "):
        dense_mla_decode(**dense_inputs(), batch_invariant=value)


# 64-row tiles of 16 heads over 3 programs: tokens cut between programs, merged in the split kernel by the program
# that completes each token's piece counter (MLAMetadata.counts)
MERGED_IN_KERNEL = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1,
                        WAVEMLA_NUM_SPLITS=3)  # fmt: skip


def merged_inputs() -> dict[str, Any]:
    x = make_sparse_decode_inputs(batch=3, s_q=2, h_q=16, topk=100, page=32, extra_topk=160, extra_page=16,
                                  fp8=True, dtype=torch.float16, device=DEVICE, seed=4)  # fmt: skip
    return {k: v for k, v in x.items() if v is not None}


def test_counters_made_under_capture_are_zeroed_by_the_next_uncaptured_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metadata object planned under CUDA-graph capture gets piece counters whose zero fill the capture records: it
    runs when the graph replays, not before. An uncaptured call with the object before that found the counters
    holding whatever the memory held, and merged the cut tokens wrongly (or not at all); it zeroes them first."""
    from wavemla import api

    x = merged_inputs()
    with config.override(**MERGED_IN_KERNEL):
        want = wavemla.sparse_mla_decode(**x)
        meta, _ = wavemla.get_mla_metadata()
        monkeypatch.setattr(api, "_capturing", lambda t: True)
        wavemla.sparse_mla_decode(**x, metadata=meta)  # planned (and its counters made) under capture
        assert meta.plan is not None and meta.plan.merge_in_kernel and meta.counts is not None
        meta.counts.fill_(5)  # the recorded zero fill has not run: the memory holds anything
        monkeypatch.setattr(api, "_capturing", lambda t: False)
        got = wavemla.sparse_mla_decode(**x, metadata=meta)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert not meta.counts.any() and not meta.counts_pending  # zeroed once: the kernels keep them at zero


class CountsAtLaunch:
    """A launch replay as the decode calls drive it (bound to a metadata object's workspace, here its counters
    alone): notes the counters each launch finds."""

    def __init__(self, seen: list[torch.Tensor], keep: list[torch.Tensor] | None = None) -> None:
        self.seen, self.keep = seen, keep

    def bound(self, keep: list[torch.Tensor]) -> CountsAtLaunch:
        return CountsAtLaunch(self.seen, keep)

    def launch(self, inputs: Any, ptrs: Any) -> None:
        assert self.keep is not None
        self.seen.append(self.keep[0].clone())


def _stored_first_call(
    monkeypatch: pytest.MonkeyPatch, seen: list[torch.Tensor], buffers: tuple[tuple[str, tuple[int, ...], Any], ...]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A sparse call's tensors and scalars (CPU tensors on a GPU call's path) whose signature has a stored first
    call (``api._FIRST_CALLS``) with a stand-in replay that notes the counters at each launch into ``seen``."""
    from wavemla import api
    from wavemla.kernels import launch

    monkeypatch.setattr(launch, "replayable", lambda tensors, scalars: True)
    monkeypatch.setattr(api, "_FIRST_CALLS", launch.ReplayCache(4))
    q = torch.zeros((1, 1, 4, 512), dtype=torch.float16)
    tensors = (q, *[None] * 7)
    scalars = ("sparse", None, None)
    sig, _ = launch.call_key(tensors, scalars)
    first = api._FirstCall(cast(Any, CountsAtLaunch(seen)), ("planned",), buffers=buffers)
    api._FIRST_CALLS.put(api._first_call_key(sig), first)
    return tensors, scalars


def test_replayed_calls_zero_counters_made_under_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay path keeps the same rule: a fresh object that adopts the first call of its signature under capture
    gets counters whose zero fill runs when the graph replays; its next uncaptured replay zeroes them first."""
    from wavemla import api

    seen: list[torch.Tensor] = []
    tensors, scalars = _stored_first_call(monkeypatch, seen, (("counts", (4,), torch.int32),))
    meta, _ = wavemla.get_mla_metadata()
    monkeypatch.setattr(api, "_capturing", lambda t: True)
    assert api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)[2] is not None  # adopted
    assert meta.counts is not None and meta.counts_pending
    meta.counts.fill_(5)  # the recorded zero fill has not run
    monkeypatch.setattr(api, "_capturing", lambda t: False)
    assert api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)[2] is not None  # its own replay
    assert not seen[1].any() and not meta.counts_pending
    eager, _ = wavemla.get_mla_metadata()
    api._replayed(eager, tensors, scalars, 512, api._SPARSE_INPUTS, None)  # adopted outside a capture: zeros made
    assert not eager.counts_pending


class Capture:
    """CUDA-graph capture as the decode calls see it: whether one is under way, and CUDA's id of its capture sequence
    (None: under way, in a capture the driver cannot name)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from wavemla import api

        self.on, self.ident = False, cast(int | None, None)
        monkeypatch.setattr(api, "_capturing", lambda t: self.on)
        monkeypatch.setattr(api, "_capture_id", lambda t: self.ident)

    def into(self, ident: int | None) -> None:
        self.on, self.ident = True, ident

    def end(self) -> None:
        self.on, self.ident = False, None


def test_counters_made_in_one_graph_are_zeroed_in_a_second_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metadata object planned while one graph is captured and then captured into a second graph: the first graph's
    zero fill runs only when it replays, so the second, replayed before it (or alone, the first dropped), found the
    counters holding whatever the memory held and merged the cut tokens wrongly. The second capture records a zero
    fill of its own."""
    x = merged_inputs()
    capture = Capture(monkeypatch)
    with config.override(**MERGED_IN_KERNEL):
        want = wavemla.sparse_mla_decode(**x)
        meta, _ = wavemla.get_mla_metadata()
        first, second = 11, 12
        capture.into(first)
        wavemla.sparse_mla_decode(**x, metadata=meta)  # planned (and its counters made) in the first graph
        assert meta.plan is not None and meta.plan.merge_in_kernel and meta.counts is not None
        capture.into(second)
        meta.counts.fill_(5)  # the first graph's zero fill has not run: the memory holds anything
        got = wavemla.sparse_mla_decode(**x, metadata=meta)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert meta.counts_pending  # the first graph's zero fill still lies ahead: the next uncaptured call zeroes


def test_counters_made_under_capture_are_zeroed_once_in_each_other_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the replay path: the graph that made the counters records no second zero fill, another graph records
    one at its first call with the object (the kernels leave the counters at zero for its later calls), a capture
    the driver cannot name at every call; an uncaptured call zeroes them for good."""
    from wavemla import api

    seen: list[torch.Tensor] = []
    tensors, scalars = _stored_first_call(monkeypatch, seen, (("counts", (4,), torch.int32),))
    capture = Capture(monkeypatch)
    meta, _ = wavemla.get_mla_metadata()

    def counters_at_launch() -> list[int]:
        assert meta.counts is not None
        meta.counts.fill_(5)  # what the memory holds where no zero fill ran before the launch
        assert api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)[2] is not None
        return seen[-1].tolist()

    made_in, other = 21, 22
    capture.into(made_in)
    assert api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)[2] is not None  # adopted
    assert meta.counts_pending and counters_at_launch() == [5] * 4  # its own zero fill runs first on replay
    capture.into(other)
    assert counters_at_launch() == [0] * 4  # zero fill recorded into this graph
    assert counters_at_launch() == [5] * 4  # once: the kernels leave them at zero for the graph's later calls
    capture.into(None)
    assert counters_at_launch() == [0] * 4 and counters_at_launch() == [0] * 4  # unnamed: every call
    capture.into(23)  # a new capture (a new id, also where a graph object is captured again)
    assert counters_at_launch() == [0] * 4
    capture.into(other)
    assert counters_at_launch() == [5] * 4
    capture.end()
    assert counters_at_launch() == [0] * 4 and not meta.counts_pending and meta.counts_zeroed_in == []
    capture.into(24)
    assert counters_at_launch() == [5] * 4  # zeroed for good: no zero fill recorded (the 5s are the test's)


def test_the_capture_is_named_by_the_driver_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's id of the capture sequence under way names it; a stream not capturing, a failing query, or no driver
    entry point names none (the counters are then zeroed in every captured call)."""
    from wavemla import api

    q = cast(Any, SimpleNamespace(is_cuda=True, device="cuda:0"))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=7))
    answers = {7: (api._CAPTURE_ACTIVE, 42)}
    monkeypatch.setattr(api, "_driver_capture_info", lambda: lambda stream: answers.get(stream, (0, 0)))
    assert api._capture_id(q) == 42
    answers[7] = (0, 0)  # not capturing (or the query failed)
    assert api._capture_id(q) is None
    monkeypatch.setattr(api, "_driver_capture_info", lambda: None)
    assert api._capture_id(q) is None
    monkeypatch.setattr(api, "_driver_capture_info", lambda: lambda stream: (api._CAPTURE_ACTIVE, 42))
    assert api._capture_id(torch.empty(1)) is None  # a CPU tensor: no CUDA stream to ask about


def test_an_auto_gpu_knob_describes_the_gpu_of_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """``WAVEMLA_GPU=auto`` (a name get_spec takes: the GPU torch sees) plans a CUDA call as with the knob unset, for
    the GPU of its tensors. It read the current GPU instead, and kept that under the call's device (the sparse prefill
    and FlashMLA's legacy schedule ask outside the call's device guard), so every later call there planned for the
    other GPU."""
    from wavemla import api
    from wavemla.device import DeviceSpec, get_spec

    def from_torch(device: Any = None) -> DeviceSpec:  # GPU 1 an H100, the current GPU (0) an H200
        return get_spec("h100" if device is not None and torch.device(device).index == 1 else "h200")

    monkeypatch.setattr(DeviceSpec, "from_torch", staticmethod(from_torch))
    monkeypatch.setattr(api, "_SPECS", {})
    with config.override(WAVEMLA_GPU="Auto"):
        assert api._device_spec(torch.device("cuda", 1)) == get_spec("h100")
        assert api._device_spec(torch.device("cuda", 0)) == get_spec("h200")
    with config.override(WAVEMLA_GPU="h100"):
        assert api._device_spec(torch.device("cuda", 0)) == get_spec("h100")  # a preset still stands for every GPU


class FailingAllocation:
    """``torch.empty`` and ``torch.zeros`` as the public calls see them on a GPU short of memory: the ``fail_at``-th
    allocation made by ``wavemla.api`` (counted from 1) raises torch.OutOfMemoryError, the others allocate."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int) -> None:
        self.fail_at, self.n = fail_at, 0
        for name in ("empty", "zeros"):
            monkeypatch.setattr(torch, name, self.wrap(getattr(torch, name)))

    def wrap(self, make: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def allocate(*args: Any, **kwargs: Any) -> torch.Tensor:
            if sys._getframe(1).f_globals.get("__name__") != "wavemla.api":
                return make(*args, **kwargs)
            self.n += 1
            if self.n == self.fail_at:
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
            return make(*args, **kwargs)

        return allocate


@pytest.mark.parametrize("fail_at", [1, 2, 3], ids=["first-alloc", "second-alloc", "third-alloc"])
@pytest.mark.parametrize("decode", sorted(DECODES))
def test_a_failed_workspace_allocation_leaves_the_metadata_unplanned(
    monkeypatch: pytest.MonkeyPatch, decode: str, fail_at: int
) -> None:
    """A call that plans a metadata object and then fails to allocate its workspace (out of memory) leaves the object
    as it found it: unplanned, holding no workspace. It was left holding the plan's key without (all of) the
    workspace, so a retry of the same shape took it as planned and reached an assertion or gave the kernels None."""
    make_inputs, call = DECODES[decode]
    x = make_inputs()
    want_out, want_lse = call(**x)
    meta, _ = wavemla.get_mla_metadata()
    with monkeypatch.context() as m:
        FailingAllocation(m, fail_at)
        with pytest.raises(torch.OutOfMemoryError):
            call(**x, metadata=meta)
    assert not meta.have_initialized and meta.buffers() == [] and meta.plan is None and meta.dense_plan is None
    out, lse = call(**x, metadata=meta)  # plans and allocates again
    assert meta.have_initialized and meta.buffers()
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


def test_a_failed_allocation_while_adopting_a_first_call_leaves_the_metadata_unplanned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh object that takes the plan of its signature's first call (``api._FIRST_CALLS``) and then fails to
    allocate its workspace stays unplanned: the next call adopts that plan again, with the whole workspace."""
    from wavemla import api

    seen: list[torch.Tensor] = []
    buffers = (("o_ws", (2, 4, 512), torch.float16), ("lse_ws", (2, 4), torch.float32), ("counts", (4,), torch.int32))
    tensors, scalars = _stored_first_call(monkeypatch, seen, buffers)
    meta, _ = wavemla.get_mla_metadata()
    with monkeypatch.context() as m:
        # the call's out and lse are allocated first (1, 2), then the workspace: its lse_ws (4) fails
        FailingAllocation(m, 4)
        with pytest.raises(torch.OutOfMemoryError):
            api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)
    assert not meta.have_initialized and meta.buffers() == [] and meta.replays == []
    assert api._replayed(meta, tensors, scalars, 512, api._SPARSE_INPUTS, None)[2] is not None  # adopted
    assert meta.key == ("planned",) and [t.shape for t in meta.buffers()] == [(2, 4, 512), (2, 4), (4,)]
    assert len(seen) == 1


def test_replays_are_evicted_least_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metadata object keeps the launches of its 8 most recently used call signatures: a signature in use stays
    however long ago it was first recorded. The oldest recorded one was dropped, even when it was the one in use."""
    from wavemla import api

    monkeypatch.setattr(api, "Replay", lambda rec, inputs, buffers: rec)  # stand-in replays: the recording itself
    meta, _ = wavemla.get_mla_metadata()
    recs = [cast(Any, f"replay {i}") for i in range(api._MAX_REPLAYS + 2)]
    sigs = [(("sig", i),) for i in range(len(recs))]
    for i in range(api._MAX_REPLAYS):
        assert meta.keep_replay(sigs[i], recs[i], []) == recs[i]
    assert meta.replay_for(sigs[0]) == (True, recs[0])  # the first recorded, now the most recently used
    meta.keep_replay(sigs[8], recs[8], [])  # one over the cap: the least recently used (sigs[1]) goes
    assert meta.replay_for(sigs[1]) == (False, None)
    assert meta.replay_for(sigs[0]) == (True, recs[0])
    assert meta.replay_for(sigs[2]) == (True, recs[2])
    meta.keep_replay(sigs[9], recs[9], [])  # now sigs[3] is the least recently used
    assert meta.replay_for(sigs[3]) == (False, None)
    kept = {k for k, _ in meta.replays}
    assert kept == {sigs[i] for i in (0, 2, 4, 5, 6, 7, 8, 9)} and len(meta.replays) == api._MAX_REPLAYS


SPLIT_KERNELS = {"sparse": "sparse_decode_split", "dense": "dense_decode_split"}


@pytest.mark.parametrize("decode", sorted(DECODES))
def test_a_tile_the_triton_kernel_cannot_fit_names_the_knobs(monkeypatch: pytest.MonkeyPatch, decode: str) -> None:
    """Triton's out-of-resources error from a split kernel's compile is raised again as a PlanError naming the tile
    knobs that are set (a tile forced by them may fit only a warp-specialized sm_90 kernel, and a call whose tensors
    do not qualify for that kernel runs the Triton one)."""
    import importlib

    from triton.runtime.errors import OutOfResources

    from wavemla.plan import PlanError

    def too_big(**_: Any) -> None:
        raise OutOfResources(262144, 232448, "shared memory")

    monkeypatch.setattr(importlib.import_module(f"wavemla.kernels.{decode}_decode"), SPLIT_KERNELS[decode], too_big)
    make_inputs, call = DECODES[decode]
    x = make_inputs()
    says = r"the tile BLOCK_H=\d+ .* does not fit the Triton split kernel on this GPU \(out of resource: shared memory"
    with (
        config.override(WAVEMLA_NUM_STAGES=1, WAVEMLA_LAUNCH="triton"),
        pytest.raises(PlanError, match=rf"^WAVEMLA_NUM_STAGES=1: {says}"),
    ):
        call(**x, metadata=wavemla.get_mla_metadata()[0])
    with config.override(WAVEMLA_LAUNCH="triton"), pytest.raises(PlanError, match=rf"^the plan: {says}"):
        call(**x, metadata=wavemla.get_mla_metadata()[0])


def test_a_tile_priced_for_the_warp_specialized_kernel_says_what_that_kernel_needs() -> None:
    from triton.runtime.errors import OutOfResources

    from wavemla import api
    from wavemla.plan import PlanError

    tile = "BLOCK_H=64 BLOCK_N=64 warps=8 stages=3"
    with (
        config.override(WAVEMLA_NUM_STAGES=3),
        pytest.raises(PlanError, match=r"^WAVEMLA_NUM_STAGES=3: the tile BLOCK_H=64 .*; the warp-specialized sm_90 "
                      r"kernel runs it only where q's head rows are packed, .*: unset the knobs or pass such tensors$"),
        api._tile_fits(tile, api._SPARSE_WS_NEEDS),
    ):  # fmt: skip
        raise OutOfResources(262144, 232448, "shared memory")
    with (
        pytest.raises(PlanError, match=r"^the plan: .*; the warp-specialized sm_90 kernel runs it only where q and the "
                      r"cache are contiguous, 16-byte aligned and not empty$"),
        api._tile_fits(tile, api._DENSE_WS_NEEDS),
    ):  # fmt: skip
        raise OutOfResources(262144, 232448, "shared memory")
    with pytest.raises(RuntimeError, match=r"^launch failed$"), api._tile_fits(tile, None):  # others pass untouched
        raise RuntimeError("launch failed")


def test_work_units_past_int32_are_refused_naming_the_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split kernels number (token, tile) units in int32: a plan past that (index lists of tens of GB) is refused
    before anything is allocated, naming the indices, and the metadata stays unplanned."""
    import dataclasses

    from wavemla import api

    planned = api.plan

    def huge(workload: Any, device: Any) -> Any:
        p = planned(workload, device)
        return dataclasses.replace(p, n_tiles=2**31 // workload.tokens + 1, token_units=0)

    x = sparse_inputs()
    monkeypatch.setattr(api, "plan", huge)
    meta = wavemla.get_mla_metadata()[0]
    with pytest.raises(ValueError, match=r"^indices: 3 query token\(s\) x 715827883 tiles .* more than 2\^31 - 1"):
        wavemla.sparse_mla_decode(**x, metadata=meta)
    assert meta.plan is None and meta.buffers() == []
    monkeypatch.setattr(api, "plan", planned)
    wavemla.sparse_mla_decode(**x, metadata=meta)  # the same call within int32
