"""A/B of the dense decode's split kernels for 64-row tiles of 64 keys on sm_90: the Triton keys-major
64x64x8x2 tile against the warp-specialized Gluon kernel (``kernels/dense_decode_ws.py``: a TMA warp, two math
warpgroups), with the same tile, partition and combine (``WAVEMLA_DENSE_WS`` off / on), at DeepSeek-V3 shapes.

    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_ab.py OUT.json --points bf16:64:128:16384

A point is ``FORMAT:H:B:S_K[:S_Q]`` (uniform lengths, page 64; causal when s_q > 1). CUDA-graph replay, L2 flushed
before each replay; the lower of each variant's per-round medians (variants alternate within a round), with the
copy bandwidth measured in the same process. Outputs are compared with the Triton kernel's (largest difference
relative to its largest output) and with the fp64 reference at the first point's first two requests.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from wavemla import config, dense_mla_decode, get_mla_metadata
from wavemla.kernels import dense_decode_ws
from wavemla.reference import dense_decode_ref
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, dense_traffic

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import graph_median_us, parse_and_measure, parse_point, pct_copy, write_results

_TILE = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2)
VARIANTS = {
    "triton": dict(_TILE, WAVEMLA_DENSE_WS="off"),
    "gluon-ws": dict(_TILE, WAVEMLA_DENSE_WS="on"),
    # a variant may set module constants of kernels/dense_decode_ws.py read at launch: ws_attrs={"NAME": value}
}


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """The variant's knobs, and the module constants of ``dense_decode_ws`` it sets."""
    knobs = dict(VARIANTS[name])
    attrs = knobs.pop("ws_attrs", {})
    saved = {k: getattr(dense_decode_ws, k) for k in attrs}
    for k, v in attrs.items():
        setattr(dense_decode_ws, k, v)
    try:
        with config.override(**knobs):
            yield
    finally:
        for k, v in saved.items():
            setattr(dense_decode_ws, k, v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:64:128:16384"])
    ap.add_argument("--variants", nargs="+", default=["triton", "gluon-ws"])
    args, ceil = parse_and_measure(ap)
    records = []
    for n_point, (fmt, h, b, s_k, s_q) in enumerate(map(parse_point, args.points)):
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, s_q=s_q, h_q=h, page=DENSE_PAGE, fp8=fmt == "fp8",
                                          device="cuda", seed=0)  # fmt: skip
        causal = s_q > 1
        metas, outs, times, plans = {}, {}, {v: [] for v in args.variants}, {}
        for v in args.variants:
            with variant(v):
                metas[v] = get_mla_metadata()[0]
                o, lse = dense_mla_decode(**inputs, causal=causal, metadata=metas[v])
                outs[v] = (o.float(), lse.clone())
                p = metas[v].dense_plan
                assert p is not None
                plans[v] = (str(p.config), p.num_parts, metas[v].p_ws is not None)
        for _ in range(args.rounds):
            for v in args.variants:
                with variant(v):
                    fn = lambda m=metas[v], x=inputs, c=causal: dense_mla_decode(**x, causal=c, metadata=m)  # noqa: E731
                    times[v].append(graph_median_us(fn, args.reps))
        base = args.variants[0]
        o_b, l_b = outs[base]
        ref_err = {}
        if n_point == 0:
            small = {k: (t[:2] if k in ("q", "block_table", "cache_seqlens") else t) for k, t in inputs.items()}
            r_o, _ = dense_decode_ref(**small, causal=causal)
            for v in args.variants:
                o, lse = outs[v]
                ref_err[v] = ((o[:2] - r_o.float()).abs().max() / r_o.float().abs().max()).item()
        _, nbytes = dense_traffic([s_k] * b, s_q, h, 576, fmt == "fp8", DENSE_PAGE)
        t_base = min(times[base])
        for v in args.variants:
            o, lse = outs[v]
            t = min(times[v])
            rec = dict(
                kv_format=fmt, heads=h, batch=b, s_k=s_k, s_q=s_q, variant=v, config=plans[v][0], parts=plans[v][1],
                p_scratch=plans[v][2], us=t, all_us=times[v], ratio_to_triton=t / t_base,
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
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
