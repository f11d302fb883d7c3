"""wavemla's sparse decode against the Triton DeepSeek-V4 decodes SGLang ships, on one GPU and the same inputs.

Providers (DeepSeek-V4 FP8 MODEL1 caches, s_q = 1):

- ``wavemla``: :func:`wavemla.sparse_mla_decode` with the planner's plan.
- ``sglang-sm120``: SGLang's fallback for GPUs without FlashMLA when FlashInfer is absent
  (``flash_mla_sparse_decode_triton`` in ``sglang/kernels/ops/attention/flash_mla_sm120_triton.py``): one program
  per (request, head), the window and the compressed rows in two launches, then merged and the sink applied with
  torch operations.
- ``sglang-triton``: SGLang's Triton DeepSeek-V4 decode (``triton_sparse_attn_decode`` in
  ``sglang/kernels/ops/attention/dsv4/triton_sparse_decode/``, the backend ``SGLANG_HACK_FLASHMLA_BACKEND=triton``
  selects): head-block tiles over both caches in one kernel, split-K with a combine kernel at small batches,
  autotuned.

The SGLang modules are read from an unpacked SGLang wheel (``--sglang DIR``, the folder that holds ``sglang/``).
Only those kernel modules run: the packages above them are entered without their ``__init__`` code (which starts
the server's imports), and the one SGLang helper the fused kernels import (``is_gfx942_supported``, an AMD check)
answers False. Every provider's output is checked against the fp64 reference with the package's GPU tolerances;
only a provider whose ``out`` matches is timed (CUDA-graph replay, L2 flushed, median of ``--reps`` in each of
``--rounds`` rounds that alternate the providers; the median of the round medians is reported). A provider whose
call cannot be captured in a CUDA graph is timed eagerly and marked so. The copy ceiling is measured in the same
run.

With ``TRITON_OVERRIDE_ARCH=sm120`` in the environment every provider is built along Triton's sm_120 code path
(``mma.sync``, no wgmma, no warp specialization), the nearest an H100 or H200 gets to an RTX PRO 6000; the SM count
and memory stay the GPU's.

    PYTHONPATH=src python3 benchmarks/experiments/engines_ab.py OUT.json --sglang DIR [--points csa:64 hca-h16:8 ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import statistics
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

POINTS = [f"{mode}{h}:{b}" for h in ("", "-h16") for mode in ("csa", "hca") for b in (1, 8, 32, 64, 128)]
SCALE = 512**-0.5


def _package(name: str, path: Path) -> None:
    """Enter package ``name`` (a folder) without running its ``__init__``."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]
    sys.modules[name] = mod


def load_sglang(root: Path) -> dict[str, Callable[..., Any]]:
    """The two SGLang decode entry points, from the unpacked wheel at ``root``."""
    pkg = root / "sglang"
    if not (pkg / "kernels" / "ops" / "attention" / "flash_mla_sm120_triton.py").is_file():
        raise SystemExit(f"--sglang {root}: no sglang/kernels/ops/attention/flash_mla_sm120_triton.py under it")
    for dotted in ("", ".kernels", ".kernels.ops", ".kernels.ops.attention", ".kernels.ops.attention.dsv4",
                   ".kernels.ops.attention.dsv4.triton_sparse_decode", ".srt", ".srt.utils"):  # fmt: skip
        _package("sglang" + dotted, pkg.joinpath(*dotted.split(".")[1:]))
    common = types.ModuleType("sglang.srt.utils.common")
    common.is_gfx942_supported = lambda: False  # type: ignore[attr-defined]
    sys.modules["sglang.srt.utils.common"] = common
    sm120 = importlib.import_module("sglang.kernels.ops.attention.flash_mla_sm120_triton")
    fused = importlib.import_module(
        "sglang.kernels.ops.attention.dsv4.triton_sparse_decode.triton_mla_kernels_decode_optimized"
    )
    return {"sm120": sm120.flash_mla_sparse_decode_triton, "triton": fused.triton_sparse_attn_decode}


def providers(kw: dict[str, Any], sg: dict[str, Callable[..., Any]]) -> tuple[dict[str, Callable[[], Any]], Any]:
    """Each provider's call on the inputs ``kw`` (keyword arguments of sparse_mla_decode), returning
    (out [b, 1, h, 512], lse [b, h, 1]); and the metadata object wavemla's call plans."""
    import torch

    from wavemla import get_mla_metadata, sparse_mla_decode

    meta, _ = get_mla_metadata()
    q, sink = kw["q"], kw["attn_sink"]
    cache = kw["kv_cache"].view(torch.float8_e4m3fn)
    extra = kw["extra_kv_cache"].view(torch.float8_e4m3fn)

    def scope(c: Any, idx: Any) -> types.SimpleNamespace:
        return types.SimpleNamespace(blocked_k=c, blocked_k_quantized=c, indices_in_kvcache=idx, topk_length=None)

    main_scope, extra_scope = scope(cache, kw["indices"]), scope(extra, kw["extra_indices"])
    sm120_kw = dict(q=q, k_cache=cache, indices=kw["indices"], topk_length=None, attn_sink=sink, head_dim_v=512,
                    softmax_scale=SCALE, extra_k_cache=extra, extra_indices=kw["extra_indices"],
                    extra_topk_length=None)  # fmt: skip
    calls = {
        "wavemla": lambda: sparse_mla_decode(**kw, softmax_scale=SCALE, metadata=meta),
        "sglang-sm120": lambda: sg["sm120"](**sm120_kw),
        "sglang-triton": lambda: sg["triton"](q, main_scope, extra_scope, SCALE, d_v=512, attn_sink=sink),
    }
    return calls, meta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--sglang", required=True, type=Path, help="folder holding the unpacked wheel's sglang/")
    ap.add_argument("--points", nargs="+", default=POINTS, help="MODE[-hN]:B (default: CSA/HCA, h 64/16, b 1-128)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()

    import torch
    import triton

    from wavemla.device import triton_override_arch
    from wavemla.reference import sparse_decode_ref
    from wavemla.testing import TOLERANCES, check_close
    from wavemla.tools.bench import measure_ceilings, timings_us, traffic

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from merge_ab import decode_point

    sg = load_sglang(args.sglang)
    ceil = measure_ceilings()
    arch = triton_override_arch()
    path = f"sm_{arch} (TRITON_OVERRIDE_ARCH)" if arch else "native"
    head = (f"{torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}; code path "
            f"{path}; copy {ceil.copy_gbps:.0f} GB/s")  # fmt: skip
    print(head, flush=True)
    records: list[dict[str, Any]] = []
    for point in args.points:
        m = re.fullmatch(r"(csa|hca)(?:-h(\d+))?:(\d+)", point)
        if m is None:
            raise SystemExit(f"point {point!r}: expected MODE[-hN]:B")
        mode, h, b = m.group(1), int(m.group(2) or 64), int(m.group(3))
        kw, _ = decode_point(mode, b, None, seed=0, h=h)
        rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
        ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], softmax_scale=SCALE, **rest)
        _, nbytes = traffic(kw)
        calls, meta = providers(kw, sg)
        checks: dict[str, str] = {}
        for name, fn in calls.items():
            try:
                o, lse = fn()
                torch.cuda.synchronize()
            except Exception as exc:  # an engine's kernel that fails on this GPU or shape is reported, not fatal
                checks[name] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                continue
            bad_o = check_close("out", o.reshape(ref_o.shape), ref_o, TOLERANCES[("out", "gpu")])
            bad_l = check_close("lse", lse.reshape(ref_l.shape), ref_l, TOLERANCES[("lse", "gpu")])
            checks[name] = "ok" if not (bad_o or bad_l) else (bad_o or "out ok; " + str(bad_l))[:200]
        timed = {n: fn for n, fn in calls.items() if checks[n] == "ok" or checks[n].startswith("out ok")}
        p = meta.plan
        plan = None if p is None else f"{p.config}:{p.units_per_part}+{p.whole_units}"
        rounds: dict[str, list[float]] = {n: [] for n in timed}
        graphed: dict[str, bool] = {n: True for n in timed}
        for _ in range(args.rounds):
            for name, fn in timed.items():
                try:
                    t = timings_us(fn, reps=args.reps, graph=graphed[name])[1]
                except Exception:  # not capturable in a CUDA graph: eager launches, L2 still flushed
                    graphed[name] = False
                    t = timings_us(fn, reps=args.reps, graph=False)[1]
                rounds[name].append(t)
        med = {n: statistics.median(v) for n, v in rounds.items()}
        line = f"wavemla plan {plan}; " + " ".join(f"{n} {med[n]:8.1f}{'' if graphed[n] else '(eager)'}" for n in med)
        ratios = {n: med[n] / med["wavemla"] for n in med if "wavemla" in med}
        print(f"{point:10s} {line}  | x wavemla: "
              + " ".join(f"{n} {r:.2f}" for n, r in ratios.items() if n != "wavemla")
              + ("" if all(c == "ok" for c in checks.values()) else f"  | checks {checks}"), flush=True)  # fmt: skip
        pct = {n: 100 * nbytes / (t * 1e3) / ceil.copy_gbps for n, t in med.items()}
        records.append(dict(point=point, mode=mode, batch=b, h_q=h, wavemla_plan=plan, checks=checks, rounds_us=rounds,
                            median_us=med, graph=graphed, ratio_to_wavemla=ratios, bytes=nbytes,
                            pct_of_copy=pct))  # fmt: skip
        # written after every point, so a run cut by a time limit keeps what it measured
        Path(args.json).write_text(json.dumps(
            {"argv": sys.argv, "device": head, "copy_gbps": ceil.copy_gbps, "records": records}, indent=1))  # fmt: skip
        del kw, rest, ref_o, ref_l, calls, timed
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
