"""FP8 "MODEL1" KV-cache codec of DeepSeek-V4 (584 bytes per token), in plain PyTorch.

One token's 512-wide latent is stored as 448 float8_e4m3fn "nope" values (7 tiles of 64, each with its own UE8M0
power-of-two scale) plus 64 bf16 rope values. Within a page of ``page`` tokens the layout is not interleaved per
token::

    bytes [t*576, t*576 + 448)          nope of token t, e4m3
    bytes [t*576 + 448, t*576 + 576)    rope of token t, 64 x bf16
    bytes [page*576 + t*8, +7)          7 UE8M0 scale bytes of token t (value 2^(byte-127)), then 1 pad byte

Each page occupies ``page*584`` bytes rounded up to a multiple of 576, and the cache is exposed as a view
``[num_blocks, page, 1, 584]`` (uint8) with ``stride(1) == 584`` — FlashMLA's MODEL1 layout. A tile's scale is
``2^ceil(log2(max(amax/448, 1e-4)))``, so re-quantizing dequantized values is lossless.

Example::

    rows = torch.randn(4, 64, 1, 512, dtype=torch.bfloat16)
    cache = quantize_model1(rows)            # [4, 64, 1, 584] uint8
    back = dequantize_model1(cache)          # [4, 64, 1, 512] bf16, equal to rows up to FP8 rounding
"""

from __future__ import annotations

import torch

D_QK = 512
D_NOPE = 448
D_ROPE = 64
TILE = 64
NUM_TILES = D_NOPE // TILE  # 7
BYTES_DATA = D_NOPE + 2 * D_ROPE  # 576
BYTES_PER_TOKEN = BYTES_DATA + NUM_TILES + 1  # 584
FP8_MAX = 448.0


def model1_page_bytes(page: int) -> int:
    """Bytes one page of ``page`` tokens occupies (``page*584`` rounded up to a multiple of 576)."""
    return (page * BYTES_PER_TOKEN + BYTES_DATA - 1) // BYTES_DATA * BYTES_DATA


def empty_model1(num_blocks: int, page: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """An uninitialised MODEL1 cache ``[num_blocks, page, 1, 584]`` uint8 with the padded page stride."""
    flat = torch.empty((num_blocks, model1_page_bytes(page)), dtype=torch.uint8, device=device)
    return flat[:, : page * BYTES_PER_TOKEN].view(num_blocks, page, 1, BYTES_PER_TOKEN)


def page_views(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(data [nb, page, 576] uint8, scales [nb, page, 8] uint8) views of a MODEL1 cache."""
    nb, page = cache.shape[0], cache.shape[1]
    pages = torch.as_strided(cache, (nb, page * BYTES_PER_TOKEN), (cache.stride(0), 1))
    data = pages[:, : page * BYTES_DATA].reshape(nb, page, BYTES_DATA)
    scales = pages[:, page * BYTES_DATA :].reshape(nb, page, NUM_TILES + 1)
    return data, scales


def quantize_model1(rows: torch.Tensor) -> torch.Tensor:
    """Quantize latent rows ``[num_blocks, page, 1, 512]`` (any float dtype) into a MODEL1 cache.

    The rope part is stored as bf16; each 64-wide nope tile gets a UE8M0 scale. Returns ``[num_blocks, page, 1, 584]``
    uint8 (a strided view of padded pages).
    """
    if rows.dim() != 4 or rows.shape[2] != 1 or rows.shape[3] != D_QK:
        raise ValueError(f"rows: expected [num_blocks, page, 1, {D_QK}], got {list(rows.shape)}")
    nb, page = rows.shape[0], rows.shape[1]
    cache = empty_model1(nb, page, rows.device)
    data, scales = page_views(cache)
    x = rows[:, :, 0, :].float()
    nope = x[..., :D_NOPE].reshape(nb, page, NUM_TILES, TILE)
    amax = nope.abs().amax(-1)
    exp = torch.ceil(torch.log2(torch.clamp_min(amax / FP8_MAX, 1e-4)))
    scale = torch.exp2(exp)
    q = (nope / scale[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).reshape(nb, page, D_NOPE)
    data[..., :D_NOPE] = q
    data[..., D_NOPE:] = x[..., D_NOPE:].to(torch.bfloat16).contiguous().view(torch.uint8)
    scales[..., :NUM_TILES] = (exp + 127).to(torch.uint8)
    scales[..., NUM_TILES] = 0
    return cache


def dequantize_model1(cache: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Decode a MODEL1 cache ``[num_blocks, page, 1, 584]`` into rows ``[num_blocks, page, 1, 512]`` of ``dtype``.

    The decode is exact in fp32 and bf16 (an e4m3 value times a power of two has at most 4 significant bits).
    """
    if cache.dim() != 4 or cache.shape[2] != 1 or cache.shape[3] != BYTES_PER_TOKEN:
        raise ValueError(f"cache: expected [num_blocks, page, 1, {BYTES_PER_TOKEN}], got {list(cache.shape)}")
    cache = cache.view(torch.uint8)
    nb, page = cache.shape[0], cache.shape[1]
    data, scales = page_views(cache)
    nope = data[..., :D_NOPE].contiguous().view(torch.float8_e4m3fn).float().reshape(nb, page, NUM_TILES, TILE)
    scale = torch.exp2(scales[..., :NUM_TILES].float() - 127.0)
    out = torch.empty((nb, page, D_QK), dtype=torch.float32, device=cache.device)
    out[..., :D_NOPE] = (nope * scale[..., None]).reshape(nb, page, D_NOPE)
    out[..., D_NOPE:] = data[..., D_NOPE:].contiguous().view(torch.bfloat16).float()
    return out.to(dtype).view(nb, page, 1, D_QK)
