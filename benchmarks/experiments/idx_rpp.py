"""Rows per score program: whole lightning-indexer calls and the score kernel alone, for several work sizes.

    PYTHONPATH=src python3 benchmarks/experiments/idx_rpp.py OUT.json 32:32768 64:32768 \
        [--variants auto w1 w2 w3 p2048 p4096] [--slots 396]

Variants of the rows one score program walks: ``auto`` the package's (on a GPU, one wave of the programs the
compiled kernel keeps resident: ``wave_rows``); ``static`` ``IndexerConfig.rows_per_program``, the choice without
the GPU's occupancy (about 1024 programs); ``wK`` the rows that make at most K waves of ``--slots`` resident programs
(``floor(K·slots / b)`` programs a token, each a whole number of 128-row tiles); ``pN`` about N programs in all;
``rN`` N rows. FP8 rows in the page-split layout, FP8 queries, top-512, s_q 1, 64 heads. Each variant's call is
captured in a CUDA graph and timed behind the 256 MB L2 flush (median of 15, in ``--rounds`` alternated rounds); the
score kernel alone is timed the same way with the select launches skipped. Every variant's indices and lengths must
equal the first's. The calls go through Triton's launch path (``WAVEMLA_LAUNCH=triton``): a launch replay would
repeat the first variant's launches for every other one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

os.environ["WAVEMLA_LAUNCH"] = "triton"  # before wavemla reads its knobs
from idx_ab import copy_rate, fp8_cases  # the experiment beside this one (its folder is on sys.path when run)

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase

_choose = ix.choose_config
_wave_rows = ix.wave_rows
_token_select = ix._launch_token_select
_spread_select = ix._launch_spread_select


def rows_for(variant: str, b: int, n: int, slots: int, block_n: int) -> int | None:
    """Rows per score program of ``variant`` at ``b`` tokens of ``n`` rows (None: the package's choice)."""
    if variant in ("auto", "static"):
        return None
    kind, value = variant[0], int(variant[1:])
    if kind == "w":
        chunks = max(1, value * slots // b)
    elif kind == "p":
        chunks = max(1, round(value / b))
    elif kind == "r":
        return value
    else:
        raise ValueError(f"variant: expected auto, wK, pN or rN, got {variant!r}")
    per = -(-n // chunks)
    return -(-per // block_n) * block_n


def call_for(
    case: IndexerBenchCase, data: dict[str, torch.Tensor], variant: str, rows: int | None, score_only: bool
) -> Any:
    ws = torch.empty(ix.indexer_workspace_numel(case.b, 1, 64, case.n_comp), dtype=torch.int32, device="cuda")
    out = (torch.empty(case.b, 1, 512, dtype=torch.int32, device="cuda"),
           torch.empty(case.b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip

    def choose(*args: Any, **kwargs: Any) -> ix.IndexerConfig:
        cfg = _choose(*args, **kwargs)
        return cfg if rows is None else dataclasses.replace(cfg, rows_per_program=rows)

    def call() -> None:
        ix.choose_config = choose  # type: ignore[assignment]
        if variant != "auto":
            ix.wave_rows = lambda *a: None  # type: ignore[assignment]
        if score_only:
            ix._launch_token_select = lambda *a, **k: None  # type: ignore[assignment]
            ix._launch_spread_select = lambda *a, **k: None  # type: ignore[assignment]
        try:
            ix.lightning_indexer(
                data["q"], data["w"], data["cache"], data["table"], data["n_comp"], case.topk,
                max_n_comp=case.n_comp, out=out, workspace=ws, index_k_layout="paged",
            )  # fmt: skip
        finally:
            ix.choose_config = _choose  # type: ignore[assignment]
            ix.wave_rows = _wave_rows  # type: ignore[assignment]
            ix._launch_token_select = _token_select  # type: ignore[assignment]
            ix._launch_spread_select = _spread_select  # type: ignore[assignment]

    return call, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("shapes", nargs="+", metavar="B:N")
    parser.add_argument("--variants", nargs="+", default=["auto", "static", "w1", "w2", "p4096"])
    parser.add_argument("--slots", type=int, default=396, help="resident score programs on the GPU (3 per SM, H200)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_rpp.py: needs a CUDA device", file=sys.stderr)
        return 2
    copy_gbps = copy_rate()
    rows_out: list[dict[str, Any]] = []
    for b, n, case, data, nbytes in fp8_cases(args.shapes):
        base = _choose(b, 1, 64, n)
        variants = {}
        for v in args.variants:
            rows = rows_for(v, b, n, args.slots, base.block_n)
            if rows is not None and any(r == rows for r in variants.values()):
                continue
            variants[v] = rows
        calls = {(v, so): call_for(case, data, v, rows, so) for v, rows in variants.items() for so in (False, True)}
        for (_, score_only), (fn, out) in calls.items():
            out[0].fill_(-7)
            fn()
            torch.cuda.synchronize()
            if bool((out[0] == -7).all()) != score_only:
                raise RuntimeError("the score-only call ran the select, or a whole call did not (a launch replay?)")
        ref = next(iter(calls.values()))[1]
        times: dict[tuple[str, bool], list[float]] = {k: [] for k in calls}
        for _ in range(args.rounds):
            for k, (fn, _) in calls.items():
                times[k].append(statistics.median(timing_samples_us(fn, 15, graph=True)))
        slots = max(ix._RESIDENT.values(), default=0)
        wave = ix.wave_rows(b, n, base.block_n, slots) if slots else None
        for v, rows in variants.items():
            r = rows if rows is not None else (wave or base.rows_per_program) if v == "auto" else base.rows_per_program
            programs = b * -(-n // r)
            full = statistics.median(times[(v, False)])
            score = statistics.median(times[(v, True)])
            same = all(torch.equal(a, c) for a, c in zip(ref, calls[(v, False)][1], strict=True))
            pct = 100 * nbytes / (full * 1e-6) / (copy_gbps * 1e9)
            pct_score = 100 * nbytes / (score * 1e-6) / (copy_gbps * 1e9)
            print(f"b={b:<3d} n={n:<6d} {v:6s} rows {r:5d} programs {programs:5d} ({programs / args.slots:4.2f} waves) "
                  f"call {full:7.1f} us ({pct:4.1f}% of copy) score {score:7.1f} us ({pct_score:4.1f}%)"
                  + ("" if same else "  OUTPUTS DIFFER"), flush=True)  # fmt: skip
            rows_out.append({"b": b, "n_comp": n, "variant": v, "rows_per_program": r, "programs": programs,
                             "call_us": full, "score_us": score, "pct_copy": pct, "pct_copy_score": pct_score,
                             "same_output": same, "copy_gbps": copy_gbps, "select": base.select,
                             "rounds": {"call": times[(v, False)], "score": times[(v, True)]}})  # fmt: skip
            args.out.write_text(json.dumps(rows_out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
