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
def ue8m0_scale_times_256(b_s):
    """uint8 UE8M0 scale codes -> fp32 ``2^(s - 127) × 2^8`` built directly as float bits."""
    return ((b_s.to(tl.int32) + 8) << 23).to(tl.float32, bitcast=True)
