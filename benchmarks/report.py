"""Render the committed benchmark JSON into the tables of BENCHMARKS.md (and a PNG of the per-request curve).

    python benchmarks/report.py > /tmp/tables.md          # tables
    python benchmarks/report.py --glance                  # the headline table
    python benchmarks/report.py --png benchmarks/results/2026-12-02-h200-curve.png

Numbers come only from files under benchmarks/results; nothing here is typed by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
# The runs of the current sparse-decode build and planner: the b = 1..256 curves (CURVES; the 16-head ones from the
# runs before the warp-specialized kernel, which they do not run), the batch-invariant cost with that kernel (BI), and
# the indexer from the runs before those.
# (on the build of 2026-12-07: padded tokens, the spread, rows loaded evict_first, the indexer's one-wave score grid)
BI = "2026-12-07-h200-bi-cost-57fe0e8"
BEFORE = "2026-11-30-h200"
DENSE = "2026-12-02-h200-dense-ws-b128-72f38d6"  # the warp-specialized sm_90 kernel's b = 128, 16K points
# the planner's bf16 picks at 4K keys (h = 64, uniform lengths), the build whose rows keep a NaN score NaN
# (`wavemla bench --dense`, 2026-12-07)
DENSE_CURVE = "2026-12-07-h200-dense-aim-e480dc0"
# the sparse decode as shipped (`wavemla bench` at the FlashMLA anchor shapes), the same build
SPARSE_BENCH = "2026-12-07-h200-bench-e480dc0"
# the planner's FP8 V3.2 picks over b = 1..128 at 4K keys, h = 16: staged 16-row tiles
DENSE_FP8_CURVE = "2026-12-03-h200-dense-fp8-curve-h16-70bb758"
# the indexer with the candidate list's wider register block from 32 query tokens (2026-12-04); the shapes that run
# did not reach come from the run before it (BEFORE)
IDX = "2026-12-04-h200-idx-wide-list-c3b6ded"
# whole calls against the build before, in one run (idx_ab.py): the package's side, at 32K rows
IDX_AB = (
    "2026-12-07-h200-idx-wave-ab-57fe0e8",  # the one-wave score grid against the indexer before it (2934bcc)
    "2026-12-07-h200-idx-wave-ab-256k-57fe0e8",
    "2026-12-06-h200-idx-32k-86220d0",  # the build of 2026-12-06 against a copy of itself
    "2026-12-04-h200-idx-rank-ab-7746f44",
    "2026-12-04-h200-idx-rank-ab-token-7746f44",
)
IDX_GLANCE = ((32768, 32), (32768, 64), (32768, 128), (262144, 32), (262144, 128))  # (n_comp, b) of the rows
# the sparse prefill (FlashMLA's flash_mla_sparse_fwd) at FlashMLA's benchmark shapes, 4096 query tokens
PREFILL = "2026-12-05-h200-prefill-3bbc606"
PREFILL_GLANCE = ("dsv4-h64", "dsv4-h128", "v32-h128")
FLASHMLA_PREFILL_TFLOPS = 640.0  # FlashMLA's README: its sparse prefill on an H800


def load(name: str) -> dict:
    """The committed result ``benchmarks/results/<name>.json``."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def sparse_table(data: dict, mode: str, h: int, s_q: int, moved: dict[int, dict] | None = None) -> str:
    """The anchor rows of one shape; ``moved``: rows of batches whose pick has changed since ``data`` was measured,
    shown instead (batch marked with *)."""
    rows = [r for r in data["records"] if r["mode"] == mode and r["h_q"] == h and r["s_q"] == s_q]
    moved = moved or {}
    rows = [moved.get(r["batch"], r) for r in rows]
    out = [
        "| b | config | programs | split | µs (median) | TFLOP/s | GB/s | % of roofline | FlashMLA µs | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["batch"]):
        anchor = f"{r['flashmla_us']:.1f}" if r["flashmla_us"] else "–"
        ratio = f"{r['ratio_to_flashmla']:.2f}×" if r["ratio_to_flashmla"] else "–"
        mark = "*" if r["batch"] in moved else ""
        out.append(
            f"| {r['batch']}{mark} | {r['config']} | {r['programs']} | {'yes' if r['combine'] else 'no'} | "
            f"{r['median_us']:.1f} | {r['tflops']:.1f} | {r['gbps']:.0f} | {r['pct_roofline']:.1f} | "
            f"{anchor} | {ratio} |"
        )
    return "\n".join(out)


# The b = 1..256 curves: (file, mode, heads, s_q, the later runs of the batches whose pick has moved since, oldest
# first). The 64-head and 128-head curves are of the planner pricing the warp-specialized sm_90 kernel with its first
# costs (WS); the later runs re-measured the plans its re-fitted costs ("-ws-refit") and its costs chosen by their
# picks ("-ws-refit2") moved, then those its combine term priced by the cut tokens' fp16 partials moved
# ("-ws-combine"), then those the Triton kernel's narrow tiles left beside it from three query tokens on moved
# ("-ws-small-b"). Each curve is one run; the later runs are shown beside them (moved_table) and make up
# the current planner's curve (current_rows), whose steps are counted. The 16-head curves (no warp-specialized kernel)
# are of the staged FP8 16x32 tiles, with the batches whose partition pricing them at the register tile's ratio moved
# re-measured ("-staged-ratio"), then those the 16x32 tile's shared-SM time moved ("-shared-tile").
WS = "2026-12-02-h200-sparse-decode"
STAGED = "2026-12-03-h200-sparse-decode"
CURVES = [
    (f"{WS}-curve-h64-ws", "csa", 64, 1, (f"{WS}-changed-h64-ws-refit", f"{WS}-changed-h64-ws-refit2",
     f"{WS}-changed-h64-ws-combine", f"{WS}-changed-h64-ws-small-b")),
    (f"{WS}-curve-h64-hca-ws", "hca", 64, 1, (f"{WS}-changed-h64-hca-ws-refit", f"{WS}-changed-h64-hca-ws-refit2",
     f"{WS}-changed-h64-hca-ws-combine", f"{WS}-changed-h64-hca-ws-small-b")),
    (f"{WS}-curve-h64-s2-ws", "csa", 64, 2, (f"{WS}-changed-h64-s2-ws-refit", f"{WS}-changed-h64-s2-ws-refit2",
     f"{WS}-changed-h64-s2-ws-combine", f"{WS}-changed-h64-s2-ws-small-b")),
    (f"{WS}-curve-h64-s2-hca-ws", "hca", 64, 2,
     (f"{WS}-changed-h64-s2-hca-ws-refit", f"{WS}-changed-h64-s2-hca-ws-refit2",
     f"{WS}-changed-h64-s2-hca-ws-combine")),
    (f"{STAGED}-curve-h16-staged", "csa", 16, 1, (f"{STAGED}-changed-h16-staged-ratio",
     f"{STAGED}-changed-h16-shared-tile")),
    (f"{STAGED}-curve-h16-hca-staged", "hca", 16, 1, (f"{STAGED}-changed-h16-hca-staged-ratio",
     f"{STAGED}-changed-h16-hca-shared-tile")),
    (f"{WS}-curve-h128-ws", "csa", 128, 1, (f"{WS}-changed-h128-ws-refit", f"{WS}-changed-h128-ws-refit2",
     f"{WS}-changed-h128-ws-combine")),
    (f"{WS}-curve-h128-hca-ws", "hca", 128, 1,
     (f"{WS}-changed-h128-hca-ws-refit", f"{WS}-changed-h128-hca-ws-refit2",
     f"{WS}-changed-h128-hca-ws-combine")),
]  # fmt: skip
ANCHORS = (1, 8, 32, 48, 64, 80, 96, 128, 148, 256)


def curve_rows(name: str) -> list[dict]:
    return sorted((r for r in load(name)["records"] if r["provider"] == "wavemla"), key=lambda r: r["batch"])


def current_rows(name: str, later: tuple[str, ...]) -> list[dict]:
    """A curve with the batches whose pick has moved since replaced by the newest later run's row."""
    rows = {r["batch"]: r for r in curve_rows(name)} | {b: r for b, (r, _) in newest_rows(later).items()}
    return [rows[b] for b in sorted(rows)]


def newest_rows(later: tuple[str, ...]) -> dict[int, tuple[dict, str]]:
    """Per batch, the row of the newest of the ``later`` runs that measured it, with that run's file name."""
    rows: dict[int, tuple[dict, str]] = {}
    for name in later:
        rows.update({r["batch"]: (r, name) for r in curve_rows(name)})
    return rows


def moved_table(name: str, later: tuple[str, ...]) -> str:
    """The batches of a curve whose pick has moved since, as the curve ran them and as the newest later run did."""
    before = {r["batch"]: r for r in curve_rows(name)}
    out = ["| b | pick then | µs | pick now | µs (later run) | run |", "|---|---|---|---|---|---|"]
    for b, (r, run) in sorted(newest_rows(later).items()):
        a = before[b]
        tag = run.removeprefix(WS).removeprefix(STAGED)
        out.append(
            f"| {b} | {a['config']}:{a['units_per_part']} | {a['median_us']:.1f} | "
            f"{r['config']}:{r['units_per_part']} | {r['median_us']:.1f} | `{tag}` |"
        )
    return "\n".join(out)


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


def per_request_lines(ax: Any, rows: list[dict], label: str = "") -> None:
    """A curve's µs per request against batch on ``ax``: measured, and the planner's prediction dashed."""
    b = [r["batch"] for r in rows]
    ax.plot(b, [r["median_us"] / r["batch"] for r in rows], label=f"{label}measured")
    ax.plot(b, [r["predicted_us"] / r["batch"] for r in rows], "--", label=f"{label}planner")
    ax.set_ylabel("µs per request")
    ax.set_yscale("log")


def png(path: str) -> None:
    """µs per request against batch, measured and predicted, one panel per (heads, s_q), CSA and HCA in each."""
    from matplotlib.figure import Figure

    panels = [(64, 1), (64, 2), (16, 1), (128, 1)]
    fig = Figure(figsize=(12, 8))
    for i, (h, s_q) in enumerate(panels):
        ax = fig.add_subplot(2, 2, i + 1)
        for name, mode, hh, ss, later in CURVES:
            if (hh, ss) != (h, s_q):
                continue
            per_request_lines(ax, current_rows(name, later), f"{mode.upper()} ")
        ax.set_xlabel(f"batch (requests; h = {h}, s_q = {s_q})")
        ax.legend(fontsize=8)
    fig.suptitle("wavemla sparse decode on H200 (FP8 MODEL1): time per request vs batch, b = 1..256")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def glance() -> str:
    """The headline figures of the current runs: one row per kernel and shape, with the file each comes from. Each row
    is picked by every key its label names (a record without one is a KeyError, not a row left out or mislabelled)."""
    out = ["| kernel | shape | b | µs | against | from |", "|---|---|---|---|---|---|"]
    sparse = [r for r in load(SPARSE_BENCH)["records"] if r["provider"] == "wavemla"]
    for mode in ("csa", "hca"):
        for r in sorted(sparse, key=lambda r: r["batch"]):
            shape = (r["mode"], r["h_q"], r["s_q"], r["fp8"])
            if shape == (mode, 64, 1, True) and r["batch"] in (1, 8, 32, 64, 128, 256):
                # FlashMLA publishes no time at some of these shapes (HCA b = 8): the row stays, without a ratio
                ratio = r["ratio_to_flashmla"]
                against = f"{ratio:.2f}× FlashMLA's time" if ratio else "– (no FlashMLA time at this shape)"
                out.append(
                    f"| sparse decode | {mode.upper()}, h=64, s_q=1, FP8 MODEL1 | {r['batch']} | {r['median_us']:.1f} "
                    f"| {against} | `{SPARSE_BENCH}.json` |"
                )
    bi = load(BI)["records"]
    for mode in ("csa", "hca"):
        worst = max(
            (r for r in bi if r["mode"] == mode and r["heads"] == 64 and r["batch"] >= 32), key=lambda r: r["ratio"]
        )
        out.append(
            f"| sparse decode, batch-invariant | {mode.upper()}, h=64, worst of b ≥ 32 | {worst['batch']} | "
            f"{worst['invariant_us']:.1f} | {worst['ratio']:.2f}× the default plan | `{BI}.json` |"
        )
    dense = load(DENSE)
    for r in sorted(dense["records"], key=lambda r: r["h_q"]):
        shape = (r["provider"], r["kv_format"], r["lengths"], r["batch"], r["s_k"], r["s_q"])
        if shape == ("wavemla", "bf16", "uniform", 128, 16384, 1):
            out.append(
                f"| dense decode | bf16, s_k 16K, h={r['h_q']} | 128 | {r['median_us']:.1f} | "
                f"{r['pct_copy']:.0f}% of copy bandwidth | `{DENSE}.json` |"
            )
    for r in load(DENSE_CURVE)["records"]:
        shape = (r["provider"], r["kv_format"], r["lengths"], r["s_k"], r["s_q"])
        if shape == ("wavemla", "bf16", "uniform", 4096, 1) and r["batch"] in (32, 128):
            out.append(
                f"| dense decode | bf16, s_k 4K, h={r['h_q']} | {r['batch']} | {r['median_us']:.1f} | "
                f"{r['pct_copy']:.0f}% of copy bandwidth | `{DENSE_CURVE}.json` |"
            )
    for r in load(DENSE_FP8_CURVE)["records"]:
        shape = (r["provider"], r["kv_format"], r["lengths"], r["s_k"], r["s_q"])
        if shape == ("wavemla", "fp8", "uniform", 4096, 1) and r["batch"] in (32, 128):
            out.append(
                f"| dense decode | FP8 V3.2, s_k 4K, h={r['h_q']} | {r['batch']} | {r['median_us']:.1f} | "
                f"{r['pct_copy']:.0f}% of copy bandwidth | `{DENSE_FP8_CURVE}.json` |"
            )
    picked: dict[tuple[int, int], tuple[dict, str]] = {}
    for name in IDX_AB:
        for r in load(name):
            if (r["n_comp"], r["b"]) in IDX_GLANCE:
                rec = {"select": r["select"], "median_us": r["package_us"], "pct_of_copy_bw": r["pct_copy_package"]}
                picked.setdefault((r["n_comp"], r["b"]), (rec, name))
    for name in (IDX, f"{BEFORE}-idx-spread"):
        for r in load(name):
            if r["provider"] != "triton":  # the copy ceiling's record
                continue
            shape = (r["kv_format"], r["q_format"], r["topk"], r["n_comp"], r["b"])
            if r["select"] == r["auto"] and shape[:3] == ("fp8-paged", "fp8", 512) and shape[3:] in IDX_GLANCE:
                picked.setdefault((r["n_comp"], r["b"]), (r, name))
    for (n_comp, b), (r, name) in sorted(picked.items()):
        out.append(
            f"| lightning indexer | FP8 rows and q, top-512, n_comp {n_comp // 1024}K, {r['select']} select | {b} | "
            f"{r['median_us']:.1f} | {r['pct_of_copy_bw']:.0f}% of copy bandwidth | `{name}.json` |"
        )
    from wavemla.tools.bench_prefill import CASES  # the FLOPs of the rows each token attends over

    prefill = load(PREFILL)["rows"]
    for name in PREFILL_GLANCE:
        r = next(r for r in prefill if r["name"] == name and r["provider"] == "wavemla")
        # the run's own "tflops" counted every token's whole list, a fifth of them attend over half of it
        tflops = CASES[name].flops / r["median_us"] / 1e6
        model = "V4" if r["d_qk"] == 512 else "V3.2"
        out.append(
            f"| sparse prefill | {model}, h={r['h_q']}, {r['topk']} of {r['s_kv'] // 1024}K rows of {r['d_qk']}, "
            f"{r['s_q']} tokens | – | {r['median_us']:.1f} | {tflops:.0f} TFLOP/s, "
            f"{tflops / FLASHMLA_PREFILL_TFLOPS:.2f}× FlashMLA's published rate (H800) | `{PREFILL}.json` |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--png")
    parser.add_argument("--glance", action="store_true", help="only the headline table (BENCHMARKS.md, At a glance)")
    args = parser.parse_args()
    if args.png:
        png(args.png)
        return
    if args.glance:
        print(glance())
        return
    c = load(CURVES[0][0])["ceilings"]
    print(f"Ceilings measured in the CSA h=64 s_q=1 curve's run: copy {c['copy_gbps']:.0f} GB/s, ", end="")
    print(f"bf16 GEMM {c['gemm_tflops']:.0f} TFLOP/s.")
    print()
    for name, mode, h, s_q, later in CURVES:
        anchors = {"records": [r for r in curve_rows(name) if r["batch"] in ANCHORS]}
        moved = {b: r for b, (r, _) in newest_rows(later).items() if b in ANCHORS}
        print(
            f"### {mode.upper()}, h={h}, s_q={s_q} (from the b = 1..256 curve, median of 5; * the planner's pick "
            "now, re-measured later)\n"
        )
        print(sparse_table(anchors, mode, h, s_q, moved) + "\n")
    for name, mode, h, s_q, later in CURVES:
        rows = current_rows(name, later)
        table, n = cliffs(rows)
        ratio = statistics.median(r["predicted_us"] / r["median_us"] for r in rows)
        print(f"### Per-request steps above 5%, {mode.upper()} h={h} s_q={s_q}, b = 1..256: {n}\n")
        if later:
            print("(the curve with the batches whose pick has moved since from the later runs)\n")
        print(f"Planner prediction over measured time, median over the curve: {ratio:.2f}.\n")
        print(table + "\n")
        if later:
            print("Batches whose pick the planner has moved since this curve ran, re-measured later:\n")
            print(moved_table(name, later) + "\n")
    print("### Lightning indexer\n")
    print(indexer_table(load(f"{BEFORE}-indexer")))


if __name__ == "__main__":
    main()
