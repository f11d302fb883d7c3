"""Nsight Systems SQLite exports read as Kineto-style trace events, so ``wavemla trace`` analyses an ``nsys`` capture
of a serving engine as it does a ``torch.profiler`` trace.

``nsys profile --trace=cuda,nvtx ...`` then ``nsys export --type sqlite REPORT.nsys-rep`` gives a database whose
tables this reads (columns it does not find are left out; tables that are absent give no events):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: GPU kernels (``start``/``end`` in ns, ``deviceId``, ``streamId``,
  ``correlationId``, ``globalPid``; the name is ``demangledName``, else ``shortName`` or ``mangledName``, an id into
  ``StringIds``). Under CUDA graphs nsys records each kernel node only with ``--cuda-graph-trace=node``; its default
  records a graph launch as one range and no kernels.
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` and ``CUPTI_ACTIVITY_KIND_MEMSET``: copies and fills on the GPU.
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: the CUDA runtime calls that launched them (``nameId``, ``correlationId``,
  ``globalTid``), so graph launches and uncorrelated kernels are counted as in a Kineto trace.
- ``NVTX_EVENTS``: push/pop and start/end ranges (``eventType`` 59 and 60; the name is ``text``, else ``textId``
  into ``StringIds``) become host ``user_annotation`` ranges: ``--step-marker`` counts them as decode steps, and
  ``--scope`` can name them.

Times become µs. Correlation ids are per process in CUPTI, so each is keyed by its process (``globalPid`` of a
kernel or copy, the process bits of ``globalTid`` of a runtime call) where every table that holds them has those
columns. There are no GPU copies of NVTX ranges in the export, so steps come from host ranges or from
``--step-kernel``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SQLITE_MAGIC = b"SQLite format 3\x00"
# nsys reports that are not yet exported: their names say so, their bytes are nsys' own format.
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
_COPIES = (
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy", "Memcpy"),
    ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset", "Memset"),
)
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_NVTX = "NVTX_EVENTS"
_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_NAME_COLUMNS = ("demangledName", "shortName", "mangledName")
_NS_PER_US = 1000.0
_Text = Callable[[object], "str | None"]  # a name column's value (a StringIds id or text) as text


def is_export(head: bytes) -> bool:
    """Whether a file starting with ``head`` is an SQLite database (an ``nsys export --type sqlite`` file)."""
    return head.startswith(SQLITE_MAGIC)


def _process(global_id: int | None) -> int | None:
    """The process part of an nsys ``globalTid`` / ``globalPid`` (every bit above the 24 of the thread id)."""
    return None if global_id is None else int(global_id) >> 24


def _correlation(process: int | None, correlation: Any, keyed: bool) -> Any:
    if not keyed or correlation is None or process is None:
        return correlation
    return f"{process}:{correlation}"


def load_events(path: Path) -> list[dict[str, Any]]:
    """The GPU activity, runtime calls and NVTX ranges of an nsys SQLite export as Chrome trace events (``ph`` X,
    Kineto's categories). Raises ValueError naming the file."""
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise ValueError(f"{path}: cannot open the SQLite export ({e})") from None
    try:
        return list(_events(con, path))
    except sqlite3.DatabaseError as e:
        raise ValueError(f"{path}: not a readable SQLite export ({e})") from None
    finally:
        con.close()


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _events(con: sqlite3.Connection, path: Path) -> Iterator[dict[str, Any]]:
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if KERNELS not in tables:
        raise ValueError(
            f"{path}: an SQLite file without {KERNELS}: not an Nsight Systems export with CUDA kernels "
            "(profile with --trace=cuda, and --cuda-graph-trace=node under CUDA graphs)"
        )
    strings: dict[int, str] = dict(con.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}

    def text(value: object) -> str | None:
        if isinstance(value, int):
            return strings.get(value)
        return value if isinstance(value, str) and value else None

    columns = _columns(con, KERNELS)
    names = [c for c in _NAME_COLUMNS if c in columns]
    if not {"start", "end"} <= columns or not names:
        raise ValueError(f"{path}: {KERNELS} lacks start, end or a kernel name column ({sorted(columns)})")
    copies = [(table, category, label, _columns(con, table)) for table, category, label in _COPIES if table in tables]
    copies = [c for c in copies if {"start", "end"} <= c[3]]
    # Correlation ids keyed by process only where every table that holds them names its process (else a kernel
    # keyed one way would never meet its launch call keyed the other).
    runtime = _columns(con, _RUNTIME) if _RUNTIME in tables else None
    keyed = (
        "globalPid" in columns
        and all("globalPid" in c[3] for c in copies)
        and (runtime is None or "globalTid" in runtime)
    )
    yield from _gpu_rows(con, KERNELS, columns, "kernel", f"coalesce({', '.join(names)}, NULL)", text, keyed)
    for table, category, label, copy_columns in copies:
        yield from _gpu_rows(con, table, copy_columns, category, f"'{label}'", text, keyed)
    if runtime is not None:
        yield from _host_rows(con, _RUNTIME, runtime, "cuda_runtime", "nameId", "", text, keyed)
    nvtx = _columns(con, _NVTX) if _NVTX in tables else set()
    if {"start", "end", "eventType"} <= nvtx and nvtx & {"text", "textId"}:
        # a registered string leaves text NULL and names it by textId
        name = "coalesce(text, textId)" if {"text", "textId"} <= nvtx else ("text" if "text" in nvtx else "textId")
        kinds = ", ".join(str(k) for k in _NVTX_RANGES)
        where = f'WHERE eventType IN ({kinds}) AND "end" IS NOT NULL AND "end" >= "start"'
        yield from _host_rows(con, _NVTX, nvtx, "user_annotation", name, where, text, keyed)


def _gpu_rows(
    con: sqlite3.Connection, table: str, columns: set[str], category: str, name_sql: str, text: _Text, keyed: bool
) -> Iterator[dict[str, Any]]:
    def col(name: str) -> str:
        return name if name in columns else "NULL"

    query = (
        f'SELECT "start", "end", {col("deviceId")}, {col("streamId")}, {col("correlationId")}, {col("globalPid")}, '
        f'{name_sql} FROM {table} ORDER BY "start"'
    )
    for start, end, device, stream, correlation, global_pid, name in con.execute(query):
        process = _process(global_pid)
        yield {
            "ph": "X",
            "cat": category,
            "name": text(name) or f"<unnamed kernel {name}>",
            "ts": start / _NS_PER_US,
            "dur": (end - start) / _NS_PER_US,
            "pid": process if process is not None else (device if device is not None else "?"),
            "tid": f"stream {stream}",
            "args": {
                "device": device if device is not None else 0,
                "stream": stream,
                "correlation": _correlation(process, correlation, keyed),
            },
        }


def _host_rows(
    con: sqlite3.Connection,
    table: str,
    columns: set[str],
    category: str,
    name_sql: str,
    where: str,
    text: _Text,
    keyed: bool,
) -> Iterator[dict[str, Any]]:
    tid_sql = "globalTid" if "globalTid" in columns else "NULL"
    corr_sql = "correlationId" if "correlationId" in columns else "NULL"
    query = f'SELECT "start", "end", {tid_sql}, {corr_sql}, {name_sql} FROM {table} {where} ORDER BY "start"'
    for start, end, global_tid, correlation, name in con.execute(query):
        process = _process(global_tid)
        event: dict[str, Any] = {
            "ph": "X",
            "cat": category,
            "name": text(name) or "",
            "ts": start / _NS_PER_US,
            "dur": (end - start) / _NS_PER_US,
            "pid": process if process is not None else "?",
            "tid": int(global_tid) & 0xFFFFFF if global_tid is not None else "?",
        }
        if correlation is not None:
            event["args"] = {"correlation": _correlation(process, correlation, keyed)}
        yield event
