"""The interpreter's scalar ``__index__`` under NumPy 2.4 (wavemla.kernels.interpret)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from wavemla.device import triton_interpreting
from wavemla.kernels.interpret import _MARK, _scalar_index, fix_scalar_index


def _scalar(data: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(handle=SimpleNamespace(data=data))


def test_one_element_arrays_of_any_rank_index_as_ints() -> None:
    assert _scalar_index(_scalar(np.array(5, dtype=np.int32))) == 5
    assert _scalar_index(_scalar(np.array([6], dtype=np.int32))) == 6
    assert _scalar_index(_scalar(np.array([[7]], dtype=np.int64))) == 7
    with pytest.raises(TypeError, match=r"block of shape \(2,\)"):
        _scalar_index(_scalar(np.array([1, 2], dtype=np.int32)))


@triton.jit
def _scalar_range_kernel(p_out, n):
    i = tl.program_id(0)
    acc = 0
    for j in range(i // 2, i + n):
        acc += j
    tl.store(p_out + i, acc)


@pytest.mark.skipif(not triton_interpreting(), reason="runs only under Triton's interpreter")
def test_kernel_loops_over_scalar_bounds_under_the_interpreter() -> None:
    """Failed with "only 0-dimensional arrays can be converted to Python scalars" on Triton 3.5 and 3.6 with NumPy
    2.4 before the fix."""
    from triton.runtime import interpreter

    installed = interpreter._patch_lang_tensor
    assert getattr(installed, _MARK, False), "not installed when wavemla.kernels was imported"
    out = torch.zeros(4, dtype=torch.int32)
    _scalar_range_kernel[(4,)](out, 3)
    assert out.tolist() == [sum(range(i // 2, i + 3)) for i in range(4)]
    assert fix_scalar_index() and interpreter._patch_lang_tensor is installed  # a second call changes nothing
