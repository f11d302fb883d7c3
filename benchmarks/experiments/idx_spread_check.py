"""The spread select against the per-token select on the GPU, small enough for compute-sanitizer.

    PYTHONPATH=src python3 benchmarks/experiments/idx_spread_check.py
    compute-sanitizer --tool racecheck python3 benchmarks/experiments/idx_spread_check.py

Three calls per case: FP8 page-split rows with FP8 queries at b = 4, 20,000 rows (the parts' lists are gathered),
the same rows all equal (more ties at the k-th key than a list holds: the rank program walks the keys itself), and
bf16 rows with per-token lengths at s_q = 2. Prints one line per case and exits non-zero on any difference.
"""

from __future__ import annotations

import sys

import torch

from wavemla.kernels.indexer import lightning_indexer
from wavemla.reference.indexer import quantize_index_k


def _case(name: str, *, tied: bool, fp8: bool, s_q: int) -> bool:
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    b, heads, page, n, topk = 4, 64, 64, 20000, 512
    blocks = -(-n // page)
    table = torch.randperm(b * blocks, device="cuda", generator=g).view(b, blocks).int()
    rows = torch.randn(b * blocks, page, 128, device="cuda", generator=g)
    if tied:
        rows = torch.ones_like(rows)
    q = torch.randn(b, s_q, heads, 128, device="cuda", generator=g)
    w = torch.rand(b, s_q, heads, device="cuda", generator=g) * 0.01
    if fp8:
        cache = quantize_index_k(rows, layout="paged")
        q_in = q.to(torch.float8_e4m3fn)
        layout = "paged"
    else:
        cache = rows.bfloat16()
        q_in = q.bfloat16()
        layout = "rows"
    n_comp = torch.tensor([n, n - 3000, 700, n - 1], device="cuda", dtype=torch.int32)
    if s_q > 1:
        n_comp = torch.stack([n_comp - 1, n_comp], dim=1).clamp(min=0).int().contiguous()
    got = lightning_indexer(q_in, w, cache, table, n_comp, topk, index_k_layout=layout, select="spread")
    want = lightning_indexer(q_in, w, cache, table, n_comp, topk, index_k_layout=layout, select="token")
    same = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    print(f"{name}: spread {'==' if same else '!='} token", flush=True)
    return same


def main() -> int:
    ok = _case("fp8 paged, gathered", tied=False, fp8=True, s_q=1)
    ok &= _case("fp8 paged, all tied", tied=True, fp8=True, s_q=1)
    ok &= _case("bf16, per-token lengths, s_q=2", tied=False, fp8=False, s_q=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
