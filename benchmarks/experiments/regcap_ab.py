"""Occupancy by a register cap: the sparse split kernel compiled with ``maxnreg`` (PTX ``.maxnreg``) so that more
programs fit an SM, and the planner given that many program slots (``WAVEMLA_TARGET_CTAS``), against the default
(registers uncapped, the planner's own slots).

    PYTHONPATH=src python3 benchmarks/experiments/regcap_ab.py OUT.json --points csa:128:1:16 ...
        [--variants 168:3 128:4]

A point is ``MODE:B:S_Q:H`` (FP8 MODEL1 inputs); a variant is ``MAXNREG:PROGRAMS_PER_SM``. Each variant's output
is checked against the fp64 reference tolerance of the default (max |diff| printed; a different partition changes
the bits, not the result), and every variant is timed in alternation (CUDA-graph replay, L2 flushed; the lower of
the per-round medians). Needs the split launcher's ``maxnreg`` keyword, which only commit d45d4ef has (removed after
this measurement: every cap was slower, ``benchmarks/results/2026-12-01-h200-regcap.log``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata, sparse_mla_decode

sys.path.insert(0, str(Path(__file__).parent))
from merge_ab import decode_point, time_call


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--points", nargs="+", default=["csa:128:1:16", "csa:256:1:16", "hca:128:1:16"])
    ap.add_argument("--variants", nargs="+", default=["168:3", "128:4"])
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    records = []
    original = sd.sparse_decode_split
    for item in args.points:
        mode, b, s_q, h = item.split(":")
        kw, _ = decode_point(mode, int(b), None, seed=1, s_q=int(s_q), h=int(h))
        runs: list[tuple[str, int | None, dict[str, int]]] = [("default", None, {})]
        for v in args.variants:
            m, k = (int(x) for x in v.split(":"))
            runs.append((f"maxnreg={m},{k}/SM", m, {"WAVEMLA_TARGET_CTAS": k * args.sms}))
        times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        info: dict[str, dict[str, object]] = {}
        ref = None
        try:
            for _ in range(args.rounds):
                for name, maxnreg, knobs in runs:
                    sd.sparse_decode_split = functools.partial(original, maxnreg=maxnreg) if maxnreg else original
                    with config.override(**knobs):
                        meta, _ = get_mla_metadata()
                        o, _lse = sparse_mla_decode(**kw, metadata=meta)
                        if ref is None:
                            ref = o.float().clone()
                        diff = (o.float() - ref).abs().max().item()
                        p = meta.plan
                        info[name] = dict(config=str(p.config), programs=p.programs, max_abs_diff=diff)
                        times[name].append(time_call(kw, meta, args.reps))
        finally:
            sd.sparse_decode_split = original
        base = min(times["default"])
        for name, _, _ in runs:
            t = min(times[name])
            rec = dict(point=item, variant=name, us=t, ratio=t / base, all=times[name], **info[name])
            records.append(rec)
            print(
                f"{item:14s} {name:18s} {info[name]['config']!s:10s} progs={info[name]['programs']:4d} "
                f"{t:7.1f} us ({t / base:.3f})  max|diff| {info[name]['max_abs_diff']:.2e}",
                flush=True,
            )
        del kw
        torch.cuda.empty_cache()
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
