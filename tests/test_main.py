"""``python -m wavemla`` runs the ``wavemla`` command."""

import subprocess
import sys

from wavemla.cli import COMMANDS


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wavemla", *args], capture_output=True, text=True, timeout=120)


def test_module_help_lists_every_verb():
    r = _run("--help")
    assert r.returncode == 0, r.stderr
    for verb in COMMANDS:
        assert verb in r.stdout


def test_module_without_a_verb_prints_help_and_exits_2():
    r = _run()
    assert r.returncode == 2
    assert "usage: wavemla" in r.stdout


def test_module_runs_a_verb():
    r = _run("plan", "--gpu", "h200", "--heads", "64", "--topk", "512", "--batch", "96")
    assert r.returncode == 0, r.stderr
    assert "96" in r.stdout
