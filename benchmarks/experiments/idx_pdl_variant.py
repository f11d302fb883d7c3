"""Write a copy of the package's indexer.py whose select kernels launch behind the kernel before them (programmatic
dependent launch) into benchmarks/experiments/variants/indexer_pdl.py, for idx_ab.py.

    python3 benchmarks/experiments/idx_pdl_variant.py

The score kernel lets its dependents launch from its start (``griddepcontrol.launch_dependents``); the per-token
select, the spread select's count kernel and its rank kernel are launched with ``launch_pdl`` and wait in
``griddepcontrol.wait`` before their first load, so they start as the kernel before them drains instead of after it
(the count kernel also lets the rank kernel launch from its start). Every program waits, so a kernel's completion
implies its predecessor's. GPUs without grid dependency control get the package's launches.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WAIT = "        gdc_wait()  # the kernel before it is complete and its writes visible past this point"
# (text, replacement) pairs applied in order; each text must occur exactly once
EDITS = [
    (
        "from wavemla.kernels import launch\n",
        "from wavemla.kernels import gdc, launch\nfrom wavemla.kernels.gdc import gdc_launch_dependents, gdc_wait\n",
    ),
    (
        "    FP4_ASM: tl.constexpr = False,\n):\n",
        "    FP4_ASM: tl.constexpr = False,\n    PDL: tl.constexpr = False,\n):\n",
    ),
    (
        "    i_n = tl.program_id(0)\n    i_b = tl.program_id(1)\n    i_g = tl.program_id(2)\n",
        "    if PDL:\n        gdc_launch_dependents()\n"
        "    i_n = tl.program_id(0)\n    i_b = tl.program_id(1)\n    i_g = tl.program_id(2)\n",
    ),
    (
        "    Counts are integer and exact, so the result never depends on scheduling or on the launch configuration.\n"
        '    """\n    i_t = tl.program_id(0)\n',
        "    Counts are integer and exact, so the result never depends on scheduling or on the launch configuration.\n"
        f'    """\n    if PDL:\n{WAIT}\n    i_t = tl.program_id(0)\n',
    ),
    (
        "    i_t = tl.program_id(0) // PARTS\n",
        f"    if PDL:\n{WAIT}\n        gdc_launch_dependents()\n    i_t = tl.program_id(0) // PARTS\n",
    ),
    (
        "    this program runs the whole per-token select itself. Both give the same bits.\n"
        '    """\n    i_t = tl.program_id(0)\n',
        "    this program runs the whole per-token select itself. Both give the same bits.\n"
        f'    """\n    if PDL:\n{WAIT}\n    i_t = tl.program_id(0)\n',
    ),
    (
        "    slots = _resident_score_programs(q_idx.device, args) if on_gpu else None\n",
        '    args["PDL"] = on_gpu and gdc.enabled(q_idx.device)\n'
        "    slots = _resident_score_programs(q_idx.device, args) if on_gpu else None\n",
    ),
    (
        "        WHOLE=cfg.list_whole,\n        num_warps=cfg.select_warps,\n    )\n",
        "        WHOLE=cfg.list_whole,\n        num_warps=cfg.select_warps,\n        **_pdl(keys),\n    )\n",
    ),
    (
        "        launch.run(_indexer_spread_count_kernel, (tokens * cfg.parts,), **shared)\n",
        "        launch.run(_indexer_spread_count_kernel, (tokens * cfg.parts,), **shared, **_pdl(keys))\n",
    ),
    (
        "        GATHER=spread_gather(cfg.parts, cfg.part_cap),\n        **shared,\n    )\n",
        "        GATHER=spread_gather(cfg.parts, cfg.part_cap),\n        **shared,\n        **_pdl(keys),\n    )\n",
    ),
    (
        "def _launch_token_select(",
        "def _pdl(keys: torch.Tensor) -> dict[str, Any]:\n"
        '    return {"PDL": True, "launch_pdl": True} if gdc.enabled(keys.device) and not _interpreted() else {}\n\n\n'
        "def _launch_token_select(",
    ),
]
# the PDL parameter of the three select kernels: after the last constexpr of each signature
SIGNATURES = [
    ("def _indexer_select_kernel(", "    WHOLE: tl.constexpr,\n):\n"),
    ("def _indexer_spread_count_kernel(", "    WHOLE: tl.constexpr,\n):\n"),
    ("def _indexer_spread_rank_kernel(", "    GATHER: tl.constexpr,\n):\n"),
]

src = (ROOT / "src/wavemla/kernels/indexer.py").read_text()
for old, new in EDITS:
    if src.count(old) != 1:
        sys.exit(f"expected one occurrence in src/wavemla/kernels/indexer.py of:\n{old}")
    src = src.replace(old, new)
for name, tail in SIGNATURES:
    start = src.index(name)
    at = src.index(tail, start)
    src = src[:at] + tail.replace("):\n", "    PDL: tl.constexpr = False,\n):\n") + src[at + len(tail) :]
out = ROOT / "benchmarks/experiments/variants"
out.mkdir(exist_ok=True)
(out / "indexer_pdl.py").write_text(src)
print(out / "indexer_pdl.py")
