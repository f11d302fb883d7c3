"""``wavemla bench`` with the dense combine's launch shape as it was before 32 pieces a step (16 pieces over 32
columns past 8 pieces): the A side of an in-run A/B of the combine shape, the B side being ``wavemla bench``.

    PYTHONPATH=src python3 benchmarks/experiments/bench_combine16.py --dense ...   (the arguments of wavemla bench)

The planner's parts are the same either way (it prices the combine at 16 pieces a step); only the combine kernel's
group and columns change.
"""

import sys

from wavemla import plan
from wavemla.cli import main
from wavemla.kernels import combine


def shape_before(batch: int, num_parts: int) -> tuple[int, int]:
    group, block_d = plan.dense_combine_shape(batch, num_parts)
    return (16, 32) if group > 16 else (group, block_d)


if __name__ == "__main__":
    combine.dense_combine_shape = shape_before
    sys.exit(main(["bench", *sys.argv[1:]]))
