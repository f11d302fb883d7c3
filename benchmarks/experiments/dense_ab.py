"""What the dense-decode A/B scripts (``dense_pdl_ab.py``, ``dense_pws_ab.py``, ``dense_fp8_km_ab.py``) share: a
call's median µs from CUDA-graph replay with L2 flushed, its share of the copy bandwidth, and the JSON they write."""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from wavemla.tools.bench import Ceilings, environment, measure_ceilings, timing_samples_us


def parse_and_measure(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, Ceilings]:
    """Add ``--reps`` (replays per median) and ``--rounds`` (alternating rounds per variant) to ``ap``, parse the
    command line, and measure (and print) the copy ceiling of this process."""
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    return args, ceil


def parse_point(item: str) -> tuple[str, int, int, int, int]:
    """``FORMAT:H:B:S_K[:S_Q]`` -> (format, heads, batch, s_k, s_q)."""
    fmt, h, b, s_k, *rest = item.split(":")
    return fmt, int(h), int(b), int(s_k), int(rest[0]) if rest else 1


def graph_median_us(fn: Any, reps: int) -> float:
    """Median µs of ``fn`` replayed ``reps`` times from a CUDA graph, L2 flushed before each replay."""
    return statistics.median(timing_samples_us(fn, reps, graph=True))


def pct_copy(nbytes: float, us: float, ceil: Ceilings) -> float:
    """``nbytes`` moved in ``us`` as a percentage of the measured copy bandwidth."""
    return 100 * nbytes / (us * 1e-6) / (ceil.copy_gbps * 1e9)


def write_results(path: str | None, ceil: Ceilings, records: list[dict]) -> None:
    """The run's environment, copy ceiling and records as JSON at ``path`` (nothing when None)."""
    if path:
        with open(path, "w") as f:
            json.dump({"environment": environment(), "copy_gbps": ceil.copy_gbps, "records": records}, f, indent=1)
