"""Where a decode call's host time goes, on a GPU: with every launch through Triton's path
(``WAVEMLA_LAUNCH=triton``), the whole call, the package's Python alone (kernel launches replaced by no-ops), and
for each kernel it launches Triton's launch path (``JITFunction.run``: argument binding, specialization, cache
lookup) against the compiled kernel's launcher called directly (the floor any launch path pays); then the whole
call with its launches replayed (``WAVEMLA_LAUNCH=replay``, the default: wavemla.kernels.launch).

    PYTHONPATH=src python3 benchmarks/experiments/host_breakdown.py [--calls 300] [--json OUT.json]
    PYTHONPATH=src python3 benchmarks/experiments/host_breakdown.py --profile   # cProfile of the package's Python

Cases: DSV4 sparse decode (FP8 MODEL1, 128 window + 512 compressed rows, sink) through ``flash_mla_with_kvcache``
with its metadata at b = 1 and 64 (h = 64) and b = 128 (h = 128); the dense decode (FP8 V3.2, 4K) at b = 64, h = 128;
the lightning indexer (FP8 rows and q, 32K rows, top-512) at b = 32.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import pstats
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from triton.runtime import driver
from triton.runtime.jit import JITFunction

from wavemla import api, config
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs

sys.path.insert(0, str(Path(__file__).parent))
from api_host_cost import host_us


@contextlib.contextmanager
def recorded_launches(into: list[tuple[JITFunction, tuple[Any, ...], dict[str, Any]]]) -> Iterator[None]:
    """Record every ``JITFunction.run`` call (the function, its arguments) while launching as usual."""
    orig = JITFunction.run

    def run(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
        into.append((self, args, dict(kwargs)))
        return orig(self, *args, **kwargs)

    JITFunction.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.run = orig  # type: ignore[method-assign]


@contextlib.contextmanager
def no_launches() -> Iterator[None]:
    """Every Triton launch a no-op (the package's Python and allocations still run)."""
    orig = JITFunction.run
    JITFunction.run = lambda self, *a, **k: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.run = orig  # type: ignore[method-assign]


def launch_costs(call: Callable[[], Any], calls: int) -> list[dict[str, Any]]:
    """For each kernel ``call`` launches: µs of Triton's launch path and of the compiled launcher alone."""
    rec: list[tuple[JITFunction, tuple[Any, ...], dict[str, Any]]] = []
    with recorded_launches(rec):
        call()
    torch.cuda.synchronize()
    rows = []
    for fn, args, kwargs in rec:

        def jit(fn: JITFunction = fn, args: tuple[Any, ...] = args, kwargs: dict[str, Any] = kwargs) -> Any:
            return fn.run(*args, **kwargs)

        kernel = jit()
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream(device)
        binder = fn.device_caches[device][4]
        kw = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        bound, _, _ = binder(*args, **kw)
        grid = kwargs["grid"]
        grid = grid(bound) if callable(grid) else grid
        g = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
        values = tuple(bound.values())

        def direct(
            kernel: Any = kernel, g: tuple[int, int, int] = g, values: tuple[Any, ...] = values, stream: Any = stream
        ) -> None:
            kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata, None, None, None, *values)

        rows.append({
            "kernel": fn.__name__ if hasattr(fn, "__name__") else str(fn),
            "args": len(values),
            "jit_us": host_us(jit, calls),
            "direct_us": host_us(direct, calls),
        })  # fmt: skip
    return rows


def sparse_case(b: int, h: int) -> Callable[[], Any]:
    kw: dict[str, Any] = make_sparse_decode_inputs(batch=b, h_q=h, topk=128, extra_topk=512, fp8=True, device="cuda")
    meta, _ = api.get_mla_metadata()

    def call() -> Any:
        return api.flash_mla_with_kvcache(
            kw["q"], kw["kv_cache"], None, None, 512, meta, softmax_scale=512**-0.5, is_fp8_kvcache=True,
            indices=kw["indices"], attn_sink=kw["attn_sink"], extra_k_cache=kw["extra_kv_cache"],
            extra_indices_in_kvcache=kw["extra_indices"],
        )  # fmt: skip

    return call


def dense_case(b: int, h: int) -> Callable[[], Any]:
    d: dict[str, Any] = make_dense_decode_inputs(lengths=[4096] * b, h_q=h, fp8=True, device="cuda")
    meta, _ = api.get_mla_metadata()

    def call() -> Any:
        return api.flash_mla_with_kvcache(d["q"], d["k_cache"], d["block_table"], d["cache_seqlens"], 512, meta,
                                          softmax_scale=576**-0.5, is_fp8_kvcache=True)  # fmt: skip

    return call


def indexer_case(b: int, n_comp: int) -> Callable[[], Any]:
    from wavemla.kernels.indexer import indexer_workspace_numel, lightning_indexer
    from wavemla.reference.indexer import quantize_index_k

    page = 64
    blocks = n_comp // page
    q = torch.randn(b, 1, 64, 128, device="cuda").to(torch.float8_e4m3fn)
    w = torch.rand(b, 1, 64, device="cuda")
    rows = torch.randn(b * blocks, page, 128, device="cuda")
    cache = quantize_index_k(rows, layout="paged")
    table = torch.arange(b * blocks, dtype=torch.int32, device="cuda").view(b, blocks)
    n = torch.full((b,), n_comp, dtype=torch.int32, device="cuda")
    ws = torch.empty(indexer_workspace_numel(b, 1, 64, n_comp), dtype=torch.int32, device="cuda")

    def call() -> Any:
        return lightning_indexer(q, w, cache, table, n, 512, max_n_comp=n_comp, workspace=ws, index_k_layout="paged")

    return call


CASES: dict[str, Callable[[], Callable[[], Any]]] = {
    "sparse FP8 CSA b=1 h=64": lambda: sparse_case(1, 64),
    "sparse FP8 CSA b=64 h=64": lambda: sparse_case(64, 64),
    "sparse FP8 CSA b=128 h=128": lambda: sparse_case(128, 128),
    "dense FP8 4K b=64 h=128": lambda: dense_case(64, 128),
    "indexer FP8 32K b=32": lambda: indexer_case(32, 32768),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--case", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--json", default=None)
    parser.add_argument("--profile", action="store_true", help="cProfile each case's package Python (no launches)")
    args = parser.parse_args()
    if args.profile:
        for name in args.case:
            call = CASES[name]()
            with no_launches():
                host_us(call, 10)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(args.calls):
                    call()
                prof.disable()
            print(f"== {name}: package Python, {args.calls} calls")
            pstats.Stats(prof).strip_dirs().sort_stats("tottime").print_stats(30)
        return 0
    records = []
    for name in args.case:
        with config.override(WAVEMLA_LAUNCH="triton"):
            call = CASES[name]()
            whole = host_us(call, args.calls)
            with no_launches():
                python = host_us(call, args.calls)
            launches = launch_costs(call, args.calls)
        call = CASES[name]()  # fresh metadata: the first call records its launches, later ones replay them
        replayed = host_us(call, args.calls)
        records.append({"case": name, "whole_us": whole, "python_us": python, "launches": launches,
                        "replayed_us": replayed})  # fmt: skip
        parts = ", ".join(
            f"{r['kernel']} ({r['args']} args) {r['jit_us']:.1f} / {r['direct_us']:.1f}" for r in launches
        )
        print(f"{name:<28} Triton's launches: whole {whole:7.1f} µs, package Python {python:6.1f}; launches jit / "
              f"direct: {parts}; replayed: whole {replayed:7.1f} µs ({whole / replayed:.2f}x)", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
