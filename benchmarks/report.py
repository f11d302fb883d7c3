"""Render the committed benchmark JSON into the tables of BENCHMARKS.md (and a PNG of the per-request curve).

    python benchmarks/report.py > /tmp/tables.md          # tables
    python benchmarks/report.py --png benchmarks/results/2026-12-01-h200-curve.png

Numbers come only from files under benchmarks/results; nothing here is typed by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
# The runs of the current sparse-decode build: the h=64 s_q=1 table and curves of the two-piece merge build
# (MERGE); the s_q=2 and h=128 curves of the tile-loop build before it (NOW), whose whole-token tiles the merge build
# changes by 0-1.5% (docs/sparse-decode.md, item 3); the 16-head curves and the indexer from the runs before those.
MERGE = "2026-12-01-h200-mergepair"
NOW = "2026-12-01-h200"
BEFORE = "2026-11-30-h200"


def load(name: str) -> dict:
    """The committed result ``benchmarks/results/<name>.json``."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def sparse_table(data: dict, mode: str, h: int, s_q: int) -> str:
    rows = [r for r in data["records"] if r["mode"] == mode and r["h_q"] == h and r["s_q"] == s_q]
    out = [
        "| b | config | programs | split | µs (median) | TFLOP/s | GB/s | % of roofline | FlashMLA µs | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["batch"]):
        anchor = f"{r['flashmla_us']:.1f}" if r["flashmla_us"] else "–"
        ratio = f"{r['ratio_to_flashmla']:.2f}×" if r["ratio_to_flashmla"] else "–"
        out.append(
            f"| {r['batch']} | {r['config']} | {r['programs']} | {'yes' if r['combine'] else 'no'} | "
            f"{r['median_us']:.1f} | {r['tflops']:.1f} | {r['gbps']:.0f} | {r['pct_roofline']:.1f} | "
            f"{anchor} | {ratio} |"
        )
    return "\n".join(out)


# The b = 1..256 curves: (file, mode, heads, s_q)
CURVES = [
    (f"{MERGE}-curve-h64", "csa", 64, 1), (f"{MERGE}-curve-h64-hca", "hca", 64, 1),
    (f"{NOW}-sparse-decode-curve-h64-s2", "csa", 64, 2), (f"{NOW}-sparse-decode-curve-h64-s2-hca", "hca", 64, 2),
    (f"{BEFORE}-sparse-decode-curve-h16", "csa", 16, 1), (f"{BEFORE}-sparse-decode-curve-h16-hca", "hca", 16, 1),
    (f"{NOW}-sparse-decode-curve-h128", "csa", 128, 1), (f"{NOW}-sparse-decode-curve-h128-hca", "hca", 128, 1),
]  # fmt: skip
ANCHORS = (1, 8, 32, 48, 64, 80, 96, 128, 148, 256)


def curve_rows(name: str) -> list[dict]:
    return sorted((r for r in load(name)["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])


def cliffs(rows: list[dict]) -> tuple[str, int]:
    lines = ["| b → b+1 | µs/request at b | at b+1 | increase |", "|---|---|---|---|"]
    count = 0
    for a, b in itertools.pairwise(rows):
        pa, pb = a["median_us"] / a["batch"], b["median_us"] / b["batch"]
        if pb > 1.05 * pa:
            count += 1
            lines.append(f"| {a['batch']} → {b['batch']} | {pa:.2f} | {pb:.2f} | +{100 * (pb / pa - 1):.0f}% |")
    return "\n".join(lines), count


def indexer_table(records: list[dict]) -> str:
    """Indexer rows against the copy ceiling the indexer run measured itself."""
    copy_gbps = next(r["gbps"] for r in records if r["provider"] == "copy")
    by = {
        (r["provider"], r["b"], r["n_comp"], r["kv_format"], r.get("q_format", "bf16")): r
        for r in records
        if r["provider"] != "copy"
    }
    out = [
        f"Copy ceiling measured in the same run: {copy_gbps:.0f} GB/s.\n",
        "| rows | q | b | n_comp | wavemla µs | GB/s | % of copy | torch µs | speed-up |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kv, q in (("fp8-paged", "fp8"), ("fp8", "fp8"), ("fp8-paged", "bf16"), ("fp8", "bf16"), ("bf16", "bf16")):
        for b in (1, 32, 64, 128):
            for n in (2048, 8192, 32768, 262144):
                t = by.get(("triton", b, n, kv, q))
                base = by.get(("torch", b, n, kv, q))
                if not t:
                    continue
                speed = f"{base['median_us'] / t['median_us']:.2f}×" if base else "–"
                torch_us = f"{base['median_us']:.1f}" if base else "–"
                out.append(
                    f"| {kv} | {q} | {b} | {n} | {t['median_us']:.1f} | {t['gbps']:.0f} | "
                    f"{100 * t['gbps'] / copy_gbps:.1f} | {torch_us} | {speed} |"
                )
    return "\n".join(out)


def png(path: str) -> None:
    """µs per request against batch, measured and predicted, one panel per (heads, s_q), CSA and HCA in each."""
    from matplotlib.figure import Figure

    panels = [(64, 1), (64, 2), (16, 1), (128, 1)]
    fig = Figure(figsize=(12, 8))
    for i, (h, s_q) in enumerate(panels):
        ax = fig.add_subplot(2, 2, i + 1)
        for name, mode, hh, ss in CURVES:
            if (hh, ss) != (h, s_q):
                continue
            rows = curve_rows(name)
            b = [r["batch"] for r in rows]
            ax.plot(b, [r["median_us"] / r["batch"] for r in rows], label=f"{mode.upper()} measured")
            ax.plot(b, [r["predicted_us"] / r["batch"] for r in rows], "--", label=f"{mode.upper()} planner")
        ax.set_xlabel(f"batch (requests; h = {h}, s_q = {s_q})")
        ax.set_ylabel("µs per request")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.suptitle("wavemla sparse decode on H200 (FP8 MODEL1): time per request vs batch, b = 1..256")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--png")
    args = parser.parse_args()
    if args.png:
        png(args.png)
        return
    h64 = load(f"{MERGE}-bench-h64")
    c = h64["ceilings"]
    print(f"Ceilings measured in the same run: copy {c['copy_gbps']:.0f} GB/s, ", end="")
    print(f"bf16 GEMM {c['gemm_tflops']:.0f} TFLOP/s.")
    print()
    for mode in ("csa", "hca"):
        print(f"### {mode.upper()}, h=64, s_q=1 (median of 30)\n")
        print(sparse_table(h64, mode, 64, 1) + "\n")
    for name, mode, h, s_q in CURVES:
        if (h, s_q) == (64, 1):
            continue
        anchors = {"records": [r for r in curve_rows(name) if r["batch"] in ANCHORS]}
        print(f"### {mode.upper()}, h={h}, s_q={s_q} (from the b = 1..256 curve, median of 5)\n")
        print(sparse_table(anchors, mode, h, s_q) + "\n")
    for name, mode, h, s_q in CURVES:
        rows = curve_rows(name)
        table, n = cliffs(rows)
        ratio = statistics.median(r["predicted_us"] / r["median_us"] for r in rows)
        print(f"### Per-request steps above 5%, {mode.upper()} h={h} s_q={s_q}, b = 1..256: {n}\n")
        print(f"Planner prediction over measured time, median over the curve: {ratio:.2f}.\n")
        print(table + "\n")
    print("### Lightning indexer\n")
    print(indexer_table(load(f"{BEFORE}-indexer")))


if __name__ == "__main__":
    main()
