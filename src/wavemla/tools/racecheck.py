"""Sort a compute-sanitizer racecheck log: Triton's warp-specialization state words apart from every other hazard.

On sm_90 the warp-specialized Gluon kernels (``kernels/sparse_decode_ws.py``, ``kernels/dense_decode_ws.py``) make
``compute-sanitizer --tool racecheck`` report RAW hazards on a few bytes of shared memory above the kernel's own
buffers: the partition state words that Triton's lowering of ``warp_specialize`` writes from the default partition
and that every warp reads at the kernel's entry, ordered by a named barrier racecheck does not pair (a control kernel
with no race of its own reproduces them; docs/reliability.md, "The racecheck hazard without the kernels"). A run
over these kernels therefore never passes racecheck's exit code, and a real hazard would hide among them. This reads
the report (``--racecheck-report hazard``) and sorts each hazard into one of two classes:

``partition-state``
    RAW on shared memory, both accesses in one kernel whose source calls ``warp_specialize``: the read at the
    kernel's entry (attributed to its ``def`` line), the write at its ``def`` line or at the ``warp_specialize``
    call. The kernels' sources are read from the installed ``wavemla.kernels`` (``--source`` adds files).
``other``
    everything else, including hazards whose accesses carry no source line.

Exit 0 when every hazard racecheck counted is in the log and ``partition-state`` (or there is none), 1 when any is
``other``, when the sanitizer printed fewer hazards than it counted (raise its ``--print-limit``) or when a run has no
summary line (cut short), 2 when the log holds no racecheck output or cannot be read. Line numbers are matched
against the sources read now, so classify a log with the tree that produced it.

Example::

    compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 100000 \\
        python benchmarks/sanitize_dense.py > race.log 2>&1
    wavemla racecheck race.log
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import wavemla

PARTITION_STATE = "partition-state"
OTHER = "other"
SCHEMA = "wavemla.racecheck/1"
_GZIP_MAGIC = b"\x1f\x8b"

_HAZARD = re.compile(
    r"(?P<severity>Error|Warning): Potential (?P<kind>RAW|WAR|WAW) hazard detected at (?P<space>\S+) "
    r"(?P<address>0x[0-9a-fA-F]+) in block \((?P<block>[\d, ]+)\)"
)
_ACCESS = re.compile(
    r"(?P<op>Write|Read) Thread \((?P<thread>[\d, ]+)\) at (?P<kernel>[^\s+]+)\+(?P<offset>0x[0-9a-fA-F]+)"
    r"(?: in (?P<file>\S+):(?P<line>\d+))?"
)
# the default --racecheck-report analysis names source pairs, not the hazards this reads
_ANALYSIS = re.compile(r"Race reported between")
_SUMMARY = re.compile(
    r"RACECHECK SUMMARY: (?P<displayed>\d+) hazards? displayed \((?P<errors>\d+) errors?, (?P<warnings>\d+) warnings?\)"
)
# the banner a sanitizer run prints first, and the summary that ends a run of the other tools (memcheck, ...)
_BANNER = re.compile(r"^=+ COMPUTE-SANITIZER\s*$")
_OTHER_TOOL = re.compile(r"=+ ERROR SUMMARY: \d+ errors?")


@dataclass(frozen=True)
class Access:
    """One side of a hazard: ``op`` is ``write`` or ``read``; ``file`` and ``line`` are None without line info."""

    op: str
    thread: str
    kernel: str
    offset: int
    file: str | None
    line: int | None


@dataclass(frozen=True)
class Hazard:
    """One displayed hazard: ``kind`` RAW/WAR/WAW, ``space`` as racecheck names it (``__shared__``), its byte
    ``address``, the ``block`` and the accesses listed under it."""

    severity: str
    kind: str
    space: str
    address: int
    block: str
    accesses: tuple[Access, ...]


@dataclass(frozen=True)
class KernelSites:
    """Where a warp-specialized kernel's partition state is written and read, in source: the file's name, the
    kernel's ``def`` line, and the lines of its ``warp_specialize`` calls."""

    file: str
    def_line: int
    spawn_lines: frozenset[int]


@dataclass(frozen=True)
class Run:
    """One sanitizer run in a log: the hazards it printed, and those its summary counted (errors + warnings; None
    for a run cut short, which prints no summary)."""

    read: int
    counted: int | None

    @property
    def complete(self) -> bool:
        """Every hazard the run counted is in the log (past ``--print-limit`` hazards are counted only)."""
        return self.counted is not None and self.read >= self.counted


@dataclass
class Report:
    """Counts over a whole log: per run the hazards read and counted, the hazards by class, and per kernel the
    partition-state bytes seen (lowest, highest address)."""

    runs: tuple[Run, ...] = ()
    by_class: dict[str, int] = field(default_factory=lambda: {PARTITION_STATE: 0, OTHER: 0})
    state_bytes: dict[str, tuple[int, int]] = field(default_factory=dict)
    others: list[Hazard] = field(default_factory=list)

    @property
    def counted(self) -> int:
        return sum(r.counted or 0 for r in self.runs)

    @property
    def read(self) -> int:
        return sum(r.read for r in self.runs)

    @property
    def cut(self) -> int:
        """Runs with no summary line."""
        return sum(r.counted is None for r in self.runs)

    @property
    def complete(self) -> bool:
        """Whether every run ended with its summary and printed every hazard it counted (so each was classified)."""
        return bool(self.runs) and all(r.complete for r in self.runs)

    @property
    def clean(self) -> bool:
        """No hazard outside the partition-state class, and none missing from the log."""
        return self.complete and self.by_class[OTHER] == 0


def kernel_sites(paths: Iterable[Path]) -> dict[str, KernelSites]:
    """The warp-specialized kernels defined in ``paths`` (Python sources), by function name: every function whose
    body calls ``warp_specialize`` (``gl.warp_specialize(...)`` or a bare name). ValueError for a file that is not
    UTF-8 text."""
    sites: dict[str, KernelSites] = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:  # a ValueError whose message names the codec, not the file
            raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        tree = ast.parse(text, filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            spawns = frozenset(
                call.lineno
                for call in ast.walk(node)
                if isinstance(call, ast.Call)
                and (
                    (isinstance(call.func, ast.Attribute) and call.func.attr == "warp_specialize")
                    or (isinstance(call.func, ast.Name) and call.func.id == "warp_specialize")
                )
            )
            if spawns:
                sites[node.name] = KernelSites(path.name, node.lineno, spawns)
    return sites


def package_kernel_sources() -> list[Path]:
    """The kernel modules of the installed package (``wavemla/kernels/*.py``), read as text; nothing is imported."""
    return sorted((Path(wavemla.__file__).resolve().parent / "kernels").glob("*.py"))


def read_log(path: Path) -> str:
    """The text of a log, plain or gzip-compressed (as committed under benchmarks/results); ValueError for a
    damaged gzip file."""
    raw = path.read_bytes()
    if raw[:2] != _GZIP_MAGIC:
        return raw.decode(errors="replace")
    try:
        return gzip.decompress(raw).decode(errors="replace")
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut file ends early; bad blocks
        raise ValueError(f"{path}: not a readable gzip file ({e})") from None


def parse_log(lines: Iterable[str]) -> tuple[list[Hazard], list[Run]]:
    """The hazards a racecheck log displays, with their accesses, and its sanitizer runs. A run ends at its
    ``RACECHECK SUMMARY`` (a run of another tool at its ``ERROR SUMMARY``, and is not kept); one that a new banner or
    the end of the log interrupts (hazards or a banner with no summary after them) was cut short. Lines that are none
    of these are skipped."""
    hazards: list[Hazard] = []
    runs: list[Run] = []
    head: re.Match[str] | None = None
    accesses: list[Access] = []
    opened = False  # a banner or a hazard since the last summary
    read = 0  # hazards since the last summary

    def close() -> None:
        if head is not None:
            hazards.append(
                Hazard(
                    severity=head["severity"].lower(),
                    kind=head["kind"],
                    space=head["space"],
                    address=int(head["address"], 16),
                    block=head["block"].replace(" ", ""),
                    accesses=tuple(accesses),
                )
            )

    for text in lines:
        if _BANNER.match(text):
            close()
            head, accesses = None, []
            if opened:
                runs.append(Run(read=len(hazards) - read, counted=None))
            opened, read = True, len(hazards)
        elif m := _HAZARD.search(text):
            close()
            head, accesses = m, []
            opened = True
        elif head is not None and (a := _ACCESS.search(text)):
            accesses.append(
                Access(
                    op=a["op"].lower(),
                    thread=a["thread"].replace(" ", ""),
                    kernel=a["kernel"],
                    offset=int(a["offset"], 16),
                    file=Path(a["file"]).name if a["file"] else None,
                    line=int(a["line"]) if a["line"] else None,
                )
            )
        elif _OTHER_TOOL.search(text):  # a memcheck (or initcheck, synccheck) run in the same log: not racecheck's
            close()
            head, accesses = None, []
            opened, read = False, len(hazards)
        elif s := _SUMMARY.search(text):
            close()
            head, accesses = None, []
            runs.append(Run(read=len(hazards) - read, counted=int(s["errors"]) + int(s["warnings"])))
            opened, read = False, len(hazards)
    close()
    if opened:
        runs.append(Run(read=len(hazards) - read, counted=None))
    return hazards, runs


def classify(hazard: Hazard, sites: dict[str, KernelSites]) -> str:
    """``partition-state`` or ``other`` (the module docstring gives the rule)."""
    if hazard.kind != "RAW" or hazard.space != "__shared__" or len(hazard.accesses) != 2:
        return OTHER
    writes = [a for a in hazard.accesses if a.op == "write"]
    reads = [a for a in hazard.accesses if a.op == "read"]
    if len(writes) != 1 or len(reads) != 1 or writes[0].kernel != reads[0].kernel:
        return OTHER
    site = sites.get(reads[0].kernel)
    if site is None or any(a.file != site.file for a in hazard.accesses):
        return OTHER
    if reads[0].line == site.def_line and writes[0].line in site.spawn_lines | {site.def_line}:
        return PARTITION_STATE
    return OTHER


def summarize(hazards: Sequence[Hazard], runs: Sequence[Run], sites: dict[str, KernelSites]) -> Report:
    """Classify every displayed hazard, with the log's runs."""
    report = Report(runs=tuple(runs))
    for h in hazards:
        cls = classify(h, sites)
        report.by_class[cls] += 1
        if cls == OTHER:
            report.others.append(h)
            continue
        kernel = h.accesses[0].kernel
        lo, hi = report.state_bytes.get(kernel, (h.address, h.address))
        report.state_bytes[kernel] = (min(lo, h.address), max(hi, h.address))
    return report


def format_report(report: Report, limit: int = 10) -> str:
    lines = [
        f"racecheck: {report.counted} hazard(s) counted over {len(report.runs)} run(s), {report.read} in the log",
        f"  {PARTITION_STATE}: {report.by_class[PARTITION_STATE]}",
    ]
    for kernel, (lo, hi) in sorted(report.state_bytes.items()):
        lines.append(f"    {kernel}: shared bytes {lo:#x}-{hi:#x}")
    lines.append(f"  {OTHER}: {report.by_class[OTHER]}")
    for h in report.others[:limit]:
        where = "; ".join(
            f"{a.op} {a.kernel}+{a.offset:#x} {a.file or '?'}:{a.line if a.line is not None else '?'}"
            for a in h.accesses
        )
        lines.append(f"    {h.kind} {h.space} {h.address:#x} block ({h.block}): {where or 'no accesses listed'}")
    if len(report.others) > limit:
        lines.append(f"    ... {len(report.others) - limit} more")
    if report.cut:
        lines.append(f"  {report.cut} run(s) with no RACECHECK SUMMARY line: cut short, so hazards may be missing")
    short = [r for r in report.runs if r.counted is not None and r.read < r.counted]
    if short:
        most = max(r.counted or 0 for r in short)
        lines.append(
            f"  not in the log: {sum((r.counted or 0) - r.read for r in short)} (rerun with compute-sanitizer's "
            f"--print-limit above {most} to classify them)"
        )
    lines.append(
        "result: PASS (no hazard but Triton's warp_specialize partition state)"
        if report.clean
        else "result: FAIL (hazards outside the partition-state class, or not all of them in the log)"
    )
    return "\n".join(lines)


def report_to_dict(report: Report) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "counted": report.counted,
        "read": report.read,
        "runs": [asdict(r) for r in report.runs],
        "by_class": dict(report.by_class),
        "state_bytes": {k: [lo, hi] for k, (lo, hi) in sorted(report.state_bytes.items())},
        "others": [asdict(h) for h in report.others],
        "complete": report.complete,
        "clean": report.clean,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "log", help="compute-sanitizer output of --tool racecheck --racecheck-report hazard (plain or gzip)"
    )
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="FILE",
        help="another Python source of warp-specialized kernels (repeatable; wavemla's own are always read)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON ('-': stdout only)")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="other hazards to list (default 10)")


def run(args: argparse.Namespace) -> int:
    def fail(message: str) -> int:
        print(f"wavemla racecheck: error: {message}", file=sys.stderr)
        return 2

    if args.limit < 0:
        return fail(f"--limit must be >= 0, got {args.limit}")
    from wavemla.cli import blank_file_name

    blank = blank_file_name("--json", args.json)
    if blank is not None:
        return fail(blank)
    try:
        sources = [*package_kernel_sources(), *(Path(s) for s in args.source)]
        sites = kernel_sites(sources)
        text = read_log(Path(args.log))
    except ValueError as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"{e.filename}: {e.strerror}")
    except SyntaxError as e:
        return fail(f"--source {e.filename}: not Python source ({e.msg}, line {e.lineno})")
    hazards, runs = parse_log(text.splitlines())
    if not hazards and _ANALYSIS.search(text):
        return fail(f"{args.log}: racecheck's analysis report; rerun it with --racecheck-report hazard")
    if not hazards and all(r.counted is None for r in runs):
        return fail(f"{args.log}: no racecheck output (no hazard and no RACECHECK SUMMARY line)")
    report = summarize(hazards, runs, sites)
    if args.json == "-":
        print(json.dumps(report_to_dict(report), indent=2))
    else:
        print(format_report(report, args.limit))
        if args.json:
            try:
                Path(args.json).write_text(json.dumps(report_to_dict(report), indent=2) + "\n")
            except OSError as e:
                return fail(f"--json {args.json}: cannot write: {e.strerror}")
    return 0 if report.clean else 1


if __name__ == "__main__":
    from wavemla.cli import summary

    _parser = argparse.ArgumentParser(prog="wavemla racecheck", description=summary(__doc__))
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
