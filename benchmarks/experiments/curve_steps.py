"""The per-request steps above 5% of ``wavemla bench`` curves: for each JSON given, the batches whose time per request
exceeds the batch before's by more than 5% (the planner's plans, as measured).

    python3 benchmarks/experiments/curve_steps.py OUT/curve_*.json
"""

from __future__ import annotations

import itertools
import json
import os
import sys


def steps(path: str, over: float = 0.05) -> tuple[int, list[str]]:
    """(points, ``"A->B +N%"`` for each step above ``over``) of the wavemla records in the curve at ``path``."""
    with open(path) as f:
        recs = sorted((r for r in json.load(f)["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])
    out = []
    for a, b in itertools.pairwise(recs):
        ratio = (b["median_us"] / b["batch"]) / (a["median_us"] / a["batch"])
        if ratio > 1 + over:
            out.append(f"{a['batch']}->{b['batch']} {100 * (ratio - 1):+.0f}%")
    return len(recs), out


def main(paths: list[str]) -> None:
    for path in sorted(paths):
        try:
            n, found = steps(path)
        except (OSError, KeyError, ValueError) as exc:
            print(os.path.basename(path), "unreadable:", exc)
            continue
        print(os.path.basename(path), n, "points;", len(found), "steps > 5%:", ", ".join(found))


if __name__ == "__main__":
    main(sys.argv[1:])
