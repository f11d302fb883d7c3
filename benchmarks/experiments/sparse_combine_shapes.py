"""The sparse combine alone over its launch shapes, on cut tokens laid out as the split kernels leave them: ``T``
tokens of ``n`` tiles in workspace slots of ``U`` tiles (token ``t``'s pieces in slots ``t + (t·n)//U ..
t + ((t+1)·n - 1)//U``), 64 heads, fp16 partials, fp32 base-2 lse, random.

    PYTHONPATH=src python3 benchmarks/experiments/sparse_combine_shapes.py OUT.json

Cases: the spread partition's leftover tokens (``ws_spread.py``: L = 1..12 tokens of 10 one-tile pieces, whose
combine measured about 1.4 µs a token in the call), and the package's small-batch cuts (b = 1..8 tokens of 20 tiles
in one-tile slots). Every shape (heads and columns a program, warps) is timed with CUDA-graph replay, L2 flushed
before each replay, median of 30, and checked against the default shape (max abs difference of the outputs;
``dense_combine_shapes.run_checked``).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import torch
import triton

from wavemla.kernels.combine import sparse_decode_combine, wide_merge

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dense_combine_shapes import run_checked

H, D = 64, 512
CASES = [(1, 10, 1), (4, 10, 1), (8, 10, 1), (12, 10, 1), (16, 10, 2), (1, 20, 1), (8, 20, 1), (64, 10, 3)]
SHAPES = list(itertools.product((1, 2, 4, 8, 16), (64, 128, 256, 512), (4, 8)))  # block_h, block_d, warps
# the all-pieces merge holds [pieces, block_h, block_d] partials in registers: shapes past this many are left out
MAX_ELEMENTS = 16384


def main() -> int:
    torch.manual_seed(0)
    rows = []
    for t, n, u in CASES:
        slots = t + ((t * n) - 1) // u + 1
        o_ws = torch.randn(slots, H, D, device="cuda").to(torch.float16)
        lse_ws = torch.randn(slots, H, device="cuda") * 4
        ref = None
        pieces = triton.next_power_of_2((n + u - 2) // u + 1)
        for i, (bh, bd, w) in enumerate([(1, 128 if wide_merge(n, u) else D, 4), *SHAPES]):
            if not wide_merge(n, u) and bd != D:
                continue  # the loop over pieces takes every column in one program
            if wide_merge(n, u) and pieces * bh * bd > MAX_ELEMENTS:
                continue
            out = torch.zeros(t, 1, H, D, device="cuda", dtype=torch.bfloat16)
            lse = torch.zeros(t, 1, H, device="cuda")

            def call(out=out, lse=lse, bh=bh, bd=bd, w=w, o_ws=o_ws, lse_ws=lse_ws, n=n, u=u) -> None:
                sparse_decode_combine(out=out, lse=lse, o_ws=o_ws, lse_ws=lse_ws, attn_sink=None, n_tiles=n,
                                      units_per_part=u, block_h=bh, block_d=bd, num_warps=w, pdl=False)  # fmt: skip

            ref, diff, us = run_checked(call, out, ref)
            rows.append(dict(tokens=t, n_tiles=n, slot_units=u, wide=wide_merge(n, u), block_h=bh, block_d=bd,
                             warps=w, us=us, max_diff=diff, default=i == 0))  # fmt: skip
        case = [r for r in rows if (r["tokens"], r["n_tiles"], r["slot_units"]) == (t, n, u)]
        best = min(case, key=lambda r: r["us"])
        print(f"T={t:3d} n={n} U={u} wide={case[0]['wide']}: default {case[0]['us']:.1f} us; best "
              f"{best['block_h']}x{best['block_d']}x{best['warps']} {best['us']:.1f} us; max diff "
              f"{max(r['max_diff'] for r in case):.1e}", flush=True)  # fmt: skip
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
