"""Static resources of wavemla's Triton kernels per (kernel, configuration, architecture), compiled ahead of time.

Occupancy decides how many programs an SM holds, and it follows from three numbers that only the compiler knows:
the shared memory a program requests, its registers per thread, and its stack (spill) bytes. This module compiles a
kernel configuration for any target Triton supports (``triton.compile`` with a ``GPUTarget``; no GPU needed) and reads

- shared memory from Triton's metadata (``compiled.metadata.shared``, the dynamic shared memory a launch requests);
- registers, stack and static shared memory from the cubin with the ``cuobjdump -res-usage`` binary Triton ships.

From sm_90 on, ptxas writes the 1 KB the driver reserves per block into the cubin as static shared memory
(``SHARED:1024``); sm_80-89 cubins show 0 and the driver adds the same 1 KB at launch. :attr:`CompiledResources.
smem_bytes` is therefore Triton's dynamic shared memory plus any static shared memory beyond that reservation, the
number :meth:`wavemla.device.DeviceSpec.occupancy` expects (it adds the reserved 1 KB itself).

Compiles run in worker processes (in parallel, and with Triton's interpreter switched off, so this also works from a
process that runs the kernels through the interpreter). Results are cached on disk in one JSON file under the
``WAVEMLA_CACHE_DIR`` knob (default ``~/.cache/wavemla``), keyed by kernel, configuration, architecture and Triton
version. The planner itself never compiles: it reads the table committed with the package
(``wavemla/data/sparse_decode_resources.json``), regenerated with::

    python -m wavemla.resources --write            # every configuration the planner can pick x sm_80..sm_120

Example::

    from wavemla.plan import KernelConfig
    from wavemla.resources import compile_resources
    (r,) = compile_resources([KernelConfig(16, 16, 4, 1)], arches=[120])
    print(r.smem_bytes, r.regs, r.stack_bytes)   # 33280 255 128 with Triton 3.9
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wavemla import config

if TYPE_CHECKING:
    from wavemla.plan import KernelConfig

KERNEL = "sparse_decode"  # the split kernel, wavemla.kernels.sparse_decode._sparse_mla_decode_kernel
DENSE_KERNEL = "dense_decode"  # the dense split kernel, wavemla.kernels.dense_decode._dense_mla_decode_kernel
PREFILL_KERNEL = "sparse_prefill"  # the sparse prefill, wavemla.kernels.sparse_prefill._sparse_prefill_kernel
KERNELS: tuple[str, ...] = (KERNEL, DENSE_KERNEL, PREFILL_KERNEL)
# The sources each split kernel is built from: their digest is part of every key, so an edited kernel misses the
# cache.
_KERNEL_SOURCES: dict[str, tuple[str, ...]] = {
    KERNEL: ("kernels/sparse_decode.py", "kernels/fp8.py", "kernels/gdc.py"),
    DENSE_KERNEL: ("kernels/dense_decode.py", "kernels/fp8.py"),
    PREFILL_KERNEL: ("kernels/sparse_prefill.py", "kernels/sparse_decode.py"),
}
ARCHES: tuple[int, ...] = (80, 86, 89, 90, 100, 120)
DATA_PATH = Path(__file__).resolve().parent / "data" / "sparse_decode_resources.json"
DENSE_DATA_PATH = Path(__file__).resolve().parent / "data" / "dense_decode_resources.json"
PREFILL_DATA_PATH = Path(__file__).resolve().parent / "data" / "sparse_prefill_resources.json"
DATA_PATHS: dict[str, Path] = {KERNEL: DATA_PATH, DENSE_KERNEL: DENSE_DATA_PATH, PREFILL_KERNEL: PREFILL_DATA_PATH}
CACHE_FILE = "resources-v1.json"
SCHEMA = 1
# From sm_90 on the cubin carries the driver's per-block reservation as static shared memory (see module doc).
_CUBIN_RESERVED_SMEM_FROM_ARCH = 90
_CUBIN_RESERVED_SMEM = 1024
_RES_USAGE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


class CompileError(RuntimeError):
    """A kernel configuration failed to compile for an architecture (the message names both)."""


@dataclass(frozen=True)
class CompiledResources:
    """What one compiled kernel configuration needs per program on one architecture."""

    kernel: str
    block_h: int
    block_n: int
    num_warps: int
    num_stages: int
    is_fp8: bool
    q_dtype: str  # "fp16" or "bf16": the query pointer's type at launch (see _sparse_decode_spec)
    arch: int
    triton: str
    shared_bytes: int  # Triton's dynamic shared memory (compiled.metadata.shared)
    static_shared_bytes: int  # cuobjdump SHARED (includes the 1 KB reservation from sm_90 on)
    regs: int  # cuobjdump REG, registers per thread
    stack_bytes: int  # cuobjdump STACK: per-thread stack frame, where ptxas puts spilled registers
    local_bytes: int  # cuobjdump LOCAL

    @property
    def smem_bytes(self) -> int:
        """Shared memory per program as the occupancy model takes it (reserved 1 KB excluded)."""
        reserved = _CUBIN_RESERVED_SMEM if self.arch >= _CUBIN_RESERVED_SMEM_FROM_ARCH else 0
        return self.shared_bytes + max(self.static_shared_bytes - reserved, 0)

    @property
    def key(self) -> str:
        return resource_key(
            self.kernel,
            self.block_h,
            self.block_n,
            self.num_warps,
            self.num_stages,
            self.is_fp8,
            self.arch,
            self.triton,
            self.q_dtype,
        )


def default_q_dtype(is_fp8: bool) -> str:
    """The query dtype of a production launch: FP8 caches compute in fp16 and the launcher converts q (upp >= 3)."""
    return "fp16" if is_fp8 else "bf16"


def resource_key(
    kernel: str, block_h: int, block_n: int, num_warps: int, num_stages: int, is_fp8: bool, arch: int, triton: str,
    q_dtype: str | None = None,
) -> str:  # fmt: skip
    """The cache key: ``sparse_decode@<digest>|16x16x4x1|fp8|q-fp16|sm_120|triton-3.9.0``."""
    fmt = "fp8" if is_fp8 else "bf16"
    q = q_dtype or default_q_dtype(is_fp8)
    return f"{kernel}|{block_h}x{block_n}x{num_warps}x{num_stages}|{fmt}|q-{q}|sm_{arch}|triton-{triton}"


@functools.cache
def kernel_id(kernel: str = KERNEL) -> str:
    """``sparse_decode@<digest>`` (or ``dense_decode@...``): the kernel name and a digest of the source files it is
    compiled from."""
    digest = hashlib.sha256()
    for name in _KERNEL_SOURCES[kernel]:
        digest.update((Path(__file__).resolve().parent / name).read_bytes())
    return f"{kernel}@{digest.hexdigest()[:12]}"


@functools.cache
def triton_version() -> str:
    """The installed Triton's version, read from package metadata (Triton itself is not imported). Nightly and
    source builds keep their local part (``3.9.0+git<sha>``, where ``triton.__version__`` says ``3.9.0``), so two
    builds never share a cache key; PyTorch's nightly Triton installs as ``pytorch-triton``."""
    for name in ("triton", "pytorch-triton"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(name)
    return "unknown"  # pragma: no cover - triton is a core dependency


def cache_dir() -> Path:
    """Where compiled resources are cached: the ``WAVEMLA_CACHE_DIR`` knob, else ``~/.cache/wavemla``."""
    value = config.get("WAVEMLA_CACHE_DIR")
    return Path(value).expanduser() if value else Path.home() / ".cache" / "wavemla"


# ---------------------------------------------------------------- reading: committed table and disk cache


def _entries_from(payload: Any, source: str) -> dict[str, CompiledResources]:
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA or not isinstance(payload.get("entries"), list):
        raise ValueError(f"{source}: not a wavemla resource file (schema {SCHEMA})")
    out: dict[str, CompiledResources] = {}
    for row in payload["entries"]:
        r = CompiledResources(**row)
        out[r.key] = r
    return out


@functools.cache
def committed_table(kernel: str = KERNEL) -> tuple[str, str, dict[str, CompiledResources]]:
    """(Triton version, kernel id it was generated with, entries by key) of the table shipped with the package for
    ``kernel``."""
    try:
        return _read_table(DATA_PATHS[kernel])
    except FileNotFoundError:  # a broken install: the planner falls back to estimates and says so
        return "none", "none", {}


def _read_table(path: Path) -> tuple[str, str, dict[str, CompiledResources]]:
    """(Triton version, kernel id, entries by key) of the table file at ``path``."""
    payload = json.loads(path.read_text(encoding="utf-8"))
    return str(payload["triton"]), str(payload["kernel"]), _entries_from(payload, str(path))


def other_table_paths(kernel: str = KERNEL) -> list[Path]:
    """The tables shipped for ``kernel`` beside its main one, each compiled with another Triton
    (``<main table's stem>.triton-<version>.json``, written by ``--write PATH --kernel KERNEL``)."""
    main_path = DATA_PATHS[kernel]
    return sorted(main_path.parent.glob(f"{main_path.stem}.triton-*.json"))


@functools.cache
def packaged_tables(kernel: str = KERNEL) -> tuple[tuple[str, str, dict[str, CompiledResources]], ...]:
    """Every table shipped for ``kernel``, its main one (:func:`committed_table`) first: (Triton version, kernel id,
    entries by key) each."""
    return (committed_table(kernel), *(_read_table(path) for path in other_table_paths(kernel)))


def _minor(version: str) -> str:
    """``3.6`` of ``3.6.0`` or ``3.6.0+git1234``: builds of one minor release compile alike."""
    return ".".join(version.split("+")[0].split(".")[:2])


@functools.lru_cache(maxsize=8)
def _disk_cache(path: Path, mtime_ns: int) -> dict[str, CompiledResources]:
    try:
        return _entries_from(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (OSError, ValueError, TypeError):
        return {}  # an unreadable cache is a miss, never an error: it is rebuilt on the next compile


def cached_entries(directory: Path | None = None) -> dict[str, CompiledResources]:
    """Entries of the on-disk cache (empty when there is none)."""
    path = (directory or cache_dir()) / CACHE_FILE
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return {}
    return _disk_cache(path, mtime)


def lookup(cfg: KernelConfig, is_fp8: bool, arch: int, kernel: str = KERNEL) -> tuple[CompiledResources, str] | None:
    """Compiled resources of ``cfg`` on ``arch`` without compiling: (resources, where from) or None.

    The on-disk cache is consulted first, for the installed Triton version and the current kernel source (it is what
    a launch will compile); then the packaged tables, whatever kernel source produced them (the source string says
    so when it differs): the one of the installed Triton's minor release where one is shipped, else the largest
    shared memory any of them gives (another Triton may build a configuration larger, and a plan must launch: Triton
    3.6 builds the dense bf16 64x64x8x2 tile for sm_100 with 361,520 B where 3.9 needs 221,480).
    """
    args = (cfg.block_h, cfg.block_n, cfg.num_warps, cfg.num_stages, is_fp8, arch)
    installed = triton_version()
    hit = cached_entries().get(resource_key(kernel_id(kernel), *args, installed))
    if hit is not None:
        return hit, f"compiled: Triton {hit.triton}, {CACHE_FILE} cache"
    found = []
    for version, built_from, table in packaged_tables(kernel):
        row = table.get(resource_key(built_from, *args, version))
        if row is not None:
            found.append((version, built_from, row))
    if not found:
        return None
    same = [f for f in found if _minor(f[0]) == _minor(installed)]
    version, built_from, hit = same[0] if same else max(found, key=lambda f: f[2].smem_bytes)
    stale = "" if built_from == kernel_id(kernel) else ", from an older kernel source: regenerate it"
    if same or len(found) == 1:
        other = "" if same else f", Triton {installed} installed"  # whose builds may differ
        return hit, f"compiled: Triton {version}, packaged table{other}{stale}"
    versions = " and ".join(f[0] for f in found)
    return hit, (f"compiled: Triton {version}, the largest of the packaged tables of Triton {versions} (Triton "
                 f"{installed} installed){stale}")  # fmt: skip


# ---------------------------------------------------------------- compiling


def _sparse_decode_spec(
    block_h: int, block_n: int, num_stages: int, is_fp8: bool, q_dtype: str, arch: int = 90
) -> dict[str, Any]:
    """Signature, constexprs and alignment attributes of the split kernel at a DSV4 decode launch.

    The launch: h = 64 heads, MTP s_q = 2 (so S_Q stays a runtime argument), a 128-wide SWA list at page 256 and a
    512-wide compressed list at page 64, lengths and sink given, bf16 output. FP8 caches compute in fp16: with
    ``q_dtype="fp16"`` (the table's launch) q arrives converted, as the launcher does for 64-head plans of 3 or
    more tiles; with ``"bf16"`` the kernel converts it through its scratch rows (``Q_VIA_WS``), as 16x32 plans of 3
    or more tiles do. Their split workspace is fp16, that of row caches fp32. As Triton's
    launcher does, pointers (torch allocations are 256-byte aligned) and the integer arguments whose DSV4 values are
    multiples of 16 get ``tt.divisibility = 16``; the MODEL1 row stride (584 B) does not, nor do the kernel's
    ``WORKLOAD_INTS`` (slot counts, list widths and strides, work counters), which it never specializes on alignment.
    """
    rows = "*u8" if is_fp8 else "*bf16"
    workspace = "*fp16" if is_fp8 else "*fp32"
    pointers = {
        "p_q": f"*{q_dtype}", "p_out": "*bf16", "p_lse": "*fp32", "p_o_ws": workspace, "p_lse_ws": "*fp32",
        "p_cnt": "*i32", "p_q_ws": "*fp16", "p_sink": "*fp32", "p_p_ws": "*fp16", "p_kv": rows, "p_idx": "*i32",
        "p_len": "*i32", "p_kv_x": rows, "p_idx_x": "*i32", "p_len_x": "*i32",
    }  # fmt: skip
    h, s_q, page, page_x = 64, 2, 256, 64
    row_stride = 584 if is_fp8 else 512  # elements of the row pointer's type
    ints = {
        "stride_kv_blk": 149760 if is_fp8 else page * 512, "stride_kv_tok": row_stride,
        "stride_kvx_blk": 37440 if is_fp8 else page_x * 512, "stride_kvx_tok": row_stride, "S_Q": s_q, "H": h,
        "stride_qb": s_q * h * 512, "stride_qs": h * 512, "stride_qh": 512, "stride_ob": s_q * h * 512,
        "stride_os": h * 512, "stride_oh": 512,
    }  # fmt: skip
    import triton.language as tl

    from wavemla.kernels.sparse_decode import (
        MERGE_CHUNK,
        STAGED_CHUNK_TILES,
        WORKLOAD_INTS,
        l2_policies,
        l2_prefetch_next,
        p_scratch,
    )
    from wavemla.plan import staged_fp8

    unspecialized = WORKLOAD_INTS  # the kernel takes no alignment hint for them (sizes, list widths, counters)

    l2 = l2_policies(is_fp8, block_h, block_n)  # the launcher's L2 policies
    staged = staged_fp8(is_fp8, num_stages)
    constexprs: dict[str, Any] = {
        "IS_FP8": is_fp8, "PAGE": page, "PAGE_X": page_x, "HAS_LEN": True, "HAS_EXTRA": True, "HAS_LEN_X": True,
        "HAS_SINK": True, "DTYPE": tl.float16 if is_fp8 else tl.bfloat16, "BLOCK_H": block_h, "BLOCK_N": block_n,
        "D": 512, "NUM_HB": math.ceil(h / block_h), "NUM_STAGES": num_stages,
        # as the launcher sets them: the hardware e4m3 conversion from sm_89 on, row prefetch for 32-row tiles
        "E4M3_CVT": is_fp8 and arch >= 89, "PREFETCH_ROWS": is_fp8 and block_n <= 32,
        "MERGE_IN_KERNEL": block_n >= 64, "ACQUIRE_ASM": True,
        "Q_VIA_WS": is_fp8 and q_dtype == "bf16" and not staged,
        "PDL": arch >= 90,  # the launcher's choice with a Triton that has grid dependency control
        # q converted by the launcher's kernel, this one launched behind it, the first tile prefetched meanwhile
        # (staged tiles convert q in registers)
        "WAIT_Q": is_fp8 and q_dtype == "fp16" and arch >= 90 and not staged,
        "PREFETCH_FIRST": is_fp8 and q_dtype == "fp16" and arch >= 90 and not staged,
        "MERGE_DC": MERGE_CHUNK,
        "KV_EVICT": "evict_first" if l2 else "",
        "WS_EVICT": "evict_last" if l2 else "",
        "PREFETCH_L2": l2_prefetch_next(is_fp8, block_n), "P_VIA_WS": p_scratch(is_fp8, block_h, arch),
        "MERGE_PAIR": True, "LEAN_NORM": True, "DECODE_ASM": True, "STAGED_C": STAGED_CHUNK_TILES,
        "SPREAD": False,  # one range of units a program (a spread plan's two compile to the same resources)
    }  # fmt: skip
    return {"pointers": pointers, "ints": ints, "unspecialized": unspecialized, "constexprs": constexprs}


def _dense_decode_spec(
    block_h: int, block_n: int, num_stages: int, is_fp8: bool, q_dtype: str, arch: int, kv_tensor: bool = False
) -> dict[str, Any]:
    """Signature, constexprs and alignment attributes of the dense split kernel at a DeepSeek-V3 decode launch.

    The launch: h = 128 heads, s_q = 1, d_qk = 576, page 64, causal off, bf16 output, partials of
    :func:`wavemla.kernels.dense_decode.partials_dtype` (fp16 for FP8 rows, bf16 for bf16 rows). FP8 V3.2
    caches compute in fp16 (the launcher converts q); row caches in q's dtype (bf16). Pointers and the integer
    arguments whose values are multiples of 16 get ``tt.divisibility = 16`` (as Triton's launcher does): the V3.2
    row stride (656 B) is one; the block count, the length bound and the batch-dependent ones are not marked.
    ``kv_tensor``: per-tensor FP8 rows instead (576 codes a token, the scale read through ``p_kscale``); the table
    holds the V3.2 builds, whose tiles carry more bytes a row.
    """
    rows = "*u8" if is_fp8 else "*bf16"
    half = "*fp16" if is_fp8 else "*bf16"  # the compute dtype: of the partials and the P scratch rows
    pointers = {
        "p_q": f"*{q_dtype}", "p_out": "*bf16", "p_lse": "*fp32", "p_o_ws": half, "p_lse_ws": "*fp32", "p_kv": rows,
        "p_bt": "*i32", "p_seqlens": "*i32", "p_sched": "*i32", "p_p_ws": half, "p_kscale": "*fp32",
        "p_qscale": "*fp32",
    }  # fmt: skip
    h, s_q, d_qk, page = 128, 1, 576, 64
    row_stride = (576 if kv_tensor else 656) if is_fp8 else d_qk  # elements of the row pointer's type
    ints = {
        "stride_kv_blk": page * row_stride, "stride_kv_tok": row_stride, "S_Q": s_q, "H": h, "M": s_q * h,
        "stride_qb": s_q * h * d_qk, "stride_qs": h * d_qk, "stride_qh": d_qk, "stride_ob": s_q * h * 512,
        "stride_os": h * 512, "stride_oh": 512,
    }  # fmt: skip
    unspecialized = ("num_blocks", "max_len", "stride_bt")
    import torch
    import triton.language as tl

    from wavemla.kernels.dense_decode import CHUNK_TILES, keys_major, l2_ahead_tiles, p_scratch

    constexprs: dict[str, Any] = {
        "IS_FP8": is_fp8, "KV_TENSOR": bool(is_fp8 and kv_tensor), "Q_SCALE": False, "HAS_PE": True,
        "CAUSAL": False, "PAGE": page,
        "DTYPE": tl.float16 if is_fp8 else tl.bfloat16, "SPLIT_P": False, "BLOCK_H": block_h,  # WAVEMLA_DENSE_P=single
        "BLOCK_N": block_n, "NUM_RB": math.ceil(s_q * h / block_h), "NUM_STAGES": num_stages,
        "KEYS_MAJOR": keys_major(is_fp8, block_h), "TILE_IN_PAGE": page % block_n == 0, "BLOCK_C": CHUNK_TILES,
        "P_VIA_WS": p_scratch(is_fp8, block_h, torch.bfloat16, arch), "SCRATCH_ASM": True,
        "L2_AHEAD": l2_ahead_tiles(is_fp8), "E4M3_CVT": is_fp8 and arch >= 89,
    }  # fmt: skip
    return {"pointers": pointers, "ints": ints, "unspecialized": unspecialized, "constexprs": constexprs}


def _sparse_prefill_spec(block_h: int, block_n: int, num_stages: int) -> dict[str, Any]:
    """Signature and constexprs of the sparse prefill at a DeepSeek-V3.2 launch (d_qk 576: its rope tiles make it
    the larger of the two row widths, so its resources bound DeepSeek-V4's 512): h = 128, topk 2048, bf16, lengths
    and sink; pointers and 16-multiple strides marked ``tt.divisibility = 16``."""
    pointers = {
        "p_q": "*bf16", "p_kv": "*bf16", "p_idx": "*i32", "p_len": "*i32", "p_sink": "*fp32", "p_out": "*bf16",
        "p_max": "*fp32", "p_lse": "*fp32", "p_part": "*fp32",
    }  # fmt: skip
    h, d_qk, topk = 128, 576, 2048
    ints = {"H": h, "stride_qt": h * d_qk, "stride_qh": d_qk, "stride_kv": d_qk, "stride_it": topk,
            "stride_ot": h * 512, "stride_oh": 512}  # fmt: skip
    constexprs = {
        "HAS_LEN": True, "HAS_SINK": True, "D": 512, "D_ROPE": d_qk - 512, "BLOCK_H": block_h, "BLOCK_N": block_n,
        "NUM_STAGES": num_stages, "SPLITS": 1,
    }  # fmt: skip
    return {"pointers": pointers, "ints": ints, "unspecialized": ("s_kv", "topk", "num_hb", "piece_tiles"),
            "constexprs": constexprs, "fp32": ("sm_scale",)}  # fmt: skip


def _res_usage(cubin: bytes) -> tuple[int, int, int, int]:
    """(registers, stack bytes, static shared bytes, local bytes) of the one kernel in ``cubin``."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        done = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True, check=False)
    match = _RES_USAGE.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise CompileError(f"cuobjdump -res-usage failed ({done.returncode}): {done.stderr.strip() or done.stdout}")
    regs, stack, shared, local = (int(g) for g in match.groups())
    return regs, stack, shared, local


def compile_for_target(
    fn: Any,
    *,
    arch: int,
    num_warps: int,
    num_stages: int,
    pointers: Mapping[str, str],
    ints: Mapping[str, int],
    constexprs: Mapping[str, Any],
    fp32: Iterable[str] = (),
    unspecialized: Iterable[str] = (),
) -> Any:
    """Compile the JIT function ``fn`` for ``sm_<arch>`` without a GPU, specialised the way the JIT launcher would.

    Arguments are ``pointers`` (Triton pointer types such as ``"*bf16"``, marked 16-byte aligned: torch allocations
    are 256-byte aligned), ``ints`` (i32 values, marked divisible by 16 when they are), ``unspecialized`` (i32 with
    no hint), ``fp32``; every other argument is a constexpr (from ``constexprs``). Returns
    Triton's compiled kernel (``asm["cubin"]``, ``metadata``). Triton's interpreter must be off.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fp32, unspecialized = set(fp32), set(unspecialized)
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, name in enumerate(fn.arg_names):
        if name in pointers:
            signature[name] = pointers[name]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in fp32:
            signature[name] = "fp32"
        elif name in ints:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in unspecialized:
            signature[name] = "i32"
        else:
            signature[name] = "constexpr"  # its value from ``constexprs``, else the kernel's default
    values = {k: v for k, v in constexprs.items() if k in signature}  # extra names in a shared mapping are ignored
    src = ASTSource(fn=fn, signature=signature, constexprs=values, attrs=attrs)
    return triton.compile(
        src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages}
    )


def sparse_decode_ptx(
    block_h: int,
    block_n: int,
    num_warps: int,
    num_stages: int,
    is_fp8: bool,
    q_dtype: str,
    arch: int,
    *,
    mark_workload: bool,
    drop: Sequence[str] = (),
) -> str:
    """PTX of the split kernel at the table's launch (:func:`_sparse_decode_spec`) for ``sm_<arch>``, its name
    masked, for comparing hints. ``mark_workload``: every ``WORKLOAD_INTS`` argument marked a multiple of 16 (what
    Triton's launcher would pass without the kernel's ``do_not_specialize_on_alignment``); otherwise none is.
    ``drop``: other integer arguments whose hints are taken away. Triton's interpreter must be off."""
    from wavemla.kernels.sparse_decode import WORKLOAD_INTS, _sparse_mla_decode_kernel

    spec = _sparse_decode_spec(block_h, block_n, num_stages, is_fp8, q_dtype, arch)
    ints = {k: v for k, v in spec["ints"].items() if k not in drop}
    if mark_workload:
        ints.update(dict.fromkeys(WORKLOAD_INTS, 32))
    compiled = compile_for_target(
        _sparse_mla_decode_kernel, arch=arch, num_warps=num_warps, num_stages=num_stages, pointers=spec["pointers"],
        ints=ints, constexprs=spec["constexprs"], fp32=("qk_scale",),
        unspecialized=tuple(drop) + (() if mark_workload else WORKLOAD_INTS),
    )  # fmt: skip
    return re.sub(r"_sparse_mla_decode_kernel\w*", "K", compiled.asm["ptx"])


def _compile_here(job: dict[str, Any]) -> dict[str, Any]:
    """Compile one job in this process (Triton's interpreter must be off) and return a CompiledResources row."""
    import triton

    from wavemla.kernels.dense_decode import _dense_mla_decode_kernel
    from wavemla.kernels.sparse_decode import _sparse_mla_decode_kernel
    from wavemla.kernels.sparse_prefill import _sparse_prefill_kernel

    kernel = job.get("kernel", KERNEL)
    fn = {KERNEL: _sparse_mla_decode_kernel, DENSE_KERNEL: _dense_mla_decode_kernel,
          PREFILL_KERNEL: _sparse_prefill_kernel}[kernel]  # fmt: skip
    if not isinstance(fn, triton.runtime.JITFunction):
        raise CompileError("the kernels were imported under Triton's interpreter; compile in a worker process")
    if kernel == PREFILL_KERNEL:
        spec = _sparse_prefill_spec(job["block_h"], job["block_n"], job["num_stages"])
    elif kernel == DENSE_KERNEL:
        spec = _dense_decode_spec(
            job["block_h"], job["block_n"], job["num_stages"], job["is_fp8"], job["q_dtype"], job["arch"],
            job.get("kv_tensor", False),
        )  # fmt: skip
    else:
        spec = _sparse_decode_spec(
            job["block_h"], job["block_n"], job["num_stages"], job["is_fp8"], job["q_dtype"], job["arch"]
        )
    compiled = compile_for_target(
        fn,
        arch=job["arch"],
        num_warps=job["num_warps"],
        num_stages=job["num_stages"],
        pointers=spec["pointers"],
        ints=spec["ints"],
        constexprs=spec["constexprs"],
        fp32=spec.get("fp32", ("qk_scale",)),
        unspecialized=spec["unspecialized"],
    )
    regs, stack, static_shared, local = _res_usage(compiled.asm["cubin"])
    return asdict(
        CompiledResources(
            kernel=kernel_id(kernel),
            block_h=job["block_h"],
            block_n=job["block_n"],
            num_warps=job["num_warps"],
            num_stages=job["num_stages"],
            is_fp8=job["is_fp8"],
            q_dtype=job["q_dtype"],
            arch=job["arch"],
            triton=triton_version(),  # the version lookups key by (triton.__version__ drops +git<sha>)
            shared_bytes=int(compiled.metadata.shared),
            static_shared_bytes=static_shared,
            regs=regs,
            stack_bytes=stack,
            local_bytes=local,
        )
    )


_RESULT = "@@wavemla-resources "  # marks result lines: anything else a compiler prints is not ours


def _worker_main() -> None:
    """Worker process: one JSON job per stdin line, one marked JSON result line per job on stdout."""
    import warnings

    import triton

    warnings.filterwarnings("ignore")
    triton.knobs.runtime.interpret = False  # (started without TRITON_INTERPRET; kernels must be JITFunctions)
    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.perf_counter()
        try:
            row: dict[str, Any] = {"ok": _compile_here(job)}
        except Exception as exc:  # reported to the parent with the job that failed
            row = {"error": f"{type(exc).__name__}: {exc}"}
        row["job"] = job
        row["seconds"] = time.perf_counter() - t0
        print(_RESULT + json.dumps(row), flush=True)


_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); from wavemla.resources import _worker_main; "
    "_worker_main()"
)


def _run_workers(jobs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """Compile ``jobs`` on ``workers`` processes that each take the next job when done with one (largest first)."""
    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    for job in sorted(jobs, key=lambda j: (j["is_fp8"], j["block_h"] * j["block_n"]), reverse=True):
        todo.put(job)
    path = json.dumps([p for p in sys.path if p])
    # Triton builds its own library functions for the interpreter when TRITON_INTERPRET is set at import time, and
    # then cannot compile: workers start without it.
    env = config.environ_without("TRITON_INTERPRET")
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def feed(proc: subprocess.Popen[str]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                break
            try:
                proc.stdin.write(json.dumps(job) + "\n")
                proc.stdin.flush()
            except OSError:  # the worker is gone; its exit code and stderr say why
                break
            line = proc.stdout.readline()
            while line and not line.startswith(_RESULT):
                line = proc.stdout.readline()
            if not line:  # the worker died: leave its job to the caller's missing-result check
                break
            with lock:
                rows.append(json.loads(line[len(_RESULT) :]))
        with contextlib.suppress(OSError):
            proc.stdin.close()

    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i in range(max(1, min(workers, len(jobs)))):
            # stderr goes to a file: a chatty compiler must not fill a pipe nobody reads
            err = open(os.path.join(tmp, f"worker-{i}.err"), "w+", encoding="utf-8")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
            )  # fmt: skip
            procs.append((proc, err))
        threads = [threading.Thread(target=feed, args=(proc,)) for proc, _ in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for proc, err in procs:
            code = proc.wait()
            err.seek(0)
            tail = err.read()[-2000:].strip()
            err.close()
            if code != 0:
                failures.append(f"resource worker exited with {code}: {tail}")
    if failures and len(rows) < len(jobs):
        raise CompileError("; ".join(failures))
    return rows


def _store(directory: Path, found: Iterable[CompiledResources]) -> None:
    """Merge entries into the cache file (written to a temporary file, then renamed: readers never see half)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CACHE_FILE
    entries = dict(cached_entries(directory))
    entries.update({r.key: r for r in found})
    payload = {"schema": SCHEMA, "entries": [asdict(r) for r in sorted(entries.values(), key=_order)]}
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".resources-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _order(r: CompiledResources) -> tuple[Any, ...]:
    return (r.kernel, not r.is_fp8, r.q_dtype, -r.block_h, -r.block_n, -r.num_warps, r.num_stages, r.arch, r.triton)


def _check_request(configs: Sequence[KernelConfig], arches: Sequence[int]) -> None:
    from wavemla.device import _ARCH_LIMITS

    for a in arches:
        if not isinstance(a, int) or a not in _ARCH_LIMITS:
            raise ValueError(f"arches: {a!r} is not a known architecture; known: {sorted(_ARCH_LIMITS)}")
    for c in configs:
        if c.block_h not in (16, 32, 64) or c.block_n not in (16, 32, 64):
            raise ValueError(f"configs: {c} - the kernel supports BLOCK_H and BLOCK_N in 16, 32, 64")
        if c.num_warps not in (2, 4, 8, 16) or c.num_stages not in (1, 2, 3):
            raise ValueError(f"configs: {c} - the kernel supports num_warps 2/4/8/16 and num_stages 1..3")


Request = tuple["KernelConfig", bool, str]  # (configuration, is_fp8, q dtype)


def compile_resources(
    configs: Sequence[KernelConfig],
    arches: Sequence[int] = ARCHES,
    *,
    is_fp8: bool = True,
    q_dtype: str | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    kernel: str = KERNEL,
) -> list[CompiledResources]:
    """Compile every configuration for every architecture (cached ones are read back) and return their resources,
    in ``configs`` x ``arches`` order. Raises :class:`CompileError` naming the configuration and architecture
    that failed. ``q_dtype`` defaults to the production launch's (:func:`default_q_dtype`). ``jobs`` worker
    processes compile in parallel (default: one per CPU, at most one per compile). ``kernel`` is
    :data:`KERNEL` (sparse) or :data:`DENSE_KERNEL`.
    """
    return compile_requests([(c, is_fp8, q_dtype or default_q_dtype(is_fp8)) for c in configs], arches,
                            jobs=jobs, use_cache=use_cache, kernel=kernel)  # fmt: skip


def compile_requests(
    requests: Sequence[Request], arches: Sequence[int] = ARCHES, *, jobs: int | None = None, use_cache: bool = True,
    kernel: str = KERNEL,
) -> list[CompiledResources]:  # fmt: skip
    """:func:`compile_resources` for a mix of cache formats and query dtypes, all compiled in one pool of
    workers; results in ``requests`` x ``arches`` order."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    _check_request([c for c, _, _ in requests], arches)
    for _, fp8, q in requests:
        if q not in ("fp16", "bf16") or (q == "fp16" and not fp8):
            raise ValueError(f"q_dtype: expected 'fp16' or 'bf16' ('fp16' only with FP8 caches), got {q!r}")
    version = triton_version()
    directory = cache_dir()
    known = cached_entries(directory) if use_cache else {}
    wanted = [(c, fp8, q, a) for c, fp8, q in requests for a in arches]
    keys = [
        resource_key(kernel_id(kernel), c.block_h, c.block_n, c.num_warps, c.num_stages, fp8, a, version, q)
        for c, fp8, q, a in wanted
    ]
    named = {"kernel": kernel} if kernel != KERNEL else {}  # sparse jobs keep their original form
    todo = [
        {"block_h": c.block_h, "block_n": c.block_n, "num_warps": c.num_warps, "num_stages": c.num_stages,
         "is_fp8": fp8, "q_dtype": q, "arch": a, **named}
        for (c, fp8, q, a), k in zip(wanted, keys, strict=True) if k not in known
    ]  # fmt: skip
    todo = list({json.dumps(j, sort_keys=True): j for j in todo}.values())  # a repeated request compiles once
    found: dict[str, CompiledResources] = {}
    if todo:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
        failures = []
        for row in _run_workers(todo, workers):
            if "ok" in row:
                r = CompiledResources(**row["ok"])
                found[r.key] = r
            else:
                j = row["job"]
                name = f"{j['kernel']} " if "kernel" in j else ""
                failures.append(
                    f"{name}BLOCK_H={j['block_h']} BLOCK_N={j['block_n']} warps={j['num_warps']} "
                    f"stages={j['num_stages']} {'fp8' if j['is_fp8'] else 'bf16'} q {j['q_dtype']} "
                    f"on sm_{j['arch']}: {row['error']}"
                )
        if failures:
            raise CompileError("compile failed for " + "; ".join(failures))
        if use_cache:
            _store(directory, found.values())
    merged = {**known, **found}
    missing = [k for k in keys if k not in merged]
    if missing:  # a worker vanished without reporting (killed, crashed)
        raise CompileError(f"no result for {', '.join(missing)}")
    return [merged[k] for k in keys]


# ---------------------------------------------------------------- the committed table


def table_requests(kernel: str = KERNEL) -> list[tuple[KernelConfig, bool]]:
    """Every (configuration, is_fp8) the planner can pick for ``kernel``, over all head counts and cache formats."""
    from wavemla.plan import all_candidate_configs, all_dense_candidate_configs, all_prefill_configs

    if kernel == PREFILL_KERNEL:
        return [(c, False) for c in all_prefill_configs()]
    return all_dense_candidate_configs() if kernel == DENSE_KERNEL else all_candidate_configs()


_LAUNCHES = {
    KERNEL: "DSV4 decode: h=64, s_q=2, SWA 128 @ page 256 + compressed 512 @ page 64, lengths and sink; "
    "FP8: q fp16, fp16 workspace; bf16 rows: q bf16, fp32 workspace; pointers and 16-multiple q/out/cache strides "
    "marked tt.divisibility=16",
    DENSE_KERNEL: "DeepSeek-V3 dense decode: h=128, s_q=1, d_qk=576, page 64, not causal; FP8 V3.2: q fp16, fp16 "
    "workspace; bf16 rows: q bf16, bf16 workspace; pointers and 16-multiple strides marked tt.divisibility=16",
    PREFILL_KERNEL: "sparse prefill: h=128, d_qk=576 (bounds 512), topk 2048, bf16, lengths and sink; pointers and "
    "16-multiple strides marked tt.divisibility=16",
}


def build_table(arches: Sequence[int] = ARCHES, jobs: int | None = None, kernel: str = KERNEL) -> dict[str, Any]:
    """The committed table's content for ``kernel``: resources of every plannable configuration on ``arches``,
    compiled with the installed Triton (through the disk cache)."""
    requests = [(c, fp8, default_q_dtype(fp8)) for c, fp8 in table_requests(kernel)]
    rows = compile_requests(requests, arches, jobs=jobs, kernel=kernel)
    return {
        "schema": SCHEMA,
        "kernel": kernel_id(kernel),
        "triton": triton_version(),
        "generated_by": "python -m wavemla.resources --write",
        "launch": _LAUNCHES[kernel],
        "entries": [asdict(r) for r in sorted(rows, key=_order)],
    }


def write_table(
    path: Path | None = None, arches: Sequence[int] = ARCHES, jobs: int | None = None, kernel: str = KERNEL
) -> Path:
    """Regenerate the committed table of ``kernel`` (``python -m wavemla.resources --write`` does every kernel)."""
    payload = build_table(arches, jobs, kernel)
    path = path or DATA_PATHS[kernel]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    committed_table.cache_clear()
    packaged_tables.cache_clear()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m wavemla.resources",
        description="Compile every configuration the planner can pick for sm_80..sm_120 and print (or --write) "
        "their shared memory, registers and stack bytes.",
    )
    parser.add_argument(
        "--write",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help=f"write the table(s) (default: the packaged {DATA_PATH.name}, {DENSE_DATA_PATH.name} and "
        f"{PREFILL_DATA_PATH.name}; a PATH needs one --kernel)",
    )
    parser.add_argument("--kernel", nargs="+", choices=KERNELS, default=list(KERNELS), help="kernels (default: all)")
    parser.add_argument("--arch", type=int, nargs="+", default=list(ARCHES), help="architectures (default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs: expected >= 1, got {args.jobs}")
    if args.write and len(args.kernel) > 1:
        parser.error("--write PATH: name one --kernel")
    t0 = time.perf_counter()
    for kernel in args.kernel:
        if args.write is not None:
            path = write_table(Path(args.write) if args.write else None, args.arch, args.jobs, kernel)
            payload = json.loads(path.read_text(encoding="utf-8"))
            print(f"wrote {len(payload['entries'])} entries to {path} in {time.perf_counter() - t0:.0f} s")
            continue
        payload = build_table(args.arch, args.jobs, kernel)
        print(f"{kernel}\n{'config':<14} {'fmt':<5} {'arch':<7} {'smem':>7} {'regs':>5} {'stack':>6}")
        for e in payload["entries"]:
            cfg = f"{e['block_h']}x{e['block_n']}x{e['num_warps']}x{e['num_stages']}"
            smem = CompiledResources(**e).smem_bytes
            print(
                f"{cfg:<14} {'fp8' if e['is_fp8'] else 'bf16':<5} sm_{e['arch']:<4} {smem:>7} {e['regs']:>5} "
                f"{e['stack_bytes']:>6}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
