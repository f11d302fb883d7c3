"""Write copies of the package's indexer.py whose spread-select count launch runs N warps (one walker a thread)
into benchmarks/experiments/variants/indexer_count_wN.py, for idx_ab.py.

    python3 benchmarks/experiments/count_warps_variant.py 4 8
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLD = """        launch.run(_indexer_spread_count_kernel, (tokens * cfg.parts,), **shared)"""

src = (ROOT / "src/wavemla/kernels/indexer.py").read_text()
if OLD not in src:
    sys.exit("count launch not found in src/wavemla/kernels/indexer.py")
out = ROOT / "benchmarks/experiments/variants"
out.mkdir(exist_ok=True)
for w in sys.argv[1:]:
    new = f"""        launch.run(_indexer_spread_count_kernel, (tokens * cfg.parts,),
                   **{{**shared, "WALKERS": 32 * {int(w)}, "num_warps": {int(w)}}})"""
    (out / f"indexer_count_w{int(w)}.py").write_text(src.replace(OLD, new))
    print(out / f"indexer_count_w{int(w)}.py")
