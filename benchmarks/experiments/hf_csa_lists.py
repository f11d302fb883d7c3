"""transformers' DeepSeek-V4 CSA attention call through ``wavemla.hf_attention``: the CSA layer's index lists cut to
its window + index_topk entries (the attended rows, 640) against every gathered row with −1 where masked, and the
rule for a bool mask (cut where it saves ``CUT_MIN_ENTRIES`` list entries, which repay the host read the cut adds
there), as the context grows.

A CSA layer's call gathers its window (128 rows) and its whole compressed prefix (context / 4 rows) and masks all
but the indexer's 512 picks: the inputs here are such a call, h = 64, s_q = 1, bf16, random picks per token. The
variants: ``all``, every row (the same call as a layer of another type, whose lists are never cut); ``cut``, the
bf16 mask as transformers gives it (read on the host for its bias check, so cut whenever the rows exceed the
width); ``bool``, the same mask as bool (cut by the rule outside capture). Per case: the host time of a call
(``--calls`` calls back to back, the GPU running behind: an eager decode step pays at least this), the GPU time of
the call replayed from a CUDA graph (L2 flushed; median of ``--calls``; under capture nothing is read on the host, so
the bool mask's lists are cut too), and the largest output difference between the cut lists and every row.

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


class _Every(_Module):
    """A layer of another type: its lists hold every gathered row."""

    layer_type = "heavily_compressed_attention"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--context", type=int, nargs="+", default=[8192, 32768, 131072])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    module, every = _Module(), _Every()
    print(f"{'b':>4} {'context':>8} {'rows L':>7}  host µs all / cut / bool   GPU µs all / cut / bool   max diff")
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
            variants = {
                "all": lambda x=x: hf_attention._attention(every, **x),
                "cut": lambda x=x: hf_attention._attention(module, **x),
                "bool": lambda x=x, a=allowed: hf_attention._attention(module, **{**x, "attention_mask": a}),
            }
            host, graph, outs = {}, {}, {}
            for name, call in variants.items():
                host[name] = host_us(call, 4 * args.calls)
                graph[name] = statistics.median(timing_samples_us(call, args.calls, graph=True))
                outs[name] = call()[0].float()
            diff = max(float((outs[name] - outs["all"]).abs().max()) for name in ("cut", "bool"))
            print(
                f"{b:>4} {ctx:>8} {length:>7}  {host['all']:7.1f} {host['cut']:7.1f} {host['bool']:7.1f}"
                f"   {graph['all']:8.1f} {graph['cut']:7.1f} {graph['bool']:7.1f}   {diff:.2e}",
                flush=True,
            )
            del q, kv, mask, allowed, x, outs, variants
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
