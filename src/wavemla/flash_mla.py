"""FlashMLA's Python names, for engines that import FlashMLA by module name.

An engine whose attention backend says ``from flash_mla import flash_mla_with_kvcache, get_mla_metadata`` runs
wavemla's decode once this module stands in for ``flash_mla``::

    import wavemla.flash_mla
    wavemla.flash_mla.install()   # before the engine imports flash_mla: in a launcher script or a site hook

:func:`install` registers this module in ``sys.modules`` under FlashMLA's package name and its interface module's
(``flash_mla``, ``flash_mla.flash_mla_interface``), or under the names given: an engine that imports FlashMLA from
its own kernel package names that module instead (``install(["sgl_kernel.flash_mla"])``). Only later imports see
it; a name some module has already imported is refused unless ``replace=True``, since the engine's references to
the old module would stay with the old module.

What stands in: :func:`flash_mla_with_kvcache` (sparse decode with ``indices``, DeepSeek-V4's or, with a 576-wide q,
V3.2's; paged dense decode without; it also
takes vLLM's ``out=`` and the keywords of SGLang's FlashMLA build), :func:`get_mla_metadata` and
``FlashMLASchedMeta`` (:class:`wavemla.MLAMetadata`), SGLang's SM120 entry :func:`flash_mla_with_kvcache_sm120`,
vLLM's FP8 dense decode :func:`flash_mla_with_kvcache_fp8` and its :func:`get_mla_metadata_dense_fp8`, and the
sparse prefill :func:`flash_mla_sparse_fwd` (DeepSeek-V4's and V3.2's). FlashMLA's dense prefill and
backward calls are not here: importing one of them fails with Python's own ``ImportError``, naming it.

An engine module that holds FlashMLA's decode calls beside others (prefill, capability checks: vLLM's
``vllm.v1.attention.ops.flashmla``, SGLang's ``sglang.kernels.ops.attention.flash_mla_interface``) is patched
instead: :func:`patch` replaces only :data:`PATCHED` in it, right after the module has run (an import hook), or at
once if it already has, and leaves its other names as they are::

    wavemla.flash_mla.patch(["vllm.v1.attention.ops.flashmla"])

``patch(names, prefill=True)`` also replaces the module's ``flash_mla_sparse_fwd``: for GPUs where the engine's
FlashMLA build has no sparse prefill kernel (FlashMLA's runs on sm_90 and sm_100 only), so that a DeepSeek-V4 or
V3.2 layer's prefill runs too.

SGLang's DeepSeek-V4 backend (0.5.23) calls FlashMLA through ``sglang.kernels.ops.attention.flash_mla_interface``,
with that build's keywords (``use_legacy``, which :func:`wavemla.flash_mla_with_kvcache` takes), and on SM120 GPUs
through ``flash_mla_with_kvcache_sm120`` in ``sglang.kernels.ops.attention.flash_mla_sm120``, which
:func:`flash_mla_with_kvcache_sm120` stands in for::

    wavemla.flash_mla.patch(["sglang.kernels.ops.attention.flash_mla_interface",
                             "sglang.kernels.ops.attention.flash_mla_sm120"])

Either way, modules that bound the names before (``from X import flash_mla_with_kvcache`` run earlier) keep the
old ones: install or patch before the engine imports its attention code (:func:`stale_bindings` names those that
kept them). Engines that start workers with ``spawn`` need it in every process: vLLM and SGLang call wavemla's
plugins in each (:mod:`wavemla.plugins`, set ``WAVEMLA_ENGINE_PATCH``); for others a ``sitecustomize.py`` on
``PYTHONPATH`` does it (README). Which backend an engine
selects on a given GPU stays the engine's choice; the stand-in changes what its FlashMLA backend runs, not whether
the engine picks that backend. It follows FlashMLA's current metadata API (an object planned by the first call),
except in modules that keep FlashMLA's legacy one (:data:`LEGACY_METADATA_MODULES`: SGLang's interface and
``sgl_kernel.flash_mla``, whose callers in SGLang's dense and DeepSeek-V3.2 backends slice the schedule tensors of
``get_mla_metadata(cache_seqlens, ...)``, copy them into CUDA-graph buffers and pass them back with ``num_splits``):
there :func:`patch` puts
:func:`legacy_get_mla_metadata`, which returns tensors of FlashMLA's shapes, and the decode call plans on its own
whatever schedule tensors it is given.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any, cast

import torch

from wavemla.api import _FP8_DTYPES, MLAMetadata, flash_mla_with_kvcache, get_mla_metadata, sparse_mla_prefill

FlashMLASchedMeta = MLAMetadata

# FlashMLA's package and the module that defines its calls (flash_mla/flash_mla_interface.py).
DEFAULT_NAMES = ("flash_mla", "flash_mla.flash_mla_interface")

# The names patch() replaces in an engine's module (those of them it defines).
PATCHED = (
    "flash_mla_with_kvcache",
    "get_mla_metadata",
    "FlashMLASchedMeta",
    "flash_mla_with_kvcache_sm120",
    "flash_mla_with_kvcache_fp8",
    "get_mla_metadata_dense_fp8",
)
# What patch(..., prefill=True) replaces as well.
PATCHED_PREFILL = ("flash_mla_sparse_fwd",)
# The decode calls among them: a module to patch must define one.
_DECODE_CALLS = (
    "flash_mla_with_kvcache",
    "get_mla_metadata",
    "flash_mla_with_kvcache_sm120",
    "flash_mla_with_kvcache_fp8",
    "get_mla_metadata_dense_fp8",
)
# Engine modules whose get_mla_metadata follows FlashMLA's legacy API (schedule tensors for a call with
# cache_seqlens): SGLang's interface to its FlashMLA build and sgl-kernel's FlashMLA module, which SGLang's DeepSeek-V4
# backend imported before that interface; SGLang's dense and DeepSeek-V3.2 backends slice those tensors and copy them
# into CUDA-graph buffers. patch() gives them legacy_get_mla_metadata.
LEGACY_METADATA_MODULES = ("sglang.kernels.ops.attention.flash_mla_interface", "sgl_kernel.flash_mla")


def legacy_get_mla_metadata(
    cache_seqlens: torch.Tensor | None = None,
    num_q_tokens_per_head_k: int | None = None,
    num_heads_k: int | None = None,
    num_heads_q: int | None = None,
    is_fp8_kvcache: bool = False,
    topk: int | None = None,
) -> tuple[MLAMetadata, None] | tuple[torch.Tensor, torch.Tensor]:
    """``get_mla_metadata`` as SGLang's interface to its FlashMLA build defines it: without ``cache_seqlens`` an
    empty metadata object (:func:`wavemla.get_mla_metadata`); with it, FlashMLA's legacy schedule tensors on
    ``cache_seqlens``' device: ``[parts, 8]`` int32, ``parts`` = SMs // ``num_heads_k`` //
    ⌈``num_q_tokens_per_head_k`` / 64⌉ (at least 1) as FlashMLA counts them, and ``num_splits``
    ``[len(cache_seqlens) + 1]`` int32. The engine slices them, copies them into its CUDA-graph buffers and hands them
    to :func:`wavemla.flash_mla_with_kvcache`, which plans the call itself: they hold zeros, not a schedule
    (``num_heads_q``, ``is_fp8_kvcache`` and ``topk``, which shape FlashMLA's schedule, are not needed)."""
    if cache_seqlens is None:
        return get_mla_metadata()
    if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.dtype != torch.int32 or cache_seqlens.dim() != 1:
        got = type(cache_seqlens).__name__
        if isinstance(cache_seqlens, torch.Tensor):
            got = f"{cache_seqlens.dtype} {list(cache_seqlens.shape)}"
        raise ValueError(f"cache_seqlens: expected a [b] int32 tensor, got {got}")
    counts = {"num_q_tokens_per_head_k": num_q_tokens_per_head_k, "num_heads_k": num_heads_k}
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: expected a positive int with cache_seqlens, got {value!r}")
    from wavemla.api import _device_spec

    device = cache_seqlens.device
    q_tokens, heads_k = cast(int, num_q_tokens_per_head_k), cast(int, num_heads_k)  # (positive ints: checked)
    parts = max(_device_spec(device).num_sms // heads_k // -(-q_tokens // 64), 1)
    schedule = torch.zeros((parts, 8), dtype=torch.int32, device=device)
    return schedule, torch.zeros(cache_seqlens.shape[0] + 1, dtype=torch.int32, device=device)


def get_mla_metadata_dense_fp8(
    cache_seqlens: torch.Tensor, num_q_tokens_per_head_k: int, num_heads_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's schedule call for FlashMLA's FP8 dense decode (``vllm.v1.attention.ops.flashmla``): FlashMLA's legacy
    schedule tensors, as :func:`legacy_get_mla_metadata` makes them (zeros of FlashMLA's shapes; the decode call
    plans on its own)."""
    if cache_seqlens is None:
        raise ValueError("cache_seqlens: expected a [b] int32 tensor, got None")
    schedule, splits = legacy_get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k)
    assert isinstance(schedule, torch.Tensor) and isinstance(splits, torch.Tensor)  # (tensors: cache_seqlens given)
    return schedule, splits


def flash_mla_with_kvcache_fp8(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    head_dim_v: int,
    tile_scheduler_metadata: torch.Tensor | MLAMetadata | None,
    num_splits: torch.Tensor | None,
    softmax_scale: float | None = None,
    causal: bool = False,
    descale_q: torch.Tensor | None = None,
    descale_k: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's call of FlashMLA's FP8 dense decode (``vllm.v1.attention.ops.flashmla``, made for an fp8 KV cache of
    dense MLA): q ``[b, s_q, h_q, 576]`` float8_e4m3fn (or bf16/fp16) times ``descale_q``, a per-tensor FP8 cache
    ``[blocks, page, 1, 576]`` times ``descale_k``, the schedule tensors of :func:`get_mla_metadata_dense_fp8` (or
    FlashMLA's). Returns ``(out [b, s_q, h_q, 512] bf16 for an FP8 q, lse [b, h_q, s_q])``, as
    :func:`wavemla.flash_mla_with_kvcache`'s dense decode."""
    fp8 = isinstance(k_cache, torch.Tensor) and k_cache.dtype in _FP8_DTYPES
    return flash_mla_with_kvcache(
        q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits,
        softmax_scale=softmax_scale, causal=causal, is_fp8_kvcache=fp8, descale_q=descale_q, descale_k=descale_k,
    )  # fmt: skip


def flash_mla_with_kvcache_sm120(
    *,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    head_dim_v: int,
    indices: torch.Tensor,
    softmax_scale: float | None = None,
    topk_length: torch.Tensor | None = None,
    attn_sink: torch.Tensor | None = None,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices_in_kvcache: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SGLang's sparse decode entry on SM120 GPUs (``sglang.kernels.ops.attention.flash_mla_sm120``): FlashMLA's
    sparse call made with keywords only, without metadata, block table or cache-format flag (the cache's dtype
    says FP8). Returns ``(out [b, s_q, h_q, 512], lse [b, h_q, s_q])``, as :func:`wavemla.flash_mla_with_kvcache`."""
    fp8 = isinstance(k_cache, torch.Tensor) and k_cache.dtype in _FP8_DTYPES
    return flash_mla_with_kvcache(
        q, k_cache, None, None, head_dim_v, None, softmax_scale=softmax_scale, is_fp8_kvcache=fp8, indices=indices,
        attn_sink=attn_sink, extra_k_cache=extra_k_cache, extra_indices_in_kvcache=extra_indices_in_kvcache,
        topk_length=topk_length, extra_topk_length=extra_topk_length,
    )  # fmt: skip


def flash_mla_sparse_fwd(
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
    """FlashMLA's sparse prefill call (``q [s_q, h_q, d_qk]``, ``kv [s_kv, 1, d_qk]``, ``indices [s_q, 1, topk]``),
    run by :func:`wavemla.sparse_mla_prefill`; ``indexer_topk`` must be 0 (its default: no ``lse_indexer``);
    ``out=`` is vLLM's output buffer. Returns ``(out, max_logits, lse)``."""
    return sparse_mla_prefill(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, indexer_topk, out=out)


__all__ = [
    "DEFAULT_NAMES",
    "PATCHED",
    "PATCHED_PREFILL",
    "FlashMLASchedMeta",
    "flash_mla_sparse_fwd",
    "flash_mla_with_kvcache",
    "flash_mla_with_kvcache_fp8",
    "flash_mla_with_kvcache_sm120",
    "get_mla_metadata",
    "get_mla_metadata_dense_fp8",
    "install",
    "installed_names",
    "patch",
    "patched_names",
    "resolves_to",
    "stale_bindings",
    "uninstall",
    "unpatch",
]


def _module_names(names: Sequence[str]) -> list[str]:
    if isinstance(names, str):
        raise ValueError(f"names: a sequence of module names, got the string {names!r}")
    out = []
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"names: {name!r} is not a dotted module name")
        out.append(name)
    if not out:
        raise ValueError("names: empty")
    return out


def install(names: Sequence[str] = DEFAULT_NAMES, *, replace: bool = False) -> list[str]:
    """Register this module under each of ``names`` in ``sys.modules``; returns the names.

    A name already bound to another module raises ``ValueError`` (naming it and that module's file) unless
    ``replace`` is True; so does a name :func:`patch` has patched or waits for, until :func:`unpatch`. For a dotted
    name whose parent is this module too (``flash_mla.flash_mla_interface``), the child is also an attribute of the
    parent, so ``import flash_mla.flash_mla_interface`` followed by attribute access works as with FlashMLA.
    Installing twice is a no-op.
    """
    wanted = _module_names(names)
    me = sys.modules[__name__]
    for name in wanted:
        if name.split(".")[0] == "wavemla":
            raise ValueError(f"names: {name!r} is wavemla's own (the stand-in takes other packages' names)")
        if name in _ORIGINALS or name in _PENDING:  # unpatch() would write the engine's calls into the stand-in
            raise ValueError(f"names: {name!r} is patched by wavemla.flash_mla.patch (unpatch it first)")
    if not replace:
        for name in wanted:
            current = sys.modules.get(name)
            if current is not None and current is not me:
                where = getattr(current, "__file__", None) or repr(current)
                raise ValueError(
                    f"names: {name!r} is already imported ({where}); install before the engine imports it, "
                    "or pass replace=True (modules that imported the old one keep it)"
                )
    for name in wanted:
        sys.modules[name] = me
    for name in wanted:
        parent, _, child = name.rpartition(".")
        if parent and sys.modules.get(parent) is me and getattr(me, child, me) is me:
            setattr(me, child, me)  # never over one of this module's own names
    return wanted


def installed_names() -> list[str]:
    """The ``sys.modules`` names this module stands under (its own excluded), sorted."""
    me = sys.modules[__name__]
    return sorted(name for name, module in list(sys.modules.items()) if module is me and name != __name__)


def uninstall(names: Sequence[str] | None = None) -> list[str]:
    """Remove this module from ``sys.modules`` under ``names`` (default: every name :func:`install` gave it);
    names bound to other modules are left alone. Returns the names removed."""
    me = sys.modules[__name__]
    wanted = installed_names() if names is None else _module_names(names)
    removed = [name for name in wanted if name != __name__ and sys.modules.get(name) is me]
    for name in removed:
        del sys.modules[name]
    # a child attribute stays while another installed name reaches it through its installed parent
    kept = {name.rpartition(".")[2] for name in installed_names() if sys.modules.get(name.rpartition(".")[0]) is me}
    for name in removed:
        parent, _, child = name.rpartition(".")
        if parent and child not in kept and getattr(me, child, None) is me:
            delattr(me, child)
    return removed


def resolves_to(name: str = "flash_mla") -> str:
    """What ``import <name>`` gives in this process, in words, without importing a real FlashMLA (its CUDA
    extension): the stand-in, a module already imported, one that would be imported, or nothing. A dotted name's
    parent package is imported to look it up."""
    import importlib.util

    (name,) = _module_names([name])
    current = sys.modules.get(name)
    if current is not None:
        if current is sys.modules[__name__]:
            return f"wavemla's stand-in ({__name__})"
        return f"another module, already imported ({getattr(current, '__file__', None) or current!r})"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:  # a parent package that is missing or fails to import
        return f"not importable ({type(exc).__name__}: {exc})"
    if spec is None:
        return "not importable"
    return f"another module ({spec.origin}); wavemla.flash_mla.install() stands in for it"


# patch(): modules to patch once imported, and the names each patched module held before.
_PENDING: set[str] = set()
_ORIGINALS: dict[str, dict[str, Any]] = {}
_PREFILL: set[str] = set()  # modules whose flash_mla_sparse_fwd is replaced too


def _check_defines(module: types.ModuleType, prefill: bool) -> None:
    """A module to patch defines one of the calls to replace (ImportError naming it otherwise)."""
    calls = _DECODE_CALLS + PATCHED_PREFILL if prefill else _DECODE_CALLS
    if not any(call in module.__dict__ for call in calls):
        raise ImportError(
            f"wavemla.flash_mla.patch: module {module.__name__!r} defines none of {', '.join(calls)}",
            name=module.__name__,
        )


def _patch_module(module: types.ModuleType) -> None:
    name = module.__name__
    _check_defines(module, name in _PREFILL)
    names = PATCHED + PATCHED_PREFILL if name in _PREFILL else PATCHED
    held = {attr: module.__dict__[attr] for attr in names if attr in module.__dict__}
    mine = dict(sys.modules[__name__].__dict__)
    if name in LEGACY_METADATA_MODULES:
        mine["get_mla_metadata"] = legacy_get_mla_metadata
    originals = _ORIGINALS.setdefault(name, {})
    for attr, value in held.items():  # a later patch with prefill=True adds the prefill call's original
        if value is not mine[attr]:
            originals.setdefault(attr, value)
    for attr in held:
        setattr(module, attr, mine[attr])
    _PENDING.discard(name)


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then :func:`_patch_module` once the module has run."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        if module.__name__ in _PENDING:
            _patch_module(module)

    def __getattr__(self, attr: str) -> Any:  # get_source, is_package, resource readers: the module's own loader's
        if attr == "_loader":  # not set yet (a copy being made): no recursion
            raise AttributeError(attr)
        return getattr(self._loader, attr)


class _PatchFinder(importlib.abc.MetaPathFinder):
    """Finds a module :func:`patch` waits for with the other finders and gives its spec a patching loader."""

    def __init__(self) -> None:
        self._busy: set[str] = set()  # names being looked up: a finder that looks the name up again gets None here

    def find_spec(self, fullname: str, path: Any, target: types.ModuleType | None = None) -> Any:
        if fullname not in _PENDING or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _PatchingLoader(spec.loader)
                    return spec
            return None
        finally:
            self._busy.discard(fullname)


_FINDER = _PatchFinder()


def patch(names: Sequence[str], *, prefill: bool = False) -> list[str]:
    """Replace FlashMLA's decode calls (:data:`PATCHED`, those the module defines) inside each named engine module,
    leaving its other names as they are; returns the names. ``prefill=True`` replaces its sparse prefill call
    (:data:`PATCHED_PREFILL`) too.

    A module already imported is patched at once; any other, right after it has run on its first import (an import
    hook on ``sys.meta_path``). A module that defines none of the calls to replace raises ``ImportError`` naming it
    (at once, before any module is patched, or at its import). Patching twice is a no-op.
    """
    if not isinstance(prefill, bool):
        raise ValueError(f"prefill: expected a bool, got {prefill!r}")
    wanted = _module_names(names)
    for name in wanted:
        if name.split(".")[0] == "wavemla":
            raise ValueError(f"names: {name!r} is wavemla's own (the stand-in takes other packages' names)")
        if sys.modules.get(name) is sys.modules[__name__]:
            raise ValueError(f"names: {name!r} is installed as the stand-in itself (uninstall it first)")
    for name in wanted:  # all or nothing: an imported module without the calls is refused before any is patched
        module = sys.modules.get(name)
        if module is not None:
            _check_defines(module, prefill or name in _PREFILL)
    if prefill:
        _PREFILL.update(wanted)
    for name in wanted:
        module = sys.modules.get(name)
        if module is not None:
            _patch_module(module)
        elif name not in _ORIGINALS:
            _PENDING.add(name)
    if _PENDING and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return wanted


def stale_bindings(names: Sequence[str] | None = None) -> list[str]:
    """Names (``module.attr``, sorted) that other imported modules still bind to what :func:`patch` replaced in
    ``names`` (default: every module patched): modules that imported the engine's calls before the patch ran, and so
    keep calling them. The module that defines a call (its ``__module__``, as vLLM's FlashMLA interface behind its
    ops module) is not counted. Empty where every module imported the calls after the patch."""
    wanted = patched_names() if names is None else _module_names(names)
    replaced = {id(value) for name in wanted for value in _ORIGINALS.get(name, {}).values()}  # alive: held there
    if not replaced:
        return []
    found = []
    for module_name, module in list(sys.modules.items()):
        if module_name in wanted or module_name == __name__:
            continue
        try:  # sys.modules may hold any object, lazy modules among them
            namespace = vars(module)
        except Exception:
            continue
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if id(value) in replaced and getattr(value, "__module__", None) != module_name:
                found.append(f"{module_name}.{attr}")
    return sorted(found)


def patched_names() -> list[str]:
    """Modules :func:`patch` has patched or waits for, sorted."""
    return sorted(set(_ORIGINALS) | _PENDING)


def unpatch(names: Sequence[str] | None = None) -> list[str]:
    """Put back what :func:`patch` replaced in ``names`` (default: all) and stop waiting for those not imported yet;
    returns the names. Modules that bound the stand-in's calls meanwhile keep them."""
    wanted = patched_names() if names is None else _module_names(names)
    done = []
    for name in wanted:
        _PREFILL.discard(name)
        if name in _PENDING:
            _PENDING.discard(name)
            done.append(name)
        if name in _ORIGINALS:
            module = sys.modules.get(name)
            for attr, value in _ORIGINALS.pop(name).items():
                if module is not None:
                    setattr(module, attr, value)
            if name not in done:
                done.append(name)
    if not _PENDING and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    return done
