"""benchmarks/gpu_lane.sh on a CPU machine, over a few throwaway test files: every path in TEST_PATHS runs, a shard
runs its share (an empty one runs nothing), and the lane's exit status is the tests' (a failure, nothing
collected, or a file that fails to collect, is non-zero)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LANE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_lane.sh"


def run_lane(tmp_path: Path, files: dict[str, str], paths: str, shard: str = "") -> tuple[int, str]:
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = os.environ | {
        "OUT": str(tmp_path / "out"),
        "TEST_PATHS": paths,
        "SKIP_BENCH": "1",
        "SKIP_STRESS": "1",
        "PYTHON": sys.executable,
        "LANE_WORKERS": "1",
        "LANE_SHARD": shard,
    }
    done = subprocess.run(
        ["bash", str(LANE), "label"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    return done.returncode, (tmp_path / "out" / "tests.log").read_text()


PASS = "def test_passes():\n    assert True\n"


def passed(log: str, nodeid: str) -> bool:
    """``nodeid`` passed: pytest -v writes ``NODEID PASSED``, with pytest-xdist (the lane's workers where it is
    installed) ``[gw0] [ 50%] PASSED NODEID``."""
    return re.search(rf"{re.escape(nodeid)} PASSED|PASSED {re.escape(nodeid)}", log) is not None


def test_every_path_in_test_paths_runs(tmp_path: Path) -> None:
    rc, log = run_lane(tmp_path, {"test_one.py": PASS, "test_two.py": PASS}, "test_one.py test_two.py")
    assert rc == 0, log
    assert passed(log, "test_one.py::test_passes") and passed(log, "test_two.py::test_passes"), log


@pytest.mark.parametrize(
    ("files", "want"),
    [({"test_one.py": PASS, "test_bad.py": "def test_fails():\n    assert False\n"}, 1), ({"test_one.py": ""}, 5)],
    ids=["a-failure", "nothing-collected"],
)
def test_the_lane_exits_with_the_tests_status(tmp_path: Path, files: dict[str, str], want: int) -> None:
    rc, log = run_lane(tmp_path, files, " ".join(files))
    assert rc == want, log
    assert f"tests exit: {want}" in log


def test_a_shard_runs_its_share_and_an_empty_shard_fails(tmp_path: Path) -> None:
    files = {"test_one.py": PASS, "test_two.py": PASS}
    rc, log = run_lane(tmp_path, files, "test_one.py test_two.py", shard="2/2")
    assert rc == 0 and log.count(" PASSED") == 1 and passed(log, "test_two.py::test_passes"), log
    rc, log = run_lane(tmp_path, files, "test_one.py test_two.py", shard="3/3")  # two tests, a third share: none
    assert rc == 5 and "no tests selected" in log and " PASSED" not in log, log


BROKEN = {
    "import": "import wavemla_no_such_module\n\n\ndef test_never():\n    pass\n",
    # pytest prints this error's lines with "::" in them (ERROR test_broken.py::TestIds, E   ValueError: ...::...)
    "ids": "import pytest\n\n\nclass TestIds:\n"
    "    @pytest.mark.parametrize('x', [1], ids=lambda v: 1 / 0)\n    def test_a(self, x):\n        pass\n",
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_shard_fails_on_a_file_that_fails_to_collect(tmp_path: Path, broken: str) -> None:
    # unsharded, pytest fails the lane on it; a shard runs the tests that did collect and fails as well
    files = {"test_one.py": PASS, "test_broken.py": BROKEN[broken], "test_two.py": PASS}
    rc, log = run_lane(tmp_path, files, " ".join(files), shard="1/1")
    assert passed(log, "test_one.py::test_passes") and passed(log, "test_two.py::test_passes"), log
    assert rc == 2 and "collection exit: 2" in log and "test_broken.py" in log, log


def test_test_paths_on_several_lines_all_run(tmp_path: Path) -> None:
    # a list from a command's output (one path a line) is split as the portable lane splits it: no line is dropped
    files = {"test_one.py": PASS, "test_two.py": PASS, "test_three.py": PASS}
    rc, log = run_lane(tmp_path, files, "test_one.py\ntest_two.py test_three.py\n")
    assert rc == 0, log
    assert all(passed(log, f"{name}::test_passes") for name in files), log


def test_a_failing_portable_run_fails_the_lane(tmp_path: Path) -> None:
    """With PORTABLE_ARCHS, the portable run's status counts: a stand-in ``python3`` whose pytest runs fail makes the
    lane exit non-zero although its own tests passed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text('#!/bin/sh\ncase "$*" in *pytest*) exit 3 ;; esac\nexit 0\n')
    (bin_dir / "python3").chmod(0o755)
    (tmp_path / "test_one.py").write_text(PASS)
    (tmp_path / "benchmarks").symlink_to(LANE.parent)  # the lane runs its scripts from the repository root
    env = os.environ | {"OUT": str(tmp_path / "out"), "TEST_PATHS": "test_one.py", "SKIP_BENCH": "1",
                        "SKIP_STRESS": "1", "PYTHON": sys.executable, "LANE_WORKERS": "1", "PORTABLE_ARCHS": "sm80",
                        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    done = subprocess.run(["bash", str(LANE), "label"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    log = (tmp_path / "out" / "tests.log").read_text()
    assert "tests exit: 0" in log and "portable exit: 1" in log, log
    assert done.returncode == 1, done.stdout + done.stderr
