"""Grid dependency control (programmatic dependent launch, sm_90+), as Triton exposes it.

Kernels call these only under a ``PDL`` constexpr that the launcher sets from
:func:`wavemla.device.dependent_launch`; Triton builds without ``triton.language.extra.cuda.gdc_*`` get
stand-ins that are never compiled into a kernel (the launcher then leaves ``PDL`` off).
"""

from __future__ import annotations

import triton
import triton.language as tl

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


__all__ = ["AVAILABLE", "gdc_launch_dependents", "gdc_wait"]
