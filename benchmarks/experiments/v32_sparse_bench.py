"""DeepSeek-V3.2's sparse decode (q 576 wide, FP8 V3.2 cache of 656 bytes a token) through ``sparse_mla_decode``:
the compaction of each token's index list and the dense decode's kernels over it, timed as one call replayed from a
CUDA graph with L2 flushed (median of ``--reps``), against the copy and GEMM ceilings measured in the same run and
FlashMLA's published 410 TFLOP/s (H800, b = 128, h = 128, s_q = 2, 2048 entries). The outputs of calls of up to 64
query tokens are checked against the fp64 reference first (larger ones would need several GB for it). Also timed:
the call with ``topk_length`` (as vLLM's V3.2 decode passes it) and with a sink, each checked the same way, and the
dense decode alone over already compacted lists (the call's time less this is the lists' and the sink's share).

    PYTHONPATH=src python3 benchmarks/experiments/v32_sparse_bench.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import wavemla
from wavemla.reference import sparse_decode_ref
from wavemla.reference.fp8_v32 import quantize_v32
from wavemla.testing import TOLERANCES, assert_close, dense_out_tolerance
from wavemla.tools.bench import measure_ceilings, timing_samples_us

FLASHMLA_TFLOPS = 410.0  # FlashMLA's sparse FP8 decode, H800, b=128 h=128 s_q=2 topk=2048 (its docs/20250929)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32, 64, 128])
    parser.add_argument("--s-q", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--heads", type=int, default=128)
    parser.add_argument("--topk", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    ceil = measure_ceilings()
    print(f"ceilings: copy {ceil.copy_gbps:.0f} GB/s, bf16 GEMM {ceil.gemm_tflops:.0f} TFLOP/s")
    gen = torch.Generator(device="cuda").manual_seed(0)
    blocks, page = 2048, 64  # 131,072 slots
    cache = quantize_v32(torch.randn(blocks, page, 1, 576, device="cuda", generator=gen))
    records = []
    print(f"{'b':>4} {'s_q':>3}  call µs  +lengths  +sink  dense-only µs  TFLOP/s  % GEMM  GB/s  % copy  "
          "vs FlashMLA's 410")  # fmt: skip
    for b in args.batch:
        for s_q in args.s_q:
            h, k = args.heads, args.topk
            q = (torch.randn(b, s_q, h, 576, device="cuda", generator=gen) * 0.5).to(torch.bfloat16)
            idx = torch.rand(b * s_q, blocks * page, device="cuda", generator=gen).argsort(-1)[:, :k]
            idx = idx.to(torch.int32).view(b, s_q, k)
            variants = {
                "call_us": {},
                "lengths_us": {"topk_length": torch.full((b,), k, dtype=torch.int32, device="cuda")},
                "sink_us": {"attn_sink": torch.linspace(-2, 2, h, device="cuda")},
            }
            times = {}
            for name, extra in variants.items():
                sched, _ = wavemla.get_mla_metadata()
                x = {"q": q, "kv_cache": cache, "indices": idx, **extra}
                out, lse = wavemla.sparse_mla_decode(**x, metadata=sched)
                if b * s_q <= 64:
                    ref_out, ref_lse = sparse_decode_ref(**x)
                    assert_close("out", out, ref_out, dense_out_tolerance(cache, "gpu"))
                    assert_close("lse", lse, ref_lse, TOLERANCES[("lse", "gpu")])

                def call(x: dict = x, m: wavemla.MLAMetadata = sched) -> None:
                    wavemla.sparse_mla_decode(**x, metadata=m)

                times[name] = statistics.median(timing_samples_us(call, args.reps, graph=True))
            call_us = times["call_us"]
            rows = cache.view(blocks * page, 1, 1, 656)
            lengths = torch.full((b * s_q,), k, dtype=torch.int32, device="cuda")
            dense_sched, _ = wavemla.get_mla_metadata()
            dense = (q.reshape(b * s_q, 1, h, 576), rows, idx.view(b * s_q, k), lengths)
            dense_us = statistics.median(
                timing_samples_us(
                    lambda d=dense, m=dense_sched: wavemla.dense_mla_decode(*d, metadata=m), args.reps, graph=True
                )
            )
            flops = 2.0 * b * s_q * h * k * (576 + 512)
            nbytes = b * s_q * k * 656 + q.numel() * 2 + b * s_q * h * 512 * 2 + idx.numel() * 4
            tflops = flops / call_us / 1e6
            gbps = nbytes / call_us / 1e3
            rec = {"b": b, "s_q": s_q, "h": h, "topk": k, **times, "dense_only_us": dense_us,
                   "tflops": tflops, "gbps": gbps, "pct_gemm": 100 * tflops / ceil.gemm_tflops,
                   "pct_copy": 100 * gbps / ceil.copy_gbps, "vs_flashmla": tflops / FLASHMLA_TFLOPS}  # fmt: skip
            records.append(rec)
            print(f"{b:>4} {s_q:>3}  {call_us:7.1f}  {times['lengths_us']:8.1f}  {times['sink_us']:5.1f}  "
                  f"{dense_us:13.1f}  {tflops:7.1f}  {rec['pct_gemm']:6.1f}  "
                  f"{gbps:4.0f}  {rec['pct_copy']:6.1f}  {rec['vs_flashmla']:.2f}", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ceilings": vars(ceil), "records": records, "device": torch.cuda.get_device_name()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
