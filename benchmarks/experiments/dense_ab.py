"""What the dense-decode A/B scripts (``dense_pdl_ab.py``, ``dense_pws_ab.py``, ``dense_fp8_km_ab.py``,
``dense_rows64_ab.py``, ``dense_ws_ab.py``) share: a call's median µs from CUDA-graph replay with L2 flushed, its
share of the copy bandwidth, the loop over points and variants of the last two, and the JSON they write."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from wavemla import dense_mla_decode, get_mla_metadata
from wavemla.reference import dense_decode_ref
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, Ceilings, dense_traffic, environment, measure_ceilings, timing_samples_us


def parse_and_measure(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, Ceilings]:
    """Add ``--reps`` (replays per median) and ``--rounds`` (alternating rounds per variant) to ``ap``, parse the
    command line, and measure (and print) the copy ceiling of this process."""
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ceil = measure_ceilings()
    print(f"copy {ceil.copy_gbps:.0f} GB/s")
    return args, ceil


def parse_point(item: str) -> tuple[str, int, int, int, int]:
    """``FORMAT:H:B:S_K[:S_Q]`` -> (format, heads, batch, s_k, s_q)."""
    fmt, h, b, s_k, *rest = item.split(":")
    return fmt, int(h), int(b), int(s_k), int(rest[0]) if rest else 1


def graph_median_us(fn: Any, reps: int) -> float:
    """Median µs of ``fn`` replayed ``reps`` times from a CUDA graph, L2 flushed before each replay."""
    return statistics.median(timing_samples_us(fn, reps, graph=True))


def pct_copy(nbytes: float, us: float, ceil: Ceilings) -> float:
    """``nbytes`` moved in ``us`` as a percentage of the measured copy bandwidth."""
    return 100 * nbytes / (us * 1e-6) / (ceil.copy_gbps * 1e9)


def write_results(path: str | None, ceil: Ceilings, records: list[dict]) -> None:
    """The run's environment, copy ceiling and records as JSON at ``path`` (nothing when None)."""
    if path:
        with open(path, "w") as f:
            json.dump({"environment": environment(), "copy_gbps": ceil.copy_gbps, "records": records}, f, indent=1)


def ab_points(args: argparse.Namespace, ceil: Ceilings, variants: Sequence[str],
              enter: Callable[[str], AbstractContextManager[Any]], ratio_key: str) -> list[dict]:  # fmt: skip
    """Time each of ``variants`` (``enter(name)`` sets it up: knobs, module constants) at every ``--points`` point
    of ``args``: uniform lengths, page 64, causal when s_q > 1; CUDA-graph replay with L2 flushed, the lower of the
    per-round medians (variants alternate within a round). Outputs are compared with the first variant's (largest
    difference relative to its largest output) and, at the first point's first two requests, with the fp64
    reference. Prints a line per variant and point; returns the records (``ratio_key``: time over the first
    variant's)."""
    records = []
    for n_point, (fmt, h, b, s_k, s_q) in enumerate(map(parse_point, args.points)):
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, s_q=s_q, h_q=h, page=DENSE_PAGE, fp8=fmt == "fp8",
                                          device="cuda", seed=0)  # fmt: skip
        causal = s_q > 1
        metas, outs, times, plans = {}, {}, {v: [] for v in variants}, {}
        for v in variants:
            with enter(v):
                metas[v] = get_mla_metadata()[0]
                o, lse = dense_mla_decode(**inputs, causal=causal, metadata=metas[v])
                outs[v] = (o.float(), lse.clone())
                p = metas[v].dense_plan
                assert p is not None
                plans[v] = (str(p.config), p.num_parts, metas[v].p_ws is not None)
        for _ in range(args.rounds):
            for v in variants:
                with enter(v):
                    fn = lambda m=metas[v], x=inputs, c=causal: dense_mla_decode(**x, causal=c, metadata=m)  # noqa: E731
                    times[v].append(graph_median_us(fn, args.reps))
        base = variants[0]
        o_b, l_b = outs[base]
        ref_err = {}
        if n_point == 0:
            small = {k: (t[:2] if k in ("q", "block_table", "cache_seqlens") else t) for k, t in inputs.items()}
            r_o, _ = dense_decode_ref(**small, causal=causal)
            for v in variants:
                o, lse = outs[v]
                ref_err[v] = ((o[:2] - r_o.float()).abs().max() / r_o.float().abs().max()).item()
        _, nbytes = dense_traffic([s_k] * b, s_q, h, 576, fmt == "fp8", DENSE_PAGE)
        t_base = min(times[base])
        for v in variants:
            o, lse = outs[v]
            t = min(times[v])
            rec = dict(
                kv_format=fmt, heads=h, batch=b, s_k=s_k, s_q=s_q, variant=v, config=plans[v][0], parts=plans[v][1],
                p_scratch=plans[v][2], us=t, all_us=times[v], **{ratio_key: t / t_base},
                pct_copy=pct_copy(nbytes, t, ceil),
                out_rel_diff=((o - o_b).abs().max() / o_b.abs().max().clamp_min(1e-30)).item(),
                lse_diff=(lse - l_b).abs().nan_to_num(0.0).max().item(), ref_rel_err=ref_err.get(v),
            )  # fmt: skip
            records.append(rec)
            print(
                f"dense {fmt:4s} h{h:<4d} s{s_q} b{b:<4d} sk{s_k:<6d} {v:10s} -> {plans[v][0]:10s} "
                f"parts={plans[v][1]:<4d} "
                f"{t:9.1f} us ({t / t_base:.3f})  {rec['pct_copy']:.1f}% of copy  diff {rec['out_rel_diff']:.1e}"
                + (f"  ref {ref_err[v]:.1e}" if v in ref_err else "")
            )
        del inputs, metas, outs
        torch.cuda.empty_cache()
    return records
