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


def test_every_verb_describes_itself_in_whole_sentences():
    """``wavemla VERB --help`` shows its module docstring's first paragraph, however many lines it is wrapped over:
    it ends a sentence (a summary cut at the end of its first line did not)."""
    from wavemla.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    for verb, parser in sub.choices.items():  # type: ignore[attr-defined]
        assert parser.description.rstrip().endswith("."), (verb, parser.description)
