"""Whether the split kernel's workload-sized integers (``WORKLOAD_INTS``) change its code when they are known to be
multiples of 16: every plannable configuration compiled offline for sm_80, sm_90 and sm_120 with all of them marked
``tt.divisibility = 16`` and with none, PTX compared (the kernel's name masked). First a control: dropping the hints
of two strides that do matter (``stride_qh``, ``stride_kv_tok``) must change the PTX. No GPU needed; run with
Triton's interpreter off.

    PYTHONPATH=src python3 benchmarks/experiments/alignment_probe.py
"""

from __future__ import annotations

from typing import Any

import triton

from wavemla.resources import sparse_decode_ptx, table_requests


def ptx(cfg: Any, is_fp8: bool, q_dtype: str, arch: int, marked: bool, drop: tuple[str, ...] = ()) -> str:
    return sparse_decode_ptx(cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, is_fp8, q_dtype, arch,
                             mark_workload=marked, drop=drop)  # fmt: skip


def main() -> int:
    print(f"triton {triton.__version__}")
    cfg, is_fp8 = table_requests()[0]
    control = ptx(cfg, is_fp8, "fp16", 90, True) != ptx(cfg, is_fp8, "fp16", 90, True, ("stride_qh", "stride_kv_tok"))
    verdict = "changes" if control else "KEEPS"
    print(f"control, {cfg} sm_90: dropping the stride_qh/stride_kv_tok hints {verdict} the PTX")
    same = 0
    total = 0
    for cfg, is_fp8 in table_requests():
        for arch in (80, 90, 120):
            for q_dtype in ("fp16", "bf16") if is_fp8 else ("bf16",):
                equal = ptx(cfg, is_fp8, q_dtype, arch, True) == ptx(cfg, is_fp8, q_dtype, arch, False)
                same += equal
                total += 1
                print(f"{cfg} fp8={is_fp8} q={q_dtype} sm_{arch}: {'identical' if equal else 'DIFFERENT'}", flush=True)
    print(f"{same} of {total} identical with and without the WORKLOAD_INTS hints")
    return 0 if control and same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
