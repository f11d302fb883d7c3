"""Does Triton's automatic warp specialization (``tl.range(..., warp_specialize=True)``) build producer/consumer
partitions for sm_90 loops? Compiled offline (no GPU): a plain GEMM loop over TMA-descriptor tiles (the control) and
a flash-attention decode loop over TMA-descriptor tiles (q resident, ``S = q·Kᵀ``, online softmax, ``acc += P·V``),
at 4 and 8 warps. Prints, per kernel, whether it compiled, the ``ttg.warp_specialize`` ops in its TTGIR and the
``setmaxnreg`` instructions in its PTX (the partitions' register split).

    python3 benchmarks/experiments/ws_probe.py
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def gemm_loop(a_desc, b_desc, p_c, k_len):
    acc = tl.zeros([128, 128], tl.float32)
    for k in tl.range(0, k_len, 64, warp_specialize=True):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([0, k]).T, acc)
    o = tl.arange(0, 128)
    tl.store(p_c + o[:, None] * 128 + o[None, :], acc)


@triton.jit
def attention_loop(k_desc, v_desc, p_q, p_out, n_tiles, qk_scale, H: tl.constexpr, D: tl.constexpr):
    i_b = tl.program_id(0)
    o_h = tl.arange(0, H)
    o_d = tl.arange(0, D)
    q = tl.load(p_q + i_b * D * H + o_h[:, None] * D + o_d[None, :])
    m = tl.full([H], float("-inf"), tl.float32)
    l_sum = tl.zeros([H], tl.float32)
    acc = tl.zeros([H, D], tl.float32)
    for t in tl.range(0, n_tiles, warp_specialize=True):
        row = (i_b * n_tiles + t) * 64
        s = tl.dot(q, k_desc.load([row, 0]).T) * qk_scale
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v_desc.load([row, 0]))
        m = m_new
    tl.store(p_out + i_b * D * H + o_h[:, None] * D + o_d[None, :], (acc / l_sum[:, None]).to(tl.bfloat16))


def probe(name: str, fn, signature: dict[str, str], constexprs: dict, warps: int) -> None:
    try:
        k = triton.compile(
            ASTSource(fn=fn, signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": warps, "num_stages": 3},
        )
    except Exception as e:  # the compiler's own failure is the finding
        print(f"{name:34s} warps={warps}: compile FAILED ({type(e).__name__}: {str(e).splitlines()[0][:80]})")
        return
    ws = k.asm["ttgir"].count("ttg.warp_specialize")
    regs = k.asm["ptx"].count("setmaxnreg")
    smem = k.metadata.shared
    print(f"{name:34s} warps={warps}: compiled, {ws} warp_specialize op(s), {regs} setmaxnreg, {smem} B smem")


def main() -> None:
    print("triton", triton.__version__, "sm_90")
    gemm_sig = {"a_desc": "tensordesc<bf16[128,64]>", "b_desc": "tensordesc<bf16[128,64]>", "p_c": "*fp32",
                "k_len": "i32"}  # fmt: skip
    for warps in (4, 8):
        probe("GEMM loop (control)", gemm_loop, gemm_sig, {}, warps)
    for d in (128, 256):
        sig = {"k_desc": f"tensordesc<bf16[64,{d}]>", "v_desc": f"tensordesc<bf16[64,{d}]>", "p_q": "*bf16",
               "p_out": "*bf16", "n_tiles": "i32", "qk_scale": "fp32", "H": "constexpr", "D": "constexpr"}  # fmt: skip
        for warps in (4, 8):
            probe(f"attention loop, 64 rows, d={d}", attention_loop, sig, {"H": 64, "D": d}, warps)


if __name__ == "__main__":
    main()
