"""Where transformers' prefill call through ``wavemla.hf_attention`` spends its time at 1K tokens: torch.profiler's
CPU and CUDA totals per op for one eager call (after warm-up), and the call's wall time with and without the L2
flush in front, at the sizes of ``hf_prefill.py``.

    PYTHONPATH=src python3 benchmarks/experiments/hf_prefill_host.py --tokens 1024 --kinds sliding csa
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_prefill import HEADS, _allowed, _module

from wavemla import hf_attention
from wavemla.tools.bench import timing_samples_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024])
    parser.add_argument("--kinds", nargs="+", default=["sliding", "csa"])
    args = parser.parse_args()
    for s in args.tokens:
        for kind in args.kinds:
            gen = torch.Generator(device="cuda").manual_seed(s)
            allowed = _allowed(kind, s, gen)
            q = torch.randn(1, HEADS, s, 512, device="cuda", generator=gen).to(torch.bfloat16)
            kv = torch.randn(1, 1, allowed.shape[-1], 512, device="cuda", generator=gen).to(torch.bfloat16)
            mask = torch.zeros(allowed.shape, device="cuda", dtype=torch.bfloat16).masked_fill(~allowed, -torch.inf)
            x = {"query": q, "key": kv, "value": kv, "attention_mask": mask, "scaling": 512**-0.5,
                 "s_aux": torch.randn(HEADS, device="cuda", generator=gen)}  # fmt: skip
            call = functools.partial(hf_attention._attention, _module(kind), **x)

            for _ in range(5):
                call()
            torch.cuda.synchronize()
            walls = []
            for _ in range(20):
                t = time.perf_counter()
                call()
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - t) * 1e6)
            flushed = statistics.median(timing_samples_us(call, 15))
            plain = statistics.median(timing_samples_us(call, 15, flush=False))
            print(f"== {kind} {s}: wall {statistics.median(walls):.1f} us, events {plain:.1f} us, "
                  f"events behind the flush {flushed:.1f} us")  # fmt: skip
            with torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            ) as prof:
                for _ in range(5):
                    call()
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=25, max_name_column_width=60))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
