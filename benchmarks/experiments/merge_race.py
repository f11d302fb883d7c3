"""Cut tokens merged inside the split kernel, checked against the fp64 reference many times over, for two builds of
the split kernel: an earlier one (``--old``, default ``variants/sd_e233f07.py``: the general merge, the counter read
back by every thread after a release increment) and this one (the two-piece merge, the merging program picked by the
count its increment returns). Run it plainly (``--reps 100``) and under ``compute-sanitizer --tool racecheck``
(``--reps 1``), which changes the timing. (On commit 0b6764d a third build, this kernel with the earlier counter
protocol, failed 3 of the 5 cases under racecheck: ``2026-12-01-h200-merge-race.log``.)

    bash benchmarks/experiments/materialize.sh    # here: writes variants/ (git-ignored; carry it to the GPU)
    PYTHONPATH=src python3 benchmarks/experiments/merge_race.py --reps 100

Cases: 16-head 64-row tiles (bf16 q, FP8 rows) with tokens cut by the planner at 4 and 11 program slots
and into 2 and 3 pieces, and 64x64 batch-invariant pieces (2 a token) at CSA b=8. Prints one line per (build, case):
calls, and how many had an output or lse outside the reference's tolerance (NaN included).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.reference import sparse_decode_ref
from wavemla.testing import TOLERANCES, check_close, make_sparse_decode_inputs
from wavemla.tools.bench import MODES

TILE16 = dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1)


def cases() -> list[tuple[str, dict, dict]]:
    small = dict(batch=3, s_q=2, h_q=16, topk=100, page=32, extra_topk=160, extra_page=16, fp8=True, device="cuda")
    topk, page, xtopk, xpage, xpool = MODES["csa"]
    bi = dict(batch=8, h_q=64, topk=topk, page=page, extra_topk=xtopk, extra_page=xpage, extra_pool=xpool, fp8=True,
              device="cuda")  # fmt: skip
    out = []
    for name, knobs in (("ctas4", dict(WAVEMLA_TARGET_CTAS=4)), ("ctas11", dict(WAVEMLA_TARGET_CTAS=11)),
                        ("splits2", dict(WAVEMLA_NUM_SPLITS=2)), ("splits3", dict(WAVEMLA_NUM_SPLITS=3))):  # fmt: skip
        out.append((name, make_sparse_decode_inputs(**small, dtype=torch.bfloat16, seed=4), {**TILE16, **knobs}))
    inputs = make_sparse_decode_inputs(**bi, dtype=torch.bfloat16, seed=1)
    out.append(("bi64x64", {**inputs, "batch_invariant": True},
                dict(WAVEMLA_NUM_SPLITS=2, WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64)))  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--old", default=str(Path(__file__).parent / "variants" / "sd_e233f07.py"))
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("sd_old", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    builds = (("old", old.sparse_decode_split), ("shipped", sd.sparse_decode_split))
    original = sd.sparse_decode_split
    bad_total = 0
    for case, inputs, knobs in cases():
        kw = {k: v for k, v in inputs.items() if v is not None}
        ref_kw = {k: kw.get(k) for k in ("topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length",
                                         "attn_sink", "softmax_scale")}  # fmt: skip
        ref_out, ref_lse = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **ref_kw)
        for name, split in builds:
            sd.sparse_decode_split = split
            bad = 0
            try:
                with config.override(**knobs):
                    meta, _ = get_mla_metadata()
                    for _ in range(args.reps):
                        out, lse = sparse_mla_decode(**kw, metadata=meta)
                        torch.cuda.synchronize()
                        if check_close("out", out, ref_out, TOLERANCES[("out", "gpu")]) or check_close(
                            "lse", lse, ref_lse, TOLERANCES[("lse", "gpu")]
                        ):
                            bad += 1
            finally:
                sd.sparse_decode_split = original
            p = meta.plan
            print(f"{case:8s} {name:15s} {p.config!s:10s} progs={p.programs:3d} upp={p.units_per_part:2d}: "
                  f"{args.reps} calls, {bad} outside the reference's tolerance", flush=True)  # fmt: skip
            bad_total += bad
    print(f"total calls outside tolerance: {bad_total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
