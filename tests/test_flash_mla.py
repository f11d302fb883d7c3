"""`wavemla.flash_mla`: standing in for FlashMLA's module names; an engine-style import runs wavemla's decode."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import wavemla
import wavemla.flash_mla as shim
from tests.conftest import DEVICE
from wavemla.reference import dense_decode_ref
from wavemla.testing import assert_close, dense_out_tolerance, make_dense_decode_inputs, make_sparse_decode_inputs

NAMES = (*shim.DEFAULT_NAMES, "sgl_kernel.flash_mla", "engine_kernels.mla")
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16


@pytest.fixture(autouse=True)
def restore_modules() -> Iterator[None]:
    """Each test starts and ends with none of the names bound to the shim (whatever they held before comes back) and
    nothing patched."""
    saved = {name: sys.modules[name] for name in NAMES if name in sys.modules}
    shim.uninstall()
    shim.unpatch()
    yield
    shim.uninstall()
    shim.unpatch()
    for name in NAMES:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def test_install_serves_flashmla_imports() -> None:
    assert shim.install() == list(shim.DEFAULT_NAMES)
    import flash_mla  # the engine's import, after install
    from flash_mla import FlashMLASchedMeta, flash_mla_with_kvcache, get_mla_metadata
    from flash_mla.flash_mla_interface import flash_mla_with_kvcache as via_interface

    assert flash_mla is shim and flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache is via_interface
    assert get_mla_metadata is wavemla.get_mla_metadata and FlashMLASchedMeta is wavemla.MLAMetadata
    assert importlib.import_module("flash_mla.flash_mla_interface") is shim
    assert flash_mla.flash_mla_interface is shim  # `import flash_mla.flash_mla_interface` then attribute access
    sched, none = get_mla_metadata(torch.zeros(2, dtype=torch.int32), 64, 1)  # FlashMLA's old positional form
    assert isinstance(sched, FlashMLASchedMeta) and none is None
    assert shim.installed_names() == sorted(shim.DEFAULT_NAMES)
    assert shim.install() == list(shim.DEFAULT_NAMES)  # again: a no-op


def test_uninstall_leaves_other_modules_alone() -> None:
    other = types.ModuleType("engine_kernels.mla")
    sys.modules["engine_kernels.mla"] = other
    shim.install()
    assert sorted(shim.uninstall()) == sorted(shim.DEFAULT_NAMES)
    assert "flash_mla" not in sys.modules and not hasattr(shim, "flash_mla_interface")
    assert shim.uninstall(["engine_kernels.mla"]) == [] and sys.modules["engine_kernels.mla"] is other
    assert shim.installed_names() == []


def test_an_engines_own_module_name() -> None:
    """Engines that vendor FlashMLA import it from their kernel package: that name, without the package installed."""
    assert shim.install(["sgl_kernel.flash_mla"]) == ["sgl_kernel.flash_mla"]
    from sgl_kernel.flash_mla import flash_mla_with_kvcache

    assert flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert "flash_mla" not in sys.modules or sys.modules["flash_mla"] is not shim


def test_an_imported_module_is_refused_unless_replaced() -> None:
    real = types.ModuleType("flash_mla")
    real.__file__ = "/site-packages/flash_mla/__init__.py"
    sys.modules["flash_mla"] = real
    with pytest.raises(ValueError, match=r"names: 'flash_mla' is already imported \(/site-packages/flash_mla"):
        shim.install()
    assert sys.modules["flash_mla"] is real and "flash_mla.flash_mla_interface" not in sys.modules  # all or nothing
    shim.install(replace=True)
    assert sys.modules["flash_mla"] is shim


@pytest.mark.parametrize(
    "names",
    ["flash_mla", [], ["flash mla"], ["flash_mla."], [""], [3], ["1flash"], ["wavemla"], ["flash_mla", "wavemla.api"]],
    ids=["a-string", "empty", "space", "trailing-dot", "blank", "not-a-string", "digit-first", "ours", "ours-dotted"],
)
def test_bad_names_name_the_argument(names: object) -> None:
    with pytest.raises(ValueError, match=r"^names: "):
        shim.install(names, replace=True)  # type: ignore[arg-type]
    if not (isinstance(names, list) and names and str(names[-1]).startswith("wavemla")):
        with pytest.raises(ValueError, match=r"^names: "):
            shim.uninstall(names)  # type: ignore[arg-type]
    assert shim.installed_names() == []


def test_uninstall_keeps_the_attribute_another_installed_name_needs() -> None:
    """Two installed parents with a child of the same name: uninstalling one child leaves the other's import and
    attribute access working."""
    shim.install(["flash_mla", "flash_mla.flash_mla_interface", "engine_kernels", "engine_kernels.flash_mla_interface"])
    assert shim.uninstall(["engine_kernels.flash_mla_interface"]) == ["engine_kernels.flash_mla_interface"]
    import flash_mla.flash_mla_interface

    assert flash_mla.flash_mla_interface is shim
    assert sorted(shim.uninstall()) == ["engine_kernels", "flash_mla", "flash_mla.flash_mla_interface"]
    assert not hasattr(shim, "flash_mla_interface")


def test_never_overwrites_its_own_names() -> None:
    """A dotted name whose last part is one of the shim's own attributes does not replace that attribute."""
    shim.install(["flash_mla", "flash_mla.install"])
    assert callable(shim.install) and shim.install is not shim
    assert sorted(shim.uninstall()) == ["flash_mla", "flash_mla.install"] and callable(shim.install)


def test_sparse_decode_through_the_engine_import_matches_the_native_call() -> None:
    """An engine's FlashMLA call, made through ``import flash_mla``, gives the native call's bits."""
    shim.install()
    import flash_mla

    x = make_sparse_decode_inputs(batch=2, h_q=16, topk=64, page=64, extra_topk=64, extra_page=16, dtype=DTYPE,
                                  device=DEVICE, invalid_fraction=0.1, seed=3)  # fmt: skip
    sched, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(
        x["q"], x["kv_cache"], None, None, 512, sched, is_fp8_kvcache=True, indices=x["indices"],
        attn_sink=x["attn_sink"], extra_k_cache=x["extra_kv_cache"], extra_indices_in_kvcache=x["extra_indices"],
    )  # fmt: skip
    ref_out, ref_lse = wavemla.sparse_mla_decode(**x)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


def test_dense_decode_through_the_engine_import_matches_the_native_call() -> None:
    shim.install()
    import flash_mla

    x = make_dense_decode_inputs(lengths=[70, 0, 130], s_q=2, h_q=16, page=64, fp8=True, dtype=DTYPE, device=DEVICE)
    sched, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(
        x["q"], x["k_cache"], x["block_table"], x["cache_seqlens"], 512, sched, causal=True, is_fp8_kvcache=True
    )
    ref_out, ref_lse = wavemla.dense_mla_decode(**x, causal=True)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


SITE_SCRIPT = """
import multiprocessing as mp


def child(queue):
    import flash_mla

    queue.put(flash_mla.__name__)


if __name__ == "__main__":
    import flash_mla

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    print(flash_mla.__name__, queue.get(timeout=120))
    proc.join()
"""


def test_sitecustomize_recipe_reaches_spawned_processes(tmp_path: Path) -> None:
    """The documented recipe for multi-process engines: a ``sitecustomize.py`` on PYTHONPATH installs the stand-in
    in every interpreter, the engine's spawned workers included."""
    (tmp_path / "sitecustomize.py").write_text("import wavemla.flash_mla\n\nwavemla.flash_mla.install()\n")
    (tmp_path / "engine.py").write_text(SITE_SCRIPT)
    src = Path(wavemla.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(src), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "engine.py")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["wavemla.flash_mla", "wavemla.flash_mla"]
    # `wavemla env` in the same environment says so: the check a user runs after setting the recipe up
    env_json = subprocess.run(
        [sys.executable, "-m", "wavemla", "env", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert json.loads(env_json.stdout)["flash_mla"] == "wavemla's stand-in (wavemla.flash_mla)", env_json.stderr


def test_resolves_to_without_importing() -> None:
    assert shim.resolves_to("wavemla_no_such_module") == "not importable"
    assert shim.resolves_to("wavemla_no_such_pkg.flash_mla").startswith("not importable (ModuleNotFoundError: ")
    assert shim.resolves_to("json").startswith("another module, already imported (")
    shim.install(["engine_kernels.mla"])
    assert shim.resolves_to("engine_kernels.mla") == "wavemla's stand-in (wavemla.flash_mla)"
    with pytest.raises(ValueError, match=r"^names: 'flash mla' is not a dotted module name"):
        shim.resolves_to("flash mla")


# An engine's FlashMLA module with more than the decode calls (as vLLM's vllm.v1.attention.ops.flashmla and SGLang's
# sgl_kernel.flash_mla are): a prefill call, a capability check, its own metadata class.
ENGINE_MODULE = """
import dataclasses


@dataclasses.dataclass
class FlashMLASchedMeta:
    have_initialized: bool = False


def get_mla_metadata(*args, **kwargs):
    return FlashMLASchedMeta(), None


def flash_mla_with_kvcache(*args, **kwargs):
    raise RuntimeError("the engine's own FlashMLA")


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None, out=None):
    return "engine prefill"


def is_flashmla_sparse_supported():
    return True, None
"""

# The engine's attention module, which binds the calls when it is imported (after the patch).
ENGINE_ATTENTION = """
from engine_pkg.ops.flashmla import flash_mla_sparse_fwd, flash_mla_with_kvcache, get_mla_metadata
"""


@pytest.fixture
def engine_pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    ops = tmp_path / "engine_pkg" / "ops"
    ops.mkdir(parents=True)
    (tmp_path / "engine_pkg" / "__init__.py").write_text("")
    (ops / "__init__.py").write_text("")
    (ops / "flashmla.py").write_text(ENGINE_MODULE)
    (tmp_path / "engine_pkg" / "attention.py").write_text(ENGINE_ATTENTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n == "engine_pkg" or n.startswith("engine_pkg.")]:
        del sys.modules[name]


def test_patch_replaces_the_decode_calls_when_the_module_is_imported(engine_pkg: Path) -> None:
    assert shim.patch(["engine_pkg.ops.flashmla"]) == ["engine_pkg.ops.flashmla"]
    assert "engine_pkg.ops.flashmla" not in sys.modules and shim.patched_names() == ["engine_pkg.ops.flashmla"]
    from engine_pkg import attention  # the engine imports its attention code: the module runs, then is patched
    from engine_pkg.ops import flashmla

    assert attention.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert attention.get_mla_metadata is wavemla.get_mla_metadata
    assert flashmla.FlashMLASchedMeta is wavemla.MLAMetadata
    assert attention.flash_mla_sparse_fwd(None, None, None, 1.0) == "engine prefill"  # the rest is the engine's
    assert flashmla.is_flashmla_sparse_supported() == (True, None)
    assert flashmla.__loader__.get_source("engine_pkg.ops.flashmla") == ENGINE_MODULE  # the module's own loader
    assert shim.patch(["engine_pkg.ops.flashmla"]) == ["engine_pkg.ops.flashmla"]  # again: a no-op
    assert shim.unpatch() == ["engine_pkg.ops.flashmla"]
    with pytest.raises(RuntimeError, match="the engine's own FlashMLA"):
        flashmla.flash_mla_with_kvcache()
    assert flashmla.FlashMLASchedMeta is not wavemla.MLAMetadata and shim.patched_names() == []
    assert shim._FINDER not in sys.meta_path


def test_patch_of_an_imported_module_is_immediate(engine_pkg: Path) -> None:
    from engine_pkg.ops import flashmla

    own = flashmla.flash_mla_with_kvcache
    shim.patch(["engine_pkg.ops.flashmla"])
    assert flashmla.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache and shim._FINDER not in sys.meta_path
    shim.unpatch(["engine_pkg.ops.flashmla"])
    assert flashmla.flash_mla_with_kvcache is own


def test_patched_engine_call_runs_wavemla(engine_pkg: Path) -> None:
    """vLLM's DeepSeek-V4 decode call through the patched module: its keywords, ``out=``, the output unused."""
    shim.patch(["engine_pkg.ops.flashmla"])
    from engine_pkg import attention

    x = make_sparse_decode_inputs(batch=2, h_q=16, topk=64, page=64, extra_topk=64, extra_page=16, dtype=DTYPE,
                                  device=DEVICE, invalid_fraction=0.1, seed=4)  # fmt: skip
    output = torch.full((2, 16, 512), float("nan"), dtype=DTYPE, device=DEVICE)
    attention.flash_mla_with_kvcache(
        q=x["q"], k_cache=x["kv_cache"], block_table=None, head_dim_v=512,
        tile_scheduler_metadata=attention.get_mla_metadata()[0], cache_seqlens=None, is_fp8_kvcache=True,
        indices=x["indices"], topk_length=None, softmax_scale=None, attn_sink=x["attn_sink"],
        extra_k_cache=x["extra_kv_cache"], extra_indices_in_kvcache=x["extra_indices"], extra_topk_length=None,
        out=output.unsqueeze(1),
    )  # fmt: skip
    assert torch.equal(output, wavemla.sparse_mla_decode(**x)[0][:, 0])


def test_patch_with_prefill_replaces_the_sparse_prefill_call(engine_pkg: Path) -> None:
    """``prefill=True``: the module's flash_mla_sparse_fwd runs wavemla's prefill (with vLLM's ``out=``), and unpatch
    puts the engine's back; a module that defines only the prefill call can be patched this way."""
    with pytest.raises(ValueError, match=r"^prefill: expected a bool"):
        shim.patch(["engine_pkg.ops.flashmla"], prefill=1)  # type: ignore[arg-type]
    shim.patch(["engine_pkg.ops.flashmla"], prefill=True)
    from engine_pkg import attention
    from engine_pkg.ops import flashmla

    assert attention.flash_mla_sparse_fwd is shim.flash_mla_sparse_fwd
    g = torch.Generator().manual_seed(7)
    q = torch.randn((3, 16, 512), generator=g).to(DTYPE).to(DEVICE)
    kv = torch.randn((40, 1, 512), generator=g).to(DTYPE).to(DEVICE)
    idx = torch.randint(-1, 45, (3, 1, 24), generator=g, dtype=torch.int32).to(DEVICE)
    out = torch.full((3, 16, 512), float("nan"), dtype=DTYPE, device=DEVICE)
    got = attention.flash_mla_sparse_fwd(q, kv, idx, 512**-0.5, 512, None, None, out=out)
    want = wavemla.sparse_mla_prefill(q, kv, idx, 512**-0.5)
    assert got[0] is out and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    shim.unpatch()
    assert flashmla.flash_mla_sparse_fwd(None, None, None, 1.0) == "engine prefill"
    (engine_pkg / "engine_pkg" / "ops" / "prefill_only.py").write_text("def flash_mla_sparse_fwd():\n    pass\n")
    shim.patch(["engine_pkg.ops.prefill_only"], prefill=True)
    assert importlib.import_module("engine_pkg.ops.prefill_only").flash_mla_sparse_fwd is shim.flash_mla_sparse_fwd


def test_unpatch_puts_back_the_prefill_call_a_later_patch_replaced(engine_pkg: Path) -> None:
    """patch(names) and then patch(names, prefill=True): unpatch puts back the engine's prefill call too."""
    from engine_pkg.ops import flashmla

    own_prefill, own_decode = flashmla.flash_mla_sparse_fwd, flashmla.flash_mla_with_kvcache
    shim.patch(["engine_pkg.ops.flashmla"])
    shim.patch(["engine_pkg.ops.flashmla"], prefill=True)
    assert flashmla.flash_mla_sparse_fwd is shim.flash_mla_sparse_fwd
    assert shim.unpatch() == ["engine_pkg.ops.flashmla"]
    assert flashmla.flash_mla_sparse_fwd is own_prefill and flashmla.flash_mla_with_kvcache is own_decode


def test_patch_without_prefill_leaves_the_prefill_call(engine_pkg: Path) -> None:
    shim.patch(["engine_pkg.ops.flashmla"])
    from engine_pkg.ops import flashmla

    assert flashmla.flash_mla_sparse_fwd(None, None, None, 1.0) == "engine prefill"


def test_install_serves_the_sparse_prefill_import() -> None:
    shim.install()
    from flash_mla import flash_mla_sparse_fwd

    assert flash_mla_sparse_fwd is shim.flash_mla_sparse_fwd


def test_sparse_prefill_takes_flashmlas_indexer_topk() -> None:
    """FlashMLA's ``flash_mla_sparse_fwd`` has an eighth argument, ``indexer_topk`` (default 0: the three results);
    a caller passing 0, by position or by name, gets those results, and any other value (FlashMLA's fourth result,
    ``lse_indexer``) is refused, naming it."""
    g = torch.Generator().manual_seed(8)
    q = torch.randn((2, 3, 512), generator=g).to(DTYPE).to(DEVICE)
    kv = torch.randn((20, 1, 512), generator=g).to(DTYPE).to(DEVICE)
    idx = torch.randint(-1, 22, (2, 1, 8), generator=g, dtype=torch.int32).to(DEVICE)
    want = wavemla.sparse_mla_prefill(q, kv, idx, 512**-0.5)
    for got in (
        shim.flash_mla_sparse_fwd(q, kv, idx, 512**-0.5, 512, None, None, 0),
        shim.flash_mla_sparse_fwd(q, kv, idx, 512**-0.5, indexer_topk=0),
    ):
        assert len(got) == 3 and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    for bad in (512, 2048, True, None):
        with pytest.raises(ValueError, match=r"^indexer_topk: "):
            shim.flash_mla_sparse_fwd(q, kv, idx, 512**-0.5, 512, None, None, bad)  # type: ignore[arg-type]


def test_install_refuses_a_patched_module(engine_pkg: Path) -> None:
    """A module patch() holds is not installed over, even with replace=True: unpatch would put the engine's calls
    into the stand-in module itself."""
    from engine_pkg.ops import flashmla

    shim.patch(["engine_pkg.ops.flashmla", "engine_pkg.ops.not_imported_yet"])
    for name in ("engine_pkg.ops.flashmla", "engine_pkg.ops.not_imported_yet"):
        with pytest.raises(ValueError, match=rf"^names: '{name}' is patched by wavemla\.flash_mla\.patch"):
            shim.install([name], replace=True)
    assert sys.modules["engine_pkg.ops.flashmla"] is flashmla and shim.installed_names() == []
    shim.unpatch()
    assert shim.flash_mla_with_kvcache is wavemla.flash_mla_with_kvcache
    assert shim.install(["engine_pkg.ops.flashmla"], replace=True) == ["engine_pkg.ops.flashmla"]


def test_patch_refuses_a_module_without_the_calls(engine_pkg: Path) -> None:
    (engine_pkg / "engine_pkg" / "ops" / "other.py").write_text("def flash_mla_sparse_fwd():\n    pass\n")
    shim.patch(["engine_pkg.ops.other"])
    with pytest.raises(ImportError, match=r"module 'engine_pkg\.ops\.other' defines none of flash_mla_with_kvcache"):
        importlib.import_module("engine_pkg.ops.other")
    with pytest.raises(ImportError, match=r"defines none of"):
        shim.patch(["json"])


def test_patch_names_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^names: a sequence of module names"):
        shim.patch("flash_mla")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^names: 'wavemla\.api' is wavemla's own"):
        shim.patch(["wavemla.api"])
    shim.install()
    with pytest.raises(ValueError, match=r"^names: 'flash_mla' is installed as the stand-in itself"):
        shim.patch(["flash_mla"])
    assert shim.patched_names() == []


def test_sitecustomize_patch_reaches_spawned_processes(engine_pkg: Path) -> None:
    """The patch recipe for multi-process engines: a ``sitecustomize.py`` that patches the engine's module."""
    site = engine_pkg / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        'import wavemla.flash_mla\n\nwavemla.flash_mla.patch(["engine_pkg.ops.flashmla"])\n'
    )
    script = SITE_SCRIPT.replace("import flash_mla", "from engine_pkg.attention import flash_mla_with_kvcache")
    script = script.replace("flash_mla.__name__", "flash_mla_with_kvcache.__module__")
    (engine_pkg / "engine.py").write_text(script)
    src = Path(wavemla.__file__).resolve().parents[1]
    path = [str(site), str(engine_pkg), str(src), os.environ.get("PYTHONPATH", "")]
    done = subprocess.run(
        [sys.executable, str(engine_pkg / "engine.py")], env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["wavemla.api", "wavemla.api"]


# SGLang 0.5.23's two FlashMLA entries for DeepSeek-V4 decode: its interface to its FlashMLA build (keywords of that
# build, ``use_legacy`` among them, bound with functools.partial when the backend is built) and its SM120 entry.
SGLANG_INTERFACE = """
import dataclasses


@dataclasses.dataclass
class FlashMLASchedMeta:
    have_initialized: bool = False


def get_mla_metadata(cache_seqlens=None, num_q_tokens_per_head_k=None, num_heads_k=None, num_heads_q=None,
                     is_fp8_kvcache=False, topk=None):
    return FlashMLASchedMeta(), None


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, descale_q=None, descale_k=None,
                           is_fp8_kvcache=False, indices=None, attn_sink=None, extra_k_cache=None,
                           extra_indices_in_kvcache=None, topk_length=None, extra_topk_length=None, kv_format=None,
                           *, use_legacy=True):
    raise RuntimeError("the engine's own FlashMLA")


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None, *, use_legacy=True):
    return "engine prefill"
"""

SGLANG_SM120 = """
SM120_DECODE_MAX_TOKENS = 64


def flash_mla_with_kvcache_sm120(**kwargs):
    raise RuntimeError("the engine's own SM120 decode")
"""


@pytest.fixture
def sglang_pkg(engine_pkg: Path) -> Path:
    ops = engine_pkg / "engine_pkg" / "ops"
    (ops / "flash_mla_interface.py").write_text(SGLANG_INTERFACE)
    (ops / "flash_mla_sm120.py").write_text(SGLANG_SM120)
    return engine_pkg


def test_sglang_dsv4_decode_calls_run_wavemla(sglang_pkg: Path) -> None:
    """Both of SGLang's DeepSeek-V4 decode calls through the patched modules, with the keywords its backend passes:
    the interface's call bound with ``use_legacy`` (MODEL1 caches), the SM120 entry without metadata."""
    import functools

    names = ["engine_pkg.ops.flash_mla_interface", "engine_pkg.ops.flash_mla_sm120"]
    assert shim.patch(names) == names
    from engine_pkg.ops import flash_mla_interface, flash_mla_sm120

    assert flash_mla_interface.flash_mla_sparse_fwd(None, None, None, 1.0) == "engine prefill"
    x = make_sparse_decode_inputs(batch=2, h_q=16, topk=64, page=64, extra_topk=64, extra_page=16, dtype=DTYPE,
                                  device=DEVICE, invalid_fraction=0.1, seed=5)  # fmt: skip
    ref_out, ref_lse = wavemla.sparse_mla_decode(**x)
    lengths = dict(topk_length=None, attn_sink=x["attn_sink"], extra_k_cache=x["extra_kv_cache"],
                   extra_indices_in_kvcache=x["extra_indices"], extra_topk_length=None)  # fmt: skip
    call = functools.partial(flash_mla_interface.flash_mla_with_kvcache, use_legacy=True)
    out, lse = call(
        q=x["q"], k_cache=x["kv_cache"], head_dim_v=512, block_table=None, cache_seqlens=None,
        tile_scheduler_metadata=flash_mla_interface.get_mla_metadata()[0], softmax_scale=None, is_fp8_kvcache=True,
        indices=x["indices"], **lengths,
    )  # fmt: skip
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    out, lse = flash_mla_sm120.flash_mla_with_kvcache_sm120(
        q=x["q"], k_cache=x["kv_cache"].view(torch.float8_e4m3fn), head_dim_v=512, softmax_scale=None,
        indices=x["indices"], **lengths,
    )  # fmt: skip
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    assert shim.unpatch() == names
    with pytest.raises(RuntimeError, match="the engine's own SM120 decode"):
        flash_mla_sm120.flash_mla_with_kvcache_sm120()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"use_legacy": False}, r"^use_legacy: False selects DeepSeek-V4\.1's token-interleaved caches"),
        ({"kv_format": "V32_NO_ROPE"}, r"^kv_format: None, or 'V32' with the 656-byte FP8 V3\.2 cache, got 'V32_NO"),
        ({"kv_format": "V32"}, r"^kv_format: None, or 'V32' with the 656-byte FP8 V3\.2 cache, got 'V32' \(the"),
        ({"num_splits": torch.zeros(2, dtype=torch.int32)}, r"^num_splits: must be None \(the planner chooses"),
        (
            {"tile_scheduler_metadata": torch.zeros(4, 4, dtype=torch.int32)},
            r"^tile_scheduler_metadata: a tensor must be FlashMLA's legacy schedule, \[num_sm_parts, 8\] int32, got",
        ),
        (
            {"tile_scheduler_metadata": torch.zeros(4, 8, dtype=torch.int32)},
            r"^num_splits: with FlashMLA's legacy schedule tensor, expected its \[b \+ 1\] int32 num_splits, got None",
        ),
        ({"descale_q": torch.ones(1)}, r"^descale_q: the sparse decode takes None"),
        ({"descale_k": torch.ones(1)}, r"^descale_k: the sparse decode takes None"),
    ],
)
def test_sglang_build_keywords_wavemla_does_not_serve_are_refused(extra: dict, message: str) -> None:
    """SGLang's build keywords wavemla cannot honour, and legacy schedules that are not FlashMLA's (kv_format "V32"
    with DeepSeek-V4's MODEL1 cache is the wrong format)."""
    x = make_sparse_decode_inputs(batch=1, h_q=16, topk=64, page=64, dtype=DTYPE, device=DEVICE)
    extra = {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in extra.items()}
    call = {"tile_scheduler_metadata": None, **extra}
    with pytest.raises(ValueError, match=message):
        wavemla.flash_mla_with_kvcache(
            x["q"], x["kv_cache"], None, None, 512, is_fp8_kvcache=True, indices=x["indices"], **call
        )


def test_legacy_get_mla_metadata_shapes_and_refusals() -> None:
    """SGLang's get_mla_metadata: an object without cache_seqlens; with them FlashMLA's legacy shapes (parts =
    SMs // heads_k // ⌈q tokens per head_k / 64⌉, at least 1), zeros, on cache_seqlens' device; bad counts named."""
    meta, none = shim.legacy_get_mla_metadata()
    assert isinstance(meta, wavemla.MLAMetadata) and none is None
    sms = 132 if DEVICE != "cuda" else torch.cuda.get_device_properties(0).multi_processor_count
    seqlens = torch.tensor([5, 0, 9], dtype=torch.int32, device=DEVICE)
    for q_tokens, heads_k, parts in ((16, 1, sms), (128, 1, sms // 2), (256, 2, sms // 2 // 4), (64, 10**6, 1)):
        schedule, splits = shim.legacy_get_mla_metadata(seqlens, q_tokens, heads_k)
        assert schedule.shape == (parts, 8) and splits.shape == (4,)
        assert schedule.dtype == splits.dtype == torch.int32 and schedule.device == splits.device == seqlens.device
        assert not schedule.any() and not splits.any()
    for args, message in (
        ((seqlens.long(), 16, 1), r"^cache_seqlens: expected a \[b\] int32 tensor, got torch\.int64 \[3\]"),
        (([5, 9], 16, 1), r"^cache_seqlens: expected a \[b\] int32 tensor, got list"),
        ((seqlens, 0, 1), r"^num_q_tokens_per_head_k: expected a positive int with cache_seqlens, got 0"),
        ((seqlens, 16, None), r"^num_heads_k: expected a positive int with cache_seqlens, got None"),
    ):
        with pytest.raises(ValueError, match=message):
            shim.legacy_get_mla_metadata(*args)


# vLLM's FlashMLA module as its dense MLA backend uses it for an fp8 KV cache: FlashMLA's FP8 dense call and its
# schedule call, beside the calls of the module above.
VLLM_FP8_MODULE = (
    ENGINE_MODULE
    + """

def get_mla_metadata_dense_fp8(cache_seqlens, num_q_tokens_per_head_k, num_heads_k):
    raise RuntimeError("the engine's own FP8 schedule")


def flash_mla_with_kvcache_fp8(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                               num_splits, softmax_scale=None, causal=False, descale_q=None, descale_k=None):
    raise RuntimeError("the engine's own FP8 dense decode")
"""
)


def _fp8_dense_call(seed: int) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Per-tensor FP8 dense inputs with q quantized to e4m3 as the engines quantize it: (inputs with that q, q's
    scale as descale_q (not a power of two), and the reference's output on them)."""
    x = make_dense_decode_inputs(lengths=[70, 0, 130], s_q=2, h_q=16, page=64, fp8="tensor", dtype=DTYPE,
                                 device=DEVICE, seed=seed)  # fmt: skip
    descale_q = torch.tensor([1 / 300], device=DEVICE)
    x["q"] = (x["q"].float() / descale_q).to(torch.float8_e4m3fn)
    ref_out, _ = dense_decode_ref(**x, descale_q=descale_q, causal=True)
    return x, descale_q, ref_out


def test_vllm_fp8_dense_calls_run_wavemla(engine_pkg: Path) -> None:
    """vLLM's dense MLA decode with an fp8 KV cache through the patched module: the schedule tensors of
    get_mla_metadata_dense_fp8, an e4m3 q with descale_q, the cache's descale_k; bf16 out equal to the native call,
    and to the reference."""
    (engine_pkg / "engine_pkg" / "ops" / "flashmla.py").write_text(VLLM_FP8_MODULE)
    shim.patch(["engine_pkg.ops.flashmla"])
    from engine_pkg.ops import flashmla

    assert flashmla.flash_mla_with_kvcache_fp8 is shim.flash_mla_with_kvcache_fp8
    x, descale_q, ref_out = _fp8_dense_call(seed=6)
    schedule, splits = flashmla.get_mla_metadata_dense_fp8(x["cache_seqlens"], 2 * 16, 1)
    assert schedule.dtype == splits.dtype == torch.int32 and schedule.shape[1] == 8 and splits.shape == (4,)
    for bad, message in ((None, "None"), (x["cache_seqlens"].long(), "torch.int64")):
        with pytest.raises(ValueError, match=rf"^cache_seqlens: expected a \[b\] int32 tensor, got {message}"):
            flashmla.get_mla_metadata_dense_fp8(bad, 32, 1)
    out, lse = flashmla.flash_mla_with_kvcache_fp8(
        q=x["q"], k_cache=x["k_cache"].view(torch.float8_e4m3fn), block_table=x["block_table"],
        cache_seqlens=x["cache_seqlens"], head_dim_v=512, tile_scheduler_metadata=schedule, num_splits=splits,
        softmax_scale=576**-0.5, causal=True, descale_q=descale_q, descale_k=x["descale_k"],
    )  # fmt: skip
    assert out.dtype == torch.bfloat16
    native = wavemla.dense_mla_decode(**x, descale_q=descale_q, causal=True, softmax_scale=576**-0.5)
    assert torch.equal(out, native[0]) and torch.equal(lse, native[1])
    lane = "gpu" if DEVICE == "cuda" else "interp"
    assert_close("out", out, ref_out, dense_out_tolerance(x["k_cache"], lane, out.dtype))
    shim.unpatch()
    with pytest.raises(RuntimeError, match="the engine's own FP8 dense decode"):
        flashmla.flash_mla_with_kvcache_fp8(*[None] * 7)


def test_sglang_fp8_dense_call_runs_wavemla(sglang_pkg: Path) -> None:
    """SGLang's FlashMLA backend with an fp8 KV cache: the interface's call with its legacy schedule tensors, an e4m3
    q, descale_q and descale_k; equal to the native call, and to the reference."""
    shim.patch(["engine_pkg.ops.flash_mla_interface"])
    from engine_pkg.ops import flash_mla_interface

    x, descale_q, ref_out = _fp8_dense_call(seed=7)
    # the legacy schedule tensors SGLang's interface returns (patch() puts legacy_get_mla_metadata there)
    schedule, splits = shim.legacy_get_mla_metadata(x["cache_seqlens"], 2 * 16, 1)
    out, lse = flash_mla_interface.flash_mla_with_kvcache(
        q=x["q"], k_cache=x["k_cache"], block_table=x["block_table"], cache_seqlens=x["cache_seqlens"],
        head_dim_v=512, tile_scheduler_metadata=schedule, num_splits=splits, causal=True, is_fp8_kvcache=True,
        descale_q=descale_q, descale_k=x["descale_k"],
    )  # fmt: skip
    native = wavemla.dense_mla_decode(**x, descale_q=descale_q, causal=True)
    assert torch.equal(out, native[0]) and torch.equal(lse, native[1])
    lane = "gpu" if DEVICE == "cuda" else "interp"
    assert_close("out", out, ref_out, dense_out_tolerance(x["k_cache"], lane, out.dtype))
    with pytest.raises(ValueError, match=r"^descale_q: required with an FP8 q"):
        flash_mla_interface.flash_mla_with_kvcache(
            x["q"], x["k_cache"], x["block_table"], x["cache_seqlens"], 512, None, causal=True, is_fp8_kvcache=True,
            descale_k=x["descale_k"],
        )  # fmt: skip


# sgl-kernel's FlashMLA module (``sgl_kernel.flash_mla``), which SGLang's DeepSeek-V4 backend imports its decode and
# sparse prefill calls from: its get_mla_metadata is the same dual call as SGLang's interface (an object without
# cache_seqlens; FlashMLA's legacy schedule tensors with them, which SGLang's dense and DeepSeek-V3.2 backends slice
# and copy into their CUDA-graph buffers).
SGL_KERNEL_FLASH_MLA = SGLANG_INTERFACE.replace("*, use_legacy=True", "")


def test_patched_sgl_kernel_module_keeps_the_legacy_metadata_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "sgl_kernel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "flash_mla.py").write_text(SGL_KERNEL_FLASH_MLA)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        shim.patch(["sgl_kernel.flash_mla"])
        from sgl_kernel import flash_mla

        meta, none = flash_mla.get_mla_metadata()  # the DeepSeek-V4 backend's call
        assert isinstance(meta, wavemla.MLAMetadata) and none is None
        seqlens = torch.tensor([5, 0, 9], dtype=torch.int32, device=DEVICE)
        schedule, splits = flash_mla.get_mla_metadata(seqlens, 16, 1)  # the dense backend's
        assert schedule.shape[1] == 8 and splits.shape == (4,)
        torch.zeros(8, dtype=torch.int32, device=DEVICE)[:4].copy_(splits)  # as that backend's graph buffers
        x = make_dense_decode_inputs(lengths=[5, 0, 9], s_q=1, h_q=16, page=64, dtype=DTYPE, device=DEVICE)
        out, lse = flash_mla.flash_mla_with_kvcache(
            x["q"], x["k_cache"], x["block_table"], x["cache_seqlens"], 512, schedule, splits, causal=True
        )
        native = wavemla.dense_mla_decode(**x, causal=True)
        assert torch.equal(out, native[0]) and torch.equal(lse, native[1])
    finally:
        shim.unpatch()
        for name in [n for n in sys.modules if n == "sgl_kernel" or n.startswith("sgl_kernel.")]:
            del sys.modules[name]


def test_a_refused_patch_changes_nothing(engine_pkg: Path) -> None:
    """patch() of several modules where one imported module defines none of the calls raises before it patches any
    (as install() refuses all or nothing), and leaves no name waiting or marked for the prefill call."""
    from engine_pkg.ops import flashmla

    own = flashmla.flash_mla_with_kvcache
    with pytest.raises(ImportError, match=r"module 'json' defines none of"):
        shim.patch(["engine_pkg.ops.flashmla", "engine_pkg.ops.not_imported_yet", "json"], prefill=True)
    assert flashmla.flash_mla_with_kvcache is own and flashmla.flash_mla_sparse_fwd(None, None, None, 1.0)
    assert shim.patched_names() == [] and not shim._PREFILL and shim._FINDER not in sys.meta_path
