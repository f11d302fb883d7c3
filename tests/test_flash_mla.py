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
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs

NAMES = (*shim.DEFAULT_NAMES, "sgl_kernel.flash_mla", "engine_kernels.mla")
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16


@pytest.fixture(autouse=True)
def restore_modules() -> Iterator[None]:
    """Each test starts and ends with none of the names bound to the shim (whatever they held before comes back)."""
    saved = {name: sys.modules[name] for name in NAMES if name in sys.modules}
    shim.uninstall()
    yield
    shim.uninstall()
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
