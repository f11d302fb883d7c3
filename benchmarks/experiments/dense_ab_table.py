"""The A/B table of the dense decode's two-way GPU scripts (gpu_dense_l2.sh and those sourcing dense_ab.sh): per shape,
each side's median in each round, the ratio of the two sides' lower medians, the best % of the copy ceiling, and one
phase timed alone (the lower of the rounds).

    python3 benchmarks/experiments/dense_ab_table.py DIR PREFIX A B PHASE
    (reads DIR/PREFIX-{A,B}-ROUND-*.json written by `wavemla bench --dense --json`; PHASE: combine_us, schedule_us
    or split_us)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    root, prefix, a, b, phase = Path(argv[0]), argv[1], argv[2], argv[3], argv[4]
    rows: dict[tuple[str, int, int, int, str], dict[str, list[tuple[float, float, float]]]] = {}
    for f in sorted(root.glob(f"{prefix}-*.json")):
        side = f.stem.split("-")[1]
        for r in json.loads(f.read_text())["records"]:
            key = (r["kv_format"], r["h_q"], r["batch"], r["s_k"], r["lengths"])
            rows.setdefault(key, {}).setdefault(side, []).append((r["median_us"], r["pct_copy"], r[phase]))
    print(f"fmt   h    b    s_k lengths  {a:>4s} µs (r1, r2)  {b:>4s} µs (r1, r2)  ratio  %copy {a}/{b}  "
          f"{phase} alone {a}/{b}")  # fmt: skip
    for k, d in sorted(rows.items()):
        if a in d and b in d:
            n, o = [x[0] for x in d[a]], [x[0] for x in d[b]]
            pn, po = max(x[1] for x in d[a]), max(x[1] for x in d[b])
            cn, co = min(x[2] for x in d[a]), min(x[2] for x in d[b])
            shape = f"{k[0]:5s} {k[1]:3d} {k[2]:4d} {k[3]:6d} {k[4]:8s}"
            print(f"{shape} {n[0]:8.1f} {n[-1]:8.1f} {o[0]:8.1f} {o[-1]:8.1f}  {min(n) / min(o):.3f}  "
                  f"{pn:5.1f}/{po:5.1f}  {cn:6.1f}/{co:6.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
