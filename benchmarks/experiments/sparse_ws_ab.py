"""The warp-specialized sparse decode (kernels/sparse_decode_ws.py) on the GPU: every case checked against the fp64
reference with the Triton kernel's tolerances (and the largest difference from the Triton kernel's output), then
timed against it (CUDA-graph replay, L2 flushed, median) at the FlashMLA anchor shapes.

    PYTHONPATH=src python3 benchmarks/experiments/sparse_ws_ab.py check
    PYTHONPATH=src python3 benchmarks/experiments/sparse_ws_ab.py time --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.reference import sparse_decode_ref
from wavemla.testing import TOLERANCES, check_close, make_sparse_decode_inputs

CSA = dict(topk=128, page=256, extra_topk=512, extra_page=64, extra_pool=2048)
HCA = dict(topk=128, page=256, extra_topk=1024, extra_page=2)
TILES = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1)

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("csa-b8", dict(batch=8, h_q=64, **CSA), {}),
    ("hca-b4", dict(batch=4, h_q=64, **HCA), {}),
    ("csa-s2-h128-b5", dict(batch=5, s_q=2, h_q=128, **CSA), {}),
    ("csa-b67-pool999", dict(batch=67, h_q=64, **dict(CSA, extra_pool=999)), {}),
    ("csa-b8-invalid30", dict(batch=8, h_q=64, invalid_fraction=0.3, **CSA), {}),
    ("csa-b8-nosink", dict(batch=8, h_q=64, sink=False, **CSA), {}),
    ("swa-only-b6", dict(batch=6, h_q=64, topk=128, page=64), {}),
    ("csa-b8-splits3", dict(batch=8, h_q=64, **CSA), dict(WAVEMLA_NUM_SPLITS=3)),
    ("csa-b3-ctas7", dict(batch=3, h_q=64, **CSA), dict(WAVEMLA_TARGET_CTAS=7)),
    ("csa-b3-ctas1", dict(batch=3, h_q=64, **CSA), dict(WAVEMLA_TARGET_CTAS=1)),
    ("csa-b9-invariant", dict(batch=9, h_q=64, **CSA), dict(WAVEMLA_BATCH_INVARIANT=True)),
]


def _ref(kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    keys = ("topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length", "attn_sink", "softmax_scale")
    return sparse_decode_ref(kwargs["q"], kwargs["kv_cache"], kwargs["indices"], **{k: kwargs.get(k) for k in keys})


def _run(kwargs: dict[str, Any], ws: str, over: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, str]:
    with config.override(WAVEMLA_SPARSE_WS=ws, **TILES, **over):
        meta, _ = get_mla_metadata()
        out, lse = sparse_mla_decode(**kwargs, metadata=meta)
        torch.cuda.synchronize()
    return out, lse, str(getattr(meta.split_kernel, "name", "?"))


def check() -> int:
    bad = 0
    for name, shape, over in CASES:
        inputs = make_sparse_decode_inputs(**shape, fp8=True, dtype=torch.bfloat16, device="cuda", seed=5)
        kwargs = {k: v for k, v in inputs.items() if v is not None}
        variants = [("", kwargs)]
        if name == "csa-b8":  # per-request list lengths, 0 included, on both lists
            b = shape["batch"]
            lens = torch.tensor([0, 1, 63, 64, 65, 127, 128, 100][:b], dtype=torch.int32, device="cuda")
            xlens = torch.tensor([512, 0, 1, 300, 64, 511, 129, 2][:b], dtype=torch.int32, device="cuda")
            variants.append(("-lengths", dict(kwargs, topk_length=lens, extra_topk_length=xlens)))
        for suffix, kw in variants:
            t0 = time.time()
            out, lse, kname = _run(kw, "on", over)
            out_t, lse_t, _ = _run(kw, "off", over)
            ref_out, ref_lse = _ref(kw)
            errs = [check_close("out", out, ref_out, TOLERANCES[("out", "gpu")]),
                    check_close("lse", lse, ref_lse, TOLERANCES[("lse", "gpu")])]  # fmt: skip
            errs = [e for e in errs if e]
            scale = ref_out.abs().max().item()
            d_out = (out.float() - out_t.float()).abs().max().item() / scale
            fin = torch.isfinite(lse_t)
            d_lse = (lse[fin] - lse_t[fin]).abs().max().item() if fin.any() else 0.0
            same_inf = torch.equal(torch.isinf(lse), torch.isinf(lse_t))
            ok = not errs and same_inf and "ws" in kname
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {name}{suffix}: kernel {kname}, |ws - triton| out {d_out:.2e} of max, "
                  f"lse {d_lse:.2e}, inf lse same {same_inf} ({time.time() - t0:.1f}s) {'; '.join(errs)}")  # fmt: skip
            sys.stdout.flush()
    print(f"check: {len(CASES) + 1 - bad} ok, {bad} bad")
    return 1 if bad else 0


def timing(json_path: str | None, quick: bool = False) -> int:
    from wavemla.tools.bench import bench, measure_ceilings

    ceilings = measure_ceilings()
    print(f"ceilings: copy {ceilings.copy_gbps:.0f} GB/s, gemm {ceilings.gemm_tflops:.0f} TFLOP/s")
    rows: list[dict[str, Any]] = []
    plan = [
        (["csa"], [64], [1], [1, 8, 32, 64, 96, 128, 148, 256]),
        (["hca"], [64], [1], [1, 64, 128, 256]),
        (["csa"], [64], [2], [64, 96]),
        (["csa"], [128], [1], [64, 96]),
    ]
    if quick:  # the FlashMLA cliff points and the h=64 steps around them
        plan = [(["csa"], [64], [1], [64, 128, 148, 256]), (["csa"], [64], [2], [96]), (["csa"], [128], [1], [96])]
    for modes, heads, s_qs, batches in plan:
        for ws, cfgs in (("off", []), ("on", ["64x64x8x1"])):
            with config.override(WAVEMLA_SPARSE_WS=ws):
                recs = bench(modes, batches, heads, s_qs, True, cfgs, 15, ceilings, log=lambda s: None)
            for r in recs:
                d = dict(r.__dict__, ws=ws, forced=r.config if cfgs and r is not None else "")
                rows.append(d)
    # one line per (shape, b): Triton plan, WS at the plan's pick, WS forced 64x64
    print(f"{'mode':4} {'h':>3} {'sq':>2} {'b':>4} | {'triton':>8} | {'ws plan':>8} {'cfg':>10} | {'ws 64x64':>8} | "
          f"{'best/FlashMLA':>13}")  # fmt: skip
    keyf = lambda d: (d["mode"], d["h_q"], d["s_q"], d["batch"])  # noqa: E731
    groups: dict[Any, list[dict[str, Any]]] = {}
    for d in rows:
        groups.setdefault(keyf(d), []).append(d)
    for k, ds in groups.items():
        tri = next(d for d in ds if d["ws"] == "off")
        on = [d for d in ds if d["ws"] == "on"]
        best = min(d["median_us"] for d in ds)
        anchor = tri.get("flashmla_us")
        print(f"{k[0]:4} {k[1]:>3} {k[2]:>2} {k[3]:>4} | {tri['median_us']:8.1f} | {on[0]['median_us']:8.1f} "
              f"{on[0]['config']:>10} | {on[-1]['median_us']:8.1f} | "
              f"{(best / anchor) if anchor else float('nan'):13.2f}")  # fmt: skip
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"ceilings": ceilings.__dict__, "rows": rows}, f, indent=1, default=str)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "time"])
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="time the FlashMLA cliff points only")
    a = ap.parse_args()
    return check() if a.what == "check" else timing(a.json, a.quick)


if __name__ == "__main__":
    raise SystemExit(main())
