"""A/B of the dense decode's keys-major tiles with Pᵀ through scratch rows (the launcher's default on sm_90) against
P kept in registers, at DeepSeek-V3 shapes: same plan and inputs, both timed in alternation.

    PYTHONPATH=src python3 benchmarks/experiments/dense_pws_ab.py OUT.json --points bf16:64:128:4096 bf16:128:32:16384

A point is ``FORMAT:H:B:S_K[:S_Q]`` (bf16 rows, uniform lengths, page 64, the planner's pick; causal when s_q > 1).
The variant in registers is the same metadata with its ``p_ws`` removed. Outputs differ by the order in which the
two dots of Sᵀ are summed: the largest difference relative to the output's largest value is reported. CUDA-graph
replay, L2 flushed before each replay; the lower of each variant's per-round medians, with the copy bandwidth
measured in the same process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from wavemla import dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, dense_traffic, measure_ceilings

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import graph_median_us, pct_copy, write_results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:64:128:4096"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    records = []
    for item in args.points:
        fmt, h, b, s_k, *rest = item.split(":")
        h, b, s_k, s_q = int(h), int(b), int(s_k), int(rest[0]) if rest else 1
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, s_q=s_q, h_q=h, page=DENSE_PAGE, fp8=fmt == "fp8",
                                          device="cuda", seed=0)  # fmt: skip
        causal = s_q > 1
        metas = {"scratch": get_mla_metadata()[0], "registers": get_mla_metadata()[0]}
        for meta in metas.values():
            dense_mla_decode(**inputs, causal=causal, metadata=meta)
        used = metas["scratch"].p_ws is not None
        metas["registers"].p_ws = None
        results, times = {}, {name: [] for name in metas}
        for _ in range(args.rounds):
            for name, meta in metas.items():
                o, lse = dense_mla_decode(**inputs, causal=causal, metadata=meta)
                results[name] = (o.float(), lse.clone())
                fn = lambda inputs=inputs, meta=meta, c=causal: dense_mla_decode(**inputs, causal=c, metadata=meta)  # noqa: E731
                times[name].append(graph_median_us(fn, args.reps))
        (o_s, l_s), (o_r, l_r) = results["scratch"], results["registers"]
        out_diff = ((o_s - o_r).abs().max() / o_r.abs().max().clamp_min(1e-30)).item()
        lse_diff = (l_s - l_r).abs().nan_to_num(0.0).max().item()
        _, nbytes = dense_traffic([s_k] * b, s_q, h, 576, fmt == "fp8", DENSE_PAGE)
        t_s, t_r = min(times["scratch"]), min(times["registers"])
        p = metas["scratch"].dense_plan
        assert p is not None
        pct = {name: pct_copy(nbytes, t, ceil) for name, t in (("s", t_s), ("r", t_r))}
        records.append(
            dict(
                kv_format=fmt, heads=h, batch=b, s_k=s_k, s_q=s_q, config=str(p.config), parts=p.num_parts,
                scratch_used=used, scratch_us=t_s, registers_us=t_r, scratch_all=times["scratch"],
                registers_all=times["registers"], out_rel_diff=out_diff, lse_diff=lse_diff,
                scratch_pct_copy=pct["s"], registers_pct_copy=pct["r"],
            )
        )  # fmt: skip
        print(
            f"dense {fmt:4s} h{h:<4d} s{s_q} b{b:<4d} sk{s_k:<6d} {p.config!s:10s} parts={p.num_parts:<4d} "
            f"registers {t_r:8.1f}  scratch {t_s:8.1f} us ({t_s / t_r:.3f})  {pct['r']:.1f}% -> {pct['s']:.1f}% "
            f"of copy  out diff {out_diff:.1e} lse diff {lse_diff:.1e}{'' if used else '  (NO SCRATCH)'}"
        )
        del inputs, metas, results
        torch.cuda.empty_cache()
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
