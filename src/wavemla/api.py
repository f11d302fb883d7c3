"""Public calls: validate, plan, launch.

Two decodes, each reachable two ways:

- :func:`flash_mla_with_kvcache` / :func:`get_mla_metadata` take FlashMLA's names, argument order and returns (and
  vLLM's ``out``), so an engine swaps one import: with ``indices`` it runs the sparse decode (DeepSeek-V4: 512-wide
  rows, MODEL1 FP8 or bf16/fp16; DeepSeek-V3.2: 576-wide q over V3.2 FP8 or 576-wide rows, run by the dense
  decode's kernels over each token's compacted index list, :func:`sparse_mla_decode`), with ``indices=None`` the
  paged dense decode (DeepSeek-V3, Kimi-K2, GLM);
- :func:`sparse_mla_decode` and :func:`dense_mla_decode` are the native calls with keyword arguments.

Sparse shapes (``T = b·s_q`` query tokens)::

    q                 [b, s_q, h_q, 512]        bf16 or fp16 (DeepSeek-V3.2: [b, s_q, h_q, 576])
    kv cache          [num_blocks, page, 1, 512] bf16/fp16 rows, or
                      [num_blocks, page, 1, 584] uint8 / float8_e4m3fn FP8 MODEL1 (see wavemla.reference.fp8)
                      (DeepSeek-V3.2: 576-wide rows of q's dtype, or the 656-byte FP8 V3.2 layout, pages a whole
                      number of rows apart; any s_q)
    indices           [b, s_q, topk]            int32 global slots block·page + offset; < 0 or >= slots: invalid
    topk_length       [b]                       int32, entries used per request (optional)
    extra_*           the same for a second cache attended jointly (CSA/HCA compressed rows)
    attn_sink         [h_q]                     fp32 (optional)
    out               [b, s_q, h_q, 512]        q.dtype
    lse               [b, h_q, s_q]             fp32, natural log, sink excluded, +inf where no valid row

Dense shapes (see :func:`dense_mla_decode`)::

    q                 [b, s_q, h_q, d_qk]       bf16 or fp16; d_qk 576 (512 latent + 64 rope) or 512; with an FP8
                                                cache also float8_e4m3fn codes, times descale_q
    k_cache           [num_blocks, page, 1, d_qk] rows of q's dtype,
                      [num_blocks, page, 1, 656] uint8 / float8_e4m3fn FP8 V3.2 (see wavemla.reference.fp8_v32), or
                      [num_blocks, page, 1, 576] uint8 / float8_e4m3fn per-tensor FP8 codes, times descale_k
                      (see wavemla.reference.fp8_rows)
    descale_q/_k      [1]                       fp32 on q's device, read by the kernel
    block_table       [b, max_blocks]           int32
    cache_seqlens     [b]                       int32
    out, lse          [b, s_q, h_q, 512] q.dtype (bf16 for an FP8 q), [b, h_q, s_q] fp32 (as above)

A launch depends only on static shapes: no host-device sync, no data-dependent host branching, so calls can be
captured in CUDA graphs. The metadata object returned by :func:`get_mla_metadata` freezes the plan on first use
and owns the split workspace; reuse it across layers with identical shapes, and give each CUDA stream its own.

Example::

    import wavemla
    sched, _ = wavemla.get_mla_metadata()
    out, lse = wavemla.flash_mla_with_kvcache(
        q, swa_cache, None, None, 512, sched, is_fp8_kvcache=True, indices=swa_idx, attn_sink=sink,
        extra_k_cache=csa_cache, extra_indices_in_kvcache=csa_idx, topk_length=swa_len, extra_topk_length=csa_len)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import numbers
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, cast

import torch

from wavemla import config
from wavemla.device import device_arch, triton_interpreting
from wavemla.kernels import launch
from wavemla.kernels.launch import NotReplayable, Recording, Replay
from wavemla.plan import (
    DensePlan,
    DenseWorkload,
    Plan,
    PlanError,
    Workload,
    forced_tile_knobs,
    generation,
    plan,
    plan_dense,
)
from wavemla.reference import fp8_rows, fp8_v32
from wavemla.reference.fp8 import BYTES_PER_TOKEN, D_QK

_Q_DTYPES = (torch.bfloat16, torch.float16)
MAX_S_Q = 4  # query tokens per request the sparse decode takes (the token and up to 3 speculative ones)
_FP8_DTYPES = (torch.uint8, torch.float8_e4m3fn)
# The kernels take softmax_scale·log2(e) as an fp32 argument.
_MAX_SOFTMAX_SCALE = float(torch.finfo(torch.float32).max) / math.log2(math.e)
# The decodes' input tensors in the order of their replay signatures, by argument name (for out's checks).
_SPARSE_INPUTS = (
    "q", "kv_cache", "indices", "topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length", "attn_sink",
)  # fmt: skip
_DENSE_INPUTS = ("q", "k_cache", "block_table", "cache_seqlens")
_INT32_MAX = 2**31 - 1
_MAX_REPLAYS = 8  # call signatures whose launches a metadata object keeps (kernels.launch)


@dataclass
class MLAMetadata:
    """Plan and workspace of one decode shape; frozen on first use (FlashMLA's ``FlashMLASchedMeta``)."""

    plan: Plan | None = None
    key: tuple[Any, ...] | None = None
    o_ws: torch.Tensor | None = field(default=None, repr=False)  # sparse: partials
    dense_o_ws: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False)  # dense: partials by dtype
    lse_ws: torch.Tensor | None = field(default=None, repr=False)
    counts: torch.Tensor | None = field(default=None, repr=False)  # sparse: pieces written per (token, head block)
    q_ws: torch.Tensor | None = field(default=None, repr=False)  # sparse, FP8 rows, bf16 q: per-program q in fp16
    p_ws: torch.Tensor | None = field(default=None, repr=False)  # per-program P: sparse 64-head FP8, dense keys-major
    split_kernel: Any = field(default=None, repr=False)  # Triton's compiled split kernel (resource report)
    dense_plan: DensePlan | None = None  # the dense decode's plan (``plan`` stays None for it)
    sched: torch.Tensor | None = field(default=None, repr=False)  # dense: [num_parts, 4] int32 work ranges
    req: torch.Tensor | None = field(default=None, repr=False)  # dense: [b, 4] int32 parts touching each request
    scheduled: bool = False  # dense: the scheduler has run into sched/req (see dense_mla_decode's reuse_schedule)
    # sparse: counts were made under CUDA-graph capture, whose zero fill runs only when the graph replays
    counts_pending: bool = False
    # sparse, while counts_pending: the capture sequences (CUDA's ids, never reused in a process) that record a zero
    # fill of the counts ahead of this object's launches
    counts_zeroed_in: list[int] = field(default_factory=list, repr=False)
    # the launches of calls made with this metadata, by call signature (most recently used first), replayed by later
    # calls with the same one
    replays: list[tuple[tuple[Any, ...], Replay | None]] = field(default_factory=list, repr=False)

    @property
    def have_initialized(self) -> bool:
        """FlashMLA's ``FlashMLASchedMeta.have_initialized``: whether a call has planned this object. Setting it to
        False forgets the plan, the workspace and the launch replays, so the next call plans and allocates again
        (engines do so before CUDA-graph capture, to have that happen inside the capture)."""
        return self.key is not None

    @have_initialized.setter
    def have_initialized(self, value: bool) -> None:
        if value:
            if self.key is None:
                raise ValueError("have_initialized: only False can be set (the first decode call plans the object)")
            return
        fresh = MLAMetadata()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    def buffers(self) -> list[torch.Tensor]:
        """The workspace tensors this metadata owns (the same for every call)."""
        return [t for _, t in self._named_buffers()]

    def _named_buffers(self) -> list[tuple[str | torch.dtype, torch.Tensor]]:
        """(field name, or the dense partials' dtype; tensor) of every workspace tensor, in :meth:`buffers`' order."""
        held: list[tuple[str | torch.dtype, torch.Tensor | None]] = [(n, getattr(self, n)) for n in _BUFFER_FIELDS]
        return [(k, t) for k, t in (*held, *self.dense_o_ws.items()) if t is not None]

    def replay_for(self, key: tuple[Any, ...]) -> tuple[bool, Replay | None]:
        """(whether calls of signature ``key`` were recorded, their replay: None where they cannot be replayed). A hit
        moves the signature to the front: :meth:`keep_replay` drops the least recently used."""
        replays = self.replays
        for i, (k, r) in enumerate(replays):
            if k == key:
                if i:
                    replays.insert(0, replays.pop(i))
                return True, r
        return False, None

    def keep_replay(self, key: tuple[Any, ...], rec: Recording, inputs: list[torch.Tensor | None]) -> Replay | None:
        """Keep the launches ``rec`` noted for calls of signature ``key``, or that they cannot be replayed (the 8 most
        recently used signatures are kept); returns the replay (None where there is none)."""
        try:
            replay: Replay | None = Replay(rec, inputs, self.buffers())
        except NotReplayable:
            replay = None
        self.replays = [(key, replay), *[(k, r) for k, r in self.replays if k != key]][:_MAX_REPLAYS]
        return replay


# The workspace fields of MLAMetadata in the order of its buffers() (then the dense partials by dtype); the sparse
# pieces' counters are made zero (the program that merges a token's pieces puts its counter back to zero).
_BUFFER_FIELDS = ("o_ws", "lse_ws", "counts", "q_ws", "p_ws", "sched", "req")
_ZEROED_FIELDS = frozenset({"counts"})


@dataclass(frozen=True)
class _FirstCall:
    """What the first call of a signature left in the metadata object it planned, for later calls of that
    signature with a fresh object (or none): its launches, unbound from that object's workspace (None where they
    cannot be replayed), the plan, and the workspace's fields, shapes and dtypes."""

    replay: Replay | None
    key: tuple[Any, ...] | None = None
    plan: Plan | None = None
    dense_plan: DensePlan | None = None
    split_kernel: Any = None
    buffers: tuple[tuple[str | torch.dtype, tuple[int, ...], torch.dtype], ...] = ()

    @staticmethod
    def of(meta: MLAMetadata, replay: Replay | None) -> _FirstCall:
        if replay is None:
            return _FirstCall(None)
        buffers = tuple((k, tuple(t.shape), t.dtype) for k, t in meta._named_buffers())
        return _FirstCall(replay.unbound(), meta.key, meta.plan, meta.dense_plan, meta.split_kernel, buffers)

    def adopt(self, meta: MLAMetadata, device: torch.device, call_sig: tuple[Any, ...]) -> Replay:
        """Plan the fresh ``meta`` as the first call did (its own workspace, allocated now) and keep, for calls of
        ``call_sig``, the launches bound to that workspace, which it returns."""
        assert self.replay is not None
        # the whole workspace before the plan: an allocation that fails (out of memory) leaves ``meta`` unplanned
        made = [
            (k, (torch.zeros if k in _ZEROED_FIELDS else torch.empty)(shape, dtype=dtype, device=device))
            for k, shape, dtype in self.buffers
        ]
        meta.key, meta.plan, meta.dense_plan = self.key, self.plan, self.dense_plan
        meta.split_kernel = self.split_kernel
        for k, t in made:
            if isinstance(k, str):
                setattr(meta, k, t)
            else:
                meta.dense_o_ws[k] = t
        replay = self.replay.bound(meta.buffers())
        meta.replays = [(call_sig, replay)]
        return replay


# The first calls of recent signatures that planned a fresh metadata object or had none (engines that make a
# metadata object per call, as SGLang's DeepSeek-V4 decode does), by signature and the planner's cache generation
# (wavemla.plan.clear_caches() makes them stale): later such calls replay them.
_FIRST_CALLS = launch.ReplayCache(32)


def _first_call_key(call_sig: tuple[Any, ...]) -> tuple[Any, ...]:
    return (call_sig, generation())


def get_mla_metadata(*args: Any, **kwargs: Any) -> tuple[MLAMetadata, None]:
    """An empty metadata object, planned on the first decode call (arguments are accepted and ignored, as in
    FlashMLA, whose signature no longer takes real ones)."""
    return MLAMetadata(), None


def _check_tensor(name: str, t: Any, dtypes: tuple[torch.dtype, ...], ndim: int, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype in {[str(d) for d in dtypes]}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: expected device {device} (the device of q), got {t.device}")


def _check_paged_cache(name: str, cache: Any, device: torch.device, last_dims: str) -> int:
    """The checks every paged cache shares (a 4-D ``[num_blocks, page, 1, last_dims]`` tensor on q's device, page
    1..1024); returns the page size."""
    if not isinstance(cache, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(cache).__name__}")
    if cache.dim() != 4 or cache.shape[2] != 1:
        raise ValueError(f"{name}: expected [num_blocks, page, 1, {last_dims}], got shape {list(cache.shape)}")
    if cache.device != device:
        raise ValueError(f"{name}: expected device {device} (the device of q), got {cache.device}")
    page = int(cache.shape[1])
    if not 1 <= page <= 1024:
        raise ValueError(f"{name}: page size (dim 1) must be in 1..1024, got {page}")
    return page


# Per-token records of other DeepSeek caches an engine may hand the sparse decode, named in its refusal.
_OTHER_RECORDS = {
    288: "DeepSeek-V4.1's FP4 record of compressed rows; the sparse decode does not read it",
    528: "DeepSeek-V4.1's MXFP8 record, 512 e4m3 values and 16 UE8M0 scales; the sparse decode does not read it",
    656: "the V3.2 FP8 record, read with a 576-wide q (DeepSeek-V3.2's sparse decode) and by the dense decode",
    576: "per-tensor FP8 rows (an engine's fp8 KV cache), read by the dense decode with descale_k",
}


def _check_cache(name: str, cache: Any, device: torch.device) -> bool:
    """Validate a KV cache; returns True for FP8 MODEL1."""
    page = _check_paged_cache(name, cache, device, "512 or 584")
    if cache.dtype in _FP8_DTYPES:
        if cache.shape[3] != BYTES_PER_TOKEN:
            width = int(cache.shape[3])
            named = f" ({_OTHER_RECORDS[width]})" if width in _OTHER_RECORDS else ""
            raise ValueError(f"{name}: an FP8 MODEL1 cache has {BYTES_PER_TOKEN} bytes per token, got {width}{named}")
        if cache.stride(3) != 1 or cache.stride(1) != BYTES_PER_TOKEN:
            raise ValueError(f"{name}: FP8 MODEL1 pages must be contiguous (stride(1) == 584, stride(3) == 1)")
        if cache.shape[0] > 1 and cache.stride(0) < page * BYTES_PER_TOKEN:
            raise ValueError(f"{name}: stride(0) {cache.stride(0)} is smaller than a page ({page * BYTES_PER_TOKEN} B)")
        if cache.stride(0) % 2 or cache.data_ptr() % 2:
            raise ValueError(f"{name}: FP8 pages must start 2-byte aligned (the rope part is bf16)")
        return True
    if cache.dtype in _Q_DTYPES:
        if cache.shape[3] != D_QK:
            raise ValueError(f"{name}: expected head_dim {D_QK} for bf16/fp16 rows, got {cache.shape[3]}")
        if cache.stride(3) != 1:
            raise ValueError(f"{name}: the last dimension must be contiguous (stride 1), got stride {cache.stride(3)}")
        _check_page_span(name, cache, page)
        return False
    raise ValueError(f"{name}: expected bf16/fp16 rows or a uint8/float8_e4m3fn MODEL1 cache, got {cache.dtype}")


def _check_row_dtype(name: str, cache: torch.Tensor, q: torch.Tensor, fp8_format: str) -> None:
    """A row cache (not FP8) has q's dtype, and is not bf16 under Triton's interpreter (``fp8_format``: the FP8
    cache to suggest there)."""
    if cache.dtype != q.dtype:
        raise ValueError(f"{name}: bf16/fp16 rows must match q's dtype {q.dtype}, got {cache.dtype}")
    if cache.dtype == torch.bfloat16 and triton_interpreting():
        raise ValueError(
            f"{name}: bf16 rows cannot run under Triton's interpreter (its tl.dot multiplies raw bf16 bits, "
            f"triton issue 11584); use fp16 rows or an FP8 {fp8_format} cache on CPU"
        )


def _check_page_span(name: str, cache: torch.Tensor, page: int) -> None:
    """A row cache's rows inside a page lie within int32 element offsets of its first row (the kernels compute a
    row's offset in its page, ``row · stride(1)``, in int32; the block offset is int64)."""
    span = (page - 1) * cache.stride(1)
    if span > _INT32_MAX:
        raise ValueError(
            f"{name}: a page's last row lies {span} elements past its first ((page - 1) · stride(1)), more than "
            "2^31 - 1 (the kernels address rows inside a page with int32 offsets)"
        )


def _check_query_rows(q: torch.Tensor, d_v: int) -> None:
    """A request's query rows ``(s, h)`` lie within int32 element offsets of its first, in q and in the output the
    dense split kernel writes (contiguous, ``d_v`` wide): it offsets them from the request's (int64) start in int32."""
    _, s_q, h_q, _ = q.shape
    span = max((s_q - 1) * q.stride(1) + (h_q - 1) * q.stride(2), (s_q * h_q - 1) * d_v)
    if span > _INT32_MAX:
        raise ValueError(
            f"q: a request's {s_q}·{h_q} query rows span {span} elements (in q or its output), more than 2^31 - 1 "
            "(the dense decode offsets a request's rows in int32); use fewer query tokens per call"
        )


def _check_indices(name: str, idx: Any, b: int, s_q: int, device: torch.device) -> None:
    _check_tensor(name, idx, (torch.int32,), 3, device)
    if idx.shape[0] != b or idx.shape[1] != s_q:
        raise ValueError(f"{name}: expected [b={b}, s_q={s_q}, topk], got {list(idx.shape)}")
    if idx.shape[2] > 1 and idx.stride(2) != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride 1)")


def _check_length(name: str, t: Any, b: int, device: torch.device, dim: str = "b") -> None:
    """A ``[b]`` int32 length tensor (``dim`` names its one dimension: the prefill's is s_q)."""
    _check_tensor(name, t, (torch.int32,), 1, device)
    if t.shape[0] != b:
        raise ValueError(f"{name}: expected shape [{dim}={b}], got {list(t.shape)}")
    if b > 1 and t.stride(0) != 1:
        raise ValueError(f"{name}: must be contiguous")


def _batch_invariant(value: Any) -> bool:
    """The ``batch_invariant`` argument: None reads the ``WAVEMLA_BATCH_INVARIANT`` knob; else a bool (a string such
    as ``"false"`` would read as True)."""
    if value is None:
        return bool(config.get("WAVEMLA_BATCH_INVARIANT"))
    if not isinstance(value, bool):
        raise ValueError(f"batch_invariant: expected a bool or None, got {type(value).__name__}")
    return value


def _out_dtype(q: torch.Tensor) -> torch.dtype:
    """The output's dtype: q's, bf16 for an FP8 q (FlashMLA's FP8 dense decode)."""
    return torch.bfloat16 if q.dtype == torch.float8_e4m3fn else q.dtype


def _check_out(
    out: Any, q: torch.Tensor, d_v: int, names: tuple[str, ...], inputs: tuple[Any, ...]
) -> torch.Tensor | None:
    """Validate a caller's ``out`` (``[b, s_q, h_q, d_v]`` of q's dtype, bf16 for an FP8 q, on q's device, sharing no
    memory with one of the ``inputs``, named by ``names``); returns the tensor the kernels write: ``out`` seen with a
    contiguous tensor's strides where its memory is laid out so (every dimension of more than one element) and starts
    16-byte aligned, else None (the result is then computed apart and copied in)."""
    want = (*q.shape[:3], d_v)
    dtype = _out_dtype(q)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out: expected a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != want or out.dtype != dtype or out.device != q.device:
        raise ValueError(
            f"out: expected {list(want)} {dtype} on {q.device} (q's batch, s_q, h_q and dtype), got "
            f"{list(out.shape)} {out.dtype} on {out.device}"
        )
    if out.numel() == 0:
        return out
    _check_out_memory(out, names, inputs)
    if out.is_contiguous() and out.data_ptr() % 16 == 0:
        s_q, h_q = want[1], want[2]
        canonical = (s_q * h_q * d_v, h_q * d_v, d_v, 1)
        strides = out.stride()
        return out if strides == canonical else out.as_strided(want, canonical)
    return None


def _check_out_memory(out: torch.Tensor, names: tuple[str, ...], inputs: tuple[Any, ...]) -> None:
    """A non-empty ``out`` the kernels may write: no zero stride over more than one element, and no byte in common
    with one of the ``inputs`` (named by ``names``; None entries skipped)."""
    strides = out.stride()
    if 0 in strides and any(n > 1 and st == 0 for n, st in zip(out.shape, strides, strict=True)):
        raise ValueError(f"out: a zero stride makes elements share memory, got strides {list(strides)}")
    store = out.untyped_storage()
    s_lo = store.data_ptr()
    s_hi = s_lo + store.nbytes()
    for name, t in zip(names, inputs, strict=True):
        if not isinstance(t, torch.Tensor):
            continue
        t_store = t.untyped_storage()
        t_lo = t_store.data_ptr()
        if t_lo < s_hi and s_lo < t_lo + t_store.nbytes() and t.numel():  # the same memory block: the bytes used
            o_ptr, t_ptr = out.data_ptr(), t.data_ptr()
            if o_ptr < t_ptr + launch.span_bytes(t) and t_ptr < o_ptr + launch.span_bytes(out):
                raise ValueError(f"out: shares memory with {name} (the kernels read {name} while they write out)")


_SPECS: dict[str, Any] = {}


def _device_spec(device: torch.device) -> Any:
    """The planner's view of the GPU behind ``device`` (queried once per device; ``WAVEMLA_GPU=auto`` queries it as
    when the knob is unset). CPU tensors run through Triton's interpreter; they are planned for the ``WAVEMLA_GPU``
    preset, or an H200 when none is set."""
    from wavemla.device import DeviceSpec, current_spec, get_spec, is_auto

    name = config.get("WAVEMLA_GPU")
    key = f"{device}|{name}"
    if key not in _SPECS:
        # "auto" is the GPU torch sees: this device's, not the current one's
        if name and not (is_auto(name) and device.type == "cuda"):
            _SPECS[key] = current_spec()  # a preset's error names WAVEMLA_GPU
        elif device.type == "cuda":
            _SPECS[key] = DeviceSpec.from_torch(device)  # this GPU's, not the current one's: kept under its key
        else:
            _SPECS[key] = get_spec("h200")
    return _SPECS[key]


def _capturing(t: torch.Tensor) -> bool:
    """Whether a CUDA graph is being captured on the current stream (``t`` on a CUDA device): launches are then
    recorded, and run only when the graph replays."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def _replayed(
    metadata: Any, tensors: tuple[Any, ...], scalars: tuple[Any, ...], d_v: int, names: tuple[str, ...], out: Any
) -> tuple[tuple[Any, ...] | None, bool, tuple[torch.Tensor, torch.Tensor] | None]:
    """A decode call through launch replays (:mod:`wavemla.kernels.launch`): its metadata's, or for a metadata
    object no call has planned yet (or none) those of the first call of the signature (``_FIRST_CALLS``). Returns
    (the call's signature, None where it may not be replayed; whether that signature was recorded before for this
    metadata, or for fresh ones; the outputs ``(out [b, s_q, h_q, d_v], lse [b, h_q, s_q])`` of the replayed
    launches, None where the call must go through Triton's path). The first tensor is q; ``names`` name the tensors
    (for ``out``'s checks); ``out`` is the caller's, or None."""
    if not (metadata is None or type(metadata) is MLAMetadata) or not launch.replayable(tensors, scalars):
        return None, False, None
    call_sig, ptrs = launch.call_key(tensors, scalars)
    first: _FirstCall | None = None
    if metadata is None or metadata.key is None:
        first = _FIRST_CALLS.get(_first_call_key(call_sig))
        seen, replay = first is not None, None if first is None else first.replay
    else:
        seen, replay = metadata.replay_for(call_sig)
    if replay is None:
        return call_sig, seen, None
    q = tensors[0]
    b, s_q, h_q = q.shape[:3]
    target = None if out is None else _check_out(out, q, d_v, names, tensors)
    o = target if target is not None else torch.empty((b, s_q, h_q, d_v), dtype=_out_dtype(q), device=q.device)
    lse = torch.empty((b, s_q, h_q), dtype=torch.float32, device=q.device)
    out_ptr, lse_ptr = o.data_ptr(), lse.data_ptr()
    if (out_ptr | lse_ptr) & 15:  # an allocator that does not align to 16 bytes: Triton's path
        return call_sig, seen, None
    if first is not None:
        meta = metadata if metadata is not None else MLAMetadata()
        replay = first.adopt(meta, q.device, call_sig)
        _counts_made(meta, q)
    elif metadata.counts_pending:
        _zero_pending_counts(metadata, q)
    replay.launch((*tensors, o, lse), (*ptrs, out_ptr, lse_ptr))
    return call_sig, seen, (_deliver(o, out), lse.transpose(1, 2))


# cuStreamGetCaptureInfo's status of a stream capturing (CU_STREAM_CAPTURE_STATUS_ACTIVE)
_CAPTURE_ACTIVE = 1


@functools.cache
def _driver_capture_info() -> Callable[[int], tuple[int, int]] | None:
    """The CUDA driver's ``cuStreamGetCaptureInfo`` as ``stream handle -> (status, capture id)``, or None where the
    driver library or that entry point is missing. Every version of the entry point takes (stream, status, id)
    first; the later ones' further outputs (graph, dependencies, edge data, their count: four at most) are passed
    NULL, which the earlier ones never read."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    p = ctypes.c_void_p
    for name in ("cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo"):
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint64), p, p, p, p]

        def info(stream: int, fn: Any = fn) -> tuple[int, int]:
            status, ident = ctypes.c_int(0), ctypes.c_uint64(0)
            if fn(p(stream), ctypes.byref(status), ctypes.byref(ident), None, None, None, None) != 0:
                return 0, 0
            return status.value, ident.value

        return info
    return None


def _capture_id(q: torch.Tensor) -> int | None:
    """The id CUDA gives the capture sequence under way on the current stream of q's device (unique within the
    process: a new capture, a new id), or None where the driver cannot say (or q is not a CUDA tensor)."""
    info = _driver_capture_info() if q.is_cuda else None
    if info is None:
        return None
    status, ident = info(torch.cuda.current_stream(q.device).cuda_stream)
    return ident if status == _CAPTURE_ACTIVE else None


def _counts_made(meta: MLAMetadata, q: torch.Tensor) -> None:
    """Note that the sparse pieces' counters of ``meta`` were just made (zero filled) by this call on q's device:
    under CUDA-graph capture the zero fill is part of that graph, and runs only when it replays."""
    meta.counts_pending = meta.counts is not None and _capturing(q)
    ident = _capture_id(q) if meta.counts_pending else None
    meta.counts_zeroed_in = [] if ident is None else [ident]


def _zero_pending_counts(meta: MLAMetadata, q: torch.Tensor) -> None:
    """Zero the sparse pieces' counters of ``meta`` where they were made under CUDA-graph capture and no zero fill
    is sure to run before this call's launches (on q's device): the zero fill a capture recorded runs only when that
    graph replays, and until then the counters hold whatever the memory held (the kernels leave them at zero once
    they are). An uncaptured call zeroes them once, for good. A call captured into another graph, which may replay
    before the one that made them (or be the only one replayed), records a zero fill into that graph, once a capture
    (an engine's layers captured into one graph add none); into every captured call where the driver cannot name
    the capture."""
    if not meta.counts_pending or meta.counts is None:
        return
    if not _capturing(q):
        meta.counts.zero_()
        meta.counts_pending = False
        meta.counts_zeroed_in = []
        return
    ident = _capture_id(q)
    if ident is None or ident not in meta.counts_zeroed_in:
        meta.counts.zero_()  # recorded: runs ahead of this call's launches whenever the graph replays
        if ident is not None:
            meta.counts_zeroed_in.append(ident)


# What the warp-specialized sm_90 split kernels need of a call's tensors (kernels/sparse_decode_ws.py and
# kernels/dense_decode_ws.py, ``tensors_qualify`` and ``supported``), for the error of a tile that only they fit.
_SPARSE_WS_NEEDS = "q's head rows are packed, q and its tokens 16-byte aligned and the cache pages 16-byte aligned"
_DENSE_WS_NEEDS = "q and the cache are contiguous, 16-byte aligned and not empty"


@contextlib.contextmanager
def _tile_fits(label: str, ws_needs: str | None) -> Iterator[None]:
    """Triton's out-of-resources error from compiling a split kernel at the plan's tile ``label``, raised again as a
    :class:`PlanError` naming the tile knobs that are set. ``ws_needs``: where the plan was priced for a
    warp-specialized sm_90 kernel, what that kernel needs of a call's tensors. Such a plan runs on the Triton kernel
    where a call's tensors do not qualify, and a tile forced by the knobs may fit only the warp-specialized kernel."""
    from triton.runtime.errors import OutOfResources

    try:
        yield
    except OutOfResources as exc:
        knobs = ", ".join(f"{k}={v}" for k, v in forced_tile_knobs().items())
        why = f"the tile {label} does not fit the Triton split kernel on this GPU ({exc})"
        if ws_needs is not None:
            why += f"; the warp-specialized sm_90 kernel runs it only where {ws_needs}"
        raise PlanError(
            f"{knobs or 'the plan'}: {why}" + (": unset the knobs or pass such tensors" if knobs and ws_needs else "")
        ) from exc


def _check_work_units(p: Plan, tokens: int) -> None:
    """The sparse split kernels number (query token, tile) units, and programs' runs of them, in int32: a call past
    that (only index lists of tens of GB reach it) is refused. The planner itself plans any size (``wavemla plan``)."""
    units = max(tokens * p.unit_tiles, p.num_parts * p.units_per_part)
    if units > _INT32_MAX:
        raise ValueError(
            f"indices: {tokens} query token(s) x {p.unit_tiles} tiles of {p.block_n} rows make {units} work units, "
            "more than 2^31 - 1 (the split kernels number them in int32); use fewer query tokens per call or shorter "
            "index lists"
        )


def _deliver(result: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The call's first output: ``result``, or the caller's ``out`` holding it (copied in unless the kernels wrote
    ``out`` itself)."""
    if out is None:
        return result
    if result.data_ptr() != out.data_ptr():
        out.copy_(result)
    return out


class _NoBackward(torch.autograd.Function):
    """An output as the autograd graph sees it: the kernels compute no gradients, so a backward pass that reaches it
    raises, naming the inputs that needed theirs, rather than leaving them without."""

    @staticmethod
    def forward(ctx: Any, out: torch.Tensor, names: str, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.names = names
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        raise RuntimeError(
            f"{ctx.names}: wavemla's attention kernels compute no gradients, so these would get none; train with "
            "another attention implementation (transformers: attn_implementation='eager')"
        )


_F = TypeVar("_F", bound=Callable[..., Any])
_CALLS = threading.local()  # depth of the calls below: only the outermost ties its outputs


def _no_backward(fn: _F) -> _F:
    """``fn``'s tensor outputs tied by :class:`_NoBackward` to its tensor arguments that need gradients, where
    autograd records (the outermost call only: a decode inside another one may still scale its output in place)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():  # serving: inference mode or no_grad, nothing to tie
            return fn(*args, **kwargs)
        depth = getattr(_CALLS, "depth", 0)
        _CALLS.depth = depth + 1
        try:
            result = fn(*args, **kwargs)
        finally:
            _CALLS.depth = depth
        if depth:
            return result
        needs = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and v.requires_grad]
        if not needs:
            return result
        bound = signature.bind(*args, **kwargs).arguments
        names = ", ".join(n for n, v in bound.items() if isinstance(v, torch.Tensor) and v.requires_grad)
        return tuple(_NoBackward.apply(r, names, *needs) if isinstance(r, torch.Tensor) else r for r in result)

    return cast(_F, call)


@_no_backward
def sparse_mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    *,
    topk_length: torch.Tensor | None = None,
    extra_kv_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
    attn_sink: torch.Tensor | None = None,
    softmax_scale: float | None = None,
    metadata: MLAMetadata | None = None,
    batch_invariant: bool | None = None,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V4 sparse MLA decode over a main cache and an optional extra cache (shapes in the module doc).

    ``batch_invariant=True`` (or, where it is None, the ``WAVEMLA_BATCH_INVARIANT`` knob) makes each request's bits
    independent of the batch it is in; ``batch_invariant=False`` runs the default plan with the knob set. Returns
    ``(out [b, s_q, h_q, 512] q.dtype, lse [b, h_q, s_q] fp32)``; semantics are those of
    :func:`wavemla.reference.sparse_decode_ref`. ``out``: a ``[b, s_q, h_q, 512]`` tensor of q's dtype to write the
    result into (and return); the kernels write it directly where it is contiguous and 16-byte aligned, else the
    result is copied into it.

    Example::

        out, lse = sparse_mla_decode(q, cache, idx, attn_sink=sink, extra_kv_cache=comp, extra_indices=comp_idx)
    """
    from wavemla.kernels.sparse_decode import p_scratch_elems

    if isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[3] == fp8_v32.D_QK:
        # DeepSeek-V3.2's call runs the dense decode, which keeps its own launch replays: none are looked up here.
        # Its query tokens are independent requests there, so any number of them (vLLM's V3.2 decode passes all of
        # a step's tokens as one request's: [1, T, h_q, 576]).
        _check_q_common(q, any_s_q=True)
        extra = (extra_kv_cache, extra_indices, extra_topk_length)
        return _v32_sparse_decode(
            q, kv_cache, indices, topk_length, *extra, attn_sink, softmax_scale, metadata, batch_invariant, out
        )

    # A call with the signature of one made before with this metadata launches that call's kernels again
    # (kernels.launch): the same validation outcome, plan, kernels and arguments, with the new tensors.
    tensors = (q, kv_cache, indices, topk_length, extra_kv_cache, extra_indices, extra_topk_length, attn_sink)
    scalars = ("sparse", softmax_scale, batch_invariant)
    call_sig, seen, done = _replayed(metadata, tensors, scalars, D_QK, _SPARSE_INPUTS, out)
    if done is not None:
        return done

    device = _check_q_common(q)
    b, s_q, h_q, d = q.shape
    if d != D_QK:
        raise ValueError(f"q: expected head_dim {D_QK} (DeepSeek-V4 latent) or 576 (DeepSeek-V3.2), got {d}")
    is_fp8 = _check_cache("kv_cache", kv_cache, device)
    # before the extra cache's checks, which compare its dtype with kv_cache's: a kv_cache not of q's dtype is named
    if not is_fp8:
        _check_row_dtype("kv_cache", kv_cache, q, "MODEL1")
    _check_indices("indices", indices, b, s_q, device)
    if topk_length is not None:
        _check_length("topk_length", topk_length, b, device)
    has_extra = extra_kv_cache is not None
    if extra_kv_cache is not None:
        if extra_indices is None:
            raise ValueError("extra_indices: required when extra_kv_cache is given")
        if _check_cache("extra_kv_cache", extra_kv_cache, device) != is_fp8:
            raise ValueError("extra_kv_cache: must use the same format (FP8 MODEL1 or rows) as kv_cache")
        if not is_fp8 and extra_kv_cache.dtype != kv_cache.dtype:
            raise ValueError(f"extra_kv_cache: dtype {extra_kv_cache.dtype} differs from kv_cache's {kv_cache.dtype}")
        _check_indices("extra_indices", extra_indices, b, s_q, device)
        if extra_topk_length is not None:
            _check_length("extra_topk_length", extra_topk_length, b, device)
    elif extra_indices is not None or extra_topk_length is not None:
        raise ValueError("extra_indices / extra_topk_length: given without extra_kv_cache")
    if attn_sink is not None:
        _check_tensor("attn_sink", attn_sink, (torch.float32,), 1, device)
        if attn_sink.shape[0] != h_q or (h_q > 1 and attn_sink.stride(0) != 1):
            raise ValueError(f"attn_sink: expected a contiguous [h_q={h_q}] fp32 tensor, got {list(attn_sink.shape)}")
    scale = _check_scale(softmax_scale, D_QK**-0.5)
    if metadata is not None and not isinstance(metadata, MLAMetadata):
        raise ValueError(
            "metadata (tile_scheduler_metadata): expected the MLAMetadata returned by get_mla_metadata(), "
            f"got {type(metadata).__name__}"
        )
    topk = indices.shape[2]
    extra_topk = extra_indices.shape[2] if extra_indices is not None else 0  # given only with extra_kv_cache
    if topk + extra_topk == 0:
        raise ValueError("indices: topk and extra topk are both 0")
    target = None if out is None else _check_out(out, q, D_QK, _SPARSE_INPUTS, tensors)
    invariant = _batch_invariant(batch_invariant)

    workload = Workload(
        batch=b,
        s_q=s_q,
        h_q=h_q,
        topk=topk,
        extra_topk=extra_topk,
        is_fp8=is_fp8,
        dtype="bf16" if q.dtype == torch.bfloat16 else "fp16",
        batch_invariant=invariant,
    )
    # Triton launches on the current CUDA device: make it q's, as FlashMLA's device guard does.
    with launch.device_guard(device):
        key = (workload, str(device))
        meta = metadata if metadata is not None else MLAMetadata()
        fresh = meta.key is None
        if fresh:
            try:
                meta.plan = plan(workload, _device_spec(device))
                _check_work_units(meta.plan, b * s_q)
                meta.key = key
                rows = meta.plan.workspace_rows(b * s_q)
                if rows:
                    # Partials of FP8 rows are stored in fp16 (values are bounded by the fp16-decoded rows; fp16 keeps
                    # 11 bits, more than the bf16 output): half the workspace traffic of fp32.
                    ws_dtype = torch.float16 if is_fp8 else torch.float32
                    meta.o_ws = torch.empty((rows, h_q, D_QK), dtype=ws_dtype, device=device)
                    meta.lse_ws = torch.empty((rows, h_q), dtype=torch.float32, device=device)
                    # zero once; the program that merges a token's pieces puts its counter back to zero (one a token and
                    # head block; the warp-specialized kernel counts each of its two math warpgroups apart)
                    meta.counts = torch.zeros(b * s_q * meta.plan.num_head_blocks * 2, dtype=torch.int32, device=device)
                    _counts_made(meta, q)
                p0 = meta.plan
                n_p = p_scratch_elems(is_fp8, p0.block_h, p0.block_n, p0.num_parts * p0.num_head_blocks, device)
                if n_p:
                    meta.p_ws = torch.empty(n_p, dtype=torch.float16, device=device)
                if is_fp8 and q.dtype != torch.float16 and meta.plan.q_scratch:
                    meta.q_ws = torch.empty(
                        (p0.num_parts * p0.num_head_blocks, p0.config.block_h, D_QK), dtype=torch.float16, device=device
                    )
            except BaseException:
                # planned but not all allocated (out of memory): unplanned again, so a retry plans and allocates
                meta.have_initialized = False
                raise
        elif meta.key != key:
            raise ValueError(
                f"metadata (tile_scheduler_metadata): planned for {meta.key}, called with {key}; "
                "use one metadata object per decode shape (get_mla_metadata())"
            )
        p = meta.plan
        assert p is not None  # planned together with the key above
        o = target if target is not None else torch.empty((b, s_q, h_q, D_QK), dtype=q.dtype, device=device)
        lse = torch.empty((b, s_q, h_q), dtype=torch.float32, device=device)
        if b == 0:
            return _deliver(o, out), lse.transpose(1, 2)
        _zero_pending_counts(meta, q)
        with launch.recording() as rec:
            _sparse_launch(meta, q, o, lse, kv_cache, indices, topk_length, extra_kv_cache, extra_indices,
                           extra_topk_length, attn_sink, scale, is_fp8, has_extra, device)  # fmt: skip
        _keep_launches(meta, fresh, call_sig, seen, rec, [*tensors, o, lse])
        return _deliver(o, out), lse.transpose(1, 2)


def _v32_sparse_decode(
    q: torch.Tensor,
    kv_cache: Any,
    indices: Any,
    topk_length: Any,
    extra_kv_cache: Any,
    extra_indices: Any,
    extra_topk_length: Any,
    attn_sink: Any,
    softmax_scale: Any,
    metadata: Any,
    batch_invariant: bool | None,
    out: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3.2's sparse decode (q 576 wide): each query token's valid entries, moved to the front of its list
    in their order and mapped to cache rows, are the block table of one request of the paged dense decode over the
    cache read as rows (page 1), and the sink scales the output after (``out · exp(lse) / (exp(lse) + exp(sink))``).
    Semantics: :func:`wavemla.reference.sparse_decode_ref`. No host read: the lists and the sink are one kernel each
    (:mod:`wavemla.kernels.v32_lists`)."""
    device = q.device
    b, s_q, h_q, d = q.shape
    for name, value in (("extra_kv_cache", extra_kv_cache), ("extra_indices", extra_indices),
                        ("extra_topk_length", extra_topk_length)):  # fmt: skip
        if value is not None:
            raise ValueError(f"{name}: DeepSeek-V4's second cache; DeepSeek-V3.2's sparse decode (q of {d}) takes None")
    invariant = _batch_invariant(batch_invariant)
    if invariant:
        raise ValueError(
            "batch_invariant: DeepSeek-V3.2's sparse decode (q of 576) has no batch-invariant mode "
            "(pass batch_invariant=False, or unset WAVEMLA_BATCH_INVARIANT)"
        )
    _check_paged_cache("kv_cache", kv_cache, device, "576 or 656")
    width = int(kv_cache.shape[3])
    if kv_cache.dtype in _FP8_DTYPES:
        if width != fp8_v32.BYTES_PER_TOKEN:
            raise ValueError(
                f"kv_cache: DeepSeek-V3.2's FP8 cache has {fp8_v32.BYTES_PER_TOKEN} bytes per token, got {width}"
            )
    elif kv_cache.dtype != q.dtype or width != d:
        raise ValueError(
            f"kv_cache: DeepSeek-V3.2's sparse decode reads {d}-wide rows of q's dtype {q.dtype} or the 656-byte FP8 "
            f"V3.2 layout, got {kv_cache.dtype} [..., {width}]"
        )
    blocks, page = int(kv_cache.shape[0]), int(kv_cache.shape[1])
    # rows from one page's start to the next's (dimensions of one element may have any stride)
    block_stride = kv_cache.stride(0) if blocks > 1 else page * width
    block_rows = block_stride // width
    rows_apart = page == 1 or kv_cache.stride(1) == width
    if kv_cache.stride(3) != 1 or not rows_apart or block_stride % width or block_rows < page:
        raise ValueError(
            f"kv_cache: DeepSeek-V3.2's sparse decode reads the cache as rows of {width}: its rows must be "
            f"contiguous and its pages start a whole number of rows apart (stride(1) == {width}, stride(3) == 1, "
            f"stride(0) a multiple of {width} of at least page·{width}), got strides {list(kv_cache.stride())}"
        )
    _check_indices("indices", indices, b, s_q, device)
    if topk_length is not None:
        _check_length("topk_length", topk_length, b, device)
    if attn_sink is not None:
        _check_tensor("attn_sink", attn_sink, (torch.float32,), 1, device)
        if attn_sink.shape[0] != h_q:
            raise ValueError(f"attn_sink: expected a [h_q={h_q}] fp32 tensor, got {list(attn_sink.shape)}")
    topk = int(indices.shape[2])
    if topk == 0:
        raise ValueError("indices: topk is 0")
    if out is not None:
        _check_out(out, q, D_QK, ("q", "kv_cache", "indices", "topk_length", "attn_sink"),
                   (q, kv_cache, indices, topk_length, attn_sink))  # fmt: skip
    from wavemla.kernels.v32_lists import compact_lists, scale_by_sink

    slots = blocks * page
    # the rows from the first page's start to the last page's end, those between pages included (never listed)
    span = (blocks - 1) * block_rows + page if blocks else 0
    rows = kv_cache.as_strided((span, 1, 1, width), (width, width, width, 1))
    with launch.device_guard(device):  # the list and sink kernels launch on q's GPU, whichever is current
        table, lengths = compact_lists(indices, topk_length, slots, page=page, block_rows=block_rows)
        # the dense decode writes the caller's out where it can take it as [b·s_q, 1, h_q, 512] (else its own tensor)
        direct = out is not None and out.is_contiguous()
        o, lse = dense_mla_decode(
            q.reshape(b * s_q, 1, h_q, d), rows, table, lengths, softmax_scale=softmax_scale, metadata=metadata,
            out=out.view(b * s_q, 1, h_q, D_QK) if direct else None, batch_invariant=False,
        )  # fmt: skip
        o = o.view(b, s_q, h_q, D_QK)
        lse = lse.reshape(b, s_q, h_q)
        if attn_sink is not None:  # scaled in place, or into the caller's out where the dense decode could not
            scale_by_sink(o, lse, attn_sink.contiguous(), o if out is None or direct else out)
            o = o if out is None else out
    return _deliver(o, out), lse.transpose(1, 2)


def _keep_launches(
    meta: MLAMetadata,
    fresh: bool,
    call_sig: tuple[Any, ...] | None,
    seen: bool,
    rec: Recording,
    inputs: list[torch.Tensor | None],
) -> None:
    """After a call through Triton's path: keep its launches for later calls of its signature ``call_sig`` (None:
    none may be replayed) with ``meta``, and, where the call planned the ``fresh`` object, with fresh objects."""
    if call_sig is None or seen:
        return
    replay = meta.keep_replay(call_sig, rec, inputs)
    if fresh:
        _FIRST_CALLS.put(_first_call_key(call_sig), _FirstCall.of(meta, replay))


def _sparse_launch(
    meta: MLAMetadata,
    q: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    extra_kv_cache: torch.Tensor | None,
    extra_indices: torch.Tensor | None,
    extra_topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    scale: float,
    is_fp8: bool,
    has_extra: bool,
    device: torch.device,
) -> None:
    """The sparse decode's launches for a validated, planned call (split kernel, then the combine if the plan needs
    it)."""
    from wavemla.kernels import sparse_decode_ws
    from wavemla.kernels.combine import sparse_decode_combine
    from wavemla.kernels.sparse_decode import sparse_decode_split

    p = meta.plan
    assert p is not None
    kv = kv_cache.view(torch.uint8) if is_fp8 else kv_cache
    extra_kv = extra_kv_cache.view(torch.uint8) if (extra_kv_cache is not None and is_fp8) else extra_kv_cache
    ws_priced = (
        device.type == "cuda"
        and not triton_interpreting()
        and sparse_decode_ws.applies(
            arch=device_arch(device), is_fp8=is_fp8, h_q=q.shape[2], block_h=p.config.block_h, block_n=p.config.block_n
        )
    )
    ws = ws_priced and sparse_decode_ws.tensors_qualify(q=q, kv=kv, extra_kv=extra_kv)
    # what both split kernels take; the Triton kernel also its tile, merge and scratch choices
    common: dict[str, Any] = dict(
        q=q,
        out=out,
        lse=lse,
        o_ws=meta.o_ws,
        lse_ws=meta.lse_ws,
        kv=kv,
        indices=indices,
        topk_length=topk_length,
        extra_kv=extra_kv,
        extra_indices=extra_indices if has_extra else None,
        extra_topk_length=extra_topk_length if has_extra else None,
        attn_sink=attn_sink,
        softmax_scale=scale,
        units_per_part=p.units_per_part,
        num_parts=p.num_parts,
        pieces_tiles=p.pieces_tiles,
        whole_units=p.whole_units,
        token_units=p.token_units,
    )
    if ws:
        meta.split_kernel = sparse_decode_ws.sparse_decode_split_ws(
            **common, counts=meta.counts if p.ws_merge else None
        )
    else:
        with _tile_fits(p.config.label, _SPARSE_WS_NEEDS if ws_priced else None):
            meta.split_kernel = sparse_decode_split(
                **common,
                counts=meta.counts,
                is_fp8=is_fp8,
                block_h=p.config.block_h,
                block_n=p.config.block_n,
                num_warps=p.config.num_warps,
                num_stages=p.config.num_stages,
                merge_in_kernel=p.merge_in_kernel,
                q_ws=meta.q_ws,
                p_ws=meta.p_ws,
            )
    # the warp-specialized kernel merges the tokens whose batch-invariant pieces all ran in one program, and those
    # cut between programs where the plan says so; the combine takes the rest
    if p.needs_combine and not p.ws_merge if ws else p.writes_partials and not p.merge_in_kernel:
        assert meta.o_ws is not None and meta.lse_ws is not None
        if p.whole_units:  # a spread plan cuts only its first tokens: the combine merges those
            b, s_q, h_q = lse.shape
            cut = p.cut_tokens(b * s_q)
            out, lse = out.view(b * s_q, 1, h_q, out.shape[-1])[:cut], lse.view(b * s_q, 1, h_q)[:cut]
        sparse_decode_combine(
            out=out,
            lse=lse,
            o_ws=meta.o_ws,
            lse_ws=meta.lse_ws,
            attn_sink=attn_sink,
            n_tiles=p.unit_tiles,
            units_per_part=p.slot_units,
            program_units=p.units_per_part if ws and p.pieces_tiles is not None else None,
        )


def _check_q_common(q: Any, any_s_q: bool = False, fp8: bool = False) -> torch.device:
    """q is a 4-D bf16/fp16 tensor (``fp8``: or float8_e4m3fn) with s_q 1..4 (``any_s_q``: 1 or more), h_q 1..128, a
    unit last stride, on CUDA (or on the CPU under Triton's interpreter); returns its device (every other tensor must
    live there). The head dim is the caller's."""
    if not isinstance(q, torch.Tensor):
        raise ValueError(f"q: expected a torch.Tensor, got {type(q).__name__}")
    device = q.device
    _check_tensor("q", q, (*_Q_DTYPES, torch.float8_e4m3fn) if fp8 else _Q_DTYPES, 4, device)
    s_q, h_q = q.shape[1], q.shape[2]
    if any_s_q and s_q < 1:
        raise ValueError(f"q: s_q (dim 1) must be at least 1, got {s_q}")
    if not any_s_q and not 1 <= s_q <= MAX_S_Q:
        raise ValueError(f"q: s_q (dim 1) must be in 1..4, got {s_q}")  # 4: MAX_S_Q
    if not 1 <= h_q <= 128:
        raise ValueError(f"q: h_q (dim 2) must be in 1..128, got {h_q}")
    if q.stride(3) != 1:
        raise ValueError("q: the last dimension must be contiguous (stride 1)")
    if not (device.type == "cuda" or (device.type == "cpu" and triton_interpreting())):
        raise ValueError(f"q: expected a CUDA tensor (or Triton's interpreter mode for CPU tensors), got {device}")
    return device


def _check_dense_cache(cache: Any, d_qk: int, device: torch.device) -> str:
    """Validate a dense k_cache; returns its format: ``"rows"`` (bf16/fp16), ``"v32"`` (FP8 V3.2, 656 bytes a token)
    or ``"fp8"`` (per-tensor FP8 rows, 576 e4m3 codes a token)."""
    page = _check_paged_cache("k_cache", cache, device, "d_qk, 576 or 656")
    v32 = fp8_v32.BYTES_PER_TOKEN
    if cache.dtype in _FP8_DTYPES:
        width = int(cache.shape[3])
        if width not in (v32, fp8_rows.BYTES_PER_TOKEN):
            raise ValueError(
                f"k_cache: an FP8 cache has {v32} bytes per token (V3.2, its scales inside) or "
                f"{fp8_rows.BYTES_PER_TOKEN} (per-tensor codes with descale_k), got {width}"
            )
        kind = "FP8 V3.2" if width == v32 else "per-tensor FP8"
        if d_qk != fp8_v32.D_QK:
            raise ValueError(f"k_cache: the {kind} cache holds {fp8_v32.D_QK}-wide rows, q has d_qk {d_qk}")
        if cache.stride(3) != 1 or cache.stride(1) != width:
            raise ValueError(f"k_cache: {kind} tokens must be contiguous (stride(1) == {width}, stride(3) == 1)")
        if cache.shape[0] > 1 and cache.stride(0) < page * width:
            raise ValueError(f"k_cache: stride(0) {cache.stride(0)} is smaller than a page ({page * width} B)")
        if width == v32:
            if cache.stride(0) % 4 or cache.data_ptr() % 4:
                raise ValueError("k_cache: FP8 V3.2 pages must start 4-byte aligned (the scales are fp32)")
            return "v32"
        return "fp8"
    if cache.dtype in _Q_DTYPES:
        if cache.shape[3] != d_qk:
            raise ValueError(f"k_cache: expected rows of q's d_qk {d_qk}, got {cache.shape[3]}")
        if cache.stride(3) != 1:
            raise ValueError(f"k_cache: the last dimension must be contiguous (stride 1), got stride {cache.stride(3)}")
        _check_page_span("k_cache", cache, page)
        return "rows"
    raise ValueError(
        f"k_cache: expected bf16/fp16 rows or a uint8/float8_e4m3fn FP8 cache (V3.2 or per-tensor), got {cache.dtype}"
    )


def _check_descale(name: str, scale: Any, device: torch.device) -> torch.Tensor:
    """A FlashMLA-style descale: a one-element fp32 tensor on the call's device (read there, so graph-safe)."""
    if not isinstance(scale, torch.Tensor):
        raise ValueError(f"{name}: expected a one-element fp32 tensor, got {type(scale).__name__}")
    if scale.numel() != 1 or scale.dtype != torch.float32:
        raise ValueError(f"{name}: expected a one-element fp32 tensor, got {scale.dtype} {list(scale.shape)}")
    if scale.device != device:
        raise ValueError(f"{name}: expected device {device} (the device of q), got {scale.device}")
    return scale.reshape(1)


def _check_scale(softmax_scale: Any, default: float, name: str = "softmax_scale") -> float:
    if softmax_scale is not None and (isinstance(softmax_scale, bool) or not isinstance(softmax_scale, numbers.Real)):
        raise ValueError(f"{name}: expected a Python float, got {type(softmax_scale).__name__}")
    try:
        scale = default if softmax_scale is None else float(softmax_scale)
    except OverflowError:  # an int (or fraction) beyond any float: refused as too large below
        scale = math.inf
    if not 0.0 < scale <= _MAX_SOFTMAX_SCALE:
        raise ValueError(
            f"{name}: expected a finite positive float (at most {_MAX_SOFTMAX_SCALE:.4g}, so that "
            f"{name}·log2(e) fits fp32), got {softmax_scale!r}"
        )
    return scale


@_no_backward
def dense_mla_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    *,
    softmax_scale: float | None = None,
    causal: bool = False,
    metadata: MLAMetadata | None = None,
    reuse_schedule: bool = False,
    out: torch.Tensor | None = None,
    descale_q: torch.Tensor | None = None,
    descale_k: torch.Tensor | None = None,
    batch_invariant: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Paged dense MLA decode (DeepSeek-V3 / Kimi-K2 / GLM): every query attends to every cached key of its request.

    Args:
        q: ``[b, s_q, h_q, d_qk]`` bf16/fp16, ``d_qk`` 576 (512 latent + 64 rope) or 512, s_q ≥ 1 (the token and any
            number of speculative ones), h_q 1..128; with an FP8 cache also float8_e4m3fn codes (with ``descale_q``:
            FlashMLA's FP8 q), and the output is bf16.
        k_cache: ``[num_blocks, page, 1, d_qk]`` rows of q's dtype, the FP8 V3.2 layout
            ``[num_blocks, page, 1, 656]`` uint8/float8_e4m3fn (512 e4m3 + 4 fp32 scales + 64 bf16 rope, d_qk 576),
            or per-tensor FP8 rows ``[num_blocks, page, 1, 576]`` uint8/float8_e4m3fn (an engine's fp8 KV cache:
            576 e4m3 codes, value = code · ``descale_k``; d_qk 576). Page 1..1024.
        block_table: ``[b, max_blocks]`` int32; entries past a request's length are never read.
        cache_seqlens: ``[b]`` int32 keys per request (clamped to ``[0, max_blocks · page]``).
        softmax_scale: default ``d_qk ** -0.5``.
        causal: for s_q > 1, query token ``s`` sees keys ``[0, L - s_q + s]`` (FlashMLA's MTP semantics).
        metadata: from :func:`get_mla_metadata`; planned on first use for this shape, owns the workspace.
        reuse_schedule: skip the device scheduler when ``metadata`` already holds a schedule: valid only while
            ``cache_seqlens`` holds the values it was made from (the layers of one decode step, FlashMLA's contract
            for its metadata). Default: schedule on every call.
        out: ``[b, s_q, h_q, 512]`` of q's dtype to write the result into (and return); written directly where it
            is contiguous and 16-byte aligned, else the result is copied into it.
        descale_q: with an FP8 cache, q's scale (q's value is ``q · descale_q``), a one-element fp32 tensor on q's
            device, read by the kernel; required with an FP8 q, refused with bf16/fp16 rows.
        descale_k: the per-tensor FP8 cache's scale, a one-element fp32 tensor on q's device (read by the kernel,
            so a CUDA graph replays whatever it holds); required with that cache, refused with the others.
        batch_invariant: None reads ``WAVEMLA_BATCH_INVARIANT``. The dense decode has no batch-invariant mode (its
            schedule balances the lengths of the whole batch, so a request's cut points depend on the others'):
            True, or the knob set, raises ValueError; False runs the call with the knob set.

    Returns ``(out [b, s_q, h_q, 512] q.dtype (bf16 for an FP8 q), lse [b, h_q, s_q] fp32)``, natural-log lse,
    ``out = 0`` and ``lse = +inf`` for a query that sees no key; semantics are those of
    :func:`wavemla.reference.dense_decode_ref`. Three launches (scheduler, split, combine), no host sync.

    Example::

        out, lse = dense_mla_decode(q, k_cache, block_table, cache_seqlens, causal=True)
    """
    from wavemla.kernels import dense_decode_ws
    from wavemla.kernels.combine import dense_decode_combine
    from wavemla.kernels.dense_decode import dense_decode_schedule, dense_decode_split
    from wavemla.kernels.dense_decode import p_scratch_elems as dense_p_scratch_elems
    from wavemla.kernels.dense_decode import split_p as dense_split_p

    # before the replay lookup, whose key holds the knobs but not this argument
    if _batch_invariant(batch_invariant):
        raise ValueError(
            "batch_invariant: the dense decode has no batch-invariant mode (its schedule balances the whole batch's "
            "lengths); pass batch_invariant=False, or unset WAVEMLA_BATCH_INVARIANT"
        )
    tensors: tuple[torch.Tensor, ...] = (q, k_cache, block_table, cache_seqlens)
    names: tuple[str, ...] = _DENSE_INPUTS
    for name, given in (("descale_q", descale_q), ("descale_k", descale_k)):
        if isinstance(given, torch.Tensor):
            tensors, names = (*tensors, given), (*names, name)
    run_schedule = not (reuse_schedule and isinstance(metadata, MLAMetadata) and metadata.scheduled)
    scalars = ("dense", softmax_scale, causal, run_schedule, descale_q is None, descale_k is None)
    call_sig, seen, done = _replayed(metadata, tensors, scalars, 512, names, out)
    if done is not None:
        if metadata is not None and not metadata.scheduled:  # (once scheduled, no capture check on the fast path)
            metadata.scheduled = not _capturing(q)
        return done

    device = _check_q_common(q, any_s_q=True, fp8=True)
    b, s_q, h_q, d_qk = q.shape
    if d_qk not in (576, 512):
        raise ValueError(f"q: expected d_qk 576 (512 latent + 64 rope) or 512, got {d_qk}")
    _check_query_rows(q, 512)
    cache_format = _check_dense_cache(k_cache, d_qk, device)
    is_fp8 = cache_format != "rows"
    fp8_q = q.dtype == torch.float8_e4m3fn
    if fp8_q and not is_fp8:
        raise ValueError("q: an FP8 q (float8_e4m3fn) needs an FP8 cache; bf16/fp16 rows take q of their dtype")
    if not is_fp8:
        _check_row_dtype("k_cache", k_cache, q, "V3.2")
    if cache_format == "fp8":
        if descale_k is None:
            raise ValueError("descale_k: required with a per-tensor FP8 cache (576 e4m3 codes a token)")
        k_scale: torch.Tensor | None = _check_descale("descale_k", descale_k, device)
    elif descale_k is not None:
        raise ValueError(
            "descale_k: only with a per-tensor FP8 cache (576 e4m3 codes a token); bf16/fp16 rows hold their values "
            "and the V3.2 cache its own scales"
        )
    else:
        k_scale = None
    if descale_q is not None and not is_fp8:
        raise ValueError("descale_q: only with an FP8 cache (V3.2 or per-tensor); bf16/fp16 rows take q as it is")
    if fp8_q and descale_q is None:
        raise ValueError("descale_q: required with an FP8 q (float8_e4m3fn): q's value is q · descale_q")
    q_scale = None if descale_q is None else _check_descale("descale_q", descale_q, device)
    _check_tensor("block_table", block_table, (torch.int32,), 2, device)
    if block_table.shape[0] != b:
        raise ValueError(f"block_table: expected [b={b}, max_blocks], got {list(block_table.shape)}")
    if block_table.shape[1] > 1 and block_table.stride(1) != 1:
        raise ValueError("block_table: the last dimension must be contiguous (stride 1)")
    _check_length("cache_seqlens", cache_seqlens, b, device)
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected a bool, got {type(causal).__name__}")
    scale = _check_scale(softmax_scale, d_qk**-0.5)
    if metadata is not None and not isinstance(metadata, MLAMetadata):
        raise ValueError(
            "metadata (tile_scheduler_metadata): expected the MLAMetadata returned by get_mla_metadata(), "
            f"got {type(metadata).__name__}"
        )
    target = None if out is None else _check_out(out, q, 512, names, tensors)

    page = k_cache.shape[1]
    workload = DenseWorkload(
        batch=b,
        s_q=s_q,
        h_q=h_q,
        d_qk=d_qk,
        max_seqlen=block_table.shape[1] * page,
        is_fp8=is_fp8,
        dtype="fp16" if q.dtype == torch.float16 else "bf16",
        page=page,
    )
    with launch.device_guard(device):
        key = ("dense", workload, str(device))
        meta = metadata if metadata is not None else MLAMetadata()
        fresh = meta.key is None
        if fresh:
            try:
                planned = plan_dense(workload, _device_spec(device))
                meta.dense_plan = planned
                meta.key = key
                rows = planned.workspace_rows(b)
                meta.lse_ws = torch.empty((rows, s_q * h_q), dtype=torch.float32, device=device)
                meta.sched = torch.empty((planned.num_parts, 4), dtype=torch.int32, device=device)
                meta.req = torch.empty((max(b, 1), 4), dtype=torch.int32, device=device)
                c = planned.config
                programs = planned.num_parts * -(-s_q * h_q // c.block_h)
                n_p = dense_p_scratch_elems(is_fp8, c.block_h, c.block_n, q.dtype, programs, device)
                p_dtype = torch.float16 if is_fp8 else q.dtype  # the split kernel's compute dtype
                meta.p_ws = torch.empty(n_p, dtype=p_dtype, device=device) if n_p else None
            except BaseException:
                # planned but not all allocated (out of memory): unplanned again, so a retry plans and allocates
                meta.have_initialized = False
                raise
        elif meta.key != key:
            raise ValueError(
                f"metadata (tile_scheduler_metadata): planned for {meta.key}, called with {key}; "
                "use one metadata object per decode shape (get_mla_metadata())"
            )
        p = meta.dense_plan
        assert p is not None and meta.lse_ws is not None
        assert meta.sched is not None and meta.req is not None
        o = target if target is not None else torch.empty((b, s_q, h_q, 512), dtype=_out_dtype(q), device=device)
        lse = torch.empty((b, s_q, h_q), dtype=torch.float32, device=device)
        if b == 0:
            return _deliver(o, out), lse.transpose(1, 2)
        kv = k_cache.view(torch.uint8) if is_fp8 else k_cache
        o_ws = dense_partials(meta, q, is_fp8)
        with launch.recording() as rec:
            if not (reuse_schedule and meta.scheduled):
                dense_decode_schedule(
                    cache_seqlens=cache_seqlens,
                    sched=meta.sched,
                    req=meta.req,
                    max_seqlen=workload.max_seqlen,
                    num_parts=p.num_parts,
                    segment_overhead=p.segment_overhead,
                    block_n=p.config.block_n,
                    cut_units=p.cut_units,
                )
                # under capture the scheduler is recorded, not run: the schedule exists once the graph replays
                meta.scheduled = meta.scheduled or not _capturing(q)
            ws_priced = (
                device.type == "cuda"
                and not triton_interpreting()
                and dense_decode_ws.applies_to(is_fp8=is_fp8, block_h=p.config.block_h, block_n=p.config.block_n,
                                               arch=device_arch(device), q=q, kv=kv)
            )  # fmt: skip
            with _tile_fits(p.config.label, _DENSE_WS_NEEDS if ws_priced else None):
                meta.split_kernel = dense_decode_split(
                    q=q,
                    out=o,
                    lse=lse,
                    o_ws=o_ws,
                    lse_ws=meta.lse_ws,
                    kv=kv,
                    block_table=block_table,
                    cache_seqlens=cache_seqlens,
                    sched=meta.sched,
                    is_fp8=is_fp8,
                    causal=causal,
                    softmax_scale=scale,
                    block_h=p.config.block_h,
                    block_n=p.config.block_n,
                    num_warps=p.config.num_warps,
                    num_stages=p.config.num_stages,
                    num_parts=p.num_parts,
                    # planned under WAVEMLA_DENSE_P=single; a call under split keeps P in registers (two dots of it)
                    p_ws=None if dense_split_p(is_fp8, q.dtype) else meta.p_ws,
                    k_scale=k_scale,
                    q_scale=q_scale,
                )
            if p.num_parts > 1:
                dense_decode_combine(out=o, lse=lse, o_ws=o_ws, lse_ws=meta.lse_ws, req=meta.req)
        _keep_launches(meta, fresh, call_sig, seen, rec, [*tensors, o, lse])
        return _deliver(o, out), lse.transpose(1, 2)


def dense_partials(meta: MLAMetadata, q: torch.Tensor, is_fp8: bool) -> torch.Tensor:
    """The dense workspace for the partials the split kernel writes (``[b + parts, s_q·h, 512]`` of
    :func:`wavemla.kernels.dense_decode.partials_dtype`, which ``WAVEMLA_DENSE_P`` can change between calls), made
    on first use of each dtype and kept: a CUDA graph captured with one goes on writing that tensor, so it is never
    replaced."""
    from wavemla.kernels.dense_decode import partials_dtype

    p = meta.dense_plan
    assert p is not None
    dtype = partials_dtype(is_fp8, q.dtype)
    if dtype not in meta.dense_o_ws:
        b, s_q, h_q = q.shape[:3]
        meta.dense_o_ws[dtype] = torch.empty((p.workspace_rows(b), s_q * h_q, 512), dtype=dtype, device=q.device)
    return meta.dense_o_ws[dtype]


def flash_mla_with_kvcache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor | None,
    cache_seqlens: torch.Tensor | None,
    head_dim_v: int,
    tile_scheduler_metadata: MLAMetadata | torch.Tensor | None,
    num_splits: torch.Tensor | None = None,
    softmax_scale: float | None = None,
    causal: bool = False,
    is_fp8_kvcache: bool = False,
    indices: torch.Tensor | None = None,
    attn_sink: torch.Tensor | None = None,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices_in_kvcache: torch.Tensor | None = None,
    topk_length: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    *,
    descale_q: torch.Tensor | None = None,
    descale_k: torch.Tensor | None = None,
    kv_format: str | None = None,
    use_legacy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashMLA's call, same names, order and returns (see the module doc for shapes), plus ``out``: a ``[b, s_q,
    h_q, 512]`` tensor of q's dtype that receives the output (and is returned), as vLLM's DeepSeek-V4 decode passes
    its output buffer.

    The keyword-only arguments are those of the FlashMLA build SGLang ships (``sgl-flash-mla``, called through
    ``sglang.kernels.ops.attention.flash_mla_interface``), accepted where they describe what wavemla reads:
    ``descale_q`` and ``descale_k`` for the dense decode with a per-tensor FP8 cache (one-element fp32 tensors on
    q's device, FlashMLA's FP8 dense call, which vLLM and SGLang make for an fp8 KV cache: q float8_e4m3fn times
    ``descale_q``, computed into bf16, which is then the output's dtype; the cache's codes times ``descale_k``), None
    for the sparse decode (its FP8 caches carry their scales), ``kv_format`` None or
    ``"V32"`` with the V3.2 cache (the cache's last dimension tells MODEL1 from V3.2), ``use_legacy`` True (False
    selects DeepSeek-V4.1's token-interleaved caches, which wavemla does not read).

    ``tile_scheduler_metadata`` is a :class:`MLAMetadata` (planned by the first call that uses it), None (planned per
    call), or FlashMLA's legacy schedule tensor ``[num_sm_parts, 8]`` int32 with ``num_splits`` ``[b + 1]`` int32, as
    SGLang's FlashMLA interface returns them from ``get_mla_metadata(cache_seqlens, ...)`` and passes them on
    (:func:`wavemla.flash_mla.legacy_get_mla_metadata`): those carry no schedule wavemla reads, and the call plans as
    for None. ``num_splits`` must be None otherwise.

    With ``indices`` it is the sparse decode: ``block_table`` and ``cache_seqlens`` are not used (indices already
    hold global slots), as in FlashMLA, and ``causal`` must be False. With ``indices=None`` it is the paged dense
    decode (:func:`dense_mla_decode`): ``block_table`` and ``cache_seqlens`` are required, ``causal`` applies to
    s_q > 1, and the sparse-only arguments must be None. ``is_fp8_kvcache`` must agree with the cache format
    (True: uint8/float8_e4m3fn bytes, MODEL1 ``[..., 584]`` for DeepSeek-V4's sparse decode, V3.2 ``[..., 656]`` for
    the dense decode and for DeepSeek-V3.2's sparse decode, whose q is 576 wide; per-tensor ``[..., 576]`` codes,
    with ``descale_k``, for the dense decode).
    """
    if head_dim_v != D_QK:
        raise ValueError(f"head_dim_v: expected {D_QK}, got {head_dim_v}")
    if isinstance(tile_scheduler_metadata, torch.Tensor):
        # FlashMLA's legacy schedule tensors (SGLang's interface to its FlashMLA build passes them, with num_splits):
        # the planner schedules the call itself, as for a metadata object no call has planned
        _check_legacy_schedule(tile_scheduler_metadata, num_splits)
        tile_scheduler_metadata = None
    elif num_splits is not None:
        raise ValueError("num_splits: must be None (the planner chooses the split)")
    if indices is not None:
        for name, scale in (("descale_q", descale_q), ("descale_k", descale_k)):
            if scale is not None:
                raise ValueError(
                    f"{name}: the sparse decode takes None (its FP8 caches carry their own scales, and q is bf16 "
                    "or fp16); descales are the dense decode's, with a per-tensor FP8 cache"
                )
    v32_cache = (
        isinstance(k_cache, torch.Tensor)
        and k_cache.dtype in _FP8_DTYPES
        and k_cache.dim() == 4
        and k_cache.shape[3] == fp8_v32.BYTES_PER_TOKEN
    )
    if kv_format is not None and not (kv_format == "V32" and v32_cache):
        raise ValueError(
            f"kv_format: None, or 'V32' with the 656-byte FP8 V3.2 cache, got {kv_format!r} (the cache's last "
            "dimension tells DeepSeek-V4 MODEL1, 584 bytes a token, from V3.2, 656; V3.2's no-rope record is not read)"
        )
    if not use_legacy:
        raise ValueError(
            "use_legacy: False selects DeepSeek-V4.1's token-interleaved caches, which wavemla does not read "
            "(DeepSeek-V4 MODEL1 and V3.2 caches are use_legacy=True)"
        )
    if isinstance(k_cache, torch.Tensor):
        fp8_cache = k_cache.dtype in _FP8_DTYPES
        if bool(is_fp8_kvcache) != fp8_cache:
            layout = "FP8 bytes" if fp8_cache else "bf16/fp16 rows"
            raise ValueError(f"is_fp8_kvcache: {is_fp8_kvcache} but k_cache has dtype {k_cache.dtype} ({layout})")
    if indices is None:
        if block_table is None:
            raise ValueError("block_table: required for dense decode (indices=None): [b, max_blocks] int32")
        if cache_seqlens is None:
            raise ValueError("cache_seqlens: required for dense decode (indices=None): [b] int32")
        sparse_only = {
            "attn_sink": attn_sink,
            "extra_k_cache": extra_k_cache,
            "extra_indices_in_kvcache": extra_indices_in_kvcache,
            "topk_length": topk_length,
            "extra_topk_length": extra_topk_length,
        }
        for name, value in sparse_only.items():
            if value is not None:
                raise ValueError(f"{name}: sparse decode only; dense decode (indices=None) takes None")
        return dense_mla_decode(
            q,
            k_cache,
            block_table,
            cache_seqlens,
            softmax_scale=softmax_scale,
            causal=causal,
            metadata=tile_scheduler_metadata,
            out=out,
            descale_q=descale_q,
            descale_k=descale_k,
        )
    if causal:
        raise ValueError("causal: sparse decode requires causal=False (the index lists already encode causality)")
    return sparse_mla_decode(
        q,
        k_cache,
        indices,
        topk_length=topk_length,
        extra_kv_cache=extra_k_cache,
        extra_indices=extra_indices_in_kvcache,
        extra_topk_length=extra_topk_length,
        attn_sink=attn_sink,
        softmax_scale=softmax_scale,
        metadata=tile_scheduler_metadata,
        out=out,
    )


def _check_legacy_schedule(tile_scheduler_metadata: torch.Tensor, num_splits: Any) -> None:
    """FlashMLA's legacy schedule: ``[num_sm_parts, 8]`` int32 and ``num_splits`` ``[b + 1]`` int32 (what
    :func:`wavemla.flash_mla.legacy_get_mla_metadata` returns)."""
    t = tile_scheduler_metadata
    if t.dtype != torch.int32 or t.dim() != 2 or t.shape[1] != 8:
        raise ValueError(
            f"tile_scheduler_metadata: a tensor must be FlashMLA's legacy schedule, [num_sm_parts, 8] int32, got "
            f"{t.dtype} {list(t.shape)}"
        )
    if not isinstance(num_splits, torch.Tensor) or num_splits.dtype != torch.int32 or num_splits.dim() != 1:
        raise ValueError(
            "num_splits: with FlashMLA's legacy schedule tensor, expected its [b + 1] int32 num_splits, got "
            f"{num_splits.dtype if isinstance(num_splits, torch.Tensor) else type(num_splits).__name__}"
        )


@_no_backward
def sparse_mla_prefill(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float,
    d_v: int = 512,
    attn_sink: torch.Tensor | None = None,
    topk_length: torch.Tensor | None = None,
    indexer_topk: int = 0,
    *,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sparse MLA prefill, FlashMLA's ``flash_mla_sparse_fwd``: every query token attends over its own rows of ``kv``.

    Args:
        q: ``[s_q, h_q, d_qk]`` bf16 or fp16, h_q 1..128, d_qk 512 (DeepSeek-V4) or 576 (DeepSeek-V3.2: 512 latent
            + 64 rope), unit last stride.
        kv: ``[s_kv, 1, d_qk]`` of q's dtype, unit last stride (one unpaged latent row per key; K = V).
        indices: ``[s_q, 1, topk]`` int32 row numbers into ``kv``; < 0 or >= s_kv: invalid (never read).
        sm_scale: the softmax scale, a finite positive float.
        d_v: the value width; 512 (a row's first 512 columns).
        attn_sink: ``[h_q]`` fp32 sink logits (optional; enters the softmax denominator only).
        topk_length: ``[s_q]`` int32, the leading entries of each token's list to use (optional).
        indexer_topk: 0, FlashMLA's default; FlashMLA's other values (its fourth result, ``lse_indexer``, the LSE
            over the first ``indexer_topk`` entries, for DeepSeek Sparse Attention's training) are refused.
        out: ``[s_q, h_q, d_v]`` of q's dtype with a unit last stride, written in place (optional).

    Returns:
        ``(out [s_q, h_q, 512] q.dtype, max_logits [s_q, h_q] fp32, lse [s_q, h_q] fp32)``: the largest scaled
        score (-inf with no valid row) and the natural-log sum of exponentials without the sink (+inf with no valid
        row), as :func:`wavemla.reference.sparse_prefill.sparse_prefill_ref` defines them.

    Example::

        out, max_logits, lse = wavemla.sparse_mla_prefill(q, kv, idx, 512 ** -0.5, attn_sink=sink)
    """
    from wavemla.kernels.sparse_prefill import sparse_prefill
    from wavemla.plan import PREFILL_D_QK, PREFILL_D_V, PrefillWorkload, plan_sparse_prefill

    if not isinstance(q, torch.Tensor):
        raise ValueError(f"q: expected a torch.Tensor, got {type(q).__name__}")
    device = q.device
    _check_tensor("q", q, _Q_DTYPES, 3, device)
    s_q, h_q, d_qk = (int(n) for n in q.shape)
    if d_qk not in PREFILL_D_QK:
        raise ValueError(f"q: d_qk (dim 2) must be 512 or 576, got {d_qk}")
    if not 1 <= h_q <= 128:
        raise ValueError(f"q: h_q (dim 1) must be in 1..128, got {h_q}")
    if q.stride(2) != 1:
        raise ValueError("q: the last dimension must be contiguous (stride 1)")
    if not (device.type == "cuda" or (device.type == "cpu" and triton_interpreting())):
        raise ValueError(f"q: expected a CUDA tensor (or Triton's interpreter mode for CPU tensors), got {device}")
    _check_tensor("kv", kv, _Q_DTYPES, 3, device)
    if kv.dtype != q.dtype:
        raise ValueError(f"kv: rows must match q's dtype {q.dtype}, got {kv.dtype}")
    if kv.shape[1] != 1 or kv.shape[2] != d_qk:
        raise ValueError(f"kv: expected [s_kv, 1, d_qk={d_qk}], got {list(kv.shape)}")
    if kv.stride(2) != 1:
        raise ValueError("kv: the last dimension must be contiguous (stride 1)")
    if q.dtype == torch.bfloat16 and triton_interpreting():
        raise ValueError(
            "q: bf16 cannot run under Triton's interpreter (its tl.dot multiplies raw bf16 bits, triton issue "
            "11584); use fp16 on the CPU"
        )
    _check_tensor("indices", indices, (torch.int32,), 3, device)
    if indices.shape[0] != s_q or indices.shape[1] != 1:
        raise ValueError(f"indices: expected [s_q={s_q}, 1, topk], got {list(indices.shape)}")
    if indices.shape[2] > 1 and indices.stride(2) != 1:
        raise ValueError("indices: the last dimension must be contiguous (stride 1)")
    scale = _check_scale(sm_scale, 0.0, "sm_scale")
    if isinstance(d_v, bool) or d_v != PREFILL_D_V:
        raise ValueError(f"d_v: must be {PREFILL_D_V}, got {d_v!r}")
    if isinstance(indexer_topk, bool) or not isinstance(indexer_topk, numbers.Integral) or indexer_topk != 0:
        raise ValueError(f"indexer_topk: must be 0 (FlashMLA's lse_indexer is not computed), got {indexer_topk!r}")
    if attn_sink is not None:
        _check_tensor("attn_sink", attn_sink, (torch.float32,), 1, device)
        if attn_sink.shape[0] != h_q or (h_q > 1 and attn_sink.stride(0) != 1):
            raise ValueError(f"attn_sink: expected a contiguous [h_q={h_q}] fp32 tensor, got {list(attn_sink.shape)}")
    if topk_length is not None:
        _check_length("topk_length", topk_length, s_q, device, "s_q")
    if out is not None:
        want = (s_q, h_q, PREFILL_D_V)
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"out: expected a torch.Tensor, got {type(out).__name__}")
        if tuple(out.shape) != want or out.dtype != q.dtype or out.device != device:
            raise ValueError(
                f"out: expected {list(want)} {q.dtype} on {device}, got {list(out.shape)} {out.dtype} on {out.device}"
            )
        if out.numel():
            if out.stride(2) != 1:
                raise ValueError("out: the last dimension must be contiguous (stride 1)")
            _check_out_memory(out, ("q", "kv", "indices", "attn_sink", "topk_length"),
                              (q, kv, indices, attn_sink, topk_length))  # fmt: skip
    p = plan_sparse_prefill(PrefillWorkload(s_q=s_q, h_q=h_q, topk=int(indices.shape[2]), d_qk=d_qk),
                            _device_spec(device))  # fmt: skip
    with launch.device_guard(device):
        return sparse_prefill(q, kv, indices, scale, p, attn_sink, topk_length, out)
