"""Index lists from an attention mask: what :mod:`wavemla.hf_attention` hands the sparse decode and prefill.

transformers gives each query token a mask row over the ``L`` rows it gathered, ``[B, S, L]`` (bool: true where
attended; or additive, 0 where attended and the dtype's minimum or −inf where masked). Two kernels, one program a
token, turn it into the ``[T, width]`` int32 lists the sparse calls take (row ``j`` of request ``i`` is slot
``i·L + j``), as two launches instead of a chain of elementwise torch ops, each of which costs an eager call more
host time than its work takes on the GPU:

- :func:`mask_stats`: ``[2]`` int32 — the most rows any token attends, and 1 where an additive mask holds a bias
  other than 0 and "masked" (values that index lists cannot express);
- :func:`mask_lists`: with ``width = L`` every row, −1 where masked; with ``width < L`` each token's attended rows
  first, in row order, then −1 (rows past ``width`` dropped: the caller compares :func:`mask_stats`' count).

A row is masked where the value is ``<= finfo(dtype).min / 2`` (so −inf too); NaN is attended, and counts as a bias.
Neither kernel reads anything back to the host, so both run under CUDA-graph capture. A launch with the signature
of one made before (the mask's dtype, shape and strides, the width: the layers of one type in a decode step) runs
the compiled kernel again without Triton's per-launch argument binding (:mod:`wavemla.kernels.launch`;
``WAVEMLA_LAUNCH=triton`` turns it off).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wavemla.device import check_kernel_device
from wavemla.kernels import launch

BLOCK_L = 1024  # mask entries a program takes per step
MAX_GRID_YZ = 65535  # CUDA's bound on grid dimensions 1 and 2: the requests' axis runs in runs of this many
INT32_MAX = 2**31 - 1


@triton.jit
def _attended(p_row, o_l, m_l, stride_l, thr, FLOAT: tl.constexpr):
    """(the mask entries ``o_l`` of one token's row as fp32 (additive) or bytes (bool), and where they are attended:
    never outside ``m_l``)."""
    b_m = tl.load(p_row + tl.cast(o_l, tl.int64) * stride_l, mask=m_l, other=0)  # (entries may span 2^31 elements)
    if FLOAT:
        b_m = b_m.to(tl.float32)
        m_att = (~(b_m <= thr)) & m_l  # written so that NaN is attended, as torch's ``~(m <= thr)``
    else:
        m_att = (b_m != 0) & m_l
    return b_m, m_att


@triton.jit
def _mla_mask_stats_kernel(
    p_mask, p_stats, L, stride_b, stride_s, stride_l, thr, FLOAT: tl.constexpr, BLOCK_L: tl.constexpr
):  # fmt: skip
    # program (token of request, request): count its attended rows, then fold the count and the bias flag into
    # p_stats ([2] int32, zeroed by the launcher) with atomic maxima (exact and order-free)
    i_s = tl.program_id(0)
    i_b = tl.program_id(1)
    p_row = p_mask + tl.cast(i_b, tl.int64) * stride_b + tl.cast(i_s, tl.int64) * stride_s
    b_count = tl.zeros([BLOCK_L], dtype=tl.int32)
    b_bias = tl.zeros([BLOCK_L], dtype=tl.int32)
    for i_l in range(0, L, BLOCK_L):
        o_l = i_l + tl.arange(0, BLOCK_L)
        b_m, m_att = _attended(p_row, o_l, o_l < L, stride_l, thr, FLOAT)
        b_count += m_att.to(tl.int32)
        if FLOAT:  # a value other than 0 on an attended row: a bias
            b_bias |= ((b_m != 0.0) & m_att).to(tl.int32)
    tl.atomic_max(p_stats, tl.sum(b_count, axis=0))
    tl.atomic_max(p_stats + 1, tl.max(b_bias, axis=0))


@triton.jit
def _mla_mask_lists_kernel(
    p_mask, p_out, L, S, width, stride_b, stride_s, stride_l, thr,
    FLOAT: tl.constexpr, COMPACT: tl.constexpr, BLOCK_L: tl.constexpr,
):  # fmt: skip
    # program (token of request, request): its list row of p_out ([B*S, width] int32, contiguous)
    i_s = tl.program_id(0)
    i_b = tl.program_id(1)
    p_row = p_mask + tl.cast(i_b, tl.int64) * stride_b + tl.cast(i_s, tl.int64) * stride_s
    p_list = p_out + (tl.cast(i_b, tl.int64) * S + i_s) * width
    base = i_b * L
    if COMPACT:
        n_seen = tl.sum(tl.zeros([BLOCK_L], dtype=tl.int32), axis=0)  # attended rows before this step
        for i_l in range(0, L, BLOCK_L):
            o_l = i_l + tl.arange(0, BLOCK_L)
            _, m_att = _attended(p_row, o_l, o_l < L, stride_l, thr, FLOAT)
            b_att = m_att.to(tl.int32)
            o_dst = n_seen + tl.cumsum(b_att, axis=0) - 1  # entry j is the (j+1)-th attended row
            tl.store(p_list + o_dst, o_l + base, mask=m_att & (o_dst < width))
            n_seen += tl.sum(b_att, axis=0)
        for i_w in range(0, width, BLOCK_L):
            o_w = i_w + tl.arange(0, BLOCK_L)
            tl.store(p_list + o_w, tl.full([BLOCK_L], -1, tl.int32), mask=(o_w >= n_seen) & (o_w < width))
    else:
        for i_l in range(0, L, BLOCK_L):
            o_l = i_l + tl.arange(0, BLOCK_L)
            m_l = o_l < L
            _, m_att = _attended(p_row, o_l, m_l, stride_l, thr, FLOAT)
            tl.store(p_list + o_l, tl.where(m_att, o_l + base, -1), mask=m_l)


MASK_DTYPES = (torch.bool, torch.float16, torch.bfloat16, torch.float32)


def _operands(mask: torch.Tensor) -> tuple[torch.Tensor, float, bool]:
    """(the mask as the kernels read it, the masked threshold, whether it is additive)."""
    check_kernel_device("mask", mask)
    if mask.dtype not in MASK_DTYPES:  # (the threshold reaches the kernel as fp32)
        raise ValueError(f"mask: expected bool, fp16, bf16 or fp32, got {mask.dtype}")
    if mask.dtype == torch.bool:
        return mask.view(torch.uint8), 0.0, False
    return mask, torch.finfo(mask.dtype).min / 2, True


def mask_stats(mask: torch.Tensor) -> torch.Tensor:
    """``[2]`` int32 on the mask's device: (the most rows a token attends, 1 if an additive mask holds a bias other
    than 0 and "masked" else 0), for ``mask`` ``[B, S, L]`` bool or floating (any strides, 0 included).

    Example::

        most, biased = mask_stats(mask).tolist()
    """
    b, s, length = mask.shape
    m, thr, additive = _operands(mask)
    stats = torch.zeros(2, dtype=torch.int32, device=mask.device)
    if b * s == 0 or length == 0:
        return stats
    for b0 in range(0, b, MAX_GRID_YZ):  # runs of requests fold into the same maxima
        run = m if b <= MAX_GRID_YZ else m[b0 : b0 + MAX_GRID_YZ]
        launch.replayed_run(
            _REPLAYS, _mla_mask_stats_kernel, (s, run.shape[0]), (run, stats), ("stats",),
            p_mask=run, p_stats=stats, L=length, stride_b=run.stride(0), stride_s=run.stride(1),
            stride_l=run.stride(2), thr=thr, FLOAT=additive, BLOCK_L=BLOCK_L, num_warps=4,
        )  # fmt: skip
    return stats


def mask_lists(mask: torch.Tensor, width: int) -> torch.Tensor:
    """``[B, S, width]`` int32 index lists for ``mask`` ``[B, S, L]`` (bool or floating, any strides): slot ``i·L + j``
    for row ``j`` of request ``i``. ``width = L``: every row, −1 where masked; ``width < L``: each token's attended rows
    in row order, then −1, rows past ``width`` dropped. ``B·L`` may be at most 2^31 (the slots are int32;
    an empty output, S = 0, takes any).

    Example::

        indices = mask_lists(mask, 640)
    """
    b, s, length = mask.shape
    if not 1 <= width <= max(length, 1):
        raise ValueError(f"width: expected 1..L={length}, got {width}")
    if s and b * length > INT32_MAX + 1:  # (no token: an empty output, no slot written)
        raise ValueError(
            f"mask: slots i·L + j of B={b} requests of L={length} rows do not fit the int32 lists (B·L at most 2^31)"
        )
    m, thr, additive = _operands(mask)
    out = torch.empty((b, s, width), dtype=torch.int32, device=mask.device)
    if b * s == 0 or length == 0:
        return out.fill_(-1)
    for b0 in range(0, b, MAX_GRID_YZ):
        whole = b <= MAX_GRID_YZ
        run, dst = (m, out) if whole else (m[b0 : b0 + MAX_GRID_YZ], out[b0 : b0 + MAX_GRID_YZ])
        launch.replayed_run(
            _REPLAYS, _mla_mask_lists_kernel, (s, run.shape[0]), (run, dst), ("lists", width),
            p_mask=run, p_out=dst, L=length, S=s, width=width, stride_b=run.stride(0), stride_s=run.stride(1),
            stride_l=run.stride(2), thr=thr, FLOAT=additive, COMPACT=width < length, BLOCK_L=BLOCK_L, num_warps=4,
        )  # fmt: skip
        if b0:  # the kernel numbers a run's requests from 0: its slots move up by its first request's
            dst.add_(dst.ge(0).to(torch.int32), alpha=b0 * length)
    return out


# Launch replays of recent launches by signature (kernels.launch), least recently used first; values: the replay,
# or None where the signature cannot be replayed.
_REPLAYS = launch.ReplayCache(32)
