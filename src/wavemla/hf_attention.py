"""DeepSeek-V4 attention for transformers' ``DeepseekV4`` models, run by wavemla's sparse decode and prefill.

::

    import wavemla.hf_attention
    wavemla.hf_attention.register()     # adds attn_implementation="wavemla" to transformers
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="wavemla", dtype=torch.bfloat16)

transformers' ``DeepseekV4Attention`` gathers a layer's rows itself (the sliding window's, then, in CSA and HCA
layers, the compressed rows) into one tensor read as both key and value, ``[b, 1, L, 512]``, with an additive mask
``[b, 1, s_q, L]`` (0: attended; the dtype's minimum or −inf: not) and the per-head sinks as ``s_aux``. The function
registered here reads that tensor as a row cache of page 1 (row ``j`` of request ``i`` is slot ``i·L + j``), turns
the mask into index lists (−1 where masked) and runs the sinks and the layer's scale through
:func:`wavemla.sparse_mla_decode` for steps of up to 4 query tokens and :func:`wavemla.sparse_mla_prefill` for
longer ones (prefill): the semantics of transformers' eager attention with sinks, which
``tests/test_hf_attention.py`` checks call by call through a tiny random DeepSeek-V4 model. A token that attends no
row gets the sink's output (zeros), as in eager attention, where the sink outweighs rows masked with the dtype's
minimum; such tokens are padding.

What it refuses (``ValueError`` naming the argument): a query that is not bf16/fp16 with head_dim 512, more than one key
head, a key that is not the value, a mask that is not bool, fp16, bf16 or fp32, a mask holding biases other than 0 and
"masked" (checked outside CUDA-graph capture only: the check reads the mask on the host), dropout. The kernels compute
no gradients: a backward pass that reaches the output raises ``RuntimeError`` naming the inputs
(:func:`wavemla.sparse_mla_decode` and :func:`wavemla.sparse_mla_prefill` refuse it; train with ``"eager"``). The lists
come from the mask in two small kernels (:mod:`wavemla.kernels.mask_lists`), so an eager call pays a few launches for
them rather than a chain of torch ops. A CSA layer's gathered rows are its whole compressed prefix, of which a token
attends at most its window and the indexer's picks: a decode step's lists hold those rows only, ``sliding_window +
index_topk`` entries (640 in DeepSeek-V4), so the decode's work stays flat as the context grows (a token attending more
is refused outside capture: ``attention_mask``). With a bool mask outside capture the cut waits until it pays for the
host read of that check (:data:`CUT_MIN_ENTRIES`); a float mask is read for its bias check anyway, and under capture
nothing is read. In the other layers the lists hold every gathered row, −1 where masked. A prefill's lists hold each
token's attended rows only, as many entries as the token attending the most has (read on the host; under capture, the
decode's rule), since its causal window and the indexer's picks leave most of an ``s_q × L`` mask empty."""

from __future__ import annotations

from typing import Any

import torch

from wavemla.api import MAX_S_Q, sparse_mla_decode, sparse_mla_prefill
from wavemla.kernels.mask_lists import MASK_DTYPES, mask_lists, mask_stats

NAME = "wavemla"
CSA = "compressed_sparse_attention"  # transformers' layer type whose gathered rows are mostly masked
LIST_STEP = 64  # a CSA layer's list width is its window + index_topk rounded up to this
# Where the cut adds a host read (an eager call with a bool mask, which needs no bias check: the cut's count check
# reads it), cut a CSA layer's lists only when at least this many list entries (b · s_q · rows past the width) go.
# Measured when the lists were built by torch ops: the cut's host time (0.1-0.2 ms, paid in full by an eager,
# host-bound step) and about 8 µs of GPU time were repaid from 32K entries (2026-12-01-h200-hf-csa-lists-979c933.log).
# With the mask-list kernels the cut costs no GPU time: on an H100, with the host read either way (a bf16 mask),
# the cut lists took 1.01-1.04 of every row's GPU time at 3K context with 1 and 8 requests (within 0.7 µs) and
# 0.75-0.97 at the other points of b = 1..64 where this rule kept every row
# (2026-12-05-h100-hf-cut-910f069.log), so wherever the read happens anyway, or not at all
# (under CUDA-graph capture), a CSA layer cuts whenever its window + index_topk is under its rows.
CUT_MIN_ENTRIES = 32768


def _mask_rows(mask: torch.Tensor | None, b: int, s_q: int, length: int) -> torch.Tensor | None:
    """The mask as ``[b, s_q, L]`` (a view, broadcast over the requests), or None: every row attended."""
    if mask is None:
        return None
    if mask.dim() != 4 or mask.shape[0] not in (1, b) or mask.shape[1] != 1 or tuple(mask.shape[2:]) != (s_q, length):
        raise ValueError(
            f"attention_mask: expected [b={b} or 1, 1, s_q={s_q}, L={length}] (one mask for all heads), "
            f"got {list(mask.shape)}"
        )
    if mask.dtype not in MASK_DTYPES:
        raise ValueError(f"attention_mask: expected bool, fp16, bf16 or fp32, got {mask.dtype}")
    return mask[:, 0].expand(b, s_q, length)


def _mask_checks(rows: torch.Tensor) -> int:
    """The most rows a token attends, read on the host (one sync) with the mask's bias check, which it raises."""
    most, biased = mask_stats(rows).tolist()
    if biased:
        _refuse_biases()
    return int(most)


def _list_width(module: torch.nn.Module, tokens: int, length: int, *, cut_free: bool) -> int:
    """Index-list width for this layer's call over ``tokens`` query tokens and ``length`` gathered rows: for a CSA
    layer, whose gathered rows hold its whole compressed prefix of which a token attends at most its window and the
    indexer's picks, ``window + index_topk`` rounded up to :data:`LIST_STEP` where that is under L and either
    ``cut_free`` (the call reads the mask on the host anyway, or not at all) or the cut drops at least
    :data:`CUT_MIN_ENTRIES` list entries; otherwise (and for the other layers, whose tokens may attend every
    gathered row) L."""
    cfg = getattr(module, "config", None)
    window, topk = getattr(cfg, "sliding_window", None), getattr(cfg, "index_topk", None)
    if getattr(module, "layer_type", None) != CSA or not isinstance(window, int) or not isinstance(topk, int):
        return length
    width = -(-(window + topk) // LIST_STEP) * LIST_STEP
    if width >= length:
        return length
    return width if cut_free or tokens * (length - width) >= CUT_MIN_ENTRIES else length


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
    b, h, s_q, d = query.shape
    if dropout:
        raise ValueError(f"dropout: wavemla's decode and prefill have none, got {dropout}")
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
    rows = _mask_rows(attention_mask, b, s_q, length)
    capturing = query.is_cuda and torch.cuda.is_current_stream_capturing()
    sinks = kwargs.get("s_aux")
    sink = None if sinks is None else sinks.float().contiguous()
    if s_q > MAX_S_Q:  # prefill: every token of every request one query of the sparse prefill, over all b·L rows
        # (the width holds every token's attended rows, and the bias check ran with its host read)
        width = length if rows is None else _prefill_width(module, rows, b * s_q, length, capturing)
        indices = _index_lists(rows, b, s_q, length, width, query.device)
        out, _, _ = sparse_mla_prefill(
            query.transpose(1, 2).reshape(b * s_q, h, d),
            key.reshape(b * length, 1, d),
            indices.view(b * s_q, 1, width),
            float(scaling),
            attn_sink=sink,
        )
        return out.view(b, s_q, h, d), None
    if rows is None:
        width = length
    else:  # the cut's count check reads the mask on the host, as the bias check of a mask that is not bool does
        width = _list_width(module, b * s_q, length, cut_free=capturing or rows.dtype != torch.bool)
    indices = _index_lists(rows, b, s_q, length, width, query.device)
    if rows is not None and (rows.dtype != torch.bool or width < length) and not capturing:
        most = _mask_checks(rows)  # one host read: biases, and rows a cut list would drop
        if most > width:
            raise ValueError(
                f"attention_mask: a token of this {CSA} layer attends {most} rows, more than its window "
                f"plus index_topk ({width} list entries)"
            )
    cache = key.reshape(b * length, 1, 1, d)  # a copy only where the key is not contiguous
    out, _ = sparse_mla_decode(query.transpose(1, 2).contiguous(), cache, indices, attn_sink=sink,
                               softmax_scale=float(scaling))  # fmt: skip
    return out, None


def _refuse_biases() -> None:
    raise ValueError(
        "attention_mask: holds biases other than 0 (attended) and the dtype's minimum or -inf (masked); "
        "the sparse decode takes index lists, not biases"
    )


def _prefill_width(module: torch.nn.Module, rows: torch.Tensor, tokens: int, length: int, capturing: bool) -> int:
    """Index-list width for a prefill call: outside CUDA-graph capture, the most rows a token attends rounded up to
    :data:`LIST_STEP` (read on the host with the mask's bias check, which it raises) where that is under L, else L.
    A prefill's causal window and the indexer's picks leave most of the ``s_q × L`` mask empty, and the prefill
    walks every list entry. Under capture (nothing read), :func:`_list_width`."""
    if capturing:
        return _list_width(module, tokens, length, cut_free=True)
    width = max(LIST_STEP, -(-_mask_checks(rows) // LIST_STEP) * LIST_STEP)
    return min(width, length)


def _index_lists(
    rows: torch.Tensor | None, b: int, s_q: int, length: int, width: int, device: torch.device
) -> torch.Tensor:
    """Index lists ``[b, s_q, width]`` over the gathered rows (row ``j`` of request ``i`` is slot ``i·L + j``).

    With ``width = L``: every row, −1 where masked. With ``width < L``: each token's attended rows first, in row
    order, then −1 (rows past ``width`` are dropped: the caller checks the count). Either way no host read, so a
    CUDA-graph capture can take it."""
    if rows is None:
        slots = torch.arange(b * length, device=device, dtype=torch.int32).view(b, 1, length)
        return slots.expand(b, s_q, length).contiguous()
    return mask_lists(rows, width)


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
