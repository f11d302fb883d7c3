"""From the lightning indexer to the sparse decode: the compressed-row arguments of ``flash_mla_with_kvcache``.

The indexer returns global slots into the compressed caches (``block_table[b, i // page] · page + i % page``). They
address the compressed KV cache (``extra_k_cache``) directly when both caches share the block table and page size,
which is how serving engines lay them out (one block id covers the same compressed rows in both caches).

Example::

    idx, length = lightning_indexer(q_idx, w, index_k_cache, block_table, n_comp, 512)
    out, lse = wavemla.flash_mla_with_kvcache(
        q, swa_cache, None, None, 512, sched, softmax_scale=512**-0.5, is_fp8_kvcache=True,
        indices=swa_idx, attn_sink=sink, topk_length=swa_len, extra_k_cache=comp_cache,
        **sparse_decode_extra_args(idx, length))
"""

from __future__ import annotations

import torch

from wavemla.kernels.indexer import lightning_indexer
from wavemla.reference.indexer import topk_length_per_request


def sparse_decode_extra_args(
    indices: torch.Tensor,
    topk_length: torch.Tensor,
    *,
    extra_k_cache: torch.Tensor | None = None,
    index_page_size: int | None = None,
) -> dict[str, torch.Tensor]:
    """``{"extra_indices_in_kvcache": [b, s_q, topk] int32, "extra_topk_length": [b] int32}``.

    ``topk_length`` may be per token ``[b, s_q]`` (reduced with the exact per-request maximum, see
    :func:`~wavemla.reference.indexer.topk_length_per_request`) or already ``[b]``. When ``extra_k_cache`` and
    ``index_page_size`` are given, their page sizes must agree (slots are interpreted with the KV cache's page).
    No host synchronisation: safe inside CUDA-graph capture.
    """
    if not isinstance(indices, torch.Tensor) or indices.dtype != torch.int32 or indices.dim() != 3:
        raise ValueError(f"indices: expected an int32 tensor [b, s_q, topk], got {_describe(indices)}")
    if not isinstance(topk_length, torch.Tensor) or topk_length.dtype != torch.int32:
        raise ValueError(f"topk_length: expected an int32 tensor [b, s_q] or [b], got {_describe(topk_length)}")
    b, s_q, _ = indices.shape
    if tuple(topk_length.shape) not in ((b, s_q), (b,)):
        raise ValueError(f"topk_length: expected shape [{b}, {s_q}] or [{b}], got {_describe(topk_length)}")
    if topk_length.device != indices.device:
        raise ValueError(f"topk_length: expected a tensor on {indices.device}, got {_describe(topk_length)}")
    _check_page(extra_k_cache, index_page_size)
    return {
        "extra_indices_in_kvcache": indices,
        "extra_topk_length": topk_length_per_request(topk_length),
    }


def _check_page(extra_k_cache: object, index_page_size: int | None) -> None:
    """``extra_k_cache``'s page (its dim 1) must be ``index_page_size`` where both are given."""
    if (
        extra_k_cache is not None
        and index_page_size is not None
        and (
            not isinstance(extra_k_cache, torch.Tensor)
            or extra_k_cache.dim() < 2
            or extra_k_cache.shape[1] != index_page_size
        )
    ):
        raise ValueError(
            f"extra_k_cache: expected page size {index_page_size} (the index-K cache's), so that indexer slots "
            f"address the same rows; got {_describe(extra_k_cache)}"
        )


def indexer_extra_args(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_comp: torch.Tensor,
    topk: int,
    *,
    extra_k_cache: torch.Tensor | None = None,
    max_n_comp: int | None = None,
    index_k_layout: str = "rows",
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    workspace: torch.Tensor | None = None,
    select: str | None = None,
) -> dict[str, torch.Tensor]:
    """Run :func:`~wavemla.kernels.indexer.lightning_indexer` and return the sparse decode's extra-cache kwargs.

    ``index_k_layout``, ``out``, ``workspace`` and ``select`` are passed through (``out`` and ``workspace``: fixed
    buffers, as a CUDA graph replays them). A page-size mismatch between ``extra_k_cache`` and the index-K cache
    raises before the indexer runs.

    Example::

        kwargs = indexer_extra_args(q_idx, w, index_k_cache, block_table, n_comp, 512, extra_k_cache=comp_cache)
    """
    paged = isinstance(index_k_cache, torch.Tensor) and index_k_cache.dim() >= 2  # else the indexer names it
    _check_page(extra_k_cache, index_k_cache.shape[1] if paged else None)
    indices, topk_length = lightning_indexer(
        q_idx, weights, index_k_cache, block_table, n_comp, topk, max_n_comp=max_n_comp, out=out,
        workspace=workspace, index_k_layout=index_k_layout, select=select,
    )  # fmt: skip
    return sparse_decode_extra_args(
        indices, topk_length, extra_k_cache=extra_k_cache, index_page_size=index_k_cache.shape[1]
    )


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor of shape {tuple(x.shape)} on {x.device}"
    return type(x).__name__
