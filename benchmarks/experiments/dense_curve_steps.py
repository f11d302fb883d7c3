"""Per-request steps of dense b = 1..N curves (``wavemla bench --dense`` JSON): every b -> b+1 whose µs per request
rises by more than 5%, the planner's prediction over the measured time, and % of copy at a few batches.

    python benchmarks/experiments/dense_curve_steps.py curve.json [more.json ...]
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path


def main() -> None:
    for path in sys.argv[1:]:
        data = json.loads(Path(path).read_text())
        recs = sorted(data["records"], key=lambda r: r["batch"])
        h = recs[0]["h_q"] if recs else "?"
        print(f"{path}: h={h}, {len(recs)} batches, copy {data['ceilings']['copy_gbps']:.0f} GB/s")
        steps = []
        for a, b in itertools.pairwise(recs):
            if b["batch"] != a["batch"] + 1:
                continue
            pa, pb = a["median_us"] / a["batch"], b["median_us"] / b["batch"]
            if pb > 1.05 * pa:
                steps.append((a["batch"], b["batch"], pa, pb))
        print(f"  per-request steps above 5%: {len(steps)}")
        for ba, bb, pa, pb in steps:
            print(f"    {ba:4d} -> {bb:4d}: {pa:7.2f} -> {pb:7.2f} us/request (+{100 * (pb / pa - 1):.0f}%)")
        ratio = statistics.median(r["predicted_us"] / r["median_us"] for r in recs)
        print(f"  planner prediction over measured, median: {ratio:.2f}")
        for r in recs:
            if r["batch"] in (1, 8, 16, 32, 64, 96, 119, 128):
                print(f"    b={r['batch']:4d} {r['config']:10s} parts={r['parts']:4d} {r['median_us']:8.1f} us "
                      f"{r['pct_copy']:5.1f}% of copy (schedule reused {r['reused_us']:8.1f} us)")  # fmt: skip


if __name__ == "__main__":
    main()
