"""Sparse prefill kernel vs the fp64 reference: CPU interpreter lane (fp16, small shapes) and GPU lane (bf16)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE, HAS_CUDA, capture_graph
from wavemla import sparse_mla_prefill
from wavemla.reference.sparse_prefill import sparse_prefill_ref
from wavemla.testing import TOLERANCES, assert_close, rows_out_tolerance

LANE = "gpu" if HAS_CUDA else "interp"
DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16


def make_inputs(s_q, h_q, s_kv, topk, d_qk=512, *, invalid=0.0, lengths=False, sink=True, seed=0, dtype=DTYPE):
    """Random q/kv; indices in 0..s_kv-1 with a fraction replaced by invalid values (-1, -2^31, s_kv, 2^31-1)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((s_q, h_q, d_qk), generator=g).to(dtype)
    kv = torch.randn((s_kv, 1, d_qk), generator=g).to(dtype)
    idx = torch.randint(0, max(s_kv, 1), (s_q, 1, topk), generator=g, dtype=torch.int32)
    if invalid:
        bad = torch.tensor([-1, -(2**31), s_kv, 2**31 - 1], dtype=torch.int32)
        pick = torch.rand((s_q, 1, topk), generator=g) < invalid
        idx = torch.where(pick, bad[torch.randint(0, 4, (s_q, 1, topk), generator=g)], idx)
    if s_kv == 0:
        idx = torch.full((s_q, 1, topk), -1, dtype=torch.int32)
    length = None
    if lengths:
        length = torch.randint(-2, topk + 3, (s_q,), generator=g, dtype=torch.int32)
        length[0] = topk
    attn_sink = torch.randn((h_q,), generator=g) if sink else None
    on = {"device": DEVICE}
    return {
        "q": q.to(**on), "kv": kv.to(**on), "indices": idx.to(**on), "sm_scale": d_qk**-0.5,
        "attn_sink": None if attn_sink is None else attn_sink.to(**on),
        "topk_length": None if length is None else length.to(**on),
    }  # fmt: skip


def check(inputs, lane=LANE, plan=None):
    """Kernel first (before the reference allocates; through the API, or the launcher with a forced ``plan``), then
    the reference; compare all three outputs."""
    if plan is None:
        out, max_logits, lse = sparse_mla_prefill(**inputs)
    else:
        from wavemla.kernels.sparse_prefill import sparse_prefill

        out, max_logits, lse = sparse_prefill(inputs["q"], inputs["kv"], inputs["indices"], inputs["sm_scale"], plan,
                                              inputs["attn_sink"], inputs["topk_length"])  # fmt: skip
    ref_out, ref_max, ref_lse = sparse_prefill_ref(
        inputs["q"], inputs["kv"], inputs["indices"], sm_scale=inputs["sm_scale"], attn_sink=inputs["attn_sink"],
        topk_length=inputs["topk_length"],
    )  # fmt: skip
    s_q, h_q, _ = inputs["q"].shape
    assert out.shape == (s_q, h_q, 512) and out.dtype == inputs["q"].dtype
    assert max_logits.shape == lse.shape == (s_q, h_q) and max_logits.dtype == lse.dtype == torch.float32
    bf16 = (inputs["kv"],) if inputs["kv"].dtype == torch.bfloat16 else ()
    assert_close("out", out, ref_out, rows_out_tolerance(lane, bf16))
    assert_close("max_logits", max_logits, ref_max, TOLERANCES[("lse", lane)])
    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", lane)])
    return out, max_logits, lse


CASES = [
    pytest.param(dict(s_q=3, h_q=16, s_kv=50, topk=64), id="S3-H16-kv50-k64"),
    pytest.param(dict(s_q=2, h_q=3, s_kv=97, topk=40, d_qk=576), id="S2-H3-kv97-k40-d576"),
    pytest.param(dict(s_q=2, h_q=20, s_kv=33, topk=17, invalid=0.4), id="S2-H20-invalid40"),
    pytest.param(dict(s_q=4, h_q=16, s_kv=70, topk=48, lengths=True), id="S4-H16-lengths"),
    pytest.param(dict(s_q=2, h_q=1, s_kv=10, topk=16, sink=False), id="S2-H1-nosink"),
    pytest.param(dict(s_q=2, h_q=16, s_kv=0, topk=16), id="S2-kv0-no-rows"),
    pytest.param(dict(s_q=1, h_q=16, s_kv=40, topk=1, invalid=1.0), id="S1-all-invalid"),
]


@pytest.mark.parametrize("shape", CASES)
def test_matches_reference(shape):
    check(make_inputs(**shape, seed=3))


def test_no_valid_row_gives_zero_out_and_infinite_stats():
    inputs = make_inputs(2, 16, 20, 8, lengths=False, seed=1)
    inputs["topk_length"] = torch.tensor([0, -5], dtype=torch.int32, device=DEVICE)
    out, max_logits, lse = check(inputs)
    assert (out == 0).all() and (max_logits == float("-inf")).all() and (lse == float("inf")).all()


@pytest.mark.parametrize("sink", [float("inf"), float("-inf")], ids=["+inf", "-inf"])
def test_infinite_sinks(sink):
    inputs = make_inputs(2, 16, 30, 16, seed=2)
    inputs["attn_sink"] = torch.full((16,), sink, device=DEVICE)
    out, _, _ = check(inputs)
    if sink > 0:
        assert (out == 0).all()


def test_poisoned_unused_rows_are_never_read():
    """Rows no index points at hold NaN; the result equals that of clean rows."""
    inputs = make_inputs(2, 16, 64, 16, seed=4)
    used = torch.zeros(64, dtype=torch.bool)
    used[inputs["indices"].flatten().long().cpu()] = True
    kv = inputs["kv"].clone()
    kv[(~used).to(kv.device)] = float("nan")
    clean = sparse_mla_prefill(**inputs)
    poisoned = sparse_mla_prefill(**{**inputs, "kv": kv})
    for a, b in zip(clean, poisoned, strict=True):
        assert torch.equal(a, b)


def test_out_buffer_is_written_in_place():
    inputs = make_inputs(3, 16, 40, 16, seed=5)
    buf = torch.full((5, 16, 512), float("nan"), dtype=DTYPE, device=DEVICE)[1:4]
    out, _, _ = sparse_mla_prefill(**inputs, out=buf)
    assert out.data_ptr() == buf.data_ptr()
    assert torch.equal(out, sparse_mla_prefill(**inputs)[0])


HEAD_STRIDE = 17_000_000  # elements between two heads: head 127 lies 2^31 elements or more past head 0


@pytest.mark.skipif(HAS_CUDA, reason="checks the interpreter's loads and stores")
@pytest.mark.parametrize("splits", [1, 2], ids=["whole", "pieces"])
@pytest.mark.parametrize("strided", ["q", "out"])
def test_heads_past_int32_offsets(strided, splits, monkeypatch):
    """q, or the caller's out, with heads ``HEAD_STRIDE`` elements apart (a head-major buffer viewed token-major):
    the offset of head 127 is past int32, and every load and store lies inside the call's tensors, at the reference's
    answer. (4.3 GB of address space; only the rows of one token are touched.)"""
    import dataclasses

    from triton.runtime import interpreter

    from wavemla.device import get_spec
    from wavemla.kernels.sparse_prefill import sparse_prefill
    from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill

    h_q = 128
    inputs = make_inputs(1, h_q, 40, 32, lengths=True, seed=9)
    big = torch.empty_strided((1, h_q, 512), (512, HEAD_STRIDE, 1), dtype=DTYPE, device=DEVICE)
    out = None
    if strided == "q":
        inputs["q"] = big.copy_(inputs["q"])
    else:
        out = big.fill_(float("nan"))
    tensors = [t for t in (*inputs.values(), out) if isinstance(t, torch.Tensor)]
    empty = torch.empty

    def tracked_empty(*args, **kwargs):  # the launcher's own outputs and partials are the call's tensors too
        t = empty(*args, **kwargs)
        tensors.append(t)
        return t

    def spans() -> list[tuple[int, int]]:
        return [(t.data_ptr(), t.data_ptr() + t.element_size() * (1 + sum((n - 1) * s for n, s in
                 zip(t.shape, t.stride(), strict=True)))) for t in tensors]  # fmt: skip

    stray: list[int] = []

    def inside(ptrs, mask) -> bool:
        addr = ptrs.data[mask.data.astype(bool)] if mask is not None else ptrs.data.ravel()
        known = spans()
        bad = [a for a in {int(a) for a in addr.ravel()} if not any(lo <= a < hi for lo, hi in known)]
        stray.extend(bad)
        ok = not bad
        return ok

    load, store = interpreter.InterpreterBuilder.create_masked_load, interpreter.InterpreterBuilder.create_masked_store

    def checked_load(self, ptrs, mask, *args):
        if not inside(ptrs, mask):  # not read: a wrapped address may be unmapped
            return load(self, ptrs, interpreter.TensorHandle(mask.data & False, mask.dtype), *args)
        return load(self, ptrs, mask, *args)

    def checked_store(self, ptrs, value, mask, *args):
        return store(self, ptrs, value, mask, *args) if inside(ptrs, mask) else None

    planned = plan_sparse_prefill(PrefillWorkload(1, h_q, 32), get_spec("h200"))
    plan = dataclasses.replace(planned, config=KernelConfig(16, 16, 4, 1), splits=splits, piece_tiles=2 // splits)
    monkeypatch.setattr(torch, "empty", tracked_empty)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", checked_load)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_store", checked_store)
    got = sparse_prefill(inputs["q"], inputs["kv"], inputs["indices"], inputs["sm_scale"], plan, inputs["attn_sink"],
                         inputs["topk_length"], out)  # fmt: skip
    monkeypatch.undo()
    assert not stray, (
        f"{len(stray)} addresses outside the call's tensors, e.g. {stray[0]:#x} (q, out at {big.data_ptr():#x})"
    )
    ref = sparse_prefill_ref(inputs["q"], inputs["kv"], inputs["indices"], sm_scale=inputs["sm_scale"],
                             attn_sink=inputs["attn_sink"], topk_length=inputs["topk_length"])  # fmt: skip
    assert_close("out", got[0], ref[0], rows_out_tolerance(LANE, ()))
    assert_close("lse", got[2], ref[2], TOLERANCES[("lse", LANE)])


def test_empty_query():
    inputs = make_inputs(1, 16, 10, 8)
    inputs["q"] = inputs["q"][:0]
    inputs["indices"] = inputs["indices"][:0]
    out, max_logits, lse = sparse_mla_prefill(**inputs)
    assert out.shape == (0, 16, 512) and max_logits.shape == lse.shape == (0, 16)


def test_repeated_calls_give_identical_bits():
    inputs = make_inputs(3, 20, 60, 40, lengths=True, seed=6)
    first = sparse_mla_prefill(**inputs)
    second = sparse_mla_prefill(**inputs)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(("splits", "piece_tiles"), [(1, 0), (2, 3), (3, 2), (6, 1)])
def test_lists_cut_into_pieces_match_the_reference(splits, piece_tiles):
    """A plan cutting each list into pieces of whole tiles (the combine merging them): the reference's answer, with
    tokens whose later pieces hold no valid entry (lengths), invalid entries and a sink."""
    import dataclasses

    from wavemla.device import get_spec
    from wavemla.kernels.sparse_prefill import sparse_prefill
    from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill

    inputs = make_inputs(3, 20, 90, 90, invalid=0.3, lengths=True, seed=8)
    inputs["topk_length"][1] = 5  # one piece's worth at most: the others empty
    planned = plan_sparse_prefill(PrefillWorkload(3, 20, 90), get_spec("h200"))
    plan = dataclasses.replace(planned, config=KernelConfig(16, 16, 4, 1), splits=splits, piece_tiles=piece_tiles)
    check(inputs, plan=plan)
    short = dataclasses.replace(plan, splits=2, piece_tiles=2)
    with pytest.raises(ValueError, match=r"^plan: 2 pieces of 2 tiles do not cover"):
        sparse_prefill(inputs["q"], inputs["kv"], inputs["indices"], 1.0, short, None, None)


@pytest.mark.parametrize(("splits", "piece_tiles"), [(1, 0), (3, 2)], ids=["whole", "pieces"])
@pytest.mark.parametrize("poison", ["row", "q"])
def test_nan_input_gives_nan_output_and_lse(poison, splits, piece_tiles):
    """A NaN score (a NaN in q, or in a row a token reads) gives that token NaN ``out`` and ``lse``, as in the
    reference, for whole lists and lists cut into pieces: the combine read a NaN sum as "no valid row" (``lse`` +inf),
    and on the GPU the whole list's floor of its sum at 1 (``tl.maximum``, which drops NaN there) left ``lse``
    finite. (``max_logits`` is a running maximum: on the GPU it passes over a NaN score.)"""
    import dataclasses

    from wavemla.device import get_spec
    from wavemla.kernels.sparse_prefill import sparse_prefill
    from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill

    inputs = make_inputs(3, 20, 90, 90, seed=8)
    if poison == "q":
        inputs["q"][0, 3, 7] = float("nan")
        hit: tuple[int, ...] = (0, 3)
    else:
        row = int(inputs["indices"][0, 0, 5])
        others = inputs["indices"][1:]
        others[others == row] = (row + 1) % 90  # only token 0 reads the row
        inputs["kv"][row, 0, 100] = float("nan")
        hit = (0,)
    planned = plan_sparse_prefill(PrefillWorkload(3, 20, 90), get_spec("h200"))
    plan = dataclasses.replace(planned, config=KernelConfig(16, 16, 4, 1), splits=splits, piece_tiles=piece_tiles)
    out, _, lse = sparse_prefill(inputs["q"], inputs["kv"], inputs["indices"], inputs["sm_scale"], plan,
                                 inputs["attn_sink"], None)  # fmt: skip
    ref_out, _, ref_lse = sparse_prefill_ref(inputs["q"], inputs["kv"], inputs["indices"],
                                             sm_scale=inputs["sm_scale"], attn_sink=inputs["attn_sink"])  # fmt: skip
    assert torch.isnan(ref_out[hit]).all() and int(torch.isnan(ref_out).sum()) == ref_out[hit].numel()
    assert torch.equal(torch.isnan(out).cpu(), torch.isnan(ref_out).cpu())
    assert torch.equal(torch.isnan(lse).cpu(), torch.isnan(ref_lse).cpu())
    finite = (~torch.isnan(ref_out)).cpu()
    bf16 = (torch.nan_to_num(inputs["kv"]),) if inputs["kv"].dtype == torch.bfloat16 else ()
    assert_close("out", out.cpu()[finite], ref_out.cpu()[finite], rows_out_tolerance(LANE, bf16))


def test_short_call_through_the_api_cuts_its_lists():
    """Two tokens over 300-entry lists leave the GPU's slots idle: the planner cuts the lists, and the result is
    the reference's."""
    from wavemla.api import _device_spec
    from wavemla.plan import PrefillWorkload, plan_sparse_prefill

    inputs = make_inputs(2, 16, 300, 300, invalid=0.2, lengths=True, seed=9)
    plan = plan_sparse_prefill(PrefillWorkload(2, 16, 300), _device_spec(torch.device(DEVICE)))
    assert plan.splits > 1
    check(inputs)


# ---------------------------------------------------------------- bad input names the argument


def _bad(**change):
    inputs = make_inputs(2, 16, 20, 8, lengths=True)
    inputs.update(change)
    return inputs


BAD = [
    pytest.param(lambda i: {"q": i["q"].float()}, "q", id="q-fp32"),
    pytest.param(lambda i: {"q": i["q"][..., :256]}, "q", id="q-d256"),
    pytest.param(lambda i: {"q": i["q"][None]}, "q", id="q-4d"),
    pytest.param(lambda i: {"q": torch.zeros((2, 129, 512), dtype=DTYPE, device=DEVICE)}, "q", id="q-h129"),
    pytest.param(lambda i: {"kv": i["kv"].to(torch.float32)}, "kv", id="kv-fp32"),
    pytest.param(lambda i: {"kv": i["kv"].expand(20, 2, 512)}, "kv", id="kv-2heads"),
    pytest.param(lambda i: {"kv": i["kv"][..., :256]}, "kv", id="kv-d256"),
    pytest.param(lambda i: {"indices": i["indices"].long()}, "indices", id="idx-int64"),
    pytest.param(lambda i: {"indices": i["indices"][:1]}, "indices", id="idx-s_q"),
    pytest.param(lambda i: {"sm_scale": float("nan")}, "sm_scale", id="scale-nan"),
    pytest.param(lambda i: {"sm_scale": -1.0}, "sm_scale", id="scale-negative"),
    pytest.param(lambda i: {"sm_scale": None}, "sm_scale", id="scale-none"),
    pytest.param(lambda i: {"d_v": 256}, "d_v", id="d_v-256"),
    pytest.param(lambda i: {"attn_sink": i["attn_sink"][:3]}, "attn_sink", id="sink-short"),
    pytest.param(lambda i: {"attn_sink": i["attn_sink"].half()}, "attn_sink", id="sink-fp16"),
    pytest.param(lambda i: {"topk_length": i["topk_length"].long()}, "topk_length", id="len-int64"),
    pytest.param(lambda i: {"topk_length": i["topk_length"][:1]}, "topk_length", id="len-short"),
    pytest.param(lambda i: {"out": torch.empty((2, 16, 256), dtype=DTYPE, device=DEVICE)}, "out", id="out-shape"),
    pytest.param(lambda i: {"out": i["q"]}, "out", id="out-is-q"),
    pytest.param(
        lambda i: {"out": torch.empty((1, 16, 512), dtype=DTYPE, device=DEVICE).expand(2, 16, 512)},
        "out",
        id="out-zero-stride",
    ),
]


@pytest.mark.parametrize(("change", "name"), BAD)
def test_bad_input_names_the_argument(change, name):
    inputs = make_inputs(2, 16, 20, 8, lengths=True)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        sparse_mla_prefill(**{**inputs, **change(inputs)})


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter's refusal of bf16")
def test_bf16_is_refused_under_the_interpreter():
    inputs = make_inputs(1, 16, 8, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^q: bf16"):
        sparse_mla_prefill(**inputs)


# ---------------------------------------------------------------- GPU lane: production shapes, bf16, graphs

GPU_CASES = [
    pytest.param(dict(s_q=64, h_q=64, s_kv=4096, topk=640), id="dsv4-h64"),
    pytest.param(dict(s_q=8, h_q=64, s_kv=4096, topk=640, lengths=True), id="dsv4-h64-short-cut"),
    pytest.param(dict(s_q=20, h_q=16, s_kv=8192, topk=2048, d_qk=576, invalid=0.1), id="v32-tp8-h16-short-cut"),
    pytest.param(dict(s_q=48, h_q=128, s_kv=2048, topk=640, lengths=True), id="dsv4-h128-lengths"),
    pytest.param(dict(s_q=33, h_q=16, s_kv=1000, topk=640, invalid=0.2), id="dsv4-h16-invalid"),
    pytest.param(dict(s_q=40, h_q=128, s_kv=8192, topk=2048, d_qk=576), id="v32-h128"),
    pytest.param(dict(s_q=7, h_q=63, s_kv=300, topk=129, d_qk=576, lengths=True), id="odd-h63-k129"),
    pytest.param(dict(s_q=300, h_q=64, s_kv=150, topk=128, invalid=0.5), id="many-tokens-invalid"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_CASES)
def test_gpu_matches_reference(shape):
    check(make_inputs(**shape, seed=11))


@pytest.mark.gpu
def test_gpu_fp16_matches_reference():
    check(make_inputs(16, 64, 512, 256, seed=12, dtype=torch.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("s_q", [64, 6], ids=["whole-lists", "cut-lists"])
def test_gpu_cuda_graph_replay_matches_eager(s_q):
    inputs = make_inputs(s_q, 64, 2048, 640, lengths=True, seed=13)
    eager = sparse_mla_prefill(**inputs)
    graph, captured = capture_graph(lambda: sparse_mla_prefill(**inputs))
    for t in captured:
        t.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(eager, captured, strict=True):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- hostile inputs: the reference's answer, never a crash

INT32_EXTREMES = (-(2**31), -2, -1, 2**31 - 1)


def _hostile_draw(g, s_q, h_q, d_qk, s_kv, topk, extremes, sink):
    """Random q and kv (on the CPU), indices with a fraction ``extremes`` of INT32_EXTREMES and s_kv (all of them
    without rows), and the sinks by name."""
    q = torch.randn((s_q, h_q, d_qk), generator=g).to(DTYPE)
    kv = torch.randn((s_kv, 1, d_qk), generator=g).to(DTYPE)
    idx = torch.randint(0, max(s_kv, 1), (s_q, 1, topk), generator=g, dtype=torch.int32)
    bad = torch.tensor([*INT32_EXTREMES, s_kv], dtype=torch.int32)
    pick = torch.rand((s_q, 1, topk), generator=g) < extremes
    idx = torch.where(pick | (s_kv == 0), bad[torch.randint(0, 5, (s_q, 1, topk), generator=g)], idx)
    sinks = {"none": None, "random": torch.randn((h_q,), generator=g), "+inf": torch.full((h_q,), float("inf")),
             "-inf": torch.full((h_q,), float("-inf"))}[sink]  # fmt: skip
    return q, kv, idx, sinks


@settings(max_examples=60 if not HAS_CUDA else 40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    s_q=st.integers(0, 3),
    h_q=st.sampled_from([1, 3, 16, 17]),
    d_qk=st.sampled_from([512, 576]),
    s_kv=st.integers(0, 40),
    topk=st.integers(1, 40),
    extremes=st.floats(0.0, 0.6),
    lengths=st.booleans(),
    sink=st.sampled_from(["none", "random", "+inf", "-inf"]),
    seed=st.integers(0, 2**16),
)
def test_hostile_indices_lengths_and_sinks(s_q, h_q, d_qk, s_kv, topk, extremes, lengths, sink, seed):
    """Index values from -2^31 to 2^31-1 (and s_kv itself), lengths beyond topk or negative, ±inf sinks, and NaN in
    every row no valid entry selects: the result is the fp64 reference's."""
    g = torch.Generator().manual_seed(seed)
    q, kv, idx, sinks = _hostile_draw(g, s_q, h_q, d_qk, s_kv, topk, extremes, sink)
    length = torch.randint(-(2**31), 2**31 - 1, (s_q,), generator=g, dtype=torch.int32) if lengths else None
    if length is not None and s_q:
        length[0] = torch.randint(-1, topk + 2, (1,), generator=g, dtype=torch.int32).item()
    used = torch.zeros(s_kv, dtype=torch.bool)
    for t in range(s_q):
        n = topk if length is None else min(max(int(length[t]), 0), topk)
        row = idx[t, 0, :n].long()
        used[row[(row >= 0) & (row < s_kv)]] = True
    kv[~used] = float("nan")
    on = {"device": DEVICE}
    check({
        "q": q.to(**on), "kv": kv.to(**on), "indices": idx.to(**on), "sm_scale": d_qk**-0.5,
        "attn_sink": None if sinks is None else sinks.to(**on),
        "topk_length": None if length is None else length.to(**on),
    })  # fmt: skip


@settings(max_examples=25 if not HAS_CUDA else 40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    s_q=st.integers(1, 3),
    h_q=st.sampled_from([1, 16, 17]),
    topk=st.integers(1, 70),
    splits=st.integers(2, 6),
    extremes=st.floats(0.0, 0.6),
    lengths=st.booleans(),
    sink=st.sampled_from(["none", "random", "+inf", "-inf"]),
    seed=st.integers(0, 2**16),
)
def test_hostile_inputs_with_lists_cut_into_pieces(s_q, h_q, topk, splits, extremes, lengths, sink, seed):
    """The same hostile inputs through plans that cut each list into 2..6 pieces of 16-entry tiles (pieces past the
    list's end, or past a token's length, hold nothing): the result is the fp64 reference's."""
    import dataclasses

    from wavemla.device import get_spec
    from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill

    g = torch.Generator().manual_seed(seed)
    q, kv, idx, sinks = _hostile_draw(g, s_q, h_q, 512, 40, topk, extremes, sink)
    length = torch.randint(-3, topk + 3, (s_q,), generator=g, dtype=torch.int32) if lengths else None
    on = {"device": DEVICE}
    x = {"q": q.to(**on), "kv": kv.to(**on), "indices": idx.to(**on), "sm_scale": 512**-0.5,
         "attn_sink": None if sinks is None else sinks.to(**on),
         "topk_length": None if length is None else length.to(**on)}  # fmt: skip
    planned = plan_sparse_prefill(PrefillWorkload(s_q, h_q, topk), get_spec("h200"))
    tiles = -(-topk // 16)
    plan = dataclasses.replace(planned, config=KernelConfig(16, 16, 4, 1), splits=splits,
                               piece_tiles=-(-tiles // splits))  # fmt: skip
    check(x, plan=plan)


def test_sanitizer_script_passes_here():
    """benchmarks/sanitize_prefill.py (what compute-sanitizer runs) checks every tile against the reference."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "sanitize_prefill.py"
    spec = importlib.util.spec_from_file_location("sanitize_prefill", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 0
