"""Cut a PyTorch-profiler trace down to its first N decode steps and the events ``wavemla trace`` reads, for a test
fixture.

Kept: the GPU events (kernels, memcpy, memset) and GPU step ranges inside the first ``--steps`` step ranges, with
only the ``device``, ``stream``, ``correlation`` and ``context`` arguments; the CUDA runtime and driver calls that
launched them (``correlation`` only); the CPU step ranges of those steps; process and thread names; with
``--keep-scope REGEX`` (repeatable), the host ranges (CPU operators, Python frames, annotations) inside the CPU steps
whose names match one of them, with no arguments (what ``wavemla trace --scope`` reads). Dropped: every other CPU
operator and Python frame, flow events and every other argument.

A trace without step ranges (one whose steps ``wavemla trace --step-kernel`` counts) is cut with ``--step-kernel
REGEX`` instead: its GPU events from the start of the first kernel matching REGEX up to the start of the
``--steps + 1``-th, and the runtime calls that launched them.

    python3 benchmarks/experiments/trim_trace.py IN.json.gz OUT.json.gz --marker layer_step --steps 2
    python3 benchmarks/experiments/trim_trace.py IN.json.gz OUT.json.gz --step-kernel '^fused_rms$' --steps 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

GPU = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_RANGES = ("cpu_op", "python_function", "user_annotation")
KERNEL_ARGS = ("device", "stream", "correlation", "context")


def _window(events: list[dict[str, Any]], cat: str, marker: str, steps: int) -> tuple[float, float]:
    ranges = sorted((e for e in events if e.get("cat") == cat and e.get("name") == marker), key=lambda e: e["ts"])
    if len(ranges) < steps:
        raise ValueError(f"--steps: the trace has {len(ranges)} {cat} '{marker}' ranges, asked for {steps}")
    return ranges[0]["ts"], ranges[steps - 1]["ts"] + ranges[steps - 1]["dur"]


def _gpu_window(events: list[dict[str, Any]], lo: float, hi: float, *, inclusive: bool) -> list[dict[str, Any]]:
    """Process and thread names, the GPU events starting in ``[lo, hi]`` (``[lo, hi)`` unless ``inclusive``) with
    only their ``KERNEL_ARGS``, and the runtime and driver calls that launched them (``correlation`` only)."""
    kept = [e for e in events if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name")]
    gpu = [
        {**e, "args": {k: e.get("args", {})[k] for k in KERNEL_ARGS if k in e.get("args", {})}}
        for e in events
        if e.get("cat") in GPU and lo <= e["ts"] and (e["ts"] <= hi if inclusive else e["ts"] < hi)
    ]
    launched = {e["args"].get("correlation") for e in gpu}
    kept += gpu
    kept += [
        {**e, "args": {"correlation": e["args"]["correlation"]}}
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("args", {}).get("correlation") in launched
    ]
    return kept


def trim(doc: dict[str, Any], marker: str, steps: int, keep_scopes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The trace ``doc`` cut to its first ``steps`` ranges named ``marker`` (on the GPU and the CPU side), keeping
    the host ranges inside those steps whose names match one of ``keep_scopes``."""
    scopes = [re.compile(p) for p in keep_scopes]
    events = doc["traceEvents"]
    g0, g1 = _window(events, "gpu_user_annotation", marker, steps)
    c0, c1 = _window(events, "user_annotation", marker, steps)
    windows = {"gpu_user_annotation": (g0, g1), "user_annotation": (c0, c1)}
    kept = _gpu_window(events, g0, g1, inclusive=True)
    for e in events:
        if e.get("name") == marker and e.get("cat") in windows:
            lo, hi = windows[e["cat"]]
            if lo <= e["ts"] <= hi:
                kept.append({**e, "args": {}})
        elif (
            e.get("cat") in HOST_RANGES
            and c0 <= e.get("ts", -1) <= c1
            and any(p.search(str(e.get("name", ""))) for p in scopes)
        ):
            kept.append({**e, "args": {}})
    return {"schemaVersion": doc.get("schemaVersion", 1), "traceEvents": kept}


def trim_by_kernel(doc: dict[str, Any], step_kernel: str, steps: int) -> dict[str, Any]:
    """The trace ``doc`` cut to ``steps`` steps counted by a kernel launched once a step: its GPU events from the
    start of the first kernel matching ``step_kernel`` to just before the start of the ``steps + 1``-th, and the
    runtime and driver calls that launched them."""
    regex = re.compile(step_kernel)
    events = doc["traceEvents"]
    starts = sorted(e["ts"] for e in events if e.get("cat") == "kernel" and regex.search(str(e.get("name", ""))))
    if len(starts) < steps + 1:
        raise ValueError(f"--steps: the trace has {len(starts)} kernels matching {step_kernel!r}, needs {steps + 1}")
    kept = _gpu_window(events, starts[0], starts[steps], inclusive=False)
    return {"schemaVersion": doc.get("schemaVersion", 1), "traceEvents": kept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--marker", default="layer_step")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--keep-scope", action="append", default=[], metavar="REGEX")
    parser.add_argument("--step-kernel", default=None, metavar="REGEX", help="cut by a kernel launched once a step")
    args = parser.parse_args(argv)
    with gzip.open(args.trace, "rt") if args.trace.suffix == ".gz" else args.trace.open() as f:
        doc = json.load(f)
    with gzip.open(args.out, "wt", compresslevel=9) as f:
        if args.step_kernel is not None:
            cut = trim_by_kernel(doc, args.step_kernel, args.steps)
        else:
            cut = trim(doc, args.marker, args.steps, tuple(args.keep_scope))
        json.dump(cut, f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
