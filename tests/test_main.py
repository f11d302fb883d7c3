"""``python -m wavemla`` runs the ``wavemla`` command."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_every_verb_describes_itself_in_whole_sentences(capsys: pytest.CaptureFixture[str]) -> None:
    """``wavemla VERB --help`` shows its module docstring's first paragraph, however many lines it is wrapped over:
    it ends a sentence (a summary cut at the end of its first line did not), and the modules' own entry points show
    the same."""
    import importlib

    from wavemla.cli import build_parser, summary
    from wavemla.tools import bench_prefill, stress

    for verb, (module_name, _) in COMMANDS.items():
        module = importlib.import_module(module_name)
        with pytest.raises(SystemExit):
            build_parser().parse_args([verb, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert summary(module.__doc__).endswith("."), verb
        assert summary(module.__doc__) in shown, verb
    for module in (stress, bench_prefill):
        with pytest.raises(SystemExit):
            module.main(["--help"])
        assert summary(module.__doc__) in " ".join(capsys.readouterr().out.split()), module.__name__


def test_readme_verb_table_lists_every_verb() -> None:
    """README's "Verbs" table has one row per verb ``wavemla --help`` lists, and no row for a verb it lacks."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Verbs", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `wavemla ([a-z-]+)` \|", table, flags=re.M))
    assert rows == set(COMMANDS)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_output_file_problem_finds_a_directory_no_file_can_be_made_in(tmp_path: Path) -> None:
    """An output file is checked before a long run: a directory that exists but takes no new file (/proc) is
    refused naming the option, as a missing one is; a writable path is accepted and left as it was."""
    from wavemla.cli import output_file_problem

    problem = output_file_problem("--json", "/proc/wavemla-out.json")
    assert problem is not None and problem.startswith("--json: ")
    fresh, kept = tmp_path / "new.json", tmp_path / "old.json"
    kept.write_text("keep")
    assert output_file_problem("--json", str(fresh)) is None and not fresh.exists()
    assert output_file_problem("--json", str(kept)) is None and kept.read_text() == "keep"
    assert output_file_problem("--json", "/dev/null") is None


@pytest.mark.parametrize("name", ["", "  ", "\t"])
def test_output_file_problem_refuses_names_of_no_file(name: str) -> None:
    """An empty or blank name names no file: every tool that checks its output file refuses it, naming the option
    (bench_indexer's OUT.json among them), and png_format gives matplotlib's suffix rule."""
    from wavemla.cli import blank_file_name, output_file_problem, png_format

    assert output_file_problem("OUT.json", name) == "OUT.json: expected a file name, got an empty one"
    assert blank_file_name("--png", name) == "--png: expected a file name, got an empty one"
    assert blank_file_name("--png", None) is None and blank_file_name("--png", "a.png") is None
    assert png_format("plot") == "png" and png_format("..png") == "png" and png_format("plot.svg") is None
