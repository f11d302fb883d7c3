"""Where a segment's time goes in the sparse decode's split kernel: SM clock stamps per program and segment.

    PYTHONPATH=src python3 benchmarks/experiments/seg_phases.py OUT.json      # on a GPU

A copy of ``_sparse_mla_decode_kernel`` (src/wavemla/kernels/sparse_decode.py patched as text, not part of the
package) takes a debug buffer and, after a CTA barrier, stores ``%clock64`` at: the segment's start, q loaded and
the state reset, the main (window) list's tiles done, the extra list's tiles done, the partial normalized, the
output or partial stored, the segment's end (after the merge, where this program merges). For each point (CSA or
HCA h=64 FP8, default plan or batch-invariant with N pieces a token) the patched kernel runs once per repetition
(L2 flushed before each); the median over programs and repetitions of each phase, by the segment's place in its
program, is printed in µs at the H200's SM clock, with the gap from a segment's end to the next one's start. (Runs
before this note also printed a "stamped span", first start to last end over all programs: SM clocks are not
synchronized, so that figure means nothing.) The stamps' barriers cost a little; the unpatched kernel's CUDA-graph
time is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch
from merge_ab import decode_point, load_variant, time_call  # this directory: the script's own path entry

import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.tools.bench import _flush_l2

PHASES = ("q+reset", "main tiles", "extra tiles", "normalize", "store", "merge/tail")
N_STAMPS = 7
MAX_SEG = 16
SM_MHZ = 1980.0  # H200 boost clock: cycles -> µs
REPS = 8

_STAMP = (
    "{ind}tl.debug_barrier()\n"
    "{ind}tl.store(p_dbg + (i_pid * {ms} + tl.minimum(k_seg, {last})) * {ns} + {k}, _clock())\n"
)
_CLOCK = """

@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


"""
# (anchor, stamp index, where)
_ANCHORS = (
    ("    for i_seg in range(unit_lo // seg_units, (unit_hi - 1) // seg_units + 1):\n", 0, "after"),
    ("        b_l = tl.zeros([BLOCK_H], dtype=tl.float32)\n", 1, "after"),
    (
        "            IS_FP8, PAGE, DTYPE, BLOCK_N, D, NUM_STAGES, E4M3_CVT, PREFETCH_ROWS, KV_EVICT,\n"
        "        )  # fmt: skip\n",
        2,
        "after",
    ),
    (
        "                IS_FP8, PAGE_X, DTYPE, BLOCK_N, D, NUM_STAGES, E4M3_CVT, PREFETCH_ROWS, KV_EVICT,\n"
        "            )  # fmt: skip\n",
        3,
        "after",
    ),
    ('        b_lse2 = tl.where(m_seen, b_m + tl.log2(tl.where(m_seen, b_l, 1.0)), float("-inf"))\n', 4, "after"),
    ("            tl.store(p_lse_ws + i_slot * H + o_h, b_lse2, mask=m_h, eviction_policy=WS_EVICT)\n", 5, "after"),
    (
        "            tl.store(p_lse + tl.cast(i_tok, tl.int64) * H + o_h, b_lse, mask=m_h)\n        else:\n",
        5,
        "before_else",
    ),
)


def patched_module(edits: tuple[tuple[str, str], ...] = ()) -> Any:
    """sparse_decode.py with a stamped copy of the split kernel (and ``edits`` applied first), imported from a
    temporary file. Its launcher takes the debug buffer from the module global ``DBG``."""
    src = Path(sd.__file__).read_text()
    for old, new in edits:
        assert src.count(old) == 1, f"edit target {old!r}"
        src = src.replace(old, new)
    i_def = src.index("def _sparse_mla_decode_kernel(\n")
    i_end = src.index("\n\n_TL_DTYPE = ")
    head, kernel, tail = src[:i_def], src[i_def:i_end], src[i_end:]
    kernel = kernel.replace("    p_q,\n    p_out,\n", "    p_dbg,\n    p_q,\n    p_out,\n", 1)
    for anchor, k, where in _ANCHORS:
        i = kernel.find(anchor)
        assert i >= 0 and kernel.count(anchor) == 1, f"anchor {k}: {anchor!r}"
        if where == "before_else":
            ind = " " * 12
            j = i + anchor.index("        else:\n")
        else:
            ind = " " * (len(anchor.rstrip("\n").splitlines()[-1]) - len(anchor.rstrip("\n").splitlines()[-1].lstrip()))
            j = i + len(anchor)
            if k == 0:
                ind = " " * 8
                kernel = kernel[:j] + f"{ind}k_seg = i_seg - unit_lo // seg_units\n" + kernel[j:]
                j = kernel.find("\n", j) + 1
        stamp = _STAMP.format(ind=ind, ms=MAX_SEG, last=MAX_SEG - 1, ns=N_STAMPS, k=k)
        kernel = kernel[:j] + stamp + kernel[j:]
    kernel = kernel.rstrip("\n") + "\n" + _STAMP.format(ind=" " * 8, ms=MAX_SEG, last=MAX_SEG - 1, ns=N_STAMPS, k=6)
    tail = tail.replace(
        "    return _sparse_mla_decode_kernel[(num_parts * num_hb,)](\n",
        "    return _sparse_mla_decode_kernel[(num_parts * num_hb,)](\n        p_dbg=DBG,\n",
        1,
    )
    i_dec = head.rindex("\n@triton.jit", 0, len(head)) + 1
    text = head[:i_dec] + _CLOCK + head[i_dec:] + kernel + tail + "\n\nDBG = None\n"
    path = Path(tempfile.mkdtemp()) / "sd_stamped.py"
    path.write_text(text)
    return load_variant(path)


def run_point(mod: Any, mode: str, b: int, pieces: int | None) -> dict[str, Any]:
    call_kw, knobs = decode_point(mode, b, pieces, seed=0)
    split = sd.sparse_decode_split
    with config.override(**knobs):
        meta, _ = get_mla_metadata()
        sparse_mla_decode(**call_kw, metadata=meta)
        graph_us = time_call(call_kw, meta, 20)
        programs = meta.plan.programs
        mod.DBG = torch.full((programs * MAX_SEG * N_STAMPS,), -1, dtype=torch.int64, device="cuda")
        sd.sparse_decode_split = mod.sparse_decode_split
        try:
            per_phase: dict[int, list[list[float]]] = {}
            gaps: list[float] = []
            for _ in range(REPS):
                mod.DBG.fill_(-1)
                _flush_l2()
                sparse_mla_decode(**call_kw, metadata=meta)
                torch.cuda.synchronize()
                st = mod.DBG.view(programs, MAX_SEG, N_STAMPS).cpu()
                valid = st[:, :, 0] >= 0
                for p in range(programs):
                    for k in range(MAX_SEG):
                        if not valid[p, k]:
                            continue
                        row = st[p, k].tolist()
                        ph = per_phase.setdefault(k, [[] for _ in PHASES])
                        for j in range(len(PHASES)):
                            a, z = row[j], row[j + 1]
                            if a >= 0 and z >= 0:
                                ph[j].append((z - a) / SM_MHZ)
                        if k + 1 < MAX_SEG and valid[p, k + 1]:
                            gaps.append((st[p, k + 1, 0].item() - row[6]) / SM_MHZ)
        finally:
            sd.sparse_decode_split = split
    segs = {k: [round(statistics.median(v), 2) if v else None for v in ph] for k, ph in sorted(per_phase.items())}
    return dict(
        mode=mode, batch=b, pieces=pieces, plan=str(meta.plan.config), programs=programs,
        units_per_part=meta.plan.units_per_part, graph_us=graph_us,
        gap_us=statistics.median(gaps) if gaps else None, segments=segs,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--points", nargs="+", default=["csa:128:0", "csa:128:2", "csa:128:10", "csa:133:0", "hca:32:0"])
    args = ap.parse_args()
    mod = patched_module()
    records = []
    for item in args.points:
        mode, b, pieces = item.split(":")
        rec = run_point(mod, mode, int(b), int(pieces) or None)
        records.append(rec)
        print(
            f"{mode} b={rec['batch']} pieces={rec['pieces']} {rec['plan']} progs={rec['programs']} "
            f"upp={rec['units_per_part']}: graph {rec['graph_us']:.1f} us, "
            f"gap between segments {rec['gap_us']}",
            flush=True,
        )
        print("   seg  " + " ".join(f"{p:>12s}" for p in PHASES))
        for k, vals in rec["segments"].items():
            print(f"   {k:3d}  " + " ".join(f"{v if v is not None else '-':>12}" for v in vals))
        torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text(json.dumps({"sm_mhz": SM_MHZ, "records": records}, indent=1))


if __name__ == "__main__":
    main()
