"""FP8 KV-cache codec of DeepSeek-V3.2 ("FP8 with scale", 656 bytes per token), in plain PyTorch.

One token's 576-wide row (512 latent "nope" values + 64 rope values) is stored interleaved per token::

    bytes [0, 512)      512 float8_e4m3fn nope values, 4 tiles of 128
    bytes [512, 528)    4 fp32 scales, one per 128-value tile (little-endian), value = code · scale
    bytes [528, 656)    64 bf16 rope values (not quantized)

The cache is ``[num_blocks, page, 1, 656]`` uint8 (or a float8_e4m3fn view of the same bytes) with
``stride(1) == 656`` — FlashMLA's V3.2 layout. A tile's scale is the power of two
``2^ceil(log2(max(amax / 448, 1e-4)))`` (FlashMLA's tests/quant.py: the floor applies to ``amax / 448``, so no scale
is below 2^-13), so re-quantizing dequantized values is lossless; the decoders accept any positive fp32 scale.

Example::

    rows = torch.randn(4, 64, 1, 576, dtype=torch.bfloat16)
    cache = quantize_v32(rows)               # [4, 64, 1, 656] uint8
    back = dequantize_v32(cache)             # [4, 64, 1, 576] fp32, equal to rows up to FP8 rounding of the nope part
"""

from __future__ import annotations

import torch

D_QK = 576
D_NOPE = 512
D_ROPE = 64
TILE = 128
NUM_TILES = D_NOPE // TILE  # 4
SCALE_OFFSET = D_NOPE  # 512
ROPE_OFFSET = D_NOPE + 4 * NUM_TILES  # 528
BYTES_PER_TOKEN = ROPE_OFFSET + 2 * D_ROPE  # 656
FP8_MAX = 448.0
SCALE_FLOOR = 1e-4  # the least amax / 448 (FlashMLA's tests/quant.py), so the least scale is 2^-13


def quantize_v32(rows: torch.Tensor) -> torch.Tensor:
    """Quantize rows ``[num_blocks, page, 1, 576]`` (any float dtype) into a V3.2 cache ``[num_blocks, page, 1, 656]``
    uint8 (contiguous). Each 128-wide nope tile gets a power-of-two fp32 scale; rope is stored as bf16."""
    if rows.dim() != 4 or rows.shape[2] != 1 or rows.shape[3] != D_QK:
        raise ValueError(f"rows: expected [num_blocks, page, 1, {D_QK}], got {list(rows.shape)}")
    nb, page = rows.shape[0], rows.shape[1]
    x = rows[:, :, 0, :].float()
    nope = x[..., :D_NOPE].reshape(nb, page, NUM_TILES, TILE)
    amax = nope.abs().amax(-1)
    # frexp gives the exact octave (no log rounding can push a code past 448): amax/448 = mant · 2^expo, mant in
    # [0.5, 1); an exact power of two needs no extra octave.
    mant, expo = torch.frexp((amax.double() / FP8_MAX).clamp_min(SCALE_FLOOR))
    expo = torch.where(mant == 0.5, expo - 1, expo)
    scale = torch.ldexp(torch.ones_like(amax), expo.to(torch.int32)).float()  # [nb, page, 4]
    codes = (nope / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
    cache = torch.empty((nb, page, BYTES_PER_TOKEN), dtype=torch.uint8, device=rows.device)
    cache[..., :D_NOPE] = codes.reshape(nb, page, D_NOPE)
    cache[..., SCALE_OFFSET:ROPE_OFFSET] = scale.contiguous().view(torch.uint8)
    cache[..., ROPE_OFFSET:] = x[..., D_NOPE:].to(torch.bfloat16).contiguous().view(torch.uint8)
    return cache.view(nb, page, 1, BYTES_PER_TOKEN)


def v32_parts(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes ``[..., 512]`` uint8, scales ``[..., 4]`` fp32, rope ``[..., 64]`` bf16) of a V3.2 cache's tokens.

    Works on any ``[..., 656]`` byte tensor whose last dimension is contiguous (a copy is taken where a view cannot
    be)."""
    raw = cache.view(torch.uint8)
    codes = raw[..., :D_NOPE]
    scales = raw[..., SCALE_OFFSET:ROPE_OFFSET].contiguous().view(torch.float32)
    rope = raw[..., ROPE_OFFSET:].contiguous().view(torch.bfloat16)
    return codes, scales, rope


def dequantize_v32(cache: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Decode a V3.2 cache ``[num_blocks, page, 1, 656]`` into rows ``[num_blocks, page, 1, 576]`` of ``dtype``.

    The products are taken in fp64, where they are exact (a code has at most 4 significant bits, an fp32 scale 24),
    then rounded once to ``dtype``."""
    if cache.dim() != 4 or cache.shape[2] != 1 or cache.shape[3] != BYTES_PER_TOKEN:
        raise ValueError(f"cache: expected [num_blocks, page, 1, {BYTES_PER_TOKEN}], got {list(cache.shape)}")
    nb, page = cache.shape[0], cache.shape[1]
    codes, scales, rope = v32_parts(cache[:, :, 0, :])
    nope = codes.contiguous().view(torch.float8_e4m3fn).double().reshape(nb, page, NUM_TILES, TILE)
    out = torch.empty((nb, page, D_QK), dtype=torch.float64, device=cache.device)
    out[..., :D_NOPE] = (nope * scales.double()[..., None]).reshape(nb, page, D_NOPE)
    out[..., D_NOPE:] = rope.double()
    return out.to(dtype).view(nb, page, 1, D_QK)
