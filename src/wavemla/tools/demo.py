"""Run one DeepSeek-V4-Flash CSA decode step and check it against the fp64 reference.

On a CUDA GPU: batch 64, 64 heads, a 128-row sliding window (FP8 MODEL1, page 256) plus 512 compressed rows picked
from 2048 (page 64), sink on; timed with CUDA-graph replay and a flushed L2 against the copy and GEMM ceilings
measured in the same run. Without a GPU: a reduced shape through Triton's interpreter (fp16 q), checked the same way.

``--dense`` runs a DeepSeek-V3 paged dense decode step instead (d_qk 576, d_v 512, page 64): on a GPU batch 64, 128
heads, 4096 cached keys per request, bf16 rows (``--fp8``: the FP8 V3.2 cache; ``--fp8-tensor``: per-tensor FP8
rows, an engine's fp8 KV cache), timed the same way; without a GPU
batch 2, 16 heads, 200 keys per request, fp16 rows.

``--v32`` runs a DeepSeek-V3.2 sparse decode step (FlashMLA's V3.2 call: q 576 wide, index lists over the 656-byte
FP8 V3.2 cache, page 64): on a GPU batch 64, 128 heads, 2048 entries per token over 131,072 slots, timed the same
way; without a GPU batch 2, 16 heads, 64 entries (the last 8 of each list -1) over 512 slots.

``--prefill`` runs a DeepSeek-V4 sparse prefill step (FlashMLA's ``flash_mla_sparse_fwd``): on a GPU 1024 query
tokens of 64 heads, each over 640 of 8192 bf16 rows, sink on, timed the same way (1024 tokens keep the fp64
reference's gathered rows near 3 GB); without a GPU 4 tokens of 16 heads over 64 of 200 fp16 rows. ``max_logits`` is
checked too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from wavemla.testing import Tolerance


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=None, help="requests (default: 64 on GPU, 2 on CPU)")
    parser.add_argument("--cpu", action="store_true", help="use the interpreter even when a GPU is present")
    parser.add_argument(
        "--dense", action="store_true", help="a DeepSeek-V3 paged dense decode step instead (d_qk 576, page 64)"
    )
    parser.add_argument("--fp8", action="store_true", help="with --dense: the FP8 V3.2 cache instead of bf16 rows")
    parser.add_argument(
        "--fp8-tensor",
        action="store_true",
        help="with --dense: per-tensor FP8 rows (an engine's fp8 KV cache: 576 e4m3 codes, descale_k) instead",
    )
    parser.add_argument(
        "--prefill", action="store_true", help="a DeepSeek-V4 sparse prefill step instead (flash_mla_sparse_fwd)"
    )
    parser.add_argument(
        "--v32", action="store_true", help="a DeepSeek-V3.2 sparse decode step instead (q 576 wide, FP8 V3.2 cache)"
    )


def run(args: argparse.Namespace) -> int:
    import torch

    from wavemla import config

    if args.batch is not None and args.batch < 1:
        print(f"wavemla demo: --batch: expected a positive integer, got {args.batch}", file=sys.stderr)
        return 2
    # the steps that take none of the dense step's options first: their refusal says to drop them, not to add --dense
    if args.prefill and (args.dense or args.batch is not None or args.v32 or args.fp8 or args.fp8_tensor):
        print("wavemla demo: --prefill: a prefill step has query tokens, not requests, and no FP8 cache; drop --dense, "
              "--fp8, --fp8-tensor, --v32 and --batch", file=sys.stderr)  # fmt: skip
        return 2
    if args.v32 and (args.dense or args.fp8 or args.fp8_tensor):
        print("wavemla demo: --v32: a sparse decode step (its cache is always FP8 V3.2); drop --dense, --fp8 and "
              "--fp8-tensor", file=sys.stderr)  # fmt: skip
        return 2
    if args.fp8 and not args.dense:
        print(
            "wavemla demo: --fp8: the dense step's cache format (the sparse step always reads FP8 MODEL1); add --dense",
            file=sys.stderr,
        )
        return 2
    if args.fp8_tensor and (not args.dense or args.fp8):
        print("wavemla demo: --fp8-tensor: the dense step's per-tensor FP8 cache; add --dense (and drop --fp8)",
              file=sys.stderr)  # fmt: skip
        return 2
    on_gpu = torch.cuda.is_available() and not args.cpu
    if not on_gpu:
        config.use_triton_interpreter()
    try:
        return _run_step(args, on_gpu)
    except (MemoryError, RuntimeError) as exc:
        from wavemla.cli import out_of_memory

        reason = out_of_memory(exc)
        if reason is None:
            raise
        option = "" if args.batch is None else f" --batch {args.batch}:"
        print(f"wavemla demo:{option} the step does not fit in memory ({reason})", file=sys.stderr)
        return 1 if args.batch is None else 2


def _run_step(args: argparse.Namespace, on_gpu: bool) -> int:
    """The step the options name, checked against the reference (and timed on a GPU); returns the exit code."""
    import torch

    if args.prefill:
        return _run_prefill(on_gpu)
    if args.dense:
        return _run_dense(args, on_gpu)
    if args.v32:
        return _run_v32(args, on_gpu)
    from wavemla import get_mla_metadata, sparse_mla_decode
    from wavemla.reference import sparse_decode_ref
    from wavemla.testing import TOLERANCES, make_sparse_decode_inputs
    from wavemla.tools.bench import traffic

    if on_gpu:
        b = args.batch or 64
        shape: dict[str, Any] = dict(
            batch=b, h_q=64, topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048
        )
        dtype, device, lane = torch.bfloat16, "cuda", "gpu"
    else:
        b = args.batch or 2
        shape = dict(batch=b, h_q=64, topk=128, page=256, extra_topk=128, extra_page=64, extra_pool=512)
        dtype, device, lane = torch.float16, "cpu", "interp"
    print(f"wavemla demo: DSV4-Flash CSA decode step on {_where(on_gpu)}")
    print(
        f"  b={b} s_q=1 h=64 d=512, window {shape['topk']} rows (page 256) + {shape['extra_topk']} compressed rows "
        f"(page 64), FP8 MODEL1 cache, attention sink on"
    )
    inputs = make_sparse_decode_inputs(**shape, fp8=True, dtype=dtype, device=device, seed=0)
    kwargs: dict[str, Any] = {k: v for k, v in inputs.items() if v is not None}
    meta, _ = get_mla_metadata()

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        return sparse_decode_ref(
            kwargs["q"], kwargs["kv_cache"], kwargs["indices"], extra_kv_cache=kwargs["extra_kv_cache"],
            extra_indices=kwargs["extra_indices"], attn_sink=kwargs["attn_sink"],
        )  # fmt: skip

    return _check_and_time(
        lambda: sparse_mla_decode(**kwargs, metadata=meta),
        reference,
        lambda: _last_reason(meta.plan),
        (("out", TOLERANCES[("out", lane)]), ("lse", TOLERANCES[("lse", lane)])),
        traffic(inputs),
        on_gpu,
        "FP8 rows",
    )


def _last_reason(plan: Any) -> str:
    """The last reason of the plan the call made (its partition); the call plans before this is asked."""
    assert plan is not None, "the decode call did not plan its metadata"
    return str(plan.reasons[-1])


def _where(on_gpu: bool) -> str:
    import torch

    return "GPU " + torch.cuda.get_device_name() if on_gpu else "CPU (Triton interpreter)"


def _check_and_time(
    call: Callable[[], tuple[torch.Tensor, ...]],
    reference: Callable[[], tuple[torch.Tensor, ...]],
    plan_reason: Callable[[], str],
    checks: tuple[tuple[str, Tolerance], ...],
    work: tuple[float, float],
    on_gpu: bool,
    rows: str,
) -> int:
    """Run ``call`` (first, before the reference allocates), compare each of its outputs with the fp64
    ``reference``'s within the tolerance ``checks`` names for it (in order: ``("out", tol), ("lse", tol)`` for the
    decodes), print the plan and the errors, time it on a GPU against the ceilings measured in the same run
    (``work``: its FLOPs and bytes), print the result; returns the exit code."""
    import torch

    from wavemla.testing import check_close
    from wavemla.tools.bench import measure_ceilings, timings_us

    t0 = time.perf_counter()
    got = call()
    if on_gpu:
        torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    want = reference()
    problems, errors = [], []
    for (name, tol), a, b in zip(checks, got, want, strict=True):
        problems.append(check_close(name, a, b, tol))
        errors.append(f"max |{name} - ref| = {_max_error(a, b)}")
    print(f"  plan: {plan_reason()}")
    print(f"  {', '.join(errors)} (fp64 reference on the same {rows})")
    flops, nbytes = work
    if on_gpu:
        ceilings = measure_ceilings()
        p20, med, p80 = timings_us(call, reps=50, graph=True)
        floor = max(flops / (ceilings.gemm_tflops * 1e6), nbytes / (ceilings.copy_gbps * 1e3))
        print(f"  time: {med:.1f} us median (p20 {p20:.1f}, p80 {p80:.1f}; CUDA graph, L2 flushed)")
        print(
            f"  {flops / med / 1e6:.1f} TFLOP/s, {nbytes / med / 1e3:.0f} GB/s "
            f"({100 * nbytes / med / 1e3 / ceilings.copy_gbps:.0f}% of copy); ceilings: GEMM "
            f"{ceilings.gemm_tflops:.0f} TFLOP/s, copy {ceilings.copy_gbps:.0f} GB/s -> roofline {floor:.1f} us, "
            f"{100 * floor / med:.0f}% of roofline"
        )
    else:
        print(f"  interpreter run: {first_s:.2f} s for {flops / 1e6:.1f} MFLOP (timing is not meaningful on CPU)")
    bad = [p for p in problems if p]
    for p in bad:
        print(f"  MISMATCH: {p}")
    print("  result: " + ("FAIL" if bad else "PASS (matches the reference within FlashMLA's tolerances)"))
    return 1 if bad else 0


def _max_error(actual: torch.Tensor, expected: torch.Tensor) -> str:
    """The largest |actual - expected| over the reference's finite elements (a token without rows: lse +inf,
    max_logits -inf on both sides), or why there is none; a wrong shape is check_close's to report."""
    import torch

    if actual.shape != expected.shape:
        return f"n/a (shape {tuple(actual.shape)}, expected {tuple(expected.shape)})"
    finite = torch.isfinite(expected)
    if not bool(finite.any()):
        return "n/a (no finite reference element)"
    return f"{(actual.double() - expected)[finite].abs().max().item():.2e}"


def _run_dense(args: argparse.Namespace, on_gpu: bool) -> int:
    """One DeepSeek-V3 paged dense decode step, checked against the fp64 reference (and timed on a GPU)."""
    import torch

    from wavemla import dense_mla_decode, get_mla_metadata
    from wavemla.reference import dense_decode_ref
    from wavemla.testing import TOLERANCES, dense_out_tolerance, make_dense_decode_inputs
    from wavemla.tools.bench import dense_traffic

    if on_gpu:
        b, h, seqlen = args.batch or 64, 128, 4096
        dtype, device, lane = torch.bfloat16, "cuda", "gpu"
    else:
        b, h, seqlen = args.batch or 2, 16, 200
        dtype, device, lane = torch.float16, "cpu", "interp"
    page = 64
    cache = "FP8 V3.2 cache (656 B per key)" if args.fp8 else f"{str(dtype).removeprefix('torch.')} rows"
    if args.fp8_tensor:
        cache = "per-tensor FP8 cache (576 B per key, descale_k)"
    print(f"wavemla demo: DeepSeek-V3 paged dense decode step on {_where(on_gpu)}")
    print(f"  b={b} s_q=1 h={h} d_qk=576 d_v=512, {seqlen} keys per request (page {page}), {cache}")
    inputs: dict[str, Any] = make_dense_decode_inputs(
        lengths=[seqlen] * b, h_q=h, page=page, fp8="tensor" if args.fp8_tensor else args.fp8, dtype=dtype,
        device=device, seed=0,
    )  # fmt: skip
    meta, _ = get_mla_metadata()
    return _check_and_time(
        lambda: dense_mla_decode(**inputs, metadata=meta),
        lambda: dense_decode_ref(**inputs),
        lambda: _last_reason(meta.dense_plan),
        (("out", dense_out_tolerance(inputs["k_cache"], lane)), ("lse", TOLERANCES[("lse", lane)])),
        dense_traffic([seqlen] * b, 1, h, 576, args.fp8 or args.fp8_tensor, page, args.fp8_tensor),
        on_gpu,
        "FP8 rows" if args.fp8 or args.fp8_tensor else "rows",
    )


def _run_v32(args: argparse.Namespace, on_gpu: bool) -> int:
    """One DeepSeek-V3.2 sparse decode step, checked against the fp64 reference (and timed on a GPU)."""
    import torch

    from wavemla import get_mla_metadata, sparse_mla_decode
    from wavemla.reference import sparse_decode_ref
    from wavemla.reference.fp8_v32 import BYTES_PER_TOKEN, quantize_v32
    from wavemla.testing import TOLERANCES, dense_out_tolerance

    if on_gpu:
        b, h, topk, blocks, unused = args.batch or 64, 128, 2048, 2048, 0
        dtype, device, lane = torch.bfloat16, "cuda", "gpu"
    else:
        b, h, topk, blocks, unused = args.batch or 2, 16, 64, 8, 8
        dtype, device, lane = torch.float16, "cpu", "interp"
    page = 64
    slots = blocks * page
    print(f"wavemla demo: DeepSeek-V3.2 sparse decode step on {_where(on_gpu)}")
    padding = f", the last {unused} entries -1" if unused else ""
    print(f"  b={b} s_q=1 h={h} d_qk=576 d_v=512, {topk} list entries per token over {slots} slots (page {page}"
          f"{padding}), FP8 V3.2 cache ({BYTES_PER_TOKEN} B per key)")  # fmt: skip
    gen = torch.Generator(device=device).manual_seed(0)
    cache = quantize_v32(torch.randn(blocks, page, 1, 576, device=device, generator=gen))
    idx = torch.rand(b, slots, device=device, generator=gen).argsort(-1)[:, :topk].to(torch.int32)
    idx[:, topk - unused :] = -1
    x: dict[str, Any] = {
        "q": (torch.randn(b, 1, h, 576, device=device, generator=gen) * 0.5).to(dtype),
        "kv_cache": cache,
        "indices": idx.view(b, 1, topk),
    }
    meta, _ = get_mla_metadata()
    keys = float(b * (topk - unused))
    work = (2.0 * h * (576 + 512) * keys, keys * BYTES_PER_TOKEN + b * topk * 4 + b * h * (2 * 576 + 2 * 512 + 4))
    return _check_and_time(
        lambda: sparse_mla_decode(**x, metadata=meta),
        lambda: sparse_decode_ref(**x),
        lambda: _last_reason(meta.dense_plan),
        (("out", dense_out_tolerance(cache, lane)), ("lse", TOLERANCES[("lse", lane)])),
        work,
        on_gpu,
        "FP8 rows",
    )


def _run_prefill(on_gpu: bool) -> int:
    """One DeepSeek-V4 sparse prefill step, checked against the fp64 reference (and timed on a GPU)."""
    import torch

    from wavemla import sparse_mla_prefill
    from wavemla.plan import PrefillWorkload, plan_sparse_prefill
    from wavemla.reference.sparse_prefill import sparse_prefill_ref
    from wavemla.testing import TOLERANCES, rows_out_tolerance
    from wavemla.tools.bench_prefill import PrefillCase, make_inputs

    case = PrefillCase("gpu", 1024, 8192, 640, 64, 512) if on_gpu else PrefillCase("cpu", 4, 200, 64, 16, 512)
    lane = "gpu" if on_gpu else "interp"
    x = make_inputs(case, device="cuda" if on_gpu else "cpu")
    if not on_gpu:
        x = {**x, "q": x["q"].half(), "kv": x["kv"].half()}
    print(f"wavemla demo: DeepSeek-V4 sparse prefill step on {_where(on_gpu)}")
    rows = str(x["kv"].dtype).removeprefix("torch.")
    print(f"  s_q={case.s_q} h={case.h_q} d_qk={case.d_qk}, {case.topk} of {case.s_kv} {rows} rows per token, a fifth "
          "of the tokens with half the list, sink on")  # fmt: skip
    device = torch.device("cuda" if on_gpu else "cpu")
    from wavemla.api import _device_spec

    plan = plan_sparse_prefill(PrefillWorkload(case.s_q, case.h_q, case.topk, case.d_qk), _device_spec(device))
    kv_bytes = x["kv"].numel() * x["kv"].element_size()
    io_bytes = 2 * x["q"].numel() * x["q"].element_size() + x["indices"].numel() * 4
    bf16 = (x["kv"],) if x["kv"].dtype == torch.bfloat16 else ()
    return _check_and_time(
        lambda: sparse_mla_prefill(**x),
        lambda: sparse_prefill_ref(x["q"], x["kv"], x["indices"], sm_scale=x["sm_scale"], attn_sink=x["attn_sink"],
                                   topk_length=x["topk_length"]),
        lambda: "; ".join(plan.reasons),
        (("out", rows_out_tolerance(lane, bf16)), ("max_logits", TOLERANCES[("lse", lane)]),
         ("lse", TOLERANCES[("lse", lane)])),
        (case.flops, float(kv_bytes + io_bytes)),
        on_gpu,
        "rows",
    )  # fmt: skip
