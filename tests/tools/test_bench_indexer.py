"""The pure parts of the indexer benchmark (shapes, byte and memory models, statistics, record schema, baseline)."""

from __future__ import annotations

import json

import pytest
import torch

from wavemla.reference.indexer import dequantize_index_k, lightning_indexer_ref, quantize_index_k
from wavemla.tools.bench_indexer import (
    IndexerBenchCase,
    bench_cases,
    cache_bytes,
    dequantize_rows_bf16,
    fits,
    index_k_bytes,
    make_record,
    percentiles,
    row_bytes,
    run_indexer_bench,
    torch_indexer_baseline,
    torch_memory_bytes,
    triton_memory_bytes,
)

GIB = 1 << 30
SCHEMA = {
    "kernel", "provider", "gpu", "torch", "triton", "git_sha", "b", "s_q", "heads", "n_comp", "topk", "page",
    "kv_format", "q_format", "median_us", "p20_us", "p80_us", "reps", "bytes", "gbps", "copy_gbps", "pct_of_copy_bw",
}  # fmt: skip
ENV = {"gpu": "test", "torch": "t", "triton": "x", "git_sha": None}


def test_cases_cover_the_grid():
    cases = bench_cases()
    assert len(cases) == 7 * 4 * 4
    pairs = (("fp8", "fp8"), ("fp8", "bf16"), ("fp8-paged", "fp8"), ("fp8-paged", "bf16"), ("mxfp4-paged", "fp8"),
             ("mxfp4-paged", "bf16"), ("bf16", "bf16"))  # fmt: skip
    assert {(c.b, c.n_comp, c.kv_format, c.q_format) for c in cases} == {
        (b, n, kv, q) for b in (1, 32, 64, 128) for n in (2048, 8192, 32768, 262144) for kv, q in pairs
    }
    assert all(c.s_q == 1 and c.topk == 512 and c.heads == 64 and c.page == 64 for c in cases)
    with pytest.raises(ValueError, match="kv_formats"):
        bench_cases(kv_formats=("fp4",))
    with pytest.raises(ValueError, match="q_formats"):
        bench_cases(q_formats=("fp16",))


def test_byte_model():
    assert row_bytes("fp8") == row_bytes("fp8-paged") == 132 and row_bytes("bf16") == 256
    assert row_bytes("mxfp4-paged") == 68
    with pytest.raises(ValueError, match="kv_format"):
        row_bytes("int8")
    big = IndexerBenchCase(b=128, n_comp=262144, kv_format="fp8")
    assert index_k_bytes(big) == 128 * 262144 * 132
    odd = IndexerBenchCase(b=2, n_comp=100, kv_format="bf16")  # 2 pages of 64 rows per request
    assert cache_bytes(odd) == 2 * 128 * 256 and index_k_bytes(odd) == 2 * 100 * 256


def test_memory_model_and_fit():
    big = IndexerBenchCase(b=128, n_comp=262144, kv_format="bf16")
    assert triton_memory_bytes(big) > cache_bytes(big) >= 8 * GIB
    # logits bf16 (4 GiB) + their fp32 copy (8 GiB) + its product with the weights (8 GiB) + scores
    assert torch_memory_bytes(big) >= 20 * GIB
    assert fits(big, "triton", 16 * GIB) and not fits(big, "torch", 16 * GIB)
    assert all(fits(c, p, 141 * GIB) for c in bench_cases() for p in ("triton", "torch"))
    small = IndexerBenchCase(b=1, n_comp=2048, kv_format="fp8")
    assert torch_memory_bytes(small) > 0 and fits(small, "torch", GIB)
    with pytest.raises(ValueError, match="provider"):
        fits(small, "cutlass", GIB)


def test_percentiles():
    stats = percentiles([float(x) for x in range(10, 0, -1)])
    assert stats == pytest.approx({"median_us": 5.5, "p20_us": 2.8, "p80_us": 8.2})
    assert percentiles([3.0]) == {"median_us": 3.0, "p20_us": 3.0, "p80_us": 3.0}
    with pytest.raises(ValueError, match="samples_us"):
        percentiles([])


def test_record_schema():
    case = IndexerBenchCase(b=32, n_comp=8192, kv_format="fp8")
    row = make_record(case, "triton", [100.0] * 20, index_k_bytes(case), ENV, copy_gbps=4000.0)
    assert set(row) == SCHEMA
    assert row["gbps"] == pytest.approx(index_k_bytes(case) / 100e-6 / 1e9)
    assert row["pct_of_copy_bw"] == pytest.approx(100 * row["gbps"] / 4000.0)
    assert row["b"] == 32 and row["kv_format"] == "fp8" and row["reps"] == 20
    copy = make_record(None, "copy", [50.0] * 20, 2 * GIB, ENV, None)
    assert set(copy) == SCHEMA and copy["b"] is None and copy["pct_of_copy_bw"] is None
    json.dumps([row, copy])


def test_torch_baseline_selects_the_reference_set():
    g = torch.Generator().manual_seed(0)
    b, s_q, n, page, topk = 2, 2, 256, 64, 32
    q = torch.randn(b, s_q, 16, 128, generator=g)
    w = torch.randn(b, s_q, 16, generator=g)
    rows = torch.randn(b, n, 128, generator=g)
    table = torch.randperm(b * n // page, generator=g).view(b, -1).to(torch.int32)
    cache = torch.empty(b * n // page, page, 128)
    cache[table.long().flatten()] = rows.view(b * n // page, page, 128)
    got = torch_indexer_baseline(q, w, rows, table, page, topk)
    every_row = torch.full((b, s_q), n, dtype=torch.int32)  # explicit per-token counts: all n rows visible
    want, _ = lightning_indexer_ref(q, w, cache, table, every_row, topk)
    assert got.dtype == torch.int32 and got.shape == want.shape
    # random data: no ties, so the slot sets must agree (the reference lists rows in row order, not slot order)
    assert torch.equal(torch.sort(got, dim=-1).values, torch.sort(want, dim=-1).values)


def test_baseline_dequantization_is_exact_in_bf16():
    rows = torch.randn(4, 8, 128) * 3
    cache = quantize_index_k(rows)
    assert torch.equal(dequantize_rows_bf16(cache).float(), dequantize_index_k(cache))
    paged = quantize_index_k(rows, layout="paged")
    assert torch.equal(dequantize_rows_bf16(paged, "paged").float(), dequantize_index_k(paged, layout="paged"))
    assert torch.equal(dequantize_rows_bf16(paged, "paged"), dequantize_rows_bf16(cache))
    fp4 = quantize_index_k(rows, layout="paged", fmt="mxfp4")
    assert torch.equal(dequantize_rows_bf16(fp4, "paged").float(), dequantize_index_k(fp4, layout="paged"))
    every = torch.zeros(1, 64, 68, dtype=torch.uint8)  # every e2m1 code under exponents 100..163
    every[0, :, :64] = torch.arange(256, dtype=torch.uint8).view(64, 4).repeat(1, 16)
    every.view(1, 64 * 68)[0, 64 * 64 :] = (torch.arange(256) % 64 + 100).to(torch.uint8)
    assert torch.equal(dequantize_rows_bf16(every, "paged").float(), dequantize_index_k(every, layout="paged"))
    with pytest.raises(ValueError, match="layout"):
        dequantize_rows_bf16(quantize_index_k(rows, fmt="mxfp4"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_bench_needs_cuda(tmp_path):
    with pytest.raises(RuntimeError, match="CUDA"):
        run_indexer_bench(tmp_path / "out.json")


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--help"], "usage:"), (["--reps", "5", "x.json"], "--reps: expected at least"),
     (["{tmp}"], "is a directory"), (["{tmp}/none/out.json"], "no directory"), ([], "required: OUT.json")],
    ids=["help", "reps", "directory", "no-parent", "no-path"],
)  # fmt: skip
def test_main_refuses_before_running(tmp_path, capsys, argv, message):
    """Help, bad options and an output path that cannot be written end with argparse's exit, before any GPU work
    (``--help`` was taken as the output path)."""
    from wavemla.tools.bench_indexer import main

    with pytest.raises(SystemExit) as exit_info:
        main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert exit_info.value.code == (0 if argv == ["--help"] else 2)
    out = capsys.readouterr()
    assert message in out.out + out.err
    assert not (tmp_path / "--help").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_main_without_a_gpu_exits_2_without_a_traceback(tmp_path, capsys):
    from wavemla.tools.bench_indexer import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "out.json")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "python -m wavemla.tools.bench_indexer: needs a CUDA GPU\n"
    assert not (tmp_path / "out.json").exists()


@pytest.mark.gpu
def test_bench_runs_small_cases(tmp_path):
    cases = [IndexerBenchCase(b=2, n_comp=4096, kv_format=f) for f in ("fp8", "mxfp4-paged", "bf16")]
    rows = run_indexer_bench(tmp_path / "out.json", cases=cases, reps=20)
    assert [r["provider"] for r in rows] == ["copy", "triton", "torch", "triton", "torch", "triton", "torch"]
    assert all(set(r) >= SCHEMA and r["median_us"] > 0 for r in rows)
    assert json.loads((tmp_path / "out.json").read_text()) == rows


@pytest.mark.parametrize(
    ("field", "value"),
    [("b", 0), ("n_comp", -1), ("s_q", 0), ("topk", 0), ("heads", 0), ("page", 0), ("b", 2.0), ("page", True)],
)
def test_case_refuses_bad_shapes_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}: expected a positive int"):
        IndexerBenchCase(**{"b": 1, "n_comp": 64, "kv_format": "fp8", field: value})


def test_case_refuses_unknown_formats_naming_the_field():
    """An unknown query format would run bf16 queries under that label; FP8 queries need byte rows."""
    with pytest.raises(ValueError, match="kv_format"):
        IndexerBenchCase(b=1, n_comp=64, kv_format="fp4")
    with pytest.raises(ValueError, match="q_format"):
        IndexerBenchCase(b=1, n_comp=64, kv_format="fp8", q_format="fp16")
    with pytest.raises(ValueError, match="q_format"):
        IndexerBenchCase(b=1, n_comp=64, kv_format="bf16", q_format="fp8")


@pytest.mark.parametrize(("kv_format", "q_format"), [("fp8", "fp8"), ("fp8-paged", "bf16"), ("mxfp4-paged", "fp8"),
                                                     ("bf16", "bf16")])  # fmt: skip
@pytest.mark.parametrize(("n_comp", "s_q"), [(100, 1), (200, 3)])
def test_torch_case_selects_what_the_indexer_selects(kv_format, q_format, n_comp, s_q):
    """The baseline sees the rows the indexer sees: a request's first ``n_comp`` (not the tail of its last page) and,
    for ``s_q`` > 1, one row fewer per earlier token. Rows a token does not see would have made its top-k here; the
    sets agree with the reference's but for near ties (the baseline's logits are bf16)."""
    from wavemla.tools.bench_indexer import _fill_case, run_torch_case

    case = IndexerBenchCase(b=2, n_comp=n_comp, kv_format=kv_format, q_format=q_format, s_q=s_q, topk=32, heads=16)
    data = _fill_case(case, torch.Generator().manual_seed(3), device="cpu")
    layout = "paged" if kv_format.endswith("-paged") else "rows"
    q = data["q"].double()
    rows = data["cache"].double() if kv_format == "bf16" else dequantize_index_k(data["cache"], layout=layout).double()
    rows = rows.reshape(case.b, -1, 128)  # request r owns blocks [r·blocks, (r+1)·blocks)
    every = (torch.einsum("bshd,bnd->bshn", q, rows).relu() * data["w"].double()[..., None]).sum(2)
    seen = n_comp - (s_q - 1) + torch.arange(s_q)  # rows token s sees
    top_of_every = every.topk(case.topk, dim=-1).indices
    assert bool((top_of_every >= seen[:, None]).any())  # the case tells a baseline that ignores visibility apart
    got = run_torch_case(case, data)
    want, _ = lightning_indexer_ref(
        data["q"].float(), data["w"], data["cache"], data["table"], data["n_comp"], case.topk, index_k_layout=layout
    )
    assert got.shape == want.shape and bool((want >= 0).all())
    assert bool((got % (case.blocks_per_request * case.page) < seen[:, None]).all())
    for g, w in zip(got.reshape(-1, case.topk).tolist(), want.reshape(-1, case.topk).tolist(), strict=True):
        assert len(set(g) & set(w)) >= case.topk - 2


def _peak_bytes(fn):
    """Largest sum of the CPU bytes ``fn`` holds at once beyond its inputs (allocations less frees, in order)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    held = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        held += event.self_cpu_memory_usage
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize(("kv_format", "q_format"), [("fp8", "fp8"), ("fp8-paged", "bf16"), ("mxfp4-paged", "fp8"),
                                                     ("bf16", "bf16")])  # fmt: skip
def test_torch_memory_model_covers_the_baselines_peak(kv_format, q_format):
    """``torch_memory_bytes`` bounds what the baseline holds at once: the bf16 logits, their fp32 copy and the fp32
    product with the weights are all alive at the weighted sum."""
    from wavemla.tools.bench_indexer import _fill_case, run_torch_case

    case = IndexerBenchCase(b=2, n_comp=2048, kv_format=kv_format, q_format=q_format, heads=64)
    data = _fill_case(case, torch.Generator().manual_seed(0), device="cpu")
    assert _peak_bytes(lambda: run_torch_case(case, data)) <= torch_memory_bytes(case)
