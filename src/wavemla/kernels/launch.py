"""Kernel launches that skip Triton's per-launch work when a decode call repeats.

Triton's ``kernel[grid](...)`` binds every argument, specializes it (dtype, 16-byte alignment, integers equal to 1
or divisible by 16) and looks the compiled kernel up on every call. For this package's kernels (11 to 72 arguments)
that took 14-68 µs a launch on the H200 machine's host, against 6-14 µs for the compiled kernel's own launcher
(``benchmarks/experiments/host_breakdown.py``), and a decode call launches two or three kernels.

The decode calls launch through :func:`run`. Under :func:`recording`, the launches of one call are noted, and
:class:`Replay` turns them into calls of the compiled kernels' launchers with every argument fixed except the
tensors' addresses, which the caller gives per call (or, for scratch tensors a launcher allocated, the replay
allocates again). The caller keeps a replay for the *signature* of the call it recorded: the type, dtype, shape,
strides, device and 16-byte alignment of every tensor argument, which tensors share an address, the scalar
arguments and the knobs. Within one signature every other launch argument, every specialization and every
choice the launchers make are the same, so a replay launches exactly what Triton would have: the same compiled
kernels with the same arguments. Tensors a replay keeps for every call (a metadata object's workspace) can be
exchanged: :meth:`Replay.unbound` drops them and :meth:`Replay.bound` gives a copy that launches with others of the
same layout. :class:`ReplayCache` keeps replays by signature for callers without an object to hold them, and
:func:`replayed_run` is the whole replay-or-record step for a launcher of one kernel.

Host-side torch work in a launcher is either repeated by the replay (a scratch allocation, :func:`scratch`; a
dtype conversion of an input, :func:`converted`) or refuses the recording (:func:`untracked`). A recording is also
refused (no replay; calls keep Triton's path) when a launch argument is a tensor the caller did not name and no
launcher registered, under Triton's interpreter, and while a Triton launch hook is set (profilers).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import copy
import dataclasses
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from wavemla import config


@dataclasses.dataclass
class Recording:
    """The launches of one call, noted by :func:`run` while :func:`recording` is active."""

    launches: list[tuple[Any, tuple[int, ...], tuple[Any, ...], dict[str, Any], Any]] = dataclasses.field(
        default_factory=list
    )
    scratch: list[torch.Tensor] = dataclasses.field(default_factory=list)
    converted: list[tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)  # (source, copy)
    refused: str | None = None


_ACTIVE: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("wavemla_launch_recording", default=None)


def run(fn: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> Any:
    """``fn[grid](*args, **kwargs)`` (Triton's launch path), noted by an active :func:`recording`; returns what
    Triton returns (the compiled kernel)."""
    kernel = fn[grid](*args, **kwargs)
    rec = _ACTIVE.get()
    if rec is not None:
        rec.launches.append((fn, tuple(grid), args, kwargs, kernel))
    return kernel


def device_guard(device: torch.device | None) -> contextlib.AbstractContextManager[Any]:
    """Make ``device`` current for the block when it is a GPU: Triton launches on the current device, whichever GPU
    the call's tensors are on. None (an argument that is not a tensor, for the call's checks to name) does nothing."""
    cuda = isinstance(device, torch.device) and device.type == "cuda"
    return torch.cuda.device(device) if cuda else contextlib.nullcontext()


def scratch(t: torch.Tensor) -> torch.Tensor:
    """Register ``t``, allocated by a launcher for this call only, so that a replay allocates its own (same
    shape, strides, dtype and device; nothing is written to it on the host); returns ``t``."""
    rec = _ACTIVE.get()
    if rec is not None:
        rec.scratch.append(t)
    return t


def converted(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t.to(dtype)``, a launcher's conversion of a call's tensor: a replay converts the new tensor the same way."""
    out = t.to(dtype)
    rec = _ACTIVE.get()
    if rec is not None and out is not t:
        rec.converted.append((t, out))
    return out


def untracked(reason: str) -> None:
    """Note host-side work of this call that a replay would not repeat (a torch copy or fill): no replay."""
    rec = _ACTIVE.get()
    if rec is not None and rec.refused is None:
        rec.refused = reason


@contextlib.contextmanager
def recording() -> Iterator[Recording]:
    """Note the launches made inside the block (not across threads or tasks: a context variable)."""
    rec = Recording()
    token = _ACTIVE.set(rec)
    try:
        yield rec
    finally:
        _ACTIVE.reset(token)


def enabled() -> bool:
    """Whether calls may be replayed now: ``WAVEMLA_LAUNCH=replay`` and no Triton launch hook set."""
    if config.get("WAVEMLA_LAUNCH") != "replay":
        return False
    from triton import knobs

    return all(_idle(h) for h in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook))


def _idle(hook: Any) -> bool:
    """A launch hook that calls nothing: None, or an empty hook chain (Triton 3.5 and newer)."""
    return hook is None or (isinstance(getattr(hook, "calls", None), list) and not hook.calls)


def replayable(tensors: Sequence[Any], scalars: Sequence[Any]) -> bool:
    """Whether a call may be replayed: tensors or None where tensors go, the first a CUDA tensor on the current
    device, scalars of plain types (None, bool, int, float, str), replays allowed (:func:`enabled`)."""
    first = tensors[0]
    return (
        isinstance(first, torch.Tensor)
        and first.is_cuda
        and all(t is None or isinstance(t, torch.Tensor) for t in tensors)
        and all(v is None or type(v) in (bool, int, float, str) for v in scalars)
        and enabled()
        and first.get_device() == torch.cuda.current_device()
    )


def call_key(tensors: Sequence[torch.Tensor | None], scalars: Sequence[Any]) -> tuple[tuple[Any, ...], list[int]]:
    """(signature, addresses) of a call (see the module doc): every tensor's type, dtype, shape, strides and device,
    the 16-byte alignment of every address and which addresses are equal, the scalars with their types, and the
    knobs' generation; the addresses are the tensors' ``data_ptr()`` (None entries left out)."""
    ptrs = [t.data_ptr() for t in tensors if t is not None]
    shapes = tuple(None if t is None else (type(t), t.dtype, t.shape, t.stride(), t.get_device()) for t in tensors)
    aligned = (*(p & 15 for p in ptrs), *(ptrs.index(p) for p in ptrs))
    return (shapes, aligned, tuple((type(v), v) for v in scalars), config.generation()), ptrs


def span_bytes(t: torch.Tensor) -> int:
    """Bytes from ``t``'s first element to just past its last (non-negative strides)."""
    if t.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1) * t.element_size()


# a host tensor descriptor's position, class, other fields, slot and view (shape, strides, element offset)
_Descriptor = tuple[int, type, dict[str, Any], int, tuple[Any, ...]]


class NotReplayable(Exception):
    """A recorded call that cannot be replayed (the reason names what)."""


@dataclasses.dataclass(frozen=True)
class _Slot:
    id: int  # inputs first (their index), then scratch tensors, then kept ones
    kind: str  # "in" (given per call), "scratch" (allocated per call), "converted" (an input converted per call),
    # "keep" (the same tensor every call)
    ptr: int
    span: int
    dtype: torch.dtype


class Replay:
    """The kernels of a recorded call, launched again with new tensors.

    ``inputs``: the call's tensors in a fixed order (None where absent), whose addresses the caller passes to
    :meth:`launch` in the same order; ``keep``: tensors that stay the same for every call (the metadata's
    workspace). Every tensor argument of a recorded launch must be, or lie inside, one of these, a registered
    scratch tensor (:func:`scratch`) or a registered conversion of an input (:func:`converted`), else
    :class:`NotReplayable`. Host tensor descriptors (TMA) whose base lies
    inside an input or scratch tensor are rebuilt per call on the new one. ``device``: the CUDA device the
    kernels were loaded on (default: that of the first CUDA tensor among ``inputs`` and ``keep``).
    """

    def __init__(
        self,
        rec: Recording,
        inputs: Sequence[torch.Tensor | None],
        keep: Sequence[torch.Tensor],
        device: int | None = None,
    ):
        if rec.refused is not None:
            raise NotReplayable(rec.refused)
        if not rec.launches:
            raise NotReplayable("no kernel launched")
        n_in, n_scratch, n_conv = len(inputs), len(rec.scratch), len(rec.converted)
        slots = [_Slot(i, "in", t.data_ptr(), span_bytes(t), t.dtype) for i, t in enumerate(inputs) if t is not None]
        slots += [_Slot(n_in + i, "scratch", t.data_ptr(), span_bytes(t), t.dtype) for i, t in enumerate(rec.scratch)]
        first_conv = n_in + n_scratch
        slots += [_Slot(first_conv + i, "converted", c.data_ptr(), span_bytes(c), c.dtype)
                  for i, (_, c) in enumerate(rec.converted)]  # fmt: skip
        first_keep = first_conv + n_conv
        slots += [_Slot(first_keep + i, "keep", t.data_ptr(), span_bytes(t), t.dtype) for i, t in enumerate(keep)]
        self._slots = slots
        self._n_inputs = n_in
        self._in_ids = [i for i, t in enumerate(inputs) if t is not None]
        self._scratch = [(n_in + i, t.shape, t.stride(), t.dtype, t.device) for i, t in enumerate(rec.scratch)]
        # CUDA tensors made per call (scratch, conversions): made on the launch stream (see launch)
        self._cuda_per_call = any(t.is_cuda for t in rec.scratch) or any(src.is_cuda for src, _ in rec.converted)
        # conversions of whole input tensors (a call's q to the kernel's dtype), redone per call from the new input
        self._converted: list[tuple[int, int, torch.dtype]] = []
        for i, (src, out) in enumerate(rec.converted):
            slot, offset = self._resolve(src, "a conversion", "its source")
            ref = inputs[slot.id] if slot.kind == "in" else None
            if (
                ref is None
                or offset
                or ref.shape != src.shape
                or ref.stride() != src.stride()
                or ref.dtype != src.dtype
            ):
                raise NotReplayable("a conversion of a tensor that is not one of the call's inputs")
            self._converted.append((first_conv + i, slot.id, out.dtype))
        self._keep: list[torch.Tensor] | None = list(keep)  # held so that their addresses stay valid
        self._keep_specs = [(t.shape, t.stride(), t.dtype, t.device) for t in keep]
        self._first_keep = first_keep
        self._addr = [0] * first_keep + [t.data_ptr() for t in keep]
        self._launches: list[tuple[Any, Any, Any, tuple[int, int, int], list[Any], list[tuple[int, int, int]],
                                   list[_Descriptor], list[_Descriptor]]] = []  # fmt: skip
        for fn, grid, args, kwargs, kernel in rec.launches:
            if kernel is None or not hasattr(kernel, "packed_metadata"):
                raise NotReplayable(f"{_name(fn)}: no compiled kernel (Triton's interpreter?)")
            if hasattr(kernel, "result"):
                kernel = kernel.result()
            names = list(inspect.signature(fn.fn).parameters)
            bound = inspect.signature(fn.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
            bound.apply_defaults()
            values = list(bound.arguments.values())
            pointers: list[tuple[int, int, int]] = []
            descriptors: list[_Descriptor] = []
            keep_descriptors: list[_Descriptor] = []  # on kept tensors: recorded once, rebuilt only by bound()
            for pos, v in enumerate(values):
                if isinstance(v, torch.Tensor):
                    slot, offset = self._resolve(v, _name(fn), names[pos])
                    pointers.append((pos, slot.id, offset))
                    values[pos] = None
                elif dataclasses.is_dataclass(v) and isinstance(base := getattr(v, "base", None), torch.Tensor):
                    slot, offset = self._resolve(base, _name(fn), names[pos])
                    if slot.dtype != base.dtype or offset % base.element_size():
                        raise NotReplayable(f"{_name(fn)}: {names[pos]}'s base is no view of its tensor's elements")
                    view = (tuple(base.shape), tuple(base.stride()), offset // base.element_size())
                    # the descriptor's other fields; the recorded tensor is not held
                    fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v) if f.init and f.name != "base"}
                    if slot.kind == "keep":  # the same tensor every call: the recorded descriptor stands
                        keep_descriptors.append((pos, type(v), fields, slot.id, view))
                        continue
                    descriptors.append((pos, type(v), fields, slot.id, view))
                    values[pos] = None
                elif not isinstance(v, (int, float, bool, str, type(None))) and not _is_constexpr_value(v):
                    raise NotReplayable(f"{_name(fn)}: argument {names[pos]} of type {type(v).__name__}")
            g = tuple(grid) + (1,) * (3 - len(grid))
            run = kernel.run  # Triton's launcher for the compiled kernel (the handles are loaded: it launched)
            self._launches.append((run, kernel.function, kernel.packed_metadata, (g[0], g[1], g[2]), values, pointers,
                                   descriptors, keep_descriptors))  # fmt: skip
        self._device = _device_of(inputs, keep) if device is None else device

    def unbound(self) -> Replay:
        """This replay without its kept tensors (so that it holds no memory of theirs): :meth:`bound` gives
        launchable copies."""
        new = copy.copy(self)
        new._keep = None
        new._addr = [0] * len(self._addr)
        new._launches = [(*entry[:4], [None if any(d[0] == i for d in entry[7]) else v for i, v in enumerate(entry[4])],
                          *entry[5:]) for entry in self._launches]  # fmt: skip
        return new

    def bound(self, keep: Sequence[torch.Tensor]) -> Replay:
        """A copy of this replay that launches with ``keep`` in place of the kept tensors it was recorded with
        (another metadata object's workspace: the same shapes, strides, dtypes and devices, else ValueError);
        descriptors on kept tensors are rebuilt on the new ones. The copy shares the compiled kernels."""
        keep = list(keep)
        if [(t.shape, t.stride(), t.dtype, t.device) for t in keep] != self._keep_specs:
            raise ValueError(
                "keep: expected tensors of shapes, strides, dtypes and devices "
                f"{[(tuple(s), st, d, str(dev)) for s, st, d, dev in self._keep_specs]}, got "
                f"{[(tuple(t.shape), t.stride(), t.dtype, str(t.device)) for t in keep]}"
            )
        new = copy.copy(self)
        new._keep = keep
        new._addr = [0] * self._first_keep + [t.data_ptr() for t in keep]
        launches = []
        for entry in self._launches:
            if not entry[7]:  # no descriptor on a kept tensor: the launch is shared as it is
                launches.append(entry)
                continue
            values = list(entry[4])
            for pos, cls, fields, i, (shape, stride, offset_elems) in entry[7]:
                t = keep[i - self._first_keep]
                values[pos] = cls(base=t.as_strided(shape, stride, t.storage_offset() + offset_elems), **fields)
            launches.append((*entry[:4], values, *entry[5:]))
        new._launches = launches
        return new

    def _resolve(self, t: torch.Tensor, kernel: str, arg: str) -> tuple[_Slot, int]:
        """The slot holding the tensor ``t``, and ``t``'s byte offset in it."""
        p = t.data_ptr()
        exact = [s for s in self._slots if s.ptr == p]
        if exact:
            if len({s.kind for s in exact}) > 1:
                raise NotReplayable(f"{kernel}: {arg} is at the address of tensors of different kinds")
            # inputs at one address (the same tensor passed twice) share it on every call of the signature too
            # (call_key notes which addresses are equal), so either gives the argument's new address
            return exact[0], 0
        inside = [s for s in self._slots if s.ptr <= p and p + span_bytes(t) <= s.ptr + s.span]
        if len(inside) != 1:
            why = "in no tensor the call names" if not inside else "inside more than one of the call's tensors"
            raise NotReplayable(f"{kernel}: {arg} lies {why}")
        return inside[0], p - inside[0].ptr

    def launch(self, inputs: Sequence[torch.Tensor | None], ptrs: Sequence[int], stream: int | None = None) -> None:
        """Launch the recorded kernels with ``inputs`` (the tensors, in the recorded order, None where the recorded
        call had None) at addresses ``ptrs`` (their ``data_ptr()``, None entries left out), on ``stream`` (default:
        the current stream of the recorded device)."""
        if self._keep is None:
            raise RuntimeError("an unbound replay: launch a copy from bound()")
        if len(inputs) != self._n_inputs or len(ptrs) != len(self._in_ids):
            raise ValueError(
                f"inputs, ptrs: expected {self._n_inputs} inputs and {len(self._in_ids)} addresses (the recorded "
                f"call's), got {len(inputs)} and {len(ptrs)}"
            )
        addr = list(self._addr)
        for i, p in zip(self._in_ids, ptrs, strict=True):
            addr[i] = p
        from triton.runtime import driver

        if stream is None:
            stream = current = driver.active.get_current_stream(self._device)
        else:
            current = driver.active.get_current_stream(self._device) if self._cuda_per_call else stream
        held: dict[int, torch.Tensor] = {}
        # scratch tensors and conversions are made on the launch stream: a conversion is then ordered before the
        # kernels that read it, and the caching allocator hands the scratch memory out again only behind them
        with _on_stream(stream, self._device) if stream != current else contextlib.nullcontext():
            for i, shape, stride, dtype, device in self._scratch:
                held[i] = torch.empty_strided(shape, stride, dtype=dtype, device=device)
                addr[i] = held[i].data_ptr()
            for i, src, dtype in self._converted:
                source = inputs[src]
                assert source is not None
                held[i] = source.to(dtype)
                addr[i] = held[i].data_ptr()
        for run, function, packed, (g0, g1, g2), template, pointers, descriptors, _ in self._launches:
            values = list(template)
            for pos, i, offset in pointers:
                values[pos] = addr[i] + offset
            for pos, cls, fields, i, (shape, stride, offset_elems) in descriptors:
                held_or_given = held[i] if i in held else inputs[i]
                assert held_or_given is not None
                view = held_or_given.as_strided(shape, stride, held_or_given.storage_offset() + offset_elems)
                values[pos] = cls(base=view, **fields)
            run(g0, g1, g2, stream, function, packed, None, None, None, *values)
        # the scratch tensors go back to the caching allocator now: stream-ordered on the launch stream


def _on_stream(stream: int, device: int | None) -> contextlib.AbstractContextManager[Any]:
    """torch's current stream set to the CUDA stream handle ``stream`` of ``device`` for the block."""
    return torch.cuda.stream(torch.cuda.ExternalStream(stream, device=device))


def _is_constexpr_value(v: Any) -> bool:
    """Triton dtypes and layouts passed as constexpr arguments (compared by value, kept as they are)."""
    return type(v).__module__.startswith("triton")


def _name(fn: Any) -> str:
    return str(getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", repr(fn)))


def _device_of(inputs: Sequence[torch.Tensor | None], keep: Sequence[torch.Tensor]) -> int:
    for t in (*inputs, *keep):
        if t is not None and t.is_cuda:
            return t.get_device()
    raise NotReplayable("no CUDA tensor among the call's tensors")


class ReplayCache:
    """Values (replays and what goes with them) by call signature, the least recently used dropped beyond ``size``;
    safe to use from several threads (an entry another thread dropped is simply missing)."""

    def __init__(self, size: int):
        self.size = size
        self._entries: collections.OrderedDict[tuple[Any, ...], Any] = collections.OrderedDict()

    def get(self, key: tuple[Any, ...]) -> Any:
        """The value kept for ``key`` (now the most recently used), or None."""
        value = self._entries.get(key)
        if value is not None:
            with contextlib.suppress(KeyError):  # another thread may have dropped it meanwhile
                self._entries.move_to_end(key)
        return value

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        """Keep ``value`` for ``key``, dropping the least recently used beyond ``size``."""
        self._entries[key] = value
        while len(self._entries) > self.size:
            try:
                self._entries.popitem(last=False)
            except KeyError:  # emptied by another thread
                break

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[Any]:
        return list(self._entries.values())

    def clear(self) -> None:
        self._entries.clear()


def replayed_run(
    cache: ReplayCache, kernel: Any, grid: tuple[int, ...], tensors: Sequence[torch.Tensor | None],
    scalars: Sequence[Any], **kwargs: Any,
) -> None:  # fmt: skip
    """``kernel[grid](**kwargs)`` for a launcher of one kernel whose tensor arguments are ``tensors`` (None where
    absent; the first a CUDA tensor for a replay) and whose other arguments follow from their dtypes, shapes and
    strides and ``scalars`` (the kernel's name first): the launch kept in ``cache`` for the call's signature where
    one was recorded, else Triton's (recorded for the next call of the signature)."""
    key = None
    if replayable(tensors, scalars):
        key, ptrs = call_key(tensors, scalars)
        kept = cache.get(key)
        if kept is not None and kept[0] is not None:
            kept[0].launch(tensors, ptrs)
            return
    with recording() as rec:
        run(kernel, grid, **kwargs)
    if key is not None and key not in cache:
        try:
            replay: Replay | None = Replay(rec, tensors, ())
        except NotReplayable:
            replay = None  # remembered: launches of this signature are not recorded again
        cache.put(key, (replay,))
