"""A/B of the dense decode's split kernels for 64-row tiles of 64 keys on sm_90: the Triton keys-major
64x64x8x2 tile against the warp-specialized Gluon kernel (``kernels/dense_decode_ws.py``: a TMA warp, two math
warpgroups), with the same tile, partition and combine (``WAVEMLA_DENSE_WS`` off / on), at DeepSeek-V3 shapes.

    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_ab.py OUT.json --points bf16:64:128:16384

A point is ``FORMAT:H:B:S_K[:S_Q]`` (uniform lengths, page 64; causal when s_q > 1). CUDA-graph replay, L2 flushed
before each replay; the lower of each variant's per-round medians (variants alternate within a round), with the
copy bandwidth measured in the same process. Outputs are compared with the Triton kernel's (largest difference
relative to its largest output) and with the fp64 reference at the first point's first two requests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wavemla import config

sys.path.insert(0, str(Path(__file__).parent))
from dense_ab import ab_points, parse_and_measure, write_results

_TILE = dict(WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64, WAVEMLA_NUM_WARPS=8, WAVEMLA_NUM_STAGES=2)
VARIANTS = {
    "triton": dict(_TILE, WAVEMLA_DENSE_WS="off"),
    "gluon-ws": dict(_TILE, WAVEMLA_DENSE_WS="on"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["bf16:64:128:16384"])
    ap.add_argument("--variants", nargs="+", default=["triton", "gluon-ws"])
    args, ceil = parse_and_measure(ap)
    records = ab_points(args, ceil, args.variants, lambda v: config.override(**VARIANTS[v]), "ratio_to_triton")
    write_results(args.out, ceil, records)


if __name__ == "__main__":
    main()
