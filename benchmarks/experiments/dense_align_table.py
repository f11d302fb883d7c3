"""The aligned-partition A/B of gpu_dense_align.sh: per shape, the call as planned (WAVEMLA_DENSE_ALIGN=auto) and
with the knob off in each round, the better round's ratio and % of the copy ceiling.

    python benchmarks/experiments/dense_align_table.py DIR   (reads DIR/dense-align-{auto,off}-{1,2}-*.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    root = Path(sys.argv[1])
    runs: dict[tuple[str, str], dict[tuple[int, int, int, str], dict]] = {}
    for path in sorted(root.glob("dense-align-*.json")):
        _, _, mode, rnd, *_ = path.stem.split("-")
        data = json.loads(path.read_text())
        runs.setdefault((mode, rnd), {}).update(
            {(r["h_q"], r["batch"], r["s_k"], r["lengths"]): r for r in data["records"]}
        )
    if not runs:
        print("no dense-align-*.json under", root)
        return
    print("  h    b    s_k lengths  | auto: us (r1, r2) %copy       | off: us (r1, r2) %copy        | auto/off")
    for key in sorted({k for r in runs.values() for k in r}):
        got = {m: [runs[(m, i)][key] for i in ("1", "2") if key in runs.get((m, i), {})] for m in ("auto", "off")}
        if not got["auto"] or not got["off"]:
            continue
        best = {m: min(rs, key=lambda r: r["median_us"]) for m, rs in got.items()}
        h, b, sk, kind = key
        cells = [", ".join(f"{r['median_us']:7.1f}" for r in got[m]) + f" {best[m]['pct_copy']:5.1f}%" for m in got]
        ratio = best["auto"]["median_us"] / best["off"]["median_us"]
        print(f"{h:3d} {b:4d} {sk:6d} {kind:8s} | {cells[0]:29s} | {cells[1]:29s} | {ratio:.3f}")


if __name__ == "__main__":
    main()
