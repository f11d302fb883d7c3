"""Host time per decode call through the public API on a GPU: what an engine that does not capture CUDA graphs
pays per layer on the CPU.

For each case, 3 warm calls, then ``--calls`` calls back to back without a sync (the GPU runs behind; the host's
time per call is measured), then one sync. DSV4 sparse decode (FP8 MODEL1, 128 window rows + 512 compressed, sink)
through ``sparse_mla_decode`` (no metadata) and through FlashMLA's ``flash_mla_with_kvcache`` with one metadata
object, and with a new one per call (``get_mla_metadata()`` before each call, as SGLang's DeepSeek-V4 decode does);
the dense decode (V3, FP8 V3.2 layout) through ``flash_mla_with_kvcache`` with one metadata object and a new one per
call. ``WAVEMLA_LAUNCH=triton`` in the environment gives the times without launch replays.

    PYTHONPATH=src python3 benchmarks/experiments/api_host_cost.py
    PYTHONPATH=src python3 benchmarks/experiments/api_host_cost.py --profile   # where a call's host time goes

``--profile`` runs cProfile over ``--calls`` calls of ``flash_mla_with_kvcache`` (sparse, FP8, b = 64, h = 64,
with metadata) and prints the functions by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable
from typing import Any

import torch

from wavemla import api
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs


def host_us(call: Callable[[], Any], calls: int) -> float:
    """Host µs per call, ``calls`` calls back to back (the GPU runs behind), after 3 warm calls."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    us = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.profile:
        return profile(args.calls)
    print(f"{'case':<58} {'host µs/call':>12}")
    for b, h in ((1, 64), (64, 64), (128, 128)):
        kw: dict[str, Any] = make_sparse_decode_inputs(
            batch=b, h_q=h, topk=128, extra_topk=512, fp8=True, device="cuda"
        )  # fmt: skip
        us = host_us(lambda kw=kw: api.sparse_mla_decode(**kw), args.calls)
        print(f"{f'sparse_mla_decode FP8 b={b} h={h} 128+512':<58} {us:>12.1f}", flush=True)
        meta, _ = api.get_mla_metadata()
        fm = {
            "q": kw["q"], "k_cache": kw["kv_cache"], "block_table": None, "cache_seqlens": None, "head_dim_v": 512,
            "tile_scheduler_metadata": meta, "softmax_scale": 512**-0.5, "is_fp8_kvcache": True,
            "indices": kw["indices"], "attn_sink": kw["attn_sink"], "extra_k_cache": kw["extra_kv_cache"],
            "extra_indices_in_kvcache": kw["extra_indices"],
        }  # fmt: skip
        us = host_us(lambda fm=fm: api.flash_mla_with_kvcache(**fm), args.calls)
        print(f"{f'flash_mla_with_kvcache sparse FP8 b={b} h={h}':<58} {us:>12.1f}", flush=True)

        def per_call(fm: dict[str, Any] = fm) -> Any:
            return api.flash_mla_with_kvcache(**{**fm, "tile_scheduler_metadata": api.get_mla_metadata()[0]})

        us = host_us(per_call, args.calls)
        print(f"{f'flash_mla_with_kvcache sparse FP8 b={b} h={h}, new metadata':<58} {us:>12.1f}", flush=True)
    for b, h in ((1, 128), (64, 128)):
        d: dict[str, Any] = make_dense_decode_inputs(lengths=[4096] * b, h_q=h, fp8=True, device="cuda")
        meta, _ = api.get_mla_metadata()

        def dense(d: dict[str, Any] = d, meta: Any = meta) -> Any:
            return api.flash_mla_with_kvcache(d["q"], d["k_cache"], d["block_table"], d["cache_seqlens"], 512, meta,
                                              softmax_scale=576**-0.5, is_fp8_kvcache=True)  # fmt: skip

        us = host_us(dense, args.calls)
        print(f"{f'flash_mla_with_kvcache dense FP8 b={b} h={h} 4K':<58} {us:>12.1f}", flush=True)
        us = host_us(lambda d=d: dense(d, api.get_mla_metadata()[0]), args.calls)
        print(f"{f'flash_mla_with_kvcache dense FP8 b={b} h={h} 4K, new metadata':<58} {us:>12.1f}", flush=True)
    return 0


def profile(calls: int) -> int:
    kw: dict[str, Any] = make_sparse_decode_inputs(batch=64, h_q=64, topk=128, extra_topk=512, fp8=True, device="cuda")
    meta, _ = api.get_mla_metadata()

    def call() -> Any:
        return api.flash_mla_with_kvcache(
            kw["q"], kw["kv_cache"], None, None, 512, meta, softmax_scale=512**-0.5, is_fp8_kvcache=True,
            indices=kw["indices"], attn_sink=kw["attn_sink"], extra_k_cache=kw["extra_kv_cache"],
            extra_indices_in_kvcache=kw["extra_indices"],
        )  # fmt: skip

    print(f"host µs/call before profiling: {host_us(call, calls):.1f}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        call()
    prof.disable()
    torch.cuda.synchronize()
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof).strip_dirs().sort_stats(key).print_stats(28)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
