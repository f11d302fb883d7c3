"""A/B of one launcher option of the split kernel (a keyword of ``sparse_decode_split``) against the launcher's
default, at chosen shapes: same bits, and the time of each.

    PYTHONPATH=src python3 benchmarks/experiments/launch_ab.py OUT.json --kw l2_hints=1 --points csa:96:2:64 ...

A point is ``MODE:B:S_Q:H[:PIECES]`` (FP8 MODEL1; PIECES > 0: batch-invariant mode with that many pieces a token on
pinned 64x64 tiles, else the planner's default plan). ``--kw NAME=INT`` sets the option for the variant (``0``/``1``
for flags). Both runs use the same plan and inputs; the outputs and lse must be bitwise equal (the options compared
here change no arithmetic), and both are timed in alternation (CUDA-graph replay, L2 flushed; the lower of each
variant's per-round medians). The L2-policy round (``-l2-shapes.log``) ran this with ``--kw l2_hints=1``.
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
from merge_ab import alternate, decode_point, same_bits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--kw", nargs="+", default=["l2_hints=1"], help="NAME=INT options of the variant")
    ap.add_argument("--points", nargs="+", default=["csa:96:2:64", "csa:96:1:128"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    options = {k: int(v) for k, v in (kv.split("=") for kv in args.kw)}
    default = sd.sparse_decode_split
    variants = (("default", default), ("variant", functools.partial(default, **options)))
    records = []
    for item in args.points:
        mode, b, s_q, h, *rest = item.split(":")
        b, s_q, h, pieces = int(b), int(s_q), int(h), int(rest[0]) if rest else 0
        kw, knobs = decode_point(mode, b, pieces, seed=1, s_q=s_q, h=h)
        with config.override(**knobs):
            meta, _ = get_mla_metadata()
            res, times = alternate(variants, kw, meta, args.rounds, args.reps)
        same = same_bits(res["default"], res["variant"])
        (o_d, l_d), (o_v, l_v) = res["default"], res["variant"]
        # options that change the arithmetic: how far apart the two outputs are, against the output's size
        out_diff = ((o_d.float() - o_v.float()).abs().max() / o_d.float().abs().max().clamp_min(1e-30)).item()
        lse_diff = (l_d - l_v).abs().nan_to_num(0.0).max().item()
        t_def, t_var = min(times["default"]), min(times["variant"])
        p = meta.plan
        records.append(
            dict(
                mode=mode, batch=b, s_q=s_q, heads=h, pieces=pieces or None, options=options, config=str(p.config),
                programs=p.programs, units_per_part=p.units_per_part, default_us=t_def, variant_us=t_var,
                default_all=times["default"], variant_all=times["variant"], bit_identical=same,
                out_rel_diff=out_diff, lse_abs_diff=lse_diff,
            )
        )  # fmt: skip
        print(
            f"{mode} b={b:3d} s_q={s_q} h={h:3d} pieces={pieces or '-':>2} {p.config!s:10s} progs={p.programs:4d} "
            f"upp={p.units_per_part:3d}  default {t_def:7.1f}  {args.kw} {t_var:7.1f} us  ({t_var / t_def:.3f})"
            f"  bits {'same' if same else f'DIFFER (out {out_diff:.1e} of max, lse {lse_diff:.1e})'}",
            flush=True,
        )
        del kw, res
        torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
