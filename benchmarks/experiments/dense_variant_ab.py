"""A/B of options of the dense split kernel (:func:`wavemla.kernels.dense_decode.dense_decode_split` keywords) at
DeepSeek-V3 shapes: same plan and inputs, the variants timed in alternation, outputs compared with the first.

    PYTHONPATH=src python3 benchmarks/experiments/dense_variant_ab.py OUT.json --variants l2_ahead=0 l2_ahead=2 \\
        --points bf16:64:128:4096 fp8:64:128:4096

A variant is ``KEY=INT[,KEY=INT...]`` (``-`` for the defaults; ``warps``, ``stages``, ``bn`` and ``bh`` set the knobs
WAVEMLA_NUM_WARPS, WAVEMLA_NUM_STAGES, WAVEMLA_BLOCK_N and WAVEMLA_BLOCK_H, so the planner re-plans with that tile);
a point ``FORMAT:H:B:S_K`` (uniform lengths, page
64, s_q 1, the planner's pick). CUDA-graph replay, L2 flushed before each replay; the lower of each variant's
per-round medians, with the copy bandwidth measured in the same process. Reported per variant: µs, ratio to the
first, % of copy, and whether out and lse are bit-identical to the first's (else the largest |Δout| / max |out|).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import torch

import wavemla.kernels.dense_decode as dd
from wavemla import config, dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, dense_traffic, measure_ceilings

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import graph_median_us, pct_copy, write_results

BASE = dd.dense_decode_split


KNOBS = {"warps": "WAVEMLA_NUM_WARPS", "stages": "WAVEMLA_NUM_STAGES", "bn": "WAVEMLA_BLOCK_N", "bh": "WAVEMLA_BLOCK_H"}


def parse_variant(v: str) -> tuple[dict[str, int], dict[str, int]]:
    """(launcher keywords, knobs) of a variant."""
    kv = {} if v == "-" else {k: int(x) for k, x in (kv.split("=") for kv in v.split(","))}
    return {k: x for k, x in kv.items() if k not in KNOBS}, {KNOBS[k]: x for k, x in kv.items() if k in KNOBS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:64:128:4096"])
    ap.add_argument("--variants", nargs="+", default=["-", "l2_ahead=2"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    records = []
    for item in args.points:
        fmt, h, b, s_k = item.split(":")
        h, b, s_k = int(h), int(b), int(s_k)
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, h_q=h, page=DENSE_PAGE, fp8=fmt == "fp8", device="cuda")
        metas = {}
        for v in args.variants:
            with config.override(**parse_variant(v)[1]):
                metas[v] = get_mla_metadata()[0]
                dense_mla_decode(**inputs, metadata=metas[v])
        meta = metas[args.variants[0]]
        times: dict[str, list[float]] = {v: [] for v in args.variants}
        outs = {}
        for _ in range(args.rounds):
            for v in args.variants:
                kw, knobs = parse_variant(v)
                dd.dense_decode_split = functools.partial(BASE, **kw)
                with config.override(**knobs):
                    o, lse = dense_mla_decode(**inputs, metadata=metas[v])
                    outs[v] = (o.float(), lse.clone())
                    fn = lambda inputs=inputs, m=metas[v]: dense_mla_decode(**inputs, metadata=m)  # noqa: E731
                    times[v].append(graph_median_us(fn, args.reps))
        dd.dense_decode_split = BASE
        ref_o, ref_l = outs[args.variants[0]]
        diff = {}
        for v, (o, lse) in outs.items():
            same = bool(torch.equal(o, ref_o) and torch.equal(lse, ref_l))
            diff[v] = 0.0 if same else ((o - ref_o).abs().max() / ref_o.abs().max().clamp_min(1e-30)).item()
        _, nbytes = dense_traffic([s_k] * b, 1, h, 576, fmt == "fp8", DENSE_PAGE)
        best = {v: min(t) for v, t in times.items()}
        p = meta.dense_plan
        assert p is not None
        plans = {v: f"{m.dense_plan.config} parts={m.dense_plan.num_parts}" for v, m in metas.items() if m.dense_plan}
        rec = dict(kv_format=fmt, heads=h, batch=b, s_k=s_k, config=str(p.config), parts=p.num_parts, plans=plans,
                   us=best,
                   all=times, pct_copy={v: pct_copy(nbytes, best[v], ceil) for v in args.variants},
                   rel_diff_to_first=diff)  # fmt: skip
        records.append(rec)
        t0 = best[args.variants[0]]
        cells = "  ".join(
            f"{v}: {best[v]:7.1f} ({best[v] / t0:.3f}, {rec['pct_copy'][v]:.1f}%"
            f"{', bits equal' if diff[v] == 0 else f', diff {diff[v]:.1e}'}"
            f"{'' if not parse_variant(v)[1] else ', ' + plans[v]})"
            for v in args.variants
        )
        print(
            f"dense {fmt:4s} h{h:<4d} b{b:<4d} sk{s_k:<6d} {p.config!s:10s} parts={p.num_parts:<4d}", cells, flush=True
        )
        del inputs, meta, metas, outs
        torch.cuda.empty_cache()
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    # launch replays off: a call would replay the launches its metadata recorded first, not the swapped launcher's
    with config.override(WAVEMLA_LAUNCH="triton"):
        main()
