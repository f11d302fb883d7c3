"""Triton's interpreter (``TRITON_INTERPRET=1``, the CPU lane and ``wavemla demo`` without a GPU) under NumPy 2.4.

Under the interpreter a kernel scalar (a program id, ``lo // n``) is a one-element NumPy array, and a kernel's
``range(lo, hi)`` turns it into a Python int through ``tl.tensor.__index__``. Triton 3.5 and 3.6 define that as
``int(array)``, which NumPy 2.4 refuses for an array of one dimension ("only 0-dimensional arrays can be converted
to Python scalars"); Triton 3.7 and newer squeeze the array first. :func:`fix_scalar_index` makes 3.5 and 3.6
behave as 3.7 does (on 3.7 and newer it changes nothing). Compiled kernels never run this code.
"""

from __future__ import annotations

import functools
from typing import Any

_MARK = "_wavemla_scalar_index"


def _scalar_index(self: Any) -> int:
    data = self.handle.data
    if data.size != 1:
        raise TypeError(f"only a scalar can be used as an index, not a block of shape {tuple(data.shape)}")
    return int(data.reshape(()))


def fix_scalar_index() -> bool:
    """Wrap the interpreter's per-launch patch of ``tl.tensor`` so ``__index__`` accepts a one-element array of
    any rank. Idempotent; returns whether the interpreter's patch function was found (and is now wrapped)."""
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None:
        return False
    if getattr(patch, _MARK, False):
        return True

    @functools.wraps(patch)
    def patched(tensor: Any, *scope: Any) -> None:
        patch(tensor, *scope)
        if scope:  # Triton 3.6+: the launch's scope restores the attribute afterwards
            scope[0].set_attr(tensor, "__index__", _scalar_index)
        else:  # Triton 3.5: set for the process, as Triton itself does
            tensor.__index__ = _scalar_index

    setattr(patched, _MARK, True)
    interpreter._patch_lang_tensor = patched
    return True
