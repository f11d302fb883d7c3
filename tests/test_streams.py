"""Streams and CUDA graphs as a serving engine uses the decode calls: what a call keeps between calls, and where.

CPU: a launch replay takes the stream that is current when it launches (not the one it was recorded on); the
per-process table of first calls keeps none of the first metadata object's tensors, and every metadata object that
adopts a first call gets a workspace of its own, its counters zero whatever the first object's hold, and launches
with it. GPU: graphs captured on two streams, each with its own metadata object (or none) and its own memory pool,
replayed concurrently over new inputs, give the eager bits.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import torch

from tests.conftest import HAS_CUDA
from tests.kernels.test_launch import FakeDesc, FakeJIT, FakeKernel, _same
from wavemla import config, get_mla_metadata
from wavemla.api import MLAMetadata, _FirstCall
from wavemla.kernels import launch
from wavemla.kernels.launch import Replay


def _kern(p_q, p_ws, d_lse, p_cnt, n):
    return None


class FakeDriver:
    """Triton's active driver as the replay asks it: the current stream of a device."""

    def __init__(self) -> None:
        self.stream = 0
        self.asked: list[int] = []

    def get_current_stream(self, device: int) -> int:
        self.asked.append(device)
        return self.stream


def test_a_replay_launches_on_the_stream_current_at_each_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime import driver

    fake = FakeDriver()
    monkeypatch.setattr(driver, "_active", fake)
    k = FakeKernel()
    fn = FakeJIT(_kern, k)
    q, ws, lse, cnt = torch.zeros(8), torch.zeros(16), torch.zeros(4), torch.zeros(4, dtype=torch.int32)
    with launch.recording() as rec:
        launch.run(fn, (1,), q, ws, FakeDesc(lse.view(2, 2), [2, 2], [1, 2]), cnt, 3)
    replay = Replay(rec, [q], [ws, lse, cnt], device=3)  # recorded while stream 0 was current
    for stream in (11, 22, 11):
        fake.stream = stream
        replay.launch([q], [q.data_ptr()])
    assert [call[3] for call in k.calls] == [11, 22, 11] and fake.asked == [3, 3, 3]


def _planned(counts: torch.Tensor) -> tuple[MLAMetadata, Replay, tuple[Any, ...], FakeKernel]:
    """A metadata object as a first call leaves it (its workspace; counters as given) and its kept replay of a fake
    kernel that reads the workspace by pointer and by descriptor."""
    meta = MLAMetadata(key=("sparse", "workload"), o_ws=torch.randn(6, 4), lse_ws=torch.randn(6), counts=counts)
    k = FakeKernel()
    fn = FakeJIT(_kern, k)
    q = torch.zeros(8)
    assert meta.o_ws is not None and meta.lse_ws is not None
    with launch.recording() as rec:
        launch.run(fn, (1,), q, meta.o_ws, FakeDesc(meta.lse_ws[2:].view(2, 2), [2, 2], [1, 2]), counts[2:], 3)
    sig = ("signature",)
    replay = Replay(rec, [q], meta.buffers(), device=0)  # as keep_replay keeps it (device: CPU tensors here)
    meta.replays = [(sig, replay)]
    return meta, replay, sig, k


def test_the_first_calls_table_keeps_no_tensor_of_the_first_object() -> None:
    """A graph captured with the first object goes on using its workspace; a later fresh object must not share it,
    and the table must not keep it alive (an engine that drops the object frees it)."""
    meta, replay, _, _ = _planned(torch.zeros(8, dtype=torch.int32))
    first = _FirstCall.of(meta, replay)
    alive = [weakref.ref(t) for t in meta.buffers()]
    del meta, replay
    gc.collect()
    assert all(r() is None for r in alive), "the table of first calls holds a tensor of the first object"
    assert first.replay is not None and first.buffers


def test_fresh_objects_adopt_a_first_call_into_workspaces_of_their_own() -> None:
    """Two calls with fresh metadata objects (two graphs captured one after the other, or two streams) replay the
    first call of their signature each into its own workspace, the counters zero even while the first object's
    are not (a graph replaying it mid-call), never into the first object's or each other's."""
    meta, replay, sig, k = _planned(torch.full((8,), 5, dtype=torch.int32))
    first = _FirstCall.of(meta, replay)
    a, b = MLAMetadata(), MLAMetadata()
    ra = first.adopt(a, torch.device("cpu"), sig)
    rb = first.adopt(b, torch.device("cpu"), sig)
    assert a.key == b.key == meta.key and a.plan is meta.plan
    assert a.replays == [(sig, ra)] and b.replays == [(sig, rb)]
    ptrs = [{t.data_ptr() for t in m.buffers()} for m in (meta, a, b)]
    assert ptrs[0].isdisjoint(ptrs[1]) and ptrs[0].isdisjoint(ptrs[2]) and ptrs[1].isdisjoint(ptrs[2])
    assert a.counts is not None and b.counts is not None
    assert not a.counts.any() and not b.counts.any() and bool(meta.counts.eq(5).all())  # type: ignore[union-attr]
    q = torch.zeros(8)
    for r in (ra, rb, replay):
        r.launch([q], [q.data_ptr()], stream=0)
    for call, m in zip(k.calls, (a, b, meta), strict=True):
        assert m.o_ws is not None and m.lse_ws is not None and m.counts is not None
        assert call[9:11] == (q.data_ptr(), m.o_ws.data_ptr())
        assert call[12] == m.counts.data_ptr() + 8
        desc = call[11]
        assert isinstance(desc, FakeDesc) and desc.base.data_ptr() == m.lse_ws.data_ptr() + 8


# --- GPU lane ------------------------------------------------------------------------------------------------
def _csa(seed: int, batch: int) -> dict[str, Any]:
    from wavemla.testing import make_sparse_decode_inputs

    kw = make_sparse_decode_inputs(batch=batch, h_q=64, topk=128, page=64, extra_topk=512, extra_page=64,
                                   extra_pool=4096, invalid_fraction=0.1, fp8=True, device="cuda",
                                   seed=seed)  # fmt: skip
    return {k: v for k, v in kw.items() if v is not None}


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="CUDA graphs and streams need a GPU")
@pytest.mark.parametrize("meta_kind", ["own-object", "fresh-object", "none"])
@pytest.mark.parametrize("knobs", [{}, {"WAVEMLA_BATCH_INVARIANT": True}], ids=["default", "invariant"])
def test_gpu_graphs_on_two_streams_replayed_concurrently(meta_kind: str, knobs: dict[str, Any]) -> None:
    """Two graphs of one signature (cut tokens merged through the counters: b = 64 default and b = 133 invariant),
    captured on two streams each into a pool of its own, replayed concurrently behind a long matmul on each stream
    over new inputs written in place: each gives the eager bits of its inputs. ``own-object``: a metadata object per
    graph planned eagerly before capture; ``fresh-object``/``none``: planned inside the capture by adopting the
    first call of the signature (api._FIRST_CALLS)."""
    from wavemla import api, sparse_mla_decode

    batch = 133 if knobs else 64
    api._FIRST_CALLS.clear()
    with config.override(**knobs):
        sparse_mla_decode(**_csa(1, batch), metadata=get_mla_metadata()[0])  # compiled, recorded for fresh objects
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        statics = [_csa(10 + g, batch) for g in range(2)]
        graphs, outs, held = [], [], []
        for g, stream in enumerate(streams):
            meta = None if meta_kind == "none" else get_mla_metadata()[0]
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                if meta_kind == "own-object":
                    sparse_mla_decode(**statics[g], metadata=meta)  # planned eagerly, then captured with it
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=stream):  # each graph its own pool
                    outs.append(sparse_mla_decode(**statics[g], metadata=meta))
            graphs.append(graph)
            held.append(meta)
        torch.cuda.synchronize()
        noise = torch.randn(4096, 4096, device="cuda")
        for rnd in range(6):
            news = [_csa(100 + 2 * rnd + g, batch) for g in range(2)]
            wants = [sparse_mla_decode(**n) for n in news]
            torch.cuda.synchronize()
            for g, stream in enumerate(streams):
                with torch.cuda.stream(stream):
                    for _ in range(1 + (rnd + g) % 3):
                        torch.mm(noise, noise)  # queued work, so that the two streams' replays overlap
                    for key, t in news[g].items():
                        if isinstance(t, torch.Tensor):
                            statics[g][key].copy_(t)
                    graphs[g].replay()
            torch.cuda.synchronize()
            for g in range(2):
                _same(outs[g], wants[g])


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("path", ["planned", "adopted"])
def test_gpu_second_graph_of_one_metadata_replayed_first(path: str) -> None:
    """One metadata object planned while a first graph is captured (through Triton's path, or by adopting the first
    call of its signature) and captured again into a second graph; the counters then hold anything (the first
    graph's zero fill has not run). The second graph, replayed first, then both in turn, give the eager bits."""
    from tests.test_api import MERGED_IN_KERNEL, merged_inputs
    from wavemla import api, sparse_mla_decode

    x = merged_inputs()
    with config.override(**MERGED_IN_KERNEL):
        want = sparse_mla_decode(**x)  # compiled; the first call of the signature, kept for fresh objects
        if path == "planned":
            api._FIRST_CALLS.clear()
        meta = get_mla_metadata()[0]
        graphs, outs = [torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()], []
        torch.cuda.synchronize()
        for graph in graphs:
            with torch.cuda.graph(graph):
                outs.append(sparse_mla_decode(**x, metadata=meta))
        torch.cuda.synchronize()
        assert meta.plan is not None and (meta.plan.merge_in_kernel or meta.plan.ws_merge)
        assert meta.counts is not None and meta.counts_pending
        meta.counts.fill_(5)
        for g in (1, 0, 1, 1, 0):
            outs[g][0].fill_(float("nan"))
            graphs[g].replay()
            torch.cuda.synchronize()
            _same(outs[g], want)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="CUDA graphs need a GPU")
def test_gpu_capture_is_named_once_a_capture() -> None:
    """Calls of one metadata object captured into one graph (an engine's layers) record the counters' zero fill once:
    the driver names the capture sequence, the same id through a capture and a new one for the next capture (were it
    unnamed, every captured call would record a memset of its own)."""
    from tests.test_api import MERGED_IN_KERNEL, merged_inputs
    from wavemla import api, sparse_mla_decode

    x = merged_inputs()
    q = x["q"]
    assert api._capture_id(q) is None  # not capturing
    with config.override(**MERGED_IN_KERNEL):
        sparse_mla_decode(**x)
        api._FIRST_CALLS.clear()
        meta = get_mla_metadata()[0]
        graphs, ids = [torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()], []
        torch.cuda.synchronize()
        for graph in graphs:
            with torch.cuda.graph(graph):
                ids.append(api._capture_id(q))
                for _ in range(3):
                    sparse_mla_decode(**x, metadata=meta)
                assert api._capture_id(q) == ids[-1]
        torch.cuda.synchronize()
    assert None not in ids and ids[0] != ids[1]
    assert meta.counts_pending and meta.counts_zeroed_in == ids
