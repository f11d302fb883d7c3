"""Where the warp-specialized sparse decode spends its time: the kernel built with one side of it removed (module
constant ``_PROBE``: 1 no math, only the gather and the hand-offs; 2 no gather, only the math; 3 the math without its
index loads), timed at CSA h=64 with 64x64 tiles (CUDA-graph replay, L2 flushed, median). Outputs of probes 1-3 are
meaningless; only their times are read.

    PYTHONPATH=src python3 benchmarks/experiments/sparse_ws_probe.py PROBE B [B ...] [--once]
"""

from __future__ import annotations

import sys

import torch
import triton.language as tl

from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.kernels import sparse_decode_ws
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.bench import timings_us

CSA = dict(topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048)
TILES = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1, WAVEMLA_SPARSE_WS="on")


def main() -> None:
    probe = int(sys.argv[1])
    once = "--once" in sys.argv
    batches = [int(a) for a in sys.argv[2:] if not a.startswith("--")]
    sparse_decode_ws._PROBE = tl.constexpr(probe)
    full = make_sparse_decode_inputs(batch=max(batches), h_q=64, **CSA, fp8=True, device="cuda", seed=0)
    for b in batches:
        kw = {k: (v[:b] if k in ("q", "indices", "extra_indices") else v) for k, v in full.items() if v is not None}
        with config.override(**TILES):
            meta, _ = get_mla_metadata()
            if once:
                sparse_mla_decode(**kw, metadata=meta)
                torch.cuda.synchronize()
                continue
            _, med, _ = timings_us(lambda kw=kw, meta=meta: sparse_mla_decode(**kw, metadata=meta), reps=15, graph=True)
        p = meta.plan
        assert p is not None
        print(f"probe {probe} b {b}: {med:.1f} us (parts {p.num_parts}, units/part {p.units_per_part})")


if __name__ == "__main__":
    main()
