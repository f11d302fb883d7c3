"""FP8 decode helpers shared by the kernels.

Bit assembly is the portable e4m3 decode: Triton's ``float8e4nv`` type does not exist on sm_80/86 (on sm_89 and newer
the kernels may use the hardware conversion instead, see ``WAVEMLA_FP8_DECODE``), and the bit form runs the same on
every architecture and in the interpreter. Placing the e4m3 sign, exponent and mantissa
bits into an fp16 word (``(x & 0x80) << 8 | (x & 0x7F) << 7``) yields exactly ``e4m3 × 2^-8`` for every finite
input, subnormals included (fp16's exponent bias is 8 above e4m3's and its subnormals line up with e4m3's).
"""

import triton
import triton.language as tl


@triton.jit
def e4m3_times_256_inv_f16(b_x):
    """uint8 e4m3 codes -> fp16 values × 2^-8 (exact)."""
    b_x32 = b_x.to(tl.int32)
    b_bits = ((b_x32 & 0x80) << 8) | ((b_x32 & 0x7F) << 7)
    return b_bits.to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def e4m3_f16(b_x, E4M3_CVT: tl.constexpr, ASM: tl.constexpr):
    """uint8 e4m3 codes -> fp16, exact: the value itself (hardware conversion) or the value x 2^-8 (bit
    assembly). ``ASM``: the conversion as inline assembly, which Triton does not move into the dots' operand
    layouts (a cast it moves there gives the raw load two users of different layouts, and the pipeliner then
    leaves it out of cp.async)."""
    if ASM:
        if E4M3_CVT:
            asm: tl.constexpr = """{
            .reg .b16 l, h;
            mov.b32 {l, h}, $2;
            cvt.rn.f16x2.e4m3x2 $0, l;
            cvt.rn.f16x2.e4m3x2 $1, h;
            }"""
        else:
            # bytes b0 b1 -> halves b0 << 8, b1 << 8 (prmt), then sign | magnitude << 7: the fp16 bits of e4m3 x 2^-8
            asm: tl.constexpr = (  # type: ignore[no-redef]  # the other branch's name
                """{
            .reg .b32 t, s, m;
            prmt.b32 t, $2, 0, 0x1404;
            and.b32 s, t, 0x80008000;
            shr.b32 m, t, 1;
            lop3.b32 $0, s, m, 0x3F803F80, 0xF8;
            prmt.b32 t, $2, 0, 0x3424;
            and.b32 s, t, 0x80008000;
            shr.b32 m, t, 1;
            lop3.b32 $1, s, m, 0x3F803F80, 0xF8;
            }"""
            )
        return tl.inline_asm_elementwise(asm, "=r,=r,r", [b_x], dtype=tl.float16, is_pure=False, pack=4)
    elif E4M3_CVT:
        return b_x.to(tl.float8e4nv, bitcast=True).to(tl.float16)
    else:
        return e4m3_times_256_inv_f16(b_x)


@triton.jit
def ue8m0_scale_times_256(b_s):
    """uint8 UE8M0 scale codes -> fp32 ``2^(s - 127) × 2^8`` built directly as float bits."""
    return ((b_s.to(tl.int32) + 8) << 23).to(tl.float32, bitcast=True)


@triton.jit
def ue8m0_scale(b_s):
    """UE8M0 scale codes (any integer type; the low 8 bits are taken) -> fp32 ``2^(s - 127)`` built directly as float
    bits (code 0 gives 0, not the fp32 subnormal 2^-127)."""
    return ((b_s.to(tl.int32) & 0xFF) << 23).to(tl.float32, bitcast=True)
