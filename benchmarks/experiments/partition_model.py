"""The sm_90 cost model against measured partitions, shared by fit_sm90.py and fit_merge.py: a measured record's
workload and predicted time, and the pairs of partitions of one batch that the model ranks the wrong way round.

A record is a ``partition_sweep.py`` or ``wavemla bench`` row: mode, batch, config (``BHxBNxWARPSxSTAGES``),
units_per_part, median_us, and optionally h_q and s_q (default 64 and 1). ``score`` rates the planner as it stands
against groups of measured partitions of one shape and batch (``load_groups``)."""

import itertools
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

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


def print_misranked(records: Iterable[dict]) -> None:
    """Print the pairs of measured partitions of one (shape, batch), more than 3% apart, that the model ranks the
    wrong way round, then how many of how many."""
    groups: dict[tuple[str, int, int, int], list[dict]] = {}
    for r in records:
        groups.setdefault((r["mode"], r.get("h_q", 64), r.get("s_q", 1), r["batch"]), []).append(r)
    total, wrong = misranked(rs for _, rs in sorted(groups.items()))
    for a, b in wrong:
        print(
            f"misranked {a['mode']} h={a.get('h_q', 64)} s_q={a.get('s_q', 1)} b={a['batch']}:"
            f" {a['config']}:{a['units_per_part']} {a['median_us']:.1f} (pred {predict(a):.1f})"
            f" vs {b['config']}:{b['units_per_part']} {b['median_us']:.1f} (pred {predict(b):.1f})"
        )
    print(f"pairs >3% apart ranked wrong: {len(wrong)} of {total}")


Group = tuple[str, int, int, int]  # (mode, s_q, h_q, batch)


def load_groups(paths: Iterable[str]) -> dict[Group, list[dict]]:
    """The checked records of ``partition_sweep.py`` JSON files, grouped by shape and batch (files in order)."""
    groups: dict[Group, list[dict]] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text())["records"]:
            if r["ok"]:
                groups.setdefault((r["mode"], r.get("s_q", 1), r.get("h_q", 64), r["batch"]), []).append(r)
    return groups


def _label(r: dict) -> str:
    shape = (
        r["mode"]
        + (f" s_q={r['s_q']}" if r.get("s_q", 1) != 1 else "")
        + (f" h={r['h_q']}" if r.get("h_q", 64) != 64 else "")
    )
    return f"{shape} b={r['batch']}"


def score(groups: dict[Group, list[dict]]) -> tuple[int, float, int, int, float, list[str]]:
    """(unmeasured picks, regret, pairs ranked wrong, pairs, rms log error of 64-row points, notes) of the planner
    as it stands: the regret sums pick / fastest - 1 over the groups whose pick was measured."""
    unmeasured, regret, notes = 0, 0.0, []
    for _, rs in sorted(groups.items()):
        p = pl.plan(workload(rs[0]), DEVICE)
        pick = next((r for r in rs if (r["config"], r["units_per_part"]) == (str(p.config), p.units_per_part)), None)
        best = min(r["median_us"] for r in rs)
        if pick is None:
            unmeasured += 1
            notes.append(f"{_label(rs[0])}: pick {p.config}:{p.units_per_part} not measured (fastest {best:.1f})")
        else:
            regret += pick["median_us"] / best - 1
            notes.append(
                f"{_label(rs[0])}: pick {p.config}:{p.units_per_part} {pick['median_us']:.1f}, best {best:.1f}"
            )
    total, pairs = misranked(groups.values())
    for a, b in pairs:
        notes.append(
            f"misranked {_label(a)}: {a['config']}:{a['units_per_part']} {a['median_us']:.1f}"
            f" (pred {predict(a):.1f}) vs {b['config']}:{b['units_per_part']} {b['median_us']:.1f} (pred"
            f" {predict(b):.1f})"
        )
    rows = [r for rs in groups.values() for r in rs if r["config"].split("x")[1] == "64"]
    rms = math.sqrt(sum(math.log(predict(r) / r["median_us"]) ** 2 for r in rows) / max(1, len(rows)))
    return unmeasured, regret, len(pairs), total, rms, notes
