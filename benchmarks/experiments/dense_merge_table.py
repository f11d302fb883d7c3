"""The dense in-kernel merge A/B of gpu_dense_ws_merge.sh: per shape, the call as planned (merge on) and with
WAVEMLA_DENSE_WS_MERGE=off (a knob of commit c01760f only) in each round, the better round's ratio, and the on-call
with the schedule reused.

    python benchmarks/experiments/dense_merge_table.py DIR   (reads DIR/dense-merge-{on,off}-{1,2}.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    root = Path(sys.argv[1])
    runs: dict[tuple[str, int], dict[tuple[int, int, int, str], dict]] = {}
    ceilings = []
    for mode in ("on", "off"):
        for rnd in (1, 2):
            path = root / f"dense-merge-{mode}-{rnd}.json"
            if not path.exists():
                continue
            data = json.loads(path.read_text())
            ceilings.append(data["ceilings"]["copy_gbps"])
            runs[(mode, rnd)] = {(r["h_q"], r["batch"], r["s_k"], r["lengths"]): r for r in data["records"]}
    if not runs:
        print("no dense-merge-*.json under", root)
        return
    print(f"copy ceiling {min(ceilings):.0f}-{max(ceilings):.0f} GB/s")
    print("  h    b   s_k  lengths | merge on: us (r1, r2) %copy | off: us, %copy | on/off | on, schedule reused")
    keys = sorted({k for r in runs.values() for k in r})
    for key in keys:
        on = [runs[("on", i)][key] for i in (1, 2) if ("on", i) in runs and key in runs[("on", i)]]
        off = [runs[("off", i)][key] for i in (1, 2) if ("off", i) in runs and key in runs[("off", i)]]
        if not on or not off:
            continue
        b_on = min(on, key=lambda r: r["median_us"])
        b_off = min(off, key=lambda r: r["median_us"])
        h, b, sk, kind = key
        print(
            f"{h:3d} {b:4d} {sk:6d} {kind:8s}| "
            + ", ".join(f"{r['median_us']:7.1f}" for r in on)
            + f" {b_on['pct_copy']:5.1f}% | "
            + ", ".join(f"{r['median_us']:7.1f}" for r in off)
            + f" {b_off['pct_copy']:5.1f}% | {b_on['median_us'] / b_off['median_us']:.3f} | "
            + f"{b_on.get('reused_us', 0.0):7.1f} {b_on.get('pct_copy_reused', 0.0):5.1f}%"
        )


if __name__ == "__main__":
    main()
