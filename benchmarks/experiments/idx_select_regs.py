"""Registers and spills of the indexer's select kernels for sm_90a at both list register blocks (offline, no GPU).

    PYTHONPATH=src python3 benchmarks/experiments/idx_select_regs.py        # in a process without TRITON_INTERPRET

Each select kernel of ``compile_report``'s production variants (b = 32, 256K rows, top-512) is built with
``BLOCK_L`` 1024 and 2048 and assembled by Triton's ptxas (``dense_ws_build_probe.assemble``); prints shared memory,
registers per thread and spill bytes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from dense_ws_build_probe import assemble

from wavemla.kernels import indexer as ix

SELECTS = ("_indexer_select_kernel", "_indexer_spread_count_kernel", "_indexer_spread_rank_kernel")


def main() -> int:
    for fn, variant, args, num_warps, num_stages in ix._production_variants(64, 64, 90):
        if fn.__name__ not in SELECTS:
            continue
        for block in (1024, 2048):
            a = dict(args, BLOCK_L=block)
            compiled = ix.compile_variant(fn, a, arch=90, num_warps=num_warps, num_stages=num_stages)
            info, _ = assemble(compiled.asm["ptx"])
            regs = re.findall(r"Used (\d+) registers", info)
            spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
            print(
                f"{fn.__name__} ({variant}) BLOCK_L={block}: shared {compiled.metadata.shared} B, "
                f"registers {','.join(regs)}, spill stores/loads {spills}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
