"""Hostile inputs to the public decode calls: every case gives the reference's answer or a ValueError naming the
argument; never a crash, never a silent wrong answer.

The property test draws shapes (b = 0..3, s_q 1..2, h_q ≤ 16, topk ≤ 48, page ≤ 64, empty caches included), layouts
(non-contiguous q, indices and caches, stride-0 broadcasts, padded FP8 pages, float8_e4m3fn views, a caller's NaN-filled
out buffer: contiguous, head-padded or misaligned), index values
(−2^31, −2, −1, the slot count, 2^31−1, random int32, valid slots), topk_length beyond topk or negative, ±inf sinks,
batch-invariant mode, forced split counts, both entry points, and with probability ~0.3 one invalid argument. Every
cache row no valid entry selects — index entries past topk_length included — and every padding byte is poisoned
(NaN/±inf rows, 0xFF FP8 bytes), so a stray read changes the answer.

CPU lane: q is fp16. The interpreter rounds fp32 -> bf16 by truncation (measured: 90% of bf16 outputs equal the
truncated reference, 47% the rounded one), which puts bf16 outputs just outside FlashMLA's cosine bound
(5.5e-6 vs 5e-6); bf16 is covered on the GPU lane.

Examples per run: ``HOSTILE_EXAMPLES`` (sized for ≤ 3 min on 2 CPU cores), or the ``max_examples`` of a hypothesis
profile loaded with ``--hypothesis-profile``. A long local run::

    PYTHONPATH=src python -m tests.test_hostile_inputs --examples 2000
"""

from __future__ import annotations

import argparse
import ast
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE, HAS_CUDA
from wavemla import config, flash_mla_with_kvcache, get_mla_metadata, sparse_mla_decode
from wavemla.reference import sparse_decode_ref
from wavemla.reference.fp8 import BYTES_PER_TOKEN, model1_page_bytes, page_views, quantize_model1
from wavemla.testing import TOLERANCES, check_close, rows_out_tolerance

LANE = "gpu" if HAS_CUDA else "interp"
# GPU: each new (page, flags, tile) combination compiles a kernel, ~1 s each, so fewer examples there.
HOSTILE_EXAMPLES = 1000 if not HAS_CUDA else 200
REPO = Path(__file__).resolve().parents[1]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _examples(default: int = HOSTILE_EXAMPLES) -> int:
    """``default``, unless a non-default hypothesis profile was loaded (then its max_examples)."""
    if settings.get_current_profile_name() == "default":
        return default
    return settings.default.max_examples


def outcome(expect: str | None, run: Callable[[], Any], where: str) -> Any:
    """With ``expect`` (an argument's name): check that ``run()`` raises a ValueError whose message starts with it and
    return None. Without: ``run()``'s result (a valid call must not be refused)."""
    if expect is not None:
        with pytest.raises(ValueError) as info:
            run()
        message = str(info.value)
        assert message.startswith(expect + ":"), f"expected a ValueError naming {expect!r}, got {message!r}"
        return None
    try:
        return run()
    except ValueError as exc:
        raise AssertionError(f"valid input refused: {exc} [{where}]") from exc


def decode_outcome(case: Any, call: Callable[[Any], Any]) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`outcome` of ``call(case)`` for a decode (``case``: ``expect``, ``notes``, ``kwargs`` with ``q``): None
    where the case must be refused, else ``(out, lse)`` after checking what every decode returns, ``out [b, s_q, h,
    512]`` in q's dtype and ``lse [b, h, s_q]`` fp32."""
    where = "; ".join(case.notes)
    result = outcome(case.expect, lambda: call(case), where)
    if result is None:
        return None
    out, lse = result
    b, s_q, h, _ = case.kwargs["q"].shape
    assert out.dtype == case.kwargs["q"].dtype and tuple(out.shape) == (b, s_q, h, 512), where
    assert lse.dtype == torch.float32 and tuple(lse.shape) == (b, h, s_q), where
    return out, lse


# ------------------------------------------------------------------------------------------------ the reference
def reference(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, **kw: Any) -> tuple[Any, Any]:
    """:func:`sparse_decode_ref` on equivalent inputs for three corners it cannot take as given (it raises on each):
    an empty batch (empty results), a zero-width index list (it fails to reshape an empty gather: one −1 column is
    added) and a cache with no slots (it indexes row 0 of an empty table: every index becomes −1 against a one-row
    cache). An invalid entry is excluded either way, so the answer is the reference's by its own definition."""

    def fix(cache: torch.Tensor | None, idx: torch.Tensor | None) -> tuple[Any, Any]:
        if cache is None or idx is None:
            return cache, idx
        if cache.shape[0] * cache.shape[1] == 0:
            idx = torch.full_like(idx, -1)
            cache = _one_row_like(cache)
        if idx.shape[2] == 0:
            idx = torch.full((*idx.shape[:2], 1), -1, dtype=torch.int32, device=idx.device)
        return cache, idx

    if q.shape[0] == 0:  # it cannot reshape an empty gather either: an empty batch has empty results
        b, s_q, h, d = q.shape
        return torch.zeros((b, s_q, h, d), dtype=torch.float64), torch.zeros((b, h, s_q), dtype=torch.float64)
    kv_cache, indices = fix(kv_cache, indices)
    kw["extra_kv_cache"], kw["extra_indices"] = fix(kw.get("extra_kv_cache"), kw.get("extra_indices"))
    return sparse_decode_ref(q, kv_cache, indices, **kw)


def _one_row_like(cache: torch.Tensor) -> torch.Tensor:
    if cache.shape[-1] == BYTES_PER_TOKEN:
        return quantize_model1(torch.zeros(1, 1, 1, 512)).to(cache.device)
    return torch.zeros(1, 1, 1, 512, dtype=cache.dtype, device=cache.device)


# ---------------------------------------------------------------------------------------------------- builders
def _int_values(gen: torch.Generator, n: int, slots: int, p_valid: float) -> torch.Tensor:
    """n int32 index values: valid slots with probability p_valid, else specials or random int32."""
    valid = torch.randint(0, max(slots, 1), (n,), generator=gen) if slots else torch.zeros(n, dtype=torch.int64)
    specials = torch.tensor([INT32_MIN, INT32_MIN + 1, -2, -1, slots, slots + 1, INT32_MAX - 1, INT32_MAX])
    special = specials[torch.randint(0, specials.numel(), (n,), generator=gen)]
    rnd = torch.randint(INT32_MIN, INT32_MAX, (n,), generator=gen, dtype=torch.int64)
    u = torch.rand(n, generator=gen)
    out = torch.where(u < p_valid, valid, torch.where(u < p_valid + (1 - p_valid) * 0.7, special, rnd))
    if not slots:
        out = torch.where(u < p_valid, special, out)  # nothing is valid in an empty cache
    return out.to(torch.int32)


def _placed(buf: torch.Tensor, view: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``view(buf)`` on DEVICE: the whole buffer (padding included) moves, so the layout survives the move."""
    return view(buf.to(DEVICE))


def _layout_indices(values: torch.Tensor, layout: str, pad_value: int) -> torch.Tensor:
    """Index tensor [b, s_q, k] holding ``values`` in the requested memory layout (padding: a poisoned slot)."""
    b, s_q, k = values.shape
    view: Callable[[torch.Tensor], torch.Tensor]
    if layout == "pad_last":
        buf = torch.full((b, s_q, k + 5), pad_value, dtype=torch.int32)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t[:, :, :k]
    elif layout == "transposed":
        buf = torch.full((s_q, b, k), pad_value, dtype=torch.int32)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t.transpose(0, 1)
    elif layout == "broadcast_s":
        return values[:, :1].to(DEVICE).expand(b, s_q, k)
    else:
        return values.clone().to(DEVICE)
    view(buf).copy_(values)
    return _placed(buf, view)


def _used_slots(idx: torch.Tensor, lengths: torch.Tensor | None, slots: int) -> torch.Tensor:
    """Bool [slots]: slots some entry actually selects (valid value at a position below the request's length)."""
    b, _, k = idx.shape
    ids = idx.long().cpu()
    ok = (ids >= 0) & (ids < slots)
    if lengths is not None:
        lim = lengths.long().cpu().clamp(0, k).view(b, 1, 1)
        ok &= torch.arange(k).view(1, 1, k) < lim
    used = torch.zeros(max(slots, 0), dtype=torch.bool)
    if slots:
        used[ids[ok]] = True
    return used


def _rows_cache(
    gen: torch.Generator, nb: int, page: int, dtype: torch.dtype, layout: str, used: torch.Tensor, poison: float
) -> torch.Tensor:
    """A row cache [nb, page, 1, 512]; rows not in ``used`` and all padding hold ``poison``."""
    shape = {"page_pad": (nb, page + 3, 1, 512), "dim2": (nb, page, 2, 512)}.get(layout, (nb, page, 1, 512))
    buf = torch.full(shape, poison, dtype=dtype)

    def view(t: torch.Tensor) -> torch.Tensor:
        return t[:, :page, :1]

    rows = torch.randn((nb, page, 512), generator=gen).to(dtype)
    sel = used.view(nb, page)
    view(buf)[:, :, 0, :][sel] = rows[sel]
    return _placed(buf, view)


def _fp8_cache(gen: torch.Generator, nb: int, page: int, layout: str, used: torch.Tensor) -> torch.Tensor:
    """A MODEL1 cache; unused rows (nope, rope and scale bytes) and page padding are 0xFF (NaN codes)."""
    rows = torch.randn((nb, page, 1, 512), generator=gen)
    packed = quantize_model1(rows)
    stride0 = model1_page_bytes(page) + (2 * 37 if layout == "block_pad" else 0)
    flat = torch.full((nb, stride0), 0xFF, dtype=torch.uint8)
    cache = flat[:, : page * BYTES_PER_TOKEN].view(nb, page, 1, BYTES_PER_TOKEN)
    data, scales = page_views(cache)
    src_data, src_scales = page_views(packed)
    sel = used.view(nb, page)
    data[sel] = src_data[sel]
    scales[sel] = src_scales[sel]
    cache = _placed(flat, lambda t: t[:, : page * BYTES_PER_TOKEN].view(nb, page, 1, BYTES_PER_TOKEN))
    return cache.view(torch.float8_e4m3fn) if layout == "e4m3_view" else cache


def _q(gen: torch.Generator, b: int, s_q: int, h: int, dtype: torch.dtype, layout: str, d: int = 512) -> torch.Tensor:
    """q [b, s_q, h, d] in a layout; padding is NaN so that a stray read shows."""
    vals = torch.randn((b, s_q, h, d), generator=gen).clamp(-1.0, 1.0).to(dtype)
    nan = float("nan")
    view: Callable[[torch.Tensor], torch.Tensor]
    if layout == "head_pad":
        buf = torch.full((b, s_q, h + 3, d), nan, dtype=dtype)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t[:, :, :h]
    elif layout == "transposed":
        buf = torch.full((s_q, b, h, d), nan, dtype=dtype)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t.transpose(0, 1)
    elif layout == "token_stride":
        buf = torch.full((b, 2 * s_q, h, d), nan, dtype=dtype)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t[:, ::2]
    elif layout == "broadcast_h":
        return vals[:, :, :1].to(DEVICE).expand(b, s_q, h, d)
    else:
        return vals.to(DEVICE)
    view(buf).copy_(vals)
    return _placed(buf, view)


# ------------------------------------------------------------------------------------------------- the cases
@dataclass
class Case:
    """One call: its arguments, how to call, and the ValueError prefix expected (None: a result is expected)."""

    kwargs: dict[str, Any]
    entry: str = "native"  # "native" (sparse_mla_decode) or "flashmla" (flash_mla_with_kvcache)
    invariant_via: str = "arg"  # "arg" or "knob"
    splits: int | None = None
    expect: str | None = None
    notes: list[str] = field(default_factory=list)
    flash: dict[str, Any] = field(default_factory=dict)  # overrides of flash_mla_with_kvcache-only arguments
    prime: Callable[[], None] | None = None  # a call made first (plans a metadata object for another shape)


LENGTH_CHOICES = ("none", "int32min", "neg", "zero", "one", "half", "topk-1", "topk", "topk+1", "int32max", "rand")


def _length_value(kind: str, k: int, gen: torch.Generator) -> int:
    return {
        "int32min": INT32_MIN,
        "neg": -3,
        "zero": 0,
        "one": 1,
        "half": k // 2,
        "topk-1": k - 1,
        "topk": k,
        "topk+1": k + 1,
        "int32max": INT32_MAX,
    }.get(kind, int(torch.randint(-3, k + 4, (1,), generator=gen)))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    seed = draw(st.integers(0, 2**32 - 1))
    gen = torch.Generator().manual_seed(seed)
    b = draw(st.sampled_from([0, 1, 1, 2, 2, 3]))
    s_q = draw(st.integers(1, 2))
    h = draw(st.sampled_from([1, 2, 3, 5, 8, 13, 16]))
    fp8 = draw(st.booleans())
    dtypes = [torch.float16, torch.bfloat16] if HAS_CUDA else [torch.float16]
    q_dtype = draw(st.sampled_from(dtypes))
    notes = [f"b={b} s_q={s_q} h={h} fp8={fp8} q={q_dtype} seed={seed}"]

    def index_list(prefix: str) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, str]:
        page = draw(st.sampled_from([1, 2, 3, 7, 16, 61, 64]), label=f"{prefix}page")
        nb = draw(st.integers(0, 4), label=f"{prefix}blocks")
        # A zero-width list now and then (hypothesis would otherwise draw it far more often than it matters).
        k = (
            0
            if draw(st.integers(0, 9), label=f"{prefix}empty") == 0
            else draw(st.integers(1, 48), label=f"{prefix}topk")
        )
        p_valid = draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]), label=f"{prefix}p_valid")
        slots = nb * page
        values = _int_values(gen, b * s_q * k, slots, p_valid).view(b, s_q, k)
        kinds = draw(st.lists(st.sampled_from(LENGTH_CHOICES), min_size=b, max_size=b), label=f"{prefix}lengths")
        if b and kinds[0] != "none":
            lengths: torch.Tensor | None = torch.tensor([_length_value(x, k, gen) for x in kinds], dtype=torch.int32)
        else:
            lengths = None
        used = _used_slots(values, lengths, slots)
        layout = draw(st.sampled_from(["contig", "pad_last", "transposed", "broadcast_s"]), label=f"{prefix}layout")
        if layout == "broadcast_s":
            values = values[:, :1].expand(b, s_q, k).contiguous()
            used = _used_slots(values, lengths, slots)
        pad_slot = int((~used).nonzero()[0]) if slots and not bool(used.all()) else -1
        idx = _layout_indices(values, layout, pad_slot)
        if fp8:
            cache = _fp8_cache(gen, nb, page, draw(st.sampled_from(["natural", "block_pad", "e4m3_view"])), used)
        else:
            poison = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
            cache = _rows_cache(
                gen, nb, page, q_dtype, draw(st.sampled_from(["contig", "page_pad", "dim2"])), used, poison
            )
        notes.append(f"{prefix}page={page} blocks={nb} topk={k} p_valid={p_valid} lengths={kinds} layout={layout}")
        return idx, (lengths.to(DEVICE) if lengths is not None else None), cache, layout

    idx, lengths, cache, _ = index_list("")
    kwargs: dict[str, Any] = {
        "q": _q(
            gen,
            b,
            s_q,
            h,
            q_dtype,
            draw(st.sampled_from(["contig", "head_pad", "transposed", "token_stride", "broadcast_h"])),
        ),
        "kv_cache": cache,
        "indices": idx,
        "topk_length": lengths,
    }
    if draw(st.booleans()):
        x_idx, x_len, x_cache, _ = index_list("extra_")
        kwargs.update(extra_kv_cache=x_cache, extra_indices=x_idx, extra_topk_length=x_len)
    sink = draw(st.sampled_from(["none", "normal", "inf-mix"]))
    if sink != "none":
        s = torch.randn(h, generator=gen) * 2.0
        if sink == "inf-mix":
            s[torch.rand(h, generator=gen) < 0.3] = float("inf")
            s[torch.rand(h, generator=gen) < 0.3] = float("-inf")
        kwargs["attn_sink"] = s.to(DEVICE)
    if draw(st.booleans()):
        kwargs["softmax_scale"] = draw(st.floats(1e-3, 0.2))
    out_layout = draw(st.sampled_from(["none", "none", "contig", "head_pad", "misaligned"]))
    if out_layout != "none":
        kwargs["out"] = _out(b, s_q, h, q_dtype, out_layout)
        notes.append(f"out={out_layout}")
    invariant = draw(st.booleans())
    case = Case(kwargs=kwargs, notes=notes)
    case.entry = draw(st.sampled_from(["native", "flashmla"]))
    case.invariant_via = "knob" if case.entry == "flashmla" else draw(st.sampled_from(["arg", "knob"]))
    if invariant:
        kwargs["batch_invariant"] = True
    elif draw(st.booleans()):
        case.splits = draw(st.integers(1, 4))
    if draw(st.booleans()):
        kwargs["metadata"] = get_mla_metadata()[0]
    k_total = kwargs["indices"].shape[2] + (kwargs["extra_indices"].shape[2] if "extra_indices" in kwargs else 0)
    if draw(st.integers(0, 3)) == 0:
        mutation = draw(st.sampled_from(sorted(MUTATIONS)))
        if k_total == 0:  # keep the one base error out of the way of the mutation's own
            kwargs["indices"] = torch.full((b, s_q, 1), -1, dtype=torch.int32, device=DEVICE)
            kwargs["topk_length"] = None
        case.expect = MUTATIONS[mutation](case, gen)
        notes.append(f"mutation {mutation}")
    elif k_total == 0:
        case.expect = "indices"
    return case


def _out(b: int, s_q: int, h: int, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """A caller's out buffer, NaN-filled (an element the call does not write stays NaN): contiguous, a view of h
    heads in a wider buffer, or contiguous 2 bytes past a 16-byte boundary."""
    if layout == "head_pad":
        return torch.full((b, s_q, h + 2, 512), float("nan"), dtype=dtype, device=DEVICE)[:, :, :h]
    n = b * s_q * h * 512
    flat = torch.full((n + 8,), float("nan"), dtype=dtype, device=DEVICE)
    return flat[1 : 1 + n].view(b, s_q, h, 512) if layout == "misaligned" else flat[:n].view(b, s_q, h, 512)


def _native_kwargs(case: Case) -> dict[str, Any]:
    return {k: v for k, v in case.kwargs.items() if k != "batch_invariant" or case.invariant_via == "arg"}


def call(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the case through its entry point (kernel first, before the reference allocates)."""
    knobs: dict[str, Any] = {}
    if case.splits is not None:
        knobs["WAVEMLA_NUM_SPLITS"] = case.splits
    if case.kwargs.get("batch_invariant") and case.invariant_via == "knob":
        knobs["WAVEMLA_BATCH_INVARIANT"] = True
    with config.override(**knobs):
        if case.prime is not None:
            case.prime()
        if case.entry == "native":
            return sparse_mla_decode(**_native_kwargs(case))
        kw = dict(case.kwargs)
        kw.pop("batch_invariant", None)
        flash = {
            "q": kw.pop("q"),
            "k_cache": kw.pop("kv_cache"),
            "block_table": None,
            "cache_seqlens": None,
            "head_dim_v": 512,
            "tile_scheduler_metadata": kw.pop("metadata", None),
            "num_splits": None,
            "softmax_scale": kw.pop("softmax_scale", None),
            "causal": False,
            "is_fp8_kvcache": isinstance(case.kwargs["kv_cache"], torch.Tensor)
            and case.kwargs["kv_cache"].dtype in (torch.uint8, torch.float8_e4m3fn),
            "indices": kw.pop("indices"),
            "attn_sink": kw.pop("attn_sink", None),
            "extra_k_cache": kw.pop("extra_kv_cache", None),
            "extra_indices_in_kvcache": kw.pop("extra_indices", None),
            "topk_length": kw.pop("topk_length", None),
            "extra_topk_length": kw.pop("extra_topk_length", None),
            "out": kw.pop("out", None),
        }
        assert not kw, kw
        flash.update(case.flash)
        return flash_mla_with_kvcache(**flash)


def check_case(case: Case) -> None:
    where = "; ".join(case.notes)
    result = decode_outcome(case, call)
    if result is None:
        return
    out, lse = result
    kw = case.kwargs
    q = kw["q"]
    assert "out" not in kw or out is kw["out"], f"the result is not the caller's out [{where}]"
    ref_out, ref_lse = reference(
        q,
        kw["kv_cache"],
        kw["indices"],
        topk_length=kw.get("topk_length"),
        extra_kv_cache=kw.get("extra_kv_cache"),
        extra_indices=kw.get("extra_indices"),
        extra_topk_length=kw.get("extra_topk_length"),
        attn_sink=kw.get("attn_sink"),
        softmax_scale=kw.get("softmax_scale"),
    )
    rows = kw["kv_cache"].dtype in (torch.bfloat16, torch.float16)  # row caches compute in q's dtype
    bf16_rows = (kw["kv_cache"], kw.get("extra_kv_cache")) if rows and q.dtype == torch.bfloat16 else ()
    assert_matches((out, lse), (ref_out, ref_lse), bf16_rows, where)


def assert_matches(got: tuple[Any, Any], want: tuple[Any, Any], bf16_rows: tuple[Any, ...], where: str) -> None:
    """(out, lse) within the lane's tolerances of the reference's; out's as :func:`wavemla.testing.rows_out_tolerance`
    gives it for ``bf16_rows`` (bf16 row caches, whose softmax weights are rounded to bf16 on a GPU) and out's
    dtype."""
    for name, g, w in (("out", got[0], want[0]), ("lse", got[1], want[1])):
        tol = rows_out_tolerance(LANE, bf16_rows, g.dtype) if name == "out" else TOLERANCES[(name, LANE)]
        problem = check_close(name, g, w, tol)
        assert problem is None, f"{problem} [{where}]"


# -------------------------------------------------------------------------------------------------- mutations
def _set(key: str, value: Any, expect: str) -> Callable[[Case, torch.Generator], str]:
    def mutate(case: Case, gen: torch.Generator) -> str:
        case.kwargs[key] = value(case.kwargs) if callable(value) else value
        return expect

    return mutate


def _flash(key: str, value: Any) -> Callable[[Case, torch.Generator], str]:
    def mutate(case: Case, gen: torch.Generator) -> str:
        case.entry = "flashmla"
        case.invariant_via = "knob"
        case.flash[key] = value
        return key

    return mutate


def _q_last_stride(kw: dict[str, Any]) -> torch.Tensor:
    q = kw["q"]
    return torch.zeros((*q.shape[:3], 1024), dtype=q.dtype, device=q.device)[..., ::2]


def _fp8_stride1(kw: dict[str, Any]) -> torch.Tensor:
    nb, page = max(kw["kv_cache"].shape[0], 1), max(kw["kv_cache"].shape[1], 1)
    return torch.zeros((nb, page, 2, BYTES_PER_TOKEN), dtype=torch.uint8, device=DEVICE)[:, :, :1]


def _fp8_odd(kw: dict[str, Any]) -> torch.Tensor:
    flat = torch.zeros(2 * 584 + 1, dtype=torch.uint8, device=DEVICE)
    return flat[1:].view(2, 1, 1, BYTES_PER_TOKEN)


def _extra_other_format(kw: dict[str, Any]) -> torch.Tensor:
    q = kw["q"]
    if kw["kv_cache"].dtype in (torch.uint8, torch.float8_e4m3fn):
        return torch.zeros((1, 4, 1, 512), dtype=q.dtype, device=DEVICE)
    return quantize_model1(torch.zeros(1, 4, 1, 512)).to(DEVICE)


def _extra_without_indices(case: Case, gen: torch.Generator) -> str:
    case.kwargs["extra_kv_cache"] = case.kwargs["kv_cache"]
    case.kwargs.pop("extra_indices", None)
    case.kwargs.pop("extra_topk_length", None)
    return "extra_indices"


def _extra_without_cache(case: Case, gen: torch.Generator) -> str:
    case.kwargs.pop("extra_kv_cache", None)
    case.kwargs["extra_indices"] = case.kwargs["indices"]
    return "extra_indices / extra_topk_length"


def _extra_format(case: Case, gen: torch.Generator) -> str:
    q = case.kwargs["q"]
    case.kwargs["extra_kv_cache"] = _extra_other_format(case.kwargs)
    case.kwargs["extra_indices"] = torch.zeros((q.shape[0], q.shape[1], 2), dtype=torch.int32, device=DEVICE)
    case.kwargs.pop("extra_topk_length", None)
    return "extra_kv_cache"


def _metadata_reuse(case: Case, gen: torch.Generator) -> str:
    """The metadata object was planned on another shape first (FlashMLA's "one sched per shape" rule)."""
    meta = get_mla_metadata()[0]
    kw = case.kwargs
    other = {k: v for k, v in _native_kwargs(case).items() if k != "metadata"}
    q = kw["q"]
    other["q"] = torch.zeros((q.shape[0] + 1, *q.shape[1:]), dtype=q.dtype, device=DEVICE)
    other["indices"] = torch.full((q.shape[0] + 1, q.shape[1], 1), -1, dtype=torch.int32, device=DEVICE)
    for key in ("topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length", "out"):
        other.pop(key, None)
    case.prime = lambda: sparse_mla_decode(**other, metadata=meta)
    kw["metadata"] = meta
    return "metadata (tile_scheduler_metadata)"


def _bad_scale(value: Any) -> Callable[[Case, torch.Generator], str]:
    return _set("softmax_scale", value, "softmax_scale")


def _lengths(kind: str) -> Callable[[dict[str, Any]], torch.Tensor]:
    def make(kw: dict[str, Any]) -> torch.Tensor:
        b = kw["q"].shape[0]
        if kind == "int64":
            return torch.zeros(b, dtype=torch.int64, device=DEVICE)
        if kind == "shape":
            return torch.zeros(b + 1, dtype=torch.int32, device=DEVICE)
        if kind == "2d":
            return torch.zeros((b, 1), dtype=torch.int32, device=DEVICE)
        return torch.zeros(2 * max(b, 2), dtype=torch.int32, device=DEVICE)[::2][: max(b, 2)]

    return make


def _strided_lengths(case: Case, gen: torch.Generator) -> str:
    q = case.kwargs["q"]
    b = max(q.shape[0], 2)
    if q.shape[0] != b:  # non-contiguous lengths only matter for b > 1: grow the batch
        return _grow_then(case, "topk_length", _lengths("strided"))
    case.kwargs["topk_length"] = _lengths("strided")(case.kwargs)
    return "topk_length"


def _grow_then(case: Case, key: str, make: Callable[[dict[str, Any]], torch.Tensor]) -> str:
    kw = case.kwargs
    q = kw["q"]
    kw["q"] = torch.zeros((2, *q.shape[1:]), dtype=q.dtype, device=DEVICE)
    kw["indices"] = torch.full((2, q.shape[1], 1), -1, dtype=torch.int32, device=DEVICE)
    for k in ("extra_kv_cache", "extra_indices", "extra_topk_length"):
        kw.pop(k, None)
    kw[key] = make(kw)
    return key


def _strided_indices(kw: dict[str, Any]) -> torch.Tensor:
    q = kw["q"]
    return torch.zeros((q.shape[0], q.shape[1], 8), dtype=torch.int32, device=DEVICE)[:, :, ::2]


def _rows_of_other_dtype(case: Case, gen: torch.Generator) -> str:
    kw = case.kwargs
    other = torch.bfloat16 if kw["q"].dtype == torch.float16 else torch.float16
    kw["kv_cache"] = torch.zeros((1, 4, 1, 512), dtype=other, device=DEVICE)  # named before any extra cache's checks
    return "kv_cache"


def _bf16_rows_under_interpreter(case: Case, gen: torch.Generator) -> str:
    kw = case.kwargs
    kw["q"] = kw["q"].to(torch.bfloat16)
    kw["kv_cache"] = torch.zeros((1, 4, 1, 512), dtype=torch.bfloat16, device=DEVICE)
    for k in ("extra_kv_cache", "extra_indices", "extra_topk_length"):
        kw.pop(k, None)
    return "kv_cache" if not HAS_CUDA else _set("kv_cache", lambda k: k["kv_cache"].int(), "kv_cache")(case, gen)


def _q_v32(case: Case, gen: torch.Generator) -> str:
    """A DeepSeek-V3.2 q (576 wide) over this DeepSeek-V4 case's cache (MODEL1 bytes or 512-wide rows), one cache and
    no batch invariance: the V3.2 call refuses the cache."""
    kw = case.kwargs
    kw["q"] = torch.zeros((*kw["q"].shape[:3], 576), dtype=kw["q"].dtype, device=DEVICE)
    for k in ("extra_kv_cache", "extra_indices", "extra_topk_length", "batch_invariant"):
        kw.pop(k, None)
    return "kv_cache"


MUTATIONS: dict[str, Callable[[Case, torch.Generator], str]] = {
    "q_none": _set("q", None, "q"),
    "q_fp32": _set("q", lambda k: k["q"].float(), "q"),
    "q_3d": _set("q", lambda k: k["q"].flatten(0, 1), "q"),
    "q_dim256": _set("q", lambda k: k["q"][..., :256], "q"),
    "q_dim576_v32": _q_v32,
    "q_last_stride": _set("q", _q_last_stride, "q"),
    "q_sq5": _set("q", lambda k: torch.zeros((k["q"].shape[0], 5, 2, 512), dtype=k["q"].dtype, device=DEVICE), "q"),
    "q_h0": _set("q", lambda k: k["q"][:, :, :0], "q"),
    "q_h129": _set("q", lambda k: torch.zeros((1, 1, 129, 512), dtype=k["q"].dtype, device=DEVICE), "q"),
    "q_meta_device": _set("q", lambda k: torch.empty(k["q"].shape, dtype=k["q"].dtype, device="meta"), "q"),
    "cache_int32": _set(
        "kv_cache", lambda k: torch.zeros((1, 4, 1, 512), dtype=torch.int32, device=DEVICE), "kv_cache"
    ),
    "cache_dim2_is_2": _set(
        "kv_cache", lambda k: torch.zeros((1, 4, 2, 512), dtype=k["q"].dtype, device=DEVICE), "kv_cache"
    ),
    "cache_3d": _set("kv_cache", lambda k: torch.zeros((1, 4, 512), dtype=k["q"].dtype, device=DEVICE), "kv_cache"),
    "cache_page0": _set(
        "kv_cache", lambda k: torch.zeros((1, 0, 1, 512), dtype=k["q"].dtype, device=DEVICE), "kv_cache"
    ),
    "cache_page1025": _set(
        "kv_cache", lambda k: torch.zeros((1, 1025, 1, 512), dtype=k["q"].dtype, device=DEVICE), "kv_cache"
    ),
    "cache_width256": _set(
        "kv_cache", lambda k: torch.zeros((1, 4, 1, 256), dtype=k["q"].dtype, device=DEVICE), "kv_cache"
    ),
    "cache_last_stride": _set(
        "kv_cache", lambda k: torch.zeros((1, 4, 1, 1024), dtype=k["q"].dtype, device=DEVICE)[..., ::2], "kv_cache"
    ),
    "cache_rows_other_dtype": _rows_of_other_dtype,
    "cache_fp8_583": _set(
        "kv_cache", lambda k: torch.zeros((1, 4, 1, 583), dtype=torch.uint8, device=DEVICE), "kv_cache"
    ),
    "cache_fp8_stride1": _set("kv_cache", _fp8_stride1, "kv_cache"),
    "cache_fp8_odd_address": _set("kv_cache", _fp8_odd, "kv_cache"),
    "cache_fp8_small_stride0": _set(
        "kv_cache",
        lambda k: torch.as_strided(
            torch.zeros(4 * 584 * 2, dtype=torch.uint8, device=DEVICE), (2, 4, 1, 584), (584, 584, 584, 1)
        ),
        "kv_cache",
    ),
    "cache_bf16_rows_interpreter": _bf16_rows_under_interpreter,
    "indices_int64": _set("indices", lambda k: k["indices"].long(), "indices"),
    "indices_2d": _set("indices", lambda k: k["indices"][:, 0], "indices"),
    "indices_wrong_b": _set(
        "indices",
        lambda k: torch.zeros((k["q"].shape[0] + 1, k["q"].shape[1], 2), dtype=torch.int32, device=DEVICE),
        "indices",
    ),
    "indices_wrong_sq": _set(
        "indices",
        lambda k: torch.zeros((k["q"].shape[0], k["q"].shape[1] + 1, 2), dtype=torch.int32, device=DEVICE),
        "indices",
    ),
    "indices_last_stride": _set("indices", _strided_indices, "indices"),
    "indices_list": _set("indices", lambda k: k["indices"].tolist(), "indices"),
    "topk_length_int64": _set("topk_length", _lengths("int64"), "topk_length"),
    "topk_length_shape": _set("topk_length", _lengths("shape"), "topk_length"),
    "topk_length_2d": _set("topk_length", _lengths("2d"), "topk_length"),
    "topk_length_strided": _strided_lengths,
    "extra_without_indices": _extra_without_indices,
    "extra_indices_without_cache": _extra_without_cache,
    "extra_other_format": _extra_format,
    "sink_fp16": _set(
        "attn_sink", lambda k: torch.zeros(k["q"].shape[2], dtype=torch.float16, device=DEVICE), "attn_sink"
    ),
    "sink_shape": _set("attn_sink", lambda k: torch.zeros(k["q"].shape[2] + 1, device=DEVICE), "attn_sink"),
    "sink_2d": _set("attn_sink", lambda k: torch.zeros((1, k["q"].shape[2]), device=DEVICE), "attn_sink"),
    "scale_zero": _bad_scale(0.0),
    "scale_negative": _bad_scale(-0.1),
    "scale_nan": _bad_scale(float("nan")),
    "scale_inf": _bad_scale(float("inf")),
    "scale_fp32_overflow": _bad_scale(1e300),
    "scale_int_past_float": _bad_scale(10**400),
    "scale_str": _bad_scale("0.1"),
    "scale_bool": _bad_scale(True),
    "scale_tensor": _bad_scale(torch.tensor(0.1)),
    "out_list": _set("out", lambda k: [0.0], "out"),
    "out_heads": _set(
        "out", lambda k: torch.zeros((*k["q"].shape[:2], k["q"].shape[2] + 1, 512), device=DEVICE), "out"
    ),
    "out_fp32": _set("out", lambda k: torch.zeros((*k["q"].shape[:3], 512), device=DEVICE), "out"),
    "out_broadcast": _set("out", lambda k: k["q"].new_zeros(1, 1, 1, 512).expand(2, 1, 1, 512), "out"),
    "out_is_q": _set("out", lambda k: k["q"] if k["q"].numel() else k["q"].new_zeros(1, 1, 1, 1), "out"),
    "metadata_wrong_type": _set("metadata", lambda k: {"plan": None}, "metadata (tile_scheduler_metadata)"),
    "metadata_other_shape": _metadata_reuse,
    "flash_head_dim_v": _flash("head_dim_v", 576),
    "flash_num_splits": _flash("num_splits", torch.ones(1, dtype=torch.int32)),
    # without indices the call is the dense decode, which needs the block table the sparse call passes as None
    "flash_dense_without_block_table": lambda case, gen: (_flash("indices", None)(case, gen), "block_table")[1],
    "flash_causal": _flash("causal", True),
}


def _flash_fp8_flag(case: Case, gen: torch.Generator) -> str:
    kv = case.kwargs["kv_cache"]
    case.entry = "flashmla"
    case.invariant_via = "knob"
    case.flash["is_fp8_kvcache"] = kv.dtype not in (torch.uint8, torch.float8_e4m3fn)
    return "is_fp8_kvcache"


MUTATIONS["flash_is_fp8_kvcache"] = _flash_fp8_flag


# ------------------------------------------------------------------------------------------------------ tests
HOSTILE_SETTINGS = settings(
    max_examples=_examples(),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@HOSTILE_SETTINGS
@given(case=cases())
def test_hostile_inputs_match_the_reference_or_name_the_argument(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_invalid_argument_is_named(mutation: str) -> None:
    """Every mutation on one fixed valid call: a ValueError that starts with the argument's name."""
    gen = torch.Generator().manual_seed(0)
    case = Case(
        kwargs={
            "q": _q(gen, 2, 1, 3, torch.float16, "contig"),
            "kv_cache": _rows_cache(gen, 2, 4, torch.float16, "contig", torch.ones(8, dtype=torch.bool), 0.0),
            "indices": torch.tensor([[[0, 1, 2, 9]], [[3, -1, 7, 5]]], dtype=torch.int32, device=DEVICE),
            "topk_length": torch.tensor([3, 4], dtype=torch.int32, device=DEVICE),
        }
    )
    case.expect = MUTATIONS[mutation](case, gen)
    check_case(case)


def test_the_fixed_valid_call_is_accepted() -> None:
    """The base of the mutation test is itself valid (so each mutation alone causes its error)."""
    gen = torch.Generator().manual_seed(0)
    check_case(
        Case(
            kwargs={
                "q": _q(gen, 2, 1, 3, torch.float16, "contig"),
                "kv_cache": _rows_cache(gen, 2, 4, torch.float16, "contig", torch.ones(8, dtype=torch.bool), 0.0),
                "indices": torch.tensor([[[0, 1, 2, 9]], [[3, -1, 7, 5]]], dtype=torch.int32, device=DEVICE),
                "topk_length": torch.tensor([3, 4], dtype=torch.int32, device=DEVICE),
            }
        )
    )


@pytest.mark.parametrize("topk", [1, 2])
def test_width_one_index_list_may_have_any_stride(topk: int) -> None:
    """A one-entry index list has no meaningful last stride (a broadcast or a strided slice is fine); two entries
    must be contiguous."""
    gen = torch.Generator().manual_seed(1)
    base = torch.tensor([[[1, 1]], [[6, 6]]], dtype=torch.int32, device=DEVICE)
    case = Case(
        kwargs={
            "q": _q(gen, 2, 1, 3, torch.float16, "contig"),
            "kv_cache": _rows_cache(gen, 2, 4, torch.float16, "contig", torch.ones(8, dtype=torch.bool), 0.0),
            "indices": base[:, :, ::2]
            if topk == 1
            else torch.zeros((2, 1, 4), dtype=torch.int32, device=DEVICE)[:, :, ::2],
        },
        expect=None if topk == 1 else "indices",
    )
    check_case(case)


def test_empty_batch_returns_empty_results() -> None:
    gen = torch.Generator().manual_seed(2)
    out, lse = sparse_mla_decode(
        _q(gen, 0, 2, 5, torch.float16, "contig"),
        _fp8_cache(gen, 1, 4, "natural", torch.zeros(4, dtype=torch.bool)),
        torch.zeros((0, 2, 7), dtype=torch.int32, device=DEVICE),
    )
    assert out.shape == (0, 2, 5, 512) and lse.shape == (0, 5, 2)


# ------------------------------------------------------------------------------------ the documented check table
def _message_template(node: ast.expr) -> str | None:
    """The text of a raise's message with each ``{expression}`` kept verbatim (None when not a string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                conv = {-1: "", 114: "!r", 115: "!s", 97: "!a"}[value.conversion]
                spec = (
                    ":" + "".join(str(v.value) for v in value.format_spec.values if isinstance(v, ast.Constant))
                    if value.format_spec is not None
                    else ""
                )
                parts.append("{" + ast.unparse(value.value) + conv + spec + "}")
        return "".join(parts)
    return None


def api_messages() -> set[str]:
    """Every ValueError message template raised in src/wavemla/api.py."""
    tree = ast.parse((REPO / "src" / "wavemla" / "api.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func = node.exc.func
            if isinstance(func, ast.Name) and func.id == "ValueError":
                text = _message_template(node.exc.args[0])
                assert text is not None, ast.unparse(node)
                found.add(text)
    return found


def documented_messages() -> set[str]:
    """The error-text column of the check table in docs/reliability.md (one backticked template per row)."""
    text = (REPO / "docs" / "reliability.md").read_text()
    section = text.split("## Argument checks", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and "`" in line]
    out = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        match = re.fullmatch(r"`(.*)`", cells[-1])
        if match:
            out.add(match.group(1))
    return out


def test_reliability_doc_lists_every_api_check() -> None:
    in_code, in_doc = api_messages(), documented_messages()
    assert in_code - in_doc == set(), f"checks in api.py missing from docs/reliability.md: {sorted(in_code - in_doc)}"
    assert in_doc - in_code == set(), f"documented checks api.py no longer raises: {sorted(in_doc - in_code)}"


# ------------------------------------------------------------------------------------------------ long runs
def long_run(strategy: Any, check: Callable[[Any], None], examples: int) -> int:
    """Check ``examples`` cases drawn from ``strategy`` (random seeds, outside pytest); prints the counts (a case
    without an ``expect`` attribute counts as valid)."""
    counter = {"n": 0, "errors": 0}

    def body(case: Any) -> None:
        counter["n"] += 1
        counter["errors"] += getattr(case, "expect", None) is not None
        check(case)

    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )(given(case=strategy)(body))
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    print(
        f"{counter['n']} hostile cases ({counter['errors']} invalid, {counter['n'] - counter['errors']} valid) "
        f"passed in {seconds:.0f} s ({math.ceil(seconds / max(counter['n'], 1) * 1000)} ms/case) on {DEVICE}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the property test with more examples (random seeds), outside pytest."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--examples", type=int, default=2000)
    return long_run(cases(), check_case, parser.parse_args(argv).examples)


if __name__ == "__main__":
    sys.exit(main())
