"""The top-k selects of the lightning indexer side by side: per-token (one program per query token), chunked, and
spread (a token's walks split among several programs, then one program per token).

    PYTHONPATH=src python3 benchmarks/experiments/idx_select.py OUT.json            # on a GPU
    PYTHONPATH=src python3 benchmarks/experiments/idx_select.py OUT.json --dry      # CPU: the plan, no timing

Every shape is timed with CUDA-graph replay and L2 flushed (median of ``--reps``): the whole call on each select
path (``select="token"``, ``"chunked"``, ``"spread"`` where the shape has it; ``--paths`` picks some), and the
score kernel alone (so that each select's own time is the call minus the score kernel). Shapes: b ∈ {1, 32, 64,
128} × n_comp ∈ {2K, 32K, 256K}, b = 8 at 32K and 256K and b = 16 at 32K, with FP8 rows in the page-split layout
and FP8 queries (the production format), and b ∈ {32, 64} × 32K with bf16 rows (``--shapes`` picks some); s_q 1,
64 heads, top-512, page 64. Records follow ``wavemla.tools.bench_indexer`` (``make_record``: median/p20/p80,
index-K bytes, GB/s, % of the device-to-device copy bandwidth measured first in the same run), plus ``select``
(``token``, ``chunked``, ``spread`` or ``score``), ``score_us``, ``select_us`` and ``auto`` (the path
``choose_config`` picks).
The JSON is rewritten after every shape, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import (
    IndexerBenchCase,
    _environment,
    _fill_case,
    copy_record,
    fits,
    index_k_bytes,
    make_record,
    run_case,
    triton_memory_bytes,
)

PATHS = ix.SELECT_PATHS


# (b, n_comp, kv_format): the shapes of the bandwidth target first (n_comp >= 32K, b >= 32), so that a run cut short
# by its time limit loses the least telling ones
SHAPES = (
    (32, 32768, "fp8-paged"),
    (64, 32768, "fp8-paged"),
    (128, 32768, "fp8-paged"),
    (128, 262144, "fp8-paged"),
    (32, 262144, "fp8-paged"),
    (64, 262144, "fp8-paged"),
    (32, 32768, "bf16"),
    (64, 32768, "bf16"),
    (1, 32768, "fp8-paged"),
    (1, 262144, "fp8-paged"),
    (8, 32768, "fp8-paged"),
    (8, 262144, "fp8-paged"),
    (16, 32768, "fp8-paged"),
    (1, 2048, "fp8-paged"),
    (32, 2048, "fp8-paged"),
    (64, 2048, "fp8-paged"),
    (128, 2048, "fp8-paged"),
)


def select_cases() -> list[IndexerBenchCase]:
    """FP8 page-split rows with FP8 queries at every (b, n_comp) of the grid, bf16 rows at b 32 and 64 × 32K."""
    return [
        IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format="bf16" if kv == "bf16" else "fp8") for b, n, kv in SHAPES
    ]


def describe(case: IndexerBenchCase) -> str:
    return f"b={case.b:<3d} n={case.n_comp:<6d} rows {case.kv_format:9s} q {case.q_format:4s}"


def plan(cases: list[IndexerBenchCase]) -> None:
    """What a GPU run would measure (no CUDA needed): memory per shape and the path the heuristic picks."""
    for case in cases:
        cfg = ix.choose_config(
            case.b, case.s_q, case.heads, case.n_comp, kv_fp8=case.kv_format != "bf16", topk=case.topk
        )
        print(
            f"{describe(case)}  {triton_memory_bytes(case) / 2**30:5.2f} GiB  auto={cfg.select:7s} "
            f"sample={cfg.sample} block_list={cfg.block_list} chunk={cfg.chunk} parts={cfg.parts}"
        )


def call_setup(case: IndexerBenchCase, data: dict[str, torch.Tensor]) -> tuple[Any, ix.IndexerConfig, Any]:
    """(validated call, configuration, workspace layout) that ``lightning_indexer`` would use for this case."""
    layout_name = "paged" if case.kv_format == "fp8-paged" else "rows"
    call = ix._validate(
        data["q"], data["w"], data["cache"], data["table"], data["n_comp"], case.topk, case.n_comp, layout_name
    )
    cfg = ix.choose_config(call.b, call.s_q, call.heads, call.max_n, kv_fp8=call.fp8, topk=call.topk)
    return call, cfg, ix.workspace_layout(call.b, call.s_q, call.max_n, cfg)


def _score_only(case: IndexerBenchCase, data: dict[str, torch.Tensor], ws: torch.Tensor) -> Any:
    """The score kernel of the call, alone (what both selects start from)."""
    call, cfg, layout = call_setup(case, data)
    keys = ws[layout.keys : layout.hist]

    def run() -> None:
        ix._launch_scores(
            call, cfg, data["q"], data["w"], data["cache"], data["table"], data["n_comp"], keys, layout.n_pad, call.topk
        )

    return run


def measure_case(
    case: IndexerBenchCase,
    generator: torch.Generator,
    reps: int,
    env: dict[str, Any],
    copy_gbps: float,
    only: tuple[str, ...] = PATHS,
) -> list[dict[str, Any]]:
    """Score kernel alone, then the whole call on each select path; prints one line per path."""
    data = _fill_case(case, generator)
    nbytes = index_k_bytes(case)
    ws = torch.empty(
        ix.indexer_workspace_numel(case.b, case.s_q, case.heads, case.n_comp), dtype=torch.int32, device="cuda"
    )
    out = (
        torch.empty(case.b, case.s_q, case.topk, dtype=torch.int32, device="cuda"),
        torch.empty(case.b, case.s_q, dtype=torch.int32, device="cuda"),
    )
    auto = ix.choose_config(case.b, case.s_q, case.heads, case.n_comp, kv_fp8=case.kv_format != "bf16", topk=case.topk)
    score_samples = timing_samples_us(_score_only(case, data, ws), reps, graph=True)
    score_us = statistics.median(score_samples)
    score_row = make_record(case, "triton", score_samples, nbytes, env, copy_gbps)
    score_row.update(select="score", score_us=score_us, select_us=0.0, auto=auto.select)
    rows = [score_row]
    outputs = []
    paths = [p for p in only if p != "spread" or auto.parts]
    for path in paths:

        def call(path: str = path) -> object:
            return run_case(case, data, ws, out, select=path)

        call()
        outputs.append((out[0].clone(), out[1].clone()))
        row = make_record(case, "triton", timing_samples_us(call, reps, graph=True), nbytes, env, copy_gbps)
        row.update(select=path, score_us=score_us, select_us=row["median_us"] - score_us, auto=auto.select)
        rows.append(row)
        print(
            f"{describe(case)} {path:7s}{'*' if path == auto.select else ' '} {row['median_us']:8.1f} us "
            f"(p20 {row['p20_us']:.1f}, p80 {row['p80_us']:.1f})  select {row['select_us']:7.1f} us "
            f"(score {score_us:.1f})  {row['gbps']:6.0f} GB/s  {row['pct_of_copy_bw']:5.1f}% of copy",
            flush=True,
        )
    same = all(torch.equal(a, b) for other in outputs[1:] for a, b in zip(outputs[0], other, strict=True))
    print(f"{describe(case)} {', '.join(paths)} outputs {'identical' if same else 'DIFFER'}", flush=True)
    for row in rows[1:]:
        row["paths_identical"] = same
    return rows


def measure(
    cases: list[IndexerBenchCase], out_path: Path, reps: int, only: tuple[str, ...] = PATHS
) -> list[dict[str, Any]]:
    """The copy ceiling, then every case that fits the free memory; the JSON is rewritten after each case."""
    env = _environment()
    copy_row = copy_record(reps, env)
    copy_gbps = float(copy_row["gbps"])
    print(f"copy: {copy_gbps:.0f} GB/s (read + write); '*' marks the path choose_config picks", flush=True)
    records: list[dict[str, Any]] = [copy_row]
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    for case in cases:
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info()
        if not fits(case, "triton", free):
            print(f"skip {describe(case)}: needs {triton_memory_bytes(case) / 2**30:.1f} GiB", flush=True)
            continue
        records += measure_case(case, generator, reps, env, copy_gbps, only)
        out_path.write_text(json.dumps(records, indent=1))
    out_path.write_text(json.dumps(records, indent=1))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="JSON records")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--dry", action="store_true", help="print the shapes and the heuristic's picks; no GPU")
    parser.add_argument("--shapes", nargs="+", metavar="B:N:ROWS", help="only these shapes, e.g. 32:32768:fp8-paged")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS), help="only these select paths")
    args = parser.parse_args(argv)
    cases = select_cases()
    if args.shapes:
        wanted = {tuple(x.split(":")) for x in args.shapes}
        cases = [c for c in cases if (str(c.b), str(c.n_comp), c.kv_format) in wanted]
    plan(cases)
    if args.dry:
        return 0
    if not torch.cuda.is_available():
        print("idx_select.py: needs a CUDA device (or --dry)", file=sys.stderr)
        return 2
    measure(cases, args.out, args.reps, tuple(args.paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
