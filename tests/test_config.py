"""The knob registry: parsing, validation, overrides, and that nothing else reads the environment."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from wavemla import config
from wavemla.config import KnobError

SRC = Path(config.__file__).resolve().parent


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A private environment for config to read; parsed values are forgotten before and after."""
    env: dict[str, str] = {}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    yield env
    config.reload()


# ---------------------------------------------------------------- defaults and parsing


def test_defaults_when_unset(environ: dict[str, str]) -> None:
    for name, knob in config.KNOBS.items():
        assert config.get(name) == knob.default, name
        assert config.raw(name) is None
    assert config.get("WAVEMLA_BATCH_INVARIANT") is False
    assert config.get("WAVEMLA_BLOCK_H") is None


def test_empty_string_means_default(environ: dict[str, str]) -> None:
    environ.update({"WAVEMLA_BLOCK_H": "", "WAVEMLA_BATCH_INVARIANT": "", "WAVEMLA_GPU": ""})
    assert config.get("WAVEMLA_BLOCK_H") is None
    assert config.get("WAVEMLA_BATCH_INVARIANT") is False
    assert config.get("WAVEMLA_GPU") is None


def test_blank_string_means_default(environ: dict[str, str]) -> None:
    """Values are read stripped, so a blank one is the empty one: the default (a blank WAVEMLA_GPU read as '' would
    plan CPU calls for the H200 but fail CUDA calls as no preset; a blank int knob would raise)."""
    environ.update({"WAVEMLA_BLOCK_H": "  ", "WAVEMLA_BATCH_INVARIANT": " ", "WAVEMLA_GPU": " \t"})
    environ["WAVEMLA_CACHE_DIR"] = " "
    assert config.get("WAVEMLA_BLOCK_H") is None
    assert config.get("WAVEMLA_BATCH_INVARIANT") is False
    assert config.get("WAVEMLA_GPU") is None
    assert config.get("WAVEMLA_CACHE_DIR") is None
    with config.override(WAVEMLA_GPU=" "):
        assert config.get("WAVEMLA_GPU") is None


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        pytest.param("WAVEMLA_BLOCK_H", "16", 16, id="choice-16"),
        pytest.param("WAVEMLA_BLOCK_H", " 64 ", 64, id="choice-padded"),
        pytest.param("WAVEMLA_BLOCK_N", "32", 32, id="block-n"),
        pytest.param("WAVEMLA_NUM_WARPS", "8", 8, id="warps"),
        pytest.param("WAVEMLA_NUM_STAGES", "1", 1, id="stages"),
        pytest.param("WAVEMLA_NUM_SPLITS", "1", 1, id="range-min"),
        pytest.param("WAVEMLA_NUM_SPLITS", "256", 256, id="range-max"),
        pytest.param("WAVEMLA_TARGET_CTAS", "+512", 512, id="range-plus-sign"),
        pytest.param("WAVEMLA_GPU", "rtx-pro-6000", "rtx-pro-6000", id="str"),
        pytest.param("WAVEMLA_GPU", "  h200 ", "h200", id="str-stripped"),
    ],
)
def test_valid_values(environ: dict[str, str], name: str, raw: str, expected: object) -> None:
    environ[name] = raw
    value = config.get(name)
    assert value == expected
    assert type(value) is type(expected)
    assert config.raw(name) == raw


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "Yes", "on", " On "])
def test_bool_true(environ: dict[str, str], raw: str) -> None:
    environ["WAVEMLA_BATCH_INVARIANT"] = raw
    assert config.get("WAVEMLA_BATCH_INVARIANT") is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "no", "OFF"])
def test_bool_false(environ: dict[str, str], raw: str) -> None:
    environ["WAVEMLA_BATCH_INVARIANT"] = raw
    assert config.get("WAVEMLA_BATCH_INVARIANT") is False


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        pytest.param("WAVEMLA_BLOCK_H", "17", "16, 32, 64", id="not-a-choice"),
        pytest.param("WAVEMLA_BLOCK_H", "abc", "expected an integer", id="not-an-int"),
        pytest.param("WAVEMLA_BLOCK_H", "16.0", "expected an integer", id="float"),
        pytest.param("WAVEMLA_NUM_WARPS", "3", "2, 4, 8, 16", id="warps"),
        pytest.param("WAVEMLA_NUM_STAGES", "0", "1, 2, 3", id="stages"),
        pytest.param("WAVEMLA_NUM_SPLITS", "0", "1..256", id="below-range"),
        pytest.param("WAVEMLA_NUM_SPLITS", "257", "1..256", id="above-range"),
        pytest.param("WAVEMLA_NUM_SPLITS", "-3", "1..256", id="negative"),
        pytest.param("WAVEMLA_TARGET_CTAS", "0", "1..1048576", id="ctas-zero"),
        pytest.param("WAVEMLA_BATCH_INVARIANT", "maybe", "boolean", id="bool"),
        pytest.param("WAVEMLA_BATCH_INVARIANT", "2", "boolean", id="bool-2"),
    ],
)
def test_invalid_values_name_the_variable(environ: dict[str, str], name: str, raw: str, says: str) -> None:
    environ[name] = raw
    with pytest.raises(KnobError) as info:
        config.get(name)
    message = str(info.value)
    assert message.startswith(f"{name}=")
    assert repr(raw) in message
    assert says in message
    # an invalid value is never cached: it raises again on every read
    with pytest.raises(KnobError):
        config.get(name)


def test_values_are_cached_until_reload(environ: dict[str, str]) -> None:
    environ["WAVEMLA_BLOCK_H"] = "32"
    assert config.get("WAVEMLA_BLOCK_H") == 32
    environ["WAVEMLA_BLOCK_H"] = "64"
    assert config.get("WAVEMLA_BLOCK_H") == 32
    config.reload()
    assert config.get("WAVEMLA_BLOCK_H") == 64


def test_unknown_knob(environ: dict[str, str]) -> None:
    with pytest.raises(KeyError, match="WAVEMLA_NOPE"):
        config.get("WAVEMLA_NOPE")
    with pytest.raises(KeyError, match="WAVEMLA_NOPE"):
        config.raw("WAVEMLA_NOPE")
    with pytest.raises(KeyError, match="WAVEMLA_NOPE"), config.override(WAVEMLA_NOPE=1):
        pass


# ---------------------------------------------------------------- overrides


def test_override_applies_and_restores(environ: dict[str, str]) -> None:
    environ["WAVEMLA_BLOCK_H"] = "32"
    with config.override(WAVEMLA_BLOCK_H=16, WAVEMLA_BATCH_INVARIANT=True):
        assert config.get("WAVEMLA_BLOCK_H") == 16
        assert config.get("WAVEMLA_BATCH_INVARIANT") is True
        with config.override(WAVEMLA_BLOCK_H=64):
            assert config.get("WAVEMLA_BLOCK_H") == 64
            assert config.get("WAVEMLA_BATCH_INVARIANT") is True
        assert config.get("WAVEMLA_BLOCK_H") == 16
    assert config.get("WAVEMLA_BLOCK_H") == 32
    assert config.get("WAVEMLA_BATCH_INVARIANT") is False


def test_override_restores_after_an_exception(environ: dict[str, str]) -> None:
    with pytest.raises(RuntimeError, match="boom"), config.override(WAVEMLA_NUM_WARPS=8):
        assert config.get("WAVEMLA_NUM_WARPS") == 8
        raise RuntimeError("boom")
    assert config.get("WAVEMLA_NUM_WARPS") is None


def test_override_is_validated_and_leaves_nothing_behind(environ: dict[str, str]) -> None:
    bad = config.override(WAVEMLA_NUM_WARPS=4, WAVEMLA_BLOCK_H=17)
    with pytest.raises(KnobError, match="WAVEMLA_BLOCK_H"), bad:
        pass
    assert config.get("WAVEMLA_NUM_WARPS") is None
    assert config.get("WAVEMLA_BLOCK_H") is None
    with pytest.raises(KnobError, match="WAVEMLA_NUM_SPLITS"), config.override(WAVEMLA_NUM_SPLITS=0):
        pass


def test_override_parses_like_the_environment(environ: dict[str, str]) -> None:
    with config.override(WAVEMLA_BLOCK_N="32", WAVEMLA_BATCH_INVARIANT="yes", WAVEMLA_GPU="b200"):
        assert config.get("WAVEMLA_BLOCK_N") == 32
        assert config.get("WAVEMLA_BATCH_INVARIANT") is True
        assert config.get("WAVEMLA_GPU") == "b200"


def test_override_none_means_unset(environ: dict[str, str]) -> None:
    """None in an override hides the environment value: the knob reads as its default."""
    environ.update({"WAVEMLA_BLOCK_H": "32", "WAVEMLA_BATCH_INVARIANT": "1"})
    with config.override(WAVEMLA_BLOCK_H=None, WAVEMLA_BATCH_INVARIANT=None):
        assert config.get("WAVEMLA_BLOCK_H") is None
        assert config.get("WAVEMLA_BATCH_INVARIANT") is False
    assert config.get("WAVEMLA_BLOCK_H") == 32
    assert config.get("WAVEMLA_BATCH_INVARIANT") is True


# ---------------------------------------------------------------- table (what `wavemla env` prints)


def test_table_reports_every_knob_and_errors_without_raising(environ: dict[str, str]) -> None:
    environ.update({"WAVEMLA_BLOCK_H": "17", "WAVEMLA_NUM_WARPS": "8"})
    rows = {row["name"]: row for row in config.table()}
    assert list(rows) == list(config.KNOBS)
    bad = rows["WAVEMLA_BLOCK_H"]
    assert bad["raw"] == "17" and bad["value"] is None
    assert bad["error"] is not None and "WAVEMLA_BLOCK_H" in bad["error"]
    good = rows["WAVEMLA_NUM_WARPS"]
    assert good["raw"] == "8" and good["value"] == 8 and good["error"] is None
    assert good["allowed"] == "allowed values: 2, 4, 8, 16"
    assert rows["WAVEMLA_BATCH_INVARIANT"]["default"] is False
    for row in rows.values():
        assert set(row) == {"name", "type", "default", "raw", "value", "allowed", "doc", "error"}
        assert row["doc"]


def test_every_knob_is_well_formed() -> None:
    for name, knob in config.KNOBS.items():
        assert name == knob.name and name.startswith("WAVEMLA_")
        assert knob.type in ("int", "bool", "str")
        if knob.default is not None:
            # the default must be a value the parser itself could produce
            assert knob.parse(str(int(knob.default) if knob.type == "bool" else knob.default)) == knob.default


# ---------------------------------------------------------------- the single env read point

_ENV_ACCESS = re.compile(
    r"os\.environ|os\.getenv|environ\[|\bgetenv\s*\(|\bputenv\s*\(|from\s+os\s+import\s+[^\n]*\b(environ|getenv)\b"
)


def test_only_config_reads_the_environment() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert SRC / "config.py" in files and len(files) > 1
    offenders = []
    for path in files:
        if path == SRC / "config.py":
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _ENV_ACCESS.search(line):
                offenders.append(f"{path.relative_to(SRC.parent)}:{lineno}: {line.strip()}")
    assert not offenders, "read environment variables through wavemla.config only:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "line",
    [
        "x = os.environ.get('A')",
        "os.getenv('A')",
        "environ['A']",
        "from os import environ",
        "from os import path, getenv",
        "value = getenv('A')",
    ],
)
def test_env_scan_catches(line: str) -> None:
    assert _ENV_ACCESS.search(line)


@pytest.mark.parametrize("line", ["config.get('WAVEMLA_GPU')", "environment = {}", "from os import path"])
def test_env_scan_ignores(line: str) -> None:
    assert not _ENV_ACCESS.search(line)


def test_an_unknown_wavemla_variable_is_warned_of_once(environ: dict[str, str]) -> None:
    """A ``WAVEMLA_*`` variable that is no knob (misspelt: ``WAVEMLA_BLOCK_HH``) is ignored, with a warning naming it
    once; other names are not wavemla's business."""
    environ.update({"WAVEMLA_BLOCK_HH": "32", "WAVEMLAX": "1", "OTHER": "1"})
    config._warned.discard("WAVEMLA_BLOCK_HH")
    assert config.unknown_names() == ["WAVEMLA_BLOCK_HH"]
    with pytest.warns(UserWarning, match="WAVEMLA_BLOCK_HH is not a wavemla knob"):
        assert config.get("WAVEMLA_BLOCK_H") is None
    config.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.get("WAVEMLA_BLOCK_H") is None


@pytest.mark.parametrize(
    ("value", "requested"),
    [("1", True), ("true", True), ("TRUE", True), ("on", True), ("Yes", True), ("y", True), ("0", False),
     ("false", False), ("off", False), ("", False), ("2", False)],
)  # fmt: skip
def test_the_interpreter_flag_is_read_as_triton_reads_it(environ: dict[str, str], value: str, requested: bool) -> None:
    environ["TRITON_INTERPRET"] = value
    assert config.interpreter_requested() is requested


def test_a_spelled_out_interpreter_flag_runs_the_kernels() -> None:
    """``TRITON_INTERPRET=true`` turns Triton's interpreter on as ``1`` does: the NumPy fix the interpreter needs is
    installed for it too, so a decode runs (it failed with an InterpreterError on 0-dimensional arrays)."""
    from tests.conftest import json_from_child

    ran = json_from_child(
        "import json, os\n"
        "os.environ['TRITON_INTERPRET'] = 'true'\n"
        "import torch, wavemla\n"
        "from wavemla.testing import make_dense_decode_inputs\n"
        "x = make_dense_decode_inputs(lengths=[9, 3], h_q=4, page=8, dtype=torch.float16, device='cpu', seed=1)\n"
        "out, lse = wavemla.dense_mla_decode(**x)\n"
        "print(json.dumps({'finite': bool(torch.isfinite(out).all())}))\n"
    )
    assert ran == {"finite": True}


def test_the_interpreter_can_be_chosen_after_importing_wavemla() -> None:
    """The CPU tools (demo, stress, layer-bench) import wavemla, then choose Triton's interpreter: importing the
    package must not import Triton, whose mode is fixed when it is imported; once Triton is imported the choice
    raises."""
    from tests.conftest import json_from_child

    chosen = json_from_child(
        "import json, sys\n"
        "import wavemla, wavemla.cli\n"
        "wavemla.cli.build_parser()\n"
        "before = 'triton' in sys.modules\n"
        "from wavemla import config\n"
        "config.use_triton_interpreter()\n"
        "import triton\n"
        "print(json.dumps({'triton_before': before, 'interpret': bool(triton.knobs.runtime.interpret)}))\n"
    )
    assert chosen == {"triton_before": False, "interpret": True}
    late = json_from_child(
        "import json\n"
        "import triton\n"
        "from wavemla import config\n"
        "try:\n"
        "    config.use_triton_interpreter()\n"
        "    print(json.dumps({'raised': ''}))\n"
        "except RuntimeError as e:\n"
        "    print(json.dumps({'raised': str(e)}))\n"
    )
    assert "after Triton was imported" in late["raised"]
