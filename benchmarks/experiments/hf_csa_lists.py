"""transformers' DeepSeek-V4 CSA attention call through ``wavemla.hf_attention``: the CSA layer's index lists cut to
its window + index_topk entries (the attended rows, 640) against every gathered row with −1 where masked, and the
shipped rule (cut where it saves ``CUT_MIN_ENTRIES`` list entries), as the context grows.

A CSA layer's call gathers its window (128 rows) and its whole compressed prefix (context / 4 rows) and masks all
but the indexer's 512 picks: the inputs here are such a call, h = 64, s_q = 1, bf16, random picks per token. Per
case: the host time of a call (``--calls`` calls back to back, the GPU running behind: an eager decode step pays
at least this), the GPU time of the call replayed from a CUDA graph (L2 flushed; median of ``--calls``), and the
largest output difference between the cut lists and every row.

    PYTHONPATH=src python3 benchmarks/experiments/hf_csa_lists.py --batch 1 8 32 --context 8192 32768 131072
"""

from __future__ import annotations

import argparse
import statistics
import sys
import types
from pathlib import Path

import torch

from wavemla import hf_attention
from wavemla.tools.bench import timing_samples_us

sys.path.insert(0, str(Path(__file__).parent))
from api_host_cost import host_us  # host µs per call, calls back to back (the GPU runs behind)


class _Module(torch.nn.Module):
    """What ``_attention`` reads of transformers' CSA attention module: its layer type and its config's window and
    index_topk."""

    layer_type = hf_attention.CSA
    config = types.SimpleNamespace(sliding_window=128, index_topk=512)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--context", type=int, nargs="+", default=[8192, 32768, 131072])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    module = _Module()
    rule = hf_attention.CUT_MIN_ENTRIES
    # every gathered row (no cut), the cut forced, and the shipped rule (cut from CUT_MIN_ENTRIES saved entries)
    variants = {"all": 2**62, "cut": 0, "rule": rule}
    print(f"{'b':>4} {'context':>8} {'rows L':>7}  host µs all / cut / rule   GPU µs all / cut / rule   max diff")
    for b in args.batch:
        for ctx in args.context:
            length = 128 + ctx // 4
            gen = torch.Generator(device="cuda").manual_seed(0)
            q = torch.randn(b, 64, 1, 512, device="cuda", generator=gen).to(torch.bfloat16)
            kv = torch.randn(b, 1, length, 512, device="cuda", generator=gen).to(torch.bfloat16)
            picks = torch.rand(b, 1, 1, length - 128, device="cuda", generator=gen).argsort(-1)[..., :512]
            allowed = torch.zeros(b, 1, 1, length, dtype=torch.bool, device="cuda")
            allowed[..., :128] = True
            allowed[..., 128:].scatter_(-1, picks, True)
            mask = torch.zeros(b, 1, 1, length, device="cuda", dtype=torch.bfloat16).masked_fill(~allowed, -torch.inf)
            sinks = torch.randn(64, device="cuda", generator=gen)
            x = {"query": q, "key": kv, "value": kv, "attention_mask": mask, "scaling": 512**-0.5, "s_aux": sinks}
            call = lambda x=x: hf_attention._attention(module, **x)  # noqa: E731
            host, graph, outs = {}, {}, {}
            try:
                for name, entries in variants.items():
                    hf_attention.CUT_MIN_ENTRIES = entries
                    host[name] = host_us(call, 4 * args.calls)
                    graph[name] = statistics.median(timing_samples_us(call, args.calls, graph=True))
                    outs[name] = call()[0].float()
            finally:
                hf_attention.CUT_MIN_ENTRIES = rule
            diff = float((outs["cut"] - outs["all"]).abs().max())
            print(
                f"{b:>4} {ctx:>8} {length:>7}  {host['all']:7.1f} {host['cut']:7.1f} {host['rule']:7.1f}"
                f"   {graph['all']:8.1f} {graph['cut']:7.1f} {graph['rule']:7.1f}   {diff:.2e}",
                flush=True,
            )
            del q, kv, mask, x, outs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
