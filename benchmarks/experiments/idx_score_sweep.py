"""The indexer's score kernel and per-token select, each timed alone, across rows per score program and pipeline depth.

    PYTHONPATH=src python3 benchmarks/experiments/idx_score_sweep.py OUT.json [--rows]       # on a GPU

Shapes: the bandwidth target's corner (n_comp 32K, b 32/64/128, FP8 page-split rows with FP8 queries; bf16 rows at
b 32 and 64; b 1 at 32K and 2K) and one long-row shape (b 32, 256K). For each, the score kernel alone (with
``--rows``: at ``rows_per_program`` 512..16384 and, for FP8 rows, ``num_stages`` 3..6) and the per-token select alone
over the keys the default score kernel wrote. CUDA-graph replay, L2 flushed, median of ``--reps``. Records: shape,
kernel, the varied setting, median µs, GB/s of index-K read and % of the copy bandwidth measured first in the same
run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from idx_select import call_setup  # this directory: the script's own path entry

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import (
    IndexerBenchCase,
    _environment,
    _fill_case,
    copy_record,
    index_k_bytes,
)

SHAPES = ((32, 32768, "fp8-paged"), (64, 32768, "fp8-paged"), (128, 32768, "fp8-paged"), (32, 32768, "bf16"),
          (64, 32768, "bf16"), (1, 32768, "fp8-paged"), (1, 2048, "fp8-paged"), (32, 262144, "fp8-paged"))  # fmt: skip
ROWS = (512, 1024, 2048, 4096, 8192, 16384)
STAGES_FP8 = (3, 4, 5, 6)


def _measure_shape(
    b: int,
    n: int,
    kv: str,
    generator: torch.Generator,
    reps: int,
    sweep_rows: bool,
    copy_gbps: float,
    records: list[dict[str, Any]],
    out_path: Path,
) -> None:
    """Score kernel and per-token select of one shape; records appended, the JSON rewritten."""
    case = IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format="bf16" if kv == "bf16" else "fp8")
    data = _fill_case(case, generator)
    nbytes = index_k_bytes(case)
    call, cfg0, layout = call_setup(case, data)
    ws = torch.empty(layout.numel, dtype=torch.int32, device="cuda")
    keys = ws[layout.keys : layout.hist]
    hist = ws[layout.hist : layout.counts]
    stages = STAGES_FP8 if call.fp8 else (cfg0.num_stages,)
    name = f"b={b:<3d} n={n:<6d} {kv:9s}"
    for rows in ROWS if sweep_rows else (cfg0.rows_per_program,):
        for ns in stages if sweep_rows else (cfg0.num_stages,):
            cfg = dataclasses.replace(cfg0, rows_per_program=max(rows, cfg0.block_n), num_stages=ns)

            def run(cfg: ix.IndexerConfig = cfg) -> None:
                ix._launch_scores(call, cfg, data["q"], data["w"], data["cache"], data["table"], data["n_comp"],
                                  keys, layout.n_pad, call.topk)  # fmt: skip

            samples = timing_samples_us(run, reps, graph=True)
            med = statistics.median(samples)
            gbps = nbytes / med / 1e3
            programs = -(-n // cfg.rows_per_program) * b
            mark = "*" if (rows, ns) == (cfg0.rows_per_program, cfg0.num_stages) else " "
            print(f"{name} score rows={rows:<5d} stages={ns} programs={programs:<5d}{mark} {med:7.1f} us "
                  f"{gbps:6.0f} GB/s {100 * gbps / copy_gbps:5.1f}% of copy", flush=True)  # fmt: skip
            records.append({"b": b, "n_comp": n, "kv_format": kv, "kernel": "score", "rows_per_program": rows,
                            "num_stages": ns, "programs": programs, "default": mark == "*", "median_us": med,
                            "p20_us": samples[len(samples) // 5], "p80_us": samples[(4 * len(samples)) // 5],
                            "gbps": gbps, "pct_of_copy_bw": 100 * gbps / copy_gbps})  # fmt: skip
    # the per-token select alone, over the keys of the default score kernel
    ix._launch_scores(
        call, cfg0, data["q"], data["w"], data["cache"], data["table"], data["n_comp"], keys, layout.n_pad, call.topk
    )
    idx = torch.empty(b, 1, case.topk, dtype=torch.int32, device="cuda")
    lens = torch.empty(b, 1, dtype=torch.int32, device="cuda")
    tok = dataclasses.replace(cfg0, select="token")

    def sel() -> None:
        ix._launch_token_select(call, tok, data["table"], data["n_comp"], keys, hist, layout.n_pad, idx, lens)

    samples = timing_samples_us(sel, reps, graph=True)
    med = statistics.median(samples)
    print(f"{name} select alone {med:7.1f} us (p20 {samples[len(samples) // 5]:.1f})", flush=True)
    records.append({"b": b, "n_comp": n, "kv_format": kv, "kernel": "select", "median_us": med})
    out_path.write_text(json.dumps(records, indent=1))


def measure(out_path: Path, reps: int, sweep_rows: bool) -> list[dict[str, Any]]:
    copy_row = copy_record(reps, _environment())
    copy_gbps = float(copy_row["gbps"])
    print(f"copy: {copy_gbps:.0f} GB/s (read + write)", flush=True)
    records: list[dict[str, Any]] = [copy_row]
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    for b, n, kv in SHAPES:
        torch.cuda.empty_cache()
        _measure_shape(b, n, kv, generator, reps, sweep_rows, copy_gbps, records, out_path)
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--rows", action="store_true", help="sweep rows per score program and pipeline depth")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_score_sweep.py: needs a CUDA device", file=sys.stderr)
        return 2
    measure(args.out, args.reps, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
