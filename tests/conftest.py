"""Test lanes: without CUDA every Triton kernel runs through the interpreter (set before Triton is imported)."""

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
# The serving tests' real server: `transformers serve` from the test extra (transformers[serving] >= 5.23).
SERVING_MODULES = ("transformers", "fastapi", "uvicorn", "openai")
SERVING_MIN_TRANSFORMERS = (5, 23)


def serving_stack_missing() -> str | None:
    """Why `transformers serve` cannot run here (a missing module, an old transformers), or None."""
    for name in SERVING_MODULES:
        if importlib.util.find_spec(name) is None:
            return f"no module {name!r}"
    version = importlib.metadata.version("transformers")
    if tuple(int(x) for x in re.findall(r"\d+", version)[:2]) < SERVING_MIN_TRANSFORMERS:
        return f"transformers {version} < {'.'.join(map(str, SERVING_MIN_TRANSFORMERS))}"
    return None


if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

DEVICE = "cuda" if HAS_CUDA else "cpu"
SRC = Path(__file__).resolve().parents[1] / "src"


def child_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a fresh Python with the package importable and Triton's interpreter off (this process's
    flag would turn a kernel compiled for a ``GPUTarget`` into an interpreted function); ``environ``: the variables
    it starts from (default this process's)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    return env


def json_from_child(script: str, environ: dict[str, str] | None = None) -> dict:
    """Run ``script`` in a fresh Python (:func:`child_environ`). Returns the JSON object its last line prints;
    fails the test with the child's stderr if it exits non-zero."""
    done = subprocess.run([sys.executable, "-c", script], env=child_environ(environ), capture_output=True, text=True,
                          check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def capture_graph(call: Callable[[], Any]) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Run ``call`` once on a side stream (warm-up: compiles, allocates), then capture one call of it into a CUDA
    graph there; returns the graph and the captured call's outputs (rewritten by every replay)."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()
        with torch.cuda.graph(graph, stream=stream):
            captured = call()
    torch.cuda.synchronize()
    return graph, captured


def gpu_lacks_e4m3_cvt() -> bool:
    """Whether the GPU lane's kernels are built for an architecture without the hardware e4m3 conversion (sm_80/86,
    or Triton told to build for one with TRITON_OVERRIDE_ARCH)."""
    if not HAS_CUDA:
        return False
    from wavemla import config
    from wavemla.device import fp8_decode_path

    with config.override(WAVEMLA_FP8_DECODE="auto"):
        return fp8_decode_path("cuda") == "bits"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    missing = serving_stack_missing()
    skip_serving = pytest.mark.skip(reason=f"needs transformers[serving] (pip install -e '.[test]'): {missing}")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
        if "serving" in item.keywords and missing:
            item.add_marker(skip_serving)


@pytest.fixture
def device() -> str:
    return DEVICE
