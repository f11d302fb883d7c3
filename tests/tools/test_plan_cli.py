"""`wavemla plan`: per-batch plans as text, JSON and a PNG, on a CPU machine; bad arguments exit 2 naming them."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from wavemla import cli, config
from wavemla.device import PRESETS
from wavemla.kernels import dense_decode_ws
from wavemla.plan import DenseWorkload, Workload, clear_caches, plan, plan_dense
from wavemla.tools import plan_cli


@pytest.fixture(autouse=True)
def environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    env: dict[str, str] = {"WAVEMLA_CACHE_DIR": str(tmp_path / "cache")}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    clear_caches()
    yield env
    config.reload()
    clear_caches()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    code = plan_cli.run(parser.parse_args(list(argv)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_registered_as_a_verb() -> None:
    assert cli.COMMANDS["plan"][0] == "wavemla.tools.plan_cli"
    args = cli.build_parser().parse_args(["plan", "--gpu", "h200", "--batch", "4"])
    assert args._module is plan_cli and args.batch == [4]


def test_text_table_for_sm120(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--gpu", "rtx-pro-6000", "--heads", "64", "--topk", "512",
                          "--batch", "48", "64", "80", "96")  # fmt: skip
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("NVIDIA RTX PRO 6000") and "188 SMs" in lines[0]
    assert lines[1] == "CSA decode: h=64, s_q=1, window 128 rows + 512 compressed rows, FP8 MODEL1 cache"
    # no sm_120 tile was timed: the table says its times rank configurations only
    assert lines[2].startswith("predicted µs: the cost model fitted on an H200") and "no sm_120 tile" in lines[2]
    header = lines[4].split()
    assert header[:2] == ["b", "config"] and "tail" in header and "us/req" in header
    for i, b in enumerate((48, 64, 80, 96)):
        p = plan(Workload(batch=b, s_q=1, h_q=64, topk=128, extra_topk=512), PRESETS["rtx-pro-6000"])
        cols = lines[5 + i].split()
        assert cols[0] == str(b) and cols[1] == str(p.config)
        assert float(cols[2]) == pytest.approx(p.resources.smem_bytes / 1024, abs=0.05)
        assert int(cols[4]) == p.programs_per_sm and int(cols[5]) == p.programs and int(cols[6]) == p.waves
        assert float(cols[7]) == pytest.approx(p.tail_efficiency, abs=0.005)
        assert float(cols[-2]) == pytest.approx(p.predicted_us, abs=0.05)
        assert float(cols[-1]) == pytest.approx(p.predicted_us / b, abs=0.005)
        assert f"b={b}: why {p.config}" in out
    assert out.count("tail efficiency") == 4  # the partition reason of each batch


def test_fp8_dense_predictions_say_they_rank_tiles(capsys: pytest.CaptureFixture[str]) -> None:
    """FP8 V3.2 rows (dense, and DeepSeek-V3.2's sparse decode at page 1): the model ranks tiles and its times run
    below those measured, and the report says so; bf16 rows and the sparse decode keep the plain basis."""
    caveat = "for FP8 V3.2 rows it ranks the tiles, and its times ran 0.42-0.84 of those measured there"
    for argv, said in [
        (("--mode", "dense", "--page", "1", "--heads", "128", "--seqlen", "2048"), True),
        (("--mode", "dense", "--heads", "16"), True),
        (("--mode", "dense", "--bf16", "--heads", "16"), False),
        (
            (
                "--mode",
                "csa",
            ),
            False,
        ),
    ]:
        code, out, _ = _run(capsys, "--gpu", "h200", *argv, "--batch", "32")
        assert code == 0 and (caveat in out.splitlines()[2]) is said, (argv, out)
        code, out, _ = _run(capsys, "--gpu", "h200", *argv, "--batch", "32", "--json")
        assert code == 0 and (caveat in json.loads(out)["prediction_basis"]) is said, argv
    code, out, _ = _run(capsys, "--gpu", "rtx-pro-6000", "--mode", "dense", "--heads", "16", "--batch", "32")
    assert code == 0 and caveat not in out and "rank configurations rather than predict" in out


def test_json_matches_the_planner(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--gpu", "h200", "--mode", "hca", "--batch", "1", "64", "--s-q", "2", "--json")
    assert code == 0
    info = json.loads(out)
    assert info["device"]["name"] == "h200" and info["device"]["num_sms"] == 132
    assert info["prediction_basis"].endswith("tile costs fitted to runs on an H200 (sm_90)")
    assert info["workload"] == {"mode": "hca", "heads": 64, "window": 128, "topk": 1024, "s_q": 2, "fp8": True}
    assert [r["batch"] for r in info["plans"]] == [1, 64]
    for r in info["plans"]:
        p = plan(Workload(batch=r["batch"], s_q=2, h_q=64, topk=128, extra_topk=1024), PRESETS["h200"])
        assert r["config"] == str(p.config) and r["units_per_part"] == p.units_per_part
        assert r["predicted_us"] == pytest.approx(p.predicted_us)
        assert r["us_per_request"] == pytest.approx(p.predicted_us / r["batch"])
        assert r["reasons"] == list(p.reasons)
        assert (r["smem_bytes"], r["regs_per_thread"]) == (p.resources.smem_bytes, p.resources.regs_per_thread)
        assert (r["programs_per_sm"], r["programs"], r["waves"]) == (p.programs_per_sm, p.programs, p.waves)
        assert r["tail_efficiency"] == pytest.approx(p.tail_efficiency)


def test_padded_and_spread_plans_say_their_units(capsys: pytest.CaptureFixture[str]) -> None:
    """A padded plan's tiles a program read ``U/T`` (its tiles, the units a token occupies) and a spread plan's
    ``U+W``, in the table and as ``token_units`` / ``whole_units`` in the JSON (H200 picks with the warp-specialized
    kernel's costs, CSA h=64: b=27 padded to 12 units in 3-tile pieces, b=133 one tile of the leftover token then
    a whole one)."""
    from wavemla.kernels import sparse_decode_ws

    if not sparse_decode_ws.HAVE_GLUON:
        pytest.skip("Triton without Gluon: the planner prices the Triton kernel, which it does not pad or spread")
    code, out, _ = _run(capsys, "--gpu", "h200", "--batch", "27", "133", "--json")
    assert code == 0
    rows = {r["batch"]: r for r in json.loads(out)["plans"]}
    assert (rows[27]["units_per_part"], rows[27]["token_units"], rows[27]["whole_units"]) == (3, 12, 0)
    assert (rows[133]["units_per_part"], rows[133]["token_units"], rows[133]["whole_units"]) == (1, 0, 10)
    code, out, _ = _run(capsys, "--gpu", "h200", "--batch", "27", "133")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert " 3/12 " in lines["27"] and " 1+10 " in lines["133"]


def test_dense_text_table_fits_sm120(capsys: pytest.CaptureFixture[str]) -> None:
    """The dense decode with the FP8 V3.2 cache on a 99 KB/block part: the planner's tiles fit, and the table is the
    planner's."""
    code, out, err = _run(capsys, "--gpu", "rtx-pro-6000", "--mode", "dense", "--heads", "128", "--seqlen", "16384",
                          "--batch", "1", "32", "128")  # fmt: skip
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[1] == "DENSE decode: h=128, s_q=1, d_qk 576, 16384 keys per block table, pages of 64, FP8 V3.2 cache"
    assert "no sm_120 tile" in lines[2]
    assert lines[4].split() == ["b", "config", "smem", "KB", "regs", "prog/SM", "parts", "programs", "seg", "tiles",
                                "pred", "us", "us/req"]  # fmt: skip
    device = PRESETS["rtx-pro-6000"]
    for i, b in enumerate((1, 32, 128)):
        p = plan_dense(DenseWorkload(batch=b, s_q=1, h_q=128, max_seqlen=16384, is_fp8=True), device)
        cols = lines[5 + i].split()
        assert cols[0] == str(b) and cols[1] == str(p.config)
        assert p.resources.smem_bytes <= device.smem_per_block and p.programs_per_sm >= 1
        assert float(cols[2]) == pytest.approx(p.resources.smem_bytes / 1024, abs=0.05)
        assert int(cols[4]) == p.programs_per_sm and int(cols[5]) == p.num_parts and int(cols[6]) == p.programs
        assert int(cols[7]) == p.segment_overhead
        assert float(cols[-2]) == pytest.approx(p.predicted_us, abs=0.05)
        assert f"b={b}: why {p.config}" in out


def test_dense_plans_speculative_tokens_past_four(capsys: pytest.CaptureFixture[str]) -> None:
    """The dense decode takes any s_q (the token and its speculative ones): eight query tokens plan as the planner
    plans them."""
    code, out, _ = _run(capsys, "--gpu", "h200", "--mode", "dense", "--s-q", "8", "--heads", "16", "--batch", "32",
                        "--json")  # fmt: skip
    assert code == 0
    (row,) = json.loads(out)["plans"]
    p = plan_dense(DenseWorkload(batch=32, s_q=8, h_q=16, max_seqlen=4096, is_fp8=True), PRESETS["h200"])
    assert row["config"] == str(p.config) and row["programs"] == p.programs


def test_dense_json_matches_the_planner(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--gpu", "h200", "--mode", "dense", "--bf16", "--d-qk", "512", "--s-q", "2",
                        "--batch", "4", "64", "--json")  # fmt: skip
    assert code == 0
    info = json.loads(out)
    assert info["workload"] == {"mode": "dense", "heads": 64, "seqlen": 4096, "d_qk": 512, "s_q": 2, "fp8": False,
                                "page": 64}  # fmt: skip
    for r in info["plans"]:
        workload = DenseWorkload(batch=r["batch"], s_q=2, h_q=64, d_qk=512, max_seqlen=4096, is_fp8=False)
        p = plan_dense(workload, PRESETS["h200"])
        assert r["config"] == str(p.config) and r["parts"] == p.num_parts and r["programs"] == p.programs
        assert r["cut_units"] == p.cut_units
        assert r["predicted_us"] == pytest.approx(p.predicted_us) and r["reasons"] == list(p.reasons)
        assert r["us_per_request"] == pytest.approx(p.predicted_us / r["batch"])


def test_dense_page_is_the_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    """``--page``: the plan of that page size (DeepSeek-V3.2's sparse decode runs the dense decode at page 1, where
    the H200's bf16 plans leave the warp-specialized kernel, which takes pages of 64 rows)."""
    argv = ("--gpu", "h200", "--mode", "dense", "--bf16", "--heads", "128", "--seqlen", "2048", "--batch", "64")
    plans = {}
    for page in (1, 64):
        code, out, _ = _run(capsys, *argv, "--page", str(page), "--json")
        assert code == 0
        info = json.loads(out)
        assert info["workload"]["page"] == page
        p = plan_dense(DenseWorkload(batch=64, s_q=1, h_q=128, max_seqlen=2048, page=page), PRESETS["h200"])
        (r,) = info["plans"]
        assert r["config"] == str(p.config) and r["predicted_us"] == pytest.approx(p.predicted_us)
        plans[page] = r["predicted_us"]
    # without Gluon (Triton 3.5) neither page size runs the warp-specialized kernel: both plans price the Triton one
    assert (plans[1] != plans[64]) == dense_decode_ws.HAVE_GLUON
    code, out, _ = _run(capsys, *argv, "--page", "1")
    assert code == 0 and "2048 keys per block table, pages of 1, bf16 rows cache" in out


def test_swa_and_bf16(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--gpu", "a100", "--mode", "swa", "--window", "256", "--bf16", "--batch", "8",
                        "--json")  # fmt: skip
    assert code == 0
    info = json.loads(out)
    assert info["workload"]["topk"] == 0 and info["workload"]["fp8"] is False
    (row,) = info["plans"]
    assert row["tiles_per_token"] == 256 // row["block_n"] and row["num_stages"] == 2


def test_auto_uses_the_wavemla_gpu_knob(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ["WAVEMLA_GPU"] = "rtx-5090"
    code, out, _ = _run(capsys, "--gpu", "auto", "--batch", "8", "--json")
    assert code == 0 and json.loads(out)["device"]["name"] == "rtx-5090"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
@pytest.mark.parametrize("auto", ["auto", " AUTO ", "Au-to"])
def test_auto_without_a_gpu_says_what_to_do(capsys: pytest.CaptureFixture[str], auto: str) -> None:
    """Spelt any way the preset names may be (case, spaces, dashes ignored), 'auto' is --gpu auto."""
    code, out, err = _run(capsys, "--gpu", auto, "--batch", "8")
    assert code == 2 and out == ""
    assert "--gpu auto" in err and "WAVEMLA_GPU" in err


def test_auto_spelt_as_presets_are_uses_the_wavemla_gpu_knob(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    environ["WAVEMLA_GPU"] = "a100"
    code, out, _ = _run(capsys, "--gpu", "Au_to", "--batch", "8", "--json")
    assert code == 0 and json.loads(out)["device"]["name"] == "a100"


def test_auto_on_a_gpu_wavemla_cannot_plan_for_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU older than sm_80 (DeviceSpec.from_torch raises RuntimeError): exit 2 naming ``--gpu auto``, no
    traceback."""
    from types import SimpleNamespace

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    props = SimpleNamespace(name="Tesla T4", major=7, minor=5, multi_processor_count=40)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    code, out, err = _run(capsys, "--gpu", "auto", "--batch", "8")
    assert code == 2 and out == ""
    assert err.startswith("wavemla plan: --gpu auto: ") and "sm_75" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["--gpu", "h300"], "--gpu: unknown GPU preset 'h300'", id="unknown-gpu"),
        pytest.param(["--batch", "0"], "--batch: batch sizes must be >= 1", id="batch-0"),
        pytest.param(["--heads", "0"], "--heads", id="heads-0"),
        pytest.param(["--heads", "129"], "--heads", id="heads-129"),
        pytest.param(["--s-q", "5"], "--s-q: expected 1..4", id="s-q-5"),
        pytest.param(["--mode", "dense", "--s-q", "0"], "--s-q: expected at least 1", id="dense-s-q-0"),
        pytest.param(["--tokens", "64"], "--tokens: not an option of --mode csa", id="tokens-sparse"),
        pytest.param(["--window", "0"], "--window", id="window-0"),
        pytest.param(["--topk", "0"], "--topk", id="topk-0"),
        pytest.param(["--mode", "swa", "--topk", "512"], "--topk: swa layers", id="swa-with-topk"),
        pytest.param(["--seqlen", "4096"], "--seqlen: not an option of --mode csa", id="seqlen-sparse"),
        pytest.param(["--d-qk", "576"], "--d-qk: not an option of --mode csa", id="d-qk-sparse"),
        pytest.param(
            ["--mode", "dense", "--window", "64"], "--window: not an option of --mode dense", id="window-dense"
        ),
        pytest.param(["--mode", "dense", "--topk", "512"], "--topk: not an option of --mode dense", id="topk-dense"),
        pytest.param(["--mode", "dense", "--seqlen", "0"], "--seqlen: expected >= 1", id="seqlen-0"),
        pytest.param(["--mode", "dense", "--d-qk", "512"], "--d-qk: the FP8 V3.2 cache", id="d-qk-fp8"),
        pytest.param(["--mode", "dense", "--bf16", "--d-qk", "640"], "--d-qk: expected 576", id="d-qk-640"),
        pytest.param(["--mode", "dense", "--heads", "0"], "--heads", id="dense-heads-0"),
        pytest.param(["--mode", "dense", "--page", "0"], "--page: expected 1..1024", id="page-0"),
        pytest.param(["--mode", "dense", "--page", "2048"], "--page: expected 1..1024", id="page-2048"),
        pytest.param(["--page", "1"], "--page: not an option of --mode csa", id="page-sparse"),
    ],
)
def test_bad_arguments_exit_2_naming_them(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    argv = ["--gpu", "h200", "--batch", "8", *argv] if "--gpu" not in argv else ["--batch", "8", *argv]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert says in err


def test_prefill_table_is_the_planners(capsys: pytest.CaptureFixture[str]) -> None:
    """The sparse prefill per token count: the planner's tile, pieces, programs and waves; on a 99 KB/block part
    the tiles that fit it."""
    from wavemla.plan import PrefillWorkload, plan_sparse_prefill

    device = PRESETS["rtx-pro-6000"]
    code, out, _ = _run(capsys, "--gpu", "rtx-pro-6000", "--mode", "prefill", "--tokens", "64", "4096", "--json")
    assert code == 0
    info = json.loads(out)
    assert info["workload"] == {"mode": "prefill", "heads": 64, "d_qk": 512, "topk": 640}
    for r in info["plans"]:
        p = plan_sparse_prefill(PrefillWorkload(s_q=r["tokens"], h_q=64, topk=640), device)
        assert r["config"] == str(p.config) and r["programs"] == p.programs
        assert r["smem_bytes"] == p.resources.smem_bytes <= device.smem_per_block
        assert r["waves"] == -(-p.programs // (device.num_sms * p.programs_per_sm))
        assert r["reasons"] == list(p.reasons) and "batch" not in r
        assert (r["splits"], r["piece_tiles"]) == (p.splits, p.piece_tiles) and "batch" not in r
    assert [r["block_h"] for r in info["plans"]] == [32, 32]  # 64 tokens: 128 32-head programs, one wave
    code, out, _ = _run(capsys, "--gpu", "h200", "--mode", "prefill", "--heads", "128", "--d-qk", "576")
    assert code == 0 and "PREFILL (flash_mla_sparse_fwd): h=128, 640-entry lists, d_qk 576" in out
    assert out.count("\ntokens=") == len(plan_cli.DEFAULT_TOKENS) and "64x64x8x3" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["--batch", "8"], "--batch: not an option of --mode prefill", id="batch"),
        pytest.param(["--s-q", "2"], "--s-q: not an option of --mode prefill", id="s-q"),
        pytest.param(["--bf16"], "--bf16: not an option of --mode prefill", id="bf16"),
        pytest.param(["--window", "64"], "--window: not an option of --mode prefill", id="window"),
        pytest.param(["--seqlen", "64"], "--seqlen: not an option of --mode prefill", id="seqlen"),
        pytest.param(["--png", "x.png"], "--png: not an option of --mode prefill", id="png"),
        pytest.param(["--tokens", "0"], "--tokens: token counts must be >= 1", id="tokens-0"),
        pytest.param(["--topk", "0"], "--topk: expected >= 1", id="topk-0"),
        pytest.param(["--d-qk", "640"], "--d-qk: expected 512 (DeepSeek-V4) or 576", id="d-qk-640"),
        pytest.param(["--heads", "129"], "--heads", id="heads-129"),
    ],
)
def test_prefill_bad_arguments_exit_2_naming_them(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    code, out, err = _run(capsys, "--gpu", "h200", "--mode", "prefill", *argv)
    assert code == 2 and out == ""
    assert says in err


def test_a_plan_that_cannot_be_made_exits_2(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ.update({"WAVEMLA_BLOCK_H": "64", "WAVEMLA_BLOCK_N": "64"})
    code, _, err = _run(capsys, "--gpu", "rtx-pro-6000", "--batch", "8")
    assert code == 2 and "WAVEMLA_BLOCK_H=64" in err
    environ["WAVEMLA_BLOCK_H"] = "17"
    config.reload()
    code, _, err = _run(capsys, "--gpu", "h200", "--batch", "8")
    assert code == 2 and "WAVEMLA_BLOCK_H='17'" in err


def test_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "plan.png"
    code, out, _ = _run(capsys, "--gpu", "rtx-pro-6000", "--batch", "48", "96", "--png", str(path))
    assert code == 0 and f"wrote {path}" in out
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_dense_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "dense.png"
    code, out, _ = _run(capsys, "--gpu", "h200", "--mode", "dense", "--batch", "8", "24", "--png", str(path))
    assert code == 0 and f"wrote {path}" in out and path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("missing/plan.png", id="no-such-directory"),
        pytest.param("plan.txt", id="a-format-matplotlib-cannot-write"),
        pytest.param("", id="empty"),
    ],
)
def test_png_that_cannot_be_written_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """A ``--png`` file that cannot be written is a bad argument like any other: exit 2, the option named, no
    traceback (an empty name is refused rather than skipping the plot)."""
    pytest.importorskip("matplotlib")
    path = str(tmp_path / name) if name else name
    code, out, err = _run(capsys, "--gpu", "h200", "--batch", "8", "--png", path)
    assert code == 2 and out == ""
    assert err.startswith("wavemla plan: --png: ")


@pytest.mark.parametrize(
    "name", ["plot", "plot-dir", "..png", "plot."], ids=["no-suffix", "a-directory", "dots-then-png", "trailing-dot"]
)
def test_png_writes_the_file_named_or_refuses(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    """matplotlib adds ``.png`` to a name without a suffix: ``--png plot`` must write ``plot`` itself (not
    ``plot.png`` while saying it wrote ``plot``), and ``--png DIR`` must be refused, not write ``DIR.png`` beside it."""
    pytest.importorskip("matplotlib")
    path = tmp_path / name
    if name == "plot-dir":
        path.mkdir()
    code, out, err = _run(capsys, "--gpu", "h200", "--batch", "8", "--png", str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no NAME.png beside it
    if name == "plot-dir":
        assert code == 2 and out == "" and err.startswith("wavemla plan: --png: ")
    else:
        assert code == 0 and f"wrote {path}" in out and path.read_bytes()[:4] == b"\x89PNG"


def test_png_of_a_huge_batch_plots_a_bounded_curve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The plotted curve plans a bounded number of batch sizes, so a huge ``--batch`` with ``--png`` finishes
    (planning every batch size up to 10^7 ran for hours), and still ends at the largest batch."""
    pytest.importorskip("matplotlib")
    seen: list[list[dict[str, object]]] = []
    monkeypatch.setattr(plan_cli, "render_png", lambda device, workload, rows, curve, path: seen.append(curve))
    code, _, err = _run(capsys, "--gpu", "h200", "--batch", "10000000", "--png", str(tmp_path / "p.png"))
    assert code == 0, err
    batches = [r["batch"] for r in seen[0]]
    assert len(batches) <= 4096 and batches[0] == 1 and batches[-1] == 10_000_000 and batches == sorted(batches)


def test_gpu_help_names_every_preset() -> None:
    """``WAVEMLA_GPU``'s documentation sends the reader to ``wavemla plan --help`` for the preset names."""
    assert "wavemla plan --help" in config.KNOBS["WAVEMLA_GPU"].doc
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = "".join(sub.choices["plan"].format_help().split())  # argparse wraps lines, at hyphens too
    for name in PRESETS:
        assert name in text, name


def test_png_needs_no_pyplot() -> None:
    import inspect

    source = inspect.getsource(plan_cli)
    assert "pyplot" not in source and "from matplotlib.figure import Figure" in source
