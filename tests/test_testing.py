import pytest
import torch

from wavemla import config
from wavemla.testing import TOLERANCES, dense_out_tolerance, rows_out_tolerance


def test_dense_out_tolerance_widens_only_for_one_bf16_dot_of_p():
    cache = torch.zeros(2, 4, 1, 576, dtype=torch.bfloat16)
    cache[0, 1, 0, 7] = -512.0  # the largest |v| of the latent part
    cache[1, 2, 0, 520] = 4096.0  # rope values are not v
    cache[1, 3] = float("nan")  # poisoned rows do not count
    strict = TOLERANCES[("out", "gpu")]
    tol = dense_out_tolerance(cache, "gpu")
    assert tol.abs == 2.0 and tol.rel == strict.rel and tol.cos == 2.0**-16
    with config.override(WAVEMLA_DENSE_P="split"):
        assert dense_out_tolerance(cache, "gpu") == strict
    assert dense_out_tolerance(cache.half(), "interp") == TOLERANCES[("out", "interp")]


def test_rows_out_tolerance_widens_on_the_gpu_for_bf16_rows_only():
    main = torch.zeros(3, 512, dtype=torch.bfloat16)
    main[0, 5] = -64.0
    main[1] = float("inf")  # poisoned rows do not count
    extra = torch.full((2, 512), 128.0, dtype=torch.bfloat16)
    strict = TOLERANCES[("out", "gpu")]
    assert rows_out_tolerance("gpu") == strict  # no bf16 rows: FlashMLA's
    assert rows_out_tolerance("interp", (main,)) == TOLERANCES[("out", "interp")]
    assert rows_out_tolerance("gpu", (main,)).abs == 64.0 / 256
    tol = rows_out_tolerance("gpu", (main, None, extra))
    assert tol.abs == 128.0 / 256 and tol.rel == strict.rel and tol.cos == 2.0**-16


def test_bf16_outputs_on_the_interpreter_take_a_wider_cosine_bound():
    """Triton's interpreter truncates fp32 to bf16: a bf16 output there (an FP8 q's) gets a cosine bound of 2e-5,
    its element bounds unchanged; fp16 outputs there and every output on the GPU keep theirs."""
    interp = TOLERANCES[("out", "interp")]
    wide = rows_out_tolerance("interp", (), torch.bfloat16)
    assert (wide.abs, wide.rel, wide.cos) == (interp.abs, interp.rel, 2e-5)
    assert rows_out_tolerance("interp", (), torch.float16) == interp
    assert rows_out_tolerance("gpu", (), torch.bfloat16) == TOLERANCES[("out", "gpu")]
    cache = torch.zeros(1, 4, 1, 576, dtype=torch.uint8)
    assert dense_out_tolerance(cache, "interp", torch.bfloat16) == wide


def test_sparse_inputs_built_a_slice_of_pages_at_a_time_keep_their_poison(monkeypatch):
    """Caches of more than ``BULK_ROWS`` rows are generated a slice of pages at a time: the picked rows are finite, the
    poisoned slots are there, and the decode over them matches the fp64 reference (it would not, reading one)."""
    import wavemla.testing as testing
    from tests.conftest import DEVICE
    from tests.kernels.test_sparse_decode import SMALL_DTYPE, check
    from wavemla.reference.fp8 import dequantize_model1

    monkeypatch.setattr(testing, "BULK_ROWS", 48)  # 3 pages of 16 rows a slice
    for fp8 in (True, False):
        inputs = testing.make_sparse_decode_inputs(
            batch=3, topk=40, page=16, extra_topk=50, extra_page=8, extra_pool=200, fp8=fp8, dtype=SMALL_DTYPE,
            device=DEVICE, seed=4,
        )  # fmt: skip
        for cache_key, idx_key in (("kv_cache", "indices"), ("extra_kv_cache", "extra_indices")):
            cache, idx = inputs[cache_key], inputs[idx_key]
            assert cache is not None and idx is not None
            rows = (dequantize_model1(cache) if fp8 else cache.float()).reshape(-1, 512)
            picked = torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
            picked[idx.flatten().long()] = True
            assert rows[picked].isfinite().all()
            assert rows.shape[0] > 16 * 3 and rows[~rows.isfinite().all(1)].shape[0] > 0  # sliced, and poisoned slots
        check(inputs)  # the decode over them matches the fp64 reference (a poisoned row read would not)


def test_check_close_names_the_worst_element_where_the_bound_is_zero():
    """With ``abs`` 0 an exact zero has a bound of 0: it is no failure, and the failure reported is the worst one."""
    from wavemla.testing import Tolerance, check_close

    tol = Tolerance(abs=0.0, rel=0.01)
    expected = torch.tensor([0.0, 1.0, 2.0, 0.0])
    assert check_close("x", expected.clone(), expected, tol) is None
    problem = check_close("x", torch.tensor([0.0, 1.5, 2.0, 1e-3]), expected, tol)
    assert problem is not None and "2 of 4 elements" in problem
    assert "worst at [3]" in problem  # 1e-3 against a bound of 0, not the exact zero at [0]


def test_an_extra_pool_smaller_than_its_picks_is_refused_naming_it():
    from wavemla.testing import make_sparse_decode_inputs

    with pytest.raises(ValueError, match=r"^extra_pool: expected at least extra_topk=8 rows to pick from, got 4"):
        make_sparse_decode_inputs(batch=1, topk=4, page=4, extra_topk=8, extra_page=4, extra_pool=4)
