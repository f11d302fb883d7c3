"""How the dense planner ranks its FP8 V3.2 tiles against the tile shapes forced on the H200
(gpu_dense_fp8_staged{,2}.sh: dense_variant_ab.py, the planner picking each tile's parts), for values of the staged
tiles' decode cost (_DENSE_FP8_STAGED_ROW_US).

    PYTHONPATH=src python3 benchmarks/experiments/fit_dense_fp8.py

Only variants the current kernel still runs count: in the first run (commit 6dceeb0) the register tiles with the bit
assembly (``e4m3_cvt=0``) and the staged tiles with the scale blocks apart (``fp8_blocks=1``); in the second
(ef07926) every variant. For each shape the model picks among the measured tiles that are still candidates
(``dense_candidate_configs``): a miss is a pick more than 3% slower than the fastest of them. Also prints the range
of predicted over measured time.
"""

import json
from pathlib import Path

import wavemla.plan as pl
from wavemla import config
from wavemla.device import get_spec

DEVICE = get_spec("h200")
RESULTS = Path(__file__).resolve().parents[1] / "results"
RUNS = {  # file -> which variants the current kernel runs
    "2026-12-03-h200-dense-fp8-staged-h16.json": "first",
    "2026-12-03-h200-dense-fp8-staged-h64.json": "first",
    "2026-12-03-h200-dense-fp8-staged2-h32.json": "all",
}
PAGE = 64  # the bench's block table has one spare page past s_k


def current(variant: str, rule: str) -> bool:
    if rule == "all":
        return True
    return variant.startswith("e4m3_cvt=0") if "fp8_blocks=1" not in variant else "e4m3_cvt=0" not in variant


def measured() -> dict[tuple[int, int, int], dict[str, float]]:
    """(h, b, s_k) -> {tile label: fastest µs}."""
    out: dict[tuple[int, int, int], dict[str, float]] = {}
    for name, rule in RUNS.items():
        for r in json.loads((RESULTS / name).read_text())["records"]:
            for v, us in r["us"].items():
                if current(v, rule):
                    tile = r["plans"][v].split()[0]
                    cell = out.setdefault((r["heads"], r["batch"], r["s_k"]), {})
                    cell[tile] = min(us, cell.get(tile, us))
    return out


def predicted(h: int, b: int, s_k: int, tile: str) -> float:
    bh, bn, w, st = (int(x) for x in tile.split("x"))
    pl._plan_dense_cached.cache_clear()
    knobs = dict(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=w, WAVEMLA_NUM_STAGES=st)
    with config.override(**knobs):
        wl = pl.DenseWorkload(batch=b, s_q=1, h_q=h, max_seqlen=s_k + PAGE, is_fp8=True)
        return pl.plan_dense(wl, DEVICE).predicted_us


def main() -> None:
    data = measured()
    shipped = pl._DENSE_FP8_STAGED_ROW_US
    for row_us in (0.02, 0.03, 0.04, 0.05, 0.06):
        pl._DENSE_FP8_STAGED_ROW_US = row_us
        misses, ratios = [], []
        for (h, b, s_k), tiles in sorted(data.items()):
            wl = pl.DenseWorkload(batch=b, s_q=1, h_q=h, max_seqlen=s_k + PAGE, is_fp8=True)
            cands = {f"{c.block_h}x{c.block_n}x{c.num_warps}x{c.num_stages}" for c in pl.dense_candidate_configs(wl)}
            live = {t: us for t, us in tiles.items() if t in cands}
            if not live:
                continue
            pred = {t: predicted(h, b, s_k, t) for t in live}
            ratios += [pred[t] / live[t] for t in live]
            pick, best = min(pred, key=pred.__getitem__), min(live, key=live.__getitem__)
            if live[pick] > 1.03 * live[best]:
                misses.append(f"h={h} b={b}: {pick} {live[pick] / live[best]:.2f}x {best}")
        mark = " (shipped)" if row_us == shipped else ""
        print(f"{row_us:.2f}{mark}: {len(misses)} misses, predicted/measured {min(ratios):.2f}-{max(ratios):.2f}",
              "; ".join(misses))  # fmt: skip
    pl._DENSE_FP8_STAGED_ROW_US = shipped


if __name__ == "__main__":
    main()
