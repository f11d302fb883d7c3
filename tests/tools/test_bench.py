"""The benchmark's pure parts on CPU: the dense length mixes, the bytes and FLOPs a call must move, the record's line,
the warm-up, and which card FlashMLA's anchors are shown on (the timing needs a GPU: the GPU lane runs ``wavemla
bench``)."""

from __future__ import annotations

import dataclasses

import pytest

from wavemla.device import get_spec
from wavemla.tools.bench import (
    FLASHMLA_ANCHOR_GPU,
    DenseRecord,
    Record,
    dense_lengths,
    dense_traffic,
    flashmla_anchor_us,
    format_dense_record,
    format_record,
)


def bench_parser():
    """``wavemla bench``'s argument parser, as the CLI builds it."""
    import argparse

    from wavemla.tools import bench

    parser = argparse.ArgumentParser(prog="wavemla bench")
    bench.add_arguments(parser)
    return parser


def test_dense_lengths() -> None:
    assert dense_lengths(3, 4096, "uniform") == [4096] * 3
    assert dense_lengths(9, 4096, "skewed") == [4096] + [128] * 7 + [4096]
    assert dense_lengths(2, 16, "skewed") == [16, 1]
    with pytest.raises(ValueError, match="kind"):
        dense_lengths(2, 16, "random")


def test_dense_traffic_counts_every_key_row_once() -> None:
    flops, nbytes = dense_traffic([100, 0], s_q=1, h_q=64, d_qk=576, fp8=False, page=64)
    assert flops == 2.0 * 64 * (576 + 512) * 100
    # 100 rows of 1152 bytes, 2 block-table entries, 2 lengths, q in and out/lse for 2 requests of 64 rows
    assert nbytes == 100 * 1152 + 2 * 4 + 2 * 4 + 2 * 64 * (2 * 576 + 2 * 512 + 4)
    assert dense_traffic([100], s_q=1, h_q=1, d_qk=576, fp8=True, page=64)[1] > 100 * 656
    # per-tensor FP8 rows: 576 bytes a key, the rest as for any cache
    v32 = dense_traffic([100], s_q=1, h_q=1, d_qk=576, fp8=True, page=64)[1]
    assert dense_traffic([100], s_q=1, h_q=1, d_qk=576, fp8=True, page=64, fp8_tensor=True)[1] == v32 - 100 * 80


def test_dense_record_line_shows_the_call_with_the_schedule_reused() -> None:
    fields = {f.name: 0 for f in dataclasses.fields(DenseRecord)}
    fields.update(provider="wavemla", mode="dense", kv_format="bf16", lengths="uniform", config="64x64x8x2",
                  batch=32, h_q=64, s_q=1, s_k=4096, median_us=68.9, reused_us=66.8, pct_copy=53.6,
                  pct_copy_reused=55.3)  # fmt: skip
    line = format_dense_record(DenseRecord(**fields))
    assert "68.9us" in line and "53.6%copy" in line
    assert line.endswith("schedule reused      66.8us  55.3%copy")


def test_p20_and_p80_are_the_quantiles_of_the_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    from wavemla.tools import bench
    from wavemla.tools.bench_indexer import percentiles

    # of 5 samples the p80 lies between the 4th and the 5th (it was the 5th, the maximum), of 20 below the 17th
    for samples in ([5.0, 1.0, 4.0, 2.0, 3.0], [float(x) for x in range(20, 0, -1)], [7.0]):
        monkeypatch.setattr(bench, "timing_samples_us", lambda fn, reps, flush, graph, s=samples: sorted(s))
        stats = percentiles(samples)  # the indexer benchmark's p20/p80, the same JSON fields
        assert bench.timings_us(lambda: None, reps=len(samples)) == pytest.approx(
            (stats["p20_us"], stats["median_us"], stats["p80_us"])
        )
    assert bench.spread_us([5.0, 1.0, 4.0, 2.0, 3.0]) == pytest.approx((1.8, 3.0, 4.2))
    with pytest.raises(ValueError, match="samples"):
        bench.spread_us([])


@pytest.mark.gpu
def test_timed_calls_follow_untimed_ones_for_the_warm_up_time() -> None:
    import time

    from wavemla.tools import bench

    calls: list[float] = []
    start = time.perf_counter()
    samples = bench.timing_samples_us(lambda: calls.append(time.perf_counter()), reps=5)
    assert len(samples) == 5 and samples == sorted(samples)
    assert len(calls) >= bench.WARM_CALLS + 5
    assert calls[-5] - start >= bench.WARM_MS / 1e3  # the first timed call comes after the warm-up time


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--reps", "0"], "--reps"),
        (["--batch", "32", "0"], "--batch"),
        (["--heads", "-64"], "--heads"),
        (["--s-q", "0"], "--s-q"),
        (["--dense", "--seqlen", "0"], "--seqlen"),
        (["--configs", "32x32"], "--configs"),
        (["--configs", "64x64x8xone"], "--configs"),
    ],
)
def test_bad_arguments_are_refused_naming_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # before any GPU work: a bad --configs failed unpacking after the ceilings and the inputs, --reps 0 in a median
    parser = bench_parser()
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(argv)
    assert exit_info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err
    args = parser.parse_args(["--configs", "32x32x8x1", "--batch", "1", "64", "--reps", "15"])
    assert args.configs == ["32x32x8x1"] and args.batch == [1, 64] and args.reps == 15


def test_flashmla_anchors_only_on_the_card_they_were_measured_on() -> None:
    assert get_spec(FLASHMLA_ANCHOR_GPU).name == FLASHMLA_ANCHOR_GPU
    assert flashmla_anchor_us("csa", 64, 1, 64, True, "h200") == 43.8
    # another card's time over an H200's would compare two cards; FlashMLA's sparse decode reads FP8 caches only
    assert flashmla_anchor_us("csa", 64, 1, 64, True, get_spec("h100").name) is None
    assert flashmla_anchor_us("csa", 64, 1, 64, False, "h200") is None
    assert flashmla_anchor_us("csa", 64, 1, 65, True, "h200") is None


def test_record_line_names_flashmla_only_beside_an_anchor() -> None:
    fields = {f.name: 0 for f in dataclasses.fields(Record)}
    fields.update(provider="wavemla", mode="csa", config="64x64x8x1", batch=64, s_q=1, h_q=64, fp8=True,
                  units_per_part=5, programs=128, combine=True, median_us=42.0, flashmla_us=None,
                  ratio_to_flashmla=None, predicted_us=None)  # fmt: skip
    assert "FlashMLA" not in format_record(Record(**fields))
    fields.update(flashmla_us=43.8, ratio_to_flashmla=42.0 / 43.8)
    assert format_record(Record(**fields)).endswith("| FlashMLA    43.8  0.96x")


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--dense", "--bf16"], "--bf16"),
        (["--dense", "--mode", "hca"], "--mode"),
        (["--seqlen", "4096"], "--seqlen"),
        (["--lengths", "skewed"], "--lengths"),
        (["--kv-formats", "bf16"], "--kv-formats"),
        (["--s-q", "1", "5"], "--s-q"),
        (["--heads", "129"], "--heads"),
        (["--dense", "--heads", "256"], "--heads"),
    ],
)
def test_options_of_the_other_mode_or_out_of_range_are_refused(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # --dense --bf16 ran both row formats, --kv-formats without --dense ran the sparse FP8 decode: each silently
    # something other than asked; --s-q 5 and --heads 129 failed in the decode call after the ceilings were measured
    from wavemla.tools import bench

    parser = bench_parser()
    assert bench.run(parser.parse_args(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wavemla bench: {option}:"), err


@pytest.mark.parametrize("where", ["no-directory", "a-directory"])
def test_json_path_is_checked_before_the_run(where: str, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The records are written after the whole run: a --json path that cannot take them is refused first."""
    from wavemla.tools import bench

    parser = bench_parser()
    path = str(tmp_path / "none" / "out.json") if where == "no-directory" else str(tmp_path)
    assert bench.run(parser.parse_args(["--json", path])) == 2
    err = capsys.readouterr().err
    assert err.startswith("wavemla bench: --json: "), err


@pytest.mark.parametrize("name", ["", "  "], ids=["empty", "blank"])
def test_an_empty_or_blank_json_name_is_refused(
    name: str, tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty ``--json`` is not taken for no ``--json``, nor a blank one for a file named by spaces: either way the
    records of the whole run would not land where meant."""
    from wavemla.tools import bench

    monkeypatch.chdir(tmp_path)
    assert bench.run(bench_parser().parse_args(["--json", name])) == 2
    err = capsys.readouterr().err
    assert err.startswith("wavemla bench: --json: expected a file name"), err
    assert list(tmp_path.iterdir()) == []


def test_json_path_ending_in_a_separator_is_refused(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """``results/`` names a directory that does not exist yet: Path drops the separator (its parent exists), but
    open() refuses the name, which would lose the whole run at the end."""
    from wavemla.tools import bench

    path = str(tmp_path / "results") + "/"
    with pytest.raises(OSError):
        open(path, "w")  # noqa: SIM115 - the write the run would end with
    assert bench.run(bench_parser().parse_args(["--json", path])) == 2
    err = capsys.readouterr().err
    assert err.startswith("wavemla bench: --json: ") and "names a directory" in err, err


def test_each_mode_takes_its_defaults() -> None:
    from wavemla.tools import bench

    parser = bench_parser()
    sparse = bench.resolve_args(parser.parse_args(["--s-q", "1", "4", "--heads", "128"]))
    assert sparse.mode == ["csa", "hca"] and sparse.batch == bench.SPARSE_BATCHES and sparse.heads == [128]
    dense = bench.resolve_args(parser.parse_args(["--dense", "--s-q", "8"]))
    assert dense.seqlen == bench.DENSE_SEQLENS and dense.lengths == ["uniform", "skewed"]
    assert dense.kv_formats == ["bf16", "fp8"] and dense.heads == bench.DENSE_HEADS
    assert dense.batch == bench.DENSE_BATCHES


def test_a_value_named_twice_is_timed_once() -> None:
    from wavemla.tools import bench

    parser = bench_parser()
    sparse = bench.resolve_args(parser.parse_args(["--batch", "8", "1", "8", "--mode", "hca", "csa", "hca",
                                                   "--heads", "64", "64", "--s-q", "2", "1", "2"]))  # fmt: skip
    assert (sparse.batch, sparse.mode, sparse.heads, sparse.s_q) == ([8, 1], ["hca", "csa"], [64], [2, 1])
    dense = bench.resolve_args(parser.parse_args(["--dense", "--seqlen", "4096", "4096", "--lengths", "skewed",
                                                  "skewed", "--kv-formats", "fp8", "fp8"]))  # fmt: skip
    assert (dense.seqlen, dense.lengths, dense.kv_formats) == ([4096], ["skewed"], ["fp8"])


def test_sparse_traffic_counts_each_cache_formats_row_bytes() -> None:
    import torch

    from wavemla.reference.fp8 import quantize_model1
    from wavemla.reference.fp8_v32 import quantize_v32
    from wavemla.tools.bench import traffic

    b, h = 2, 16
    idx = torch.tensor([[[0, 5, 5, -1, 64]], [[1, 2, 3, 4, 9]]], dtype=torch.int32)  # 64: past the 64 slots
    rows = torch.randn(1, 64, 1, 512)
    io = b * h * (2 * 512 + 2 * 512 + 4) + idx.numel() * 4  # q in, out and lse written, the indices
    # MODEL1: 584 B a distinct valid row (request 0 reads slots 0 and 5, request 1 five slots)
    flops, nbytes = traffic({"q": torch.zeros(b, 1, h, 512, dtype=torch.bfloat16), "kv_cache": quantize_model1(rows),
                             "indices": idx})  # fmt: skip
    assert (flops, nbytes) == (2.0 * h * (512 + 512) * 8, 7 * 584 + io)
    # bf16 rows: 1024 B
    assert traffic({"q": torch.zeros(b, 1, h, 512, dtype=torch.bfloat16), "kv_cache": rows.bfloat16(),
                    "indices": idx})[1] == 7 * 1024 + io  # fmt: skip
    # DeepSeek-V3.2: q 576 wide, out 512 wide, 656 B a row; QK over 576, PV over 512
    q = torch.zeros(b, 1, h, 576, dtype=torch.bfloat16)
    flops, nbytes = traffic({"q": q, "kv_cache": quantize_v32(torch.randn(1, 64, 1, 576)), "indices": idx})
    assert flops == 2.0 * h * (576 + 512) * 8
    assert nbytes == 7 * 656 + b * h * (2 * 576 + 2 * 512 + 4) + idx.numel() * 4
    # topk_length: entries past a request's length are not read (request 0: 2 entries, request 1: none)
    flops, nbytes = traffic({"q": torch.zeros(b, 1, h, 512, dtype=torch.bfloat16), "kv_cache": quantize_model1(rows),
                             "indices": idx, "topk_length": torch.tensor([2, 0], dtype=torch.int32)})  # fmt: skip
    assert (flops, nbytes) == (2.0 * h * (512 + 512) * 2, 2 * 584 + io)
