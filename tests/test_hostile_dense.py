"""Hostile inputs to the paged dense decode (``dense_mla_decode``, and ``flash_mla_with_kvcache`` without indices):
every case gives the reference's answer or a ValueError naming the argument; never a crash, never a silent wrong
answer.

The property test draws shapes (b = 0..3, s_q 1..6 causal or not, h_q ≤ 16, d_qk 576 or 512, page ≤ 64, 0..4 blocks,
block tables 0..5 wide), row caches and FP8 V3.2 caches, layouts (non-contiguous q and block tables, stride-0
broadcasts, padded pages and blocks, float8_e4m3fn views), block-table entries (−2^31, −2, −1, the block count,
2^31−1, random int32, valid blocks), lengths from −2^31 to 2^31−1 (0, 1, the table's capacity and one past it
included), softmax scales, forced tiles and program counts, metadata objects given or not, a caller's NaN-filled out
(contiguous, head-padded or misaligned) or none, both entry points, and
in some cases (125 of a 1,000-case run) one invalid argument. Every cache row no request reads and every padding
byte is poisoned (NaN/±inf rows, 0xFF FP8 bytes: NaN codes, NaN scales, NaN rope), so a stray read changes the
answer.

CPU lane: q and row caches are fp16 (see tests/test_hostile_inputs.py for why not bf16 there). A long local run::

    PYTHONPATH=src python -m tests.test_hostile_dense --examples 1000
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE, HAS_CUDA
from tests.test_hostile_inputs import (
    INT32_MAX,
    INT32_MIN,
    _bad_scale,
    _examples,
    _int_values,
    _out,
    _placed,
    _q,
    _set,
    assert_matches,
    decode_outcome,
    long_run,
)
from wavemla import config, dense_mla_decode, flash_mla_with_kvcache, get_mla_metadata
from wavemla.reference import dense_decode_ref
from wavemla.reference.fp8_rows import quantize_fp8_rows
from wavemla.reference.fp8_v32 import BYTES_PER_TOKEN as V32_BYTES
from wavemla.reference.fp8_v32 import quantize_v32

# Each call is three small launches (about 0.2 s a case under the interpreter); on a GPU each new (page, flags,
# tile) combination compiles kernels first.
DENSE_EXAMPLES = 200 if not HAS_CUDA else 100
FP8_DTYPES = (torch.uint8, torch.float8_e4m3fn)
# Forced tiles (the dense tile paths: 16-row rows, keys-major 64x64 for row caches, 64-row FP8) and program counts.
TILE_KNOBS: dict[str, dict[str, int]] = {
    "planner": {},
    "rows16": dict(WAVEMLA_BLOCK_H=16, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=4, WAVEMLA_NUM_STAGES=1),
    "keys_major": dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2),
    "fp8_rows64": dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=1),
}


# ------------------------------------------------------------------------------------------------ the reference
def reference(q: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor, **kw: Any) -> tuple[Any, Any]:
    """:func:`dense_decode_ref` on equivalent inputs for the one corner it cannot take as given: a cache with no
    blocks (it indexes row 0 of an empty cache). There every block-table entry names no block, so the table becomes
    all −1 against a one-block cache: the same answer by the reference's own definition."""
    if k_cache.shape[0] == 0:
        page = k_cache.shape[1]
        if k_cache.dtype in FP8_DTYPES and k_cache.shape[3] == 576:
            k_cache = quantize_fp8_rows(torch.zeros(1, page, 1, 576), 1.0)[0].to(q.device)
        elif k_cache.dtype in FP8_DTYPES:
            k_cache = quantize_v32(torch.zeros(1, page, 1, 576)).to(q.device)
        else:
            k_cache = torch.zeros((1, page, 1, k_cache.shape[3]), dtype=k_cache.dtype, device=q.device)
        block_table = torch.full_like(block_table, -1)
    return dense_decode_ref(q, k_cache, block_table, **kw)


# ---------------------------------------------------------------------------------------------------- builders
def _used_rows(table: torch.Tensor, lengths: torch.Tensor, nb: int, page: int) -> torch.Tensor:
    """Bool [nb, page]: the cache rows some request reads (rows ``j < L`` of the blocks its table names)."""
    used = torch.zeros((nb, page), dtype=torch.bool)
    cap = table.shape[1] * page
    for i, n in enumerate(lengths.long().clamp(0, cap).tolist()):
        j = torch.arange(n)
        blk = table[i, j // page].long()
        ok = (blk >= 0) & (blk < nb)
        used[blk[ok], (j % page)[ok]] = True
    return used


def _table(values: torch.Tensor, layout: str, pad: int) -> torch.Tensor:
    """Block table [b, mb] holding ``values`` in a memory layout (padding: a poison-looking block id)."""
    b, mb = values.shape
    view: Callable[[torch.Tensor], torch.Tensor]
    if layout == "pad_last":
        buf = torch.full((b, mb + 3), pad, dtype=torch.int32)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t[:, :mb]
    elif layout == "row_stride":
        buf = torch.full((2 * b, mb), pad, dtype=torch.int32)

        def view(t: torch.Tensor) -> torch.Tensor:
            return t[::2]
    elif layout == "broadcast_b":
        return values[:1].to(DEVICE).expand(b, mb) if b else values.to(DEVICE)
    else:
        return values.clone().to(DEVICE)
    view(buf).copy_(values)
    return _placed(buf, view)


def _row_cache(
    gen: torch.Generator, nb: int, page: int, d: int, dtype: torch.dtype, layout: str, used: torch.Tensor, poison: float
) -> torch.Tensor:
    """Rows [nb, page, 1, d]; rows not in ``used`` and all padding hold ``poison``."""
    shape = {"page_pad": (nb, page + 3, 1, d), "dim2": (nb, page, 2, d)}.get(layout, (nb, page, 1, d))
    buf = torch.full(shape, poison, dtype=dtype)

    def view(t: torch.Tensor) -> torch.Tensor:
        return t[:, :page, :1]

    rows = torch.randn((nb, page, d), generator=gen).to(dtype)
    view(buf)[:, :, 0, :][used] = rows[used]
    return _placed(buf, view)


def _fp8_cache(gen: torch.Generator, fmt: str, nb: int, page: int, layout: str, used: torch.Tensor) -> torch.Tensor:
    """An FP8 cache of rows of N(0, 1): ``fmt`` "v32" (the V3.2 layout, 656 bytes a token) or "tensor" (per-tensor
    codes, 576 bytes a token, scale 1/64: within e4m3's range). Unused tokens and block padding (``block_pad``: 36
    bytes past each block, so pages start 4- but not 16-byte aligned) are 0xFF: NaN codes (and NaN scales and rope)."""
    rows = torch.randn((nb, page, 1, 576), generator=gen)
    packed = quantize_v32(rows) if fmt == "v32" else quantize_fp8_rows(rows, 1 / 64)[0].view(torch.uint8)
    width = packed.shape[3]
    stride0 = page * width + (36 if layout == "block_pad" else 0)
    flat = torch.full((nb, stride0), 0xFF, dtype=torch.uint8)

    def view(t: torch.Tensor) -> torch.Tensor:
        return t[:, : page * width].view(nb, page, 1, width)

    view(flat)[used] = packed[used]
    cache = _placed(flat, view)
    return cache.view(torch.float8_e4m3fn) if layout == "e4m3_view" else cache


# ------------------------------------------------------------------------------------------------- the cases
@dataclass
class Case:
    """One call: its arguments, how to call, and the ValueError prefix expected (None: a result is expected)."""

    kwargs: dict[str, Any]
    entry: str = "native"  # "native" (dense_mla_decode) or "flashmla" (flash_mla_with_kvcache, indices=None)
    knobs: dict[str, Any] = field(default_factory=dict)
    expect: str | None = None
    notes: list[str] = field(default_factory=list)
    flash: dict[str, Any] = field(default_factory=dict)  # overrides of flash_mla_with_kvcache-only arguments
    prime: Callable[[], None] | None = None  # a call made first (plans a metadata object for another shape)


LENGTH_CHOICES = ("int32min", "neg", "zero", "one", "page", "rand", "cap", "cap+1", "int32max")


def _length_value(kind: str, page: int, cap: int, gen: torch.Generator) -> int:
    return {
        "int32min": INT32_MIN,
        "neg": -3,
        "zero": 0,
        "one": 1,
        "page": page,
        "cap": cap,
        "cap+1": cap + 1,
        "int32max": INT32_MAX,
    }.get(kind, int(torch.randint(0, cap + 1, (1,), generator=gen)))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    seed = draw(st.integers(0, 2**32 - 1))
    gen = torch.Generator().manual_seed(seed)
    b = draw(st.sampled_from([0, 1, 1, 2, 2, 3]))
    s_q = draw(st.integers(1, 6))
    h = draw(st.sampled_from([1, 2, 3, 5, 8, 13, 16]))
    fmt = draw(st.sampled_from(["rows", "v32", "tensor"]))
    fp8 = fmt != "rows"
    d = 576 if fp8 else draw(st.sampled_from([576, 512]))
    q_dtype = draw(st.sampled_from([torch.float16, torch.bfloat16] if HAS_CUDA else [torch.float16]))
    page = draw(st.sampled_from([1, 2, 3, 7, 16, 61, 64]))
    nb = draw(st.integers(0, 4))
    mb = draw(st.integers(0, 5))
    p_valid = draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    values = _int_values(gen, b * mb, nb, p_valid).view(b, mb)
    kinds = draw(st.lists(st.sampled_from(LENGTH_CHOICES), min_size=b, max_size=b))
    cap = mb * page
    lengths = torch.tensor([_length_value(k, page, cap, gen) for k in kinds], dtype=torch.int32)
    t_layout = draw(st.sampled_from(["contig", "pad_last", "row_stride", "broadcast_b"]))
    if t_layout == "broadcast_b" and b:
        values = values[:1].expand(b, mb).contiguous()
    used = _used_rows(values, lengths, nb, page)
    table = _table(values, t_layout, INT32_MAX - 7)
    if fp8:
        c_layout = draw(st.sampled_from(["natural", "block_pad", "e4m3_view"]))
        cache = _fp8_cache(gen, fmt, nb, page, c_layout, used)
    else:
        c_layout = draw(st.sampled_from(["contig", "page_pad", "dim2"]))
        poison = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
        cache = _row_cache(gen, nb, page, d, q_dtype, c_layout, used, poison)
    q_layout = draw(st.sampled_from(["contig", "head_pad", "transposed", "token_stride", "broadcast_h"]))
    kwargs: dict[str, Any] = {
        "q": _q(gen, b, s_q, h, q_dtype, q_layout, d),
        "k_cache": cache,
        "block_table": table,
        "cache_seqlens": lengths.to(DEVICE),
        "causal": draw(st.booleans()),
    }
    if fmt == "tensor":  # a scale that is not a power of two, on the device (read there)
        kwargs["descale_k"] = torch.tensor([draw(st.floats(0.004, 0.03))], dtype=torch.float32, device=DEVICE)
    notes = [
        f"b={b} s_q={s_q} h={h} d={d} cache={fmt} q={q_dtype} seed={seed} page={page} blocks={nb} table={mb} "
        f"p_valid={p_valid} lengths={kinds} layouts q={q_layout} table={t_layout} cache={c_layout}"
    ]
    if draw(st.booleans()):
        kwargs["softmax_scale"] = draw(st.floats(1e-3, 0.2))
    if draw(st.booleans()):
        kwargs["metadata"] = get_mla_metadata()[0]
        kwargs["reuse_schedule"] = draw(st.booleans())
    out_layout = draw(st.sampled_from(["none", "none", "contig", "head_pad", "misaligned"]))
    if out_layout != "none":
        kwargs["out"] = _out(b, s_q, h, q_dtype, out_layout)
        notes.append(f"out={out_layout}")
    case = Case(kwargs=kwargs, notes=notes)
    case.entry = draw(st.sampled_from(["native", "flashmla"]))
    tiles = draw(st.sampled_from(["planner", "rows16", "fp8_rows64" if fp8 else "keys_major"]))
    if not _tile_fits(tiles, fp8):
        tiles = "planner"  # a forced tile this GPU cannot hold is refused by the planner, by design
    case.knobs = dict(TILE_KNOBS[tiles])
    if draw(st.booleans()):
        case.knobs["WAVEMLA_TARGET_CTAS"] = draw(st.integers(1, 5))
    notes.append(f"entry={case.entry} knobs={case.knobs}")
    if draw(st.sampled_from([False, False, False, True])):
        mutation = draw(st.sampled_from(sorted(MUTATIONS)))
        case.expect = MUTATIONS[mutation](case, gen)
        notes.append(f"mutation {mutation}")
    elif case.entry == "flashmla" and fmt == "tensor" and out_layout == "none" and draw(st.booleans()):
        # FlashMLA's FP8 dense call as vLLM and SGLang make it: q quantized to e4m3, its scale as descale_q; the
        # result is bf16 (kwargs' q, of that dtype, stands for it in the shape and dtype checks)
        scale = draw(st.floats(0.002, 0.01))
        case.flash["q"] = (kwargs["q"].float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        case.flash["descale_q"] = torch.tensor([scale], dtype=torch.float32, device=DEVICE)
        kwargs["q"] = kwargs["q"].to(torch.bfloat16)
        notes.append(f"fp8 q, descale_q {scale}")
    return case


def _tile_fits(tiles: str, fp8: bool) -> bool:
    """Whether the forced tile fits the GPU the tests run on (always under the interpreter, which plans for an
    H200): the 64-row tiles need more shared memory than sm_80/86/89/120 parts give a block."""
    if not HAS_CUDA or tiles == "planner":
        return True
    from wavemla.device import current_spec
    from wavemla.plan import DenseWorkload, PlanError, plan_dense

    try:
        with config.override(**TILE_KNOBS[tiles]):
            plan_dense(DenseWorkload(batch=1, s_q=1, h_q=16, is_fp8=fp8), current_spec())
    except PlanError:
        return False
    return True


def call(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the case through its entry point (kernel first, before the reference allocates)."""
    with config.override(**case.knobs):
        if case.prime is not None:
            case.prime()
        if case.entry == "native":
            return dense_mla_decode(**case.kwargs)
        kw = dict(case.kwargs)
        kw.pop("reuse_schedule", None)
        cache = kw.pop("k_cache")
        flash = {
            "descale_k": kw.pop("descale_k", None),
            "q": kw.pop("q"),
            "k_cache": cache,
            "block_table": kw.pop("block_table"),
            "cache_seqlens": kw.pop("cache_seqlens"),
            "head_dim_v": 512,
            "tile_scheduler_metadata": kw.pop("metadata", None),
            "num_splits": None,
            "softmax_scale": kw.pop("softmax_scale", None),
            "causal": kw.pop("causal"),
            "is_fp8_kvcache": isinstance(cache, torch.Tensor) and cache.dtype in FP8_DTYPES,
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
    q, cache = case.flash.get("q", kw["q"]), kw["k_cache"]
    assert "out" not in kw or out is kw["out"], f"the result is not the caller's out [{where}]"
    ref_out, ref_lse = reference(
        q,
        cache,
        kw["block_table"],
        cache_seqlens=kw["cache_seqlens"],
        softmax_scale=kw.get("softmax_scale"),
        causal=kw["causal"],
        descale_q=case.flash.get("descale_q"),
        descale_k=case.flash.get("descale_k", kw.get("descale_k")),
    )
    assert_matches((out, lse), (ref_out, ref_lse), (cache,) if cache.dtype == torch.bfloat16 else (), where)


# -------------------------------------------------------------------------------------------------- mutations
def _flash(key: str, value: Any, expect: str | None = None) -> Callable[[Case, torch.Generator], str]:
    """An argument only flash_mla_with_kvcache has (or one it passes on), set on that entry point."""

    def mutate(case: Case, gen: torch.Generator) -> str:
        case.entry = "flashmla"
        case.flash[key] = value(case.kwargs) if callable(value) else value
        return expect or key

    return mutate


def _zeros(shape: Callable[[dict[str, Any]], tuple[int, ...]], dtype: torch.dtype | None = None) -> Any:
    """A maker of zero tensors of a shape derived from the call (q's dtype unless given)."""
    return lambda k: torch.zeros(shape(k), dtype=dtype or k["q"].dtype, device=DEVICE)


def _d(k: dict[str, Any]) -> int:
    return int(k["q"].shape[3])


def _b(k: dict[str, Any]) -> int:
    return int(k["q"].shape[0])


def _rows_of_other_dtype(case: Case, gen: torch.Generator) -> str:
    kw = case.kwargs
    other = torch.bfloat16 if kw["q"].dtype == torch.float16 else torch.float16
    kw["k_cache"] = torch.zeros((1, 4, 1, _d(kw)), dtype=other, device=DEVICE)
    return "k_cache"


def _bf16_rows(case: Case, gen: torch.Generator) -> str:
    """bf16 q and rows: refused under the interpreter; on a GPU the rows are made int32 instead (refused too)."""
    kw = case.kwargs
    kw["q"] = kw["q"].to(torch.bfloat16)
    dtype = torch.bfloat16 if not HAS_CUDA else torch.int32
    kw["k_cache"] = torch.zeros((1, 4, 1, _d(kw)), dtype=dtype, device=DEVICE)
    return "k_cache"


def _fp8_with_d512(case: Case, gen: torch.Generator) -> str:
    kw = case.kwargs
    kw["q"] = kw["q"][..., :512]
    kw["k_cache"] = quantize_v32(torch.zeros(1, 4, 1, 576)).to(DEVICE)
    return "k_cache"


def _v32(shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Callable[[dict[str, Any]], Any]:
    size = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    return lambda k: torch.as_strided(torch.zeros(size, dtype=torch.uint8, device=DEVICE), shape, strides, offset)


def _fp8_case(make: Callable[[dict[str, Any]], torch.Tensor]) -> Callable[[Case, torch.Generator], str]:
    """An FP8 cache check: q made 576 wide first (the V3.2 layout's rows), then the bad cache."""

    def mutate(case: Case, gen: torch.Generator) -> str:
        kw = case.kwargs
        if _d(kw) != 576:
            kw["q"] = torch.zeros((*kw["q"].shape[:3], 576), dtype=kw["q"].dtype, device=DEVICE)
        kw["k_cache"] = make(kw)
        return "k_cache"

    return mutate


def _fp8t(
    descale_k: Callable[[dict[str, Any]], Any] | None, expect: str, d: int = 576, token_stride: int = 576
) -> Callable[[Case, torch.Generator], str]:
    """A per-tensor FP8 call (q ``d`` wide, a zero-code cache of the call's blocks and page whose tokens lie
    ``token_stride`` bytes apart) with the given ``descale_k`` (None: left out)."""

    def mutate(case: Case, gen: torch.Generator) -> str:
        kw = case.kwargs
        kw["q"] = torch.zeros((*kw["q"].shape[:3], d), dtype=kw["q"].dtype, device=DEVICE)
        nb, page = kw["k_cache"].shape[:2]
        flat = torch.zeros(nb * page * token_stride, dtype=torch.uint8, device=DEVICE)
        kw["k_cache"] = torch.as_strided(flat, (nb, page, 1, 576), (page * token_stride, token_stride, 576, 1))
        if descale_k is not None:
            kw["descale_k"] = descale_k(kw)
        return expect

    return mutate


def _one(value: float = 0.01, dtype: torch.dtype = torch.float32, n: int = 1, device: str = DEVICE) -> Any:
    return lambda k: torch.full((n,), value, dtype=dtype, device=device)


def _descale_k_with_rows(case: Case, gen: torch.Generator) -> str:
    """A row cache of q's dtype and width, which holds its values, with a descale_k."""
    kw = case.kwargs
    nb, page = kw["k_cache"].shape[:2]
    kw["k_cache"] = torch.zeros((nb, page, 1, _d(kw)), dtype=kw["q"].dtype, device=DEVICE)
    kw["descale_k"] = _one()(kw)
    return "descale_k"


def _descale_k_with_v32(case: Case, gen: torch.Generator) -> str:
    """A V3.2 cache, which carries its own scales, with a descale_k."""
    _fp8_case(lambda k: quantize_v32(torch.zeros(1, 4, 1, 576)).to(DEVICE))(case, gen)
    case.kwargs["descale_k"] = _one()(case.kwargs)
    return "descale_k"


def _fp8_q(descale_q: Any) -> Callable[[Case, torch.Generator], str]:
    """FlashMLA's FP8 dense call with an e4m3 q and the given ``descale_q`` (a valid per-tensor cache and scale)."""

    def mutate(case: Case, gen: torch.Generator) -> str:
        _fp8t(_one(), "k_cache")(case, gen)
        case.entry = "flashmla"
        case.flash["q"] = case.kwargs["q"].to(torch.float8_e4m3fn)
        case.flash["descale_q"] = descale_q(case.kwargs) if callable(descale_q) else descale_q
        return "descale_q"

    return mutate


def _grow_then(key: str, make: Callable[[dict[str, Any]], Any]) -> Callable[[Case, torch.Generator], str]:
    """A check that only applies with b ≥ 2 (or a table ≥ 2 wide): a valid 2-request call, then the bad argument."""

    def mutate(case: Case, gen: torch.Generator) -> str:
        kw = case.kwargs
        q = kw["q"]
        kw["q"] = torch.zeros((2, *q.shape[1:]), dtype=q.dtype, device=DEVICE)
        kw["block_table"] = torch.full((2, 3), -1, dtype=torch.int32, device=DEVICE)
        kw["cache_seqlens"] = torch.zeros(2, dtype=torch.int32, device=DEVICE)
        kw.pop("metadata", None)
        kw[key] = make(kw)
        return key

    return mutate


def _metadata_reuse(case: Case, gen: torch.Generator) -> str:
    """The metadata object was planned on another shape first (one metadata object per decode shape)."""
    meta = get_mla_metadata()[0]
    kw = case.kwargs
    q = kw["q"]
    other = {
        "q": torch.zeros((q.shape[0] + 1, *q.shape[1:]), dtype=q.dtype, device=DEVICE),
        "k_cache": kw["k_cache"],
        "block_table": torch.full((q.shape[0] + 1, 1), -1, dtype=torch.int32, device=DEVICE),
        "cache_seqlens": torch.zeros(q.shape[0] + 1, dtype=torch.int32, device=DEVICE),
    }
    case.prime = lambda: dense_mla_decode(**other, metadata=meta)
    kw["metadata"] = meta
    return "metadata (tile_scheduler_metadata)"


MUTATIONS: dict[str, Callable[[Case, torch.Generator], str]] = {
    "out_fp32": _set("out", lambda k: torch.zeros((*k["q"].shape[:3], 512), device=DEVICE), "out"),
    "out_is_q": _set("out", lambda k: k["q"][..., :512] if k["q"].numel() else k["q"].new_zeros(1, 1, 1, 1), "out"),
    "q_none": _set("q", None, "q"),
    "q_fp32": _set("q", lambda k: k["q"].float(), "q"),
    "q_3d": _set("q", lambda k: k["q"].flatten(0, 1), "q"),
    "q_d256": _set("q", lambda k: k["q"][..., :256], "q"),
    "q_d640": _set("q", _zeros(lambda k: (*k["q"].shape[:3], 640)), "q"),
    "q_last_stride": _set("q", lambda k: _zeros(lambda k: (*k["q"].shape[:3], 2 * _d(k)))(k)[..., ::2], "q"),
    "q_sq0": _set("q", _zeros(lambda k: (_b(k), 0, 2, _d(k))), "q"),
    "q_h0": _set("q", lambda k: k["q"][:, :, :0], "q"),
    "q_h129": _set("q", _zeros(lambda k: (1, 1, 129, _d(k))), "q"),
    "q_meta_device": _set("q", lambda k: torch.empty(k["q"].shape, dtype=k["q"].dtype, device="meta"), "q"),
    "cache_none": _set("k_cache", None, "k_cache"),
    "cache_int32": _set("k_cache", _zeros(lambda k: (1, 4, 1, _d(k)), torch.int32), "k_cache"),
    "cache_dim2_is_2": _set("k_cache", _zeros(lambda k: (1, 4, 2, _d(k))), "k_cache"),
    "cache_3d": _set("k_cache", _zeros(lambda k: (1, 4, _d(k))), "k_cache"),
    "cache_page0": _set("k_cache", _zeros(lambda k: (1, 0, 1, _d(k))), "k_cache"),
    "cache_page1025": _set("k_cache", _zeros(lambda k: (1, 1025, 1, _d(k))), "k_cache"),
    "cache_other_width": _set("k_cache", _zeros(lambda k: (1, 4, 1, 1088 - _d(k))), "k_cache"),
    "cache_last_stride": _set("k_cache", lambda k: _zeros(lambda k: (1, 4, 1, 2 * _d(k)))(k)[..., ::2], "k_cache"),
    "cache_rows_other_dtype": _rows_of_other_dtype,
    "cache_bf16_rows_interpreter": _bf16_rows,
    "cache_fp8_655": _fp8_case(_zeros(lambda k: (1, 4, 1, V32_BYTES - 1), torch.uint8)),
    "cache_fp8_d512": _fp8_with_d512,
    "cache_fp8_token_stride": _fp8_case(_v32((2, 4, 1, V32_BYTES), (8 * V32_BYTES, 2 * V32_BYTES, V32_BYTES, 1))),
    "cache_fp8_small_stride0": _fp8_case(_v32((2, 4, 1, V32_BYTES), (V32_BYTES, V32_BYTES, V32_BYTES, 1))),
    "cache_fp8_stride0_unaligned": _fp8_case(_v32((2, 4, 1, V32_BYTES), (4 * V32_BYTES + 2, V32_BYTES, V32_BYTES, 1))),
    "cache_fp8_address_unaligned": _fp8_case(_v32((1, 4, 1, V32_BYTES), (4 * V32_BYTES, V32_BYTES, V32_BYTES, 1), 2)),
    "cache_fp8t_d512": _fp8t(_one(), "k_cache", d=512),
    "cache_fp8t_token_stride": _fp8t(_one(), "k_cache", token_stride=592),
    "descale_k_missing": _fp8t(None, "descale_k"),
    "descale_k_fp64": _fp8t(_one(dtype=torch.float64), "descale_k"),
    "descale_k_two": _fp8t(_one(n=2), "descale_k"),
    "descale_k_float": _fp8t(lambda k: 0.01, "descale_k"),
    "descale_k_other_device": _fp8t(_one(device="meta"), "descale_k"),
    "descale_k_with_rows": _descale_k_with_rows,
    "descale_k_with_v32": _descale_k_with_v32,
    "flash_descale_q_missing": _fp8_q(None),
    "flash_descale_q_shape": _fp8_q(_one(n=2)),
    "table_none": _set("block_table", None, "block_table"),
    "table_int64": _set("block_table", lambda k: k["block_table"].long(), "block_table"),
    "table_1d": _set("block_table", lambda k: k["block_table"].flatten(), "block_table"),
    "table_wrong_b": _set("block_table", _zeros(lambda k: (_b(k) + 1, 2), torch.int32), "block_table"),
    "table_list": _set("block_table", lambda k: k["block_table"].tolist(), "block_table"),
    "table_last_stride": _grow_then("block_table", lambda k: _zeros(lambda k: (2, 6), torch.int32)(k)[:, ::2]),
    "seqlens_none": _set("cache_seqlens", None, "cache_seqlens"),
    "seqlens_int64": _set("cache_seqlens", lambda k: k["cache_seqlens"].long(), "cache_seqlens"),
    "seqlens_shape": _set("cache_seqlens", _zeros(lambda k: (_b(k) + 1,), torch.int32), "cache_seqlens"),
    "seqlens_2d": _set("cache_seqlens", _zeros(lambda k: (_b(k), 1), torch.int32), "cache_seqlens"),
    "seqlens_strided": _grow_then("cache_seqlens", lambda k: _zeros(lambda k: (4,), torch.int32)(k)[::2]),
    "causal_int": _set("causal", 1, "causal"),
    "causal_str": _set("causal", "yes", "causal"),
    "scale_zero": _bad_scale(0.0),
    "scale_negative": _bad_scale(-0.1),
    "scale_nan": _bad_scale(float("nan")),
    "scale_inf": _bad_scale(float("inf")),
    "scale_fp32_overflow": _bad_scale(1e300),
    "scale_int_past_float": _bad_scale(10**400),
    "scale_str": _bad_scale("0.1"),
    "scale_bool": _bad_scale(True),
    "scale_tensor": _bad_scale(torch.tensor(0.1)),
    "metadata_wrong_type": _set("metadata", lambda k: {"plan": None}, "metadata (tile_scheduler_metadata)"),
    "metadata_other_shape": _metadata_reuse,
    "flash_head_dim_v": _flash("head_dim_v", 576),
    "flash_num_splits": _flash("num_splits", torch.ones(1, dtype=torch.int32)),
    "flash_is_fp8_kvcache": _flash("is_fp8_kvcache", lambda k: k["k_cache"].dtype not in FP8_DTYPES),
    "flash_without_block_table": _flash("block_table", None),
    "flash_without_cache_seqlens": _flash("cache_seqlens", None),
    "flash_attn_sink": _flash("attn_sink", lambda k: torch.zeros(k["q"].shape[2], device=DEVICE)),
    "flash_extra_k_cache": _flash("extra_k_cache", lambda k: k["k_cache"]),
    "flash_extra_indices": _flash("extra_indices_in_kvcache", _zeros(lambda k: (_b(k), k["q"].shape[1], 1))),
    "flash_topk_length": _flash("topk_length", _zeros(lambda k: (_b(k),), torch.int32)),
    "flash_extra_topk_length": _flash("extra_topk_length", _zeros(lambda k: (_b(k),), torch.int32)),
}


# ------------------------------------------------------------------------------------------------------ tests
DENSE_SETTINGS = settings(
    max_examples=_examples(DENSE_EXAMPLES),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@DENSE_SETTINGS
@given(case=cases())
def test_hostile_dense_inputs_match_the_reference_or_name_the_argument(case: Case) -> None:
    check_case(case)


def _fixed_case() -> Case:
    """A small valid call: two requests of 5 and 7 keys in 4-row pages, the second causal over two query tokens'
    worth of keys; an invalid block id inside the first request's length."""
    gen = torch.Generator().manual_seed(0)
    table = torch.tensor([[1, -1], [0, 2]], dtype=torch.int32)
    lengths = torch.tensor([5, 7], dtype=torch.int32)
    used = _used_rows(table, lengths, 3, 4)
    return Case(
        kwargs={
            "q": _q(gen, 2, 2, 3, torch.float16, "contig", 576),
            "k_cache": _row_cache(gen, 3, 4, 576, torch.float16, "contig", used, float("nan")),
            "block_table": table.to(DEVICE),
            "cache_seqlens": lengths.to(DEVICE),
            "causal": True,
        }
    )


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_invalid_dense_argument_is_named(mutation: str) -> None:
    """Every mutation on one fixed valid call: a ValueError that starts with the argument's name."""
    case = _fixed_case()
    case.expect = MUTATIONS[mutation](case, torch.Generator().manual_seed(0))
    check_case(case)


@pytest.mark.parametrize("entry", ["native", "flashmla"])
def test_the_fixed_valid_dense_call_is_accepted(entry: str) -> None:
    """The base of the mutation test is itself valid (so each mutation alone causes its error)."""
    case = _fixed_case()
    case.entry = entry
    check_case(case)


def test_every_dense_check_has_a_mutation() -> None:
    """Each argument the dense checks name is the target of at least one mutation here."""
    gen = torch.Generator().manual_seed(0)
    named = set()
    for mutate in MUTATIONS.values():
        named.add(mutate(_fixed_case(), gen))
    expected = {"q", "k_cache", "block_table", "cache_seqlens", "causal", "softmax_scale",
                "metadata (tile_scheduler_metadata)", "head_dim_v", "num_splits", "is_fp8_kvcache", "attn_sink",
                "extra_k_cache", "extra_indices_in_kvcache", "topk_length", "extra_topk_length", "out", "descale_k",
                "descale_q"}  # fmt: skip
    assert named == expected


# ------------------------------------------------------------------------------------------------ long runs
def main(argv: list[str] | None = None) -> int:
    """Run the property test with more examples (random seeds), outside pytest."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--examples", type=int, default=1000)
    return long_run(cases(), check_case, parser.parse_args(argv).examples)


if __name__ == "__main__":
    sys.exit(main())
