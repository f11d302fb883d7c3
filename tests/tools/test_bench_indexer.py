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
    # logits bf16 (4 GiB) + weighted fp32 (8 GiB) + scores
    assert torch_memory_bytes(big) >= 12 * GIB
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


@pytest.mark.gpu
def test_bench_runs_small_cases(tmp_path):
    cases = [IndexerBenchCase(b=2, n_comp=4096, kv_format=f) for f in ("fp8", "mxfp4-paged", "bf16")]
    rows = run_indexer_bench(tmp_path / "out.json", cases=cases, reps=20)
    assert [r["provider"] for r in rows] == ["copy", "triton", "torch", "triton", "torch", "triton", "torch"]
    assert all(set(r) >= SCHEMA and r["median_us"] > 0 for r in rows)
    assert json.loads((tmp_path / "out.json").read_text()) == rows
