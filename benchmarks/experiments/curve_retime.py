"""Disturbed points of a ``wavemla bench`` curve, and the curve with them re-timed.

    python3 benchmarks/experiments/curve_retime.py spikes CURVE.json        # prints the batches to time again
    python3 benchmarks/experiments/curve_retime.py merge CURVE.json AGAIN.json   # AGAIN's records replace CURVE's

A point is disturbed where its samples spread (p80 over 1.3x p20) or its median is over 1.12x both neighbours':
on a shared machine another tenant's burst can slow every sample of a point (2026-12-06: 5x at single batches of
the 16-head curves while their neighbours ran as before). ``merge`` keeps the replaced records under
``"superseded"`` and names the file that replaced them in ``"retimed_from"``, so the first timing stays on record.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _records(path: str) -> list[dict]:
    data = json.loads(Path(path).read_text())
    return sorted((r for r in data["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])


def spikes(path: str) -> list[int]:
    """The batches of the curve at ``path`` whose timing looks disturbed (module doc)."""
    recs = _records(path)
    out = []
    for i, r in enumerate(recs):
        near = [recs[j]["median_us"] for j in (i - 1, i + 1) if 0 <= j < len(recs)]
        if r["p80_us"] > 1.3 * r["p20_us"] or (near and r["median_us"] > 1.12 * max(near)):
            out.append(r["batch"])
    return out


def merge(path: str, again: str) -> int:
    """Replace the records of ``path`` by ``again``'s at the same batches (the file is rewritten); returns how many."""
    data = json.loads(Path(path).read_text())
    new = {r["batch"]: r for r in _records(again)}
    kept, old = [], []
    for r in data["records"]:
        (old if r["provider"] == "wavemla" and r["batch"] in new else kept).append(r)
    data["records"] = sorted(kept + list(new.values()), key=lambda r: (r["provider"], r["batch"]))
    data.setdefault("superseded", []).extend(old)
    data.setdefault("retimed_from", []).append(Path(again).name)
    Path(path).write_text(json.dumps(data, indent=1))
    return len(new)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "spikes":
        print(" ".join(str(b) for b in spikes(sys.argv[2])))
    elif len(sys.argv) == 4 and sys.argv[1] == "merge":
        print(f"{merge(sys.argv[2], sys.argv[3])} records of {sys.argv[2]} re-timed from {sys.argv[3]}")
    else:
        sys.exit(__doc__)
