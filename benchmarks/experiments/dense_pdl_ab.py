"""A/B of programmatic dependent launch in the dense decode (scheduler -> split -> combine) against plain launches,
at DeepSeek-V3 shapes: same plan and inputs, bits must be equal, both timed in alternation.

    PYTHONPATH=src python3 benchmarks/experiments/dense_pdl_ab.py OUT.json --points bf16:16:32:4096 fp8:64:128:4096

A point is ``FORMAT:H:B:S_K`` (bf16 rows or FP8 V3.2, s_q 1, uniform lengths, page 64, the planner's pick). The
variants: ``pdl`` (the launchers' default), ``plain`` (``wavemla.kernels.gdc.enabled`` patched to False, which
every dense launcher asks) and, with ``--no-combine``, ``pdl-plain-combine`` (the combine's own ``gdc`` patched:
the split kernel still launches behind the scheduler, the combine after the split as usual).
Each variant is captured in its own CUDA graph and replayed with L2 flushed before each replay; the lower of its
per-round medians is reported, with the copy bandwidth measured in the same process.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import torch

import wavemla.kernels.combine as combine
import wavemla.kernels.gdc as gdc
from wavemla import dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, dense_traffic, measure_ceilings

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import graph_median_us, pct_copy, write_results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:16:32:4096", "bf16:16:1:4096"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-combine", action="store_true", help="also time the combine launched without PDL")
    args = ap.parse_args()
    names = ("pdl", "plain", "pdl-plain-combine") if args.no_combine else ("pdl", "plain")
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    enabled = gdc.enabled
    records = []
    for item in args.points:
        fmt, h, b, s_k = item.split(":")
        h, b, s_k = int(h), int(b), int(s_k)
        fp8 = fmt == "fp8"
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, h_q=h, page=DENSE_PAGE, fp8=fp8, device="cuda", seed=0)
        meta, _ = get_mla_metadata()
        results: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        times: dict[str, list[float]] = {name: [] for name in names}
        try:
            for _ in range(args.rounds):
                for name in names:
                    gdc.enabled = (lambda device: False) if name == "plain" else enabled  # type: ignore[assignment]
                    off = types.SimpleNamespace(enabled=lambda device: False)
                    combine.gdc = off if name == "pdl-plain-combine" else gdc  # type: ignore[assignment]
                    o, lse = dense_mla_decode(**inputs, metadata=meta)
                    results[name] = (o.clone(), lse.clone())
                    fn = lambda inputs=inputs, meta=meta: dense_mla_decode(**inputs, metadata=meta)  # noqa: E731
                    times[name].append(graph_median_us(fn, args.reps))
        finally:
            gdc.enabled = enabled  # type: ignore[assignment]
            combine.gdc = gdc  # type: ignore[assignment]
        same = all(
            torch.equal(results["pdl"][0], results[n][0])
            and torch.equal(results["pdl"][1].view(torch.int32), results[n][1].view(torch.int32))
            for n in names
        )
        _, nbytes = dense_traffic([s_k] * b, 1, h, 576, fp8, DENSE_PAGE)
        t_pdl, t_plain = min(times["pdl"]), min(times["plain"])
        p = meta.dense_plan
        assert p is not None
        records.append(
            dict(
                kv_format=fmt, heads=h, batch=b, s_k=s_k, config=str(p.config), parts=p.num_parts,
                pdl_us=t_pdl, plain_us=t_plain, pdl_all=times["pdl"], plain_all=times["plain"], bit_identical=same,
                pdl_plain_combine_us=min(times["pdl-plain-combine"]) if args.no_combine else None,
                pdl_pct_copy=pct_copy(nbytes, t_pdl, ceil),
                plain_pct_copy=pct_copy(nbytes, t_plain, ceil),
            )
        )  # fmt: skip
        r = records[-1]
        third = ""
        if args.no_combine:
            t3 = r["pdl_plain_combine_us"]
            third = f"pdl, plain combine {t3:8.1f} ({t3 / t_plain:.3f})  "
        print(
            f"dense {fmt:4s} h{h:<4d} b{b:<4d} sk{s_k:<6d} {r['config']:10s} parts={p.num_parts:<4d} "
            f"plain {t_plain:8.1f}  pdl {t_pdl:8.1f} us ({t_pdl / t_plain:.3f})  {third}"
            f"{r['plain_pct_copy']:.1f}% -> {r['pdl_pct_copy']:.1f}% of copy  {'bits same' if same else 'BITS DIFFER'}"
        )
        del inputs, meta, results
        torch.cuda.empty_cache()
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
