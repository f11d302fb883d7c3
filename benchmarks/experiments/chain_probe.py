"""Where a chained plan's time goes, on this GPU: the chain build of the warp-specialized kernel run on a plan that
cuts no token (its build's cost alone) against the default build on the same plan, and chained against unchained
plans at the same batch. Each call checked against the fp64 reference, then timed in alternated rounds (CUDA-graph
replay, L2 flushed, the benchmarks' warm-up, median of ``--reps`` per round).

    PYTHONPATH=src python3 benchmarks/experiments/chain_probe.py OUT.json [--rounds 3] [--reps 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--points", nargs="+", default=["csa:132", "hca:132", "csa-h128:66"])
    args = ap.parse_args()

    sys.path.insert(0, str(HERE))
    from spread_ab import alternated_medians, checked_runs, parse_point

    def forced_chain(self: Any, upp: int) -> Any:  # the chain build even where no token is cut
        if upp % self.n_tiles or upp < self.n_tiles:
            return None
        s = self._ws(upp, None, -(-self.total // upp), 1, 1, self.tiles[1], chain=True)
        return dataclasses.replace(s, chained=True, predicted_us=s.predicted_us - 5.0)

    records = []
    for point in args.points:
        mode, s_q, h, b = parse_point(point)
        cases = [("default", b, {}), ("chain-build", b, {"chained": forced_chain})]
        runs = checked_runs(point, mode, s_q, h, cases)
        assert runs["chain-build"][1].plan.chained and runs["chain-build"][1].chain_ws is not None
        times, med = alternated_medians({k: v[:2] for k, v in runs.items()}, args.rounds, args.reps)
        print(f"{point:12s} default build {med['default']:7.1f}  chain build {med['chain-build']:7.1f} us "
              f"(same plan, no token cut): {med['chain-build'] / med['default']:.3f}", flush=True)  # fmt: skip
        records.append(dict(point=point, median_us=med, rounds=times))
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
