"""Cost of batch-invariant mode on the GPU: sparse decode at DSV4 shapes, default plan vs ``batch_invariant=True``.

Both runs time the same inputs (CUDA-graph replay, L2 flushed, median of ``--reps``); the JSON holds one record per
(mode, batch) with both medians and their ratio.

    PYTHONPATH=src python3 benchmarks/bi_cost.py --batch 1 32 64 128 256 --json bi_cost.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import torch

import wavemla
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.bench import MODES, environment, timings_us


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", nargs="+", default=["csa", "hca"], choices=sorted(MODES))
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 32, 64, 128, 256])
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    records = []
    print(f"{'mode':5s} {'b':>4s} {'default us':>11s} {'invariant us':>13s} {'ratio':>6s}")
    for mode in args.mode:
        topk, page, extra_topk, extra_page, extra_pool = MODES[mode]
        for b in args.batch:
            inputs = make_sparse_decode_inputs(
                batch=b, h_q=args.heads, topk=topk, page=page, extra_topk=extra_topk, extra_page=extra_page,
                extra_pool=extra_pool or None, fp8=True, device="cuda",
            )  # fmt: skip
            kw = {k: v for k, v in inputs.items() if v is not None}
            times = {}
            for invariant in (False, True):
                meta, _ = wavemla.get_mla_metadata()
                wavemla.sparse_mla_decode(**kw, metadata=meta, batch_invariant=invariant)
                call = functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta, batch_invariant=invariant)
                times[invariant] = timings_us(call, reps=args.reps, graph=True)[1]
            ratio = times[True] / times[False]
            records.append({"mode": mode, "batch": b, "heads": args.heads, "default_us": times[False],
                            "invariant_us": times[True], "ratio": ratio})  # fmt: skip
            print(f"{mode:5s} {b:4d} {times[False]:11.1f} {times[True]:13.1f} {ratio:6.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    sys.exit(main())
