"""Time the split kernel under chosen (tile, tiles-per-program) partitions, next to the planner's pick.

    PYTHONPATH=src python3 benchmarks/experiments/partition_sweep.py --mode csa hca --batch 80 96 \
        --specs default 64x64x8x1:7 64x32x8x1:13 default:launcher-q [--reps 20] [--json F]
    PYTHONPATH=src python3 benchmarks/experiments/partition_sweep.py --points csa:32:default csa:32:64x64x8x1:3 ...

A spec is ``default`` (the planner's plan) or ``BHxBNxWARPSxSTAGES:UPP`` (that tile with UPP tiles per program, costed
by ``plan.evaluate``); ``:launcher-q`` converts a bf16 q before the launch instead of through the kernel's scratch
rows; ``:no-pdl`` launches the combine without programmatic dependent launch; ``:loop-combine`` runs the previous
combine (a loop over pieces; ``benchmarks/experiments/variants/combine_loop.py``, written by ``materialize.sh``);
``:bd512`` gives each combine program all 512 columns of its head; ``:torch-q`` converts a bf16 q with torch before
the split kernel (no dependent launch of the split); ``:no-prefetch`` keeps the dependent launch behind the conversion
kernel without the first tile's L2 prefetch; ``:bi`` runs in batch-invariant mode, ``:splits=N`` with N pieces per
token (64x64 tiles pinned); ``:mdc=N`` merges cut tokens in the split kernel N columns at a time (0: all at once);
``default:warps=N`` runs the planner's tile and partition with N warps per program; ``:merge=on|off|auto`` sets
``WAVEMLA_SPARSE_WS_MERGE`` (tokens cut between the warp-specialized kernel's programs merged in it or by the combine).
Each spec is checked against the fp64 reference (GPU tolerances), then timed: CUDA-graph replay, L2 flushed, median.
DSV4 shapes: h=64, s_q=1, FP8 MODEL1, SWA 128 @ page 256 + CSA 512 @ page 64 or HCA 1024 @ page 2; a mode written
``hca-s2`` or ``csa-h128`` (in ``--mode`` or a point) runs two query tokens or 128 heads instead.
"""

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

import torch

import wavemla.api as api
import wavemla.kernels.combine as cb
import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.plan import KernelConfig, evaluate, plan
from wavemla.reference import sparse_decode_ref
from wavemla.testing import TOLERANCES, check_close
from wavemla.tools.bench import timings_us

sys.path.insert(0, str(Path(__file__).parent))
from merge_ab import decode_point

ap = argparse.ArgumentParser()
ap.add_argument("--mode", nargs="+", default=["csa"])
ap.add_argument("--batch", nargs="+", type=int, default=[])
ap.add_argument("--specs", nargs="+", default=["default"])
ap.add_argument("--points", nargs="+", default=[], help="MODE:B:SPEC items, instead of --mode x --batch x --specs")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--json", default=None)
args = ap.parse_args()

split = sd.sparse_decode_split
combine = cb.sparse_decode_combine
_loop = None


def loop_combine():
    """The combine before the one-load merge (a loop over pieces), from benchmarks/experiments/variants/."""
    global _loop
    if _loop is None:
        import importlib.util

        path = Path(__file__).parent / "variants" / "combine_loop.py"
        spec_ = importlib.util.spec_from_file_location("combine_loop", path)
        _loop = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(_loop)
    return _loop.sparse_decode_combine


records = []
groups: dict = {}
for m in args.mode:
    for b in args.batch:
        groups[(m, b)] = list(args.specs)
for item in args.points:
    m, b, spec = item.split(":", 2)
    groups.setdefault((m, int(b)), []).append(spec)
for (shape, b), specs in groups.items():
    shape_m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?", shape)
    if shape_m is None:
        sys.exit(f"mode {shape!r}: expected csa or hca, optionally with -sN (query tokens) and -hN (heads)")
    mode, s_q, heads = shape_m.group(1), int(shape_m.group(2) or 1), int(shape_m.group(3) or 64)
    kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=heads)
    rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
    for spec in specs:
        name, *opts = spec.split(":")
        launcher_q = "launcher-q" in opts
        upp = next((int(o) for o in opts if o.isdigit()), None)
        warps = next((int(o.split("=")[1]) for o in opts if o.startswith("warps=")), None)
        if name == "default" and warps is not None:
            # the planner's tile and partition with another warp count
            api.plan = lambda w, d, warps=warps: evaluate(
                w, d, dataclasses.replace(plan(w, d).config, num_warps=warps), plan(w, d).units_per_part
            )
        elif name == "default":
            api.plan = plan
        else:
            bh, bn, nw, ns = (int(x) for x in name.split("x"))
            cfg = KernelConfig(bh, bn, nw, ns)
            api.plan = lambda w, d, cfg=cfg, upp=upp: evaluate(w, d, cfg, upp)
        no_pdl = "no-pdl" in opts
        mdc = [int(o.split("=")[1]) for o in opts if o.startswith("mdc=")]  # the last one given wins
        extra = {
            **({"q_ws": None} if launcher_q else {}),
            **({"pdl": False} if no_pdl else {}),
            **({"prefetch_first": False} if "no-prefetch" in opts else {}),
            **({"merge_chunk": mdc[-1]} if mdc else {}),
        }
        torch_q = "torch-q" in opts

        def split_with(*, split=split, extra=extra, torch_q=torch_q, **k):
            if torch_q:
                k["q"] = k["q"].to(torch.float16)
            return split(**{**k, **extra})

        sd.sparse_decode_split = split_with
        splits = next((int(o.split("=")[1]) for o in opts if o.startswith("splits=")), None)
        knobs = dict(WAVEMLA_NUM_SPLITS=splits, WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64) if splits else {}
        merge = next((o.split("=")[1] for o in opts if o.startswith("merge=")), None)
        if merge is not None:
            knobs["WAVEMLA_SPARSE_WS_MERGE"] = merge
        call_kw = {**kw, **({"batch_invariant": True} if "bi" in opts else {})}
        base = loop_combine() if "loop-combine" in opts else combine
        cextra = {**({"pdl": False} if no_pdl else {}), **({"block_d": 512} if "bd512" in opts else {})}
        cb.sparse_decode_combine = (lambda base=base, cextra=cextra, **k: base(**{**k, **cextra})) if cextra else base
        try:
            with config.override(**knobs):
                meta, _ = get_mla_metadata()
                out, lse = sparse_mla_decode(**call_kw, metadata=meta)
            bad = check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]) or check_close(
                "lse", lse, ref_l, TOLERANCES[("lse", "gpu")]
            )
            med = timings_us(
                lambda call_kw=call_kw, meta=meta: sparse_mla_decode(**call_kw, metadata=meta),
                reps=args.reps,
                graph=True,
            )[1]
        except Exception as e:
            print(f"{shape} b={b:3d} {spec:24s} ERROR {str(e).splitlines()[0][:100]}", flush=True)
            continue
        p = meta.plan
        k = meta.split_kernel
        rec = dict(
            mode=mode,
            s_q=s_q,
            h_q=heads,
            batch=b,
            spec=spec,
            config=str(p.config),
            units_per_part=p.units_per_part,
            programs=p.programs,
            cut=p.needs_combine,
            merge_in_kernel=p.merge_in_kernel,
            ws_merge=p.ws_merge,
            kernel=k.name,
            median_us=med,
            predicted_us=p.predicted_us,
            regs=getattr(k, "n_regs", None),
            spills=getattr(k, "n_spills", None),
            ok=not bad,
        )
        records.append(rec)
        print(
            f"{shape} b={b:3d} {spec:24s} {p.config!s:10s} upp={p.units_per_part:3d} progs={p.programs:4d} "
            f"cut={'y' if p.needs_combine else 'n'}{'k' if p.ws_merge else ''} {med:7.1f} us  "
            f"pred {p.predicted_us:6.1f}  "
            f"spills={rec['spills']} {'ok' if not bad else 'MISMATCH ' + bad[:60]}",
            flush=True,
        )
    del kw, rest, ref_o, ref_l
    torch.cuda.empty_cache()
api.plan = plan
sd.sparse_decode_split = split
cb.sparse_decode_combine = combine
if args.json:
    with open(args.json, "w") as f:
        json.dump({"argv": sys.argv, "records": records}, f, indent=1)
