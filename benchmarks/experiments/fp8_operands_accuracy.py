"""How far FP8 operands in the sparse decode's two products would move its output from the fp64 reference: q in
e4m3 for ``q·kᵀ`` over the cache's e4m3 codes, and the softmax weights P in e4m3 for ``P·V`` over the same codes
(each 64-column tile's UE8M0 scale folded into P) — what an FP8 MMA (``mma.sync`` with e4m3 operands, sm_89 and
newer) would compute instead of decoding the rows to 16 bits — against FlashMLA's tolerances (an element within
1e-3 or 2.01/128 relative; the whole output's cosine difference under 5e-6).

CPU only, float64 arithmetic with the operands rounded as each variant rounds them; DSV4 CSA shapes (128 window rows
and 512 compressed rows a query, h = 64, FP8 MODEL1 rows, FlashMLA's input distributions via
``make_sparse_decode_inputs``, no sink). q and P get a power-of-two scale per (head, 64 or 32 columns) and per (head,
64-column tile) so that their largest magnitude stays within e4m3's 448.

    PYTHONPATH=src python3 benchmarks/experiments/fp8_operands_accuracy.py [--batch 8] [--seeds 3]
"""

from __future__ import annotations

import argparse

import torch

from wavemla.reference.fp8 import dequantize_model1
from wavemla.testing import cosine_diff, make_sparse_decode_inputs

E4M3_MAX = 448.0
D_NOPE, TILE = 448, 64


def e4m3(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``x`` rounded to e4m3 with a power-of-two scale per slice along ``dim`` (its largest magnitude <= 448)."""
    amax = x.abs().amax(dim, keepdim=True).clamp_min(1e-30)
    scale = torch.exp2(torch.ceil(torch.log2(amax / E4M3_MAX)))
    return (x / scale).to(torch.float8_e4m3fn).double() * scale


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).double()


def q_e4m3(q: torch.Tensor, block: int) -> torch.Tensor:
    """q's 448 nope columns in e4m3 with a scale per (head, ``block`` columns); its 64 rope columns in bf16 (the
    cache keeps them in bf16)."""
    b, h, _ = q.shape
    nope = e4m3(q[..., :D_NOPE].reshape(b, h, D_NOPE // block, block), -1).reshape(b, h, D_NOPE)
    return torch.cat([nope, bf16(q[..., D_NOPE:])], -1)


def decode(q: torch.Tensor, k: torch.Tensor, p_fp8: bool) -> torch.Tensor:
    """out = softmax(q·kᵀ / √512)·k over exact rows ``k``; ``p_fp8``: P·V of the nope columns with P, times each
    row's tile scale, in e4m3 per (head, tile) over the tile's e4m3 codes (the rope columns with P in bf16, as the
    kernels do); else P and V in bf16."""
    s = torch.einsum("bhd,bnd->bhn", q, k) * 512**-0.5
    p = torch.exp(s - s.amax(-1, keepdim=True))
    denom = p.sum(-1, keepdim=True)
    if not p_fp8:
        return torch.einsum("bhn,bnd->bhd", bf16(p), bf16(k)) / denom
    b, n = k.shape[:2]
    nope = k[..., :D_NOPE].reshape(b, n, D_NOPE // TILE, TILE)
    scale = torch.exp2(torch.ceil(torch.log2((nope.abs().amax(-1) / E4M3_MAX).clamp_min(1e-4))))  # the cache's UE8M0
    codes = nope / scale[..., None]  # exact e4m3 values
    out = torch.einsum("bhn,bnd->bhd", bf16(p), bf16(k))
    for j in range(D_NOPE // TILE):
        p_j = e4m3(p * scale[:, None, :, j], -1)
        out[..., j * TILE : (j + 1) * TILE] = torch.einsum("bhn,bnd->bhd", p_j, codes[:, :, j])
    return out / denom


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'seed':>4} {'q':>16} {'P':>5} {'cosine diff':>12} {'elements out of tolerance':>26} {'max |err|':>10}")
    for seed in range(args.seeds):
        case = make_sparse_decode_inputs(batch=args.batch, h_q=64, topk=128, extra_topk=512, extra_pool=2048,
                                         sink=False, seed=seed)  # fmt: skip
        rows = [dequantize_model1(case[c], torch.float64).view(-1, 512) for c in ("kv_cache", "extra_kv_cache")]
        k = torch.cat([rows[0][case["indices"][:, 0].long()], rows[1][case["extra_indices"][:, 0].long()]], 1)
        q = case["q"].double()[:, 0]
        s = torch.einsum("bhd,bnd->bhn", q, k) * 512**-0.5
        p = torch.exp(s - s.amax(-1, keepdim=True))
        ref = torch.einsum("bhn,bnd->bhd", p, k) / p.sum(-1, keepdim=True)
        variants = [("bf16", bf16(q), False), ("e4m3 / 64 cols", q_e4m3(q, 64), False),
                    ("e4m3 / 32 cols", q_e4m3(q, 32), False), ("bf16", bf16(q), True),
                    ("e4m3 / 64 cols", q_e4m3(q, 64), True)]  # fmt: skip
        for q_name, qv, p_fp8 in variants:
            out = decode(qv, k, p_fp8)
            err = (out - ref).abs()
            bad = 1.0 - ((err <= 1e-3) | (err <= 2.01 / 128 * ref.abs())).double().mean().item()
            cd = cosine_diff(out.float(), ref.float())
            p_name = "e4m3" if p_fp8 else "bf16"
            print(f"{seed:>4} {q_name:>16} {p_name:>5} {cd:>12.2e} {bad:>25.2%} {err.max().item():>10.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
