"""µs per request against batch, measured and the planner's prediction, for ``wavemla bench`` curves: one panel per
file (its mode, heads and query tokens in the title).

    python3 benchmarks/experiments/curve_png.py OUT.png CURVE.json [CURVE.json ...] [--title TEXT]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: report.py's plotting
from report import per_request_lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("curves", nargs="+")
    ap.add_argument("--title", default="wavemla sparse decode: time per request vs batch")
    args = ap.parse_args()
    from matplotlib.figure import Figure

    cols = 2 if len(args.curves) > 1 else 1
    rows = math.ceil(len(args.curves) / cols)
    fig = Figure(figsize=(6 * cols, 4 * rows))
    for i, path in enumerate(args.curves):
        recs = sorted(
            (r for r in json.loads(Path(path).read_text())["records"] if r["provider"] == "wavemla"),
            key=lambda r: r["batch"],
        )
        ax = fig.add_subplot(rows, cols, i + 1)
        per_request_lines(ax, recs)
        r0 = recs[0]
        ax.set_title(f"{r0['mode'].upper()}, h = {r0['h_q']}, s_q = {r0['s_q']}", fontsize=10)
        ax.set_xlabel("batch (requests)")
        ax.legend(fontsize=8)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
