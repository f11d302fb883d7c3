"""The split kernel's next-tile row gather, three ways, on the same plan: raw rows into registers during a tile (the
package's default for FP8 tiles of at most 32 rows), into L2 only (``prefetch_rows=False, prefetch_l2=True``: no
registers held, the next tile's loads then hit L2) and not at all.

    PYTHONPATH=src python3 benchmarks/experiments/prefetch_rows_ab.py OUT.json --points csa:8 hca-h16:32 ... \
        [--tile 16x32x4x1] [--reps 15] [--rounds 2]

A point is ``MODE[-sN][-hN]:B`` (FP8 MODEL1 inputs, 64 heads unless given). ``--tile`` pins the tile by the knobs
(default: the planner's pick); knobs in the environment (``WAVEMLA_TARGET_CTAS``, ``TRITON_OVERRIDE_ARCH``) apply
to all. Launch replays are off (``WAVEMLA_LAUNCH=triton``), so that each variant's launcher builds its own launch.
Whether each variant's outputs equal the default's bits is recorded (on an H100 they did not: the loops compile
differently); the variants are timed in alternation (CUDA-graph replay, L2 flushed; the lower of each one's
per-round medians). Needs the split launcher's ``prefetch_rows`` keyword, which only commit 0cdadc5 has (removed
after this measurement: the default, rows into registers, was the fastest everywhere,
``benchmarks/results/2026-12-06-h100-prefetch-rows-0cdadc5.log``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata

sys.path.insert(0, str(Path(__file__).parent))
from merge_ab import alternate, decode_point, parse_point


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--points", nargs="+", default=["csa:8", "csa:64", "hca:32"])
    ap.add_argument("--tile", default=None, help="BHxBNxWARPSxSTAGES pinned by the tile knobs")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    knobs: dict[str, object] = {"WAVEMLA_LAUNCH": "triton"}
    if args.tile:
        bh, bn, nw, ns = (int(x) for x in args.tile.split("x"))
        knobs.update(WAVEMLA_BLOCK_H=bh, WAVEMLA_BLOCK_N=bn, WAVEMLA_NUM_WARPS=nw, WAVEMLA_NUM_STAGES=ns)
    original = sd.sparse_decode_split
    variants = (
        ("rows", original),
        ("l2", functools.partial(original, prefetch_rows=False, prefetch_l2=True)),
        ("none", functools.partial(original, prefetch_rows=False, prefetch_l2=False)),
    )
    records = []
    for item in args.points:
        mode, s_q, h, b = parse_point(item)
        kw, _ = decode_point(mode, b, None, seed=1, s_q=s_q, h=h)
        with config.override(**knobs):
            meta, _ = get_mla_metadata()
            res, times = alternate(variants, kw, meta, args.rounds, args.reps)
        p = meta.plan
        assert p is not None
        o0, l0 = res["rows"]
        base = min(times["rows"])
        for name, _ in variants:
            o, lse = res[name]
            same = bool(torch.equal(o, o0) and torch.equal(lse, l0))
            t = min(times[name])
            rec = dict(point=item, variant=name, config=str(p.config), programs=p.programs, us=t, ratio=t / base,
                       all=times[name], same_bits=same)  # fmt: skip
            records.append(rec)
            print(f"{item:14s} {name:5s} {rec['config']:10s} progs={p.programs:4d} {t:7.1f} us ({t / base:.3f}) "
                  f"same bits {same}", flush=True)  # fmt: skip
        del kw
        torch.cuda.empty_cache()
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "knobs": knobs, "records": records}, indent=1))


if __name__ == "__main__":
    main()
