"""Print versions, the CUDA device, the WAVEMLA_GPU preset and every WAVEMLA_* knob with its values.

For each knob: its default, the raw environment string, the effective value and the allowed values. Triton's
``TRITON_OVERRIDE_ARCH`` (kernels built along another architecture's code path) is shown beside its version, and
what an engine's ``import flash_mla`` gets in this process (wavemla's stand-in, FlashMLA, or nothing), with the engine
modules ``wavemla.flash_mla.patch`` has patched or waits for, and the engine plugins vLLM and SGLang would find
(``wavemla.plugins``) with what ``WAVEMLA_ENGINE_PATCH`` makes them do. ``--json``
prints the same as one JSON object, for bug reports and benchmark records. An invalid knob value, or a
``WAVEMLA_GPU`` that names no preset, is reported as an error and makes the exit code 2. Where wavemla runs from a git
checkout, its commit is shown too (``-dirty`` when tracked files differ from it).

Example::

    wavemla env
    WAVEMLA_BLOCK_H=17 wavemla env --json   # exit code 2; "errors" names WAVEMLA_BLOCK_H
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
from typing import Any

from wavemla import config
from wavemla.device import DeviceSpec, NoCudaDeviceError, get_spec, triton_override_arch
from wavemla.tools.revision import source_revision


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def collect() -> dict[str, Any]:
    """Everything ``wavemla env`` reports, as a JSON-serialisable dict; ``errors`` lists every problem."""
    import numpy
    import torch
    import triton

    import wavemla
    from wavemla.flash_mla import patched_names, resolves_to
    from wavemla.plugins import registered_groups

    knobs = config.table()
    errors = [row["error"] for row in knobs if row["error"]]
    errors += [f"{name}: not a wavemla knob, ignored" for name in config.unknown_names()]
    try:
        override_arch = triton_override_arch()
    except ValueError as exc:
        override_arch = None
        errors.append(str(exc))

    cuda_device: dict[str, Any] | None = None
    try:
        cuda_device = dataclasses.asdict(DeviceSpec.from_torch())
        cuda_note = None
    except NoCudaDeviceError:
        cuda_note = "no CUDA device"
    except (RuntimeError, ValueError) as exc:  # a device wavemla cannot describe, e.g. older than sm_80
        cuda_note = f"unsupported CUDA device: {exc}"

    preset: dict[str, Any] | None = None
    gpu_row = next(row for row in knobs if row["name"] == "WAVEMLA_GPU")
    if gpu_row["value"] is not None:
        try:
            preset = dataclasses.asdict(get_spec(gpu_row["value"]))
        except (RuntimeError, ValueError) as exc:  # unknown name, or "auto" without a usable GPU
            errors.append(f"WAVEMLA_GPU={gpu_row['value']!r}: {exc}")

    return {
        "wavemla": getattr(wavemla, "__version__", "unknown"),
        # the git commit of the checkout wavemla is imported from ("-dirty": edited), None for an installed wheel
        "source": source_revision(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
        # Triton's own knob (TRITON_INTERPRET): kernels run on the CPU interpreter instead of being compiled.
        "triton_interpreter": bool(triton.knobs.runtime.interpret),
        # Triton's own knob (TRITON_OVERRIDE_ARCH): kernels built along another architecture's code path
        "triton_override_arch": override_arch,
        "cuda_device": cuda_device,
        "cuda_device_note": cuda_note,
        "gpu_preset": preset,
        # what an engine's `import flash_mla` gets in this process (a sitecustomize may have installed wavemla's)
        "flash_mla": resolves_to("flash_mla"),
        # engine modules whose decode calls wavemla.flash_mla.patch() replaced, or replaces when they are imported
        "flash_mla_patched": patched_names(),
        # entry-point groups (vLLM's, SGLang's) in which the installed wavemla declares its engine plugin
        "engine_plugins": registered_groups(),
        "knobs": knobs,
        "errors": errors,
    }


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    return repr(value) if isinstance(value, str) else str(value)


def _spec_line(spec: dict[str, Any]) -> str:
    return DeviceSpec(**spec).summary()


def format_text(info: dict[str, Any]) -> str:
    """The human-readable report for :func:`collect`'s dict."""
    lines = [
        f"wavemla       {info['wavemla']}"
        + (f" (source {info['source']})" if info.get("source") else " (not a git checkout)"),
        f"python        {info['python']} ({info['platform']})",
        f"torch         {info['torch']} (CUDA runtime {info['torch_cuda'] or 'none'})",
        f"triton        {info['triton']} (interpreter {'on' if info['triton_interpreter'] else 'off'}"
        + (
            f"; kernels built for sm_{info['triton_override_arch']} by TRITON_OVERRIDE_ARCH)"
            if info["triton_override_arch"]
            else ")"
        ),
        f"numpy         {info['numpy']}",
        f"flash_mla     {info['flash_mla']}",
    ]
    if info.get("flash_mla_patched"):
        lines.append(f"              patched by wavemla: {', '.join(info['flash_mla_patched'])}")
    mode = next(row for row in info["knobs"] if row["name"] == "WAVEMLA_ENGINE_PATCH")
    doing = "ERROR" if mode["error"] else {"off": "nothing"}.get(mode["value"], f"patch {mode['value']}")
    lines.append(
        f"plugins       {', '.join(info['engine_plugins'])} (WAVEMLA_ENGINE_PATCH: {doing})"
        if info["engine_plugins"]
        else "plugins       none registered (wavemla is not installed: `pip install -e .`)"
    )
    if info["cuda_device"] is not None:
        lines.append(f"cuda device   {_spec_line(info['cuda_device'])}")
        lines.append(f"              source: {info['cuda_device']['source']}")
    else:
        lines.append(f"cuda device   {info['cuda_device_note']}")
    if info["gpu_preset"] is not None:
        lines.append(f"WAVEMLA_GPU   {_spec_line(info['gpu_preset'])} (plans use this preset)")
    else:
        gpu_row = next(row for row in info["knobs"] if row["name"] == "WAVEMLA_GPU")
        lines.append(
            "WAVEMLA_GPU   "
            + (
                "unset (plans use the CUDA device)"
                if gpu_row["value"] is None  # unset, empty or blank
                else f"{gpu_row['raw']!r} (not usable, see errors)"
            )
        )

    header = ("knob", "default", "raw", "value", "allowed")
    rows = [
        (r["name"], _show(r["default"]), _show(r["raw"]), "ERROR" if r["error"] else _show(r["value"]), r["allowed"])
        for r in info["knobs"]
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines.append("")
    for row in [header, *rows]:
        padded = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*padded, row[-1]]))
    if info["errors"]:
        lines.append("")
        lines.extend(f"error: {e}" for e in info["errors"])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the report; 2 when a knob holds an invalid value, else 0."""
    info = collect()
    print(json.dumps(info, indent=2) if args.json else format_text(info))
    return 2 if info["errors"] else 0
