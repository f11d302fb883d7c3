"""The indexer's hostile-count property test, case by case: for one select path, draws cases from the strategy of
``test_hostile_counts_and_shapes_match_reference`` (derandomized: the same cases on every run) and prints each
case's shapes, counts and options, its time (on a GPU mostly the compiles of that case's kernels) and whether it
met the reference. A failing case is printed and the run goes on (no shrinking), so a slow path cannot pass for a
hang.

    PYTHONPATH=src python3 benchmarks/experiments/indexer_hostile_probe.py spread 10
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from tests.kernels import test_indexer  # noqa: E402  (the test tree is on the path only from here)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in test_indexer.SELECT_PATHS or not argv[1].isdigit():
        print(f"usage: indexer_hostile_probe.py {{{'|'.join(test_indexer.SELECT_PATHS)}}} EXAMPLES", file=sys.stderr)
        return 2
    select, examples = argv[0], int(argv[1])
    failures = [0]
    seen = [0]

    def body(data: st.DataObject) -> None:
        p, topk, kwargs = data.draw(test_indexer.hostile_problems(select))
        seen[0] += 1
        b, s_q, h = p.q.shape[:3]
        print(
            f"case {seen[0]}: b={b} s_q={s_q} h={h} page={p.page} {p.layout} cache {tuple(p.cache.shape)} "
            f"{p.cache.dtype} n_comp={p.n_comp.tolist()} topk={topk} {kwargs}",
            flush=True,
        )
        t0 = time.perf_counter()
        try:
            test_indexer.check_hostile((p, topk, kwargs))
            result = "ok"
        except AssertionError as exc:
            failures[0] += 1
            result = f"FAIL {str(exc)[:300]}"
        print(f"  {time.perf_counter() - t0:.1f} s {result}", flush=True)

    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )(given(data=st.data())(body))
    run()
    print(f"{select}: {seen[0]} cases, {failures[0]} failed")
    return 1 if failures[0] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
