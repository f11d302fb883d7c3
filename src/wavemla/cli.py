"""``wavemla <verb>``: one entry point; each verb is a thin shell over a library module.

A verb's module exposes ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). Modules import torch and
Triton inside ``run`` so that ``wavemla --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# verb -> (module, one-line help), in the order ``wavemla --help`` lists them; README's verb table lists each.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "wavemla.tools.demo",
        "run one DSV4-Flash CSA decode step (--dense: a V3 paged dense step; --v32: a V3.2 sparse step; --prefill: "
        "a V4 sparse prefill step) and check it against the fp64 reference",
    ),
    "bench": ("wavemla.tools.bench", "time sparse decode at DSV4 shapes, or --dense paged decode at V3 shapes"),
    "layer-bench": ("wavemla.tools.layer_bench", "time one DSV4-Flash decoder layer by component; traces for trace"),
    "env": ("wavemla.tools.envinfo", "print versions, the device and every WAVEMLA_* knob"),
    "plan": (
        "wavemla.tools.plan_cli",
        "show the planner's tile, occupancy, waves and predicted time per batch (--mode prefill: per token count)",
    ),
    "stress": ("wavemla.tools.stress", "replay decode CUDA graphs on overlapped streams; bitwise-compare to eager"),
    "racecheck": (
        "wavemla.tools.racecheck",
        "sort a compute-sanitizer racecheck log: Triton's warp_specialize state words apart; exit 1 on any other",
    ),
    "check": ("wavemla.tools.check", "find output corruption under load: greedy outputs alone vs under load"),
    "sweep": ("wavemla.tools.sweep", "sweep server concurrency: output tok/s, tok/s/user, TTFT, TPOT, ITL"),
    "trace": ("wavemla.tools.trace", "fit per-component decode GPU time vs batch size from profiler traces"),
}


def summary(doc: str | None, fallback: str = "") -> str:
    """A module docstring's first paragraph as one line, however many lines it is wrapped over: what ``--help``
    shows as the command's description."""
    return " ".join((doc or fallback).strip().split("\n\n")[0].split())


def blank_file_name(option: str, name: str | None, kind: str = "file") -> str | None:
    """Why ``name``, given to ``option``, names no ``kind`` ("file" or "directory"): empty, or blanks only; None
    otherwise (also for an option left out). An empty value would be taken for no option (a directory's for the
    current directory) and a blank one written as a file named by spaces."""
    if name is not None and not name.strip():
        return f"{option}: expected a {kind} name, got an empty one"
    return None


def png_format(name: str) -> str | None:
    """The ``format`` for matplotlib's ``savefig(name)``: None where ``name`` has a suffix (as matplotlib reads it,
    ``os.path.splitext``: ``"..png"`` has none), else ``"png"`` (matplotlib would write ``NAME.png``)."""
    import os

    return None if os.path.splitext(name)[1][1:] else "png"


def output_file_problem(option: str, path: str) -> str | None:
    """Why a tool that writes ``path`` only after its run could not write it there (naming ``option``), or None:
    checked before the run, so that a long GPU run is not lost to a mistyped path."""
    import os
    from pathlib import Path

    blank = blank_file_name(option, path)
    if blank is not None:
        return blank
    target = Path(path)
    if target.is_dir():
        return f"{option}: {path!r} is a directory; name the file to write"
    if path.endswith(("/", os.sep)):  # Path drops the separator, open() does not: it would fail after the run
        return f"{option}: {path!r} names a directory (it ends in a separator); name the file to write"
    if not target.parent.is_dir():
        return f"{option}: no directory {str(target.parent)!r} to write {target.name!r} into"
    if target.exists() and not target.is_file():  # a device (/dev/null): nothing to probe, open() writes to it
        return None
    existed = target.exists()
    try:  # a directory may still take no new file (read-only, /proc): try, without truncating an existing one
        with open(target, "a"):
            pass
    except OSError as exc:
        return f"{option}: cannot write {path!r}: {exc.strerror or exc}"
    if not existed:
        target.unlink(missing_ok=True)
    return None


def out_of_memory(exc: BaseException) -> str | None:
    """The first line of ``exc``'s message when it is an allocation that found no memory (torch's CUDA
    ``OutOfMemoryError``, its CPU allocator's ``RuntimeError``, Python's ``MemoryError``): sizes too large for the
    machine, which a tool reports in one line naming its size options. None for any other exception."""
    text = str(exc)
    if (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or (isinstance(exc, RuntimeError) and "can't allocate memory" in text)
    ):
        return (text.strip().splitlines() or [type(exc).__name__])[0]
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wavemla",
        description="DeepSeek MLA decode kernels (V4 sparse, V3 paged dense) and the V4/V3.2 sparse prefill for every "
        "NVIDIA GPU, and decode-throughput tools.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="<verb>")
    for verb, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(verb, help=help_text, description=summary(module.__doc__, help_text))
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 2
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
