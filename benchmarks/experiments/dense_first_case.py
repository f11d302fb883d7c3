"""Is the first case timed after `wavemla bench --dense` builds a new cache pool slow, and what removes it?

In the dense grid the first case of a new pool (bf16 h = 16, b = 32, 16K keys from a pool built for b = 128) timed
10 µs (H200) and 22-26 µs (H100) over the same configuration timed again right after. This builds the pool as
`bench_dense` does and times that case four times in a row (each a median of 15 CUDA-graph replays behind the L2
flush), then again after a rebuild followed by one of two warm-ups: 50 ms of GEMMs (the clocks), or 20 replays of
the case itself without timing (its pages and code). `--more`: after a rebuild, a 1 s sleep, five reads of the whole
pool, or replays of the case's graph behind the flush until two medians of 5 agree within 2% (the count printed),
and the same rebuild timed at b = pool (every page read).

    PYTHONPATH=src python3 benchmarks/experiments/dense_first_case.py [--heads 16] [--batch 32] [--pool 128]

The rounds use the benchmarks' timing (`timing_samples_us`): written when it ran 3 untimed calls before the timed
ones; since it warms each call up under load for `WARM_MS`, every round should give the settled time.
"""

import argparse
import json
import time

import torch

from wavemla import dense_mla_decode, get_mla_metadata
from wavemla.testing import make_dense_decode_inputs
from wavemla.tools.bench import DENSE_PAGE, timing_samples_us


def build(pool: int, s_k: int, heads: int) -> dict:
    torch.cuda.empty_cache()
    return make_dense_decode_inputs(lengths=[s_k] * pool, s_q=1, h_q=heads, page=DENSE_PAGE, fp8=False,
                                    device="cuda", seed=0)  # fmt: skip


def case(full: dict, b: int, s_k: int, heads: int):
    inputs = {
        "q": full["q"][:b, :, :heads].contiguous(),
        "k_cache": full["k_cache"],
        "block_table": full["block_table"][:b].contiguous(),
        "cache_seqlens": torch.full((b,), s_k, dtype=torch.int32, device="cuda"),
    }
    meta, _ = get_mla_metadata()
    return lambda: dense_mla_decode(**inputs, metadata=meta)


def medians(fn, rounds: int, reps: int = 15) -> list[dict]:
    out = []
    for _ in range(rounds):
        s = timing_samples_us(fn, reps, flush=True, graph=True)
        out.append({"median": s[len(s) // 2], "min": s[0], "max": s[-1]})
    return out


def settle(fn, reps: int = 5, tol: float = 0.02, most: int = 40) -> int:
    """Replays (behind the flush) until two consecutive medians of ``reps`` agree within ``tol``; their count."""
    last = None
    for i in range(most):
        s = timing_samples_us(fn, reps, flush=True, graph=True)
        m = s[len(s) // 2]
        if last is not None and abs(m - last) <= tol * last:
            return (i + 1) * (reps + 3)
        last = m
    return most * (reps + 3)


def gemm_busy(ms: float) -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pool", type=int, default=128)
    ap.add_argument("--more", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    h, b = args.heads, args.batch
    result: dict[str, object] = {"gpu": torch.cuda.get_device_name(), "heads": h, "batch": b, "pool": args.pool}
    full = build(args.pool, 4096, h)
    result["4K first"] = medians(case(full, b, 4096, h), 2)
    warms = (
        ("none", "sleep 1 s", "pool read x5", "settle", "batch = pool")
        if args.more
        else ("none", "gemm 50 ms", "20 replays")
    )
    for warm in warms:
        full = {}
        full = build(args.pool, 16384, h)
        fn = case(full, args.pool if warm == "batch = pool" else b, 16384, h)
        if warm == "sleep 1 s":
            torch.cuda.synchronize()
            time.sleep(1.0)
        elif warm == "pool read x5":
            for _ in range(5):
                full["k_cache"].view(torch.uint8).max()
            torch.cuda.synchronize()
        elif warm == "settle":
            result["settle replays"] = settle(fn)
        elif warm == "gemm 50 ms":
            gemm_busy(50)
        elif warm == "20 replays":
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        result[f"16K after rebuild, warm-up {warm}"] = medians(fn, 4 if warm == "none" else 2)
    print("settle replays:", result.get("settle replays"))
    for k, v in result.items():
        if isinstance(v, list):
            print(f"{k:40s} " + "  ".join(f"{r['median']:7.1f} ({r['min']:.1f}-{r['max']:.1f})" for r in v))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
