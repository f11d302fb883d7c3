"""A/B of the dense decode's bf16 tiles for 64 query rows: the keys-major 64x64x8x2 (2 stages: each tile's copy
follows the previous tile's math) against row-major 64x32 tiles with P through scratch rows
(``dense_decode.rows64``) at 2 and 3 stages (3 keeps the next tile's copy in flight during the math), at
DeepSeek-V3 shapes. Each variant is forced through the tile knobs; the partition is the planner's for that tile.

    PYTHONPATH=src python3 benchmarks/experiments/dense_rows64_ab.py OUT.json --points bf16:64:128:16384

A point is ``FORMAT:H:B:S_K[:S_Q]`` (uniform lengths, page 64; causal when s_q > 1). CUDA-graph replay, L2 flushed
before each replay; the lower of each variant's per-round medians (variants alternate within a round), with the
copy bandwidth measured in the same process. Outputs are compared with the keys-major tile's (largest difference
relative to its largest output) and with the fp64 reference at the first point's first two requests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wavemla import config

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import ab_points, parse_and_measure, write_results

VARIANTS = {
    "64x64x8x2": dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2),
    "64x32x8x2": dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2),
    "64x32x8x3": dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=32, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=3),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:64:128:16384"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args, ceil = parse_and_measure(ap)
    records = ab_points(args, ceil, args.variants, lambda v: config.override(**VARIANTS[v]), "ratio_to_keys_major")
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
