"""How the L2 flush between timed replays colours short kernels: the same calls timed after three flushes.

- ``dirty``: 256 MB written (``zero_``), the benchmarks' flush so far: L2 is left full of dirty lines, which the timed
  kernel's own misses must write back to DRAM.
- ``clean``: the same write, then a read of another 256 MB buffer (a sum): L2 is left full of clean lines of a
  buffer the kernel never touches.
- ``none``: nothing between replays (inputs that fit L2 stay there).

Timed (CUDA-graph replay, median of ``--reps``): a read-only stream (``x.sum()`` over fp32) and a copy at several
sizes, the indexer (score kernel alone, and the whole call) at FP8 32K rows, and the sparse decode (CSA and HCA,
h=64, s_q=1) at a few batches. ``--only dense``: the streams, then the dense decode (bf16 rows, uniform lengths; h=64
at b = 8..128 with 4K keys, b = 32 at 1K..16K keys, h=128 b = 32 4K), whole calls and calls that reuse the schedule.

    PYTHONPATH=src python3 benchmarks/experiments/flush_ab.py OUT.json [--only dense]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from typing import Any

import torch

import wavemla
import wavemla.tools.bench as bench
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, index_k_bytes, run_case

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from idx_select import _score_only

_BUFS: dict[str, torch.Tensor] = {}


def _buf(name: str) -> torch.Tensor:
    if name not in _BUFS:
        _BUFS[name] = torch.ones(64 << 20, dtype=torch.float32, device="cuda")  # 256 MB
    return _BUFS[name]


def flush_dirty() -> None:
    _buf("w").zero_()


def flush_clean() -> None:
    _buf("w").zero_()
    _buf("r").sum()


def flush_none() -> None:
    pass


FLUSHES = {"dirty": flush_dirty, "clean": flush_clean, "none": flush_none}


def timed(fn: Any, mode: str, reps: int) -> float:
    bench._flush_l2 = FLUSHES[mode]
    return statistics.median(bench.timing_samples_us(fn, reps, flush=True, graph=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", choices=("all", "dense"), default="all")
    args = ap.parse_args(argv)
    records: list[dict[str, Any]] = []

    def emit(kind: str, shape: str, nbytes: float, times: dict[str, float]) -> None:
        rec = {"kind": kind, "shape": shape, "bytes": nbytes, "us": times}
        records.append(rec)
        cols = "  ".join(f"{m} {t:8.1f} us {nbytes / t / 1e3:6.0f} GB/s" for m, t in times.items())
        print(f"{kind:8s} {shape:28s} {cols}", flush=True)
        with open(args.out, "w") as f:
            json.dump({"environment": bench.environment(), "records": records}, f, indent=1)

    for mb in (24, 64, 138, 276, 1024):
        x = torch.ones(mb << 18, dtype=torch.float32, device="cuda")
        emit("read", f"{mb} MB", mb << 20, {m: timed(x.sum, m, args.reps) for m in FLUSHES})
        y = torch.empty_like(x)
        emit("copy", f"{mb} MB (r+w)", 2 * (mb << 20), {m: timed(functools.partial(y.copy_, x), m, args.reps)
                                                      for m in FLUSHES})  # fmt: skip
        del x, y

    if args.only == "dense":
        _dense(emit, args.reps)
        return 0

    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    import wavemla.kernels.indexer as ix

    for b in (32, 64, 128):
        case = IndexerBenchCase(b=b, n_comp=32768, kv_format="fp8-paged", q_format="fp8")
        data = _fill_case(case, gen)
        ws = torch.empty(ix.indexer_workspace_numel(b, 1, 64, 32768), dtype=torch.int32, device="cuda")
        out = (
            torch.empty(b, 1, case.topk, dtype=torch.int32, device="cuda"),
            torch.empty(b, 1, dtype=torch.int32, device="cuda"),
        )
        nbytes = index_k_bytes(case)
        emit("score", f"b={b} n=32K fp8", nbytes, {m: timed(_score_only(case, data, ws), m, args.reps)
                                                   for m in ("dirty", "clean")})  # fmt: skip
        call = functools.partial(run_case, case, data, ws, out)
        emit("indexer", f"b={b} n=32K fp8", nbytes, {m: timed(call, m, args.reps) for m in ("dirty", "clean")})
        del data, ws

    for mode_name in ("csa", "hca"):
        topk, page, extra_topk, extra_page, extra_pool = bench.MODES[mode_name]
        for b in (32, 64, 128):
            inputs = make_sparse_decode_inputs(
                batch=b, h_q=64, topk=topk, page=page, extra_topk=extra_topk, extra_page=extra_page,
                extra_pool=extra_pool or None, fp8=True, device="cuda",
            )  # fmt: skip
            kw = {k: v for k, v in inputs.items() if v is not None}
            for invariant in (False, True):
                meta, _ = wavemla.get_mla_metadata()
                wavemla.sparse_mla_decode(**kw, metadata=meta, batch_invariant=invariant)
                call = functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta, batch_invariant=invariant)
                _, nbytes = bench.traffic(inputs)
                emit("decode", f"{mode_name} b={b}{' BI' if invariant else ''}", nbytes,
                     {m: timed(call, m, args.reps) for m in ("dirty", "clean")})  # fmt: skip
    return 0


def _dense(emit: Any, reps: int) -> None:
    from wavemla.testing import make_dense_decode_inputs

    points = [(64, b, 4096) for b in (8, 32, 64, 128)] + [(64, 32, s) for s in (1024, 2048, 8192, 16384)]
    for h, b, s_k in [*points, (128, 32, 4096)]:
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, h_q=h, page=64, device="cuda")
        _, nbytes = bench.dense_traffic([s_k] * b, 1, h, 576, False, 64)
        meta, _ = wavemla.get_mla_metadata()
        call = functools.partial(wavemla.dense_mla_decode, **inputs, metadata=meta)
        emit("dense", f"h={h} b={b} s_k={s_k}", nbytes, {m: timed(call, m, reps) for m in FLUSHES})
        call()
        reused = functools.partial(wavemla.dense_mla_decode, **inputs, metadata=meta, reuse_schedule=True)
        emit("dense", f"h={h} b={b} s_k={s_k} reused", nbytes, {m: timed(reused, m, reps) for m in FLUSHES})
        del inputs


if __name__ == "__main__":
    sys.exit(main())
