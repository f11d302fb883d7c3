"""`wavemla demo`: the DSV4 sparse step and the V3 dense steps (bf16 rows, FP8 V3.2) pass against the fp64
reference through the interpreter (CPU lane) and on the GPU (timed); bad options exit 2 naming the option."""

from __future__ import annotations

import argparse

import pytest
import torch

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
    [(("--fp8",), "--fp8"), (("--batch", "0"), "--batch"), (("--dense", "--batch", "-1"), "--batch")],
)
def test_bad_options_exit_2_naming_the_option(
    argv: tuple[str, ...], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "--cpu", *argv)
    assert code == 2 and f"{option}:" in err and "result:" not in out


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
    ],
    ids=["sparse", "dense", "dense-fp8"],
)
def test_cpu_demo_passes(argv: tuple[str, ...], header: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--cpu", *argv)
    assert code == 0, out
    assert header in out and "result: PASS" in out


@pytest.mark.gpu
@pytest.mark.parametrize("argv", [(), ("--dense",), ("--dense", "--fp8")], ids=["sparse", "dense", "dense-fp8"])
def test_gpu_demo_passes(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *argv)
    assert code == 0, out
    assert "result: PASS" in out and "% of roofline" in out
