"""Benchmark of the sparse prefill (``wavemla.sparse_mla_prefill``) against a PyTorch baseline, with ceilings.

Each case is FlashMLA's prefill benchmark shape: ``s_q`` query tokens, each attending over ``topk`` rows drawn at
random without repetition from ``s_kv`` rows (DeepSeek-V4: 512 + 128 = 640 rows of 512; DeepSeek-V3.2: 2048 rows of
576), bf16, with a sink; the ``-sN`` cases are short prompts of N tokens, whose lists the planner cuts into pieces
(``wavemla-whole`` then times the same tile over whole lists). Times are CUDA-graph replays with L2 flushed (median
of ``reps``); FLOPs count ``2·h·(d_qk + 512)`` per row a token attends over (the ``topk_length`` leading entries of
its list) and the roofline is the bf16 GEMM rate measured in the same run. Every provider's
output is checked against the fp64 reference on a sample of tokens before it is timed. The PyTorch baseline gathers
each token's rows, then runs two batched matmuls with an fp32 softmax between them, in chunks of tokens.

Run on a CUDA machine::

    python -m wavemla.tools.bench_prefill --json out.json [--reps 20] [--cases dsv4-h64 v32-h128] [--tiles]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from wavemla.reference.sparse_prefill import sparse_prefill_ref

# every SHORT_LIST_EVERY-th token (the first, the sixth, ...) has half of its list (topk_length topk // 2)
SHORT_LIST_EVERY = 5


@dataclass(frozen=True)
class PrefillCase:
    name: str
    s_q: int
    s_kv: int
    topk: int
    h_q: int
    d_qk: int

    @property
    def flops(self) -> float:
        """``2·h·(d_qk + 512)`` per row a token of :func:`make_inputs` attends over: ``topk``, or half of it for the
        tokens with a shorter list."""
        short = -(-self.s_q // SHORT_LIST_EVERY)
        rows = (self.s_q - short) * self.topk + short * (self.topk // 2)
        return 2.0 * self.h_q * (self.d_qk + 512) * rows


CASES = {
    c.name: c
    for c in (
        PrefillCase("dsv4-h64", 4096, 8192, 640, 64, 512),
        PrefillCase("dsv4-h128", 4096, 8192, 640, 128, 512),
        PrefillCase("dsv4-h64-32k", 4096, 32768, 640, 64, 512),
        PrefillCase("dsv4-h16", 4096, 8192, 640, 16, 512),
        PrefillCase("v32-h128", 4096, 32768, 2048, 128, 576),
        # short prompts (a chat turn's new tokens), where the lists are cut into pieces
        PrefillCase("dsv4-h64-s16", 16, 8192, 640, 64, 512),
        PrefillCase("dsv4-h64-s100", 100, 8192, 640, 64, 512),
        PrefillCase("dsv4-h16-s64", 64, 8192, 640, 16, 512),
        PrefillCase("v32-h16-s32", 32, 32768, 2048, 16, 576),
    )
}
CHECK_TOKENS = 32  # tokens compared with the fp64 reference per provider


def make_inputs(case: PrefillCase, device: str = "cuda", seed: int = 0) -> dict[str, Any]:
    """bf16 q and kv, int32 indices (distinct rows per token, a fifth of the tokens with a shorter list), fp32
    sink and topk_length."""
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn((case.s_q, case.h_q, case.d_qk), generator=g, device=device).to(torch.bfloat16)
    kv = torch.randn((case.s_kv, 1, case.d_qk), generator=g, device=device).to(torch.bfloat16)
    idx = torch.empty((case.s_q, 1, case.topk), dtype=torch.int32, device=device)
    for t0 in range(0, case.s_q, 512):  # random distinct rows: the top-k of random keys, 512 tokens at a time
        t1 = min(t0 + 512, case.s_q)
        keys = torch.rand((t1 - t0, case.s_kv), generator=g, device=device)
        idx[t0:t1, 0] = keys.topk(case.topk, dim=-1).indices.to(torch.int32)
    length = torch.full((case.s_q,), case.topk, dtype=torch.int32, device=device)
    length[::SHORT_LIST_EVERY] = case.topk // 2
    sink = torch.randn((case.h_q,), generator=g, device=device)
    return {"q": q, "kv": kv, "indices": idx, "sm_scale": case.d_qk**-0.5, "attn_sink": sink, "topk_length": length}


def torch_prefill(inputs: dict[str, Any], chunk: int = 256) -> torch.Tensor:
    """The PyTorch baseline's output ``[s_q, h_q, 512]`` bf16 (gather, bf16 matmuls, fp32 softmax with the sink)."""
    q, kv, idx, length = inputs["q"], inputs["kv"], inputs["indices"], inputs["topk_length"]
    s_q, _, _ = q.shape
    topk = idx.shape[-1]
    rows = kv[:, 0]
    out = torch.empty((s_q, q.shape[1], 512), dtype=q.dtype, device=q.device)
    sink = inputs["attn_sink"]
    for t0 in range(0, s_q, chunk):
        t1 = min(t0 + chunk, s_q)
        i = idx[t0:t1, 0].long()
        valid = (i >= 0) & (i < rows.shape[0]) & (torch.arange(topk, device=q.device) < length[t0:t1, None])
        k = rows[i.clamp(0, rows.shape[0] - 1)]  # [c, topk, d_qk]
        s = torch.bmm(q[t0:t1], k.transpose(1, 2)).float() * inputs["sm_scale"]
        s = s.masked_fill(~valid[:, None, :], float("-inf"))
        s = torch.cat([s, sink.view(1, -1, 1).expand(t1 - t0, -1, 1)], dim=-1)  # the sink as one more logit
        p = torch.softmax(s, dim=-1)[..., :topk].to(q.dtype)
        out[t0:t1] = torch.bmm(p, k[..., :512])
    return out


def _check(name: str, got: torch.Tensor, inputs: dict[str, Any]) -> float:
    """Compare ``got`` with the fp64 reference over the first CHECK_TOKENS tokens within the tests' output tolerance
    (:func:`wavemla.testing.rows_out_tolerance`; raises with the worst element when outside it); returns the
    largest ``|got - ref| / (1 + |ref|)``, the error the benchmark records."""
    from wavemla.testing import check_close, rows_out_tolerance

    n = CHECK_TOKENS
    ref, _, _ = sparse_prefill_ref(
        inputs["q"][:n], inputs["kv"], inputs["indices"][:n], sm_scale=inputs["sm_scale"],
        attn_sink=inputs["attn_sink"], topk_length=inputs["topk_length"][:n],
    )  # fmt: skip
    kv = inputs["kv"]
    tol = rows_out_tolerance("gpu" if kv.is_cuda else "interp", (kv,) if kv.dtype == torch.bfloat16 else ())
    problem = check_close("out", got[:n], ref, tol)
    if problem is not None:
        raise AssertionError(f"{name}: differs from the fp64 reference: {problem}")
    return ((got[:n].double() - ref).abs() / (1.0 + ref.abs())).max().item()


def _bench_case(
    case: PrefillCase, spec: Any, gemm_tflops: float, reps: int, tiles: bool, baseline: bool
) -> list[dict[str, Any]]:
    """The rows of one case: the planner's tile, then every other tile that fits (``tiles``), then the baseline."""
    from wavemla import api
    from wavemla.kernels.sparse_prefill import sparse_prefill
    from wavemla.plan import PrefillWorkload, _prefill_resources, all_prefill_configs, plan_sparse_prefill
    from wavemla.tools.bench import timings_us

    inputs = make_inputs(case)
    args = (inputs["q"], inputs["kv"], inputs["indices"], inputs["sm_scale"])
    sink, length = inputs["attn_sink"], inputs["topk_length"]
    planned = plan_sparse_prefill(PrefillWorkload(case.s_q, case.h_q, case.topk, case.d_qk), spec)
    label = str(planned.config) + (f"/{planned.splits}" if planned.splits > 1 else "")  # tile / pieces a list
    providers: list[tuple[str, str, Any]] = [
        ("wavemla", label, lambda: api.sparse_mla_prefill(*args, attn_sink=sink, topk_length=length)[0])
    ]
    if planned.splits > 1:  # the same tile over whole lists: what cutting them gains
        whole = dataclasses.replace(planned, splits=1, piece_tiles=0)
        providers.append(("wavemla-whole", str(planned.config), lambda: sparse_prefill(*args, whole, sink, length)[0]))
    if tiles:  # every other tile that fits, over whole lists
        for cfg in all_prefill_configs():
            res = _prefill_resources(cfg, spec.arch, case.d_qk, None)
            if cfg != planned.config and res.smem_bytes <= spec.smem_per_block:
                forced = dataclasses.replace(planned, config=cfg, splits=1, piece_tiles=0)
                providers.append(("wavemla-tile", str(cfg), lambda p=forced: sparse_prefill(*args, p, sink, length)[0]))
    if baseline:
        providers.append(("torch", "gather+bmm", lambda: torch_prefill(inputs)))
    rows: list[dict[str, Any]] = []
    for provider, cfg_name, fn in providers:
        err = _check(f"{case.name} {provider} {cfg_name}", fn(), inputs)
        p20, med, p80 = timings_us(fn, reps, flush=True, graph=True)
        tflops = case.flops / med / 1e6
        rows.append({
            **dataclasses.asdict(case), "provider": provider, "config": cfg_name, "median_us": med, "p20_us": p20,
            "p80_us": p80, "reps": reps, "flops": case.flops, "tflops": tflops,
            "pct_of_gemm": 100.0 * tflops / gemm_tflops, "max_err": err,
        })  # fmt: skip
        print(f"{case.name:14s} {provider:13s} {cfg_name:12s} {med:9.1f} us  {tflops:6.1f} TFLOP/s  "
              f"{rows[-1]['pct_of_gemm']:5.1f}% of GEMM  err {err:.2g}", flush=True)  # fmt: skip
    if baseline:
        print(f"{case.name:14s} torch / wavemla {rows[-1]['median_us'] / rows[0]['median_us']:.2f}x", flush=True)
    return rows


def run_prefill_bench(
    cases: Sequence[PrefillCase], reps: int = 20, tiles: bool = False, baseline: bool = True
) -> dict[str, Any]:
    """Time every case (the planner's tile, every other tile that fits with ``tiles``, the PyTorch baseline with
    ``baseline``); returns the ceilings and one row per (case, provider)."""
    from wavemla.device import current_spec
    from wavemla.tools.bench import environment, measure_ceilings

    if not torch.cuda.is_available():
        raise RuntimeError("the prefill benchmark needs a CUDA device")
    ceil = measure_ceilings()
    spec = current_spec()
    rows: list[dict[str, Any]] = []
    for case in cases:
        rows += _bench_case(case, spec, ceil.gemm_tflops, reps, tiles, baseline)
        torch.cuda.empty_cache()
    return {"environment": environment(), "ceilings": dataclasses.asdict(ceil), "gpu_spec": spec.name, "rows": rows}


def main(argv: Sequence[str] | None = None) -> int:
    from wavemla.cli import output_file_problem, summary

    parser = argparse.ArgumentParser(prog="python -m wavemla.tools.bench_prefill", description=summary(__doc__))
    parser.add_argument("--json", required=True, help="write the ceilings and rows here")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES), help="default: all")
    parser.add_argument(
        "--reps", type=int, default=20, help="timed replays per provider, at least 3 (default 20; median reported)"
    )
    parser.add_argument("--tiles", action="store_true", help="also time every other tile that fits the GPU")
    parser.add_argument("--no-baseline", action="store_true", help="leave the PyTorch baseline out")
    parser.add_argument("--label", default="", help="free text stored in the JSON (e.g. the git SHA)")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error(f"--reps: expected at least 3, got {args.reps}")
    problem = output_file_problem("--json", args.json)  # written once every case has run
    if problem is not None:
        parser.error(problem)
    if not torch.cuda.is_available():
        parser.exit(2, f"{parser.prog}: needs a CUDA GPU\n")
    cases = [CASES[n] for n in dict.fromkeys(args.cases)]  # a case named twice would be timed and written twice
    result = run_prefill_bench(cases, args.reps, args.tiles, not args.no_baseline)
    result["label"] = args.label
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    gemm = result["ceilings"]["gemm_tflops"]
    print(f"ceilings: copy {result['ceilings']['copy_gbps']:.0f} GB/s, bf16 GEMM {gemm:.0f} TFLOP/s")
    ours = {r["name"]: r["median_us"] for r in result["rows"] if r["provider"] == "wavemla"}
    print("median us (the planner's tile): " + ", ".join(f"{k} {v:.1f}" for k, v in ours.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
