"""Whole lightning-indexer calls on the package's kernels against those of another ``indexer.py``, in one run.

    git show REV:src/wavemla/kernels/indexer.py > /tmp/indexer_old.py
    PYTHONPATH=src python3 benchmarks/experiments/idx_ab.py OUT.json /tmp/indexer_old.py 32:32768 1:32768 \
        [--paths spread token] [--rounds 2]

The other source is imported as a module of its own (its kernels compile apart from the package's). For each shape
(FP8 rows in the page-split layout, FP8 queries, top-512, s_q 1, 64 heads) and select path, both modules' calls are
captured in CUDA graphs and timed behind the 256 MB L2 flush (median of 15), in ``--rounds`` alternated rounds
(package first, then the other, and so on); their indices and lengths must be identical. The device-to-device copy
bandwidth measured first gives % of copy for the index-K bytes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import copy_samples_us, timing_samples_us
from wavemla.tools.bench_indexer import COPY_BYTES, IndexerBenchCase, _fill_case, index_k_bytes


def import_file(path: Path, name: str) -> Any:
    """The Python source at ``path`` imported as a module of its own, ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def caller(mod: Any, case: IndexerBenchCase, data: dict[str, torch.Tensor], path: str) -> tuple[Any, tuple]:
    ws = torch.empty(mod.indexer_workspace_numel(case.b, 1, 64, case.n_comp), dtype=torch.int32, device="cuda")
    out = (torch.empty(case.b, 1, 512, dtype=torch.int32, device="cuda"),
           torch.empty(case.b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip

    def call() -> None:
        mod.lightning_indexer(
            data["q"], data["w"], data["cache"], data["table"], data["n_comp"], case.topk,
            max_n_comp=case.n_comp, out=out, workspace=ws, index_k_layout="paged", select=path,
        )  # fmt: skip

    return call, out


def copy_rate() -> float:
    """The device-to-device copy rate (GB/s, bytes read + written) measured now; printed."""
    copy_us = statistics.median(copy_samples_us(COPY_BYTES, 20))
    copy_gbps = 2 * COPY_BYTES / copy_us / 1e3
    print(f"copy {copy_gbps:.0f} GB/s", flush=True)
    return copy_gbps


def fp8_cases(shapes: list[str]) -> Iterator[tuple[int, int, IndexerBenchCase, dict[str, torch.Tensor], int]]:
    """(b, n_comp, case, its inputs, index-K bytes) per ``B:N`` shape: FP8 page-split rows and FP8 q, one seeded
    generator for all."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    for spec in shapes:
        b, n = (int(x) for x in spec.split(":"))
        case = IndexerBenchCase(b=b, n_comp=n, kv_format="fp8-paged", q_format="fp8")
        yield b, n, case, _fill_case(case, gen), index_k_bytes(case)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("other", type=Path, help="the indexer.py to compare with the package's")
    parser.add_argument("shapes", nargs="+", metavar="B:N")
    parser.add_argument("--paths", nargs="+", choices=ix.SELECT_PATHS, default=None, help="default: the planner's")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_ab.py: needs a CUDA device", file=sys.stderr)
        return 2
    other = import_file(args.other, "indexer_other")
    copy_gbps = copy_rate()
    rows: list[dict[str, Any]] = []
    for b, n, case, data, nbytes in fp8_cases(args.shapes):
        for path in args.paths or [ix.choose_config(b, 1, 64, n).select]:
            if path == "spread" and b > ix.SPREAD_MAX_TOKENS:
                continue
            calls = {"package": caller(ix, case, data, path), "other": caller(other, case, data, path)}
            for fn, _ in calls.values():
                fn()
            torch.cuda.synchronize()
            same = all(torch.equal(a, c) for a, c in zip(calls["package"][1], calls["other"][1], strict=True))
            times: dict[str, list[float]] = {k: [] for k in calls}
            for _ in range(args.rounds):
                for k, (fn, _) in calls.items():
                    times[k].append(statistics.median(timing_samples_us(fn, 15, graph=True)))
            med = {k: statistics.median(v) for k, v in times.items()}
            pct = {k: 100 * nbytes / (v * 1e-6) / (copy_gbps * 1e9) for k, v in med.items()}
            print(f"b={b:<3d} n={n:<6d} {path:7s} package {med['package']:7.1f} us ({pct['package']:4.1f}% of copy) "
                  f"other {med['other']:7.1f} us ({pct['other']:4.1f}%) ratio {med['package'] / med['other']:.3f} "
                  f"rounds {times}" + ("" if same else "  OUTPUTS DIFFER"), flush=True)  # fmt: skip
            rows.append({"b": b, "n_comp": n, "select": path, "same_output": same, "copy_gbps": copy_gbps,
                         "package_us": med["package"], "other_us": med["other"], "rounds": times,
                         "pct_copy_package": pct["package"], "pct_copy_other": pct["other"]})  # fmt: skip
            args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
