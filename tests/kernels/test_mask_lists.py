"""`wavemla.kernels.mask_lists`: index lists and their statistics from transformers' attention masks, against the
torch formulation (`_lists_ref`, `_stats_ref`): bool and additive masks (fp16, bf16, fp32; the dtype's minimum and
−inf as "masked"), masks broadcast over the requests, widths 1..L, rows longer than a program's step, biases and NaN."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import DEVICE
from wavemla import device
from wavemla.kernels import mask_lists as ml


def _valid(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else ~(mask <= torch.finfo(mask.dtype).min / 2)


def _lists_ref(mask: torch.Tensor, width: int) -> torch.Tensor:
    """Width L: slot or −1 per row; a smaller width: the (j+1)-th attended row at entry j, −1 past the count."""
    valid = _valid(mask)
    b, s, length = mask.shape
    base = (torch.arange(b, device=mask.device, dtype=torch.int32) * length).view(b, 1, 1)
    if width >= length:
        return torch.where(valid, torch.arange(length, device=mask.device, dtype=torch.int32) + base, -1)
    seen = torch.cumsum(valid, dim=-1, dtype=torch.int32)
    want = torch.arange(1, width + 1, device=mask.device, dtype=torch.int32).expand(b, s, width).contiguous()
    rows = torch.searchsorted(seen, want, out_int32=True)
    return torch.where(rows < length, rows + base, -1)


def _stats_ref(mask: torch.Tensor) -> list[int]:
    valid = _valid(mask)
    biased = mask.dtype != torch.bool and bool(((mask != 0) & valid).any())
    return [int(valid.sum(-1).max()) if valid.numel() else 0, int(biased)]


def _mask(shape: tuple[int, int, int], dtype: torch.dtype, p: float, seed: int, inf: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    att = torch.rand(shape, generator=gen) < p
    if dtype == torch.bool:
        return att.to(DEVICE)
    masked = -torch.inf if inf else torch.finfo(dtype).min
    return torch.zeros(shape, dtype=dtype).masked_fill(~att, masked).to(DEVICE)


SHAPES = [
    pytest.param((1, 5, 3000), id="B1-S5-L3000"),  # rows over two steps of a program
    pytest.param((3, 4, 70), id="B3-S4-L70"),
    pytest.param((2, 1, 1), id="B2-S1-L1"),
    pytest.param((2, 7, 1025), id="B2-S7-L1025"),  # one entry past a step
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bool, torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_lists_and_stats_match_torch(shape: tuple[int, int, int], dtype: torch.dtype) -> None:
    length = shape[2]
    for p, inf in ((0.3, False), (0.02, True), (1.0, False)):
        mask = _mask(shape, dtype, p, seed=length, inf=inf)
        assert ml.mask_stats(mask).tolist() == _stats_ref(mask)
        for width in sorted({1, max(1, length // 3), length - 1 or 1, length}):
            assert torch.equal(ml.mask_lists(mask, width), _lists_ref(mask, width)), (p, width)


def test_broadcast_mask_biases_and_nan() -> None:
    """One mask row set for every request (stride 0): each request's slots; a bias, NaN (attended, a bias) or −inf
    (masked) where they are; a mask of 0 and "masked" has no bias; a mask whose rows are not contiguous."""
    mask = torch.zeros(1, 4, 50, dtype=torch.bfloat16)
    mask[0, 0, 3] = -torch.inf
    mask[0, 3, 10:] = torch.finfo(torch.bfloat16).min
    rows = mask.to(DEVICE).expand(3, 4, 50)
    assert ml.mask_stats(rows).tolist() == [50, 0]
    assert torch.equal(ml.mask_lists(rows, 20), _lists_ref(rows, 20))
    assert ml.mask_lists(rows, 50)[2, 0, :5].tolist() == [100, 101, 102, -1, 104]
    for value in (0.5, torch.nan):
        biased = mask.clone()
        biased[0, 2, 7] = value
        assert ml.mask_stats(biased.to(DEVICE).expand(3, 4, 50)).tolist() == [50, 1]
    rows = mask.to(DEVICE).expand(3, 4, 50)
    assert ml.mask_lists(rows, 10)[1, 3].tolist() == list(range(50, 60))
    strided = mask.to(DEVICE)[0].t().contiguous().t().unsqueeze(0)  # rows 4 elements apart
    assert strided.stride(2) == 4 and torch.equal(ml.mask_lists(strided, 20), _lists_ref(strided, 20))


def test_empty_and_refused() -> None:
    """No token or no row: zero statistics and lists of −1 only; a width outside 1..L and other dtypes: refused."""
    assert ml.mask_stats(torch.zeros(0, 3, 8, dtype=torch.bool, device=DEVICE)).tolist() == [0, 0]
    assert ml.mask_lists(torch.zeros(2, 0, 8, dtype=torch.bool, device=DEVICE), 8).shape == (2, 0, 8)
    mask = torch.ones(1, 2, 8, dtype=torch.bool, device=DEVICE)
    for width in (0, 9):
        with pytest.raises(ValueError, match=r"^width: expected 1\.\.L=8"):
            ml.mask_lists(mask, width)
    for dtype in (torch.float64, torch.int32):
        with pytest.raises(ValueError, match=r"^mask: expected bool, fp16, bf16 or fp32"):
            ml.mask_stats(torch.zeros(1, 2, 8, dtype=dtype, device=DEVICE))


def test_batches_past_the_grid_bound_launch_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """More requests than CUDA allows in grid dimension 1 (65535, the requests' axis): every launch of both kernels
    stays within the bound and together they cover every request (launches recorded, not run)."""
    grids: list[tuple[int, ...]] = []
    monkeypatch.setattr(ml.launch, "run", lambda fn, grid, *args, **kwargs: grids.append(tuple(grid)))
    b = 2 * 65535 + 3
    mask = torch.ones(1, 2, 4, dtype=torch.bool, device=DEVICE).expand(b, 2, 4)
    ml.mask_stats(mask)
    ml.mask_lists(mask, 3)
    for kernel in range(2):
        runs = [g for g in grids if len(g) == 2][kernel * 3 : kernel * 3 + 3]
        assert runs and all(g[0] == 2 and g[1] <= 65535 for g in runs) and sum(g[1] for g in runs) == b, grids


@pytest.mark.parametrize("width", [4, 70])
def test_requests_in_runs_give_the_lists_of_one_launch(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    """With the grid bound lowered to 2 requests, 5 requests run in three launches: the same lists (each request's
    own slots) and statistics."""
    monkeypatch.setattr(ml, "MAX_GRID_YZ", 2)
    mask = _mask((5, 3, 70), torch.float16, 0.3, seed=11)
    assert ml.mask_stats(mask).tolist() == _stats_ref(mask)
    assert torch.equal(ml.mask_lists(mask, width), _lists_ref(mask, width))


def test_slots_past_int32_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """B·L over 2^31: slot i·L + j of the last requests would wrap around in the int32 lists (refused before any
    launch; launches recorded, not run)."""
    monkeypatch.setattr(ml.launch, "run", lambda *args, **kwargs: None)
    mask = torch.ones(1, 1, 1, dtype=torch.bool, device=DEVICE).expand(4, 1, 2**29 + 1)
    with pytest.raises(ValueError, match=r"^mask: slots i·L \+ j of B=4 requests"):
        ml.mask_lists(mask, 8)


def test_empty_lists_of_many_slots_are_not_refused() -> None:
    """No token (S = 0): an empty output, whatever B·L (no slot is written, so none can wrap around)."""
    mask = torch.ones(1, 0, 1, dtype=torch.bool, device=DEVICE).expand(4, 0, 2**29 + 1)
    assert ml.mask_lists(mask, 8).shape == (4, 0, 8)


def test_entries_past_2_31_elements_are_read_where_they_lie() -> None:
    """A token's mask entries 2^30 elements apart (stride along L), its last 2^31 elements past its first: each entry
    is read at its own address (an int32 offset would wrap around to the element 2^32 before it, attended here)."""
    try:
        store = torch.empty(2**32 + 1, dtype=torch.bool, device=DEVICE)  # only the elements set below are touched
    except (RuntimeError, MemoryError) as err:
        pytest.skip(f"no 4 GiB allocation: {err}")
    store[0] = True  # where a wrapped offset of the last row would land
    store[2**31] = True
    store[2**31 + 2**30] = False
    store[2**32] = False
    mask = store.as_strided((1, 1, 3), (0, 0, 2**30), 2**31)
    assert ml.mask_lists(mask, 3).tolist() == [[[0, -1, -1]]]
    assert ml.mask_lists(mask, 2).tolist() == [[[0, -1]]]
    assert ml.mask_stats(mask).tolist() == [1, 0]


@pytest.mark.skipif(DEVICE != "cpu", reason="the refusal of CPU tensors outside the interpreter")
def test_cpu_tensors_need_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "triton_interpreting", lambda: False)  # what check_kernel_device reads
    with pytest.raises(ValueError, match=r"^mask: expected a CUDA tensor"):
        ml.mask_lists(torch.ones(1, 2, 8, dtype=torch.bool), 8)


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA-graph capture")
def test_lists_under_graph_capture() -> None:
    """Both kernels record into a CUDA graph (no host read) and replay on new mask values."""
    mask = _mask((2, 3, 700), torch.bfloat16, 0.3, seed=1)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ml.mask_lists(mask, 640)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lists = ml.mask_lists(mask, 640)
        stats = ml.mask_stats(mask)
    mask.copy_(_mask((2, 3, 700), torch.bfloat16, 0.5, seed=2))
    graph.replay()
    assert torch.equal(lists, _lists_ref(mask, 640)) and stats.tolist() == _stats_ref(mask)


@pytest.mark.skipif(DEVICE != "cuda", reason="launch replays need CUDA tensors")
def test_repeated_signatures_replay_the_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch with the signature of one before is a replay of the compiled kernel (no Triton binding) with the
    same results as Triton's launch, on new values and new addresses; a new width or stride is a new signature;
    ``WAVEMLA_LAUNCH=triton`` records nothing."""
    from wavemla import config

    ml._REPLAYS.clear()
    launches = []
    run = ml.launch.run
    monkeypatch.setattr(ml.launch, "run", lambda *a, **k: launches.append(a[0]) or run(*a, **k))
    first = _mask((3, 2, 1500), torch.float16, 0.4, seed=3)
    assert torch.equal(ml.mask_lists(first, 640), _lists_ref(first, 640)) and len(ml._REPLAYS) == 1
    for seed in (4, 5):
        mask = _mask((3, 2, 1500), torch.float16, 0.4 + seed / 20, seed=seed)  # new values, new address
        assert torch.equal(ml.mask_lists(mask, 640), _lists_ref(mask, 640))
        assert ml.mask_stats(mask).tolist() == _stats_ref(mask)
    assert launches == [ml._mla_mask_lists_kernel, ml._mla_mask_stats_kernel]  # one Triton launch each, then replays
    assert all(replay is not None for (replay,) in ml._REPLAYS.values()) and len(ml._REPLAYS) == 2
    ml.mask_lists(first, 1500)  # another width: recorded
    ml.mask_lists(first[:, :, :1400], 640)  # another shape: recorded
    assert len(launches) == 4 and len(ml._REPLAYS) == 4
    with config.override(WAVEMLA_LAUNCH="triton"):
        assert torch.equal(ml.mask_lists(first, 640), _lists_ref(first, 640))
    assert len(launches) == 5 and len(ml._REPLAYS) == 4


@pytest.mark.skipif(DEVICE != "cpu", reason="Triton's interpreter")
def test_interpreted_launches_are_not_recorded() -> None:
    """Under Triton's interpreter (CPU tensors) every launch is Triton's: nothing is kept for replay."""
    ml._REPLAYS.clear()
    mask = _mask((1, 2, 70), torch.bool, 0.5, seed=6)
    for _ in range(2):
        assert torch.equal(ml.mask_lists(mask, 8), _lists_ref(mask, 8))
    assert len(ml._REPLAYS) == 0


_BUILDS = """
import json
from wavemla import resources as r
from wavemla.kernels.mask_lists import BLOCK_L, _mla_mask_lists_kernel, _mla_mask_stats_kernel
out = []
strides = {"stride_b": 0, "stride_s": 4096, "stride_l": 1}
for arch in r.ARCHES:
    for mask, additive in (("*bf16", True), ("*u8", False)):
        k = r.compile_for_target(_mla_mask_stats_kernel, arch=arch, num_warps=4, num_stages=1,
                                 pointers={"p_mask": mask, "p_stats": "*i32"}, ints=strides, fp32=("thr",),
                                 unspecialized=("L",), constexprs={"FLOAT": additive, "BLOCK_L": BLOCK_L})
        out.append([arch, "stats", additive, int(k.metadata.shared)])
        for compact in (True, False):
            k = r.compile_for_target(_mla_mask_lists_kernel, arch=arch, num_warps=4, num_stages=1,
                                     pointers={"p_mask": mask, "p_out": "*i32"}, ints=strides, fp32=("thr",),
                                     unspecialized=("L", "S", "width"),
                                     constexprs={"FLOAT": additive, "COMPACT": compact, "BLOCK_L": BLOCK_L})
            out.append([arch, "lists", additive, int(k.metadata.shared)])
print(json.dumps(out))
"""


def test_both_kernels_compile_for_every_arch() -> None:
    """Both kernels, bool and additive masks, compacted lists or not, compile for sm_80..sm_120 (offline, Triton's
    interpreter off) within a 99 KB block."""
    from tests.conftest import json_from_child
    from wavemla import resources

    builds = json_from_child(_BUILDS)
    assert {a for a, *_ in builds} == set(resources.ARCHES) and len(builds) == 6 * len(resources.ARCHES)
    assert all(shared <= 99 * 1024 for *_, shared in builds)
