"""``wavemla trace`` over Nsight Systems SQLite exports (``wavemla.tools.nsys``): the same decode steps written as an
nsys export and as a Kineto trace give the same profile; exports without kernels, unexported reports and corrupt
databases are refused naming the file."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from wavemla.tools import nsys, trace
from wavemla.tools.trace import StepSpec, analyze, profile_trace
from wavemla.tools.trace_rules import RuleSet, default_rules

RULES = RuleSet(default_rules())
ATTN = "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8>>(Flash_fwd_mla_params)"
MOE = "void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 4096u, (deep_gemm::GemmType)1, false>(float*)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
PID = 4242
# nsys' serialized ids: the process above the 24 bits of the thread id (here on hardware/VM id 0)
GLOBAL_PID = PID << 24
GLOBAL_TID = GLOBAL_PID + 4243


def decode_steps(batch: int, steps: int = 3) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of a decode of ``steps`` steps (times in ns): per step an NVTX range ``decode_step`` on the host, an
    eagerly launched attention kernel and a CUDA graph launch whose MoE GEMM and all-reduce (the latter on a second
    stream, overlapping the GEMM) run as graph nodes, and a device-to-device copy; the attention time grows with
    ``batch``."""
    rows: dict[str, list[tuple[Any, ...]]] = {"kernel": [], "memcpy": [], "runtime": [], "nvtx": []}
    corr = 100
    for s in range(steps):
        t0 = 1_000_000 + s * 200_000
        rows["nvtx"].append((t0, t0 + 150_000, GLOBAL_TID, 59, "decode_step", None))
        attn = 10_000 + 500 * batch
        rows["runtime"].append((t0 + 1_000, t0 + 4_000, GLOBAL_TID, corr, "cudaLaunchKernel_v7000"))
        rows["kernel"].append((t0 + 5_000, t0 + 5_000 + attn, 0, 7, corr, GLOBAL_PID, ATTN, 0))
        corr += 1
        rows["runtime"].append((t0 + 6_000, t0 + 9_000, GLOBAL_TID, corr, "cudaGraphLaunch_v10000"))
        g = t0 + 5_000 + attn + 2_000
        rows["kernel"].append((g, g + 30_000, 0, 7, corr, GLOBAL_PID, MOE, 11))
        rows["kernel"].append((g + 20_000, g + 40_000, 0, 9, corr, GLOBAL_PID, NCCL, 12))
        corr += 1
        rows["runtime"].append((t0 + 10_000, t0 + 11_000, GLOBAL_TID, corr, "cudaMemcpyAsync_v3020"))
        rows["memcpy"].append((g + 45_000, g + 47_000, 0, 7, corr, GLOBAL_PID, 8))
        corr += 1
    return rows


def write_export(path: Path, rows: dict[str, list[tuple[Any, ...]]], kernel_table: bool = True) -> Path:
    """An SQLite file with the tables and columns ``nsys export --type sqlite`` writes for CUDA and NVTX (the
    columns wavemla reads, and a few it does not), names interned in ``StringIds``."""
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    if kernel_table:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, "
            "contextId INT, streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT NOT NULL, "
            "shortName INT NOT NULL, mangledName INT, gridX INT, graphNodeId INT)"
        )
        for start, end, dev, stream, corr, gpid, name, node in rows["kernel"]:
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, NULL, 132, ?)",
                (start, end, dev, stream, corr, gpid, sid(name), sid(name.split("<")[0].split("::")[-1]), node),
            )
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, "
        "contextId INT, streamId INT NOT NULL, correlationId INT, globalPid INT, copyKind INT, bytes INT)"
    )
    for start, end, dev, stream, corr, gpid, kind in rows["memcpy"]:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, ?, ?, ?, ?, 4096)",
            (start, end, dev, stream, corr, gpid, kind),
        )
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT, "
        "globalTid INT, correlationId INT, nameId INT NOT NULL, returnValue INT)"
    )
    for start, end, gtid, corr, name in rows["runtime"]:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, ?, 0)", (start, end, gtid, corr, sid(name))
        )
    con.execute(
        "CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT, "
        "color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT)"
    )
    for start, end, gtid, kind, text, text_id in rows["nvtx"]:
        con.execute(
            "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, NULL, ?, 0)",
            (start, end, kind, text, gtid, sid(text_id) if text_id else None),
        )
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    con.commit()
    con.close()
    return path


def write_kineto(path: Path, rows: dict[str, list[tuple[Any, ...]]]) -> Path:
    """The same rows as a Kineto trace (µs; runtime calls and the NVTX ranges as host events)."""
    events: list[dict[str, Any]] = []
    for start, end, dev, stream, corr, _gpid, name, _node in rows["kernel"]:
        args = {"device": dev, "stream": stream, "correlation": corr}
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": stream, "ts": start / 1e3,
                       "dur": (end - start) / 1e3, "args": args})  # fmt: skip
    for start, end, dev, stream, corr, _gpid, _kind in rows["memcpy"]:
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": dev, "tid": stream,
                       "ts": start / 1e3, "dur": (end - start) / 1e3,
                       "args": {"device": dev, "stream": stream, "correlation": corr}})  # fmt: skip
    for start, end, _gtid, corr, name in rows["runtime"]:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": name.split("_v")[0], "pid": PID, "tid": 1,
                       "ts": start / 1e3, "dur": (end - start) / 1e3, "args": {"correlation": corr}})  # fmt: skip
    for start, end, _gtid, _kind, text, _tid in rows["nvtx"]:
        events.append({"ph": "X", "cat": "user_annotation", "name": text, "pid": PID, "tid": 1, "ts": start / 1e3,
                       "dur": (end - start) / 1e3})  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_export_reads_as_the_same_kineto_trace(tmp_path: Path) -> None:
    """Kernels, graph-node kernels, copies, launches and NVTX step ranges of an export give the profile the same
    workload gives as a Kineto trace: steps, streams, graph kernels, per-component busy time, span and overlap."""
    rows = decode_steps(batch=16)
    spec = StepSpec(marker="^decode_step$")
    a = profile_trace(write_export(tmp_path / "run.sqlite", rows), 16, RULES, spec)
    b = profile_trace(write_kineto(tmp_path / "run.json", rows), 16, RULES, spec)
    assert (a.steps, a.streams, a.graph_kernels, a.uncorrelated_kernels) == (3, 2, 6, 0)
    assert (b.steps, b.streams, b.graph_kernels, b.uncorrelated_kernels) == (3, 2, 6, 0)
    for name in ("attention", "moe", "communication", "memcpy"):
        ca, cb = a.components[name], b.components[name]
        assert ca.kernels == cb.kernels == 1, name  # a step
        assert ca.busy_ms == pytest.approx(cb.busy_ms, rel=1e-12), name
    assert a.components["attention"].busy_ms == pytest.approx(0.018)  # 18 µs a step
    assert (a.span_ms, a.busy_ms, a.idle_ms) == pytest.approx((b.span_ms, b.busy_ms, b.idle_ms), rel=1e-12)
    assert a.unclassified == b.unclassified == {}


def test_events_keep_names_devices_streams_and_process_correlations(tmp_path: Path) -> None:
    """Names come from StringIds (the demangled one), times become µs, the process bits of globalPid and globalTid
    key the correlation ids, and the NVTX range is a host annotation on its thread."""
    events = nsys.load_events(write_export(tmp_path / "one.sqlite", decode_steps(batch=1, steps=1)))
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert [k["name"] for k in kernels] == [ATTN, MOE, NCCL]
    assert kernels[0]["ts"] == 1005.0 and kernels[0]["dur"] == 10.5
    assert kernels[0]["args"] == {"device": 0, "stream": 7, "correlation": f"{PID}:100"}
    launches = {e["args"]["correlation"]: e["name"] for e in events if e["cat"] == "cuda_runtime"}
    assert launches == {f"{PID}:100": "cudaLaunchKernel_v7000", f"{PID}:101": "cudaGraphLaunch_v10000",
                        f"{PID}:102": "cudaMemcpyAsync_v3020"}  # fmt: skip
    (step,) = [e for e in events if e["cat"] == "user_annotation"]
    assert (step["name"], step["ts"], step["dur"], step["pid"], step["tid"]) == (
        "decode_step",
        1000.0,
        150.0,
        PID,
        4243,
    )
    assert [e["name"] for e in events if e["cat"] == "gpu_memcpy"] == ["Memcpy"]


def test_correlations_of_two_processes_stay_apart(tmp_path: Path) -> None:
    """Two ranks in one report reuse CUPTI correlation ids: a kernel matches only its own process's launch calls
    (keyed by the process bits of globalPid and globalTid; by the bare id, rank 77's kernel would take rank 4242's
    launch)."""
    rows = decode_steps(batch=1, steps=1)
    other = 77 << 24
    rows["kernel"] = [(s + 1, e + 1, 1, st, c, other, n, g) for s, e, _d, st, c, _p, n, g in rows["kernel"][:1]]
    rows["kernel"] += decode_steps(batch=1, steps=1)["kernel"]
    rows["runtime"] = [(s, e, other + 5, 101 if c == 100 else c, n) for s, e, _t, c, n in rows["runtime"][:1]]
    rows["runtime"] += decode_steps(batch=1, steps=1)["runtime"]
    path = write_export(tmp_path / "two.sqlite", rows)
    p1 = profile_trace(path, 1, RULES, StepSpec(), device="1")
    p0 = profile_trace(path, 1, RULES, StepSpec(), device="0")
    # rank 77's attention kernel (correlation 100) was launched by its cudaLaunchKernel, keyed 77:101: uncorrelated
    assert (p1.graph_kernels, p1.uncorrelated_kernels) == (0, 1)
    assert (p0.graph_kernels, p0.uncorrelated_kernels) == (2, 0)


def test_nvtx_names_by_text_id_and_marks_are_not_ranges(tmp_path: Path) -> None:
    """A registered NVTX string is named by textId (text NULL); marks (eventType 34) and unfinished ranges are not
    steps."""
    rows = decode_steps(batch=4, steps=2)
    rows["nvtx"] = [(s, e, t, k, None, "decode_step") for s, e, t, k, _x, _y in rows["nvtx"]]
    rows["nvtx"] += [(1_000_100, 1_000_100, GLOBAL_TID, 34, "decode_step", None)]
    rows["nvtx"] += [(1_500_000, None, GLOBAL_TID, 59, "decode_step", None)]
    p = profile_trace(write_export(tmp_path / "ids.sqlite", rows), 4, RULES, StepSpec(marker="^decode_step$"))
    assert p.steps == 2


def test_analyze_and_cli_take_exports_and_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory of exports named by batch is read as Kineto traces are: the attention slope (0.5 µs a request
    in these steps) is fitted, and the CLI prints it."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for b in (1, 8, 32, 64):
        write_export(runs / f"decode_bs{b}.sqlite", decode_steps(batch=b))
    report = analyze(trace.resolve_inputs([str(runs)]), StepSpec(marker="^decode_step$"))
    assert [p.batch for p in report.profiles] == [1, 8, 32, 64]
    assert report.fit is not None
    attention = report.fit.components["attention"]
    assert attention.slope_ms_per_request == pytest.approx(0.0005) and attention.r2 == pytest.approx(1.0)
    parser = argparse.ArgumentParser(prog="wavemla trace")
    trace.add_arguments(parser)
    assert trace.run(parser.parse_args([str(runs), "--step-marker", "^decode_step$", "--json", "-"])) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["batch"] for t in doc["traces"]] == [1, 8, 32, 64]


def test_export_without_kernels_is_refused(tmp_path: Path) -> None:
    path = write_export(tmp_path / "api_only.sqlite", decode_steps(batch=1), kernel_table=False)
    with pytest.raises(ValueError, match=r"api_only\.sqlite: an SQLite file without CUPTI_ACTIVITY_KIND_KERNEL"):
        trace.load_events(path)


def test_export_with_an_empty_kernel_table_has_no_kernels(tmp_path: Path) -> None:
    rows = decode_steps(batch=1)
    rows["kernel"], rows["memcpy"] = [], []
    with pytest.raises(ValueError, match=r"empty\.sqlite: no GPU kernel events"):
        profile_trace(write_export(tmp_path / "empty.sqlite", rows), 1, RULES, StepSpec())


@pytest.mark.parametrize("name", ["decode.nsys-rep", "decode.qdrep"])
def test_unexported_report_asks_for_an_export(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"\x00nsys report bytes")
    with pytest.raises(ValueError, match=rf"{name}: an Nsight Systems report; export it first \(nsys export --type"):
        trace.load_events(tmp_path / name)


def test_corrupt_database_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.sqlite"
    path.write_bytes(nsys.SQLITE_MAGIC + b"\x00" * 80)
    with pytest.raises(ValueError, match=r"cut\.sqlite: not a readable SQLite export"):
        trace.load_events(path)


def test_no_environment_reads() -> None:
    source = Path(nsys.__file__ or "").read_text()
    assert "environ" not in source and "getenv" not in source


def test_cli_refuses_an_unexported_report_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "decode_bs8.nsys-rep").write_bytes(b"\x00nsys report bytes")
    parser = argparse.ArgumentParser(prog="wavemla trace")
    trace.add_arguments(parser)
    assert trace.run(parser.parse_args([str(tmp_path / "decode_bs8.nsys-rep"), "--no-fit"])) == 2
    err = capsys.readouterr().err
    assert "wavemla trace: error:" in err and "nsys export --type sqlite decode_bs8.nsys-rep" in err


def test_nvtx_range_scopes_the_kernels_launched_inside_it(tmp_path: Path) -> None:
    """An NVTX range is a host range ``--scope`` can name: the graph launched inside an NVTX range ``moe_layer`` on
    the launching thread (its GEMM and all-reduce) belongs to the MoE, as the launch call's thread and time lie inside
    the range; the attention kernel launched before it stays attention; the same range on another thread scopes
    nothing."""
    rows = decode_steps(batch=2, steps=1)
    t0 = rows["nvtx"][0][0]
    rows["nvtx"].append((t0 + 5_500, t0 + 9_500, GLOBAL_TID, 59, "moe_layer", None))
    scopes = [trace.Scope.parse("moe=^moe_layer$")]
    p = profile_trace(write_export(tmp_path / "scoped.sqlite", rows), 2, RULES, StepSpec(), scopes=scopes)
    assert p.scoped_kernels == 2
    assert (p.components["moe"].kernels, p.components["communication"].kernels) == (2, 0)
    assert p.components["attention"].kernels == 1
    rows["nvtx"][-1] = (t0 + 5_500, t0 + 9_500, GLOBAL_TID + 1, 59, "moe_layer", None)
    p = profile_trace(write_export(tmp_path / "other_thread.sqlite", rows), 2, RULES, StepSpec(), scopes=scopes)
    assert p.scoped_kernels == 0 and p.components["communication"].kernels == 1


def test_correlations_stay_bare_where_a_table_names_no_process(tmp_path: Path) -> None:
    """Where the runtime calls carry no globalTid, no correlation id is keyed by process (a kernel keyed one way
    would never meet its launch keyed the other): every kernel still finds its launch."""
    path = write_export(tmp_path / "bare.sqlite", decode_steps(batch=1, steps=2))
    con = sqlite3.connect(path)
    con.execute(
        'CREATE TABLE bare AS SELECT "start", "end", eventClass, correlationId, nameId, returnValue '
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    )
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    con.execute("ALTER TABLE bare RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME")
    con.commit()
    con.close()
    kernel = next(e for e in nsys.load_events(path) if e["cat"] == "kernel")
    assert kernel["args"]["correlation"] == 100
    p = profile_trace(path, 1, RULES, StepSpec(marker="^decode_step$"))
    assert (p.steps, p.graph_kernels, p.uncorrelated_kernels) == (2, 4, 0)
