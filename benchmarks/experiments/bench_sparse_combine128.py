"""``wavemla bench`` with the sparse combine's all-pieces merge over 128 columns a program, as before it took 512:
the A side of an in-run A/B of that shape, the B side being ``wavemla bench``.

    PYTHONPATH=src python3 benchmarks/experiments/bench_sparse_combine128.py --mode csa ...   (bench arguments)
"""

import sys

from wavemla.cli import main
from wavemla.kernels import combine

if __name__ == "__main__":
    combine.wide_block_d = lambda max_pieces, d=512: 128
    sys.exit(main(["bench", *sys.argv[1:]]))
