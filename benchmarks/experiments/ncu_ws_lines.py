"""Nsight Compute's per-SASS counters of a kernel, summed by source line and by stall reason.

    python3 benchmarks/experiments/ncu_ws_lines.py KERNEL.sass NCU_SASS.csv.gz [TOP]
    python3 benchmarks/experiments/ncu_ws_lines.py --count KERNEL.sass FILE:FIRST-LAST ...

``KERNEL.sass`` is ``nvdisasm -c -g`` of the cubin that ran (``gpu_ws_merge_loop.sh`` writes those of the Triton
cache; a cubin built elsewhere is scheduled differently, so its addresses do not match); ``NCU_SASS.csv.gz`` is
``ncu --page source --csv --print-source sass`` of the same launch (``gpu_prof_ws.sh``). Prints the stall reasons
over the whole kernel (``no_inst``: a warp waiting for its next instruction to be fetched), then the ``TOP`` source
lines (default 30) by warp stall samples: SASS instructions, samples, instructions executed, top reasons.
``--count`` prints the kernel's SASS instructions and how many of them come from each range of source lines (e.g.
``sparse_decode_ws.py:330-421``, a function; every partition's copy counted).
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import re
import sys


def sass_lines(path: str) -> dict[int, tuple[str, str]]:
    """Offset -> ("file:line", instruction) from an ``nvdisasm -g`` listing."""
    where = "?"
    out: dict[int, tuple[str, str]] = {}
    with open(path) as f:
        for ln in f:
            m = re.search(r'//## File "([^"]+)", line (\d+)', ln)
            if m:
                where = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
                continue
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", ln)
            if m:
                out[int(m.group(1), 16)] = (where, m.group(2).strip())
    return out


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def count(sass_path: str, ranges: list[str]) -> None:
    lines = sass_lines(sass_path)
    print(f"{sass_path}: {len(lines)} SASS instructions")
    for spec in ranges:
        name, _, span = spec.rpartition(":")
        first, _, last = span.partition("-")
        n = sum(
            1
            for where, _ in lines.values()
            if where.rpartition(":")[0] == name and int(first) <= int(where.rpartition(":")[2]) <= int(last)
        )
        print(f"  {spec}: {n}")


def main() -> None:
    if sys.argv[1] == "--count":
        count(sys.argv[2], sys.argv[3:])
        return
    sass_path, csv_path = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    lines = sass_lines(sass_path)
    with gzip.open(csv_path) as f:
        rows = list(csv.reader(io.TextIOWrapper(f, errors="replace")))
    hi = next(i for i, r in enumerate(rows) if "Source" in r)
    head, data = rows[hi], [r for r in rows[hi + 1 :] if len(r) > 5]
    ci, ei = head.index("Warp Stall Sampling (All Samples)"), head.index("Instructions Executed")
    reasons = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    base = int(data[0][0], 16)
    by_line: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0, collections.Counter()])
    total: collections.Counter[str] = collections.Counter()
    mismatched = 0
    for r in data:
        where, ins = lines.get(int(r[0], 16) - base, ("?", ""))
        if not ins or ins.split()[0][:4] not in r[1]:
            mismatched += 1
        acc = by_line[where]
        acc[0] += 1
        acc[1] += num(r[ci])
        acc[2] += num(r[ei])
        for i in reasons:
            acc[3][head[i][6:]] += num(r[i])
            total[head[i][6:]] += num(r[i])
    samples = sum(total.values()) or 1.0
    print(f"{csv_path}: {len(data)} SASS instructions ({mismatched} not matching {sass_path}), {samples:.0f} samples")
    print("  stall reasons:", ", ".join(f"{k} {v / samples:.1%}" for k, v in total.most_common(8)))
    for where, (n, s, e, c) in sorted(by_line.items(), key=lambda kv: -kv[1][1])[:top]:
        why = ", ".join(f"{k} {v / s:.0%}" for k, v in c.most_common(3)) if s else ""
        print(f"  {where:28s} {n:4d} SASS {s:6.0f} samples ({s / samples:5.1%}) {e / 1e3:8.1f}K executed  {why}")


if __name__ == "__main__":
    main()
