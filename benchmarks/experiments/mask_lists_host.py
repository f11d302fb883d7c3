"""Host µs of the mask-list kernels' launches (``mask_stats`` then ``mask_lists``, as a decode-step call of
``wavemla.hf_attention`` makes them), replayed (``WAVEMLA_LAUNCH=replay``, the default) against Triton's launch path
(``WAVEMLA_LAUNCH=triton``), alternated in one process: calls back to back, the GPU running behind, median over
rounds. The masks are transformers' shapes for one decode step: ``[b, 1, L]`` bf16, additive.

    PYTHONPATH=src python3 benchmarks/experiments/mask_lists_host.py --rounds 7 --calls 400
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_host_cost import host_us  # host µs per call, calls back to back (the GPU runs behind)

from wavemla import config
from wavemla.kernels.mask_lists import mask_lists, mask_stats

CASES = ((1, 384, 384), (64, 384, 384), (8, 8320, 640), (64, 8320, 640))  # (b, L, width)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    print(f"{'b':>4} {'L':>6} {'width':>6}  replay µs  triton µs  ratio")
    for b, length, width in CASES:
        keep = torch.rand(b, 1, length, device="cuda") < 0.5
        mask = torch.zeros(b, 1, length, device="cuda", dtype=torch.bfloat16).masked_fill(~keep, -torch.inf)

        def call(mask: torch.Tensor = mask, width: int = width) -> None:
            mask_stats(mask)
            mask_lists(mask, width)

        times: dict[str, list[float]] = {"replay": [], "triton": []}
        for _ in range(args.rounds):
            for mode in times:
                with config.override(WAVEMLA_LAUNCH=mode):
                    times[mode].append(host_us(call, args.calls))
        rep, tri = statistics.median(times["replay"]), statistics.median(times["triton"])
        print(f"{b:>4} {length:>6} {width:>6}  {rep:9.1f}  {tri:9.1f}  {rep / tri:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
