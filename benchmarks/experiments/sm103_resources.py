"""Compile every configuration of a resource table for sm_100 and sm_103 and print both (shared bytes, registers,
stack bytes), SAME or DIFF:

    PYTHONPATH=src python3 benchmarks/experiments/sm103_resources.py sparse_decode|dense_decode|sparse_prefill
"""

import sys

from wavemla import resources

kernel = sys.argv[1]
for cfg, fp8 in resources.table_requests(kernel):
    rows: list[tuple[object, ...]] = []
    for arch in (100, 103):
        job = {
            "kernel": kernel, "block_h": cfg.block_h, "block_n": cfg.block_n, "num_warps": cfg.num_warps,
            "num_stages": cfg.num_stages, "is_fp8": fp8, "q_dtype": resources.default_q_dtype(fp8), "arch": arch,
        }  # fmt: skip
        try:
            r = resources._compile_here(job)
            rows.append((r["shared_bytes"], r["regs"], r["stack_bytes"]))
        except Exception as e:  # reported, not raised: the comparison goes on
            rows.append(("ERR", type(e).__name__, str(e)[:100]))
    print(kernel, cfg, fp8, rows[0], rows[1], "SAME" if rows[0] == rows[1] else "DIFF", flush=True)
