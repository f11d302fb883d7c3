"""Launch replays (wavemla.kernels.launch): a repeated decode call launches the compiled kernels of the call it
repeats, with its own tensors' addresses.

CPU: the signature of a call, and a replay built from a recording of fake kernels: which argument gets which
address, what is refused. GPU: sparse decode (warp-specialized and Triton kernels, the q conversion's scratch
tensor, the combine), dense decode (the scheduler with and without reuse, TMA descriptors) and the indexer
(per-token and spread selects, with and without given outputs and workspace) give the bits of Triton's launch
path on new inputs, without a Triton launch; and a call with another alignment, under a Triton launch hook or
with the knob off goes through Triton again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from tests.conftest import HAS_CUDA
from wavemla import config, get_mla_metadata
from wavemla.kernels import launch
from wavemla.kernels.launch import NotReplayable, Recording, Replay


class FakeKernel:
    """A compiled kernel's launcher: notes what it is called with."""

    packed_metadata = ("meta",)
    function = 1234

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def run(self, *args: Any) -> None:
        self.calls.append(args)


class FakeJIT:
    """A JIT function: ``fn`` is the Python function whose parameters order the arguments."""

    def __init__(self, fn: Any, kernel: FakeKernel) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.kernel = kernel

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        return lambda *args, **kwargs: self.kernel


def _kernel_fn(p_a, p_b, n, p_c, scale, FLAG, MODE=7):
    return None


@dataclasses.dataclass
class FakeDesc:
    """A host tensor descriptor (dataclass with a ``base`` tensor), as Triton's TMA descriptors are."""

    base: torch.Tensor
    shape: list[int]
    block_shape: list[int]


def _record(*calls: tuple[FakeJIT, tuple[int, ...], tuple[Any, ...], dict[str, Any]]) -> Recording:
    with launch.recording() as rec:
        for fn, grid, args, kwargs in calls:
            launch.run(fn, grid, *args, **kwargs)
    return rec


def test_run_notes_launches_only_inside_a_recording() -> None:
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    a = torch.zeros(4)
    assert launch.run(fn, (2,), a, a, 3, a, 1.0, True) is k  # outside a recording: nothing noted, no error
    with launch.recording() as rec:
        launch.run(fn, (2,), a, a, 3, a, 1.0, True)
        launch.scratch(a)
        launch.untracked("a torch fill")
        launch.untracked("another")
    assert len(rec.launches) == 1 and rec.scratch == [a] and rec.refused == "a torch fill"
    with launch.recording() as inner:
        pass
    assert not inner.launches


def test_replay_gives_each_argument_its_new_address() -> None:
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    q = torch.zeros(8, dtype=torch.float32)
    cache = torch.zeros(16, dtype=torch.uint8)
    ws = torch.zeros(32, dtype=torch.int32)  # kept (a metadata buffer)
    tmp = torch.empty(6, dtype=torch.float16)  # a launcher's scratch tensor
    with launch.recording() as rec:
        launch.scratch(tmp)
        # q itself, cache through a view of another dtype, a slice of the kept buffer, the scratch tensor
        launch.run(fn, (3, 2), q, cache.view(torch.int8), 5, ws[4:], scale=0.5, FLAG=True)
        launch.run(fn, (1,), tmp, q, 9, q, 2.0, False, MODE=1)
    replay = Replay(rec, [q, None, cache], [ws], device=0)
    q2 = torch.zeros(8, dtype=torch.float32)
    cache2 = torch.zeros(16, dtype=torch.uint8)
    replay.launch([q2, None, cache2], [q2.data_ptr(), cache2.data_ptr()], stream=77)
    first, second = k.calls
    assert first[:7] == (3, 2, 1, 77, 1234, ("meta",), None)
    assert first[9:] == (q2.data_ptr(), cache2.data_ptr(), 5, ws.data_ptr() + 16, 0.5, True, 7)
    assert second[:3] == (1, 1, 1)
    new_tmp = second[9]
    assert isinstance(new_tmp, int) and second[10:] == (q2.data_ptr(), 9, q2.data_ptr(), 2.0, False, 1)


def test_replay_rebuilds_descriptors_on_the_new_tensor() -> None:
    k = FakeKernel()

    def kern(d_in, d_keep, n):
        return None

    fn = FakeJIT(kern, k)
    q = torch.arange(24, dtype=torch.float32)
    ws = torch.zeros(12, dtype=torch.float32)
    kept = FakeDesc(ws.view(3, 4), [3, 4], [1, 4])
    rec = _record((fn, (1,), (FakeDesc(q[8:].view(4, 4), [4, 4], [2, 4]), kept, 3), {}))
    replay = Replay(rec, [q], [ws], device=0)
    q2 = torch.arange(24, dtype=torch.float32) + 100
    replay.launch([q2], [q2.data_ptr()], stream=0)
    (args,) = k.calls
    new, same = args[9], args[10]
    assert same is kept
    assert isinstance(new, FakeDesc) and new.shape == [4, 4] and new.block_shape == [2, 4]
    assert new.base.data_ptr() == q2.data_ptr() + 8 * 4 and torch.equal(new.base, q2[8:].view(4, 4))


def test_a_bound_copy_launches_with_another_workspace() -> None:
    k = FakeKernel()

    def kern(p_q, p_ws, d_ws, n):
        return None

    fn = FakeJIT(kern, k)
    q = torch.zeros(8, dtype=torch.float32)
    ws, counts = torch.zeros(12, dtype=torch.float32), torch.zeros(4, dtype=torch.int32)
    kept = FakeDesc(ws[4:].view(2, 4), [2, 4], [1, 4])
    plain = FakeJIT(_kernel_fn, k)  # a launch with no descriptor on a kept tensor: shared by the bound copy
    rec = _record((fn, (1,), (q, counts[1:], kept, 3), {}), (plain, (2,), (q, ws, 4, counts, 1.0, True), {}))
    replay = Replay(rec, [q], [ws, counts], device=0)
    template = replay.unbound()
    with pytest.raises(RuntimeError, match="unbound"):
        template.launch([q], [q.data_ptr()], stream=0)
    ws2, counts2 = torch.ones(12, dtype=torch.float32), torch.zeros(4, dtype=torch.int32)
    bound = template.bound([ws2, counts2])
    q2 = torch.zeros(8, dtype=torch.float32)
    bound.launch([q2], [q2.data_ptr()], stream=5)
    replay.launch([q2], [q2.data_ptr()], stream=5)  # the recorded replay keeps its own workspace
    (new, new_plain, old, old_plain) = k.calls
    assert new_plain[9:13] == (q2.data_ptr(), ws2.data_ptr(), 4, counts2.data_ptr())
    assert old_plain[9:13] == (q2.data_ptr(), ws.data_ptr(), 4, counts.data_ptr())
    assert new[9:11] == (q2.data_ptr(), counts2.data_ptr() + 4) and new[12] == 3
    assert isinstance(new[11], FakeDesc) and new[11].shape == [2, 4] and new[11].block_shape == [1, 4]
    assert new[11].base.data_ptr() == ws2.data_ptr() + 16 and torch.equal(new[11].base, ws2[4:].view(2, 4))
    assert old[10] == counts.data_ptr() + 4 and old[11] is kept
    for bad in ([ws2], [ws2, counts2.long()], [torch.zeros(16), counts2], [ws2.view(3, 4), counts2]):
        with pytest.raises(ValueError, match="keep"):
            template.bound(bad)


def test_replay_cache_drops_the_least_recently_used() -> None:
    cache = launch.ReplayCache(2)
    cache.put(("a",), 1)
    cache.put(("b",), 2)
    assert cache.get(("a",)) == 1  # now the most recent
    cache.put(("c",), 3)
    assert ("b",) not in cache and cache.get(("b",)) is None and len(cache) == 2
    assert sorted(cache.values()) == [1, 3]
    cache.clear()
    assert len(cache) == 0


def test_replay_converts_the_new_input() -> None:
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    q = torch.arange(6, dtype=torch.bfloat16)
    with launch.recording() as rec:
        q16 = launch.converted(q, torch.float16)
        launch.run(fn, (1,), q16, q, 1, q16, 1.0, True)
    assert launch.converted(q16, torch.float16) is q16  # no conversion: nothing to note (and no recording here)
    replay = Replay(rec, [q], [], device=0)
    q2 = torch.arange(6, dtype=torch.bfloat16) * 2
    replay.launch([q2], [q2.data_ptr()], stream=0)
    (args,) = k.calls
    assert args[10] == q2.data_ptr() and args[9] == args[12] and args[9] != q2.data_ptr()
    with launch.recording() as bad:
        launch.run(fn, (1,), launch.converted(q[2:], torch.float16), q, 1, q, 1.0, True)
    with pytest.raises(NotReplayable, match="conversion"):
        Replay(bad, [q], [], device=0)


@pytest.mark.parametrize(
    "case",
    ["unknown tensor", "untracked", "no kernel", "odd argument", "nothing launched", "two kinds at one address"],
)
def test_replay_refuses_what_it_cannot_repeat(case: str) -> None:
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    a, b = torch.zeros(4), torch.zeros(4)
    args: tuple[Any, ...] = (a, a, 1, a, 1.0, True)
    keep: list[torch.Tensor] = []
    if case == "unknown tensor":
        args = (a, b, 1, a, 1.0, True)
    elif case == "odd argument":
        args = (a, a, [1, 2], a, 1.0, True)
    elif case == "two kinds at one address":
        keep = [a]
    with launch.recording() as rec:
        if case == "untracked":
            launch.untracked("histograms zeroed by torch")
        if case == "no kernel":
            rec.launches.append((fn, (1,), args, {}, None))
        elif case != "nothing launched":
            launch.run(fn, (1,), *args)
    with pytest.raises(NotReplayable):
        Replay(rec, [a], keep, device=0)


def test_inputs_at_one_address_share_it_in_the_signature_and_the_replay() -> None:
    """The same tensor passed as two inputs: the call's signature notes it, so a call whose two tensors lie apart
    has another signature; within the signature an argument at that address takes the new (shared) address."""
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    a, c = torch.zeros(4), torch.zeros(4)
    assert launch.call_key([a, a], [])[0] != launch.call_key([a, c], [])[0]
    rec = _record((fn, (1,), (a, a, 1, a, 1.0, True), {}))
    replay = Replay(rec, [a, a], [], device=0)
    a2 = torch.zeros(4)
    replay.launch([a2, a2], [a2.data_ptr(), a2.data_ptr()], stream=0)
    assert k.calls[0][9:12] == (a2.data_ptr(), a2.data_ptr(), 1) and k.calls[0][12] == a2.data_ptr()


def test_replay_checks_the_inputs_it_is_given() -> None:
    k = FakeKernel()
    fn = FakeJIT(_kernel_fn, k)
    a = torch.zeros(4)
    rec = _record((fn, (1,), (a, a, 1, a, 1.0, True), {}))
    replay = Replay(rec, [a, None], [], device=0)
    with pytest.raises(ValueError, match="inputs, ptrs"):
        replay.launch([a], [a.data_ptr()], stream=0)
    with pytest.raises(ValueError, match="inputs, ptrs"):
        replay.launch([a, None], [a.data_ptr(), 0], stream=0)


def test_the_signature_tells_calls_apart() -> None:
    base = torch.zeros(64, dtype=torch.float32)
    x, y = base[:16], base[16:32]

    def key(*tensors: torch.Tensor | None, scalars: tuple[Any, ...] = (1.0,)) -> tuple[Any, ...]:
        return launch.call_key(tensors, scalars)[0]

    assert key(x, y) == key(torch.zeros(16), torch.zeros(16))  # other buffers, same layout: one signature
    assert key(x, y) != key(x, x)  # aliasing
    assert key(x, y) != key(base[1:17], y)  # alignment
    assert key(x, y) != key(x.half(), y)
    assert key(x, y) != key(x, base[16:48:2])  # strides
    assert key(x, y) != key(x, None)
    assert key(x, y) != key(x, y, scalars=(1,))  # the scalar's type counts: 1.0 and 1 are apart
    k0 = key(x, y)
    with config.override(WAVEMLA_LAUNCH="replay"):  # any knob change starts a new generation
        assert key(x, y) != k0
    assert launch.call_key((x, None, y), ())[1] == [x.data_ptr(), y.data_ptr()]


def test_replays_follow_the_knob_and_launch_hooks() -> None:
    with config.override(WAVEMLA_LAUNCH="triton"):
        assert not launch.enabled()
    assert launch.enabled()
    from triton import knobs

    chain = knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):
        hook = lambda metadata: None  # noqa: E731
        chain.add(hook)
        try:
            assert not launch.enabled()
        finally:
            chain.remove(hook)
        assert launch.enabled()
    assert not launch.replayable((torch.zeros(2),), ())  # CPU tensors (the interpreter lane) are never replayed


# --- GPU lane ------------------------------------------------------------------------------------------------
class CountLaunches:
    """Counts launches through Triton's path (launch.run) while active."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        orig = launch.run

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return orig(*args, **kwargs)

        monkeypatch.setattr(launch, "run", counted)


def _same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert torch.equal(x.flatten().view(torch.uint8), y.flatten().view(torch.uint8)), "bits differ"


def _csa_kwargs(seed: int, **shape: Any) -> dict[str, Any]:
    """sparse_mla_decode's keyword arguments for a CUDA CSA call (FP8 MODEL1, 128 window + 512 compressed rows)."""
    from wavemla.testing import make_sparse_decode_inputs

    kw = make_sparse_decode_inputs(topk=128, page=64, extra_topk=512, extra_page=64, fp8=True, device="cuda",
                                   seed=seed, **shape)  # fmt: skip
    return {k: v for k, v in kw.items() if v is not None}


SPARSE = [
    pytest.param(dict(batch=64, h_q=64), {}, id="csa-h64-b64"),  # warp-specialized kernel on sm_90
    pytest.param(dict(batch=64, h_q=64), {"WAVEMLA_SPARSE_WS": "off"}, id="csa-h64-b64-triton-qconvert"),
    pytest.param(dict(batch=1, h_q=64), {}, id="csa-h64-b1-combine"),
    pytest.param(dict(batch=48, h_q=16), {}, id="csa-h16-b48-staged"),
    pytest.param(dict(batch=133, h_q=64), {"WAVEMLA_BATCH_INVARIANT": True}, id="csa-h64-b133-invariant"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "knobs"), SPARSE)
def test_gpu_sparse_replay_gives_triton_launch_bits(shape: dict, knobs: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from wavemla import sparse_mla_decode

    def inputs(seed: int) -> dict[str, Any]:
        return _csa_kwargs(seed, extra_pool=4096, invalid_fraction=0.1, **shape)

    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        sparse_mla_decode(**inputs(1), metadata=meta)  # through Triton, recorded
        assert meta.replays and meta.replays[0][1] is not None, "the first call left no replay"
        new = inputs(2)
        count = CountLaunches(monkeypatch)
        got = sparse_mla_decode(**new, metadata=meta)
        assert count.n == 0, "the repeated call launched through Triton"
        with config.override(WAVEMLA_LAUNCH="triton"):
            ref_meta, _ = get_mla_metadata()
            want = sparse_mla_decode(**new, metadata=ref_meta)
        assert count.n > 0
    _same(got, want)


@pytest.mark.gpu
def test_gpu_sparse_replay_falls_back_on_another_alignment(monkeypatch: pytest.MonkeyPatch) -> None:
    from wavemla import sparse_mla_decode

    kw = _csa_kwargs(3, batch=8, h_q=64)
    meta, _ = get_mla_metadata()
    sparse_mla_decode(**kw, metadata=meta)
    # q moved by 8 bytes in a larger buffer: another 16-byte alignment, so Triton's path (and specialization; the
    # warp-specialized kernel wants q's rows 16-byte aligned, so the Triton kernel runs: other bits)
    buf = torch.empty(kw["q"].numel() + 4, dtype=kw["q"].dtype, device="cuda")
    q = buf[4:].view(kw["q"].shape)
    q.copy_(kw["q"])
    with config.override(WAVEMLA_LAUNCH="triton"):
        ref_meta, _ = get_mla_metadata()
        want = sparse_mla_decode(**{**kw, "q": q}, metadata=ref_meta)
    count = CountLaunches(monkeypatch)
    got = sparse_mla_decode(**{**kw, "q": q}, metadata=meta)
    assert count.n > 0
    _same(got, want)
    n = count.n
    _same(sparse_mla_decode(**{**kw, "q": q}, metadata=meta), want)  # and now replayed at that alignment too
    assert count.n == n and sum(r is not None for _, r in meta.replays) == 2


@pytest.mark.gpu
def test_gpu_replay_in_cuda_graph_and_under_a_launch_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton import knobs

    from wavemla import sparse_mla_decode

    kw = _csa_kwargs(4, batch=32, h_q=64)
    meta, _ = get_mla_metadata()
    eager = sparse_mla_decode(**kw, metadata=meta)
    count = CountLaunches(monkeypatch)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        sparse_mla_decode(**kw, metadata=meta)  # warm on the capture stream
        with torch.cuda.graph(graph, stream=stream):
            captured = sparse_mla_decode(**kw, metadata=meta)
    assert count.n == 0
    graph.replay()
    torch.cuda.synchronize()
    _same(captured, eager)
    chain = knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):
        seen: list[Any] = []
        chain.add(seen.append)
        try:
            _same(sparse_mla_decode(**kw, metadata=meta), eager)
        finally:
            chain.remove(seen.append)
        assert count.n > 0 and seen, "under a launch hook the call goes through Triton (the hook sees it)"


FRESH = [
    pytest.param("sparse", dict(batch=64, h_q=64), {}, id="csa-h64-b64"),
    pytest.param("sparse", dict(batch=64, h_q=64), {"WAVEMLA_SPARSE_WS": "off"}, id="csa-h64-b64-triton-qconvert"),
    pytest.param("sparse", dict(batch=1, h_q=64), {}, id="csa-h64-b1-combine"),
    pytest.param("sparse", dict(batch=133, h_q=64), {"WAVEMLA_BATCH_INVARIANT": True}, id="csa-h64-b133-invariant"),
    pytest.param("dense", dict(h_q=64, fp8=False), {}, id="dense-bf16-h64"),
    pytest.param("dense", dict(h_q=16, fp8=True), {}, id="dense-fp8-h16"),
]


def _fresh_inputs(kind: str, shape: dict, seed: int) -> dict[str, Any]:
    """A sparse (CSA) or dense decode call's tensors for the fresh-metadata tests."""
    from wavemla.testing import make_dense_decode_inputs

    if kind == "sparse":
        return _csa_kwargs(seed, extra_pool=4096, invalid_fraction=0.1, **shape)
    d = make_dense_decode_inputs(lengths=[1000, 4096, 37, 2048] * 4, device="cuda", seed=seed, **shape)
    return {k: d[k] for k in ("q", "k_cache", "block_table", "cache_seqlens")}


def _fresh_call(kind: str, d: dict[str, Any], meta: Any) -> tuple[torch.Tensor, torch.Tensor]:
    from wavemla import dense_mla_decode, sparse_mla_decode

    return (sparse_mla_decode if kind == "sparse" else dense_mla_decode)(**d, metadata=meta)


@pytest.mark.gpu
@pytest.mark.parametrize(("kind", "shape", "knobs"), FRESH)
@pytest.mark.parametrize("meta_kind", ["fresh", "none"])
def test_gpu_fresh_metadata_replays_the_first_call(
    kind: str, shape: dict, knobs: dict, meta_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metadata object per call (SGLang's DeepSeek-V4 decode), or none: the first call of a signature goes
    through Triton; later ones with a fresh object replay it into their own workspace, with Triton's bits."""
    from wavemla import api

    def fresh() -> Any:
        return get_mla_metadata()[0] if meta_kind == "fresh" else None

    api._FIRST_CALLS.clear()
    with config.override(**knobs):
        first = get_mla_metadata()[0]
        _fresh_call(kind, _fresh_inputs(kind, shape, 1), first)  # through Triton: recorded for fresh objects
        new = _fresh_inputs(kind, shape, 2)
        count = CountLaunches(monkeypatch)
        meta = fresh()
        got = _fresh_call(kind, new, meta)
        assert count.n == 0, "a fresh call of a recorded signature launched through Triton"
        if meta is not None:
            assert meta.have_initialized and meta.key == first.key and meta.replays
            assert {t.data_ptr() for t in meta.buffers()}.isdisjoint(t.data_ptr() for t in first.buffers())
            assert [(t.shape, t.dtype) for t in meta.buffers()] == [(t.shape, t.dtype) for t in first.buffers()]
            _same(_fresh_call(kind, new, meta), got)  # its own replay now
            assert count.n == 0
        with config.override(WAVEMLA_LAUNCH="triton"):
            want = _fresh_call(kind, new, get_mla_metadata()[0])
        assert count.n > 0
    _same(got, want)


FRESH_GRAPH = [
    pytest.param("sparse", dict(batch=64, h_q=64), {}, id="csa-h64-b64"),
    pytest.param("sparse", dict(batch=133, h_q=64), {"WAVEMLA_BATCH_INVARIANT": True}, id="csa-h64-b133-invariant"),
    pytest.param("dense", dict(h_q=64, fp8=False), {}, id="dense-bf16-h64"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("kind", "shape", "knobs"), FRESH_GRAPH)
@pytest.mark.parametrize("meta_kind", ["fresh", "none"])
def test_gpu_fresh_metadata_replay_captured_in_a_cuda_graph(
    kind: str, shape: dict, knobs: dict, meta_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh metadata object (or none) made inside a CUDA-graph capture: its workspace comes from the graph's
    pool, the counters' zeroing is captured with the launches, and every replay of the graph with new input values
    written in place gives Triton's eager bits for those values."""
    from wavemla import api

    api._FIRST_CALLS.clear()
    with config.override(**knobs):
        static = _fresh_inputs(kind, shape, 1)
        _fresh_call(kind, static, get_mla_metadata()[0])  # through Triton: recorded for fresh objects
        count = CountLaunches(monkeypatch)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        kept: list[Any] = []
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            meta = get_mla_metadata()[0] if meta_kind == "fresh" else None
            kept.append(meta)
            captured = _fresh_call(kind, static, meta)
        assert count.n == 0, "the captured fresh call launched through Triton"
        for seed in (2, 3, 2):
            new = _fresh_inputs(kind, shape, seed)
            for k, t in new.items():
                if isinstance(t, torch.Tensor):
                    static[k].copy_(t)
            graph.replay()
            torch.cuda.synchronize()
            with config.override(WAVEMLA_LAUNCH="triton"):
                want = _fresh_call(kind, new, get_mla_metadata()[0])
            _same(captured, want)


DENSE = [
    pytest.param(dict(h_q=64, fp8=False), False, id="bf16-h64-ws"),
    pytest.param(dict(h_q=64, fp8=False), True, id="bf16-h64-ws-reuse-schedule"),
    pytest.param(dict(h_q=16, fp8=True), False, id="fp8-h16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "reuse"), DENSE)
def test_gpu_dense_replay_gives_triton_launch_bits(shape: dict, reuse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from wavemla import dense_mla_decode
    from wavemla.testing import make_dense_decode_inputs

    def inputs(seed: int) -> dict[str, Any]:
        return make_dense_decode_inputs(lengths=[1000, 4096, 37, 2048] * 4, device="cuda", seed=seed, **shape)

    def call(d: dict[str, Any], meta: Any, reuse: bool) -> tuple[torch.Tensor, torch.Tensor]:
        return dense_mla_decode(d["q"], d["k_cache"], d["block_table"], d["cache_seqlens"], metadata=meta,
                                reuse_schedule=reuse)  # fmt: skip

    meta, _ = get_mla_metadata()
    call(inputs(1), meta, False)  # through Triton, recorded
    new = inputs(2)
    count = CountLaunches(monkeypatch)
    got = call(new, meta, False)  # replayed: schedules the new lengths
    assert count.n == 0
    if reuse:
        call(new, meta, True)  # another signature (no scheduler): through Triton, recorded
        n = count.n
        assert n > 0
        got = call(new, meta, True)  # replayed
        assert count.n == n
    with config.override(WAVEMLA_LAUNCH="triton"):
        ref, _ = get_mla_metadata()
        want = call(new, ref, False)
    _same(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("select", ["spread", "token", "chunked"])
@pytest.mark.parametrize("given", [False, True], ids=["allocated", "given-out-workspace"])
def test_gpu_indexer_replay_gives_triton_launch_bits(select: str, given: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from wavemla.kernels.indexer import _REPLAYS, indexer_workspace_numel, lightning_indexer
    from wavemla.reference.indexer import quantize_index_k

    b, n_comp, page = 8, 16384, 64

    def inputs(seed: int) -> tuple[torch.Tensor, ...]:
        g = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randn(b, 1, 64, 128, device="cuda", generator=g).to(torch.float8_e4m3fn)
        w = torch.rand(b, 1, 64, device="cuda", generator=g)
        cache = quantize_index_k(torch.randn(b * n_comp // page, page, 128, device="cuda", generator=g), layout="paged")
        table = torch.randperm(b * n_comp // page, device="cuda", generator=g).to(torch.int32).view(b, -1)
        n = torch.randint(1, n_comp + 1, (b,), device="cuda", generator=g, dtype=torch.int32)
        return q, w, cache, table, n

    def call(args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        extra: dict[str, Any] = {}
        if given:
            extra["out"] = (torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
                            torch.empty(b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip
            extra["workspace"] = torch.empty(indexer_workspace_numel(b, 1, 64, n_comp), dtype=torch.int32,
                                             device="cuda")  # fmt: skip
        return lightning_indexer(*args, 512, max_n_comp=n_comp, index_k_layout="paged", select=select, **extra)

    _REPLAYS.clear()
    call(inputs(1))
    new = inputs(2)
    count = CountLaunches(monkeypatch)
    got = call(new)
    if select == "chunked":  # its histograms are zeroed by torch: never replayed
        assert all(r is None for r, _ in _REPLAYS.values()) and count.n > 0
    else:
        assert _REPLAYS and all(r is not None for r, _ in _REPLAYS.values()) and count.n == 0
    with config.override(WAVEMLA_LAUNCH="triton"):
        want = call(new)
    _same(got, want)


@pytest.mark.skipif(HAS_CUDA, reason="the CPU lane's check")
def test_cpu_calls_keep_no_replay() -> None:
    from wavemla import sparse_mla_decode
    from wavemla.testing import make_sparse_decode_inputs

    kw = make_sparse_decode_inputs(batch=2, h_q=4, topk=16, page=8, fp8=True, dtype=torch.float16, device="cpu")
    meta, _ = get_mla_metadata()
    sparse_mla_decode(**{k: v for k, v in kw.items() if v is not None}, metadata=meta)
    assert meta.replays == []


@triton.jit
def _scaled_copy_kernel(p_x, p_scratch, p_out, n, BLOCK: tl.constexpr):
    """out = 2 · x (x fp16), through a scratch tensor: the two kinds of tensor a replay makes per call."""
    o = tl.arange(0, BLOCK)
    m = o < n
    tl.store(p_scratch + o, tl.load(p_x + o, mask=m).to(tl.float32) * 2, mask=m)
    tl.debug_barrier()
    tl.store(p_out + o, tl.load(p_scratch + o, mask=m), mask=m)


@pytest.mark.gpu
def test_gpu_replay_on_another_stream_converts_and_allocates_on_it() -> None:
    """A replay launched on a stream other than the current one makes its input conversion on that stream: it reads
    the input only after the work queued there before the launch (here a copy behind a sleep)."""
    n = 1024
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(n, device="cuda", dtype=torch.float32)
    with launch.recording() as rec:
        x16 = launch.converted(x, torch.float16)
        scratch = launch.scratch(torch.empty(n, device="cuda", dtype=torch.float32))
        launch.run(_scaled_copy_kernel, (1,), x16, scratch, out, n, BLOCK=n)
    replay = Replay(rec, [x, out], [])
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    for _ in range(3):
        want = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        x2 = torch.zeros_like(x)
        out2 = torch.full_like(out, float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # tens of milliseconds: the input is written well after the launch call
            x2.copy_(want)
        replay.launch([x2, out2], [x2.data_ptr(), out2.data_ptr()], stream=side.cuda_stream)
        torch.cuda.synchronize()
        assert torch.equal(out2, want.to(torch.float16).float() * 2)
