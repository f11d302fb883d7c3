"""Compiled kernel resources: the packaged table, the on-disk cache, and that every plannable configuration compiles
for sm_80, 86, 89, 90, 100 and 120 with the installed Triton."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import json_from_child
from wavemla import config, resources
from wavemla.device import PRESETS
from wavemla.plan import KernelConfig, Workload, all_candidate_configs, clear_caches, static_resources
from wavemla.resources import (
    ARCHES,
    CACHE_FILE,
    DATA_PATH,
    CompiledResources,
    CompileError,
    compile_requests,
    compile_resources,
    resource_key,
)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The process environment without WAVEMLA_* knobs (compile workers inherit the rest: PATH, HOME, Triton's
    cache); parsed values and cached plans are forgotten before and after."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAVEMLA_")}
    monkeypatch.setattr(config, "_environ", lambda: env)
    config.reload()
    clear_caches()
    yield env
    config.reload()
    clear_caches()


@pytest.fixture
def cache_dir(environ: dict[str, str], tmp_path: Path) -> Path:
    environ["WAVEMLA_CACHE_DIR"] = str(tmp_path / "cache")
    return tmp_path / "cache"


def _entry(**overrides: object) -> CompiledResources:
    row: dict[str, object] = {
        "kernel": resources.kernel_id(), "block_h": 16, "block_n": 16, "num_warps": 4, "num_stages": 1, "is_fp8": True,
        "q_dtype": "fp16", "arch": 120, "triton": resources.triton_version(), "shared_bytes": 49152,
        "static_shared_bytes": 1024, "regs": 200, "stack_bytes": 0, "local_bytes": 0,
    }  # fmt: skip
    row.update(overrides)
    return CompiledResources(**row)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the packaged table


def test_table_covers_every_plannable_config_on_every_arch() -> None:
    payload = json.loads(DATA_PATH.read_text(encoding="utf-8"))
    assert payload["schema"] == resources.SCHEMA
    assert payload["triton"] and payload["generated_by"].startswith("python -m wavemla.resources")
    version, kernel, table = resources.committed_table()
    assert version == payload["triton"] and kernel == payload["kernel"]
    assert len(table) == len(payload["entries"])  # no duplicate keys
    wanted = {
        resource_key(kernel, c.block_h, c.block_n, c.num_warps, c.num_stages, fp8, arch, version)
        for c, fp8 in all_candidate_configs()
        for arch in ARCHES
    }
    assert set(table) == wanted


def test_table_was_built_from_the_current_kernel_source() -> None:
    _, kernel, _ = resources.committed_table()
    assert kernel == resources.kernel_id(), (
        "the split kernel changed since the resource table was generated: run `python -m wavemla.resources --write`"
    )


def test_table_values_are_what_a_cubin_can_hold() -> None:
    _, _, table = resources.committed_table()
    for r in table.values():
        assert 1 <= r.regs <= 255, r
        assert r.stack_bytes >= 0 and r.local_bytes >= 0
        # the q tile plus one KV tile in shared memory at least (fp16 / bf16 elements)
        assert r.shared_bytes >= (r.block_h + r.block_n) * 512 * 2, r
        reserved = 1024 if r.arch >= 90 else 0
        assert r.static_shared_bytes == reserved, r  # the kernel declares no static shared memory of its own
        assert r.smem_bytes == r.shared_bytes
        assert r.q_dtype == ("fp16" if r.is_fp8 else "bf16")


def test_table_reproduces_the_h200_measured_shared_memory() -> None:
    """The sm_90 rows the H200 measured (Triton 3.6 on the GPU) match what this table compiled offline."""
    from wavemla.plan import _SM90_TABLE

    for (bh, bn, nw, ns, fp8), measured in _SM90_TABLE.items():
        hit = resources.lookup(KernelConfig(bh, bn, nw, ns), fp8, 90)
        assert hit is not None
        assert hit[0].smem_bytes == measured.smem_bytes, (bh, bn, nw, ns, fp8)


def test_planner_reads_the_table_for_sm120(environ: dict[str, str], cache_dir: Path) -> None:
    w = Workload(batch=64, s_q=1, h_q=64, topk=128, extra_topk=512)
    res = static_resources(KernelConfig(16, 16, 4, 1), w, PRESETS["rtx-pro-6000"])
    hit = resources.lookup(KernelConfig(16, 16, 4, 1), True, 120)  # the packaged table of this Triton (or the largest)
    assert hit is not None and "packaged table" in hit[1]
    entry = hit[0]
    assert res.source == "compiled" and "packaged table" in res.note
    assert (res.smem_bytes, res.regs_per_thread, res.stack_bytes) == (entry.smem_bytes, entry.regs, entry.stack_bytes)
    # sm_121 (DGX Spark) has no rows of its own: it reads sm_120's
    spark = static_resources(KernelConfig(16, 16, 4, 1), w, PRESETS["dgx-spark"])
    assert spark.smem_bytes == entry.smem_bytes and "sm_120 entry" in spark.note


def test_planner_reads_sm100_rows_for_sm103(environ: dict[str, str], cache_dir: Path) -> None:
    """sm_103 (B300) has no rows of its own: it reads sm_100's (they compile alike), not an estimate."""
    b300 = dataclasses.replace(PRESETS["b200"], name="b300-like", arch=103)
    w = Workload(batch=64, s_q=1, h_q=64, topk=128, extra_topk=512)
    for cfg in (KernelConfig(16, 32, 4, 1), KernelConfig(64, 64, 8, 1)):
        hit = resources.lookup(cfg, True, 100)
        assert hit is not None
        res = static_resources(cfg, w, b300)
        assert res.source == "compiled" and "sm_100 entry" in res.note
        assert (res.smem_bytes, res.regs_per_thread, res.stack_bytes) == (hit[0].smem_bytes, hit[0].regs,
                                                                          hit[0].stack_bytes)  # fmt: skip


# ---------------------------------------------------------------- cache directory and on-disk cache


def test_cache_dir_default_and_knob(environ: dict[str, str], tmp_path: Path) -> None:
    assert resources.cache_dir() == Path.home() / ".cache" / "wavemla"
    environ["WAVEMLA_CACHE_DIR"] = str(tmp_path / "x")
    config.reload()
    assert resources.cache_dir() == tmp_path / "x"
    environ["WAVEMLA_CACHE_DIR"] = "~/wavemla-cache"
    config.reload()
    assert resources.cache_dir() == Path.home() / "wavemla-cache"


def test_disk_cache_round_trip_and_wins_over_the_table(environ: dict[str, str], cache_dir: Path) -> None:
    fake = _entry(shared_bytes=60000, regs=100)
    resources._store(cache_dir, [fake])
    stored = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8"))
    assert stored["entries"] == [asdict(fake)]
    assert resources.cached_entries(cache_dir) == {fake.key: fake}
    hit = resources.lookup(KernelConfig(16, 16, 4, 1), True, 120)
    assert hit is not None and hit[0] == fake and "cache" in hit[1]
    w = Workload(batch=64, s_q=1, h_q=64, topk=128, extra_topk=512)
    res = static_resources(KernelConfig(16, 16, 4, 1), w, PRESETS["rtx-pro-6000"])
    assert (res.smem_bytes, res.regs_per_thread) == (60000, 100)
    # a second store merges instead of replacing
    other = _entry(arch=86, shared_bytes=1)
    resources._store(cache_dir, [other])
    assert set(resources.cached_entries(cache_dir)) == {fake.key, other.key}


def test_disk_cache_for_another_triton_is_ignored(environ: dict[str, str], cache_dir: Path) -> None:
    resources._store(cache_dir, [_entry(triton="0.0.1", shared_bytes=60000)])
    hit = resources.lookup(KernelConfig(16, 16, 4, 1), True, 120)
    assert hit is not None and "packaged table" in hit[1] and hit[0].shared_bytes != 60000


def test_each_triton_reads_its_own_packaged_table(environ: dict[str, str], cache_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Another Triton may build a configuration larger: the dense bf16 64x64x8x2 tile for sm_100 takes 221,480 B of
    shared memory with Triton 3.9 and 361,520 B with 3.6, over a B200's 232,448 B a block. Each Triton whose minor
    release has a packaged table reads its rows; any other reads the largest, so a plan never picks a tile that
    fails to launch, and the note names the tables and the installed Triton."""
    cfg = KernelConfig(64, 64, 8, 2)
    cases = (
        ("3.6.0", 361_520, "Triton 3.6.0, packaged table"),
        ("3.9.0+git1a2b3c", 221_480, "Triton 3.9.0, packaged table"),
        ("3.7.1", 361_520, "the largest of the packaged tables of Triton 3.9.0 and 3.6.0 (Triton 3.7.1 installed)"),
    )
    for installed, smem, note in cases:
        monkeypatch.setattr(resources, "triton_version", lambda v=installed: v)
        hit = resources.lookup(cfg, False, 100, resources.DENSE_KERNEL)
        assert hit is not None and hit[0].smem_bytes == smem and note in hit[1], (installed, hit)
        assert "installed" not in hit[1] or installed == "3.7.1"


@pytest.mark.parametrize("kernel", resources.KERNELS)
def test_every_packaged_table_has_the_main_tables_rows(kernel: str) -> None:
    """The tables of other Tritons hold the same configurations, compiled from the same kernel source, as the main
    one (regenerate them together: ``python -m wavemla.resources --write PATH --kernel KERNEL`` under each Triton)."""
    (version, kernel_key, table), *others = resources.packaged_tables(kernel)
    assert others, f"no table of another Triton beside {resources.DATA_PATHS[kernel].name}"
    wanted = {k.removesuffix(f"|triton-{version}") for k in table}
    for other_version, other_kernel, other_table in others:
        assert other_kernel == kernel_key and other_version != version
        assert {k.removesuffix(f"|triton-{other_version}") for k in other_table} == wanted


def test_unreadable_cache_is_a_miss(environ: dict[str, str], cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True)
    (cache_dir / CACHE_FILE).write_text("{not json", encoding="utf-8")
    assert resources.cached_entries(cache_dir) == {}
    assert resources.lookup(KernelConfig(16, 16, 4, 1), True, 120) is not None  # the table still answers


def test_cached_results_are_not_recompiled(environ: dict[str, str], cache_dir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fake = _entry(arch=89)
    resources._store(cache_dir, [fake])

    def no_workers(*args: object, **kwargs: object) -> list[dict[str, object]]:
        raise AssertionError("a cached configuration was compiled again")

    monkeypatch.setattr(resources, "_run_workers", no_workers)
    assert compile_resources([KernelConfig(16, 16, 4, 1)], arches=[89]) == [fake]


# ---------------------------------------------------------------- argument checks and failures


@pytest.mark.parametrize(
    ("configs", "arches", "kwargs", "says"),
    [
        pytest.param([KernelConfig(8, 16, 4, 1)], [90], {}, "configs", id="block-h-8"),
        pytest.param([KernelConfig(16, 128, 4, 1)], [90], {}, "configs", id="block-n-128"),
        pytest.param([KernelConfig(16, 16, 3, 1)], [90], {}, "configs", id="warps-3"),
        pytest.param([KernelConfig(16, 16, 4, 4)], [90], {}, "configs", id="stages-4"),
        pytest.param([KernelConfig(16, 16, 4, 1)], [75], {}, "arches", id="sm75"),
        pytest.param(
            [KernelConfig(16, 16, 4, 1)],
            [90],
            {"is_fp8": False, "q_dtype": "fp16"},
            "q_dtype",
            id="fp16-q-with-bf16-rows",
        ),
        pytest.param([KernelConfig(16, 16, 4, 1)], [90], {"q_dtype": "fp32"}, "q_dtype", id="fp32-q"),
    ],
)
def test_bad_requests_name_the_argument(
    environ: dict[str, str], cache_dir: Path, configs: list[KernelConfig], arches: list[int],
    kwargs: dict[str, object], says: str,
) -> None:  # fmt: skip
    with pytest.raises(ValueError, match=says):
        compile_resources(configs, arches, **kwargs)  # type: ignore[arg-type]


def test_compile_failure_names_config_and_arch(environ: dict[str, str], cache_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def failing(jobs: list[dict[str, object]], workers: int) -> list[dict[str, object]]:
        return [{"job": j, "error": "PTXASError: boom", "seconds": 0.0} for j in jobs]

    monkeypatch.setattr(resources, "_run_workers", failing)
    with pytest.raises(CompileError, match=r"BLOCK_H=32 BLOCK_N=16 warps=4 stages=1 fp8 q fp16 on sm_86: PTXAS"):
        compile_resources([KernelConfig(32, 16, 4, 1)], arches=[86])
    assert not (cache_dir / CACHE_FILE).exists()


def test_worker_reports_a_bad_job_without_dying() -> None:
    """A job the kernel cannot build comes back as an error row; the worker goes on to the next job."""
    bad = {"block_h": 16, "block_n": 16, "num_warps": 4, "num_stages": 1, "is_fp8": True, "q_dtype": "fp16",
           "arch": 12345}  # fmt: skip
    after = {**bad, "arch": 54321}
    rows = resources._run_workers([bad, after], 1)  # one worker: it must take the second job after the failure
    assert [row["job"]["arch"] for row in rows] == [12345, 54321]
    assert all("error" in row and "ok" not in row for row in rows), rows


_LOCAL_VERSION_PROBE = """
import json
from wavemla import resources as r
from wavemla.plan import KernelConfig
(got,) = r.compile_resources([KernelConfig(16, 16, 4, 1)], arches=[120])
print(json.dumps({"version": r.triton_version(), "triton": got.triton,
                  "where": r.lookup(KernelConfig(16, 16, 4, 1), True, 120)[1]}))
"""


def test_a_triton_with_a_local_version_finds_what_it_compiled(environ: dict[str, str], cache_dir: Path,
                                                                tmp_path: Path) -> None:  # fmt: skip
    """Nightly and source builds of Triton install as ``triton 3.9.0+git<sha>`` while ``triton.__version__`` says
    ``3.9.0``: a compile is keyed, stored and looked up by one of them, so it is found again (it used to raise
    ``CompileError: no result for ...`` and never hit the cache). Such an install is made here by a distribution
    record with a local version ahead of the real one on the path (the same entry points, the same package)."""
    real = metadata.distribution("triton")
    info = tmp_path / "site" / f"triton-{real.version}+gitdeadbeef.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {real.version}+gitdeadbeef\n")
    (info / "entry_points.txt").write_text(real.read_text("entry_points.txt") or "")
    path = os.pathsep.join([str(tmp_path / "site"), environ.get("PYTHONPATH", "")])
    got = json_from_child(_LOCAL_VERSION_PROBE, {**environ, "PYTHONPATH": path})
    assert got["version"] == f"{real.version}+gitdeadbeef" == got["triton"]
    assert "cache" in got["where"]


def test_triton_version_of_a_pytorch_triton_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's nightly Triton installs as ``pytorch-triton``: its version keys the cache, so an upgrade misses it."""

    def version(name: str) -> str:
        if name != "pytorch-triton":
            raise metadata.PackageNotFoundError(name)
        return "3.5.0+git1234"

    monkeypatch.setattr(resources.metadata, "version", version)
    assert resources.triton_version.__wrapped__() == "3.5.0+git1234"


# ---------------------------------------------------------------- portability: everything the planner can pick


def test_every_plannable_config_compiles_for_every_arch(environ: dict[str, str], cache_dir: Path) -> None:
    """Compiles (in worker processes, interpreter off) every configuration the planner can return, for sm_80, 86,
    89, 90, 100 and 120: FP8 with the fp16 query of production launches and with the bf16 query of small batches,
    bf16 rows with bf16 queries. Where the installed Triton made the packaged table, the numbers must match it.
    Takes about 3 minutes on 2 cores with a cold Triton cache."""
    t0 = time.perf_counter()
    requests = [(c, fp8, "fp16" if fp8 else "bf16") for c, fp8 in all_candidate_configs()]
    requests += [(c, True, "bf16") for c, fp8 in all_candidate_configs() if fp8]
    got = compile_requests(requests, ARCHES)
    assert len(got) == len(requests) * len(ARCHES) == len({r.key for r in got})
    for r in got:
        assert r.triton == resources.triton_version()
        assert 1 <= r.regs <= 255 and r.shared_bytes > 0, r
    assert set(resources.cached_entries(cache_dir)) == {r.key for r in got}
    for version, kernel, table in resources.packaged_tables():
        if version != resources.triton_version() or kernel != resources.kernel_id():
            continue
        for r in got:
            if r.key in table:
                t = table[r.key]
                assert (r.shared_bytes, r.regs, r.stack_bytes) == (t.shared_bytes, t.regs, t.stack_bytes), r.key
    print(f"compiled {len(got)} kernels in {time.perf_counter() - t0:.0f} s")


# ---------------------------------------------------------------- the dense decode's table


def test_dense_table_covers_every_plannable_config_on_every_arch() -> None:
    from wavemla.plan import all_dense_candidate_configs

    version, kernel, table = resources.committed_table(resources.DENSE_KERNEL)
    assert kernel.startswith("dense_decode@")
    wanted = {
        resource_key(kernel, c.block_h, c.block_n, c.num_warps, c.num_stages, fp8, arch, version)
        for c, fp8 in all_dense_candidate_configs()
        for arch in ARCHES
    }
    assert set(table) == wanted
    for r in table.values():
        assert 1 <= r.regs <= 255 and r.shared_bytes > 0, r


def test_dense_table_was_built_from_the_current_kernel_source() -> None:
    _, kernel, _ = resources.committed_table(resources.DENSE_KERNEL)
    assert kernel == resources.kernel_id(resources.DENSE_KERNEL), (
        "the dense split kernel changed since its resource table was generated: "
        "run `python -m wavemla.resources --write --kernel dense_decode`"
    )


def test_dense_config_compiles_and_matches_the_table(environ: dict[str, str], cache_dir: Path) -> None:
    """One dense configuration compiled for sm_120 (the 99 KB part) equals its table row when Triton is the same: the
    staged 16-row tile the planner gives FP8 rows up to 32 query rows."""
    cfg = KernelConfig(16, 32, 4, 3)
    (got,) = compile_resources([cfg], arches=[120], kernel=resources.DENSE_KERNEL)
    assert got.smem_bytes <= 99 * 1024
    for version, kernel, table in resources.packaged_tables(resources.DENSE_KERNEL):
        if version == resources.triton_version() and kernel == resources.kernel_id(resources.DENSE_KERNEL):
            t = table[got.key]
            assert (got.shared_bytes, got.regs, got.stack_bytes) == (t.shared_bytes, t.regs, t.stack_bytes)


def test_dense_fp8_tensor_rows_fit_where_the_v32_builds_fit(environ: dict[str, str]) -> None:
    """The planner prices FP8 dense tiles by the V3.2 builds in the table; the per-tensor FP8 rows' build (576 codes a
    token, the scale read through a pointer) of every FP8 configuration it can pick compiles for sm_80 and sm_120
    (the two smallest shared-memory parts: A100 and RTX PRO 6000) and holds as many programs per SM as the V3.2
    build of the same Triton, within the part's per-block limit and the planner's 1 KB spill floor wherever that
    build is."""
    from wavemla.plan import all_dense_candidate_configs

    configs = sorted({c for c, fp8 in all_dense_candidate_configs() if fp8}, key=str)
    parts = {80: PRESETS["a100"], 120: PRESETS["rtx-pro-6000"]}
    builds: dict[tuple[KernelConfig, int, bool], dict[str, int]] = {}
    for tensor in (False, True):
        jobs = [
            {"kernel": resources.DENSE_KERNEL, "block_h": c.block_h, "block_n": c.block_n, "num_warps": c.num_warps,
             "num_stages": c.num_stages, "is_fp8": True, "q_dtype": "fp16", "arch": arch, "kv_tensor": tensor}
            for c in configs for arch in parts
        ]  # fmt: skip
        for row in resources._run_workers(jobs, 2):
            assert "ok" in row, row
            r = row["ok"]
            cfg = KernelConfig(r["block_h"], r["block_n"], r["num_warps"], r["num_stages"])
            builds[(cfg, r["arch"], tensor)] = r
    for c in configs:
        for arch, spec in parts.items():
            v32, tensor = builds[(c, arch, False)], builds[(c, arch, True)]
            limit = spec.smem_per_block  # (64-row tiles exceed the RTX PRO 6000's in both builds: never planned there)
            assert tensor["shared_bytes"] <= limit or v32["shared_bytes"] > limit, (c, arch, tensor, v32)
            assert tensor["stack_bytes"] <= 1024 or v32["stack_bytes"] > 1024, (c, arch, tensor, v32)
            occ = [spec.blocks_per_sm(b["shared_bytes"], b["regs"], c.num_warps) for b in (v32, tensor)]
            assert occ[0] == occ[1], (c, arch, v32, tensor)


def test_unknown_kernel_is_named(environ: dict[str, str], cache_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"^kernel: expected one of .*, got 'prefill'$"):
        compile_resources([KernelConfig(16, 16, 4, 1)], arches=[90], kernel="prefill")


# ---------------------------------------------------------------- no recompiles as a workload's sizes change

_ALIGNMENT_PROBE = """
import difflib, json
from wavemla.kernels.sparse_decode import WORKLOAD_INTS, _sparse_mla_decode_kernel as fn
from wavemla.resources import sparse_decode_ptx
ptx = [sparse_decode_ptx(64, 64, 8, 1, True, "fp16", 90, mark_workload=m) for m in (True, False)]
blind = [p.name for p in fn.params if p.do_not_specialize_on_alignment]
diff = list(difflib.unified_diff(ptx[0].splitlines(), ptx[1].splitlines(), "marked", "blind", n=0, lineterm=""))
print(json.dumps({"identical": ptx[0] == ptx[1], "blind": blind, "workload": list(WORKLOAD_INTS), "diff": diff[:40]}))
"""


def test_workload_sized_ints_take_no_alignment_hint(environ: dict[str, str], tmp_path: Path) -> None:
    """The split kernel ignores the alignment of the integers that follow the workload (``WORKLOAD_INTS``: slot
    counts, list widths and strides, work counters), so lists or pools that change size do not compile new variants
    mid-decode; and that costs nothing: one FP8 configuration compiled for sm_90 with all of them marked
    ``tt.divisibility = 16`` and with none gives the same PTX. Compiled in a child process (interpreter off) with a
    Triton cache of its own, so both variants are compiled here and not read from what other tests compiled."""
    got = json_from_child(_ALIGNMENT_PROBE, {**environ, "TRITON_CACHE_DIR": str(tmp_path / "triton-cache")})
    assert got["blind"] == got["workload"]
    diff = "\n".join(got["diff"])
    assert got["identical"], f"an alignment hint on a workload-sized integer changed the split kernel's PTX:\n{diff}"
