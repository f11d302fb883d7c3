"""The GPU call scripts of benchmarks/ on a CPU machine, with a stand-in ``python3`` on PATH (every pytest run exits
3, every other call 0): the status of each step the scripts cut with ``tail`` reaches their logs."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_PYTHON = '#!/bin/sh\necho "python3 $*"\ncase "$*" in *pytest*) exit 3 ;; esac\nexit 0\n'


def run_script(tmp_path: Path, script: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    (out / "layer").mkdir(parents=True)  # what the layer bench writes: packed into out/layer.tgz, not left in /tmp
    env = os.environ | {"OUT": str(out), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", f"benchmarks/{script}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return out


@pytest.mark.parametrize(
    ("script", "log", "line"),
    [
        ("run_h200_indexer.sh", "indexer-tests.log", "tests rc=3"),
        ("run_h200_reliability.sh", "reliability.log", "== stress tests exit 3"),
    ],
    ids=["indexer", "reliability"],
)
def test_a_failing_test_step_is_logged_with_its_status(tmp_path: Path, script: str, log: str, line: str) -> None:
    text = (run_script(tmp_path, script) / log).read_text()
    assert line in text, text


def test_portable_lane_passes_test_paths_as_the_gpu_lane_does(tmp_path: Path) -> None:
    """TEST_PATHS reaches pytest word by word, over lines too, and a pattern in it is not expanded by the shell (the
    GPU lane hands the same paths to pytest unexpanded)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text('#!/bin/sh\nprintf "python3"; printf " <%s>" "$@"; echo\nexit 0\n')
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    env = os.environ | {
        "OUT": str(out),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ARCHS": "sm80",
        "TEST_PATHS": "tests/kernels/test_a.py\ntests/kernels/test_b.py tests/test_*.py",
    }
    script = ["bash", "benchmarks/portable_gpu.sh"]
    subprocess.run(script, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    log = (out / "portable-sm80.log").read_text()
    paths = "<tests/kernels/test_a.py> <tests/kernels/test_b.py> <tests/test_*.py>"
    assert f"python3 <-m> <pytest> {paths} <-q>" in log, log


@pytest.mark.parametrize(("pytest_status", "want"), [(0, 0), (3, 1)], ids=["passing", "failing"])
def test_the_portable_lane_exits_with_its_steps_status(tmp_path: Path, pytest_status: int, want: int) -> None:
    """portable_gpu.sh exits 1 when a step failed on any architecture, 0 when every step passed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\ncase "$*" in *pytest*) exit {pytest_status} ;; esac\nexit 0\n')
    (bin_dir / "python3").chmod(0o755)
    env = os.environ | {"OUT": str(tmp_path / "out"), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                        "ARCHS": "sm80 sm120"}  # fmt: skip
    done = subprocess.run(["bash", "benchmarks/portable_gpu.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == want, done.stdout + done.stderr
