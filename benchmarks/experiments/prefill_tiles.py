"""Sparse prefill tiles beyond the planner's list, timed on the benchmark's cases (each output checked first).

python3 benchmarks/experiments/prefill_tiles.py OUT.json --cases dsv4-h64 v32-h128 --tiles 64x64x8x2 64x64x8x3
"""

import argparse
import dataclasses
import json

import torch

from wavemla.device import current_spec
from wavemla.kernels.sparse_prefill import sparse_prefill
from wavemla.plan import KernelConfig, PrefillWorkload, plan_sparse_prefill
from wavemla.tools.bench import environment, timings_us
from wavemla.tools.bench_prefill import CASES, _check, make_inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cases", nargs="+", default=["dsv4-h64", "dsv4-h128", "v32-h128"])
    ap.add_argument("--tiles", nargs="+", required=True, help="BLOCK_HxBLOCK_NxWARPSxSTAGES")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    spec = current_spec()
    rows = []
    for name in args.cases:
        case = CASES[name]
        x = make_inputs(case)
        base = plan_sparse_prefill(PrefillWorkload(case.s_q, case.h_q, case.topk, case.d_qk), spec)
        for tile in args.tiles:
            cfg = KernelConfig(*(int(v) for v in tile.split("x")))
            p = dataclasses.replace(base, config=cfg)

            def fn(p=p, x=x):
                return sparse_prefill(x["q"], x["kv"], x["indices"], x["sm_scale"], p, x["attn_sink"],
                                      x["topk_length"])[0]  # fmt: skip

            try:
                err = _check(f"{name} {tile}", fn(), x)
                _, med, _ = timings_us(fn, args.reps, flush=True, graph=True)
            except Exception as e:  # a tile that does not compile or fit: recorded, not fatal
                print(f"{name:14s} {tile:12s} failed: {str(e)[:160]}", flush=True)
                rows.append({"case": name, "tile": tile, "error": str(e)[:400]})
                continue
            tflops = case.flops / med / 1e6
            rows.append({"case": name, "tile": tile, "median_us": med, "tflops": tflops, "max_err": err,
                         "planned": str(base.config)})  # fmt: skip
            print(f"{name:14s} {tile:12s} {med:9.1f} us {tflops:6.1f} TFLOP/s err {err:.2g}", flush=True)
        del x
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"environment": environment(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
