"""``benchmarks/bi_cost.py`` on two source trees, one after the other, joined in one JSON: the A/B of a
batch-invariant build.

    python3 benchmarks/experiments/bi_ab.py OUT.json [bi_cost.py arguments ...]

The old tree is ``build/oldsrc/src`` (``git archive OLD src/wavemla | tar -x -C build/oldsrc``, carried with the GPU
call), the new one ``src``. Each record gains ``tree`` (``old`` or ``new``); one line per record is printed,
``tree mode batch invariant / default = ratio``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    out, args = Path(sys.argv[1]), sys.argv[2:]
    rows = []
    for tree, src in (("old", ROOT / "build" / "oldsrc" / "src"), ("new", ROOT / "src")):
        if not src.is_dir():
            sys.exit(f"bi_ab.py: no source tree at {src}")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "bi.json"
            env = dict(os.environ, PYTHONPATH=str(src))
            cmd = [sys.executable, str(ROOT / "benchmarks" / "bi_cost.py"), *args, "--json", str(path)]
            subprocess.run(cmd, env=env, check=True)
            rows += [{**r, "tree": tree} for r in json.loads(path.read_text())["records"]]
    out.write_text(json.dumps({"records": rows}, indent=1))
    for r in rows:
        print(r["tree"], r["mode"], r["batch"], f"{r['invariant_us']:.1f} / {r['default_us']:.1f} = {r['ratio']:.3f}")


if __name__ == "__main__":
    main()
