"""Barriers, shuffles and shared-memory stores in the sm_90 PTX of the indexer's select kernels, for one or more
``indexer.py`` sources (each imported as a module of its own; no GPU needed, Triton's interpreter off).

    PYTHONPATH=src python3 benchmarks/experiments/idx_ptx_barriers.py src/wavemla/kernels/indexer.py OTHER.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from wavemla.kernels.indexer import compile_variant

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from idx_ab import import_file  # noqa: E402  (an indexer.py imported apart from the package's)

KERNELS = ("_indexer_spread_count_kernel", "_indexer_select_kernel")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path)
    parser.add_argument("--arch", type=int, default=90)
    args = parser.parse_args(argv)
    for n, path in enumerate(args.sources):
        mod = import_file(path, f"indexer_{n}")
        seen = set()
        for fn, variant, fargs, num_warps, num_stages in mod._production_variants(64, 64, args.arch):
            if fn.__name__ not in KERNELS or fn.__name__ in seen:
                continue
            seen.add(fn.__name__)
            ptx = compile_variant(fn, fargs, arch=args.arch, num_warps=num_warps, num_stages=num_stages).asm["ptx"]
            print(f"{path}: {fn.__name__} ({variant}): {len(re.findall(r'bar[.]sync|barrier[.]sync', ptx))} barriers, "
                  f"{len(re.findall('shfl', ptx))} shuffles, {len(re.findall(r'st[.]shared', ptx))} shared stores, "
                  f"{ptx.count(chr(10))} PTX lines")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
