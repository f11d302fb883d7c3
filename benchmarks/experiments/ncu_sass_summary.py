"""Sum an Nsight Compute per-SASS export by execution count: how many instructions run once per tile, per segment,
per program, and which opcodes dominate the once-per-program/segment code; then, for the most executed lines (the
tile loop), the stall reasons' shares of the samples and the opcodes holding the most samples.

    cd benchmarks/results
    python3 ../experiments/ncu_sass_summary.py 2026-11-30-h200-ncu-csa128-{default,bi}-sass.csv.gz

(the CSVs come from ``ncu --page source --csv --print-source sass`` in ``gpu_prof_bi.sh`` and
``gpu_prof_dense_rows.sh``).
"""

import collections
import csv
import gzip
import io
import sys


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


for path in sys.argv[1:]:
    with gzip.open(path) as f:
        rows = list(csv.reader(io.TextIOWrapper(f, errors="replace")))
    hi = next(i for i, r in enumerate(rows) if "Source" in r)
    head, data = rows[hi], rows[hi + 1 :]
    ci, ei = head.index("Warp Stall Sampling (All Samples)"), head.index("Instructions Executed")
    lines = [(num(r[ei]), num(r[ci]), r[1]) for r in data if len(r) > ei]
    total_e, total_s = sum(e for e, _, _ in lines), sum(s for _, s, _ in lines)
    print(f"{path}: {total_e / 1e6:.2f}M warp instructions executed, {total_s:.0f} stall samples")
    by = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e, st, _ in lines:
        by[e][0] += 1
        by[e][1] += e
        by[e][2] += st
    for k in sorted(by, key=lambda k: -by[k][1])[:6]:
        n, tot, st = by[k]
        print(f"  executed {k:8.0f} times: {n:5d} SASS lines, {tot / 1e6:6.2f}M instructions, {st:6.0f} stall samples")
    ops: collections.Counter[str] = collections.Counter()
    for e, _, src in lines:
        if e in (1024, 2048):  # 128 programs x 8 warps: once per program (or per segment, twice per program)
            words = src.split()
            op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
            ops[op.split(".")[0]] += int(e)
    print("  once-per-program/segment code:", ", ".join(f"{k} {v / 1e3:.0f}K" for k, v in ops.most_common(10)))

    loop = max(by, key=lambda k: by[k][1])  # the execution count holding the most instructions: the tile loop
    body = [r for r in data if len(r) > ei and num(r[ei]) == loop]
    loop_s = sum(num(r[ci]) for r in body)
    print(f"  tile loop: {len(body)} SASS lines run {loop:.0f} times, {loop_s / total_s:.1%} of the stall samples")
    reasons = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    stall = collections.Counter({head[i][6:]: sum(num(r[i]) for r in data if len(r) > i) for i in reasons})
    stall_total = sum(stall.values()) or 1.0
    print("  stall reasons (all lines):", ", ".join(f"{k} {v / stall_total:.1%}" for k, v in stall.most_common(8)))
    hot: collections.Counter[str] = collections.Counter()
    for r in body:
        words = r[1].split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
        hot[".".join(op.split(".")[:2])] += num(r[ci])
    print("  loop opcodes by samples:", ", ".join(f"{k} {v / total_s:.1%}" for k, v in hot.most_common(10)))
