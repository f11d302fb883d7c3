"""Engine plugins: vLLM and SGLang call these in every process they start, so no ``sitecustomize.py`` is needed.

Both engines find general plugins through Python entry points, and wavemla declares one for each (pyproject.toml):

- ``vllm.general_plugins``: ``wavemla = wavemla.plugins:vllm_plugin``. vLLM calls every general plugin in each of
  its processes (the API server, the engine core, every worker) before it loads a model, unless ``VLLM_PLUGINS``
  lists the plugins to load and leaves ``wavemla`` out.
- ``sglang.srt.plugins``: ``wavemla = wavemla.plugins:sglang_plugin``. SGLang's ``load_plugins()`` calls them in
  its processes, filtered by ``SGLANG_PLUGINS`` where that is set.

Installed, the plugins do nothing until ``WAVEMLA_ENGINE_PATCH`` asks for it: ``decode`` patches the engine's
FlashMLA decode calls (:func:`wavemla.flash_mla.patch` over :data:`VLLM_MODULES` or :data:`SGLANG_MODULES`),
``decode+prefill`` its sparse prefill call as well (for GPUs where the engine's FlashMLA build has no sparse
prefill kernel). A module not imported yet is patched right after its first import, so the engine's attention code,
imported later, binds wavemla's calls. A module some other module imported from before the plugin ran is patched
too, but that other module keeps the names it bound; the plugin warns, naming each such binding once
(:func:`wavemla.flash_mla.stale_bindings`).

Which attention backend the engine selects on a GPU stays its own choice: the patch changes what its FlashMLA
backend runs, not whether it picks that backend, nor what that backend does before or instead of a FlashMLA call
(vLLM 0.34's DeepSeek-V4 layer does not reach its FlashMLA call on SM12x: README, "Use it from an engine").
"""

from __future__ import annotations

import importlib.metadata
import sys
import warnings
from collections.abc import Sequence

from wavemla import config, flash_mla

# vLLM's DeepSeek-V4, V4.1 and V3.2 layers import FlashMLA's calls from this module (vLLM 0.34).
VLLM_MODULES = ("vllm.v1.attention.ops.flashmla",)
# SGLang 0.5.23: its interface to its FlashMLA build (the DeepSeek-V4, V3.2 and dense MLA backends), and its
# DeepSeek-V4 SM120 entry.
SGLANG_MODULES = (
    "sglang.kernels.ops.attention.flash_mla_interface",
    "sglang.kernels.ops.attention.flash_mla_sm120",
)

# The entry-point groups the engines read, and the plugin wavemla declares in each.
ENTRY_POINTS = {
    "vllm.general_plugins": "wavemla.plugins:vllm_plugin",
    "sglang.srt.plugins": "wavemla.plugins:sglang_plugin",
}

__all__ = ["ENTRY_POINTS", "SGLANG_MODULES", "VLLM_MODULES", "registered_groups", "sglang_plugin", "vllm_plugin"]


def vllm_plugin() -> list[str]:
    """vLLM's general plugin: patch :data:`VLLM_MODULES` as ``WAVEMLA_ENGINE_PATCH`` says; returns the modules
    patched or waited for (none while the knob is ``off``). Calling it again is a no-op."""
    return _patch("vLLM", VLLM_MODULES)


def sglang_plugin() -> list[str]:
    """SGLang's general plugin: patch :data:`SGLANG_MODULES` as ``WAVEMLA_ENGINE_PATCH`` says; returns the modules
    patched or waited for (none while the knob is ``off``). Calling it again is a no-op."""
    return _patch("SGLang", SGLANG_MODULES)


def registered_groups() -> list[str]:
    """The groups of :data:`ENTRY_POINTS` that the installed wavemla's metadata declares (what the engines' plugin
    loaders find), sorted; empty where wavemla runs from a checkout that is not installed."""
    try:
        declared = importlib.metadata.distribution("wavemla").entry_points
    except importlib.metadata.PackageNotFoundError:
        return []
    return sorted({ep.group for ep in declared if ENTRY_POINTS.get(ep.group) == ep.value and ep.name == "wavemla"})


def _patch(engine: str, modules: Sequence[str]) -> list[str]:
    mode = config.get("WAVEMLA_ENGINE_PATCH")
    if mode == "off":
        return []
    names = flash_mla.patch(modules, prefill=mode == "decode+prefill")
    stale = [name for name in flash_mla.stale_bindings(names) if _first_warning(name)]
    if stale:
        warnings.warn(
            f"wavemla's {engine} plugin ran after these names were imported from the modules it patches, so they "
            f"still call the engine's own FlashMLA: {', '.join(stale)}",
            stacklevel=2,
        )
    return names


# The stale bindings a plugin has warned about, with the object each held (a binding made again is named again).
_WARNED: set[tuple[str, int]] = set()


def _first_warning(binding: str) -> bool:
    """Whether ``binding`` (``module.attr``) was not warned about yet with the object it holds now; notes it."""
    module, _, attr = binding.rpartition(".")
    key = (binding, id(getattr(sys.modules.get(module), attr, None)))
    if key in _WARNED:
        return False
    _WARNED.add(key)
    return True
