"""Where wavemla.hf_attention's extra host time per decode step goes, in transformers' DeepSeek-V4 on a GPU.

The model of hf_dsv4_trace.py (4 layers, DSV4-Flash attention sizes, 32 experts, random bf16 weights) decodes after a
1,024-token prompt at each batch size, ``--steps`` steps per variant, timed by wall clock (the host sets the pace):
``eager`` (transformers' attention), ``wavemla`` (as shipped: the mask's bias check reads the mask's statistics on the
host, one sync per call) and ``wavemla-nocheck`` (the same without that check). Then one CSA-sized call of the attention
function alone, in a loop without syncs: its host time per call.

    PYTHONPATH=src python3 benchmarks/experiments/hf_host_cost.py --batch 1 64
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_dsv4_trace import build_model

from wavemla import hf_attention


def _unchecked_rows(mask: torch.Tensor | None, b: int, s_q: int, length: int) -> torch.Tensor | None:
    """The mask's rows as booleans, so that no bias check (and no host read) runs."""
    if mask is None:
        return None
    m = mask[:, 0].expand(b, s_q, length)
    return m if m.dtype == torch.bool else ~(m <= torch.finfo(m.dtype).min / 2)


def step_ms(model: Any, b: int, prompt: int, steps: int) -> list[float]:
    gen = torch.Generator().manual_seed(b)
    ids = torch.randint(2, model.config.vocab_size, (b, prompt), generator=gen).cuda()
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        times = []
        for i in range(steps + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            o = model(input_ids=token, past_key_values=cache, use_cache=True)
            cache, token = o.past_key_values, o.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            if i >= 2:  # two warm steps
                times.append((time.perf_counter() - t0) * 1e3)
    return times


def call_us(b: int, length: int, calls: int = 200) -> float:
    """Host µs per call of the attention function on a CSA-sized input (64 heads, ``length`` rows), no syncs."""
    module = type("M", (), {})()
    q = torch.randn(b, 64, 1, 512, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(b, 1, length, 512, device="cuda", dtype=torch.bfloat16)
    mask = torch.zeros(b, 1, 1, length, device="cuda", dtype=torch.bfloat16)
    sinks = torch.randn(64, device="cuda")
    for _ in range(3):
        hf_attention._attention(module, q, kv, kv, mask, 512**-0.5, s_aux=sinks)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        hf_attention._attention(module, q, kv, kv, mask, 512**-0.5, s_aux=sinks)
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    hf_attention.register()
    model = build_model(4, 32)
    checked = hf_attention._mask_rows
    print(f"{'variant':<16} {'b':>4} {'median ms/step':>15} {'min':>8} {'max':>8}")
    for b in args.batch:
        for variant in ("eager", "wavemla", "wavemla-nocheck"):
            model.config._attn_implementation = "eager" if variant == "eager" else "wavemla"
            hf_attention._mask_rows = _unchecked_rows if variant == "wavemla-nocheck" else checked
            ms = step_ms(model, b, args.prompt, args.steps)
            print(f"{variant:<16} {b:>4} {statistics.median(ms):>15.2f} {min(ms):>8.2f} {max(ms):>8.2f}", flush=True)
    for variant in ("wavemla", "wavemla-nocheck"):
        hf_attention._mask_rows = _unchecked_rows if variant == "wavemla-nocheck" else checked
        for b, length in ((1, 384), (64, 384), (64, 385)):
            us = call_us(b, length)
            print(f"one call, {variant:<16} b={b:<3} L={length}: {us:8.1f} µs host", flush=True)
    hf_attention._mask_rows = checked
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
