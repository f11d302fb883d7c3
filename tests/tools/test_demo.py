"""`wavemla demo`: the DSV4 sparse step, the V3 dense steps (bf16 rows, FP8 V3.2), the V3.2 sparse step and the
DSV4 prefill step pass against the fp64 reference through the interpreter (CPU lane) and on the GPU (timed); bad
options exit 2 naming the option."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
import torch

from tests.conftest import child_environ
from wavemla.cli import COMMANDS, build_parser
from wavemla.tools import demo


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    code = demo.run(parser.parse_args(list(argv)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_registers_the_verb() -> None:
    assert COMMANDS["demo"][0] == "wavemla.tools.demo"
    args = build_parser().parse_args(["demo", "--dense", "--fp8", "--batch", "3"])
    assert args._module is demo and args.dense and args.fp8 and args.batch == 3


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (("--fp8",), "--fp8"),
        (("--batch", "0"), "--batch"),
        (("--dense", "--batch", "-1"), "--batch"),
        (("--prefill", "--dense"), "--prefill"),
        (("--prefill", "--batch", "3"), "--prefill"),
        (("--prefill", "--v32"), "--prefill"),
        (("--v32", "--dense"), "--v32"),
        (("--v32", "--fp8"), "--v32"),
        (("--v32", "--fp8-tensor"), "--v32"),
        (("--prefill", "--fp8"), "--prefill"),
        (("--prefill", "--fp8-tensor"), "--prefill"),
        (("--fp8-tensor",), "--fp8-tensor"),
        (("--dense", "--fp8", "--fp8-tensor"), "--fp8-tensor"),
        (("--v32", "--batch", "0"), "--batch"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    argv: tuple[str, ...], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "--cpu", *argv)
    assert code == 2 and f"{option}:" in err and "result:" not in out


def _keep_triton_as_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--cpu`` asks for the interpreter, which must be chosen before Triton is imported: on a GPU lane, where this
    process compiled kernels already, that request raises. These tests fail the step's inputs before any kernel runs,
    so the request is left out and they run on both lanes."""
    from wavemla import config

    monkeypatch.setattr(config, "use_triton_interpreter", lambda: None)


CPU_ALLOC_FAILURE = (
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate "
    "14976000149760 bytes. Error code 12 (Cannot allocate memory)"
)


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (("--batch", "100000000"), 2, "wavemla demo: --batch 100000000: the step does not fit in memory"),
        ((), 1, "wavemla demo: the step does not fit in memory"),
    ],
    ids=["huge-batch", "default-batch"],
)
def test_inputs_that_do_not_fit_in_memory_end_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: int, says: str
) -> None:
    """A ``--batch`` too large for the machine (its allocation fails, as torch's CPU allocator or CUDA's report it)
    ends in one line naming ``--batch``, not a traceback; at the default batch the line names no option."""
    import wavemla.testing

    def no_memory(**_: object) -> None:
        raise RuntimeError(CPU_ALLOC_FAILURE)

    monkeypatch.setattr(wavemla.testing, "make_sparse_decode_inputs", no_memory)
    _keep_triton_as_imported(monkeypatch)
    got, _, err = _run(capsys, "--cpu", *argv)
    assert got == code and err.startswith(says) and len(err.splitlines()) == 1, err


def test_other_runtime_errors_are_not_taken_for_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import wavemla.testing

    def broken(**_: object) -> None:
        raise RuntimeError("a kernel bug")

    monkeypatch.setattr(wavemla.testing, "make_sparse_decode_inputs", broken)
    _keep_triton_as_imported(monkeypatch)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    with pytest.raises(RuntimeError, match="a kernel bug"):
        demo.run(parser.parse_args(["--cpu"]))


@pytest.mark.parametrize(
    "argv",
    [("--v32", "--fp8"), ("--v32", "--fp8-tensor"), ("--prefill", "--fp8"), ("--prefill", "--fp8-tensor")],
)
def test_a_refusal_asks_to_drop_the_cache_option_not_to_add_dense(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """--v32 and --prefill refuse the dense step's cache options themselves: the refusal asks to drop the option,
    not to add --dense, which the same steps refuse."""
    step, option = argv
    code, _, err = _run(capsys, "--cpu", *argv)
    assert code == 2 and err.startswith(f"wavemla demo: {step}:") and option in err and "add --dense" not in err


# The interpreter run switches Triton to interpreter mode for the whole process, which must not happen in a process
# that runs CUDA kernels: on a GPU machine the demo's CPU form runs only where no GPU is present.
cpu_lane_only = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU lane (Triton interpreter) only")


@cpu_lane_only
@pytest.mark.parametrize(
    ("argv", "header"),
    [
        ((), "DSV4-Flash CSA decode step on CPU (Triton interpreter)"),
        (("--dense",), "200 keys per request (page 64), float16 rows"),
        (("--dense", "--fp8"), "FP8 V3.2 cache (656 B per key)"),
        (("--dense", "--fp8-tensor"), "per-tensor FP8 cache (576 B per key, descale_k)"),
        (("--prefill",), "DeepSeek-V4 sparse prefill step on CPU (Triton interpreter)"),
        (("--v32",), "64 list entries per token over 512 slots (page 64, the last 8 entries -1), FP8 V3.2 cache"),
    ],
    ids=["sparse", "dense", "dense-fp8", "dense-fp8-tensor", "prefill", "v32"],
)
def test_cpu_demo_passes(argv: tuple[str, ...], header: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--cpu", *argv)
    assert code == 0, out
    assert header in out and "result: PASS" in out


def test_cli_demo_on_cpu_from_a_fresh_process() -> None:
    """`wavemla demo --cpu` as the README runs it: a new process without TRITON_INTERPRET, which the demo turns on
    itself (on a GPU machine too: the interpreter runs in the child alone)."""
    done = subprocess.run([sys.executable, "-m", "wavemla", "demo", "--cpu"], env=child_environ(),
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "on CPU (Triton interpreter)" in done.stdout and "result: PASS" in done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize(
    "argv",
    [(), ("--dense",), ("--dense", "--fp8"), ("--dense", "--fp8-tensor"), ("--prefill",), ("--v32",)],
    ids=["sparse", "dense", "dense-fp8", "dense-fp8-tensor", "prefill", "v32"],
)
def test_gpu_demo_passes(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *argv)
    assert code == 0, out
    assert "result: PASS" in out and "% of roofline" in out


def test_gpu_report_lines(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU form of the report (timing, throughput, % of copy and of roofline) from stand-in measurements, so
    that the lines the GPU prints are checked on every lane."""
    from wavemla.testing import TOLERANCES
    from wavemla.tools import bench

    monkeypatch.setattr(bench, "measure_ceilings", lambda: bench.Ceilings(copy_gbps=4000.0, gemm_tflops=800.0))
    monkeypatch.setattr(bench, "timings_us", lambda fn, reps, graph: (9.0, 10.0, 11.0))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    out = torch.ones(1, 1, 2, 512)
    lse = torch.zeros(1, 2, 1)
    code = demo._check_and_time(
        lambda: (out, lse),
        lambda: (out.double(), lse.double()),
        lambda: "a plan",
        (("out", TOLERANCES[("out", "gpu")]), ("lse", TOLERANCES[("lse", "gpu")])),
        (4e6, 2e7),  # 4 MFLOP and 20 MB in 10 µs: 0.4 TFLOP/s, 2000 GB/s
        True,
        "rows",
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "time: 10.0 us median (p20 9.0, p80 11.0; CUDA graph, L2 flushed)" in text
    assert "0.4 TFLOP/s, 2000 GB/s (50% of copy); ceilings: GEMM 800 TFLOP/s, copy 4000 GB/s" in text
    assert "roofline 5.0 us, 50% of roofline" in text and "result: PASS" in text


def test_a_third_output_mismatch_fails_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    """Every output named in the checks is compared: one wrong max_logits element fails the demo."""
    from wavemla.testing import TOLERANCES

    out, mx, lse = torch.ones(1, 2, 512), torch.zeros(1, 2), torch.zeros(1, 2)
    code = demo._check_and_time(
        lambda: (out, mx + torch.tensor([[0.0, 1.0]]), lse), lambda: (out.double(), mx.double(), lse.double()),
        lambda: "a plan", (("out", TOLERANCES[("out", "interp")]), ("max_logits", TOLERANCES[("lse", "interp")]),
                           ("lse", TOLERANCES[("lse", "interp")])), (1.0, 1.0), False, "rows",
    )  # fmt: skip
    text = capsys.readouterr().out
    assert code == 1 and "MISMATCH: max_logits" in text and "result: FAIL" in text
    assert "max |out - ref| = 0.00e+00, max |max_logits - ref| = 1.00e+00, max |lse - ref| = 0.00e+00" in text


@pytest.mark.parametrize("case", ["shape", "all-inf", "nan"])
def test_a_wrong_output_is_reported_as_fail_not_a_traceback(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The error line is printed for any output: one of the wrong shape (whose difference with the reference does not
    index by the finite mask), a reference without a finite element, an output of NaN."""
    from wavemla.testing import TOLERANCES

    out, lse = torch.ones(1, 1, 2, 512), torch.zeros(1, 2, 1)
    got, want = (out, lse), (out.double(), lse.double())
    if case == "shape":
        got = (out, lse.view(1, 1, 2))
    elif case == "all-inf":  # no row anywhere: lse +inf on both sides, and a wrong out
        got, want = (out, lse + float("inf")), (out.double() * 0, lse.double() + float("inf"))
    else:
        got = (out * float("nan"), lse)
    checks = (("out", TOLERANCES[("out", "interp")]), ("lse", TOLERANCES[("lse", "interp")]))
    code = demo._check_and_time(lambda: got, lambda: want, lambda: "a plan", checks, (1.0, 1.0), False, "rows")
    text = capsys.readouterr().out
    assert code == 1 and "result: FAIL" in text and "max |out - ref|" in text
