"""The figures quoted for the combine term's moved plans and the batch-invariant pieces' costs, from committed runs.

    PYTHONPATH=src python3 benchmarks/experiments/ws_combine_figures.py BI_COST.json

Per 64/128-head curve (report.py's CURVES, the current planner's rows): the geometric mean over b = 1..256 of the
current rows over those before the "-ws-combine" re-measurements, the per-request steps above 5% before and now,
and the rows at FlashMLA's cliffs. Then, per batch of ``BI_COST.json`` (bi_cost.py), the planner's predicted
batch-invariant time against the measured one.
"""

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
import report

from wavemla.device import get_spec
from wavemla.plan import Workload, plan
from wavemla.tools.bench import MODES

for name, mode, h, s_q, later in report.CURVES:
    later = tuple(x for x in later if "ws-small-b" not in x)  # the runs up to the combine term's, as quoted
    if not later:
        continue
    now = {r["batch"]: r for r in report.current_rows(name, later)}
    before = {r["batch"]: r for r in report.current_rows(name, tuple(x for x in later if "ws-combine" not in x))}
    geo = math.exp(statistics.mean(math.log(now[b]["median_us"] / before[b]["median_us"]) for b in now))
    steps = [report.cliffs(sorted(rows.values(), key=lambda r: r["batch"]))[1] for rows in (before, now)]
    cliffs = " ".join(
        f"b{b} {before[b]['median_us']:.1f}->{now[b]['median_us']:.1f} us (FlashMLA {now[b]['flashmla_us']:.1f})"
        for b in (96, 148)
        if now[b].get("flashmla_us")
    )
    print(f"{mode} h={h} s_q={s_q}: now/before geo-mean {geo:.3f}, steps {steps[0]} -> {steps[1]}  {cliffs}")

h200 = get_spec("h200")
worst = 0.0
for r in json.loads(Path(sys.argv[1]).read_text())["records"]:
    topk, _, extra, _, _ = MODES[r["mode"]]
    w = Workload(batch=r["batch"], s_q=1, h_q=r["heads"], topk=topk, extra_topk=extra, is_fp8=True,
                 batch_invariant=True)  # fmt: skip
    p = plan(w, h200)
    err = p.predicted_us / r["invariant_us"] - 1
    worst = max(worst, abs(err)) if r["batch"] > 1 else worst
    print(f"{r['mode']} b={r['batch']}: units_per_part {p.units_per_part}, pieces of {p.pieces_tiles} tiles, "
          f"predicted {p.predicted_us:.1f} us, measured {r['invariant_us']:.1f} ({100 * err:+.0f}%)")  # fmt: skip
print(f"largest prediction error at b > 1: {100 * worst:.0f}%")
