"""Wall time per decode-step call of ``wavemla.hf_attention._attention`` (64 heads, bf16, one query token, an
additive mask as transformers passes it), the GPU synchronized after each call: a host-bound eager decode pays this
per layer. Layers: ``hca`` (every gathered row listed) and ``csa`` (lists cut to window + index_topk = 640 entries,
the CUT_MIN_ENTRIES rule). Run it under two source trees' PYTHONPATH to compare builds.

    PYTHONPATH=src python3 benchmarks/experiments/hf_call_host.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_prefill import _module

from wavemla import hf_attention


def main() -> int:
    for kind, b, length in (("hca", 1, 384), ("hca", 64, 384), ("csa", 8, 8192), ("csa", 64, 8192)):
        gen = torch.Generator(device="cuda").manual_seed(b)
        q = torch.randn(b, 64, 1, 512, device="cuda", generator=gen).to(torch.bfloat16)
        kv = torch.randn(b, 1, length, 512, device="cuda", generator=gen).to(torch.bfloat16)
        scores = torch.rand(b, 1, 1, length, device="cuda", generator=gen)
        keep = scores.argsort(-1).argsort(-1) < (600 if kind == "csa" else 0.9 * length)  # CSA: 600 rows a token
        mask = torch.zeros(b, 1, 1, length, device="cuda", dtype=torch.bfloat16).masked_fill(~keep, -torch.inf)
        x = {"query": q, "key": kv, "value": kv, "attention_mask": mask, "scaling": 512**-0.5,
             "s_aux": torch.randn(64, device="cuda", generator=gen)}  # fmt: skip
        module = _module(kind)
        for _ in range(10):
            hf_attention._attention(module, **x)
        torch.cuda.synchronize()
        walls = []
        for _ in range(200):
            t = time.perf_counter()
            hf_attention._attention(module, **x)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t) * 1e6)
        walls.sort()
        print(f"{kind} b={b:<3} L={length:<5} median {statistics.median(walls):7.1f} us, p20 {walls[40]:7.1f}, "
              f"p80 {walls[160]:7.1f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
