"""SASS census of one indexer kernel variant, compiled offline (no GPU) the way ``compile_report`` builds it.

    PYTHONPATH=src python3 benchmarks/experiments/idx_sass.py "fp8q s_q=1" [S=5] [W=4] [ARCH=90]

The variant names are those of ``wavemla.kernels.indexer._production_variants``; S and W replace its pipeline
depth and warps. Prints registers, shared memory, the total SASS instruction count and the commonest opcodes.
The instruction counts quoted in BENCHMARKS.md ("Indexer notes") come from this script with Triton 3.6.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile

import triton

import wavemla.kernels.indexer as ix
from wavemla.resources import _res_usage

want = sys.argv[1] if len(sys.argv) > 1 else "fp8q s_q=1"
over = dict(a.split("=") for a in sys.argv[2:])
arch = int(over.get("ARCH", 90))
for fn, variant, args, nw, ns in ix._production_variants(64, 64, arch):
    if variant != want:
        continue
    c = ix.compile_variant(fn, args, arch=arch, num_warps=int(over.get("W", nw)), num_stages=int(over.get("S", ns)))
    regs, stack, _, _ = _res_usage(c.asm["cubin"])
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(c.asm["cubin"])
        sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
    ops = collections.Counter(
        m.group(2) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", sass)
    )
    print(f"{variant} sm_{arch}: regs={regs} stack={stack} smem={c.metadata.shared} sass={sum(ops.values())}")
    print("  " + " ".join(f"{k}:{v}" for k, v in ops.most_common(24)))
