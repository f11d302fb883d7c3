"""wavemla.tools.racecheck: a racecheck log sorted into Triton's partition-state reports and everything else.

The fixture ``data/racecheck_dense_ws.log`` is an excerpt of a real run (compute-sanitizer racecheck over
``benchmarks/sanitize_dense.py`` on an H100 SXM, Triton 3.6): hazards written at the dense warp-specialized kernel's
``def`` line and at its ``warp_specialize`` call. The tests move its line numbers to where those lines are in the
source now, so that edits to the kernel file do not break them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

import pytest

from wavemla import cli
from wavemla.tools import racecheck as rc

DATA = Path(__file__).parent / "data"
# the lines the fixture's run attributed the accesses to (the kernel's def line, its warp_specialize call)
_FIXTURE_DEF, _FIXTURE_SPAWN = 409, 435
_DENSE_WS = "_dense_mla_decode_ws_kernel"


def _sites() -> dict[str, rc.KernelSites]:
    return rc.kernel_sites(rc.package_kernel_sources())


def _fixture(summary: str | None = "4 hazards displayed (4 errors, 0 warnings)") -> str:
    """The fixture with today's line numbers of the dense kernel, and its summary replaced (None: removed)."""
    site = _sites()[_DENSE_WS]
    text = (DATA / "racecheck_dense_ws.log").read_text()
    text = text.replace(f"dense_decode_ws.py:{_FIXTURE_DEF}", f"dense_decode_ws.py:{site.def_line}")
    text = text.replace(f"dense_decode_ws.py:{_FIXTURE_SPAWN}", f"dense_decode_ws.py:{min(site.spawn_lines)}")
    if summary is None:
        return re.sub(r".*RACECHECK SUMMARY.*\n?", "", text)
    return re.sub(r"RACECHECK SUMMARY: .*", f"RACECHECK SUMMARY: {summary}", text)


def _run(tmp_path: Path, text: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    log = tmp_path / "race.log"
    log.write_text(text)
    parser = argparse.ArgumentParser()
    rc.add_arguments(parser)
    code = rc.run(parser.parse_args([str(log), *extra]))
    out, err = capsys.readouterr()
    return code, out, err


def _hazard(kind: str, write: str, read: str, address: str = "0x400") -> str:
    """One displayed hazard in racecheck's layout; ``write``/``read`` are ``KERNEL+0xOFF in FILE:LINE``."""
    return (
        f"========= Error: Potential {kind} hazard detected at __shared__ {address} in block (3,0,0) :\n"
        f"=========     Write Thread (31,0,0) at {write}\n"
        f"=========     Read Thread (128,0,0) at {read}\n"
        "=========     Current Value : 0\n"
        "========= \n"
    )


def test_the_package_sources_give_both_warp_specialized_kernels() -> None:
    sites = _sites()
    for name, file in ((_DENSE_WS, "dense_decode_ws.py"), ("_sparse_mla_decode_ws_kernel", "sparse_decode_ws.py")):
        site = sites[name]
        assert site.file == file
        assert site.spawn_lines and min(site.spawn_lines) > site.def_line
    # the partitions they run do not call warp_specialize, so they are not kernels here
    assert all(name.endswith("_kernel") for name in sites)


def test_a_real_log_of_partition_state_reports_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(tmp_path, _fixture(), capsys=capsys)
    assert code == 0, out
    assert "partition-state: 4" in out and "other: 0" in out
    assert f"{_DENSE_WS}: shared bytes 0x38a59-0x38a5e" in out
    assert "result: PASS" in out


def test_hazards_left_out_of_the_log_fail_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(tmp_path, _fixture("100 hazards displayed (233 errors, 0 warnings)"), capsys=capsys)
    assert code == 1
    assert "not in the log: 229" in out and "--print-limit above 233" in out


def test_a_run_cut_short_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(tmp_path, _fixture(None), capsys=capsys)
    assert code == 1
    assert "1 run(s) with no RACECHECK SUMMARY line" in out and "partition-state: 4" in out


def test_a_run_cut_short_fails_the_log_whatever_runs_follow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    # the first run printed its four hazards and was cut before its summary; a clean run follows
    code, out, _ = _run(tmp_path, _fixture(None) + clean, capsys=capsys)
    assert code == 1 and "1 run(s) with no RACECHECK SUMMARY line" in out
    _, runs = rc.parse_log((_fixture(None) + clean).splitlines())
    assert runs == [rc.Run(read=4, counted=None), rc.Run(read=0, counted=0)]
    # a memcheck run before the racecheck run is not a racecheck run
    memcheck = "========= COMPUTE-SANITIZER\ndense ...: ok\n========= ERROR SUMMARY: 0 errors\n"
    code, out, _ = _run(tmp_path, memcheck + _fixture(), capsys=capsys)
    assert code == 0 and "over 1 run(s)" in out
    # a banner alone (cut before any hazard), then a complete run
    code, out, _ = _run(tmp_path, "========= COMPUTE-SANITIZER\n" + _fixture(), capsys=capsys)
    assert code == 1 and "1 run(s) with no RACECHECK SUMMARY line" in out


def test_a_hazard_elsewhere_fails_and_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _sites()[_DENSE_WS]
    # the Triton split kernel's own loads and stores: no warp_specialize there
    other = _hazard(
        "RAW",
        "_dense_mla_decode_kernel+0x3a0 in dense_decode.py:512",
        "_dense_mla_decode_kernel+0x4c0 in dense_decode.py:530",
    )
    # the warp-specialized kernel, but inside a partition's body (not its entry)
    inside = _hazard(
        "RAW",
        f"{_DENSE_WS}+0x5000 in dense_decode_ws.py:{site.def_line - 30}",
        f"{_DENSE_WS}+0x5100 in dense_decode_ws.py:{site.def_line - 20}",
        address="0x1000",
    )
    summary = "========= RACECHECK"
    text = _fixture("6 hazards displayed (6 errors, 0 warnings)").replace(summary, other + inside + summary)
    code, out, _ = _run(tmp_path, text, "--limit", "1", capsys=capsys)
    assert code == 1
    assert "partition-state: 4" in out and "other: 2" in out
    assert "_dense_mla_decode_kernel+0x3a0 dense_decode.py:512" in out and "... 1 more" in out
    assert "result: FAIL" in out


@pytest.mark.parametrize(
    "kind, write_line, read_line, file",
    [
        pytest.param("WAR", "def", "def", "dense_decode_ws.py", id="war"),
        pytest.param("RAW", "spawn", "spawn", "dense_decode_ws.py", id="read-not-at-entry"),
        pytest.param("RAW", "def", "def", "sparse_decode_ws.py", id="other-file"),
        pytest.param("RAW", None, None, "dense_decode_ws.py", id="no-line-info"),
    ],
)
def test_near_misses_are_other(kind: str, write_line: str | None, read_line: str | None, file: str) -> None:
    site = _sites()[_DENSE_WS]
    lines = {"def": site.def_line, "spawn": min(site.spawn_lines)}

    def at(which: str | None, offset: str) -> str:
        return f"{_DENSE_WS}+{offset}" + ("" if which is None else f" in {file}:{lines[which]}")

    hazards, runs = rc.parse_log(_hazard(kind, at(write_line, "0x99f0"), at(read_line, "0xf0")).splitlines())
    assert len(hazards) == 1 and runs == [rc.Run(read=1, counted=None)]
    assert rc.classify(hazards[0], _sites()) == rc.OTHER


def test_kernels_of_other_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "probe.py"
    src.write_text(
        "import triton.experimental.gluon.language as gl\n\n\n"
        "def _control_kernel(x):\n"
        "    y = x\n"
        "    gl.warp_specialize([(f, ())], [1], [24])\n"
        "    return y\n"
    )
    text = (
        _hazard("RAW", "_control_kernel+0x680 in probe.py:6", "_control_kernel+0x180 in probe.py:4", "0x628")
        + "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
    )
    code, out, _ = _run(tmp_path, text, capsys=capsys)
    assert code == 1 and "other: 1" in out  # not a wavemla kernel: unknown without its source
    code, out, _ = _run(tmp_path, text, "--source", str(src), capsys=capsys)
    assert code == 0 and "_control_kernel: shared bytes 0x628-0x628" in out


def test_no_hazards_and_several_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    code, out, _ = _run(tmp_path, clean + clean, capsys=capsys)
    assert code == 0 and "0 hazard(s) counted over 2 run(s)" in out
    code, out, _ = _run(tmp_path, clean + _fixture(), capsys=capsys)
    assert code == 0 and "4 hazard(s) counted over 2 run(s), 4 in the log" in out


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "r.json"
    code, out, _ = _run(tmp_path, _fixture(), "--json", str(dest), capsys=capsys)
    assert code == 0 and "result: PASS" in out
    data = json.loads(dest.read_text())
    assert data["schema"] == rc.SCHEMA and data["clean"] and data["complete"]
    assert data["by_class"] == {rc.PARTITION_STATE: 4, rc.OTHER: 0}
    assert data["state_bytes"] == {_DENSE_WS: [0x38A59, 0x38A5E]}
    partial = _fixture("100 hazards displayed (233 errors, 0 warnings)")
    code, out, _ = _run(tmp_path, partial, "--json", "-", capsys=capsys)
    assert code == 1 and json.loads(out)["complete"] is False


@pytest.mark.parametrize(
    "text, extra, message",
    [
        pytest.param("no sanitizer here\n", (), "no racecheck output", id="no-output"),
        pytest.param(
            "========= Error: Race reported between Write access at _k+0x10 in k.py:4\n"
            "=========     and Read access at _k+0x20 in k.py:6 [4 hazards]\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n",
            (),
            "--racecheck-report hazard",
            id="analysis-report",
        ),
        pytest.param("", ("--limit", "-1"), "--limit must be >= 0", id="limit"),
        pytest.param("", ("--source", "/nonexistent/k.py"), "/nonexistent/k.py", id="missing-source"),
    ],
)
def test_errors_name_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: tuple[str, ...], message: str
) -> None:
    code, _, err = _run(tmp_path, text, *extra, capsys=capsys)
    assert code == 2 and message in err


def test_unreadable_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    rc.add_arguments(parser)
    assert rc.run(parser.parse_args([str(tmp_path / "missing.log")])) == 2
    assert "missing.log" in capsys.readouterr().err
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    log = tmp_path / "race.log"
    log.write_text(_fixture())
    assert rc.run(parser.parse_args([str(log), "--source", str(bad)])) == 2
    assert "not Python source" in capsys.readouterr().err
    binary = tmp_path / "binary.py"
    binary.write_bytes(b'x = "\xff\xfe"\n')  # not UTF-8: the message names the file, not only the codec
    assert rc.run(parser.parse_args([str(log), "--source", str(binary)])) == 2
    assert f"{binary}: not UTF-8 text" in capsys.readouterr().err


def test_cli_verb(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.COMMANDS["racecheck"][0] == "wavemla.tools.racecheck"
    monkeypatch.setattr(cli, "COMMANDS", {"racecheck": cli.COMMANDS["racecheck"]})  # other verbs are not under test
    log = tmp_path / "race.log"
    log.write_text(_fixture())
    assert cli.main(["racecheck", str(log)]) == 0
    assert "result: PASS" in capsys.readouterr().out


def test_gzip_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    packed = tmp_path / "race.log.gz"
    packed.write_bytes(gzip.compress(_fixture().encode()))
    parser = argparse.ArgumentParser()
    rc.add_arguments(parser)
    assert rc.run(parser.parse_args([str(packed)])) == 0
    assert "partition-state: 4" in capsys.readouterr().out
    packed.write_bytes(gzip.compress(_fixture().encode())[:40])  # cut short
    assert rc.run(parser.parse_args([str(packed)])) == 2
    assert "not a readable gzip file" in capsys.readouterr().err


def test_gzip_log_with_damaged_data_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gzip header over damaged deflate data (zlib's error, not an OSError) exits 2 naming the file: a traceback
    exits 1, the code for hazards found."""
    raw = gzip.compress(_fixture().encode())
    packed = tmp_path / "race.log.gz"
    packed.write_bytes(raw[:10] + b"\xff" * 20 + raw[30:])
    parser = argparse.ArgumentParser()
    rc.add_arguments(parser)
    assert rc.run(parser.parse_args([str(packed)])) == 2
    assert f"{packed}: not a readable gzip file" in capsys.readouterr().err


def test_an_empty_json_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--json ''`` is not taken for no ``--json``: the report would silently not be written."""
    code, _, err = _run(tmp_path, _fixture(), "--json", "", capsys=capsys)
    assert code == 2 and "--json: expected a file name" in err


def test_a_blank_json_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--json`` of blanks names no file meant: refused, not written as a file named by spaces."""
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(tmp_path, _fixture(), "--json", "  ", capsys=capsys)
    assert code == 2 and "--json: expected a file name" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["race.log"]
