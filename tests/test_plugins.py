"""`wavemla.plugins`: the vLLM and SGLang entry points patch the engines' FlashMLA modules when the knob asks."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import wavemla
import wavemla.flash_mla as shim
from wavemla import config, plugins

ROOT = Path(__file__).resolve().parents[1]
ENGINE_PACKAGES = ("vllm", "sglang")

# Stand-ins for the engines' modules: the FlashMLA calls they define, and an attention module that binds them.
OPS_MODULE = """
class FlashMLASchedMeta:
    pass


def get_mla_metadata(*args, **kwargs):
    return FlashMLASchedMeta(), None


def flash_mla_with_kvcache(*args, **kwargs):
    raise RuntimeError("the engine's own FlashMLA")


def flash_mla_sparse_fwd(*args, **kwargs):
    return "engine prefill"
"""
SM120_MODULE = """
def flash_mla_with_kvcache_sm120(**kwargs):
    raise RuntimeError("the engine's own SM120 decode")
"""
VLLM_ATTENTION = "from vllm.v1.attention.ops.flashmla import flash_mla_sparse_fwd, flash_mla_with_kvcache\n"
SGLANG_ATTENTION = (
    "from sglang.kernels.ops.attention.flash_mla_interface import flash_mla_with_kvcache\n"
    "from sglang.kernels.ops.attention.flash_mla_sm120 import flash_mla_with_kvcache_sm120\n"
)


def _write_package(root: Path, dotted: str, source: str) -> None:
    parts = dotted.split(".")
    folder = root.joinpath(*parts[:-1])
    folder.mkdir(parents=True, exist_ok=True)
    for depth in range(1, len(parts)):
        init = root.joinpath(*parts[:depth], "__init__.py")
        if not init.exists():
            init.write_text("")
    (folder / f"{parts[-1]}.py").write_text(source)


@pytest.fixture
def engines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Importable stand-ins for vLLM's and SGLang's FlashMLA modules (and an attention module each), first on the
    path; nothing patched before or after."""
    _write_package(tmp_path, plugins.VLLM_MODULES[0], OPS_MODULE)
    _write_package(tmp_path, "vllm.attention_layer", VLLM_ATTENTION)
    _write_package(tmp_path, plugins.SGLANG_MODULES[0], OPS_MODULE)
    _write_package(tmp_path, plugins.SGLANG_MODULES[1], SM120_MODULE)
    _write_package(tmp_path, "sglang.attention_layer", SGLANG_ATTENTION)
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in ENGINE_PACKAGES}
    for name in saved:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(tmp_path))
    shim.unpatch()
    yield tmp_path
    shim.unpatch()
    for name in [n for n in sys.modules if n.split(".")[0] in ENGINE_PACKAGES]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_off_by_default_patches_nothing(engines: Path) -> None:
    with config.override(WAVEMLA_ENGINE_PATCH=None):  # unset: the default
        assert config.get("WAVEMLA_ENGINE_PATCH") == "off"
        assert plugins.vllm_plugin() == [] and plugins.sglang_plugin() == []
    assert shim.patched_names() == []
    from vllm import attention_layer

    with pytest.raises(RuntimeError, match="the engine's own FlashMLA"):
        attention_layer.flash_mla_with_kvcache()


def test_vllm_decode_patches_the_decode_calls_only(engines: Path) -> None:
    with config.override(WAVEMLA_ENGINE_PATCH="decode"):
        assert plugins.vllm_plugin() == list(plugins.VLLM_MODULES)
        assert plugins.vllm_plugin() == list(plugins.VLLM_MODULES)  # again: a no-op
    from vllm import attention_layer
    from vllm.v1.attention.ops import flashmla

    assert attention_layer.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert flashmla.get_mla_metadata is wavemla.get_mla_metadata and flashmla.FlashMLASchedMeta is wavemla.MLAMetadata
    assert attention_layer.flash_mla_sparse_fwd() == "engine prefill"
    assert shim.stale_bindings() == []


def test_vllm_decode_and_prefill(engines: Path) -> None:
    with config.override(WAVEMLA_ENGINE_PATCH="decode+prefill"):
        plugins.vllm_plugin()
    from vllm import attention_layer

    assert attention_layer.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert attention_layer.flash_mla_sparse_fwd is shim.flash_mla_sparse_fwd


def test_sglang_patches_its_interface_and_its_sm120_entry(engines: Path) -> None:
    with config.override(WAVEMLA_ENGINE_PATCH="decode"):
        assert plugins.sglang_plugin() == list(plugins.SGLANG_MODULES)
    from sglang import attention_layer
    from sglang.kernels.ops.attention import flash_mla_interface

    assert attention_layer.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert attention_layer.flash_mla_with_kvcache_sm120 is shim.flash_mla_with_kvcache_sm120
    assert flash_mla_interface.flash_mla_sparse_fwd() == "engine prefill"
    assert "vllm.v1.attention.ops.flashmla" not in shim.patched_names()


def test_sglang_legacy_schedule_callers_run_wavemla(engines: Path) -> None:
    """SGLang's dense FlashMLA backend and its DeepSeek-V3.2 (DSA, ``flashmla_kv``) decode use FlashMLA's legacy
    metadata: ``get_mla_metadata(cache_seqlens, ...)`` tensors, sliced and copied into CUDA-graph buffers, then passed
    with ``num_splits`` (and ``kv_format="V32"``). Through the patched interface both flows run wavemla's decodes with
    the native calls' bits; vLLM's module keeps FlashMLA's current get_mla_metadata (an object for any arguments)."""
    import torch

    from tests.conftest import DEVICE
    from wavemla.reference.fp8_v32 import quantize_v32
    from wavemla.testing import make_dense_decode_inputs

    with config.override(WAVEMLA_ENGINE_PATCH="decode"):
        plugins.sglang_plugin()
        plugins.vllm_plugin()
    from sglang.kernels.ops.attention import flash_mla_interface as sgl
    from vllm.v1.attention.ops import flashmla

    assert sgl.get_mla_metadata is shim.legacy_get_mla_metadata
    assert flashmla.get_mla_metadata is wavemla.get_mla_metadata
    assert isinstance(flashmla.get_mla_metadata(torch.ones(3, dtype=torch.int32), 16, 1)[0], wavemla.MLAMetadata)
    assert isinstance(sgl.get_mla_metadata()[0], wavemla.MLAMetadata)
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float16
    sms = 132 if DEVICE != "cuda" else torch.cuda.get_device_properties(0).multi_processor_count

    # flashmla_backend.py: buffers for 8 requests, a step of 3, causal s_q = 2
    x = make_dense_decode_inputs(lengths=[70, 0, 130], s_q=2, h_q=16, page=64, dtype=dtype, device=DEVICE)
    graph_schedule = torch.empty((sms, 8), dtype=torch.int32, device=DEVICE)
    graph_splits = torch.empty(8 + 1, dtype=torch.int32, device=DEVICE)
    schedule, splits = sgl.get_mla_metadata(x["cache_seqlens"], 2 * 16, 1, is_fp8_kvcache=False)
    assert schedule.shape[0] <= sms and schedule.dtype == splits.dtype == torch.int32 and splits.shape == (4,)
    graph_schedule[: schedule.shape[0]].copy_(schedule)
    graph_splits[:4].copy_(splits)
    out, lse = sgl.flash_mla_with_kvcache(
        q=x["q"], k_cache=x["k_cache"], block_table=x["block_table"], cache_seqlens=x["cache_seqlens"],
        head_dim_v=512, tile_scheduler_metadata=graph_schedule[: schedule.shape[0]], num_splits=graph_splits[:4],
        softmax_scale=None, causal=True,
    )  # fmt: skip
    want, want_lse = wavemla.dense_mla_decode(**x, causal=True)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)

    # dsa_backend.py: a schedule planned for the graph's 6 tokens, sliced for this step's 2, V3.2 FP8 cache, page 64
    gen = torch.Generator().manual_seed(1)
    cache = quantize_v32(torch.randn(4, 64, 1, 576, generator=gen)).to(DEVICE)
    idx = torch.randint(-1, 256, (2, 1, 32), generator=gen, dtype=torch.int32).to(DEVICE)
    q = (torch.randn(2, 1, 16, 576, generator=gen) * 0.5).to(dtype).to(DEVICE)
    seqlens = torch.full((2,), 200, dtype=torch.int32, device=DEVICE)
    kwargs = dict(num_q_tokens_per_head_k=16, num_heads_k=1, num_heads_q=16, is_fp8_kvcache=True, topk=32)
    graph_schedule, graph_splits = sgl.get_mla_metadata(torch.ones(6, dtype=torch.int32, device=DEVICE), **kwargs)
    step_schedule, step_splits = sgl.get_mla_metadata(cache_seqlens=seqlens, **kwargs)
    graph_schedule.copy_(step_schedule)
    graph_splits[:3].copy_(step_splits)
    out, _ = sgl.flash_mla_with_kvcache(
        q=q, k_cache=cache, cache_seqlens=seqlens, head_dim_v=512, tile_scheduler_metadata=graph_schedule,
        num_splits=graph_splits[:3], softmax_scale=0.07, indices=idx, block_table=torch.empty((2, 0),
        dtype=torch.int32, device=DEVICE), is_fp8_kvcache=True, kv_format="V32",
    )  # fmt: skip
    assert torch.equal(out, wavemla.sparse_mla_decode(q, cache, idx, softmax_scale=0.07)[0])


def test_a_late_plugin_warns_naming_the_stale_bindings(engines: Path) -> None:
    from vllm import attention_layer  # the engine's attention code imported before the plugin ran

    with config.override(WAVEMLA_ENGINE_PATCH="decode"), pytest.warns(UserWarning) as caught:
        plugins.vllm_plugin()
    message = str(caught[0].message)
    assert "vLLM plugin" in message and "vllm.attention_layer.flash_mla_with_kvcache" in message
    assert "flash_mla_sparse_fwd" not in message  # not replaced without prefill
    assert shim.stale_bindings() == ["vllm.attention_layer.flash_mla_with_kvcache"]
    with pytest.raises(RuntimeError, match="the engine's own FlashMLA"):
        attention_layer.flash_mla_with_kvcache()
    from vllm.v1.attention.ops import flashmla

    assert flashmla.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache  # the module itself is patched


def test_a_second_call_does_not_warn_again(engines: Path) -> None:
    """Calling a plugin again is a no-op: the stale bindings it warned about are not named a second time; one made
    since the first call is."""
    from vllm import attention_layer  # noqa: F401  (bound before the plugin ran)

    with config.override(WAVEMLA_ENGINE_PATCH="decode"):
        with pytest.warns(UserWarning, match="vllm.attention_layer.flash_mla_with_kvcache"):
            plugins.vllm_plugin()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plugins.vllm_plugin()
        import vllm

        vllm.late = shim._ORIGINALS[plugins.VLLM_MODULES[0]]["flash_mla_with_kvcache"]  # type: ignore[attr-defined]
        with pytest.warns(UserWarning) as caught:
            plugins.vllm_plugin()
    assert str(caught[0].message).endswith(": vllm.late")


def test_the_module_defining_the_calls_is_not_a_stale_binding(engines: Path) -> None:
    """vLLM's ops module takes FlashMLA's calls from the module that defines them: imported before the plugin ran,
    that module keeps its own definitions without a warning; a module that imported them from it is named."""
    _write_package(engines, "vllm.third_party.flashmla_interface", OPS_MODULE)
    (engines / "vllm" / "v1" / "attention" / "ops" / "flashmla.py").write_text(
        "from vllm.third_party.flashmla_interface import FlashMLASchedMeta, flash_mla_with_kvcache, get_mla_metadata\n"
    )
    from vllm.v1.attention.ops import flashmla

    with config.override(WAVEMLA_ENGINE_PATCH="decode"), warnings.catch_warnings():
        warnings.simplefilter("error")
        plugins.vllm_plugin()
    assert flashmla.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache and shim.stale_bindings() == []
    import vllm.third_party  # a module that bound the engine's call from the defining module

    vllm.third_party.bound = sys.modules["vllm.third_party.flashmla_interface"].flash_mla_with_kvcache  # type: ignore[attr-defined]
    assert shim.stale_bindings() == ["vllm.third_party.bound"]


def test_no_warning_when_nothing_was_bound_before(engines: Path) -> None:
    from vllm.v1.attention.ops import flashmla  # imported, but nothing imported from it yet

    with config.override(WAVEMLA_ENGINE_PATCH="decode"), warnings.catch_warnings():
        warnings.simplefilter("error")
        plugins.vllm_plugin()
    assert flashmla.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache


def test_a_bad_knob_value_names_the_knob(engines: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"WAVEMLA_ENGINE_PATCH": "prefill"}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    try:
        with pytest.raises(config.KnobError, match=r"WAVEMLA_ENGINE_PATCH='prefill'.*decode\+prefill"):
            plugins.sglang_plugin()
    finally:
        monkeypatch.undo()
        config.reload()
    assert shim.patched_names() == []


def _declared_entry_points() -> dict[str, dict[str, str]]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"]["entry-points"])


def test_pyproject_declares_both_plugins() -> None:
    declared = _declared_entry_points()
    assert declared == {group: {"wavemla": value} for group, value in plugins.ENTRY_POINTS.items()}
    assert declared["vllm.general_plugins"] == {"wavemla": "wavemla.plugins:vllm_plugin"}
    assert declared["sglang.srt.plugins"] == {"wavemla": "wavemla.plugins:sglang_plugin"}
    for group, points in declared.items():
        for name, value in points.items():
            assert callable(importlib.metadata.EntryPoint(name, value, group).load())


def test_installed_metadata_matches_pyproject() -> None:
    """Where wavemla is installed from this checkout (CI's `pip install -e .`), the engines find the same entry
    points through importlib.metadata."""
    try:
        dist = importlib.metadata.distribution("wavemla")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("wavemla is not installed")
    installed = {(ep.group, ep.name, ep.value) for ep in dist.entry_points}
    for group, points in _declared_entry_points().items():
        for name, value in points.items():
            assert (group, name, value) in installed, f"reinstall wavemla: {group} {name} is not in its metadata"
    assert plugins.registered_groups() == sorted(plugins.ENTRY_POINTS)


ENGINE_PROCESS = """
import importlib.metadata, sys

for group, name, value in [
    ("vllm.general_plugins", "wavemla", "wavemla.plugins:vllm_plugin"),
    ("sglang.srt.plugins", "wavemla", "wavemla.plugins:sglang_plugin"),
]:
    importlib.metadata.EntryPoint(name, value, group).load()()  # as the engines' plugin loaders call them
from vllm.attention_layer import flash_mla_sparse_fwd, flash_mla_with_kvcache
from sglang.attention_layer import flash_mla_with_kvcache_sm120
print(flash_mla_with_kvcache.__module__, flash_mla_sparse_fwd.__module__, flash_mla_with_kvcache_sm120.__module__)
"""


@pytest.mark.parametrize(
    ("knob", "expected"),
    [
        ("decode", "wavemla.api vllm.v1.attention.ops.flashmla wavemla.flash_mla"),
        ("decode+prefill", "wavemla.api wavemla.flash_mla wavemla.flash_mla"),
        ("off", f"{plugins.VLLM_MODULES[0]} {plugins.VLLM_MODULES[0]} {plugins.SGLANG_MODULES[1]}"),
    ],
)
def test_a_fresh_engine_process_loading_the_entry_points(engines: Path, knob: str, expected: str) -> None:
    """A new process (as a spawned engine worker) that loads the declared entry points and then imports the engines'
    attention code runs wavemla's calls as the knob says."""
    script = engines / "engine_process.py"
    script.write_text(ENGINE_PROCESS)
    path = [str(engines), str(Path(wavemla.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "WAVEMLA_ENGINE_PATCH": knob}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == expected.split()
