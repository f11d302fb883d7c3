"""The same decode work with the requests' pages scattered over caches of several sizes: does the footprint of the
cache a call gathers from change its time (address translation, DRAM page locality), as an engine's cache does,
which holds every running request's pages in one pool of many GB?

    PYTHONPATH=src python3 benchmarks/experiments/pool_size.py OUT.json [--reps 15]      # on a GPU
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/experiments/pool_size.py --cpu-check

Dense: h = 16 and 64, b = 32 requests of 16,384 bf16 keys (page 64), taken from inputs built for P requests
(P = 32, 128, 512; the pages of all P shuffled over one cache, as ``make_dense_decode_inputs`` lays them out), so the
32 requests' 8,192 pages lie in a cache of P x 18.9 MB. Sparse: CSA h = 64, b = 64, each request's 512 compressed rows
picked from a pool of X rows of its own (X = 2,048, the benchmark's, 32,768 and 131,072; pages shuffled over all
requests' pools), so the gathered rows lie in a cache of 64 X x 584 bytes (``--sparse B:X ...`` for other points;
``make_sparse_decode_inputs`` builds caches of over ``BULK_ROWS`` rows a slice of pages at a time). Each call:
CUDA-graph replay, L2 flushed, the benchmarks' warm-up, median of ``--reps``; the bytes moved are the same at every
pool size.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from wavemla import dense_mla_decode, get_mla_metadata, sparse_mla_decode
from wavemla.testing import make_dense_decode_inputs, make_sparse_decode_inputs
from wavemla.tools.bench import MODES


def dense_case(
    b: int, pool: int, h: int, s_k: int, device: str, dtype: torch.dtype = torch.bfloat16
) -> dict[str, torch.Tensor]:
    """``b`` requests of ``s_k`` keys out of inputs built for ``pool`` requests (one shared cache)."""
    full = make_dense_decode_inputs(lengths=[s_k] * pool, h_q=h, dtype=dtype, device=device, seed=1)
    return {
        "q": full["q"][:b].contiguous(),
        "k_cache": full["k_cache"],
        "block_table": full["block_table"][:b].contiguous(),
        "cache_seqlens": full["cache_seqlens"][:b].contiguous(),
    }


def sparse_case(
    b: int, pool_rows: int, device: str, dtype: torch.dtype = torch.bfloat16
) -> dict[str, torch.Tensor | None]:
    """``wavemla bench``'s CSA inputs for ``b`` requests (64 heads), each picking from ``pool_rows`` rows of its own."""
    topk, page, xtopk, xpage, _ = MODES["csa"]
    return make_sparse_decode_inputs(
        batch=b, h_q=64, topk=topk, page=page, extra_topk=xtopk, extra_page=xpage, extra_pool=pool_rows, fp8=True,
        dtype=dtype, device=device, seed=1,
    )  # fmt: skip


def few_pages(inputs: dict[str, torch.Tensor | None], pages: int, seed: int = 2) -> dict[str, torch.Tensor | None]:
    """``inputs`` with each request's compressed picks moved into ``pages`` of the 64-row pages they touched (its own
    pages, so every row is a real one): as many distinct pages a request as a compact pool gives, over the same large
    cache."""
    idx = inputs["extra_indices"]
    assert idx is not None
    gen = torch.Generator().manual_seed(seed)
    out = idx.clone().cpu()
    for r in range(idx.shape[0]):
        touched = torch.unique(out[r].flatten() // 64)
        keep = touched[torch.randperm(touched.numel(), generator=gen)[:pages]]
        rows = (keep[:, None] * 64 + torch.arange(64)).flatten()
        out[r] = rows[torch.randperm(rows.numel(), generator=gen)[: idx.shape[-1]]].view_as(out[r])
    return {**inputs, "extra_indices": out.to(idx.device)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--cpu-check", action="store_true", help="tiny shapes through the interpreter, one call each")
    ap.add_argument("--no-dense", action="store_true", help="the sparse points only")
    ap.add_argument(
        "--sparse",
        nargs="+",
        default=["64:2048", "64:32768", "64:131072"],
        help="B:ROWS[:PAGES] points of the sparse decode (requests, compressed rows of each request's pool; PAGES: "
        "each request's picks moved into that many of the 64-row pages they touched)",
    )
    args = ap.parse_args()
    if args.cpu_check:
        inputs = dense_case(2, 4, 16, 128, "cpu", torch.float16)
        dense_mla_decode(**inputs, metadata=get_mla_metadata()[0])
        sp = few_pages(sparse_case(2, 4096, "cpu", torch.float16), 8)
        sparse_mla_decode(**{k: v for k, v in sp.items() if v is not None}, metadata=get_mla_metadata()[0])
        print("cpu check: both calls ran")
        return 0
    if args.out is None:
        ap.error("OUT.json is needed on a GPU")
    from wavemla.tools.bench import environment, timings_us

    records = []

    def timed(kind: str, label: dict, call) -> None:
        torch.cuda.synchronize()
        p20, med, p80 = timings_us(call, reps=args.reps, graph=True)
        rec = {"kind": kind, **label, "median_us": med, "p20_us": p20, "p80_us": p80}
        records.append(rec)
        print(f"{kind:6s} {label} {med:8.1f} us (p20 {p20:.1f}, p80 {p80:.1f})", flush=True)

    for h in () if args.no_dense else (16, 64):
        for pool in (32, 128, 512):
            inputs = dense_case(32, pool, h, 16384, "cuda")
            meta = get_mla_metadata()[0]
            cache_gb = inputs["k_cache"].numel() * inputs["k_cache"].element_size() / 1e9
            timed("dense", {"h": h, "b": 32, "s_k": 16384, "pool_requests": pool, "cache_gb": round(cache_gb, 2)},
                  lambda inputs=inputs, meta=meta: dense_mla_decode(**inputs, metadata=meta))  # fmt: skip
            del inputs, meta
            torch.cuda.empty_cache()
    for point in args.sparse:
        b, pool_rows, *few = (int(x) for x in point.split(":"))
        sp = sparse_case(b, pool_rows, "cuda")
        if few:
            sp = few_pages(sp, few[0])
        kw = {k: v for k, v in sp.items() if v is not None}
        meta = get_mla_metadata()[0]
        x = kw["extra_kv_cache"]
        cache_gb = x.numel() * x.element_size() / 1e9
        label = {"mode": "csa", "h": 64, "b": b, "pool_rows": pool_rows, "cache_gb": round(cache_gb, 2)}
        if few:
            label["pages_per_request"] = few[0]
        timed("sparse", label,
              lambda kw=kw, meta=meta: sparse_mla_decode(**kw, metadata=meta))  # fmt: skip
        del sp, kw, meta, x
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"argv": sys.argv, "env": environment(), "records": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
