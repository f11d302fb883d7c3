"""The prefill benchmark's inputs, PyTorch baseline and check, on the CPU."""

import pytest
import torch

from tests.conftest import HAS_CUDA
from wavemla.tools import bench_prefill
from wavemla.tools.bench_prefill import CASES, PrefillCase, _check, make_inputs, torch_prefill

SMALL = PrefillCase("small", 40, 100, 24, 16, 576)


def test_inputs_pick_distinct_rows_per_token():
    x = make_inputs(SMALL, device="cpu")
    idx = x["indices"][:, 0]
    assert idx.dtype == torch.int32 and idx.shape == (40, 24)
    assert ((idx >= 0) & (idx < 100)).all()
    assert all(len(set(row.tolist())) == 24 for row in idx)
    assert (x["topk_length"][::5] == 12).all() and (x["topk_length"][1::5] == 24).all()


def test_baseline_matches_the_reference_and_the_check_catches_an_error():
    x = make_inputs(SMALL, device="cpu")
    x = {**x, "q": x["q"].float(), "kv": x["kv"].float()}
    out = torch_prefill(x, chunk=16)
    assert _check("torch", out, x) < 1e-5
    with pytest.raises(AssertionError, match="differs from the fp64 reference"):
        _check("broken", out + 0.1, x)


def test_flops_count():
    # 4096 tokens: 820 of them (0, 5, ..., 4095) attend over half of their list
    assert CASES["dsv4-h64"].flops == 2.0 * 64 * (512 + 512) * (3276 * 640 + 820 * 320)
    assert CASES["v32-h128"].flops == 2.0 * 128 * (576 + 512) * (3276 * 2048 + 820 * 1024)


@pytest.mark.parametrize("case", [SMALL, PrefillCase("odd", 41, 100, 25, 3, 512)], ids=["s40-k24", "s41-k25"])
def test_flops_count_the_rows_each_token_attends_over(case):
    x = make_inputs(case, device="cpu")
    idx, length = x["indices"][:, 0], x["topk_length"]
    used = (idx >= 0) & (idx < case.s_kv) & (torch.arange(case.topk)[None, :] < length[:, None])
    assert case.flops == 2.0 * case.h_q * (case.d_qk + 512) * used.sum().item()


@pytest.mark.skipif(HAS_CUDA, reason="checks the refusal without a GPU")
def test_needs_cuda(tmp_path, capsys):
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        bench_prefill.run_prefill_bench([CASES["dsv4-h16"]], 3, False, True)
    # the command says so in one line and exits 2, with no traceback
    with pytest.raises(SystemExit) as exit_info:
        bench_prefill.main(["--json", str(tmp_path / "x.json"), "--cases", "dsv4-h16", "--reps", "3"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "python -m wavemla.tools.bench_prefill: needs a CUDA GPU\n"


def test_reps_are_checked(tmp_path):
    with pytest.raises(SystemExit):
        bench_prefill.main(["--json", str(tmp_path / "x.json"), "--reps", "1"])


@pytest.mark.parametrize("where", ["missing-dir/x.json", "."], ids=["no-directory", "a-directory"])
def test_json_path_is_checked_before_the_run(tmp_path, capsys, where):
    # the rows are written after every case has run: a path that cannot be written must fail first, naming --json
    with pytest.raises(SystemExit) as exit_info:
        bench_prefill.main(["--json", str(tmp_path / where), "--cases", "dsv4-h16", "--reps", "3"])
    assert exit_info.value.code == 2 and "--json" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["", "  "], ids=["empty", "blank"])
def test_an_empty_or_blank_json_name_is_refused(tmp_path, capsys, monkeypatch, name):
    # '' is no directory to name, and blanks would be written as a file named by spaces after every case has run
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        bench_prefill.main(["--json", name, "--cases", "dsv4-h16", "--reps", "3"])
    assert exit_info.value.code == 2 and "--json: expected a file name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_case_named_twice_runs_once(tmp_path, monkeypatch):
    ran = []

    def fake_run(cases, reps, tiles, baseline):
        ran.extend(c.name for c in cases)
        return {"ceilings": {"gemm_tflops": 1.0, "copy_gbps": 1.0}, "rows": []}

    monkeypatch.setattr(bench_prefill, "run_prefill_bench", fake_run)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the command refuses to start without a GPU
    argv = ["--json", str(tmp_path / "x.json"), "--cases", "dsv4-h16", "v32-h16-s32", "dsv4-h16", "--reps", "3"]
    assert bench_prefill.main(argv) == 0
    assert ran == ["dsv4-h16", "v32-h16-s32"]
