"""Kernel variant diagnostics on a GPU: resources (regs/spills/smem) and median time per variant x config."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "variants"))  # see materialize.sh
import sd_v0
import sd_v2
import sd_v3
import sd_v3f
import torch

import wavemla
import wavemla.kernels.sparse_decode as main_mod
from wavemla import config
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.bench import timings_us

VARIANTS = {
    "v0": (sd_v0, 1),
    "v1": (main_mod, 1),
    "v2": (sd_v2, 1),
    "v2ns2": (sd_v2, 2),
    "v2ns3": (sd_v2, 3),
    "v3": (sd_v3, 1),
    "v3f": (sd_v3f, 1),
    "v5": (main_mod, 1),
    "v3ns2": (sd_v3, 2),
}
orig = main_mod.sparse_decode_split


def run(variant, cfg, inputs, reps=20, time_it=True):
    mod, ns = VARIANTS[variant]
    main_mod.sparse_decode_split = mod.sparse_decode_split
    bh, bn, nw = (int(x) for x in cfg.split("x"))
    kw = {k: v for k, v in inputs.items() if v is not None}
    with config.override(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw, WAVEMLA_NUM_STAGES=ns):
        meta, _ = wavemla.get_mla_metadata()
        t0 = time.time()
        wavemla.sparse_mla_decode(**kw, metadata=meta)
        torch.cuda.synchronize()
        ct = time.time() - t0
        k = meta.split_kernel
        res = (
            f"regs={getattr(k, 'n_regs', None)} spills={getattr(k, 'n_spills', None)} "
            f"smem={k.metadata.shared if k else None}"
        )
        med = (
            timings_us(lambda: wavemla.sparse_mla_decode(**kw, metadata=meta), reps=reps, graph=True)[1]
            if time_it
            else 0
        )
    main_mod.sparse_decode_split = orig
    p = meta.plan
    print(
        f"{variant:6s} {cfg:8s} {res:34s} upp={p.units_per_part:<3d} progs={p.programs:<4d} {med:8.1f} us  "
        f"(first call {ct:.1f}s)",
        flush=True,
    )
    return med


PLAN_FP8 = [
    ("v3", "64x32x16"),
    ("v3", "64x16x8"),
    ("v3", "64x64x16"),
    ("v3ns2", "64x32x8"),
    ("v3", "32x32x8"),
    ("v2", "64x32x16"),
]
PLAN_BF16 = [("v2ns2", "64x32x16"), ("v2ns2", "64x64x16"), ("v2ns2", "64x64x8")]

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "single":
        variant, cfg, b = sys.argv[2], sys.argv[3], int(sys.argv[4])
        inputs = make_sparse_decode_inputs(
            batch=b, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048, fp8=True, device="cuda"
        )
        run(variant, cfg, inputs, reps=3)
        sys.exit(0)
    b = int(sys.argv[2])
    if len(sys.argv) > 3:
        PLAN_FP8 = [tuple(x.split(":")) for x in sys.argv[3].split(",")]
        PLAN_BF16 = [tuple(x.split(":")) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else []
    for fp8 in (True, False):
        if not (PLAN_FP8 if fp8 else PLAN_BF16):
            continue
        inputs = make_sparse_decode_inputs(
            batch=b, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048, fp8=fp8, device="cuda"
        )
        print(f"== CSA b={b} h=64 {'fp8' if fp8 else 'bf16 rows'}", flush=True)
        plan = PLAN_FP8 if fp8 else PLAN_BF16
        for variant, cfg in plan:
            try:
                run(variant, cfg, inputs)
            except Exception as e:
                print(variant, cfg, "ERROR", str(e).splitlines()[-1][:200], flush=True)
