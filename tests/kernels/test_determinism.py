"""Repeated calls on the same inputs give identical bits: fresh or reused metadata, split and combine paths, batch-
invariant mode, and (GPU) other streams and CUDA-graph replays.

The sparse decode merges a cut token's pieces in a fixed order (its only atomic counts the pieces written, which
decides which program merges, not how), so every output bit is a function of the inputs and the plan; these tests
hold it to that. A repeated call also finds the piece counters reset by the call before.
"""

import pytest
import torch

from tests.conftest import DEVICE, HAS_CUDA
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.stress import first_difference

SMALL_DTYPE = torch.bfloat16 if HAS_CUDA else torch.float16  # the interpreter's bf16 tl.dot is not real bf16


def _kwargs(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if v is not None}


def assert_same_bits(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], what: str) -> None:
    for name, x, y in (("out", a[0], b[0]), ("lse", a[1], b[1])):
        diff = first_difference(x, y)
        assert diff is None, f"{what}: {name} differs in {diff[0]} elements, first at {list(diff[1])}: {diff[2:]}"


KNOBS = [
    pytest.param({}, id="planner"),
    pytest.param({"WAVEMLA_NUM_SPLITS": 3}, id="splits3-combine"),
    pytest.param({"WAVEMLA_TARGET_CTAS": 5}, id="ctas5-cut-tokens"),
    pytest.param({"WAVEMLA_BATCH_INVARIANT": True}, id="batch-invariant"),
]


@pytest.mark.parametrize("knobs", KNOBS)
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "rows"])
def test_repeated_calls_are_bitwise_identical(knobs: dict, fp8: bool) -> None:
    inputs = make_sparse_decode_inputs(
        batch=3, s_q=2, h_q=5, topk=24, page=16, extra_topk=24, extra_page=8, extra_pool=64, fp8=fp8,
        dtype=SMALL_DTYPE, device=DEVICE, invalid_fraction=0.2, seed=11,
    )  # fmt: skip
    kwargs = _kwargs(inputs)
    kwargs["topk_length"] = torch.tensor([24, 7, 0], dtype=torch.int32, device=DEVICE)
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        first = sparse_mla_decode(**kwargs, metadata=meta)
        assert_same_bits(first, sparse_mla_decode(**kwargs, metadata=meta), "reused metadata")
        assert_same_bits(first, sparse_mla_decode(**kwargs), "fresh metadata")
        copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        assert_same_bits(first, sparse_mla_decode(**copies), "the same values in other buffers")


# --- GPU lane ------------------------------------------------------------------------------------------------
GPU_SHAPES = [
    pytest.param(dict(batch=64, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048), id="csa"),
    pytest.param(dict(batch=32, h_q=64, topk=128, page=256, extra_topk=1024, extra_page=2), id="hca"),
    pytest.param(dict(batch=7, s_q=2, h_q=128, topk=128, page=256, extra_topk=512, extra_page=64), id="csa-s2-h128"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", KNOBS)
@pytest.mark.parametrize("fp8", [True, False], ids=["fp8", "bf16"])
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_gpu_repeats_streams_and_graphs_are_bitwise_identical(shape: dict, fp8: bool, knobs: dict) -> None:
    inputs = make_sparse_decode_inputs(**shape, fp8=fp8, dtype=torch.bfloat16, device="cuda", seed=13)
    kwargs = _kwargs(inputs)
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        first = sparse_mla_decode(**kwargs, metadata=meta)
        for i in range(20):
            assert_same_bits(first, sparse_mla_decode(**kwargs, metadata=meta), f"repeat {i}")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            on_side = sparse_mla_decode(**kwargs)
        torch.cuda.current_stream().wait_stream(side)
        assert_same_bits(first, on_side, "another stream")
        graph_meta, _ = get_mla_metadata()
        with torch.cuda.stream(side):
            sparse_mla_decode(**kwargs, metadata=graph_meta)  # warm-up: plan + workspace outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = sparse_mla_decode(**kwargs, metadata=graph_meta)
        for i in range(10):
            graph.replay()
            torch.cuda.synchronize()
            assert_same_bits(first, captured, f"graph replay {i}")
