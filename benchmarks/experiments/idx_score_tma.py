"""The indexer's score kernel with each page of FP8 codes fetched by one TMA box, against the package's gather.

    PYTHONPATH=src python3 benchmarks/experiments/idx_score_tma.py OUT.json [--reps 15]     # on an sm_90 GPU

The package's score kernel gathers a 128-row tile of FP8 codes (page-split layout, page 64) with 16-byte loads per
thread through the block table (five pipeline stages). Here a 64-row tile is one page, so its 8 KB of codes are one
3-D TMA box ``[1, 64, 128]`` of a descriptor over the cache's code rows (``[blocks, page, 128]`` at the page's pitch
of ``page · 132`` bytes); the scales stay a 256-byte vector load. Same arithmetic otherwise (FP8 x FP8 dot, ReLU,
weighted head sum, the row scale, the order-preserving int32 key). Shapes: FP8 page-split rows with FP8 queries,
s_q 1, top-512 (b 32 / 64 / 128 at 32K rows; b 32 / 128 at 256K). Each kernel alone, CUDA-graph replay, L2 flushed,
median of ``--reps``; the keys of every variant compared bit for bit with the package's. Records: shape, variant,
median µs, GB/s of index-K read, % of the copy bandwidth measured first in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from idx_select import call_setup  # this directory: the script's own path entry
from triton.tools.tensor_descriptor import TensorDescriptor

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import timing_samples_us
from wavemla.tools.bench_indexer import (
    IndexerBenchCase,
    _environment,
    _fill_case,
    copy_record,
    index_k_bytes,
)

SHAPES = ((32, 32768), (64, 32768), (128, 32768), (32, 262144), (128, 262144))
VARIANTS = ((4, 4), (4, 8), (4, 12), (4, 16), (8, 8))  # (num_warps, num_stages) of the TMA kernel


@triton.jit
def _score_tma_kernel(
    p_q,
    p_w,
    k_desc,
    p_kw,
    p_bt,
    p_ncomp,
    p_keys,
    stride_qb,
    stride_qh,
    stride_wb,
    stride_kb,
    stride_btb,
    stride_nb,
    stride_keys,
    max_n,
    topk,
    rows_per_program,
    H: tl.constexpr,
    D: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Keys of rows [i_n·rows_per_program, +rows_per_program) of request i_b (s_q 1); a tile is one TMA box."""
    i_n = tl.program_id(0)
    i_b = tl.program_id(1)
    n_vis = tl.minimum(tl.maximum(tl.load(p_ncomp + i_b * stride_nb), 0), max_n)
    n_vis = tl.where(n_vis > topk, n_vis, 0)
    row_lo = i_n * rows_per_program
    if row_lo < n_vis:
        row_hi = tl.minimum(row_lo + rows_per_program, n_vis)
        o_h = tl.arange(0, H)
        o_d = tl.arange(0, D)
        b_q = tl.load(p_q + i_b * stride_qb + o_h[:, None] * stride_qh + o_d[None, :])
        b_qt = tl.trans(b_q.to(tl.float8e4nv, bitcast=True))  # [D, H]
        b_w = tl.load(p_w + i_b * stride_wb + o_h)
        o_tok = i_b.to(tl.int64)
        for i_row in range(row_lo, row_hi, BLOCK_N):
            b_blk = tl.load(p_bt + i_b * stride_btb + i_row // PAGE)
            b_code = k_desc.load([b_blk, i_row % PAGE, 0]).reshape(BLOCK_N, D)
            o_n = i_row + tl.arange(0, BLOCK_N)
            m_n = o_n < row_hi
            o_scale = b_blk.to(tl.int64) * stride_kb + PAGE * (D // 4) + (i_row % PAGE) + tl.arange(0, BLOCK_N)
            b_scale = tl.load(p_kw + o_scale, mask=m_n, other=0).to(tl.float32, bitcast=True)
            b_logit = tl.dot(b_code.to(tl.float8e4nv, bitcast=True), b_qt)  # [BLOCK_N, H] fp32
            b_logit = tl.maximum(b_logit, 0.0, propagate_nan=tl.PropagateNan.ALL) * b_w[None, :]
            b_score = tl.sum(b_logit, axis=1) * b_scale
            b_score = tl.where(b_score == b_score, b_score, float("-inf"))
            b_score = tl.where(b_score == 0.0, 0.0, b_score)
            b_bits = b_score.to(tl.int32, bitcast=True)
            b_key = b_bits ^ ((b_bits >> 31) & 0x7FFFFFFF)
            tl.store(p_keys + o_tok * stride_keys + o_n, b_key, mask=m_n)


def _tma_launcher(call: Any, cfg: ix.IndexerConfig, data: dict[str, torch.Tensor], keys: torch.Tensor, n_pad: int,
                  warps: int, stages: int) -> Any:  # fmt: skip
    cache = data["cache"]
    blocks, page = cache.shape[0], cache.shape[1]
    codes = torch.as_strided(cache, (blocks, page, ix.INDEX_DIM), (page * ix.FP8_ROW_BYTES, ix.INDEX_DIM, 1))
    desc = TensorDescriptor(codes, list(codes.shape), list(codes.stride()), [1, page, ix.INDEX_DIM])
    words = cache.view(torch.int32)
    q = data["q"].view(torch.uint8)
    grid = (triton.cdiv(call.max_n, cfg.rows_per_program), call.b)

    def run() -> None:
        _score_tma_kernel[grid](
            q, data["w"], desc, words, data["table"], data["n_comp"], keys,
            q.stride(0), q.stride(2), data["w"].stride(0), words.stride(0), data["table"].stride(0),
            data["n_comp"].stride(0), n_pad, call.max_n, call.topk, cfg.rows_per_program,
            H=call.heads, D=ix.INDEX_DIM, PAGE=page, BLOCK_N=page, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return run


def measure(out_path: Path, reps: int) -> list[dict[str, Any]]:
    copy_row = copy_record(reps, _environment())
    copy_gbps = float(copy_row["gbps"])
    print(f"copy: {copy_gbps:.0f} GB/s (read + write)", flush=True)
    records: list[dict[str, Any]] = [copy_row]
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    for b, n in SHAPES:
        torch.cuda.empty_cache()
        case = IndexerBenchCase(b=b, n_comp=n, kv_format="fp8-paged", q_format="fp8")
        data = _fill_case(case, generator)
        nbytes = index_k_bytes(case)
        call, cfg, layout = call_setup(case, data)
        ws = torch.empty(layout.numel, dtype=torch.int32, device="cuda")
        keys = ws[layout.keys : layout.hist]
        ref = torch.empty_like(keys)

        def package(
            cfg: ix.IndexerConfig = cfg,
            call: Any = call,
            data: dict[str, torch.Tensor] = data,
            keys: torch.Tensor = keys,
            n_pad: int = layout.n_pad,
        ) -> None:
            ix._launch_scores(call, cfg, data["q"], data["w"], data["cache"], data["table"], data["n_comp"], keys,
                              n_pad, call.topk)  # fmt: skip

        runs = [("package", package)] + [
            (f"tma w{w} s{s}", _tma_launcher(call, cfg, data, keys, layout.n_pad, w, s)) for w, s in VARIANTS
        ]
        for name, fn in runs:
            keys.fill_(0x5A5A5A5A)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a variant that does not build is reported, not fatal
                print(f"b={b} n={n} {name}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                records.append({"b": b, "n_comp": n, "variant": name, "error": f"{type(exc).__name__}: {exc}"[:500]})
                continue
            view = keys.view(b, layout.n_pad)[:, :n]
            if name == "package":
                ref.copy_(keys)
                differ = 0
            else:
                differ = int((view != ref.view(b, layout.n_pad)[:, :n]).sum().item())
            samples = timing_samples_us(fn, reps, graph=True)
            med = statistics.median(samples)
            gbps = nbytes / med / 1e3
            print(f"b={b:<4d} n={n:<7d} {name:12s} {med:8.1f} us {gbps:6.0f} GB/s {100 * gbps / copy_gbps:5.1f}% "
                  f"of copy  keys differing {differ}", flush=True)  # fmt: skip
            records.append({"b": b, "n_comp": n, "variant": name, "median_us": med,
                            "p20_us": samples[len(samples) // 5], "p80_us": samples[(4 * len(samples)) // 5],
                            "gbps": gbps, "pct_of_copy_bw": 100 * gbps / copy_gbps, "keys_differing": differ,
                            "rows_per_program": cfg.rows_per_program})  # fmt: skip
            out_path.write_text(json.dumps(records, indent=1))
        del data, ws, keys, ref
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_score_tma.py: needs a CUDA device", file=sys.stderr)
        return 2
    measure(args.out, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
