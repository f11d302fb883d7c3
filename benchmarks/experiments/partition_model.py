"""The sm_90 cost model against measured partitions, shared by fit_sm90.py and fit_merge.py: a measured record's
workload and predicted time, and the pairs of partitions of one batch that the model ranks the wrong way round.

A record is a ``partition_sweep.py`` or ``wavemla bench`` row: mode, batch, config (``BHxBNxWARPSxSTAGES``),
units_per_part, median_us, and optionally h_q and s_q (default 64 and 1)."""

import itertools
from collections.abc import Callable, Iterable

import wavemla.plan as pl
from wavemla.device import get_spec
from wavemla.tools.bench import MODES

DEVICE = get_spec("h200")


def workload(r: dict, batch: int | None = None) -> pl.Workload:
    """The DSV4 FP8 workload of record ``r`` (at ``batch`` if given)."""
    topk, _, xtopk, _, _ = MODES[r["mode"]]
    return pl.Workload(
        batch=r["batch"] if batch is None else batch, s_q=r.get("s_q", 1), h_q=r.get("h_q", 64), topk=topk,
        extra_topk=xtopk, is_fp8=True,
    )  # fmt: skip


def cfg_of(r: dict) -> pl.KernelConfig:
    return pl.KernelConfig(*(int(x) for x in r["config"].split("x")))


def predict(r: dict) -> float:
    """The model's time for the record's configuration and partition on the H200."""
    return pl.evaluate(workload(r), DEVICE, cfg_of(r), r["units_per_part"]).predicted_us


def misranked(
    groups: Iterable[list[dict]], predict: Callable[[dict], float] = predict, margin: float = 0.03
) -> tuple[int, list[tuple[dict, dict]]]:
    """(pairs measured more than ``margin`` apart within a group, those ``predict`` ranks the other way round)."""
    total, wrong = 0, []
    for rs in groups:
        for a, b in itertools.combinations(rs, 2):
            if abs(a["median_us"] / b["median_us"] - 1) <= margin:
                continue
            total += 1
            if (a["median_us"] < b["median_us"]) != (predict(a) < predict(b)):
                wrong.append((a, b))
    return total, wrong
