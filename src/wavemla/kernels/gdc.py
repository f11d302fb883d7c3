"""Grid dependency control (programmatic dependent launch, sm_90+), as Triton exposes it.

Kernels call these only under a ``PDL`` constexpr that the launcher sets from :func:`enabled`; Triton builds
without ``triton.language.extra.cuda.gdc_*`` get stand-ins that are never compiled into a kernel (:func:`enabled`
is then False).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from wavemla.device import dependent_launch

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

    AVAILABLE = True
except ImportError:  # pragma: no cover - Triton builds before grid dependency control
    AVAILABLE = False

    @triton.jit
    def gdc_wait() -> None:  # type: ignore[misc]
        tl.static_assert(False, "griddepcontrol needs a Triton with triton.language.extra.cuda.gdc_wait")

    @triton.jit
    def gdc_launch_dependents() -> None:  # type: ignore[misc]
        tl.static_assert(False, "griddepcontrol needs a Triton with triton.language.extra.cuda.gdc_wait")


def enabled(device: Any) -> bool:
    """Whether launches on ``device`` use programmatic dependent launch: this Triton has grid dependency control
    and :func:`wavemla.device.dependent_launch` allows it (sm_90+, compiled kernels)."""
    return AVAILABLE and dependent_launch(device)


__all__ = ["AVAILABLE", "enabled", "gdc_launch_dependents", "gdc_wait"]
