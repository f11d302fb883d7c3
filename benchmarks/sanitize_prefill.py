"""The sparse prefill at small shapes for compute-sanitizer: every tile the planner can pick that fits this GPU,
and lists cut into pieces (partials and their combine), d_qk 512 and 576, 3 / 64 / 128 heads, invalid indices,
lengths and a sink, each result checked against the fp64 reference. Exit code 1 on any mismatch.

    compute-sanitizer --tool memcheck python3 benchmarks/sanitize_prefill.py
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from wavemla.device import current_spec, get_spec
from wavemla.kernels.sparse_prefill import sparse_prefill
from wavemla.plan import KernelConfig, PrefillWorkload, _prefill_resources, all_prefill_configs, plan_sparse_prefill
from wavemla.reference.sparse_prefill import sparse_prefill_ref
from wavemla.testing import TOLERANCES, check_close, rows_out_tolerance


def main() -> int:
    # on a machine without a GPU this runs through Triton's interpreter (TRITON_INTERPRET=1), in fp16
    device, dtype = ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float16)
    lane = "gpu" if device == "cuda" else "interp"
    spec = current_spec() if device == "cuda" else get_spec("h200")
    bad = 0
    for s_q, h_q, d_qk, s_kv, topk in ((2, 3, 512, 100, 70), (2, 64, 576, 90, 130), (1, 128, 512, 40, 64)):
        g = torch.Generator().manual_seed(s_q * 1000 + h_q)
        q = torch.randn((s_q, h_q, d_qk), generator=g).to(dtype).to(device)
        kv = torch.randn((s_kv, 1, d_qk), generator=g).to(dtype).to(device)
        idx = torch.randint(-3, s_kv + 3, (s_q, 1, topk), generator=g, dtype=torch.int32).to(device)
        length = torch.tensor([topk - 5, 2**31 - 1][:s_q], dtype=torch.int32, device=device)
        sink = torch.randn((h_q,), generator=g).to(device)
        ref = sparse_prefill_ref(q, kv, idx, sm_scale=d_qk**-0.5, attn_sink=sink, topk_length=length)
        planned = plan_sparse_prefill(PrefillWorkload(s_q, h_q, topk, d_qk), spec)
        for cfg, splits in [(c, 1) for c in all_prefill_configs()] + [(KernelConfig(16, 16, 4, 1), 3)]:
            if _prefill_resources(cfg, spec.arch, d_qk, None).smem_bytes > spec.smem_per_block:
                continue
            # the last: each list cut into 3 pieces of whole 16-entry tiles (partials, then the combine)
            pieces = -(-topk // cfg.block_n)
            plan = dataclasses.replace(planned, config=cfg, splits=splits, piece_tiles=-(-pieces // splits))
            got = sparse_prefill(q, kv, idx, d_qk**-0.5, plan, sink, length)
            tols = (rows_out_tolerance(lane, (kv,) if dtype == torch.bfloat16 else ()), TOLERANCES[("lse", lane)],
                    TOLERANCES[("lse", lane)])  # fmt: skip
            for name, a, b, tol in zip(("out", "max_logits", "lse"), got, ref, tols, strict=True):
                problem = check_close(name, a, b, tol)
                if problem is not None:
                    bad += 1
                    print(f"s_q={s_q} h={h_q} d_qk={d_qk} {cfg} splits={splits}: {problem}")
            print(f"s_q={s_q} h={h_q} d_qk={d_qk} {cfg} splits={splits}: checked", flush=True)
    print(f"sanitize_prefill: {bad} mismatch(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
