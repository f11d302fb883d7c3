"""DeepSeek-V4 decode attention for Hugging Face transformers' ``DeepseekV4`` models, run by wavemla's sparse decode.

::

    import wavemla.hf_attention
    wavemla.hf_attention.register()     # adds attn_implementation="wavemla" to transformers
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="wavemla", dtype=torch.bfloat16)

transformers' ``DeepseekV4Attention`` gathers a layer's rows itself (the sliding window's, then, in CSA and HCA
layers, the compressed rows) into one tensor read as both key and value, ``[b, 1, L, 512]``, with an additive mask
``[b, 1, s_q, L]`` (0: attended; the dtype's minimum or −inf: not) and the per-head sinks as ``s_aux``. The function
registered here reads that tensor as a row cache of page 1 (row ``j`` of request ``i`` is slot ``i·L + j``), turns
the mask into index lists (−1 where masked) and runs :func:`wavemla.sparse_mla_decode` with the sinks and the
layer's scale: the semantics of transformers' eager attention with sinks, which ``tests/test_hf_attention.py``
checks call by call through a tiny random DeepSeek-V4 model. Steps of more than 4 query tokens (prefill) run
transformers' eager attention of the same module.

What it refuses (``ValueError`` naming the argument): a query that is not bf16/fp16 with head_dim 512, more than one
key head, a key that is not the value, a mask holding biases other than 0 and "masked" (checked outside CUDA-graph
capture only: the check reads the mask on the host). The lists hold every gathered row, masked or not, so a CSA layer
walks its whole compressed prefix where the indexer picked 512 rows; the engines' paths (FlashMLA's call with the
indexer's lists) do not.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from wavemla.api import MAX_S_Q, sparse_mla_decode

NAME = "wavemla"


def _valid_rows(mask: torch.Tensor | None, b: int, s_q: int, length: int) -> torch.Tensor | None:
    """``[b, s_q, L]`` bool of the attended rows (None: all), from an additive or boolean attention mask."""
    if mask is None:
        return None
    if mask.dim() != 4 or mask.shape[0] not in (1, b) or mask.shape[1] != 1 or tuple(mask.shape[2:]) != (s_q, length):
        raise ValueError(
            f"attention_mask: expected [b={b} or 1, 1, s_q={s_q}, L={length}] (one mask for all heads), "
            f"got {list(mask.shape)}"
        )
    m = mask[:, 0].expand(b, s_q, length)
    if m.dtype == torch.bool:
        return m
    masked = m <= torch.finfo(m.dtype).min / 2  # the dtype's minimum, or -inf
    capturing = m.is_cuda and torch.cuda.is_current_stream_capturing()
    if not capturing and bool(((m != 0) & ~masked).any()):
        raise ValueError(
            "attention_mask: holds biases other than 0 (attended) and the dtype's minimum or -inf (masked); "
            "the sparse decode takes index lists, not biases"
        )
    return ~masked


def _attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    b, _, s_q, d = query.shape
    if s_q > MAX_S_Q:  # prefill: transformers' own eager attention of this model
        eager = importlib.import_module(type(module).__module__).eager_attention_forward
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    if dropout:
        raise ValueError(f"dropout: the decode has none, got {dropout}")
    if query.dtype not in (torch.bfloat16, torch.float16) or d != 512:
        raise ValueError(f"query: expected bf16/fp16 [b, h, s_q, 512], got {query.dtype} {list(query.shape)}")
    same = key is value or (
        key.shape == value.shape and key.stride() == value.stride() and key.data_ptr() == value.data_ptr()
    )  # the same memory: no host read, so a CUDA-graph capture can take the check
    if not same:
        raise ValueError("value: the key must be the value, the same tensor (DeepSeek-V4 reads one latent as both)")
    if key.dim() != 4 or key.shape[0] != b or key.shape[1] != 1 or key.shape[3] != d or key.dtype != query.dtype:
        raise ValueError(f"key: expected [b={b}, 1, L, {d}] {query.dtype}, got {key.dtype} {list(key.shape)}")
    length = key.shape[2]
    if length == 0:
        raise ValueError("key: no rows (L = 0)")
    valid = _valid_rows(attention_mask, b, s_q, length)
    cache = key.reshape(b * length, 1, 1, d)  # a copy only where the key is not contiguous
    slots = torch.arange(length, device=query.device, dtype=torch.int32) + (
        torch.arange(b, device=query.device, dtype=torch.int32) * length
    ).view(b, 1, 1)
    indices = slots.expand(b, s_q, length)
    if valid is not None:
        indices = torch.where(valid, indices, torch.full_like(indices, -1))
    sinks = kwargs.get("s_aux")
    out, _ = sparse_mla_decode(
        query.transpose(1, 2).contiguous(),
        cache,
        indices.contiguous(),
        attn_sink=None if sinks is None else sinks.float(),
        softmax_scale=float(scaling),
    )
    return out, None


def register(name: str = NAME) -> str:
    """Register the decode as transformers attention implementation ``name``; returns ``name``. Needs
    ``transformers`` (``pip install transformers``); an ImportError says so."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask
    except ImportError as exc:
        raise ImportError("wavemla.hf_attention.register: needs transformers (pip install transformers)") from exc
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")
    AttentionInterface.register(name, _attention)
    # The eager attention's masks (0 / the dtype's minimum): without a mask function of its own, transformers builds
    # no mask for an implementation, and DeepSeek-V4's CSA layers then drop the indexer's selection with it.
    AttentionMaskInterface.register(name, eager_mask)
    return name
