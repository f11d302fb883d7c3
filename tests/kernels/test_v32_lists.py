"""`wavemla.kernels.v32_lists`: DeepSeek-V3.2's compacted block tables and the sink's scale, against their torch
formulations (`_lists_ref`: a stable sort of the validity mask; `_sink_ref`: the scale in fp32): invalid entries of
every kind, lengths from negative to past topk, lists longer than a program's step, sinks of ±inf, tokens that saw no
row, outputs of other strides and in place."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import DEVICE
from wavemla import device
from wavemla.kernels import v32_lists as vl

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _lists_ref(idx: torch.Tensor, length: torch.Tensor | None, slots: int) -> tuple[torch.Tensor, torch.Tensor]:
    b, s_q, topk = idx.shape
    valid = (idx >= 0) & (idx.long() < slots)
    if length is not None:
        valid &= torch.arange(topk, device=idx.device).view(1, 1, topk) < length.view(b, 1, 1)
    order = torch.argsort((~valid).to(torch.uint8), dim=-1, stable=True)
    table = torch.gather(torch.where(valid, idx, 0), -1, order).view(b * s_q, topk)
    return table, valid.sum(-1, dtype=torch.int32).view(b * s_q)


def _indices(b: int, s_q: int, topk: int, slots: int, seed: int, p_bad: float = 0.3) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, max(slots, 1), (b, s_q, topk), generator=gen, dtype=torch.int32)
    junk = torch.tensor([-1, slots, INT32_MAX, INT32_MIN, -7], dtype=torch.int32)
    bad = torch.rand(b, s_q, topk, generator=gen) < p_bad
    return torch.where(bad, junk[torch.randint(0, 5, (b, s_q, topk), generator=gen)], idx).to(DEVICE)


@pytest.mark.parametrize(
    ("b", "s_q", "topk", "slots"),
    [(3, 2, 96, 500), (2, 1, 2048 + 5, 4096), (1, 3, 1, 1), (4, 1, 1024, 64), (2, 2, 300, 0)],
    ids=["small", "past-two-steps", "one-entry", "one-step", "no-slots"],
)
@pytest.mark.parametrize("lengths", ["none", "mixed"])
def test_lists_match_the_sort(b: int, s_q: int, topk: int, slots: int, lengths: str) -> None:
    idx = _indices(b, s_q, topk, slots, seed=topk + b)
    length = None
    if lengths == "mixed":
        choices = [-5, 0, 1, topk // 2, topk, topk + 9, INT32_MAX, INT32_MIN]
        length = torch.tensor([choices[i % len(choices)] for i in range(b)], dtype=torch.int32, device=DEVICE)
    table, count = vl.compact_lists(idx, length, slots)
    want_table, want_count = _lists_ref(idx, length, slots)
    assert table.dtype == count.dtype == torch.int32
    assert torch.equal(count, want_count) and torch.equal(table, want_table)


@pytest.mark.parametrize(("page", "block_rows"), [(64, 64), (64, 70), (1, 3), (16, 1000)])
def test_pages_apart_map_slots_to_rows(page: int, block_rows: int) -> None:
    """Pages that start ``block_rows`` rows apart: each valid slot is written as its row, ``(slot // page) ·
    block_rows + slot % page``; back-to-back pages keep the slot."""
    slots = 40 * page
    idx = _indices(2, 3, 300, slots, seed=page + block_rows)
    length = torch.tensor([250, 300], dtype=torch.int32, device=DEVICE)
    table, count = vl.compact_lists(idx, length, slots, page=page, block_rows=block_rows)
    want_table, want_count = _lists_ref(idx, length, slots)
    kept = torch.arange(300, device=DEVICE).view(1, -1) < want_count.view(-1, 1)
    rows = torch.where(kept, want_table // page * block_rows + want_table % page, 0)
    assert torch.equal(count, want_count) and torch.equal(table, rows)


def test_slots_beyond_int32_keep_every_non_negative_entry() -> None:
    """A cache of more than 2^31 slots: every non-negative int32 entry, INT32_MAX included, is valid."""
    idx = torch.tensor([[[INT32_MAX, -1, 5, INT32_MIN, 0]]], dtype=torch.int32, device=DEVICE)
    table, count = vl.compact_lists(idx, None, 2**33)
    assert count.tolist() == [3] and table.tolist() == [[INT32_MAX, 5, 0, 0, 0]]
    table, count = vl.compact_lists(idx, None, INT32_MAX)  # the last int32 slot is then out of range
    assert count.tolist() == [2] and table.tolist() == [[5, 0, 0, 0, 0]]


def test_batch_strides_and_empty_shapes() -> None:
    """Lists sliced out of a wider tensor (request and token strides of another shape); no tokens; topk 0."""
    wide = _indices(3, 4, 200, 1000, seed=3)
    idx = wide[:, 1:3, :150]
    table, count = vl.compact_lists(idx, None, 1000)
    want_table, want_count = _lists_ref(idx.contiguous(), None, 1000)
    assert torch.equal(table, want_table) and torch.equal(count, want_count)
    table, count = vl.compact_lists(torch.zeros(0, 2, 8, dtype=torch.int32, device=DEVICE), None, 10)
    assert table.shape == (0, 8) and count.shape == (0,)
    table, count = vl.compact_lists(torch.zeros(2, 1, 0, dtype=torch.int32, device=DEVICE), None, 10)
    assert table.shape == (2, 0) and count.tolist() == [0, 0]


def test_batches_past_the_grid_bound_launch_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """More requests than CUDA allows in grid dimension 1 (65535, the requests' axis): every launch stays within
    the bound and together they cover every request (launches recorded, not run)."""
    grids: list[tuple[int, ...]] = []
    monkeypatch.setattr(vl.launch, "run", lambda fn, grid, *args, **kwargs: grids.append(tuple(grid)))
    b = 2 * 65535 + 3
    idx = torch.zeros(1, 2, 4, dtype=torch.int32, device=DEVICE).expand(b, 2, 4)
    length = torch.zeros(b, dtype=torch.int32, device=DEVICE)
    vl.compact_lists(idx, length, 8)
    assert grids and all(g[0] == 2 and g[1] <= 65535 for g in grids) and sum(g[1] for g in grids) == b


@pytest.mark.parametrize(("page", "block_rows", "lengths"), [(1, 1, False), (16, 20, True)])
def test_requests_in_runs_give_the_lists_of_one_launch(
    monkeypatch: pytest.MonkeyPatch, page: int, block_rows: int, lengths: bool
) -> None:
    """With the grid bound lowered to 2 requests, 5 requests run in three launches: the same table and counts."""
    monkeypatch.setattr(vl, "MAX_GRID_YZ", 2)
    slots = 40 * page
    idx = _indices(5, 3, 300, slots, seed=page)
    length = torch.tensor([250, 0, 300, -1, 17], dtype=torch.int32, device=DEVICE) if lengths else None
    table, count = vl.compact_lists(idx, length, slots, page=page, block_rows=block_rows)
    want_table, want_count = _lists_ref(idx, length, slots)
    kept = torch.arange(300, device=DEVICE).view(1, -1) < want_count.view(-1, 1)
    rows = torch.where(kept, want_table // page * block_rows + want_table % page, 0)
    assert torch.equal(count, want_count) and torch.equal(table, rows)


def _sink_ref(o: torch.Tensor, lse: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """In fp64: the kernel's fp32 factor may differ from it in the last bit, its output by one rounding."""
    lse = lse.double()
    factor = torch.where(lse == math.inf, 1.0, 1.0 / (1.0 + torch.exp(sink.double().view(1, 1, -1) - lse)))
    return o.double() * factor[..., None]


def _assert_rounded(got: torch.Tensor, want: torch.Tensor) -> None:
    """``got`` is ``want`` rounded to its dtype, give or take one unit in the last place (subnormals included)."""
    info = torch.finfo(got.dtype)
    assert got.dtype in (torch.float16, torch.bfloat16)
    assert bool(((got.double() - want).abs() <= info.eps * want.abs() + info.tiny * info.eps).all())


def _sink_inputs(b: int, s_q: int, h: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    o = torch.randn(b, s_q, h, 512, generator=gen).to(dtype)
    lse = torch.randn(b, s_q, h, generator=gen) * 3
    lse[0, 0, : max(1, h // 3)] = math.inf  # tokens' heads that saw no row
    o[0, 0, : max(1, h // 3)] = 0
    sink = torch.randn(h, generator=gen)
    sink[0] = -math.inf
    if h > 1:
        sink[1] = math.inf
    return o.to(DEVICE), lse.to(DEVICE), sink.to(DEVICE)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(("b", "s_q", "h"), [(2, 1, 16), (1, 3, 5), (3, 2, 128), (1, 1, 1)])
def test_sink_scale_in_place_and_into_strided_out(b: int, s_q: int, h: int, dtype: torch.dtype) -> None:
    o, lse, sink = _sink_inputs(b, s_q, h, dtype, seed=h + s_q)
    want = _sink_ref(o, lse, sink)
    # into an out laid out [h, b, s_q, 512] and with every other column
    base = torch.full((h, b, s_q, 1024), float("nan"), dtype=dtype, device=DEVICE)
    out = base.permute(1, 2, 0, 3)[..., ::2]
    assert vl.scale_by_sink(o, lse, sink, out) is out
    _assert_rounded(out, want)
    assert bool(base[..., 1::2].isnan().all())
    got = o.clone()
    vl.scale_by_sink(got, lse, sink, got)  # in place
    assert torch.equal(got, out)
    if h > 1:
        assert bool((got[..., 1, :] == 0).all())  # a sink of +inf
    assert torch.equal(got[0, 0, : max(1, h // 3)], o[0, 0, : max(1, h // 3)])  # no row seen: unchanged


def test_sink_scale_into_columns_past_2_31_elements() -> None:
    """An out whose columns lie 4202528 elements apart, its last column past 2^31 elements from its first: every
    column is written where it lies (an int32 offset would wrap around to 2^32 elements before it)."""
    stride, start = 4_202_528, 2**31  # 511 · stride > 2^31
    try:  # only the elements written below are touched
        store = torch.empty(start + 511 * stride + 1, dtype=torch.float16, device=DEVICE)
    except (RuntimeError, MemoryError) as err:
        pytest.skip(f"no 8 GiB allocation: {err}")
    wrapped = start + 511 * stride - 2**32  # where the last column would land
    store[wrapped] = 7.0
    out = store.as_strided((1, 1, 1, 512), (0, 0, 0, stride), start)
    out.fill_(3.0)
    o = torch.full((1, 1, 1, 512), 2.0, dtype=torch.float16, device=DEVICE)
    lse = torch.zeros(1, 1, 1, device=DEVICE)
    vl.scale_by_sink(o, lse, torch.full((1,), -math.inf, device=DEVICE), out)
    assert bool((out == 2.0).all()) and store[wrapped].item() == 7.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int64, device=DEVICE), None, 4),
         r"^indices: expected \[b, s_q, topk\] int32"),
        (lambda: vl.compact_lists(torch.zeros(1, 4, 2, dtype=torch.int32, device=DEVICE).transpose(1, 2), None, 4),
         r"^indices: the last dimension must be contiguous"),
        (lambda: vl.compact_lists(torch.zeros(2, 1, 4, dtype=torch.int32, device=DEVICE),
                                  torch.zeros(3, dtype=torch.int32, device=DEVICE), 4),
         r"^topk_length: expected \[b=2\] int32"),
        (lambda: vl.compact_lists(torch.zeros(2, 1, 4, dtype=torch.int32, device=DEVICE),
                                  torch.zeros(4, dtype=torch.int32, device=DEVICE)[::2], 4),
         r"^topk_length: must be contiguous \(stride 1\), got stride 2"),
        (lambda: vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int32, device=DEVICE), None, -1),
         r"^slots: expected an int of at least 0, got -1"),
        (lambda: vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int32, device=DEVICE), None, 4, page=0),
         r"^page: expected an int of at least 1, got 0"),
        (lambda: vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int32, device=DEVICE), None, 64, page=16,
                                  block_rows=15), r"^block_rows: expected an int of at least 16, got 15"),
        (lambda: vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int32, device=DEVICE), None, 2**31, page=64,
                                  block_rows=65), r"^block_rows: the last page's rows lie past 2\^31"),
        (lambda: vl.scale_by_sink(*_bad_sink(o=torch.zeros(1, 1, 2, 256))), r"^o: expected \[b, s_q, h_q, 512\]"),
        (lambda: vl.scale_by_sink(*_bad_sink(lse=torch.zeros(1, 2, 1))), r"^lse: expected a contiguous \[1, 1, 2\]"),
        (lambda: vl.scale_by_sink(*_bad_sink(sink=torch.zeros(2, dtype=torch.float64))),
         r"^attn_sink: expected a contiguous \[2\] fp32"),
        (lambda: vl.scale_by_sink(*_bad_sink(out=torch.zeros(1, 1, 2, 512))), r"^out: expected \[1, 1, 2, 512\]"),
    ],
)  # fmt: skip
def test_refusals_name_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def _bad_sink(**change: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(o, lse, attn_sink, out) for 1 token of 2 heads, fp16, with ``change`` swapped in (moved to the device)."""
    x = {
        "o": torch.zeros(1, 1, 2, 512, dtype=torch.float16),
        "lse": torch.zeros(1, 1, 2),
        "sink": torch.zeros(2),
        "out": torch.zeros(1, 1, 2, 512, dtype=torch.float16),
    }
    x.update(change)
    return tuple(t.to(DEVICE) for t in x.values())


@pytest.mark.skipif(DEVICE != "cpu", reason="the refusal of CPU tensors outside the interpreter")
def test_cpu_tensors_outside_the_interpreter_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "triton_interpreting", lambda: False)  # what check_kernel_device reads
    with pytest.raises(ValueError, match=r"^indices: expected a CUDA tensor"):
        vl.compact_lists(torch.zeros(1, 1, 4, dtype=torch.int32), None, 4)
    with pytest.raises(ValueError, match=r"^o: expected a CUDA tensor"):
        vl.scale_by_sink(*_bad_sink())


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA-graph capture")
def test_gpu_both_kernels_under_graph_capture_and_replays() -> None:
    """Both kernels record into a CUDA graph (no host read) and replay on new values; a second eager call of the same
    signature is a launch replay with the same results."""
    vl._REPLAYS.clear()
    idx = _indices(4, 2, 2048, 16384, seed=1)
    length = torch.tensor([0, 100, 2048, 5000], dtype=torch.int32, device=DEVICE)
    o, lse, sink = _sink_inputs(4, 2, 128, torch.bfloat16, seed=2)
    out = torch.empty_like(o)
    for _ in range(2):  # Triton's launch, then a replay
        table, count = vl.compact_lists(idx, length, 16384)
        want_table, want_count = _lists_ref(idx, length, 16384)
        assert torch.equal(table, want_table) and torch.equal(count, want_count)
        _assert_rounded(vl.scale_by_sink(o, lse, sink, out), _sink_ref(o, lse, sink))
    assert len(vl._REPLAYS) == 2 and all(r is not None for (r,) in vl._REPLAYS.values())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        table, count = vl.compact_lists(idx, length, 16384)
        vl.scale_by_sink(o, lse, sink, out)
    idx.copy_(_indices(4, 2, 2048, 16384, seed=3))
    lse.copy_(_sink_inputs(4, 2, 128, torch.bfloat16, seed=4)[1])
    graph.replay()
    want_table, want_count = _lists_ref(idx, length, 16384)
    assert torch.equal(table, want_table) and torch.equal(count, want_count)
    _assert_rounded(out, _sink_ref(o, lse, sink))


_BUILDS = """
import json
from wavemla import resources as r
from wavemla.kernels.v32_lists import BLOCK_D, BLOCK_K, _mla_v32_lists_kernel, _mla_sink_scale_kernel
out = []
for arch in r.ARCHES:
    for has_len in (True, False):
        k = r.compile_for_target(_mla_v32_lists_kernel, arch=arch, num_warps=4, num_stages=1,
                                 pointers={"p_idx": "*i32", "p_len": "*i32", "p_table": "*i32", "p_count": "*i32"},
                                 ints={"stride_b": 4096, "stride_s": 2048},
                                 unspecialized=("S", "topk", "last_slot", "page", "block_rows"),
                                 constexprs={"HAS_LEN": has_len, "TO_ROWS": has_len, "BLOCK_K": BLOCK_K})
        out.append([arch, "compact", has_len, int(k.metadata.shared), r._res_usage(k.asm["cubin"])[1]])
    for dtype in ("*bf16", "*fp16"):
        k = r.compile_for_target(_mla_sink_scale_kernel, arch=arch, num_warps=4, num_stages=1,
                                 pointers={"p_o": dtype, "p_lse": "*fp32", "p_sink": "*fp32", "p_out": dtype},
                                 ints={"stride_ob": 131072, "stride_os": 65536, "stride_oh": 512, "stride_db": 131072,
                                       "stride_ds": 65536, "stride_dh": 512},
                                 unspecialized=("S", "H"),  # stride_dd 1, as Triton specializes it
                                 constexprs={"stride_dd": 1, "BLOCK_H": 8, "BLOCK_D": BLOCK_D})
        out.append([arch, "sink", dtype, int(k.metadata.shared), r._res_usage(k.asm["cubin"])[1]])
print(json.dumps(out))
"""


def test_both_kernels_compile_for_every_arch() -> None:
    """Both kernels (with lengths and pages apart, and with neither; fp16 and bf16 outputs) compile for
    sm_80..sm_120 (offline, Triton's interpreter off) within a 99 KB block and with no stack frame (nothing
    spilled)."""
    from tests.conftest import json_from_child
    from wavemla import resources

    builds = json_from_child(_BUILDS)
    assert {a for a, *_ in builds} == set(resources.ARCHES) and len(builds) == 4 * len(resources.ARCHES)
    assert all(shared <= 99 * 1024 and stack == 0 for *_, shared, stack in builds)
