"""FP8 decode helpers shared by the kernels.

Bit assembly is the portable e4m3 decode: Triton's ``float8e4nv`` type does not exist on sm_80/86 (on sm_89 and newer
the kernels may use the hardware conversion instead, see ``WAVEMLA_FP8_DECODE``), and the bit form runs the same on
every architecture and in the interpreter. Placing the e4m3 sign, exponent and mantissa
bits into an fp16 word (``(x & 0x80) << 8 | (x & 0x7F) << 7``) yields exactly ``e4m3 × 2^-8`` for every finite
input, subnormals included (fp16's exponent bias is 8 above e4m3's and its subnormals line up with e4m3's). The NaN
codes 0x7F and 0xFF (e4m3fn has no infinities) would land on the finite ±1.875 (±480 × 2^-8): both bit forms below
turn them into fp16 NaNs, as torch's float8_e4m3fn and the hardware conversion decode them, and keep every other
code's value and sign (the helper on request only: see its ``NAN_CODES``).
"""

import triton
import triton.language as tl


@triton.jit
def e4m3_times_256_inv_f16(b_x, NAN_CODES: tl.constexpr = True):
    """uint8 e4m3 codes -> fp16 values × 2^-8 (exact; the NaN codes 0x7F and 0xFF give NaN, or ±1.875 without
    ``NAN_CODES``: the dense decode's register-decoded tiles, where the two instructions per pair of values below
    cost 2-3% of an H100's call).

    ±1.875 (the NaN codes) is the only assembled magnitude above the largest finite one, 1.75: ``|f| × 36864``
    overflows to inf there alone (1.75 × 36864 = 64512 <= 65504) and ``inf × 0`` is NaN, while every other ``f``
    minus ``+0`` is ``f``, signed zeros included. Two packed half instructions per pair of values on sm_80 (a multiply
    and an fma); building the NaN bits with integer operations took about three instructions per value."""
    b_x32 = b_x.to(tl.int32)
    b_bits = ((b_x32 & 0x80) << 8) | ((b_x32 & 0x7F) << 7)
    b_f = b_bits.to(tl.int16).to(tl.float16, bitcast=True)
    if NAN_CODES:
        b_f = b_f - (tl.abs(b_f) * 36864.0) * 0.0
    return b_f


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
            # Each byte's magnitude with bit 7 set for the NaN magnitude 0x7F (0x7F + 1 alone reaches bit 7, and no
            # byte's sum leaves its byte), each byte's sign as 0 or 1; prmt interleaves them into halves (sign << 8 |
            # byte) and << 7 gives sign | magnitude << 7, the fp16 bits of e4m3 x 2^-8, or 0x7F80 (an fp16 NaN).
            # lop3 0xEA: (a & b) | c.
            asm: tl.constexpr = (  # type: ignore[no-redef]  # the other branch's name
                """{
            .reg .b32 m, n, y, s;
            and.b32 m, $2, 0x7F7F7F7F;
            add.u32 n, m, 0x01010101;
            lop3.b32 y, n, 0x80808080, m, 0xEA;
            shr.b32 s, $2, 7;
            and.b32 s, s, 0x01010101;
            prmt.b32 n, y, s, 0x5140;
            shl.b32 $0, n, 7;
            prmt.b32 n, y, s, 0x7362;
            shl.b32 $1, n, 7;
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
