"""Fit per-component decode GPU time against batch size from profiler traces; name the slope driver.

Reads Kineto Chrome traces (``.json`` or ``.json.gz``; SGLang, vLLM and plain ``torch.profiler`` output) and
Nsight Systems SQLite exports (``nsys export --type sqlite``; :mod:`wavemla.tools.nsys`), one or more per batch
size. GPU kernels (``ph == "X"`` events whose category contains ``kernel``, plus ``gpu_memcpy`` and
``gpu_memset``) are sorted into components by ordered name rules
(:mod:`wavemla.tools.trace_rules`). For each trace the busy time of every component is the union of its
kernel intervals across streams, divided by the number of decode steps in the trace;
``gpu_user_annotation`` ranges are never added to kernel time. Then ``time = a + b·batch`` is fitted per
component by least squares; ``b`` is the marginal GPU time per extra request, and the component with the
largest ``b`` is the slope driver.

Example::

    wavemla trace runs/decode_bs32.trace.json.gz runs/decode_bs80.trace.json.gz \\
        --step-kernel flash_fwd_splitkv_mla --kernels-per-step 43 --json slope.json --png slope.png

Library use::

    from wavemla.tools.trace import TraceInput, StepSpec, analyze
    report = analyze([TraceInput("a_bs32.json", 32), TraceInput("a_bs80.json", 80)], StepSpec())
    print(report.fit.driver if report.fit else "no fit")
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wavemla.tools import nsys
from wavemla.tools.trace_rules import MEMCPY, OTHER, RuleSet, build_ruleset, default_rules

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

SCHEMA = "wavemla.trace/1"
_GZIP_MAGIC = b"\x1f\x8b"
_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")  # what a directory argument is searched for
_MEMCPY_CATEGORIES = frozenset({"gpu_memcpy", "gpu_memset", "memcpy", "memset"})
_ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation", "user_annotation"})
# Launch calls: cudaLaunchKernel / cudaGraphLaunch ("Runtime" in older Kineto); Triton uses cuLaunchKernel.
_RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "runtime", "cuda_driver"})
# Host ranges a --scope can name: ATen operators, Python frames (profiler with_stack=True, e.g. "nn.Module: Foo_0"),
# record_function ranges.
_SCOPE_CATEGORIES = frozenset({"cpu_op", "python_function", "user_annotation"})
_US_PER_MS = 1000.0


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class TraceInput:
    """One trace file and the batch size it was captured at (None: unknown, allowed only without a fit)."""

    path: Path | str
    batch: int | None


@dataclass(frozen=True)
class StepSpec:
    """How to count decode steps in a trace.

    ``marker``: regex over annotation names; each matching ``gpu_user_annotation`` range on a device is one step
    (its copies on other streams, which share its ``External id``, count once) and only kernels starting inside
    those ranges are counted (falls back to matching CPU
    ``user_annotation`` events, which only give the count). ``kernel``: regex over kernel names; steps =
    matches on a device / ``kernels_per_step`` (e.g. the attention kernel and the layer count). Neither:
    the whole trace is one step.
    """

    marker: str | None = None
    kernel: str | None = None
    kernels_per_step: int = 1

    def __post_init__(self) -> None:
        if self.marker is not None and self.kernel is not None:
            raise ValueError("--step-marker and --step-kernel are exclusive: pick one way to count steps")
        if self.kernels_per_step < 1:
            raise ValueError(f"--kernels-per-step must be >= 1, got {self.kernels_per_step}")
        if self.kernel is None and self.kernels_per_step != 1:
            raise ValueError("--kernels-per-step needs --step-kernel (the kernel it counts)")
        for flag, pattern in (("--step-marker", self.marker), ("--step-kernel", self.kernel)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ValueError(f"{flag}: invalid regular expression {pattern!r}: {e}") from None

    @property
    def source(self) -> str:
        return "marker" if self.marker is not None else "kernel" if self.kernel is not None else "whole"


@dataclass(frozen=True)
class Scope:
    """``component``: every kernel launched from inside a host range (an ATen operator, a Python frame, a
    ``record_function`` range) whose name matches ``pattern`` belongs to it, whatever its name. For kernels whose
    names do not say what they serve: eager attention's GEMMs and softmax, a fused MoE's elementwise kernels.
    Scopes are tried in order before the name rules; the first whose ranges hold the launch wins. Kernels replayed
    by a CUDA graph follow their ``cudaGraphLaunch``."""

    component: str
    pattern: str

    def __post_init__(self) -> None:
        if not self.component:
            raise ValueError(f"--scope: expected COMPONENT=REGEX, got an empty component ({self.pattern!r})")
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ValueError(f"--scope {self.component}: invalid regular expression {self.pattern!r}: {e}") from None

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``"attention=eager_attention_forward"`` -> Scope("attention", "eager_attention_forward").

        >>> Scope.parse("attention=nn.Module: DeepseekV4Attention")
        Scope(component='attention', pattern='nn.Module: DeepseekV4Attention')
        """
        component, sep, pattern = text.partition("=")
        if not sep or not pattern:
            raise ValueError(f"--scope: expected COMPONENT=REGEX, got {text!r}")
        return cls(component.strip(), pattern)


_BATCH_PATTERNS = (
    re.compile(r"(?:^|[^a-z0-9])(?:bs|batch|batchsize|batch_size)[-_=]?(\d+)(?![0-9])"),
    re.compile(r"(?:^|[^a-z0-9])b[-_=]?(\d+)(?![0-9])"),
)


def batch_from_name(name: str) -> int | None:
    """The batch size written in a file or directory name (``bs80``, ``batch-80``, ``_b80``), or None.

    ``bs``/``batch`` spellings win over a bare ``b``; two different numbers of the same kind raise ValueError.

    >>> batch_from_name("dsv4_decode_bs80.pt.trace.json.gz"), batch_from_name("run-batch-32.json")
    (80, 32)
    """
    return _batch_from_names([name])


def _batch_from_names(names: Sequence[str]) -> int | None:
    """The batch the first pattern that matches any of ``names`` gives (patterns in order of preference, then the
    names in order), or None."""
    for pattern in _BATCH_PATTERNS:
        for name in names:
            found = {int(m.group(1)) for m in pattern.finditer(name.lower())}
            if len(found) > 1:
                raise ValueError(f"{name}: several batch sizes in the name ({sorted(found)}); give it as PATH=BATCH")
            if found:
                return found.pop()
    return None


def _is_report(path: Path) -> bool:
    """A JSON report this tool wrote (``--json`` into a trace directory), recognised by its first bytes."""
    with path.open("rb") as f:
        head = f.read(64)
    return f'"schema": "{SCHEMA}"'.encode() in head


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(
            p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(_TRACE_SUFFIXES) and not _is_report(p)
        )
        if not files:
            raise ValueError(f"{path}: directory holds no .json, .json.gz or .sqlite trace")
        return files
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    return [path]


def resolve_inputs(args: Sequence[str], batches: Sequence[int] | None = None) -> list[TraceInput]:
    """Turn ``TRACE[=BATCH]`` arguments (files or directories of traces) into :class:`TraceInput` s.

    The batch of a file is, in order: ``=BATCH`` on its argument, ``batches`` (one value for all arguments or
    one per argument), the file name, the name of its directory; else None. A ``bs``/``batch`` spelling in either
    name wins over a bare ``b`` in either (torch.profiler names a file after the host, e.g. ``b200-node-3``).
    """
    if not args:
        raise ValueError("no trace given: pass one or more TRACE[=BATCH] files or directories")
    if batches is not None and len(batches) not in (1, len(args)):
        raise ValueError(f"--batch takes one value or one per TRACE argument ({len(args)}), got {len(batches)}")
    out: list[TraceInput] = []
    for i, arg in enumerate(args):
        path, explicit = Path(arg), None
        head, sep, tail = arg.rpartition("=")
        if sep and tail.strip().isdigit() and not Path(arg).exists():
            path, explicit = Path(head), int(tail)
        if explicit is None and batches is not None:
            explicit = batches[0] if len(batches) == 1 else batches[i]
        if explicit is not None and explicit < 1:
            raise ValueError(f"{arg}: batch size must be >= 1")
        for file in _trace_files(path):
            names = [file.name, file.parent.name] if file.parent.name else [file.name]
            batch = explicit if explicit is not None else _batch_from_names(names)
            out.append(TraceInput(file, batch))
    return out


# --------------------------------------------------------------------------------------------- reading


@dataclass
class _Kernels:
    """Kernel intervals of one trace, as columns."""

    names: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    device: list[str] = field(default_factory=list)
    stream: list[str] = field(default_factory=list)
    correlation: list[Any] = field(default_factory=list)


def load_events(path: Path | str) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace (gzip detected by content), or the events of an Nsight Systems SQLite
    export (:mod:`wavemla.tools.nsys`, detected by content). Raises ValueError naming the file."""
    path = Path(path)
    if path.name.lower().endswith(nsys.REPORT_SUFFIXES) and path.is_file():
        raise ValueError(
            f"{path}: an Nsight Systems report; export it first (nsys export --type sqlite {path.name}) and pass the "
            ".sqlite file"
        )
    try:
        with path.open("rb") as f:
            head = f.read(len(nsys.SQLITE_MAGIC))
            export = nsys.is_export(head)
            raw = b"" if export else head + f.read()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    if export:
        return _nonempty(path, nsys.load_events(path))
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: corrupt or truncated gzip data ({e})") from None
    if not raw.strip():
        raise ValueError(f"{path}: empty file, not a trace")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a JSON trace (not UTF-8 text)") from None
    except RecursionError:
        raise ValueError(f"{path}: not a JSON trace (nested too deeply to parse)") from None
    except json.JSONDecodeError as e:
        ends_early = e.pos >= len(e.doc.rstrip()) - 1
        hint = "; the file ends early: was the trace cut off while it was written?" if ends_early else ""
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}){hint}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: no 'traceEvents' list at the top level; not a Chrome/Kineto trace")
    return _nonempty(path, events)


def _nonempty(path: Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not events:
        raise ValueError(f"{path}: the trace holds no events")
    return events


def _number(event: dict[str, Any], key: str, path: Path, index: int) -> float:
    value = event.get(key)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        what = "missing" if key not in event else f"not a number ({value!r})"
        raise ValueError(f"{path}: event #{index} ({event.get('name', '?')!r}): field '{key}' is {what}")
    return float(value)


_RANK_LABEL = re.compile(r"^(\[[^\]]+\]) ")


def _rank_label(pid: Any) -> str | None:
    """The rank label SGLang's profile merger puts before every pid (``"[TP00] 4242"`` -> ``"[TP00]"``), or None."""
    match = _RANK_LABEL.match(pid) if isinstance(pid, str) else None
    return match.group(1) if match else None


def _cpu_steps(data: _TraceData, device: str) -> int:
    """CPU step annotations of ``device``: in a merged multi-rank profile those of its kernels' rank (their pids
    share its label); otherwise every one in the trace."""
    ranks = data.device_ranks.get(device, set())
    if None in data.cpu_marker_ranks or not ranks or None in ranks:
        return data.cpu_markers
    return sum(data.cpu_marker_ranks.get(r, 0) for r in ranks)


def _event_device(event: dict[str, Any], args: dict[str, Any]) -> str:
    device = args.get("device", event.get("pid", "?"))
    return str(device)


@dataclass
class _Annotation:
    device: str
    start: float
    end: float
    range_id: Any = None  # args["External id"]: the record_function range this GPU copy belongs to
    pid: str | None = None  # its pid, when it names no args.device (see _read)
    stream: Any = None  # its tid: Kineto writes a range's GPU copy once per stream


@dataclass
class _TraceData:
    """What one pass over a trace collects."""

    kernels: _Kernels = field(default_factory=_Kernels)
    gpu_markers: list[_Annotation] = field(default_factory=list)  # GPU step annotations
    cpu_markers: int = 0  # CPU step annotations (a count: their times are host times)
    cpu_marker_ranks: dict[str | None, int] = field(default_factory=dict)  # ... per rank label of their pid
    device_ranks: dict[str, set[str | None]] = field(default_factory=dict)  # device -> rank labels of its kernels
    launches: set[Any] = field(default_factory=set)  # correlation ids of CUDA runtime/driver launch calls
    graph_launches: set[Any] = field(default_factory=set)  # ... of cudaGraphLaunch calls
    scoped: list[bool] = field(default_factory=list)  # per kernel event: its component came from a --scope
    unmatched_scopes: list[Scope] = field(default_factory=list)  # scopes that matched no host range


def _read(path: Path, rules: RuleSet, marker: re.Pattern[str] | None, scopes: Sequence[Scope] = ()) -> _TraceData:
    """Kernels (classified by ``scopes``, then ``rules``), step annotations matching ``marker`` and launch correlation
    ids of one trace."""
    events = load_events(path)
    data = _TraceData()
    kernels = data.kernels
    scope_regex = [re.compile(sc.pattern) for sc in scopes]
    ranges: list[list[tuple[str, float, float]]] = [[] for _ in scopes]  # per scope: (thread, start, end)
    launched_at: dict[Any, tuple[str, float]] = {}  # correlation -> (thread, host time of the launch call)
    pid_devices: dict[str, set[str]] = {}  # pid of kernel events -> their devices
    cpu_ranges: dict[tuple[str | None, str], list[tuple[float, float]]] = {}  # (rank, thread) -> CPU step ranges
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise ValueError(f"{path}: event #{index} is not an object: {event!r:.80}")
        if event.get("ph") != "X":
            continue
        category = str(event.get("cat", "")).lower()
        is_copy = category in _MEMCPY_CATEGORIES
        if "kernel" in category or is_copy:
            name = event.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"{path}: event #{index} (category {category!r}): field 'name' is missing or empty")
            ts = _number(event, "ts", path, index)
            dur = _number(event, "dur", path, index)
            if dur < 0:
                raise ValueError(f"{path}: event #{index} ({name!r}): negative duration {dur}")
            args = event.get("args")
            if not isinstance(args, dict):
                args = {}
            kernels.names.append(name)
            kernels.components.append(MEMCPY if is_copy else rules.classify(name))
            kernels.start.append(ts)
            kernels.end.append(ts + dur)
            kernels.device.append(_event_device(event, args))
            pid_devices.setdefault(str(event.get("pid", "?")), set()).add(kernels.device[-1])
            kernels.stream.append(str(args.get("stream", event.get("tid", "?"))))
            kernels.correlation.append(args.get("correlation"))
        elif category in _RUNTIME_CATEGORIES:
            args = event.get("args")
            if isinstance(args, dict) and args.get("correlation") is not None:
                data.launches.add(args["correlation"])
                if str(event.get("name", "")).startswith("cudaGraphLaunch"):
                    data.graph_launches.add(args["correlation"])
                if scopes:
                    launched_at[args["correlation"]] = (_thread(event), _number(event, "ts", path, index))
        if scopes and category in _SCOPE_CATEGORIES and isinstance(event.get("name"), str):
            for i, regex in enumerate(scope_regex):
                if regex.search(event["name"]):
                    ts = _number(event, "ts", path, index)
                    ranges[i].append((_thread(event), ts, ts + _number(event, "dur", path, index)))
        if marker is not None and category in _ANNOTATION_CATEGORIES:
            name = event.get("name")
            if not isinstance(name, str) or not marker.search(name):
                continue
            if category == "user_annotation":
                ts = _number(event, "ts", path, index)
                key = (_rank_label(event.get("pid")), _thread(event))
                cpu_ranges.setdefault(key, []).append((ts, ts + _number(event, "dur", path, index)))
                continue
            ts = _number(event, "ts", path, index)
            dur = _number(event, "dur", path, index)
            args = event.get("args")
            args = args if isinstance(args, dict) else {}
            pid = None if "device" in args else str(event.get("pid", "?"))
            range_id = args.get("External id")
            range_id = range_id if isinstance(range_id, (int, str)) else None
            stream = event.get("tid")
            stream = stream if isinstance(stream, (int, str)) else None
            data.gpu_markers.append(_Annotation(_event_device(event, args), ts, ts + dur, range_id, pid, stream))
    if not kernels.names:
        raise ValueError(
            f"{path}: no GPU kernel events (ph 'X' with category 'kernel', 'gpu_memcpy' or 'gpu_memset'); "
            "was the profiler run with CUDA activities on?"
        )
    # A CPU range nested in another on its thread (a regex matching an inner range too) is part of that step.
    for (rank, _), found in cpu_ranges.items():
        n = _outermost(found)
        data.cpu_markers += n
        data.cpu_marker_ranks[rank] = data.cpu_marker_ranks.get(rank, 0) + n
    # A GPU annotation names no args.device: it is on the device of the kernels sharing its pid. Kineto writes the
    # device as the pid, but SGLang's merged profiles relabel every pid ("[TP00] 0") and keep args.device.
    for m in data.gpu_markers:
        devices = pid_devices.get(m.pid) if m.pid is not None else None
        if devices is not None and len(devices) == 1:
            m.device = next(iter(devices))
    for pid, devices in pid_devices.items():
        for d in devices:
            data.device_ranks.setdefault(d, set()).add(_rank_label(pid))
    data.scoped = [False] * len(kernels.names)
    if scopes:
        _apply_scopes(data, scopes, ranges, launched_at)
    return data


def _thread(event: dict[str, Any]) -> str:
    return f"{event.get('pid', '?')}/{event.get('tid', '?')}"


def _apply_scopes(
    data: _TraceData,
    scopes: Sequence[Scope],
    ranges: list[list[tuple[str, float, float]]],
    launched_at: dict[Any, tuple[str, float]],
) -> None:
    """Give each kernel (not copies) launched inside a scope's host ranges, on the same thread, that scope's
    component: the first scope in order that holds the launch."""
    import numpy as np

    merged: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    for scope, found in zip(scopes, ranges, strict=True):
        if not found:
            data.unmatched_scopes.append(scope)
        by_thread: dict[str, tuple[list[float], list[float]]] = {}
        for thread, start, end in found:
            starts, ends = by_thread.setdefault(thread, ([], []))
            starts.append(start)
            ends.append(end)
        merged.append({t: _merge(np.asarray(s_), np.asarray(e_)) for t, (s_, e_) in by_thread.items()})
    kernels = data.kernels
    for k, corr in enumerate(kernels.correlation):
        if kernels.components[k] == MEMCPY or corr not in launched_at:
            continue
        thread, ts = launched_at[corr]
        for scope, per_thread in zip(scopes, merged, strict=True):
            if thread not in per_thread:
                continue
            ms, me = per_thread[thread]
            slot = int(np.searchsorted(ms, ts, side="right")) - 1
            if slot >= 0 and ts <= me[slot]:
                kernels.components[k] = scope.component
                data.scoped[k] = True
                break


# --------------------------------------------------------------------------------------- interval math


@dataclass(frozen=True)
class IntervalStats:
    """Interval measures: ``busy`` = length of the union, ``concurrent`` = time covered by two or more."""

    busy: float
    concurrent: float
    total: float  # sum of the lengths


def interval_stats(start: npt.ArrayLike, end: npt.ArrayLike) -> IntervalStats:
    """Union length, time covered by two or more intervals, and the plain sum, by a sweep over the endpoints.

    Touching intervals (one ends where the next starts) do not overlap.

    >>> interval_stats([0, 5, 20], [10, 15, 25])
    IntervalStats(busy=20.0, concurrent=5.0, total=25.0)
    """
    import numpy as np

    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if s.size == 0:
        return IntervalStats(0.0, 0.0, 0.0)
    times = np.concatenate([s, e])
    deltas = np.concatenate([np.ones(s.size, dtype=np.int64), -np.ones(e.size, dtype=np.int64)])
    order = np.argsort(times, kind="stable")  # equal times leave zero-length segments, so their order is moot
    times, deltas = times[order], deltas[order]
    active = np.cumsum(deltas)[:-1]  # kernels running in (times[i], times[i+1])
    gaps = np.diff(times)
    return IntervalStats(
        busy=float(gaps[active >= 1].sum()),
        concurrent=float(gaps[active >= 2].sum()),
        total=float((e - s).sum()),
    )


def _merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering the same set."""
    import numpy as np

    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    groups = np.cumsum(new) - 1
    merged_end = np.full(int(groups[-1]) + 1, -np.inf)
    np.maximum.at(merged_end, groups, e)
    return s[new], merged_end


# ------------------------------------------------------------------------------------------- per trace


@dataclass(frozen=True)
class ComponentTime:
    """One component's GPU time per decode step, in ms, and its kernel count per step."""

    busy_ms: float  # union of its kernel intervals
    kernel_sum_ms: float  # plain sum of its kernel durations (> busy when its kernels overlap)
    kernels: float


@dataclass(frozen=True)
class TraceProfile:
    """Per-step GPU time of one trace. Times are per decode step per device (averaged over devices), in ms."""

    path: str
    batch: int | None
    steps: float  # decode steps per device
    step_source: str  # "marker", "kernel" or "whole"
    devices: tuple[str, ...]
    streams: int
    kernels: int  # kernel/memcpy events analysed (all devices)
    busy_ms: float  # union of all kernel intervals
    kernel_sum_ms: float
    concurrent_ms: float  # time with two or more kernels running at once (multi-stream overlap)
    component_overlap_ms: float  # sum of component busy times minus busy_ms (counted in two components)
    span_ms: float  # first kernel start to last kernel end (or the step ranges), per step
    idle_ms: float  # span minus busy: the GPU waited on the host
    graph_kernels: int  # kernels correlated with a cudaGraphLaunch
    uncorrelated_kernels: int  # kernels with no launching CPU event in the trace
    components: dict[str, ComponentTime]
    unclassified: dict[str, tuple[int, float]]  # kernel name -> (count, total µs) for component "other"
    notes: tuple[str, ...]
    scoped_kernels: int = 0  # kernels analysed whose component a --scope gave


def _device_steps(
    spec: StepSpec,
    path: Path,
    device: str,
    names: list[str],
    kernel_regex: re.Pattern[str] | None,
    gpu_markers: list[_Annotation],
    cpu_markers: int,
    notes: list[str],
) -> float:
    if spec.source == "whole":
        return 1.0
    if spec.source == "kernel":
        assert kernel_regex is not None
        count = sum(1 for n in names if kernel_regex.search(n))
        steps = count / spec.kernels_per_step
        if count and count % spec.kernels_per_step:
            notes.append(
                f"{path} device {device}: {count} kernels match --step-kernel, not a multiple of "
                f"--kernels-per-step {spec.kernels_per_step}; using {steps:.3f} steps"
            )
        return steps
    if gpu_markers:
        return float(_gpu_steps([m for m in gpu_markers if m.device == device]))
    return float(cpu_markers)


def _gpu_steps(markers: Sequence[_Annotation]) -> int:
    """How many steps one device's GPU step annotations hold. Kineto writes a range once per stream its kernels ran
    on, every copy with the range's External id: the copies of one id are one range. A range is part of another (a
    regex matching an inner range too) where one of its copies lies inside one of the other's on the same stream, not
    where it lies inside the other's extent over all streams: a step's copy on a side stream (a collective queued
    behind the next step's kernels) may reach past the next step's start. A copy without an External id is its own
    range, part of another where it lies inside that one's extent over all streams (it may be a copy of it)."""
    extents: dict[tuple[str, Any], tuple[float, float]] = {}
    streams: dict[Any, list[tuple[float, float, tuple[str, Any]]]] = {}
    for i, m in enumerate(markers):
        key = ("range", m.range_id) if m.range_id is not None else ("event", i)
        s, e = extents.get(key, (m.start, m.end))
        extents[key] = (min(s, m.start), max(e, m.end))
        streams.setdefault(m.stream, []).append((m.start, m.end, key))
    inner: set[tuple[str, Any]] = set()
    for copies in streams.values():
        reach, holder = -math.inf, None
        for _start, end, key in sorted(copies, key=lambda c: (c[0], -c[1])):
            if end <= reach and key != holder and key[0] == "range":
                inner.add(key)
            elif end > reach:
                reach, holder = end, key
    reach = -math.inf
    for key, (_start, end) in sorted(extents.items(), key=lambda k_e: (k_e[1][0], -k_e[1][1])):
        if end <= reach and key[0] == "event":
            inner.add(key)
        reach = max(reach, end)
    return len(extents) - len(inner)


def _outermost(extents: Iterable[tuple[float, float]]) -> int:
    """How many ranges lie inside no other: a range nested in a step (a regex matching an inner range too, or a copy
    on another stream without an External id) is part of that step, as the kernel window, their union, has it."""
    count, reach = 0, -math.inf
    for _start, end in sorted(extents, key=lambda r: (r[0], -r[1])):
        if end > reach:
            count += 1
            reach = end
    return count


def profile_trace(
    path: Path | str,
    batch: int | None,
    rules: RuleSet,
    spec: StepSpec,
    device: str | None = None,
    scopes: Sequence[Scope] = (),
) -> TraceProfile:
    """Read one trace and measure per-step busy time per component (see :class:`TraceProfile`)."""
    import numpy as np

    path = Path(path)
    marker = re.compile(spec.marker) if spec.marker is not None else None
    kernel_regex = re.compile(spec.kernel) if spec.kernel is not None else None
    data = _read(path, rules, marker, scopes)
    kernels, gpu_markers, cpu_markers = data.kernels, data.gpu_markers, data.cpu_markers
    notes: list[str] = [
        f"{path}: --scope {sc.component}={sc.pattern} matches no host range (cpu_op, python_function, "
        "user_annotation); Python frames are in a trace only when the profiler ran with with_stack=True"
        for sc in data.unmatched_scopes
    ]
    if marker is not None and not gpu_markers and not cpu_markers:
        raise ValueError(f"{path}: no annotation matches --step-marker {spec.marker!r}")
    if marker is not None and not gpu_markers:
        ranked = None not in data.cpu_marker_ranks
        counted = (
            "each device the markers of its rank ("
            + ", ".join(f"{r} {n}" for r, n in sorted((r or "", n) for r, n in data.cpu_marker_ranks.items()))
            + ")"
            if ranked
            else f"{cpu_markers} steps"
        )
        notes.append(
            f"{path}: step markers found only on the CPU timeline; counting {counted}, "
            "kernels outside the steps are included"
        )

    devices_all = sorted(set(kernels.device))
    if device is not None:
        if device not in devices_all:
            raise ValueError(f"{path}: --device {device} not in the trace (devices with kernels: {devices_all})")
        devices_all = [device]

    start = np.asarray(kernels.start)
    end = np.asarray(kernels.end)
    dev = np.asarray(kernels.device)
    comp = np.asarray(kernels.components)
    names = np.asarray(kernels.names, dtype=object)
    stream = np.asarray(kernels.stream)

    component_order = rules.components
    totals = {c: [0.0, 0.0, 0] for c in component_order}  # busy µs, sum µs, count
    busy = kernel_sum = concurrent = span = 0.0
    steps_total = 0.0
    used_devices: list[str] = []
    streams: set[tuple[str, str]] = set()
    n_kernels = graph = uncorrelated = scoped = 0
    scoped_mask = np.asarray(data.scoped, dtype=bool)
    unclassified: dict[str, list[float]] = {}
    for d in devices_all:
        on_dev = dev == d
        steps = _device_steps(
            spec, path, d, [str(n) for n in names[on_dev]], kernel_regex, gpu_markers, _cpu_steps(data, d), notes
        )
        if steps <= 0:
            notes.append(f"{path}: device {d} has no decode steps by the step rule; left out")
            continue
        keep = on_dev.copy()
        if gpu_markers:
            dev_markers = [m for m in gpu_markers if m.device == d]
            ms, me = _merge(np.array([m.start for m in dev_markers]), np.array([m.end for m in dev_markers]))
            slot = np.searchsorted(ms, start, side="right") - 1
            inside = (slot >= 0) & (start < me[np.clip(slot, 0, None)])
            keep &= inside
            # The step ranges, widened over any kernel that starts inside one and runs past its end (it is counted
            # whole), so busy never exceeds the span.
            dev_span = interval_stats(np.concatenate([ms, start[keep]]), np.concatenate([me, end[keep]])).busy
        else:
            dev_span = float(end[keep].max() - start[keep].min())
        if not keep.any():
            notes.append(f"{path}: device {d} has no kernels inside the step markers; left out")
            continue
        used_devices.append(d)
        steps_total += steps
        span += dev_span
        stats = interval_stats(start[keep], end[keep])
        busy += stats.busy
        concurrent += stats.concurrent
        kernel_sum += stats.total
        n_kernels += int(keep.sum())
        scoped += int((keep & scoped_mask).sum())
        streams.update((d, s) for s in stream[keep])
        for c in component_order:
            sel = keep & (comp == c)
            if not sel.any():
                continue
            cs = interval_stats(start[sel], end[sel])
            totals[c][0] += cs.busy
            totals[c][1] += cs.total
            totals[c][2] += int(sel.sum())
        for i in np.flatnonzero(keep):
            corr = kernels.correlation[i]
            if corr is None or corr not in data.launches:
                uncorrelated += 1
            elif corr in data.graph_launches:
                graph += 1
            if comp[i] == OTHER:
                entry = unclassified.setdefault(str(names[i]), [0, 0.0])
                entry[0] += 1
                entry[1] += float(end[i] - start[i])
    if not used_devices:
        raise ValueError(f"{path}: no device has both decode steps and kernels by the step rule ({spec.source})")
    if spec.source == "whole":
        notes.append(f"{path}: whole trace counted as one step; pass --step-marker or --step-kernel for per-step times")

    def per_step(us: float) -> float:
        return us / steps_total / _US_PER_MS

    components = {
        c: ComponentTime(busy_ms=per_step(b), kernel_sum_ms=per_step(s), kernels=n / steps_total)
        for c, (b, s, n) in totals.items()
    }
    component_busy = sum(t.busy_ms for t in components.values())
    return TraceProfile(
        path=str(path),
        batch=batch,
        steps=steps_total / len(used_devices),
        step_source=spec.source,
        devices=tuple(used_devices),
        streams=len(streams),
        kernels=n_kernels,
        busy_ms=per_step(busy),
        kernel_sum_ms=per_step(kernel_sum),
        concurrent_ms=per_step(concurrent),
        component_overlap_ms=max(0.0, component_busy - per_step(busy)),
        span_ms=per_step(span),
        idle_ms=max(0.0, per_step(span - busy)),
        graph_kernels=graph,
        uncorrelated_kernels=uncorrelated,
        components=components,
        unclassified={k: (int(v[0]), v[1]) for k, v in unclassified.items()},
        notes=tuple(notes),
        scoped_kernels=scoped,
    )


# --------------------------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class LineFit:
    """``ms = intercept_ms + slope_ms_per_request · batch``; ``r2`` is None when the times do not vary.

    ``rms_ms`` is the root mean square of the residuals and ``mean_ms`` the mean time: ``rel_rms`` (their ratio) says
    how far the line sits from the points where R² cannot, for a component whose time barely changes with batch (R²
    then measures the noise against a slope near zero)."""

    intercept_ms: float
    slope_ms_per_request: float
    r2: float | None
    rms_ms: float = 0.0
    mean_ms: float = 0.0

    def at(self, batch: float) -> float:
        return self.intercept_ms + self.slope_ms_per_request * batch

    @property
    def rel_rms(self) -> float | None:
        """RMS residual over the mean time (None for a component that never ran)."""
        return self.rms_ms / self.mean_ms if self.mean_ms > 0 else None


def fit_line(batches: Sequence[float], times: Sequence[float]) -> LineFit:
    """Least-squares line through (batch, ms) points; needs two distinct batch sizes.

    >>> round(fit_line([32, 80], [28.2, 67.1]).slope_ms_per_request, 6)
    0.810417
    """
    import numpy as np

    x = np.asarray(batches, dtype=np.float64)
    y = np.asarray(times, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"fit: {x.size} batch sizes but {y.size} times")
    if np.unique(x).size < 2:
        raise ValueError(f"fit: need at least 2 distinct batch sizes, got {sorted(set(x.tolist()))}")
    design = np.stack([np.ones_like(x), x], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - (a + b * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float((residual**2).sum())
    scale = max(float(np.abs(y).max()), 1e-30)
    mean = float(y.mean())
    if ss_tot <= (1e-12 * scale) ** 2 * y.size:
        # Flat within float noise of the timestamps: report the flat line, not a ±1e-15 slope.
        return LineFit(intercept_ms=mean, slope_ms_per_request=0.0, r2=None, mean_ms=mean)
    return LineFit(
        intercept_ms=float(a),
        slope_ms_per_request=float(b),
        r2=max(0.0, 1.0 - ss_res / ss_tot),
        rms_ms=(ss_res / y.size) ** 0.5,
        mean_ms=mean,
    )


@dataclass(frozen=True)
class SlopeFit:
    """Per-component fits over all traces (each trace one point) and the slope driver."""

    batches: tuple[int, ...]
    n_points: int
    components: dict[str, LineFit]
    busy: LineFit  # the union over all components
    span: LineFit  # busy plus idle: the step's length on the GPU's clock
    driver: str
    driver_share: float | None  # driver slope / busy slope (None when the busy slope is not positive)
    # The marginal cost at the top of the range: ms per extra request between the two largest batch sizes (their
    # mean times), per component and for the busy time; None with fewer than 3 batch sizes (the fit is that line).
    top_batches: tuple[int, int] | None = None
    top_slopes: dict[str, float] | None = None
    top_busy: float | None = None
    top_driver: str | None = None


def batch_means(
    profiles: Sequence[TraceProfile], components: Sequence[str]
) -> list[tuple[int | None, dict[str, float]]]:
    """Mean per-step ms per batch size: each component's busy time, and the trace-wide ``busy_ms``,
    ``kernel_sum_ms``, ``concurrent_ms``, ``component_overlap_ms`` and ``idle_ms``; batches ascending."""
    groups: dict[int | None, list[TraceProfile]] = {}
    for p in profiles:
        groups.setdefault(p.batch, []).append(p)
    out = []
    for b in sorted(groups, key=lambda b: (b is None, b or 0)):
        ps = groups[b]
        row = {c: sum(p.components[c].busy_ms for p in ps) / len(ps) for c in components}
        for attr in ("busy_ms", "kernel_sum_ms", "concurrent_ms", "component_overlap_ms", "idle_ms"):
            row[attr] = sum(getattr(p, attr) for p in ps) / len(ps)
        out.append((b, row))
    return out


def fit_slopes(profiles: Sequence[TraceProfile]) -> SlopeFit:
    """Fit ``a + b·batch`` per component and for the total busy time; the driver is the largest ``b``."""
    missing = [p.path for p in profiles if p.batch is None]
    if missing:
        raise ValueError(
            f"batch size unknown for {', '.join(missing)}: name the file bsN / batch-N / _bN, "
            "pass PATH=N, or give --batch"
        )
    batches = [float(p.batch) for p in profiles if p.batch is not None]
    distinct = sorted({int(b) for b in batches})
    if len(distinct) < 2:
        raise ValueError(
            f"a slope needs traces at 2 or more batch sizes; got {len(distinct)} ({distinct}); "
            "add traces at other batch sizes or pass --no-fit for the breakdown alone"
        )
    names = list(profiles[0].components)
    comps = {c: fit_line(batches, [p.components[c].busy_ms for p in profiles]) for c in names}
    busy = fit_line(batches, [p.busy_ms for p in profiles])
    span = fit_line(batches, [p.span_ms for p in profiles])
    # Only components that ran can drive the slope (an absent one has slope 0, which could beat negatives).
    present = [c for c in names if any(p.components[c].busy_ms > 0 for p in profiles)] or names
    driver = max(present, key=lambda c: comps[c].slope_ms_per_request)
    total = busy.slope_ms_per_request
    share = comps[driver].slope_ms_per_request / total if total > 0 else None
    top_batches = top_slopes = top_busy = top_driver = None
    if len(distinct) >= 3:
        (lo, row_lo), (hi, row_hi) = batch_means(profiles, names)[-2:]
        assert lo is not None and hi is not None  # every profile has a batch (checked above)
        top_batches = (lo, hi)
        top_slopes = {c: (row_hi[c] - row_lo[c]) / (hi - lo) for c in names}
        top_busy = (row_hi["busy_ms"] - row_lo["busy_ms"]) / (hi - lo)
        top_driver = max(present, key=lambda c: top_slopes[c])
    return SlopeFit(
        batches=tuple(distinct),
        n_points=len(profiles),
        components=comps,
        busy=busy,
        span=span,
        driver=driver,
        driver_share=share,
        top_batches=top_batches,
        top_slopes=top_slopes,
        top_busy=top_busy,
        top_driver=top_driver,
    )


def saturating(line: LineFit, top_slope: float | None) -> bool:
    """Whether a component's time bends down with batch: a fit below R² 0.95 whose marginal cost at the top of the
    range is under half the fitted slope (e.g. MoE time while the routed experts a batch touches saturate)."""
    return (
        top_slope is not None
        and line.r2 is not None
        and line.r2 < 0.95
        and line.slope_ms_per_request > 0
        and top_slope < 0.5 * line.slope_ms_per_request
    )


# A component whose fitted line moves less than this share of its mean time over the batch range is nearly flat.
FLAT_SHARE = 0.10


def nearly_flat(line: LineFit, batches: Sequence[int]) -> bool:
    """Whether a fit below R² 0.95 belongs to a component whose time barely changes with batch: the line moves less
    than ``FLAT_SHARE`` of the mean time from the smallest batch to the largest (weights read once, a fixed-size
    quantization), so R² measures the noise, and ``rel_rms`` is the fit's quality."""
    return (
        line.r2 is not None
        and line.r2 < 0.95
        and line.mean_ms > 0
        and abs(line.slope_ms_per_request) * (max(batches) - min(batches)) < FLAT_SHARE * line.mean_ms
    )


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True)
class TraceReport:
    """What ``wavemla trace`` reports: per-trace profiles, the fit (None with ``fit=False``), the rules."""

    profiles: tuple[TraceProfile, ...]
    fit: SlopeFit | None
    components: tuple[str, ...]
    rules: RuleSet
    spec: StepSpec
    scopes: tuple[Scope, ...] = ()

    def batch_means(self) -> list[tuple[int | None, dict[str, float]]]:
        """Mean per-step ms per batch size (components plus ``busy``), batches ascending."""
        return batch_means(self.profiles, self.components)

    def unclassified(self) -> list[tuple[str, int, float]]:
        """Unclassified kernels over all traces: (name, count, total ms), longest first."""
        merged: dict[str, list[float]] = {}
        for p in self.profiles:
            for name, (count, us) in p.unclassified.items():
                entry = merged.setdefault(name, [0, 0.0])
                entry[0] += count
                entry[1] += us
        rows = [(name, int(v[0]), v[1] / _US_PER_MS) for name, v in merged.items()]
        return sorted(rows, key=lambda r: (-r[2], r[0]))


def analyze(
    inputs: Sequence[TraceInput],
    spec: StepSpec | None = None,
    rules: RuleSet | None = None,
    device: str | None = None,
    fit: bool = True,
    fit_from: int | None = None,
    scopes: Sequence[Scope] = (),
) -> TraceReport:
    """Profile every trace and, with ``fit``, fit time against batch size per component: over every trace, or with
    ``fit_from`` over the traces at batch sizes from ``fit_from`` up (the breakdown still holds every trace).
    ``scopes`` classify kernels by the host range that launched them, before the name rules (:class:`Scope`)."""
    if not inputs:
        raise ValueError("no trace given")
    if fit_from is not None and (isinstance(fit_from, bool) or not isinstance(fit_from, int) or fit_from < 1):
        raise ValueError(f"--fit-from: expected a batch size >= 1, got {fit_from!r}")
    spec = spec or StepSpec()
    rules = rules or RuleSet(default_rules())
    for sc in scopes:
        if sc.component not in rules.components:
            raise ValueError(
                f"--scope {sc.component}={sc.pattern}: unknown component {sc.component!r}; components: "
                f"{', '.join(rules.components)} (a --rules file can add one)"
            )
    ordered = sorted(inputs, key=lambda t: (t.batch is None, t.batch or 0))  # stable: same-batch order kept
    profiles = tuple(profile_trace(t.path, t.batch, rules, spec, device, scopes) for t in ordered)
    fitted = profiles
    if fit and fit_from is not None:
        fitted = tuple(p for p in profiles if p.batch is None or p.batch >= fit_from)  # unknown batch: fit_slopes says
    return TraceReport(
        profiles=profiles,
        fit=fit_slopes(fitted) if fit else None,
        components=rules.components,
        rules=rules,
        spec=spec,
        scopes=tuple(scopes),
    )


def host_bound(report: TraceReport) -> bool:
    """Whether the GPU idles more than it works inside the steps of any trace: those steps wait on the host, and
    their length follows the host, not the kernels' busy time."""
    return any(p.idle_ms > p.busy_ms for p in report.profiles)


def _r(x: float | None) -> float | None:
    """Nine significant digits: enough for ns-level times and µs-per-request slopes, without float noise."""
    return None if x is None else float(f"{x:.9g}")


def report_to_dict(report: TraceReport, top: int = 20) -> dict[str, Any]:
    """The JSON document (schema ``wavemla.trace/1``; times in ms per decode step per device)."""
    fit = report.fit
    return {
        "schema": SCHEMA,
        "units": {"time": "ms per decode step per device", "slope": "ms per extra request"},
        "components": list(report.components),
        "steps": {
            "source": report.spec.source,
            "marker": report.spec.marker,
            "kernel": report.spec.kernel,
            "kernels_per_step": report.spec.kernels_per_step,
        },
        "traces": [
            {
                "path": p.path,
                "batch": p.batch,
                "steps": _r(p.steps),
                "devices": list(p.devices),
                "streams": p.streams,
                "kernels": p.kernels,
                "graph_kernels": p.graph_kernels,
                "uncorrelated_kernels": p.uncorrelated_kernels,
                "scoped_kernels": p.scoped_kernels,
                "busy_ms": _r(p.busy_ms),
                "kernel_sum_ms": _r(p.kernel_sum_ms),
                "concurrent_ms": _r(p.concurrent_ms),
                "component_overlap_ms": _r(p.component_overlap_ms),
                "span_ms": _r(p.span_ms),
                "idle_ms": _r(p.idle_ms),
                "components": {
                    c: {
                        "busy_ms": _r(t.busy_ms),
                        "kernel_sum_ms": _r(t.kernel_sum_ms),
                        "kernels": _r(t.kernels),
                    }
                    for c, t in p.components.items()
                },
                "notes": list(p.notes),
            }
            for p in report.profiles
        ],
        "batches": [
            {
                "batch": b,
                "components": {c: _r(row[c]) for c in report.components},
                "busy_ms": _r(row["busy_ms"]),
            }
            for b, row in report.batch_means()
        ],
        "fit": None
        if fit is None
        else {
            "batches": list(fit.batches),
            "n_points": fit.n_points,
            "components": {
                c: {
                    "intercept_ms": _r(f.intercept_ms),
                    "slope_ms_per_request": _r(f.slope_ms_per_request),
                    "r2": _r(f.r2),
                    "rms_ms": _r(f.rms_ms),
                    "rel_rms": _r(f.rel_rms),
                    "nearly_flat": nearly_flat(f, fit.batches),
                }
                for c, f in fit.components.items()
            },
            "busy": {
                "intercept_ms": _r(fit.busy.intercept_ms),
                "slope_ms_per_request": _r(fit.busy.slope_ms_per_request),
                "r2": _r(fit.busy.r2),
                "rms_ms": _r(fit.busy.rms_ms),
                "rel_rms": _r(fit.busy.rel_rms),
            },
            "span": {
                "intercept_ms": _r(fit.span.intercept_ms),
                "slope_ms_per_request": _r(fit.span.slope_ms_per_request),
                "r2": _r(fit.span.r2),
                "rms_ms": _r(fit.span.rms_ms),
                "rel_rms": _r(fit.span.rel_rms),
            },
            "host_bound": host_bound(report),
            "driver": {
                "component": fit.driver,
                "slope_ms_per_request": _r(fit.components[fit.driver].slope_ms_per_request),
                "share_of_busy_slope": _r(fit.driver_share),
            },
            "top": None
            if fit.top_batches is None or fit.top_slopes is None
            else {
                "batches": list(fit.top_batches),
                "slope_ms_per_request": {c: _r(v) for c, v in fit.top_slopes.items()},
                "busy_slope_ms_per_request": _r(fit.top_busy),
                "driver": fit.top_driver,
                "saturating": [c for c, f in fit.components.items() if saturating(f, fit.top_slopes[c])],
            },
        },
        "unclassified": [
            {"name": name, "kernels": count, "total_ms": _r(ms)} for name, count, ms in report.unclassified()[:top]
        ],
        "rules": [{"name": r.name, "component": r.component, "pattern": r.pattern} for r in report.rules.rules],
        "scopes": [{"component": sc.component, "pattern": sc.pattern} for sc in report.scopes],
    }


def _fmt(x: float | None, width: int, digits: int = 3, suffix: str = "") -> str:
    if x is None:
        return f"{'—':>{width}}"
    text = f"{x:.{digits}f}"
    if float(text) == 0.0:
        text = text.lstrip("-")  # no "-0.000" from float noise
    return f"{text + suffix:>{width}}"


def format_report(report: TraceReport, top: int = 15) -> str:
    """The terminal table: per-batch ms per step, the fit per component, the driver, unclassified kernels."""
    means = report.batch_means()
    fit = report.fit
    shown = [c for c in report.components if any(row[c] > 0 for _, row in means)]
    width = max([len(c) for c in shown] + [26])
    batch_heads = [f"bs={b}" if b is not None else "bs=?" for b, _ in means]
    col = max(9, *(len(h) + 1 for h in batch_heads))
    lines = [
        f"{len(report.profiles)} trace(s); GPU time per decode step per device in ms "
        f"(steps: {report.spec.source}; busy = union of kernel intervals across streams)",
        "",
    ]
    head = f"{'component':<{width}}" + "".join(f"{h:>{col}}" for h in batch_heads)
    has_top = fit is not None and fit.top_batches is not None and fit.top_slopes is not None
    if fit is not None:
        head += f"{'a ms':>10}{'b ms/req':>11}{'R²':>8}{'rms':>7}{'of slope':>10}"
        if has_top:
            head += f"{'top ms/req':>12}"
    lines += [head, "-" * len(head)]
    busy_slope = fit.busy.slope_ms_per_request if fit is not None else 0.0

    def row(label: str, values: list[float], line: LineFit | None, top_slope: float | None = None) -> str:
        text = f"{label:<{width}}" + "".join(_fmt(v, col) for v in values)
        if line is not None:
            share = line.slope_ms_per_request / busy_slope if busy_slope > 0 else None
            text += _fmt(line.intercept_ms, 10) + _fmt(line.slope_ms_per_request, 11, 4) + _fmt(line.r2, 8)
            rel = line.rel_rms if line.r2 is not None else None
            text += _fmt(None if rel is None else 100 * rel, 7, 1, "%")
            text += _fmt(None if share is None else 100 * share, 10, 1, "%")
            if has_top:
                text += _fmt(top_slope, 12, 4)
        return text

    for c in shown:
        top_c = fit.top_slopes[c] if fit is not None and fit.top_slopes is not None else None
        lines.append(row(c, [r[c] for _, r in means], fit.components[c] if fit else None, top_c))
    lines.append("-" * len(head))
    top_all = fit.top_busy if fit is not None else None
    lines.append(row("busy (union, all)", [r["busy_ms"] for _, r in means], fit.busy if fit else None, top_all))
    for label, key in (
        ("kernel time summed", "kernel_sum_ms"),
        ("2+ kernels at once", "concurrent_ms"),
        ("in 2+ components", "component_overlap_ms"),
        ("idle inside the span", "idle_ms"),
    ):
        lines.append(row(label, [r[key] for _, r in means], None))
    if fit is not None:
        d = fit.components[fit.driver]
        share = "" if fit.driver_share is None else f", {100 * fit.driver_share:.1f}% of the busy-time slope"
        lines += [
            "",
            f"slope driver: {fit.driver} — {d.slope_ms_per_request:.4f} ms per extra request{share} "
            f"({fit.busy.slope_ms_per_request:.4f} ms/req in all; {fit.n_points} traces, batch sizes "
            f"{', '.join(map(str, fit.batches))})",
        ]
        if len(fit.batches) == 2 and fit.n_points == 2:
            lines.append("note: with two batch sizes every line passes through both points, so R² is 1 by construction")
        elif len(fit.batches) == 2:
            lines.append(
                "note: with two batch sizes every line passes through the mean times of the two batch sizes; R² "
                "measures only the spread of the traces at one batch size"
            )
        for c in shown:
            f = fit.components.get(c)
            if f is not None and f.rel_rms is not None and nearly_flat(f, fit.batches):
                change = abs(f.slope_ms_per_request) * (max(fit.batches) - min(fit.batches)) / f.mean_ms
                lines.append(
                    f"{c}: nearly flat ({100 * change:.1f}% change over the batches against its mean "
                    f"{f.mean_ms:.3f} ms): R² {f.r2:.2f} measures the noise; the line is within "
                    f"{100 * f.rel_rms:.1f}% RMS of the points"
                )
        if host_bound(report):
            idle = [r["idle_ms"] / (r["idle_ms"] + r["busy_ms"]) for _, r in means if r["idle_ms"] + r["busy_ms"] > 0]
            lines.append(
                f"host-bound: the GPU idles {100 * min(idle):.0f}-{100 * max(idle):.0f}% of each step's span; the "
                f"span grows {fit.span.slope_ms_per_request:.4f} ms per extra request against "
                f"{fit.busy.slope_ms_per_request:.4f} of busy time, so the slopes above are what the GPU works, not "
                "what a step takes"
            )
        if fit.top_batches is not None and fit.top_slopes is not None and fit.top_driver is not None:
            lo, hi = fit.top_batches
            lines.append(
                f"at the top of the range (b = {lo} -> {hi}, 'top ms/req'): {fit.top_driver} adds the most, "
                f"{fit.top_slopes[fit.top_driver]:.4f} ms per extra request"
                + ("" if fit.top_busy is None else f" of {fit.top_busy:.4f} in all")
            )
            for c in shown:
                if c in fit.components and saturating(fit.components[c], fit.top_slopes[c]):
                    f = fit.components[c]
                    lines.append(
                        f"{c}: time bends down with batch (R² {f.r2:.2f}; {fit.top_slopes[c]:.4f} ms/req at the "
                        f"top against {f.slope_ms_per_request:.4f} fitted): the line overstates its marginal cost "
                        "at large batches"
                    )
    rows = report.unclassified()
    if rows:
        lines += [
            "",
            f"unclassified kernels (component 'other'), top {min(top, len(rows))} of {len(rows)} by time:",
        ]
        for name, count, ms in rows[:top]:
            short = name if len(name) <= 120 else name[:117] + "..."
            lines.append(f"  {ms:>10.3f} ms  {count:>7}×  {short}")
        lines.append("  add rules for them with --rules FILE (see docs/trace.md)")
        if any(name in ("kernel", "Kernel") for name, _, _ in rows[:top]):  # Kineto writes "kernel" as "Kernel"
            lines.append(
                "  'kernel' is the name Triton gives every kernel function called kernel (vLLM's DeepSeek-V4 kernel "
                "classes; Kineto writes it 'Kernel'): no name rule can sort them; --scope can, by the host range that "
                "launched them"
            )
    return "\n".join(lines)


def plot_report(report: TraceReport, path: Path | str) -> None:
    """PNG: left, stacked component time vs batch with stacked fit lines; right, each component alone."""
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError:
        raise ValueError("--png needs matplotlib: pip install 'wavemla[tools]'") from None
    import numpy as np

    means = [(b, row) for b, row in report.batch_means() if b is not None]
    if not means:
        raise ValueError("--png needs batch sizes: none of the traces has one")
    fit = report.fit
    shown = [c for c in report.components if any(row[c] > 0 for _, row in means)]
    xs = np.array([b for b, _ in means], dtype=np.float64)
    fig = Figure(figsize=(13, 5.5), layout="constrained")
    ax_stack, ax_lines = fig.subplots(1, 2)
    colors = {c: f"C{i % 10}" for i, c in enumerate(shown)}
    spacing = float(np.diff(xs).min()) if xs.size > 1 else max(float(xs[0]), 1.0)
    width = 0.6 * spacing
    bottom = np.zeros_like(xs)
    grid = np.linspace(0.0, float(xs.max()) * 1.05, 100)
    fit_bottom = np.zeros_like(grid)
    for c in shown:
        ys = np.array([row[c] for _, row in means])
        ax_stack.bar(xs, ys, width=width, bottom=bottom, color=colors[c], label=c, alpha=0.85)
        bottom += ys
        ax_lines.plot(xs, ys, "o", color=colors[c])
        if fit is not None:
            line = fit.components[c]
            fit_top = fit_bottom + line.intercept_ms + line.slope_ms_per_request * grid
            ax_stack.plot(grid, fit_top, "--", color=colors[c], linewidth=1)
            fit_bottom = fit_top
            ax_lines.plot(
                grid,
                line.intercept_ms + line.slope_ms_per_request * grid,
                "-",
                color=colors[c],
                label=f"{c}: {line.slope_ms_per_request:.3g} ms/req",
            )
        else:
            ax_lines.plot(xs, ys, "-", color=colors[c], label=c)
    busy = np.array([row["busy_ms"] for _, row in means])
    ax_stack.plot(xs, busy, "k^", label="busy (union)")
    if fit is not None:
        busy_fit = fit.busy.intercept_ms + fit.busy.slope_ms_per_request * grid
        ax_stack.plot(grid, busy_fit, "k-", linewidth=1, label="busy fit")
        title = f"slope driver: {fit.driver} ({fit.components[fit.driver].slope_ms_per_request:.3g} ms/req)"
    else:
        title = "component time per step"
    ax_stack.set(xlabel="batch size", ylabel="GPU ms per decode step", title="stacked components, fit lines dashed")
    ax_lines.set(xlabel="batch size", ylabel="GPU ms per decode step", title=title)
    ax_stack.legend(fontsize=8, loc="upper left")
    ax_lines.legend(fontsize=8, loc="upper left")
    for ax in (ax_stack, ax_lines):
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    from wavemla.cli import png_format

    try:
        fig.savefig(str(path), dpi=110, format=png_format(str(path)))
    except OSError as e:
        raise ValueError(f"--png {path}: cannot write: {e.strerror}") from None
    except ValueError as e:  # a suffix naming a format matplotlib cannot write
        raise ValueError(f"--png {path}: {e}") from None


# ------------------------------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "traces",
        nargs="*",
        metavar="TRACE[=BATCH]",
        help="Kineto trace (.json/.json.gz), nsys SQLite export (.sqlite) or a directory of them; =BATCH gives the "
        "batch size",
    )
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        metavar="N",
        help="batch size for every TRACE, or one per TRACE argument (default: from the file name, e.g. bs80)",
    )
    parser.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="FILE",
        help="JSON/TOML file of extra rules, tried before the built-in ones (repeatable)",
    )
    steps = parser.add_mutually_exclusive_group()
    steps.add_argument("--step-marker", metavar="REGEX", help="annotation name regex marking one decode step")
    steps.add_argument("--step-kernel", metavar="REGEX", help="kernel name regex counted to find the step count")
    parser.add_argument(
        "--kernels-per-step",
        type=int,
        default=1,
        metavar="N",
        help="kernels matching --step-kernel per step, e.g. the layer count (default 1)",
    )
    parser.add_argument(
        "--scope",
        action="append",
        default=[],
        metavar="COMPONENT=REGEX",
        help="kernels launched inside a host range (ATen op, Python frame, record_function) matching REGEX belong "
        "to COMPONENT, before the name rules (repeatable; first match wins)",
    )
    parser.add_argument("--device", metavar="ID", help="analyse only this device (pid / args.device)")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON ('-' for stdout)")
    parser.add_argument("--png", metavar="PATH", help="write a plot of component time vs batch size")
    parser.add_argument("--top", type=int, default=15, metavar="N", help="unclassified kernels to list (default 15)")
    parser.add_argument("--no-fit", action="store_true", help="breakdown only; no batch sizes needed")
    parser.add_argument(
        "--fit-from",
        type=int,
        metavar="N",
        help="fit only the traces at batch sizes >= N (e.g. past an MoE's knee); the breakdown lists every trace",
    )
    parser.add_argument("--list-rules", action="store_true", help="print the classification rules in order and exit")
    parser.add_argument(
        "--explain",
        action="append",
        default=[],
        metavar="KERNEL",
        help="print which rule classifies KERNEL and exit",
    )


def _rule_lines(rules: RuleSet) -> Iterator[str]:
    width = max(len(r.name) for r in rules.rules)
    comp = max(len(r.component) for r in rules.rules)
    for i, r in enumerate(rules.rules, 1):
        yield f"{i:>3}  {r.name:<{width}}  {r.component:<{comp}}  {r.pattern}"


def run(args: argparse.Namespace) -> int:
    def fail(message: str) -> int:
        print(f"wavemla trace: error: {message}", file=sys.stderr)
        return 2

    try:
        rules = build_ruleset(args.rules)
        if args.list_rules or args.explain:
            if args.list_rules:
                print("\n".join(_rule_lines(rules)))
            for name in args.explain:
                rule = rules.match(name)
                where = "no rule: other" if rule is None else f"{rule.component} (rule {rule.name!r}, {rule.source})"
                print(f"{name}\n  -> {where}")
            return 0
        if args.top < 0:
            return fail("--top must be >= 0")
        from wavemla.cli import blank_file_name

        blank = blank_file_name("--json", args.json) or blank_file_name("--png", args.png)
        if blank is not None:
            return fail(blank)
        spec = StepSpec(marker=args.step_marker, kernel=args.step_kernel, kernels_per_step=args.kernels_per_step)
        inputs = resolve_inputs(args.traces, args.batch)
        scopes = [Scope.parse(text) for text in args.scope]
        report = analyze(
            inputs, spec, rules, device=args.device, fit=not args.no_fit, fit_from=args.fit_from, scopes=scopes
        )
        for p in report.profiles:
            for note in p.notes:
                print(f"note: {note}", file=sys.stderr)
        if args.json == "-":
            print(json.dumps(report_to_dict(report, args.top), indent=2))
        else:
            print(format_report(report, args.top))
            if args.json:
                try:
                    Path(args.json).write_text(json.dumps(report_to_dict(report, args.top), indent=2) + "\n")
                except OSError as e:
                    return fail(f"--json {args.json}: cannot write: {e.strerror}")
                print(f"\nwrote {args.json}")
        if args.png:
            plot_report(report, args.png)
            if args.json != "-":
                print(f"wrote {args.png}")
    except ValueError as e:
        return fail(str(e))
    except OSError as e:  # unreadable directory or file, unwritable output
        return fail(f"{e.filename or ''}: {e.strerror or e}")
    return 0


if __name__ == "__main__":
    from wavemla.cli import summary

    _parser = argparse.ArgumentParser(prog="wavemla trace", description=summary(__doc__))
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
