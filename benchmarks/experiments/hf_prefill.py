"""transformers' DeepSeek-V4 prefill attention call through ``wavemla.hf_attention`` against the eager attention
transformers runs without it, at the model's sizes: h = 64, head_dim 512, bf16, one prompt of ``--tokens``.

Each layer kind's call as transformers' ``DeepseekV4Attention`` makes it for a prompt of s tokens: the key holds
the prompt's s rows, then (CSA) s / 4 or (HCA) s / 128 compressed rows; the mask lets token p attend its last 128
rows (the sliding window, itself included) and the compressed rows it can see (row c where c < (p + 1) / ratio):
all of them in HCA, 512 random ones of them in CSA (the indexer's picks). The eager baseline is transformers 5.25's
``eager_attention_forward`` arithmetic (bf16 matmuls, the sink as one more logit, softmax in the query's dtype),
written out here because transformers is not installed everywhere this runs. Both are timed as eager calls (the
list width is read on the host), L2 flushed, median of ``--reps``; each output is checked against an fp32
evaluation of the same attention on ``--check`` tokens.

    PYTHONPATH=src python3 benchmarks/experiments/hf_prefill.py --tokens 1024 4096 --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import types

import torch

from wavemla import hf_attention
from wavemla.testing import check_close, rows_out_tolerance
from wavemla.tools.bench import timing_samples_us

WINDOW, TOPK, HEADS = 128, 512, 64
RATIO = {"sliding": 0, "csa": 4, "hca": 128}
LAYER_TYPE = {"sliding": "sliding_attention", "csa": hf_attention.CSA, "hca": "heavily_compressed_attention"}


def _module(kind: str) -> torch.nn.Module:
    """What ``_attention`` reads of transformers' attention module: its layer type and its config's window and
    index_topk."""
    m = torch.nn.Module()
    m.layer_type = LAYER_TYPE[kind]  # type: ignore[assignment]
    m.config = types.SimpleNamespace(sliding_window=WINDOW, index_topk=TOPK)  # type: ignore[assignment]
    return m


def _allowed(kind: str, s: int, gen: torch.Generator) -> torch.Tensor:
    """``[1, 1, s, L]`` bool: what each prompt token attends."""
    p = torch.arange(s, device="cuda").view(s, 1)
    rows = torch.arange(s, device="cuda").view(1, s)
    window = (rows <= p) & (rows > p - WINDOW)
    ratio = RATIO[kind]
    if not ratio:
        return window.view(1, 1, s, s)
    n = s // ratio
    visible = torch.arange(n, device="cuda").view(1, n) < (p + 1) // ratio
    if kind == "csa":  # the indexer's picks: 512 random visible rows (all of them while fewer are visible)
        rank = torch.rand(s, n, device="cuda", generator=gen).masked_fill(~visible, 2.0).argsort(-1).argsort(-1)
        visible &= rank < TOPK
    return torch.cat([window, visible], dim=-1).view(1, 1, s, s + n)


def eager(q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor, sinks: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager attention with a sink, as transformers' DeepSeek-V4 computes it, in ``q``'s dtype: ``[b, s, h, 512]``."""
    logits = torch.matmul(q, kv.transpose(2, 3)) * scale + mask
    logits = torch.cat([logits, sinks.view(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[2], 1).to(q.dtype)], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = torch.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
    return torch.matmul(probs.to(kv.dtype), kv).transpose(1, 2).contiguous()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--kinds", nargs="+", default=list(RATIO), choices=list(RATIO))
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--check", type=int, default=256, help="tokens checked against fp32 (the last ones)")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    print(f"{'layer':>8} {'tokens':>7} {'rows L':>7} {'list':>5}  eager µs  wavemla µs  eager/wavemla  check")
    for s in args.tokens:
        for kind in args.kinds:
            gen = torch.Generator(device="cuda").manual_seed(s)
            allowed = _allowed(kind, s, gen)
            length = allowed.shape[-1]
            q = torch.randn(1, HEADS, s, 512, device="cuda", generator=gen).to(torch.bfloat16)
            kv = torch.randn(1, 1, length, 512, device="cuda", generator=gen).to(torch.bfloat16)
            mask = torch.zeros(allowed.shape, device="cuda", dtype=torch.bfloat16).masked_fill(~allowed, -torch.inf)
            sinks = torch.randn(HEADS, device="cuda", generator=gen)
            module = _module(kind)
            x = {"query": q, "key": kv, "value": kv, "attention_mask": mask, "scaling": 512**-0.5, "s_aux": sinks}
            ours = hf_attention._attention(module, **x)[0]
            width = int(allowed.sum(-1).max())
            c = slice(s - min(args.check, s), s)
            want = eager(q[:, :, c].float(), kv.float(), mask[:, :, c].float(), sinks, 512**-0.5)
            bad = check_close("out", ours[:, c], want, rows_out_tolerance("gpu", (kv,)))
            run_eager = functools.partial(eager, q, kv, mask, sinks, 512**-0.5)
            run_ours = functools.partial(hf_attention._attention, module, **x)
            t_eager = statistics.median(timing_samples_us(run_eager, args.reps))
            t_ours = statistics.median(timing_samples_us(run_ours, args.reps))
            row = {"layer": kind, "tokens": s, "rows": length, "most_attended": width, "heads": HEADS,
                   "eager_us": t_eager, "wavemla_us": t_ours, "ratio": t_eager / t_ours,
                   "check": bad or "ok", "gpu": torch.cuda.get_device_name()}  # fmt: skip
            rows.append(row)
            print(f"{kind:>8} {s:>7} {length:>7} {width:>5}  {t_eager:8.1f}  {t_ours:10.1f}  {t_eager / t_ours:13.2f}"
                  f"  {bad or 'ok'}", flush=True)  # fmt: skip
            del q, kv, mask, x, ours, want, run_eager, run_ours
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["check"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
