"""DeepSeek-V3.2's sparse decode around the paged dense decode: its block table in, its sink out.

:func:`wavemla.api.sparse_mla_decode` runs a V3.2 call (q 576 wide, a list of ``topk`` cache slots per query token) as
the paged dense decode over the cache read as one row per slot. Two kernels, one launch each, do what would otherwise
be a chain of torch operations (a validity mask, a stable sort, a gather and a sum before; four elementwise passes
over the output after, each reading and writing all of it):

- :func:`compact_lists`: one program per query token moves the token's valid entries (``0 <= slot < slots``, within
  ``topk_length``) to the front of its block-table row, in their order, as cache rows (pages may lie apart), zeros
  after them, and writes their count;
- :func:`scale_by_sink`: ``out = o · exp(lse) / (exp(lse) + exp(sink))`` per head (``o`` unchanged where the token
  saw no row, ``lse = +inf``), computed in fp32 and written once in the output's dtype, in place or into another
  tensor of any strides.

Neither reads anything back to the host, so both run under CUDA-graph capture. A launch with the signature of one
made before runs the compiled kernel again without Triton's per-launch argument binding
(:mod:`wavemla.kernels.launch`; ``WAVEMLA_LAUNCH=triton`` turns it off).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wavemla.device import check_kernel_device
from wavemla.kernels import launch

BLOCK_K = 1024  # list entries a program takes per step
BLOCK_D = 512  # output columns a sink program scales (the latent width)
INT32_MAX = 2**31 - 1
MAX_GRID_YZ = 65535  # CUDA's bound on grid dimensions 1 and 2: the list kernel's request axis runs in runs of this many


@triton.jit
def _mla_v32_lists_kernel(
    p_idx, p_len, p_table, p_count, S, topk, last_slot, stride_b, stride_s, page, block_rows,
    HAS_LEN: tl.constexpr, TO_ROWS: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # program (query token, request): row i_b·S + i_s of p_table ([b·S, topk] int32, contiguous) and of p_count;
    # TO_ROWS: a slot is written as its cache row, (slot // page)·block_rows + slot % page
    i_s = tl.program_id(0)
    i_b = tl.program_id(1)
    p_row = p_idx + tl.cast(i_b, tl.int64) * stride_b + tl.cast(i_s, tl.int64) * stride_s
    i_t = tl.cast(i_b, tl.int64) * S + i_s
    p_dst = p_table + i_t * topk
    n_k = topk
    if HAS_LEN:  # entries at or past the request's length are invalid; a negative length leaves none
        n_k = tl.minimum(tl.maximum(tl.load(p_len + i_b), 0), topk)
    n_seen = tl.sum(tl.zeros([BLOCK_K], dtype=tl.int32), axis=0)  # valid entries before this step
    for i_k in range(0, topk, BLOCK_K):
        o_k = i_k + tl.arange(0, BLOCK_K)
        m_k = o_k < n_k
        b_slot = tl.load(p_row + o_k, mask=m_k, other=-1)
        m_ok = m_k & (b_slot >= 0) & (b_slot <= last_slot)
        b_ok = m_ok.to(tl.int32)
        o_dst = n_seen + tl.cumsum(b_ok, axis=0) - 1  # entry j is the (j+1)-th valid one
        if TO_ROWS:
            b_slot = (b_slot // page) * block_rows + b_slot % page  # (valid slots are non-negative)
        tl.store(p_dst + o_dst, b_slot, mask=m_ok)
        n_seen += tl.sum(b_ok, axis=0)
    for i_k in range(0, topk, BLOCK_K):
        o_k = i_k + tl.arange(0, BLOCK_K)
        tl.store(p_dst + o_k, tl.zeros([BLOCK_K], dtype=tl.int32), mask=(o_k >= n_seen) & (o_k < topk))
    tl.store(p_count + i_t, n_seen)


@triton.jit
def _mla_sink_scale_kernel(
    p_o, p_lse, p_sink, p_out, S, H, stride_ob, stride_os, stride_oh, stride_db, stride_ds, stride_dh, stride_dd,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    # program (query token of request, block of heads): p_out[b, s, h, :] = p_o[b, s, h, :] · factor(lse, sink[h]) for
    # p_o rows of 512 contiguous columns and p_lse [b, S, H] contiguous fp32
    i_t = tl.program_id(0)
    i_h = tl.program_id(1)
    i_b = tl.cast(i_t // S, tl.int64)
    i_s = tl.cast(i_t % S, tl.int64)
    o_h = i_h * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < H
    o_d = tl.arange(0, BLOCK_D)
    b_lse = tl.load(p_lse + tl.cast(i_t, tl.int64) * H + o_h, mask=m_h, other=0.0)
    b_sink = tl.load(p_sink + o_h, mask=m_h, other=0.0)
    # exp(lse) / (exp(lse) + exp(sink)); a sink of +inf gives 0, of -inf 1; a token that saw no row (lse +inf) keeps
    # its 0s, and its lse is taken as 0 on the way so that no inf - inf is formed
    m_none = b_lse == float("inf")
    b_factor = tl.where(m_none, 1.0, 1.0 / (1.0 + tl.exp(b_sink - tl.where(m_none, 0.0, b_lse))))
    m_hd = m_h[:, None]
    # (an out of other strides may span more than 2^31 elements: its heads and columns are offset in int64)
    o_h64 = tl.cast(o_h, tl.int64)[:, None]
    o_d64 = tl.cast(o_d, tl.int64)[None, :]
    p_src = p_o + i_b * stride_ob + i_s * stride_os + o_h64 * stride_oh + o_d[None, :]
    b_o = tl.load(p_src, mask=m_hd, other=0.0).to(tl.float32)
    p_dst = p_out + i_b * stride_db + i_s * stride_ds + o_h64 * stride_dh + o_d64 * stride_dd
    tl.store(p_dst, (b_o * b_factor[:, None]).to(p_out.dtype.element_ty), mask=m_hd)


def compact_lists(
    indices: torch.Tensor, topk_length: torch.Tensor | None, slots: int, *, page: int = 1, block_rows: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(table [b·s_q, topk] int32, lengths [b·s_q] int32)`` for ``indices`` ``[b, s_q, topk]`` int32 (the last
    dimension contiguous): row ``i·s_q + s`` holds token ``s`` of request ``i``'s valid entries (``0 <= slot <
    slots``, at positions below ``topk_length[i]`` when given: ``[b]`` int32, contiguous, negative meaning none) in
    their order, then zeros; ``lengths`` counts them. Each entry is the slot's cache row, ``(slot // page) ·
    block_rows + slot % page``, for a cache whose pages of ``page`` rows start ``block_rows`` rows apart (the slot
    itself where they are back to back: ``block_rows == page``).

    Example::

        table, lengths = compact_lists(indices, topk_length, num_blocks * page, page=page, block_rows=page)
    """
    check_kernel_device("indices", indices)
    if indices.dim() != 3 or indices.dtype != torch.int32:
        raise ValueError(f"indices: expected [b, s_q, topk] int32, got {list(indices.shape)} {indices.dtype}")
    b, s_q, topk = indices.shape
    if topk > 1 and indices.stride(2) != 1:
        raise ValueError(f"indices: the last dimension must be contiguous (stride 1), got stride {indices.stride(2)}")
    if topk_length is not None:
        check_kernel_device("topk_length", topk_length)
        if topk_length.shape != (b,) or topk_length.dtype != torch.int32 or topk_length.device != indices.device:
            raise ValueError(
                f"topk_length: expected [b={b}] int32 on {indices.device}, got {list(topk_length.shape)} "
                f"{topk_length.dtype} on {topk_length.device}"
            )
        if b > 1 and topk_length.stride(0) != 1:  # (the kernel reads request i's length at element i)
            raise ValueError(f"topk_length: must be contiguous (stride 1), got stride {topk_length.stride(0)}")
    for name, value, least in (("slots", slots, 0), ("page", page, 1), ("block_rows", block_rows, page)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name}: expected an int of at least {least}, got {value!r}")
    if block_rows != page and slots and (slots - 1) // page * block_rows + page > INT32_MAX + 1:
        raise ValueError(
            f"block_rows: the last page's rows lie past 2^31 ({slots} slots, pages {block_rows} rows apart)"
        )
    table = torch.empty((b * s_q, topk), dtype=torch.int32, device=indices.device)
    lengths = torch.empty(b * s_q, dtype=torch.int32, device=indices.device)
    if b * s_q == 0:
        return table, lengths
    if topk == 0:
        return table, lengths.zero_()
    for b0 in range(0, b, MAX_GRID_YZ):
        # a run of requests: its lists, lengths and rows of the table (the whole tensors where one run holds all)
        b1 = min(b, b0 + MAX_GRID_YZ)
        whole = b1 - b0 == b
        idx = indices if whole else indices[b0:b1]
        length = topk_length if whole or topk_length is None else topk_length[b0:b1]
        tab, cnt = (table, lengths) if whole else (table[b0 * s_q : b1 * s_q], lengths[b0 * s_q : b1 * s_q])
        launch.replayed_run(
            _REPLAYS, _mla_v32_lists_kernel, (s_q, b1 - b0), (idx, length, tab, cnt),
            ("compact", slots, page, block_rows),
            p_idx=idx, p_len=length if length is not None else cnt, p_table=tab, p_count=cnt,
            S=s_q, topk=topk, last_slot=min(slots, INT32_MAX + 1) - 1, stride_b=idx.stride(0),
            stride_s=idx.stride(1), page=page, block_rows=block_rows, HAS_LEN=length is not None,
            TO_ROWS=block_rows != page, BLOCK_K=BLOCK_K, num_warps=4,
        )  # fmt: skip
    return table, lengths


def scale_by_sink(o: torch.Tensor, lse: torch.Tensor, attn_sink: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i, s, h, :] = o[i, s, h, :] · exp(lse[i, s, h]) / (exp(lse[i, s, h]) + exp(attn_sink[h]))`` (``o``
    unchanged where ``lse`` is +inf) for ``o`` ``[b, s_q, h_q, 512]`` fp16/bf16 whose last dimension is contiguous,
    ``lse`` ``[b, s_q, h_q]`` contiguous fp32, ``attn_sink`` ``[h_q]`` contiguous fp32 and ``out`` like ``o`` (any
    strides; ``o`` itself scales in place). Returns ``out``.

    Example::

        scale_by_sink(o, lse, sink, o)
    """
    check_kernel_device("o", o)
    if o.dim() != 4 or o.shape[3] != BLOCK_D or o.dtype not in (torch.float16, torch.bfloat16) or o.stride(3) != 1:
        raise ValueError(
            f"o: expected [b, s_q, h_q, {BLOCK_D}] fp16/bf16 with a contiguous last dimension, got {list(o.shape)} "
            f"{o.dtype} strides {list(o.stride())}"
        )
    b, s_q, h, _ = o.shape
    for name, value, shape in (("lse", lse, (b, s_q, h)), ("attn_sink", attn_sink, (h,))):
        if (value.shape, value.dtype, value.device) != (shape, torch.float32, o.device) or not value.is_contiguous():
            raise ValueError(
                f"{name}: expected a contiguous {list(shape)} fp32 tensor on {o.device}, got {list(value.shape)} "
                f"{value.dtype} on {value.device}"
            )
    if out.shape != o.shape or out.dtype != o.dtype or out.device != o.device:
        raise ValueError(
            f"out: expected {list(o.shape)} {o.dtype} on {o.device}, got {list(out.shape)} {out.dtype} on {out.device}"
        )
    if b * s_q * h == 0:
        return out
    block_h = min(8, triton.next_power_of_2(h))
    launch.replayed_run(
        _REPLAYS, _mla_sink_scale_kernel, (b * s_q, triton.cdiv(h, block_h)), (o, lse, attn_sink, out), ("sink",),
        p_o=o, p_lse=lse, p_sink=attn_sink, p_out=out, S=s_q, H=h, stride_ob=o.stride(0), stride_os=o.stride(1),
        stride_oh=o.stride(2), stride_db=out.stride(0), stride_ds=out.stride(1), stride_dh=out.stride(2),
        stride_dd=out.stride(3), BLOCK_H=block_h, BLOCK_D=BLOCK_D, num_warps=4,
    )  # fmt: skip
    return out


# Launch replays of recent launches by signature (kernels.launch), least recently used first; values: the replay,
# or None where the signature cannot be replayed.
_REPLAYS = launch.ReplayCache(32)
