"""`wavemla env`: versions, device, preset and knob table, in-process; invalid knobs exit 2."""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections.abc import Iterator

import numpy
import pytest
import torch
import triton

import wavemla
from wavemla import config
from wavemla.device import PRESETS
from wavemla.tools import envinfo


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A private environment for the knobs; parsed values are forgotten before and after."""
    env: dict[str, str] = {}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    yield env
    config.reload()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    envinfo.add_arguments(parser)
    code = envinfo.run(parser.parse_args(list(argv)))
    return code, capsys.readouterr().out


def test_help_line_is_the_docstring() -> None:
    assert envinfo.__doc__ is not None
    assert envinfo.__doc__.splitlines()[0].startswith("Print versions")


def test_json_report(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--json")
    assert code == 0
    info = json.loads(out)
    assert info["wavemla"] == wavemla.__version__
    assert info["torch"] == torch.__version__
    assert info["triton"] == triton.__version__
    assert info["numpy"] == numpy.__version__
    assert info["triton_interpreter"] is bool(triton.knobs.runtime.interpret)
    assert [row["name"] for row in info["knobs"]] == list(config.KNOBS)
    assert info["errors"] == []
    assert info["gpu_preset"] is None
    if torch.cuda.is_available():
        assert info["cuda_device"]["num_sms"] == torch.cuda.get_device_properties(None).multi_processor_count
    else:
        assert info["cuda_device"] is None
        assert info["cuda_device_note"] == "no CUDA device"


def test_json_shows_knob_values(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ.update({"WAVEMLA_BLOCK_H": "32", "WAVEMLA_BATCH_INVARIANT": "yes"})
    code, out = _run(capsys, "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)["knobs"]}
    assert rows["WAVEMLA_BLOCK_H"] == {**rows["WAVEMLA_BLOCK_H"], "raw": "32", "value": 32, "error": None}
    assert rows["WAVEMLA_BATCH_INVARIANT"]["raw"] == "yes"
    assert rows["WAVEMLA_BATCH_INVARIANT"]["value"] is True
    assert rows["WAVEMLA_BATCH_INVARIANT"]["default"] is False
    assert rows["WAVEMLA_NUM_SPLITS"]["allowed"] == "allowed range: 1..256"


def test_interpreter_flag_follows_triton(environ: dict[str, str]) -> None:
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = True
        assert envinfo.collect()["triton_interpreter"] is True
        triton.knobs.runtime.interpret = False
        assert envinfo.collect()["triton_interpreter"] is False


def test_triton_override_arch_is_reported(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(triton.knobs.runtime, "override_arch", None)
    assert envinfo.collect()["triton_override_arch"] is None
    monkeypatch.setattr(triton.knobs.runtime, "override_arch", "sm80")
    assert envinfo.collect()["triton_override_arch"] == 80
    code, out = _run(capsys)
    assert code == 0 and "kernels built for sm_80 by TRITON_OVERRIDE_ARCH" in out
    monkeypatch.setattr(triton.knobs.runtime, "override_arch", "sm_80")
    code, out = _run(capsys)
    assert code == 2 and "error: TRITON_OVERRIDE_ARCH='sm_80'" in out


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_invalid_knob_exits_2(environ: dict[str, str], capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    environ.update({"WAVEMLA_BLOCK_H": "17", "WAVEMLA_NUM_WARPS": "8"})
    code, out = _run(capsys, *(["--json"] if as_json else []))
    assert code == 2
    if as_json:
        info = json.loads(out)
        assert len(info["errors"]) == 1 and info["errors"][0].startswith("WAVEMLA_BLOCK_H='17'")
        rows = {row["name"]: row for row in info["knobs"]}
        assert rows["WAVEMLA_BLOCK_H"]["value"] is None and rows["WAVEMLA_BLOCK_H"]["error"]
        assert rows["WAVEMLA_NUM_WARPS"]["value"] == 8
    else:
        assert "error: WAVEMLA_BLOCK_H='17'" in out
        block_h = next(line for line in out.splitlines() if line.startswith("WAVEMLA_BLOCK_H "))
        assert "ERROR" in block_h


def test_gpu_preset(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ["WAVEMLA_GPU"] = "rtx6000pro"
    code, out = _run(capsys, "--json")
    assert code == 0
    preset = json.loads(out)["gpu_preset"]
    assert preset["name"] == "rtx-pro-6000"
    assert preset["num_sms"] == PRESETS["rtx-pro-6000"].num_sms
    assert preset["smem_per_block"] == 101_376

    code, out = _run(capsys)
    assert code == 0
    assert "WAVEMLA_GPU   NVIDIA RTX PRO 6000" in out and "sm_120, 188 SMs" in out


def test_blank_gpu_preset_is_unset(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A blank WAVEMLA_GPU is no preset (the knob reads as unset): the report says so, with no error to point to."""
    environ["WAVEMLA_GPU"] = "  "
    code, out = _run(capsys)
    assert code == 0 and "error:" not in out
    assert "WAVEMLA_GPU   unset (plans use the CUDA device)" in out


def test_unknown_gpu_preset_exits_2(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ["WAVEMLA_GPU"] = "h300"
    code, out = _run(capsys, "--json")
    assert code == 2
    info = json.loads(out)
    assert info["gpu_preset"] is None
    assert info["errors"][0].startswith("WAVEMLA_GPU='h300'") and "rtx-pro-6000" in info["errors"][0]


def test_override_is_reported(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    with config.override(WAVEMLA_GPU="b200", WAVEMLA_NUM_STAGES=2):
        code, out = _run(capsys, "--json")
    assert code == 0
    info = json.loads(out)
    assert info["gpu_preset"]["name"] == "b200"
    assert {row["name"]: row["value"] for row in info["knobs"]}["WAVEMLA_NUM_STAGES"] == 2


def test_text_report(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"wavemla       {wavemla.__version__} (")  # "(source SHA)" or "(not a git checkout)"
    assert any(line.startswith(f"torch         {torch.__version__}") for line in lines)
    assert any(line.startswith(f"triton        {triton.__version__} (interpreter ") for line in lines)
    assert "WAVEMLA_GPU   unset (plans use the CUDA device)" in lines
    header = next(line for line in lines if line.startswith("knob "))
    assert header.split() == ["knob", "default", "raw", "value", "allowed"]
    for name in config.KNOBS:
        assert any(line.startswith(name + " ") for line in lines), name
    if not torch.cuda.is_available():
        assert "cuda device   no CUDA device" in lines
    assert "error:" not in out


def test_reports_what_import_flash_mla_gets(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import wavemla.flash_mla as shim

    monkeypatch.delitem(sys.modules, "flash_mla", raising=False)
    monkeypatch.delitem(sys.modules, "flash_mla.flash_mla_interface", raising=False)
    before = json.loads(_run(capsys, "--json")[1])["flash_mla"]
    assert before == "not importable" or before.startswith("another module (")  # a real FlashMLA may be installed
    shim.install()
    try:
        code, out = _run(capsys)
        assert code == 0 and "flash_mla     wavemla's stand-in (wavemla.flash_mla)" in out.splitlines()
    finally:
        shim.uninstall()
    monkeypatch.setitem(sys.modules, "flash_mla", types.ModuleType("flash_mla"))
    assert json.loads(_run(capsys, "--json")[1])["flash_mla"].startswith("another module, already imported (")
    assert json.loads(_run(capsys, "--json")[1])["flash_mla_patched"] == []
    shim.patch(["engine_pkg_not_imported.flashmla"])
    try:
        assert json.loads(_run(capsys, "--json")[1])["flash_mla_patched"] == ["engine_pkg_not_imported.flashmla"]
        assert "              patched by wavemla: engine_pkg_not_imported.flashmla" in _run(capsys)[1].splitlines()
    finally:
        shim.unpatch()


def test_reports_the_engine_plugins(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from wavemla import plugins

    monkeypatch.setattr(plugins, "registered_groups", lambda: sorted(plugins.ENTRY_POINTS))
    assert json.loads(_run(capsys, "--json")[1])["engine_plugins"] == ["sglang.srt.plugins", "vllm.general_plugins"]
    line = "plugins       sglang.srt.plugins, vllm.general_plugins (WAVEMLA_ENGINE_PATCH: {})"
    assert line.format("nothing") in _run(capsys)[1].splitlines()
    environ["WAVEMLA_ENGINE_PATCH"] = "decode+prefill"
    config.reload()
    assert line.format("patch decode+prefill") in _run(capsys)[1].splitlines()
    environ["WAVEMLA_ENGINE_PATCH"] = "on"
    config.reload()
    code, out = _run(capsys)
    assert code == 2 and line.format("ERROR") in out.splitlines() and "WAVEMLA_ENGINE_PATCH='on'" in out
    monkeypatch.setattr(plugins, "registered_groups", lambda: [])
    assert "plugins       none registered (wavemla is not installed: `pip install -e .`)" in _run(capsys)[1]


def test_unknown_wavemla_variable_is_an_error(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    environ["WAVEMLA_DENSE_ALIGNN"] = "off"
    config._warned.discard("WAVEMLA_DENSE_ALIGNN")
    with pytest.warns(UserWarning, match="WAVEMLA_DENSE_ALIGNN"):
        code, out = _run(capsys, "--json")
    assert code == 2
    assert json.loads(out)["errors"] == ["WAVEMLA_DENSE_ALIGNN: not a wavemla knob, ignored"]
