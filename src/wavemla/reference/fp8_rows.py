"""Per-tensor FP8 KV cache of dense MLA (vLLM's and SGLang's ``fp8`` / ``fp8_e4m3`` KV cache), in plain PyTorch.

One token is its 576-wide row (512 latent values + 64 rope values) stored as 576 float8_e4m3fn codes, and one fp32
scale serves the whole cache: ``value = code · scale``. The cache is ``[num_blocks, page, 1, 576]`` float8_e4m3fn (or a
uint8 view of the same bytes); the scale is a one-element fp32 tensor, FlashMLA's ``descale_k`` (the engines keep it
per layer as ``k_scale``).

Example::

    rows = torch.randn(4, 64, 1, 576, dtype=torch.bfloat16)
    cache, scale = quantize_fp8_rows(rows)        # [4, 64, 1, 576] float8_e4m3fn, [1] fp32
    back = dequantize_fp8_rows(cache, scale)      # [4, 64, 1, 576] fp32, rows up to FP8 rounding
"""

from __future__ import annotations

import torch

D_QK = 576
BYTES_PER_TOKEN = D_QK
FP8_MAX = 448.0


def quantize_fp8_rows(rows: torch.Tensor, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize rows ``[num_blocks, page, 1, 576]`` (any float dtype) with one scale: ``scale`` (a positive number),
    else ``amax / 448`` of the rows (1.0 for all-zero rows). Returns ``(cache [num_blocks, page, 1, 576]
    float8_e4m3fn, scale [1] fp32)`` on the rows' device."""
    if rows.dim() != 4 or rows.shape[2] != 1 or rows.shape[3] != D_QK:
        raise ValueError(f"rows: expected [num_blocks, page, 1, {D_QK}], got {list(rows.shape)}")
    x = rows.float()
    if scale is None:
        amax = float(x.abs().max()) if x.numel() else 0.0
        scale = amax / FP8_MAX if amax > 0.0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0.0 < scale < float("inf"):
        raise ValueError(f"scale: expected a finite positive number, got {scale!r}")
    scale = float(scale)
    codes = (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return codes, torch.tensor([scale], dtype=torch.float32, device=rows.device)


def dequantize_fp8_rows(cache: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``code · scale`` of a per-tensor FP8 cache ``[..., 576]`` (float8_e4m3fn or uint8 bytes), in ``dtype``."""
    if cache.dtype not in (torch.uint8, torch.float8_e4m3fn) or cache.shape[-1] != D_QK:
        raise ValueError(f"cache: expected [..., {D_QK}] float8_e4m3fn/uint8, got {cache.dtype} {list(cache.shape)}")
    if not isinstance(scale, torch.Tensor) or scale.numel() != 1:
        raise ValueError("scale: expected a one-element tensor (the cache's descale_k)")
    codes = cache.view(torch.float8_e4m3fn) if cache.dtype == torch.uint8 else cache
    return (codes.to(torch.float64) * scale.to(device=cache.device, dtype=torch.float64).reshape(())).to(dtype)
