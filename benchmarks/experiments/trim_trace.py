"""Cut a PyTorch-profiler trace down to its first N decode steps and the events ``wavemla trace`` reads, for a test
fixture.

Kept: the GPU events (kernels, memcpy, memset) and GPU step ranges inside the first ``--steps`` step ranges, with
only the ``device``, ``stream``, ``correlation`` and ``context`` arguments; the CUDA runtime and driver calls that
launched them (``correlation`` only); the CPU step ranges of those steps; process and thread names. Dropped: CPU
operators, flow events, Python frames and every other argument.

    python3 benchmarks/experiments/trim_trace.py IN.json.gz OUT.json.gz --marker layer_step --steps 2
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

GPU = ("kernel", "gpu_memcpy", "gpu_memset")
KERNEL_ARGS = ("device", "stream", "correlation", "context")


def _window(events: list[dict[str, Any]], cat: str, marker: str, steps: int) -> tuple[float, float]:
    ranges = sorted((e for e in events if e.get("cat") == cat and e.get("name") == marker), key=lambda e: e["ts"])
    if len(ranges) < steps:
        raise ValueError(f"--steps: the trace has {len(ranges)} {cat} '{marker}' ranges, asked for {steps}")
    return ranges[0]["ts"], ranges[steps - 1]["ts"] + ranges[steps - 1]["dur"]


def trim(doc: dict[str, Any], marker: str, steps: int) -> dict[str, Any]:
    """The trace ``doc`` cut to its first ``steps`` ranges named ``marker`` (on the GPU and the CPU side)."""
    events = doc["traceEvents"]
    g0, g1 = _window(events, "gpu_user_annotation", marker, steps)
    c0, c1 = _window(events, "user_annotation", marker, steps)
    windows = {"gpu_user_annotation": (g0, g1), "user_annotation": (c0, c1)}
    kept: list[dict[str, Any]] = []
    launched = set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            kept.append(e)
        elif e.get("cat") in GPU and g0 <= e["ts"] <= g1:
            args = e.get("args", {})
            kept.append({**e, "args": {k: args[k] for k in KERNEL_ARGS if k in args}})
            launched.add(args.get("correlation"))
        elif e.get("name") == marker and e.get("cat") in windows:
            lo, hi = windows[e["cat"]]
            if lo <= e["ts"] <= hi:
                kept.append({**e, "args": {}})
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("args", {}).get("correlation") in launched:
            kept.append({**e, "args": {"correlation": e["args"]["correlation"]}})
    return {"schemaVersion": doc.get("schemaVersion", 1), "traceEvents": kept}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--marker", default="layer_step")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)
    with gzip.open(args.trace, "rt") if args.trace.suffix == ".gz" else args.trace.open() as f:
        doc = json.load(f)
    with gzip.open(args.out, "wt", compresslevel=9) as f:
        json.dump(trim(doc, args.marker, args.steps), f, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
