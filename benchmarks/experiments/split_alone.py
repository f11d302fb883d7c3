"""Where a cut plan's time goes between its two launches: each point's whole call, the call with the combine
replaced by nothing (the split kernel alone; outputs not checked), and the call with both launches made without
programmatic dependent launch (checked against the fp64 reference). CUDA-graph replay, L2 flushed, median.

    PYTHONPATH=src python3 benchmarks/experiments/split_alone.py --points csa-h16:21:16x32x4x3:2 ... [--reps 15]
        [--json F]

A point is ``MODE[-sN][-hN]:B:SPEC`` as in ``partition_sweep.py`` (SPEC ``default`` or ``BHxBNxWARPSxSTAGES:UPP``).
"""

import argparse
import json
import re
import sys
from pathlib import Path

import wavemla.api as api
import wavemla.kernels.combine as cb
import wavemla.kernels.sparse_decode as sd
from wavemla import get_mla_metadata, sparse_mla_decode
from wavemla.plan import KernelConfig, clear_caches, evaluate, plan
from wavemla.reference import sparse_decode_ref
from wavemla.testing import TOLERANCES, check_close
from wavemla.tools.bench import timings_us

sys.path.insert(0, str(Path(__file__).parent))
from merge_ab import decode_point

ap = argparse.ArgumentParser()
ap.add_argument("--points", nargs="+", required=True)
ap.add_argument("--reps", type=int, default=15)
ap.add_argument("--json", default=None)
args = ap.parse_args()

split, combine = sd.sparse_decode_split, cb.sparse_decode_combine
records = []
for item in args.points:
    shape, b, spec = item.split(":", 2)
    m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?", shape)
    if m is None:
        sys.exit(f"point {item!r}: expected MODE[-sN][-hN]:B:SPEC")
    kw, _ = decode_point(m.group(1), int(b), 0, seed=0, s_q=int(m.group(2) or 1), h=int(m.group(3) or 64))
    if spec == "default":
        api.plan = plan
    else:
        name, upp = spec.split(":")
        cfg = KernelConfig(*(int(x) for x in name.split("x")))
        api.plan = lambda w, d, cfg=cfg, upp=int(upp): evaluate(w, d, cfg, upp)
    clear_caches()  # the API replays the launches it recorded for a signature: make it plan again
    rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
    times = {}
    for mode in ("call", "split_alone", "no_pdl"):
        sd.sparse_decode_split = split if mode != "no_pdl" else (lambda **k: split(**{**k, "pdl": False}))
        cb.sparse_decode_combine = {
            "call": combine,
            "split_alone": lambda **k: None,
            "no_pdl": lambda **k: combine(**{**k, "pdl": False}),
        }[mode]
        meta, _ = get_mla_metadata()
        out, lse = sparse_mla_decode(**kw, metadata=meta)
        if mode != "split_alone":
            bad = check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]) or check_close(
                "lse", lse, ref_l, TOLERANCES[("lse", "gpu")]
            )
            if bad:
                print(f"{item} {mode} MISMATCH {bad}", flush=True)
        times[mode] = timings_us(
            lambda meta=meta, kw=kw: sparse_mla_decode(**kw, metadata=meta), reps=args.reps, graph=True
        )[1]
    sd.sparse_decode_split, cb.sparse_decode_combine = split, combine
    p = meta.plan
    print(
        f"{item:34s} {p.config!s:10s} upp={p.units_per_part:3d} progs={p.programs:4d} call {times['call']:6.1f} "
        f"split alone {times['split_alone']:6.1f} no-pdl {times['no_pdl']:6.1f} pred {p.predicted_us:6.1f}",
        flush=True,
    )
    records.append(dict(point=item, config=str(p.config), upp=p.units_per_part, programs=p.programs,
                        predicted_us=p.predicted_us, **{f"{k}_us": v for k, v in times.items()}))  # fmt: skip
if args.json:
    Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))
