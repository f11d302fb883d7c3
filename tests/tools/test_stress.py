"""`wavemla stress`: the schedule, the bitwise comparison and option handling on the CPU; the harness end to end
through the interpreter (eager, one queue) with an injected bit flip; CUDA graphs on several streams on the GPU."""

from __future__ import annotations

import argparse
import collections
import re
from typing import Any

import pytest
import torch

from wavemla.cli import COMMANDS, build_parser
from wavemla.tools import stress


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    stress.add_arguments(parser)
    return parser.parse_args(list(argv))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = stress.run(_args(*argv))
    return code, capsys.readouterr().out


# --- pure parts ------------------------------------------------------------------------------------------------
def test_defaults_and_small_preset() -> None:
    cfg = stress.config_from_args(_args())
    assert (cfg.mode, cfg.replays, cfg.graphs, cfg.streams, cfg.heads) == ("csa", 10_000, 4, 2, 64)
    assert (cfg.topk, cfg.page, cfg.extra_topk, cfg.extra_page, cfg.extra_pool) == stress.MODES["csa"]
    assert cfg.use_graphs and cfg.uses_indexer and cfg.splits == (None, 3)
    assert stress.config_from_args(_args("--batch-invariant")).splits == (None, 2)  # 2 divides the tiles per token
    small = stress.config_from_args(_args("--small", "--mode", "hca"))
    assert (small.replays, small.graphs, small.heads, small.batches) == (stress.SMALL_REPLAYS, 2, 16, (2, 3))
    assert (small.topk, small.page, small.extra_topk, small.extra_page, small.extra_pool) == stress.SMALL_MODES["hca"]
    assert not small.uses_indexer  # the indexer feeds CSA layers only
    cfg = stress.config_from_args(_args("--splits", "auto", "2", "--replays", "20", "--batch", "5", "9"))
    assert cfg.splits == (None, 2) and cfg.replays == 20
    assert [cfg.batch_of(g) for g in range(4)] == [5, 9, 5, 9]
    assert [cfg.splits_of(g) for g in range(3)] == [None, 2, None]
    shared = stress.config_from_args(_args("--share-metadata", "--batch", "5", "9", "--splits", "3", "auto"))
    assert [shared.batch_of(g) for g in range(3)] == [5, 5, 5] and shared.splits_of(1) == 3
    assert cfg.indexer_select is None
    spread = stress.config_from_args(_args("--indexer-select", "spread", "--batch", "48", "16", "--s-q", "1"))
    assert spread.indexer_select == "spread"
    assert (cfg.index_k, cfg.index_k_layout) == ("fp8", "rows")
    mxfp4 = stress.config_from_args(_args("--index-k", "mxfp4"))
    assert (mxfp4.index_k, mxfp4.index_k_layout) == ("mxfp4", "paged") and mxfp4.uses_indexer


def test_dense_mode_and_its_small_preset() -> None:
    cfg = stress.config_from_args(_args("--mode", "dense"))
    assert cfg.dense and not cfg.uses_indexer and (cfg.seqlen, cfg.page) == stress.DENSE_SHAPE
    assert cfg.splits == (None, 3)  # program slots (WAVEMLA_TARGET_CTAS) of the second graph
    small = stress.config_from_args(_args("--mode", "dense", "--small", "--seqlen", "100"))
    assert (small.seqlen, small.page, small.heads) == (100, stress.SMALL_DENSE_SHAPE[1], 16)
    assert not stress.config_from_args(_args()).dense
    assert not cfg.fp8_tensor and stress.config_from_args(_args("--mode", "dense", "--fp8-tensor")).fp8_tensor
    for bad in (("--fp8-tensor",), ("--mode", "v32", "--fp8-tensor"), ("--mode", "dense", "--bf16", "--fp8-tensor")):
        with pytest.raises(ValueError, match=r"^--fp8-tensor: the per-tensor FP8 rows of --mode dense"):
            stress.config_from_args(_args(*bad))


def test_v32_mode_and_its_small_preset() -> None:
    cfg = stress.config_from_args(_args("--mode", "v32"))
    assert cfg.v32 and cfg.dense_kernels and not cfg.dense and not cfg.uses_indexer
    assert (cfg.topk, cfg.page, cfg.pool, cfg.heads) == (*stress.V32_SHAPE, 128)  # DeepSeek-V3.2's 128 heads
    assert cfg.splits == (None, 3)  # program slots of the second graph, as for the dense decode
    small = stress.config_from_args(_args("--mode", "v32", "--small"))
    assert (small.topk, small.page, small.pool, small.heads) == (*stress.SMALL_V32_SHAPE, 16)
    assert not stress.config_from_args(_args("--mode", "dense")).v32


def test_indexer_selects_are_the_indexers() -> None:
    from wavemla.kernels.indexer import SELECT_PATHS

    assert ("auto", *SELECT_PATHS) == stress.INDEXER_SELECTS


def test_index_k_formats_are_the_indexers() -> None:
    from wavemla.reference.indexer import INDEX_K_FORMATS

    assert stress.INDEX_K_FORMATS == INDEX_K_FORMATS


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (("--streams", "1"), "--streams"),
        (("--splits", "x"), "--splits"),
        (("--splits", "-2"), "--splits"),
        (("--replays", "0"), "--replays"),
        (("--batch", "0"), "--batch"),
        (("--inject-flip", "10", "--replays", "10"), "--inject-flip"),
        (("--variants", "0"), "--variants"),
        (("--indexer-select", "spread"), "--indexer-select"),  # the default batches reach 96 query tokens
        (("--seqlen", "64"), "--seqlen"),  # the dense decode's option
        (("--mode", "dense", "--seqlen", "0"), "--seqlen"),
        (("--mode", "dense", "--batch-invariant"), "--batch-invariant"),
        (("--mode", "dense", "--indexer-select", "token"), "--indexer-select"),
        (("--mode", "dense", "--index-k", "mxfp4"), "--index-k"),
        (("--mode", "v32", "--batch-invariant"), "--batch-invariant"),  # the V3.2 call has no such mode
        (("--mode", "v32", "--seqlen", "64"), "--seqlen"),
        (("--mode", "v32", "--indexer-select", "token"), "--indexer-select"),
        (("--mode", "v32", "--index-k", "mxfp4"), "--index-k"),
        (("--mode", "hca", "--index-k", "mxfp4"), "--index-k"),
        (("--mode", "swa", "--index-k", "mxfp4"), "--index-k"),
        (("--no-indexer", "--index-k", "mxfp4"), "--index-k"),  # CSA with random compressed indices
        (("--mode", "hca", "--indexer-select", "token"), "--indexer-select"),  # only CSA graphs run the indexer
        (("--mode", "swa", "--indexer-select", "chunked"), "--indexer-select"),
        (("--no-indexer", "--indexer-select", "token"), "--indexer-select"),
        (("--share-pool", "--no-graph"), "--share-pool"),  # eager calls: no graph, so no pool to share
        (("--heads", "129"), "--heads"),  # the decodes take 1..128 query heads
        (("--mode", "dense", "--heads", "200"), "--heads"),
        (("--s-q", "5"), "--s-q"),  # the DeepSeek-V4 sparse decode takes 1..4 query tokens a request
        (("--mode", "swa", "--s-q", "9"), "--s-q"),
    ],
)
def test_bad_options_name_the_option(argv: tuple[str, ...], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=f"^{option}:"):
        stress.config_from_args(_args(*argv))
    assert stress.run(_args(*argv)) == 2
    assert option in capsys.readouterr().err


def test_cpu_options_are_checked_too() -> None:
    """--cpu runs one queue, but a stream count below 1 leaves the schedule nothing to draw from (it failed after
    the whole setup with an error naming no option), and no graph is captured, so no pool can be shared (the
    negative control would report a PASS of nothing)."""
    for n in ("0", "-2"):
        with pytest.raises(ValueError, match=r"^--streams:"):
            stress.config_from_args(_args("--cpu", "--streams", n))
    assert stress.config_from_args(_args("--cpu", "--streams", "1")).streams == 1
    with pytest.raises(ValueError, match=r"^--share-pool: .*--cpu"):
        stress.config_from_args(_args("--cpu", "--share-pool"))


def test_the_first_line_names_the_batches_that_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sizes are cycled over the graphs; a size no graph gets (fewer graphs, or one shared metadata) is not listed."""
    monkeypatch.setattr(stress, "run_stress", lambda cfg: stress.StressReport())
    _, out = _run(capsys, "--graphs", "2", "--batch", "48", "7", "96")
    assert "batch per graph=[48, 7] " in out.splitlines()[0], out
    _, out = _run(capsys, "--share-metadata", "--batch", "64", "7", "--splits", "3")
    assert "batch per graph=[64, 64, 64, 64] " in out.splitlines()[0], out


def test_an_error_before_the_setup_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating the streams (or asking for the device) can fail with a CUDA error too: a report with exit 2, not an
    exception that leaves the process with exit 1, the code for differing bits."""

    def broken_streams(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setattr(stress, "_Streams", broken_streams)
    cfg = stress.StressConfig(cpu=True, use_graphs=False, graphs=1, replays=1, batches=(2,))
    report = stress.run_stress(cfg, log=lambda s: None)
    assert report.exit_code == 2 and report.error == "RuntimeError: CUDA error: out of memory"


def test_a_cpu_config_with_graphs_is_refused_naming_use_graphs() -> None:
    """The command line turns graphs off with --cpu; a config built in Python that asks for both is refused (CUDA
    graphs cannot capture the interpreter's run), and so is its shared pool."""
    with pytest.raises(ValueError, match=r"^use_graphs: --cpu runs the decode eagerly"):
        stress.validate_config(stress.StressConfig(cpu=True))
    with pytest.raises(ValueError, match=r"^use_graphs: "):
        stress.validate_config(stress.StressConfig(cpu=True, share_pool=True))
    stress.validate_config(stress.StressConfig(cpu=True, use_graphs=False))


def test_indexer_select_without_an_indexer_is_refused() -> None:
    """A forced select path where no graph runs the indexer would be a stress of nothing it names: refused, also
    where 'spread' would have been refused for the query tokens alone."""
    message = "^--indexer-select: the CSA indexer's select path; --mode hca runs no indexer$"
    with pytest.raises(ValueError, match=message):
        stress.config_from_args(_args("--mode", "hca", "--indexer-select", "spread"))  # the default batches: 96 tokens
    with pytest.raises(ValueError, match=r"^--indexer-select: .*; --no-indexer runs no indexer$"):
        stress.config_from_args(_args("--no-indexer", "--indexer-select", "chunked"))
    assert stress.config_from_args(_args("--mode", "hca")).indexer_select is None  # auto: nothing forced


def test_index_k_format_outside_the_choices_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _args("--index-k", "fp4")
    assert exit_info.value.code == 2 and "--index-k" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^--index-k: expected one of \['fp8', 'mxfp4'\], got 'fp4'"):
        stress.validate_config(stress.StressConfig(index_k="fp4"))
    message = "^--index-k: the format of the CSA indexer's cache; --mode hca runs no indexer$"
    with pytest.raises(ValueError, match=message):
        stress.config_from_args(_args("--mode", "hca", "--index-k", "mxfp4"))


@pytest.mark.parametrize(("index_k", "width"), [("fp8", 132), ("mxfp4", 68)])
def test_index_k_cache_poisons_its_spare_page(index_k: str, width: int) -> None:
    """The index-K cache holds rows of the chosen format; the page no block table entry points at reads as NaN in
    every value (0xFF bytes: NaN e4m3 codes and scale, or e8m0 exponent 255), the pages in use as finite keys."""
    from wavemla.reference.indexer import dequantize_index_k

    cfg = stress.config_from_args(_args("--cpu", "--small", "--batch", "3", "--index-k", index_k))
    case = stress.build_case(cfg, 0, "cpu")
    cache, table = case.fixed["index_k_cache"], case.fixed["block_table"]
    blocks = 3 * (cfg.extra_pool // cfg.extra_page) + 1  # three requests' pages and the spare one
    assert cache.dtype == torch.uint8 and cache.shape == (blocks, cfg.extra_page, width)
    values = dequantize_index_k(cache, layout=cfg.index_k_layout)
    used = torch.zeros(cache.shape[0], dtype=torch.bool)
    used[table.flatten().long()] = True
    assert int((~used).sum()) == 1
    assert values[~used].isnan().all() and values[used].isfinite().all()


def test_schedule_rotates_graphs_over_streams() -> None:
    cfg = stress.StressConfig(graphs=4, streams=3, replays=1001, variants=3, seed=7)
    plan = stress.schedule(cfg)
    assert plan == stress.schedule(cfg), "the schedule is a function of the seed"
    assert plan != stress.schedule(stress.StressConfig(graphs=4, streams=3, replays=1001, variants=3, seed=8))
    assert [r.index for r in plan] == list(range(1001))
    rounds = collections.defaultdict(list)
    for r in plan:
        rounds[r.round].append(r.graph)
    assert all(sorted(g) == [0, 1, 2, 3] for rnd, g in rounds.items() if rnd < max(rounds))
    assert all(len(set(g)) == len(g) for g in rounds.values()), "a graph replays at most once per round"
    for g in range(4):
        mine = [r for r in plan if r.graph == g]
        assert {r.stream for r in mine} == {0, 1, 2}
        assert {r.variant for r in mine} == {0, 1, 2}
        assert any(r.stream != r.check_stream for r in mine) and any(r.stream == r.check_stream for r in mine)
    ops = collections.Counter(op for r in plan for op, _ in r.noise)
    assert set(ops) == set(stress.NOISE_OPS)
    assert all(0 < size <= cfg.noise_mm**2 * 4 for r in plan for _, size in r.noise)


def test_first_difference_is_bitwise() -> None:
    a = torch.tensor([[1.0, float("nan")], [0.0, 2.0]], dtype=torch.bfloat16)
    assert stress.first_difference(a, a.clone()) is None, "identical NaNs are equal bits"
    b = a.clone()
    b[1, 0] = -0.0
    b[1, 1] = 3.0
    assert stress.first_difference(b, a) == (2, (1, 0), -0.0, 0.0), "-0 and +0 differ"
    lse = torch.arange(24, dtype=torch.float32).view(2, 3, 4).transpose(1, 2)  # non-contiguous, like the API's lse
    other = lse.clone()
    other[1, 2, 0] += 1
    assert stress.first_difference(lse, other) == (1, (1, 2, 0), float(lse[1, 2, 0]), float(other[1, 2, 0]))
    idx = torch.tensor([3, -1, 5], dtype=torch.int32)
    assert stress.first_difference(idx, torch.tensor([3, -1, 6], dtype=torch.int32)) == (1, (2,), 5.0, 6.0)
    with pytest.raises(ValueError, match="compare"):
        stress.first_difference(a, a.float())


class _LoggedStreams(stress._Streams):
    """CPU streams that log the ordering calls the harness makes."""

    def __init__(self, n: int) -> None:
        super().__init__(torch.device("cpu"), n)
        self.calls: list[tuple[str, int]] = []

    def record(self, i: int) -> object:
        self.calls.append(("record", i))
        return ("event", i)

    def wait(self, i: int, event: object) -> None:
        assert event == ("event", i ^ 1)
        self.calls.append(("wait", i))

    def mark_used(self, t: torch.Tensor, i: int) -> None:
        self.calls.append(("mark_used", i))


def test_cross_stream_noise_waits_for_the_allocating_stream() -> None:
    """A block allocated on one stream may still be read by work queued there (the check's temporaries): the stream
    that fills it first waits for the allocating one. Without the wait the fill raced the check's comparison mask
    and reported every element of a correct output as different."""
    cfg = stress.config_from_args(_args("--cpu", "--small"))
    streams = _LoggedStreams(2)
    noise = stress._Noise(cfg, streams)
    noise.run("alloc_cross", 64, stream=0, rnd=0)
    noise.run("alloc", 64, stream=1, rnd=0)  # same-stream allocation: no handover
    assert streams.calls == [("record", 1), ("wait", 0), ("mark_used", 0)]
    assert noise.counts["alloc_cross"] == noise.counts["alloc"] == 1


def test_cli_registers_the_verb() -> None:
    assert COMMANDS["stress"][0] == "wavemla.tools.stress"
    args = build_parser().parse_args(["stress", "--small", "--replays", "3"])
    assert args._module is stress and args.replays == 3


# --- the harness, eagerly through the interpreter ---------------------------------------------------------------
# The interpreter harness switches Triton to interpreter mode for the whole process, which must not happen in a
# process that runs CUDA kernels: on a GPU machine these run only in the GPU lane below.
cpu_lane_only = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU lane (Triton interpreter) only")


@cpu_lane_only
def test_cpu_harness_matches_eager_and_reports_an_injected_flip(capsys: pytest.CaptureFixture[str]) -> None:
    """CSA with the indexer feeding the decode, one graph planned by the planner and one with forced splits: every
    replay matches its eager reference except the one whose output got a flipped bit, which is reported alone."""
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "csa", "--batch", "2", "--graphs", "2", "--variants", "2",
        "--replays", "5", "--inject-flip", "2", "--check-every", "1",
    )  # fmt: skip
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 1, out
    assert re.match(
        r"MISMATCH graph \d replay 2 \(round 1, .*\): out: 1 of \d+ elements differ; first at \[0, 0, 0, 0]", lines[0]
    )
    assert "indexer in graph" in out and "splits=3" in out and "combine=yes" in out
    assert "result: FAIL (1 mismatching output(s) in 1 of " in out


@cpu_lane_only
def test_cpu_harness_passes_without_faults(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--cpu", "--small", "--mode", "hca", "--batch", "3", "--replays", "4", "--variants", "2")
    assert code == 0, out
    assert "MISMATCH" not in out and "result: PASS (0 mismatching output(s) in 0 of 4 replay(s))" in out


@cpu_lane_only
def test_cpu_harness_with_a_forced_indexer_select(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "csa", "--batch", "2", "--replays", "3", "--variants", "2",
        "--indexer-select", "spread",
    )  # fmt: skip
    assert code == 0, out
    assert "indexer in graph (select=spread)" in out and "result: PASS" in out


@cpu_lane_only
@pytest.mark.parametrize("index_k", ["fp8", "mxfp4"])
def test_graph_indexer_reads_the_index_k_cache_it_was_built_with(index_k: str) -> None:
    """What a CSA graph holds selects, from the index-K cache ``build_case`` made (FP8 rows, or MXFP4 rows in the
    page-split layout), the rows the fp64 reference selects from the same bytes: format and layout agree."""
    from wavemla.api import MLAMetadata
    from wavemla.reference.indexer import lightning_indexer_ref

    cfg = stress.config_from_args(_args("--cpu", "--small", "--batch", "3", "--index-k", index_k))
    case = stress.build_case(cfg, 0, "cpu")
    inputs = case.variants[0]
    assert int(inputs["n_comp"].max()) > cfg.extra_topk, "some request needs the top-k selection"
    outs = stress.decode_step(cfg, case.fixed, inputs, MLAMetadata())
    idx, length = lightning_indexer_ref(
        inputs["q_idx"], inputs["weights"], case.fixed["index_k_cache"], case.fixed["block_table"], inputs["n_comp"],
        cfg.extra_topk, max_n_comp=cfg.extra_pool, index_k_layout=cfg.index_k_layout,
    )  # fmt: skip
    assert torch.equal(outs["indexer_indices"], idx) and torch.equal(outs["indexer_length"], length)


@cpu_lane_only
def test_cpu_harness_with_mxfp4_index_k_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "csa", "--batch", "2", "--graphs", "1", "--variants", "2",
        "--replays", "3", "--index-k", "mxfp4",
    )  # fmt: skip
    assert code == 0, out
    assert "MXFP4 index-K rows (paged layout)" in out and "indexer in graph" in out
    assert "MISMATCH" not in out and "result: PASS (0 mismatching output(s) in 0 of 3 replay(s))" in out


@cpu_lane_only
def test_cpu_harness_with_mxfp4_index_k_reports_an_injected_flip(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "csa", "--batch", "2", "--graphs", "1", "--variants", "1",
        "--replays", "2", "--index-k", "mxfp4", "--inject-flip", "1", "--check-every", "1",
    )  # fmt: skip
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 1 and " replay 1 " in lines[0] and ": out: 1 of " in lines[0], out
    assert "MXFP4 index-K rows (paged layout)" in out
    assert "result: FAIL (1 mismatching output(s) in 1 of 2 replay(s))" in out


@cpu_lane_only
def test_cpu_dense_harness_matches_eager_and_reports_an_injected_flip(capsys: pytest.CaptureFixture[str]) -> None:
    """The paged dense decode (causal, two query tokens; one graph planned, one on 3 program slots so requests are
    cut and combined): every replay matches its eager reference but the flipped one."""
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "dense", "--s-q", "2", "--batch", "2", "--graphs", "2",
        "--variants", "2", "--replays", "5", "--inject-flip", "3", "--check-every", "1",
    )  # fmt: skip
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 1 and " replay 3 " in lines[0] and ": out: 1 of " in lines[0], out
    assert "program slots=3" in out and "parts=3" in out and "combine=yes" in out
    assert "mode=dense h=16 s_q=2 FP8 V3.2 caches, 256 keys per request" in out


@cpu_lane_only
def test_cpu_dense_harness_with_per_tensor_fp8_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """The same over per-tensor FP8 rows (the scale in the graph's fixed inputs): every replay matches."""
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "dense", "--fp8-tensor", "--batch", "2", "--graphs", "2",
        "--variants", "2", "--replays", "3", "--check-every", "1",
    )  # fmt: skip
    assert code == 0, out
    assert "mode=dense h=16 s_q=1 per-tensor FP8 caches, 256 keys per request" in out
    assert "result: PASS" in out


def test_v32_case_lists_and_poisoned_spare_page() -> None:
    """The V3.2 graphs' inputs: variant 0 lists topk distinct valid rows a token at full length; later variants put
    invalid entries among them and shorter lengths; the spare page nothing lists holds NaN; every other graph a
    sink."""
    cfg = stress.config_from_args(_args("--mode", "v32", "--small", "--batch", "3", "--s-q", "2", "--cpu"))
    cases = [stress.build_case(cfg, g, "cpu") for g in range(2)]
    topk, page, pool = stress.SMALL_V32_SHAPE
    for case in cases:
        cache = case.fixed["kv_cache"]
        assert cache.shape == (pool // page + 1, page, 1, 656) and bool((cache[-1] == 0xFF).all())
        v0 = case.variants[0]
        assert v0["q"].shape == (3, 2, 16, 576) and bool((v0["topk_length"] == topk).all())
        idx = v0["indices"]
        assert idx.shape == (3, 2, topk) and bool(((idx >= 0) & (idx < pool)).all())
        assert all(len(set(row.tolist())) == topk for row in idx.reshape(-1, topk))
        later = case.variants[1]["indices"]
        assert bool(((later < 0) | (later >= pool)).any())  # invalid entries of several kinds
        assert bool((case.variants[1]["topk_length"] <= topk).all())
    assert "attn_sink" not in cases[0].fixed and cases[1].fixed["attn_sink"].shape == (16,)


@cpu_lane_only
def test_cpu_v32_harness_matches_eager_and_reports_an_injected_flip(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3.2's sparse decode (two query tokens; one graph planned without a sink, one on 3 program slots with
    a sink, writing callers' out buffers): every replay matches its eager reference but the flipped one."""
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "v32", "--s-q", "2", "--batch", "2", "--graphs", "2",
        "--variants", "2", "--replays", "5", "--inject-flip", "3", "--check-every", "1", "--out-buffers",
    )  # fmt: skip
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 1 and " replay 3 " in lines[0] and ": out: 1 of " in lines[0], out
    assert "program slots=3" in out and "combine=yes" in out and "sink=yes" in out and "sink=no" in out
    assert "mode=v32 h=16 s_q=2 FP8 V3.2 cache, 64 list entries a token of 256 rows" in out


@cpu_lane_only
def test_cpu_harness_with_out_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    """Each decode writes a caller's NaN-filled out (vLLM's pattern): sparse with the indexer and with forced splits,
    and dense; every replay matches its eager reference (computed without out), and an injected flip still shows."""
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "csa", "--batch", "2", "--graphs", "2", "--variants", "2",
        "--replays", "4", "--out-buffers",
    )  # fmt: skip
    assert code == 0, out
    assert "out= buffers" in out and "result: PASS (0 mismatching output(s) in 0 of 4 replay(s))" in out
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "dense", "--batch", "2", "--graphs", "2", "--variants", "2",
        "--replays", "4", "--out-buffers", "--inject-flip", "1", "--check-every", "1",
    )  # fmt: skip
    assert code == 1 and "result: FAIL (1 mismatching output(s) in 1 of 4 replay(s))" in out, out


@cpu_lane_only
def test_cpu_harness_finds_an_element_out_buffers_leave_unwritten(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decode that leaves one element of a caller's out unwritten (it keeps the NaN fill) differs from the eager
    reference, which is computed without out: the harness reports every replay."""
    import wavemla.api

    decode = wavemla.api.dense_mla_decode

    def unwritten_element(*args: Any, out: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        result = decode(*args, out=out, **kwargs)
        if out is not None:
            out.view(-1)[0] = float("nan")
        return result

    monkeypatch.setattr(wavemla.api, "dense_mla_decode", unwritten_element)
    code, out = _run(
        capsys, "--cpu", "--small", "--mode", "dense", "--batch", "2", "--graphs", "1", "--variants", "1",
        "--replays", "2", "--out-buffers", "--check-every", "1",
    )  # fmt: skip
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 2 and all(": out: 1 of " in line and "got nan" in line for line in lines), out


def test_run_without_cuda_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    code, out = _run(capsys, "--small", "--replays", "2")
    assert code == 2 and "no CUDA device" in out


# --- GPU lane ---------------------------------------------------------------------------------------------------
GPU_RUNS = [
    pytest.param((), id="default-csa-10k"),
    pytest.param(("--mode", "hca", "--replays", "2000"), id="hca"),
    pytest.param(("--mode", "swa", "--bf16", "--replays", "2000", "--batch", "1", "64"), id="swa-bf16"),
    pytest.param(("--no-graph", "--replays", "2000"), id="eager-streams"),
    pytest.param(
        ("--streams", "3", "--s-q", "2", "--heads", "128", "--batch", "5", "33", "--replays", "2000"), id="s2"
    ),
    pytest.param(("--batch-invariant", "--replays", "2000"), id="batch-invariant"),
    pytest.param(("--small", "--replays", "500"), id="small"),
    pytest.param(
        ("--indexer-select", "spread", "--batch", "48", "7", "33", "1", "--replays", "2000"), id="indexer-spread"
    ),
    pytest.param(("--mode", "dense", "--replays", "2000"), id="dense-fp8"),
    pytest.param(("--out-buffers", "--replays", "2000"), id="out-buffers"),
    pytest.param(("--index-k", "mxfp4", "--replays", "2000"), id="csa-mxfp4"),
    pytest.param(("--mode", "dense", "--out-buffers", "--replays", "1000"), id="dense-out-buffers"),
    pytest.param(
        ("--mode", "dense", "--bf16", "--s-q", "2", "--heads", "128", "--batch", "5", "33", "--replays", "2000"),
        id="dense-bf16-s2",
    ),
    pytest.param(("--mode", "v32", "--replays", "2000"), id="v32-fp8"),
    pytest.param(
        ("--mode", "v32", "--s-q", "2", "--out-buffers", "--batch", "9", "64", "--replays", "1000"), id="v32-s2-out"
    ),
]


@pytest.mark.gpu
@pytest.mark.parametrize("argv", GPU_RUNS)
def test_gpu_stress_passes(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, *argv)
    assert code == 0, out
    assert "result: PASS" in out


@pytest.mark.gpu
def test_gpu_stress_reports_exactly_the_injected_flip(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--replays", "400", "--inject-flip", "177", "--check-every", "7")
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("MISMATCH")]
    assert len(lines) == 1 and " replay 177 " in lines[0], out


def test_an_error_that_is_not_a_mismatch_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure to build or run the graphs (here an exception of no builtin class, as Triton's compile and resource
    errors are) is a setup error, exit 2; exit 1 says the bits differed."""

    class CompileFailure(Exception):
        pass

    def fail(*args: object, **kwargs: object) -> None:
        raise CompileFailure("out of shared memory")

    monkeypatch.setattr(stress, "_setup", fail)
    # --cpu needs Triton's interpreter, which a process that has compiled kernels cannot switch to (the GPU lane)
    where = () if torch.cuda.is_available() else ("--cpu",)
    code, out = _run(capsys, *where, "--small", "--mode", "hca", "--batch", "3", "--replays", "2")
    assert code == 2, out
    assert "CompileFailure: out of shared memory" in out
