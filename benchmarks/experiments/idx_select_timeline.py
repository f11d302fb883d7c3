"""Kernel timeline of one lightning-indexer call per select path, and what the spread select's rank programs work
on, token by token.

    PYTHONPATH=src python3 benchmarks/experiments/idx_select_timeline.py 32:32768 1:32768 --paths spread token
    PYTHONPATH=src python3 benchmarks/experiments/idx_select_timeline.py 32:32768 --block-list 1024 2048

Timeline: each kernel's start and end (µs from the call's first kernel) from torch.profiler over CUDA-graph
replays of the call, each behind a 256 MB L2 flush (median of 5), then the graph-replayed call timed as the
benchmarks do (L2 flushed, median of 15). FP8 rows in the page-split layout with FP8 queries, top-512, s_q 1,
64 heads.

Tokens (spread path): from the parts' counts the call left in the workspace, the bracket ``[lo, hi)`` each rank
program derives, whether it gathers the parts' lists (or walks the keys itself), the length of its list and the
number of bytes where ``lo`` and the list's largest key below ``hi`` differ, as ``_indexer_spread_rank_kernel``
computes them (the radix passes of the kernel before 2a3b7d1, one a byte; the passes since start at the highest
open bit and stop once the k-th key's bucket is taken, so they can be fewer).

``--block-list``: run everything once per value of the list keys that stay in registers through the radix passes
and the output (``IndexerConfig.block_list``; the default: the planner's).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import statistics
import sys
from collections import defaultdict

import torch

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, run_case

FLUSH = 256 << 20
KEY_CEIL = 2**31 - 1
_FIRST: dict[tuple[int, int, str], torch.Tensor] = {}  # each shape and path's indices under the first setting


def timeline(call, flush: torch.Tensor, calls: int = 5) -> list[tuple[str, float, float]]:
    """(kernel, start, end) in µs from the first kernel of the call, medians over ``calls`` flushed replays."""
    per: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.add_(1)
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = [e for e in kernels if "elementwise" not in e.name and "vectorized" not in e.name]
    kernels.sort(key=lambda e: e.time_range.start)
    n = len(kernels) // calls
    for i in range(calls):
        group = kernels[i * n : (i + 1) * n]
        t0 = group[0].time_range.start
        for j, e in enumerate(group):
            per[(j, e.name)].append((e.time_range.start - t0, e.time_range.end - t0))
    return [
        (name.removeprefix("_indexer_")[:28], statistics.median(s for s, _ in v), statistics.median(e for _, e in v))
        for (_, name), v in sorted(per.items())
    ]


def rank_work(b: int, n: int, ws: torch.Tensor, topk: int = 512) -> list[tuple[bool, int, int]]:
    """Per token of a spread call left in ``ws``: whether its rank program gathers the parts' lists (or walks the keys
    itself), its list's length and the bytes its bracket spans (0 where it walks), from the parts' counts as the kernel
    derives them."""
    cfg = ix.choose_config(b, 1, 64, n, kv_fp8=True, topk=topk, select="spread")
    layout = ix.workspace_layout(b, 1, n, cfg)
    region = ix.PART_META + 2 * cfg.part_cap
    parts = ws[layout.parts : layout.parts + b * cfg.parts * region].view(b, cfg.parts, region).cpu()
    keys = ws[layout.keys : layout.keys + b * layout.n_pad].view(b, layout.n_pad)[:, :n].cpu()
    out = []
    for t in range(b):
        t0, t1, t2, t3 = (int(x) for x in parts[t, 0, :4])
        n_part = parts[t, :, 4]
        c0, c1, c2, c3 = int(n_part.sum()), *(int(parts[t, :, k].sum()) for k in (5, 6, 7))
        lo, cnt_lo = next(((tk, ck) for tk, ck in ((t3, c3), (t2, c2), (t1, c1)) if ck >= topk), (t0, c0))
        hi = next((tk for tk, ck in ((t1, c1), (t2, c2), (t3, c3)) if ck < topk), KEY_CEIL)
        gathered = c0 >= topk and int(n_part.max()) <= cfg.part_cap and cnt_lo <= cfg.list_cap
        if not gathered:  # the program walks the keys itself: its own bracket, not this one
            out.append((False, cnt_lo, 0))
            continue
        row = keys[t]
        key_max = int(row[row < hi].max())
        diff = ((lo ^ -(2**31)) & 0xFFFFFFFF) ^ ((min(hi - 1, key_max) ^ -(2**31)) & 0xFFFFFFFF)
        out.append((gathered, cnt_lo, 1 + sum(diff >> s != 0 for s in (8, 16, 24))))
    return out


def token_work(b: int, n: int, ws: torch.Tensor, topk: int = 512) -> str:
    """What each spread rank program works on (see the module docstring), summed over the tokens."""
    work = rank_work(b, n, ws, topk)
    lists = [m for _, m, _ in work]
    passes = collections.Counter(nb for _, _, nb in work)
    return (
        f"tokens {b}: gathered {sum(g for g, _, _ in work)}, list keys median {statistics.median(lists):.0f} "
        f"max {max(lists)}, bracket bytes {dict(sorted(passes.items()))}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="+", metavar="B:N")
    parser.add_argument("--paths", nargs="+", choices=ix.SELECT_PATHS, default=["spread", "token"])
    parser.add_argument("--block-list", nargs="+", type=int, default=[0], help="0: the planner's")
    args = parser.parse_args(argv)
    choose = ix.choose_config
    for block_list in args.block_list:
        if block_list:
            ix.choose_config = functools.partial(_with_block_list, choose, block_list)
        ix._REPLAYS.clear()  # a recorded launch keeps its configuration
        label = f"block_list={block_list or 'planner'}"
        run_shapes(args.shapes, args.paths, label)
        ix.choose_config = choose
    return 0


def _with_block_list(choose, block_list: int, *args, **kwargs) -> ix.IndexerConfig:
    return dataclasses.replace(choose(*args, **kwargs), block_list=block_list)


def run_shapes(shapes: list[str], paths: list[str], label: str) -> None:
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    flush = torch.empty(FLUSH // 4, dtype=torch.int32, device="cuda")
    for spec in shapes:
        b, n = (int(x) for x in spec.split(":"))
        case = IndexerBenchCase(b=b, n_comp=n, kv_format="fp8-paged", q_format="fp8")
        data = _fill_case(case, gen)
        ws = torch.empty(ix.indexer_workspace_numel(b, 1, 64, n), dtype=torch.int32, device="cuda")
        out = (torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
               torch.empty(b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip
        for path in paths:
            call = functools.partial(run_case, case, data, ws, out, select=path)
            call()
            rows = timeline(call, flush)
            graph = statistics.median(timing_samples_us(call, 15, graph=True))
            parts = ", ".join(f"{k} {s:.1f}-{e:.1f} ({e - s:.1f})" for k, s, e in rows)
            first = _FIRST.setdefault((b, n, path), out[0].clone())
            same = "" if first is out[0] or torch.equal(first, out[0]) else " INDICES DIFFER from the first setting"
            print(f"{label} b={b} n={n} {path:7s} graph {graph:6.1f} us | {parts}{same}", flush=True)
            if path == "spread":
                call()
                torch.cuda.synchronize()
                print(f"{label} b={b} n={n} spread  {token_work(b, n, ws)}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
