"""Which SM each program of one launch runs on, in launch order: how many distinct SMs the first programs of a launch
of more programs than SMs cover (the dense part floor left the first parts of a fixed launch working and the rest
empty, and measured slower than a launch of only those parts).

    PYTHONPATH=src python3 benchmarks/experiments/dispatch_order.py OUT.json [--programs 264 396] [--warps 4 8]

Each program reads ``%smid``, spins for 50 µs on ``%globaltimer`` (so every program of the launch is resident at
once) and writes its SM id. Printed per launch: distinct SMs among programs 0..S-1 (S = the SM count), the largest
number of those on one SM, and whether programs 2i and 2i+1 share an SM.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import torch
import triton
import triton.language as tl


@triton.jit
def _probe(p_out, p_dummy, SPIN_NS: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(p_dummy)
    smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)
    t = t0
    while t - t0 < SPIN_NS:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(p_out + pid, smid)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--programs", type=int, nargs="+", default=[264, 396])
    parser.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dummy = torch.zeros(1, dtype=torch.int32, device="cuda")
    rows = []
    for n in args.programs:
        for w in args.warps:
            out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
            _probe[(n,)](out, dummy, SPIN_NS=50_000, num_warps=w)
            torch.cuda.synchronize()
            ids = out.tolist()
            first = Counter(ids[:sms])
            pairs = sum(ids[2 * i] == ids[2 * i + 1] for i in range(n // 2))
            row = {
                "programs": n,
                "warps": w,
                "sms": sms,
                "first_wave_distinct_sms": len(first),
                "first_wave_most_on_one_sm": max(first.values()),
                "pairs_2i_2i1_same_sm": pairs,
                "smid": ids,
            }
            rows.append(row)
            print(
                f"programs={n} warps={w}: programs 0..{sms - 1} on {len(first)} SMs (at most "
                f"{max(first.values())} on one); 2i/2i+1 on one SM: {pairs} of {n // 2}; first 16: {ids[:16]}"
            )
    with open(args.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "rows": rows}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
