"""The one registry of wavemla's environment knobs.

Every environment variable wavemla reads is declared here once, with its type, default, allowed values and
documentation. Nothing else in the package reads ``os.environ`` (a test enforces this). Values are parsed on first
use and cached; an invalid value raises :class:`KnobError` naming the variable and what it accepts.

Read a knob as ``config.get("WAVEMLA_BLOCK_H")``. Tests override knobs with :func:`override`, which restores the
previous state on exit::

    from wavemla import config
    with config.override(WAVEMLA_BLOCK_H=16):
        assert config.get("WAVEMLA_BLOCK_H") == 16
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class KnobError(ValueError):
    """An environment knob holds a value wavemla cannot use."""


@dataclass(frozen=True)
class Knob:
    """One environment variable: how to parse it and what it means."""

    name: str
    type: str  # "int", "bool" or "str"
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None

    def parse(self, raw: str) -> Any:
        text = raw.strip()
        if self.type == "bool":
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise KnobError(f"{self.name}={raw!r}: expected a boolean (1/0, true/false, yes/no, on/off)")
        if self.type == "int":
            try:
                value: Any = int(text)
            except ValueError:
                raise KnobError(f"{self.name}={raw!r}: expected an integer; {self.allowed()}") from None
        else:
            value = text
        if self.choices is not None and value not in self.choices:
            raise KnobError(f"{self.name}={raw!r}: {self.allowed()}")
        if self.minimum is not None and value < self.minimum:
            raise KnobError(f"{self.name}={raw!r}: {self.allowed()}")
        if self.maximum is not None and value > self.maximum:
            raise KnobError(f"{self.name}={raw!r}: {self.allowed()}")
        return value

    def allowed(self) -> str:
        if self.choices is not None:
            return "allowed values: " + ", ".join(str(c) for c in self.choices)
        if self.type == "bool":
            return "allowed values: 0 or 1"
        lo = "" if self.minimum is None else str(self.minimum)
        hi = "" if self.maximum is None else str(self.maximum)
        if lo or hi:
            return f"allowed range: {lo or '-inf'}..{hi or 'inf'}"
        return f"any {self.type}"


# Unset (None) means "the planner decides". Tile knobs force the planner's choice and are validated against
# what the kernel supports; an override the kernel cannot honour raises a PlanError naming the knob.
KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "WAVEMLA_BLOCK_H",
            "int",
            None,
            "Query heads per program (the BLOCK_H tile) of the split kernels (sparse and dense decode). Each gathered "
            "KV tile is shared by this many heads. The sparse prefill has its own tiles (checked, not applied).",
            choices=(16, 32, 64),
        ),
        Knob(
            "WAVEMLA_BLOCK_N",
            "int",
            None,
            "KV rows per tile (the BLOCK_N tile) of the split kernels (sparse and dense decode); the sparse prefill "
            "has its own tiles (checked, not applied).",
            choices=(16, 32, 64),
        ),
        Knob(
            "WAVEMLA_NUM_WARPS",
            "int",
            None,
            "Warps per program of the split kernels (sparse and dense decode). The warp-specialized sm_90 kernels "
            "keep their own warpgroups wherever they take the tile (WAVEMLA_SPARSE_WS / WAVEMLA_DENSE_WS=off runs "
            "the Triton kernel with these warps); the sparse prefill has its own tiles (checked, not applied).",
            choices=(2, 4, 8, 16),
        ),
        Knob(
            "WAVEMLA_NUM_STAGES",
            "int",
            None,
            "Software-pipelining depth of the KV loop (Triton num_stages); with FP8 caches 2 or 3 selects the "
            "staged tiles (raw rows through cp.async, decoded per 64- or 128-wide block), 1 the register-decoded "
            "ones. Not read by the warp-specialized sm_90 kernels (their two stages are fixed); the sparse prefill "
            "has its own tiles (checked, not applied).",
            choices=(1, 2, 3),
        ),
        Knob(
            "WAVEMLA_NUM_SPLITS",
            "int",
            None,
            "Force every query token's rows into this many pieces of ceil(tiles / N) tiles (split-KV; fewer where "
            "that size covers a token in fewer), instead of the planner's balanced partition (sparse decode; in "
            "batch-invariant mode among the tiles whose tokens it divides). The dense decode, and DeepSeek-V3.2's "
            "sparse decode that runs on it, refuse it (PlanError): their schedule balances the whole batch's tiles "
            "and cuts no request into fixed pieces; WAVEMLA_TARGET_CTAS sets their program slots.",
            minimum=1,
            maximum=256,
        ),
        Knob(
            "WAVEMLA_TARGET_CTAS",
            "int",
            None,
            "Program slots the planner balances work over (default: resident programs per SM x SMs); for the "
            "dense decode, the slots its parts fill: slots // row blocks parts, at least one, so fewer slots than "
            "row blocks (query rows / BLOCK_H) still launch a program per row block (the plan's reasons say so).",
            minimum=1,
            maximum=1 << 20,
        ),
        Knob(
            "WAVEMLA_BATCH_INVARIANT",
            "bool",
            False,
            "Make each request's output bits independent of batch size and composition (fixed split boundaries "
            "per request, fixed reduction order) in the DeepSeek-V4 sparse decode; the sparse prefill then runs "
            "whole lists in one tile per head count, whatever the token count. The dense decode and DeepSeek-V3.2's "
            "sparse decode have no such mode and refuse calls while it is set. A call passed batch_invariant=False "
            "(or True) follows its argument, not the knob.",
        ),
        Knob(
            "WAVEMLA_FP8_DECODE",
            "str",
            "auto",
            "How the sparse decode, the indexer and the dense decode's staged FP8 tiles read e4m3 bytes: 'cvt' (the "
            "hardware conversion, two values per instruction, and FP8 tensor-core dots for FP8 indexer queries; "
            "sm_89 and newer), 'bits' (integer bit assembly into fp16; every architecture), 'auto' (cvt where it "
            "exists). Both give the same results for every code (the NaN codes 0x7F/0xFF read as NaN through "
            "either); the dense decode's register-prefetched FP8 tiles always use bit "
            "assembly, and read the NaN codes as ±480 (NaN-exact, they measured 2-3% slower on an H100).",
            choices=("auto", "cvt", "bits"),
        ),
        Knob(
            "WAVEMLA_L2_POLICIES",
            "str",
            "auto",
            "L2 eviction policies of the sparse decode's split kernel: gathered rows evict_first, cut tokens' "
            "partials evict_last. 'auto': FP8 rows in every tile shape but 64x32 (measured on an H200: 5-9% faster "
            "there, 2-3% slower in 64x32 tiles), 'on': every launch, 'off': none. Results are the same every way.",
            choices=("auto", "on", "off"),
        ),
        Knob(
            "WAVEMLA_DENSE_P",
            "str",
            "single",
            "How the dense decode's softmax weights P meet V on bf16 rows: 'single' (one dot of bf16(P), 8 bits of "
            "every weight, as FlashMLA and the sparse decode round them: an output element can be off by up to "
            "2^-9 of the largest |v| it reads), 'split' (bf16(P) plus bf16(P - bf16(P)), two dots, 16 bits; on an "
            "H200 10-15% slower with 16 heads, and 5-14% with 64 and 128, whose keys-major tiles then also compute "
            "S^T in both warpgroups). fp16 and FP8 rows always use one fp16 dot.",
            choices=("split", "single"),
        ),
        Knob(
            "WAVEMLA_DENSE_WS",
            "str",
            "auto",
            "The dense decode's warp-specialized split kernel (Gluon, sm_90: one TMA warp, two math warpgroups) "
            "for bf16/fp16 rows of width 576 in pages of a multiple of 64 keys with s_q*h a multiple of 64 and one "
            "dot of P (not bf16 rows under WAVEMLA_DENSE_P=split), Triton 3.6 and newer. 'auto' and 'on': wherever "
            "it applies, 'off': the Triton kernel everywhere.",
            choices=("auto", "on", "off"),
        ),
        Knob(
            "WAVEMLA_DENSE_ALIGN",
            "str",
            "auto",
            "Whether the dense decode's scheduler may give each request a part of its own (no request cut, nothing "
            "for the combine to merge) where there are no more requests than parts and the heaviest costs no more "
            "than a balanced part plus the planner's price of cutting: 'auto', or 'off' (always the balanced "
            "partition).",
            choices=("auto", "off"),
        ),
        Knob(
            "WAVEMLA_SPARSE_WS",
            "str",
            "auto",
            "The sparse decode's warp-specialized split kernel (Gluon, sm_90: one warpgroup gathers and decodes FP8 "
            "MODEL1 rows, two math warpgroups) for FP8 caches with h_q a multiple of 64 in 64x64 tiles, Triton 3.6 "
            "and newer. 'auto' and 'on': wherever it applies, 'off': the Triton kernel everywhere.",
            choices=("auto", "on", "off"),
        ),
        Knob(
            "WAVEMLA_SPARSE_WS_MERGE",
            "str",
            "auto",
            "Where the sparse decode's warp-specialized kernel merges query tokens cut between its programs. 'auto': "
            "in the kernel (the piece that completes a token's count merges it) for default plans whose programs hold "
            "at least a token's tiles and cut tokens into 2 pieces, elsewhere (and in batch-invariant plans) by the "
            "combine kernel; 'on': in the kernel for every cut token; 'off': by the combine kernel.",
            choices=("auto", "on", "off"),
        ),
        Knob(
            "WAVEMLA_LAUNCH",
            "str",
            "replay",
            "How the decode calls launch their kernels when a call repeats one made before with the same metadata "
            "(sparse and dense decode) or arguments (indexer): 'replay' launches the compiled kernels directly with "
            "the new tensors' addresses, skipping Triton's per-launch argument binding (same kernels, same "
            "arguments); 'triton': every launch through Triton's launch path.",
            choices=("replay", "triton"),
        ),
        Knob(
            "WAVEMLA_ENGINE_PATCH",
            "str",
            "off",
            "What wavemla's vLLM and SGLang plugins (entry points the engines call in every process they start) do: "
            "'off' nothing, 'decode' patch the engine's FlashMLA decode calls with wavemla's, 'decode+prefill' its "
            "sparse prefill call (flash_mla_sparse_fwd) as well.",
            choices=("off", "decode", "decode+prefill"),
        ),
        Knob(
            "WAVEMLA_GPU",
            "str",
            None,
            "DeviceSpec preset to plan for instead of querying the GPU (see `wavemla plan --help` for names).",
        ),
        Knob(
            "WAVEMLA_CACHE_DIR",
            "str",
            None,
            "Directory of wavemla's on-disk caches (compiled kernel resources per config, arch and Triton version); "
            "unset: ~/.cache/wavemla.",
        ),
    )
}

_cache: dict[str, Any] = {}
_overrides: dict[str, Any] = {}
_generation = [0]  # bumped whenever a knob's value may change (reload, override): see generation()
_environ: Callable[[], Any] = lambda: os.environ  # noqa: E731 - the single read point of the environment
_warned: set[str] = set()


def unknown_names() -> list[str]:
    """``WAVEMLA_*`` environment variables that are no knob (a misspelt or a retired name): wavemla ignores them,
    so :func:`get` warns of each once and ``wavemla env`` reports them as errors."""
    return sorted(name for name in _environ() if name.startswith("WAVEMLA_") and name not in KNOBS)


def _warn_unknown() -> None:
    for name in unknown_names():
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"{name} is not a wavemla knob and is ignored (`wavemla env` lists the knobs)", stacklevel=3)


def get(name: str) -> Any:
    """The knob's current value: an override, else the parsed environment value, else (unset, empty or blank) the
    default."""
    if name not in KNOBS:
        raise KeyError(f"unknown wavemla knob {name!r}; known: {', '.join(KNOBS)}")
    if name in _overrides:
        return _overrides[name]
    if name not in _cache:
        if not _cache:  # the first read since the environment was (re)loaded
            _warn_unknown()
        raw = _environ().get(name)
        _cache[name] = KNOBS[name].default if raw is None or not raw.strip() else KNOBS[name].parse(raw)
    return _cache[name]


def raw(name: str) -> str | None:
    """The unparsed environment value of a knob (None when unset); used by ``wavemla env``."""
    if name not in KNOBS:
        raise KeyError(f"unknown wavemla knob {name!r}")
    return _environ().get(name)


def reload() -> None:
    """Forget parsed values so the next :func:`get` reads the environment again."""
    _cache.clear()
    _generation[0] += 1


def generation() -> int:
    """A number that changes whenever a knob's value may have changed (:func:`reload`, :func:`override`): callers
    that keep work decided under the knobs (the decode calls' launch replays) key it on this."""
    return _generation[0]


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Temporarily set knobs (validated like environment values; ``None`` means unset)."""
    saved = dict(_overrides)
    _generation[0] += 1
    try:
        for name, value in values.items():
            if name not in KNOBS:
                raise KeyError(f"unknown wavemla knob {name!r}")
            knob = KNOBS[name]
            if value is None or (isinstance(value, str) and not value.strip()):  # unset, as a blank environment value
                _overrides[name] = knob.default
            else:
                _overrides[name] = knob.parse(str(int(value) if isinstance(value, bool) else value))
        yield
    finally:
        _overrides.clear()
        _overrides.update(saved)
        _generation[0] += 1


def environ_without(*names: str) -> dict[str, str]:
    """A copy of this process's environment minus ``names``, for a child process (e.g. a compile worker that must
    not inherit ``TRITON_INTERPRET``, which Triton reads once, when it is imported)."""
    return {k: v for k, v in _environ().items() if k not in names}


def use_triton_interpreter() -> None:
    """Run wavemla's Triton kernels through Triton's interpreter (CPU tensors).

    Triton decides when a kernel is defined (``@triton.jit`` reads ``TRITON_INTERPRET`` then, its own library's
    functions when Triton is imported), so this must run before Triton is imported; importing ``wavemla`` does not
    import it. Raises otherwise. Also readies the interpreter for NumPy 2.4
    (:func:`wavemla.kernels.interpret.fix_scalar_index`).
    """
    import sys

    if not interpreter_requested():
        if "triton" in sys.modules:  # its own library functions (tl.sum, ...) are then defined for compilation
            raise RuntimeError("use_triton_interpreter() called after Triton was imported")
        _environ()["TRITON_INTERPRET"] = "1"
    from wavemla.kernels.interpret import fix_scalar_index

    fix_scalar_index()


# the values Triton reads as true (its getenv_bool, case-insensitive)
_TRUE_ENV = frozenset({"1", "true", "on", "yes", "y"})


def interpreter_requested() -> bool:
    """Whether ``TRITON_INTERPRET`` asks for Triton's interpreter, read as Triton reads it (``1``, ``true``, ``on``,
    ``yes``, ``y``, any case), without importing Triton."""
    return (_environ().get("TRITON_INTERPRET") or "").lower() in _TRUE_ENV


def environ_value(name: str) -> str | None:
    """This process's value of environment variable ``name`` (None when unset), as the knobs read it."""
    return _environ().get(name)


def table() -> list[dict[str, Any]]:
    """Every knob with its default, raw and effective value (an invalid value is reported, not raised)."""
    rows = []
    for knob in KNOBS.values():
        try:
            value: Any = get(knob.name)
            error = None
        except KnobError as exc:
            value, error = None, str(exc)
        rows.append(
            {
                "name": knob.name,
                "type": knob.type,
                "default": knob.default,
                "raw": raw(knob.name),
                "value": value,
                "allowed": knob.allowed(),
                "doc": knob.doc,
                "error": error,
            }
        )
    return rows
