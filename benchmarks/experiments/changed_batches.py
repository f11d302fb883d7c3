"""Batches whose H200 plan (tile and tiles per program) differs from the newest measured one, per DeepSeek-V4 shape:
the points ``tests/test_plan.py::test_h200_choices_are_the_measured_ones`` needs re-measured after a planner change.

    PYTHONPATH=src python3 benchmarks/experiments/changed_batches.py     # lines of: MODE HEADS S_Q B1 B2 ...

Newest: the ``*-h200-sparse-decode-*.json`` files in date order, and on one day in the order of the planners they
measured (the test's ``_PLANNER_RUNS``).
"""

import sys
from pathlib import Path

from wavemla.device import get_spec
from wavemla.plan import Workload, plan
from wavemla.tools.bench import MODES

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.test_plan import _h200_records

H200 = get_spec("h200")
changed: dict[tuple[str, int, int], list[int]] = {}
for r in _h200_records():
    topk, _, extra_topk, _, _ = MODES[r["mode"]]
    w = Workload(batch=r["batch"], s_q=r["s_q"], h_q=r["h_q"], topk=topk, extra_topk=extra_topk, is_fp8=r["fp8"])
    p = plan(w, H200)
    if (str(p.config), p.units_per_part) != (r["config"], r["units_per_part"]):
        changed.setdefault((r["mode"], r["h_q"], r["s_q"]), []).append(r["batch"])
for (mode, h, s_q), batches in sorted(changed.items()):
    print(mode, h, s_q, *sorted(batches))
