"""benchmarks/report.py --glance: each headline row comes from records of the shape, batch, lengths, cache format and
provider its label names, and a record without one of those keys is an error, not a row dropped or mislabelled."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "report.py"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_report", REPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def records(doc: Any) -> list[dict[str, Any]]:
    """The record list of a result file (a list, or the ``records``/``rows`` of an object)."""
    if isinstance(doc, list):
        return doc
    return doc["records"] if "records" in doc else doc["rows"]


def decoy(rows: list[dict[str, Any]], like: dict[str, Any], **changes: Any) -> None:
    """Append a copy of ``like`` that differs in ``changes`` and times 4242 µs, a figure no headline row shows."""
    r = copy.deepcopy(like) | changes
    for key in ("median_us", "invariant_us", "package_us"):
        if key in r:
            r[key] = 4242.0
    if "ratio" in r:
        r["ratio"] = 42.0  # the worst of its batches, were it taken
    rows.append(r)


def with_decoys(report: ModuleType) -> dict[str, Any]:
    """The committed results the glance reads, each with records next to the picked ones that differ in one key the
    row's label names."""
    docs = {
        name: copy.deepcopy(report.load(name))
        for name in (
            report.SPARSE_BENCH,
            report.BI,
            report.DENSE,
            report.DENSE_CURVE,
            report.DENSE_FP8_CURVE,
            report.IDX,
            f"{report.BEFORE}-idx-spread",
            *report.IDX_AB,
            report.PREFILL,
        )
    }
    sparse = records(docs[report.SPARSE_BENCH])
    csa1 = next(r for r in sparse if r["mode"] == "csa" and r["batch"] == 1)
    decoy(sparse, csa1, fp8=False)  # "FP8 MODEL1"
    decoy(sparse, csa1, provider="flashmla")
    bi = records(docs[report.BI])
    decoy(bi, bi[0], heads=128)  # "h=64"
    dense = records(docs[report.DENSE])
    decoy(dense, dense[0], provider="flashmla")
    decoy(dense, dense[0], s_q=2)
    curve = records(docs[report.DENSE_CURVE])
    uniform = next(r for r in curve if r["lengths"] == "uniform")
    decoy(curve, uniform, kv_format="fp8")  # "bf16"
    decoy(curve, uniform, s_k=16384)  # "s_k 4K"
    decoy(curve, uniform, provider="flashmla")
    fp8 = records(docs[report.DENSE_FP8_CURVE])
    b32 = next(r for r in fp8 if r["batch"] == 32)
    decoy(fp8, b32, kv_format="bf16")  # "FP8 V3.2"
    decoy(fp8, b32, s_k=8192)  # "s_k 4K"
    decoy(fp8, b32, lengths="skewed")
    idx = records(docs[report.IDX])
    auto = next(r for r in idx if r["provider"] == "triton" and r["select"] == r["auto"])
    # the (n_comp, b) of the glance's row from the run before these: only the decoys would come before it
    where = {"n_comp": 262144, "b": 128}
    decoy(idx, auto, q_format="bf16", **where)  # "FP8 rows and q"
    decoy(idx, auto, topk=2048, **where)  # "top-512"
    return docs


def test_glance_rows_come_from_the_records_their_labels_name(
    report: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = report.glance()
    docs = with_decoys(report)
    monkeypatch.setattr(report, "load", lambda name: docs[name])
    assert report.glance() == real
    assert "4242" not in real and "42.00×" not in real


def test_a_sparse_batch_without_a_flashmla_time_keeps_its_row(report: ModuleType) -> None:
    """HCA at b = 8 has no FlashMLA anchor: its row is shown without a ratio, not left out."""
    lines = report.glance().splitlines()
    rows = [line for line in lines if line.startswith("| sparse decode | HCA, h=64, s_q=1, FP8 MODEL1 | 8 |")]
    assert len(rows) == 1 and "no FlashMLA time" in rows[0], lines


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("SPARSE_BENCH", "fp8"),
        ("BI", "heads"),
        ("DENSE", "provider"),
        ("DENSE_CURVE", "lengths"),
        ("DENSE_FP8_CURVE", "kv_format"),
        ("IDX", "q_format"),
    ],
)
def test_a_record_without_a_key_its_row_names_is_an_error(
    report: ModuleType, monkeypatch: pytest.MonkeyPatch, source: str, key: str
) -> None:
    docs = with_decoys(report)
    name = getattr(report, source)
    for r in records(docs[name]):
        if r.get("provider") != "copy":
            r.pop(key, None)
    monkeypatch.setattr(report, "load", lambda n: docs[n])
    with pytest.raises(KeyError, match=key):
        report.glance()
