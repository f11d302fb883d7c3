"""How a warp-specialized sparse program starts: a copy of ``kernels/sparse_decode_ws.py`` with ``%globaltimer``
stamps (ns) in the first math warpgroup and in the gather warpgroup of every program, finer than
``sparse_ws_phases.py`` at the program's start. Each stamp follows a memory operation in program order (ptxas keeps
timer reads in order with memory operations), so "q stored" is taken once the q rows have arrived and been written to
shared memory.

Math warpgroup (first): entry; before its q loads; after its q stores to shared memory; q staged (after the exchange
with the other math warpgroup); the first tile ready; the program's end.
Gather warpgroup: entry; the first two tiles' index entries known (after the second tile's L2 prefetch is issued);
the first tile's first box decoded and stored; the first tile handed over (its ``kv_ready`` arrive).

Points whose programs hold one token segment each (the stamps of a second segment overwrite the first's): e.g.
``csa:8 csa:64 csa:128 hca:128``. Prints, per point, the medians over programs and calls (µs from the kernel's first
start), the last start and the span to the last math warpgroup's end, after one call behind a 256 MB write
(``--clean``: followed by a read of another 256 MB); the stamping and the calls are those of ``sparse_ws_phases.py``.

    PYTHONPATH=src:benchmarks/experiments python3 benchmarks/experiments/sparse_ws_start.py csa:8 csa:128 [--check]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dense_ws_phases import check_build, gather_stamp_source, load_patched, patch, stamp_source, summary
from sparse_ws_phases import flush_before, stamp_buffer_edits, stamped_point

SRC = Path(__file__).resolve().parents[2] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"
NAMES = {0: "math entry", 1: "q loads issued", 2: "q stored", 3: "q staged", 4: "tile 0 ready", 5: "end",
         8: "gather entry", 9: "entries known", 10: "box 0 stored", 11: "tile 0 handed over"}  # fmt: skip
SLOTS = 16
_END = 5

# the math warpgroup's stamps as the phases scripts write them; the gather's from the thread of its first row
STAMPS = stamp_source(SLOTS, "_stamp_m") + gather_stamp_source(SLOTS)


def _patched_source() -> str:
    s = SRC.read_text()
    i16, i20, i24, i28 = (" " * n for n in (16, 20, 24, 28))
    stage = "        b_q0 = gl.load(p_qt + 0 * _BLOCK)\n"
    stored = "        q_smem.index(HALF * 4 + 3).store(b_q3.to(gl.float16))\n"
    call_q = "_stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)\n"
    call_t = "_stage_q(p_ts, " + call_q[len("_stage_q(") :]
    pf = i16 + "_prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)\n" + i16 + "idx = _tile_entries(_live_from(u2 + 1,"
    box0 = i24 + "r0 = _box_step(kv_smem, base + 0, r0, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 0)\n"
    arrive = i24 + "mbarrier.arrive(kv_ready.index(i_st), count=1)\n" + i24 + "i_it += 1\n"
    wait = i24 + "mbarrier.wait(kv_ready.index(i_st), (i_it // _STAGES) & 1)\n"
    edits = [
        ("    @gluon.jit\n    def _list_len(", STAMPS + "    @gluon.jit\n    def _list_len("),
        ("    def _stage_q(q_smem, p_q,", "    def _stage_q(p_ts, q_smem, p_q,"),
        (stage, "        _stamp_m(p_ts, o_qh, 1, HALF)\n" + stage),
        (stored, stored + "        _stamp_m(p_ts, o_qh, 2, HALF)\n"),
        (i24 + "i_x = " + call_q, i24 + "i_x = " + call_t),
        (i16 + "else:\n" + i20 + "i_x = " + call_q,
         i16 + "else:\n" + i20 + "i_x = " + call_t + i16 + "_stamp_m(p_ts, o_h, 3, HALF)\n"),
        ("    @gluon.jit\n    def _math_partition(q_smem,", "    @gluon.jit\n    def _math_partition(p_ts, q_smem,"),
        ("        i_tok_q = -1  # the token whose q is staged\n",
         "        i_tok_q = -1  # the token whose q is staged\n        _stamp_m(p_ts, o_h, 0, HALF)\n"),
        (wait, wait + i24 + "if i_it == 0:\n" + i28 + "_stamp_m(p_ts, o_h, 4, HALF)\n"),
        ("    def _gather_partition(kv_smem,", "    def _gather_partition(p_ts, kv_smem,"),
        ("        i_it = 0\n        # batch-invariant pieces (PIECES)",
         "        i_it = 0\n        _stamp_g(p_ts, o_r, 8)\n        # batch-invariant pieces (PIECES)"),
        (pf, i16 + "_prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)\n" + i16 + "_stamp_g(p_ts, o_r, 9)\n"
             + i16 + "idx = _tile_entries(_live_from(u2 + 1,"),
        (box0, box0 + i24 + "if i_it == 0:\n" + i28 + "_stamp_g(p_ts, o_r, 10)\n"),
        (arrive, arrive + i24 + "if i_it == 1:\n" + i28 + "_stamp_g(p_ts, o_r, 11)\n"),
        ("                (_gather_partition, (kv_smem,", "                (_gather_partition, (p_ts, kv_smem,"),
    ]  # fmt: skip
    return patch(s, edits + stamp_buffer_edits(f"        _stamp_m(p_ts, o_h, {_END}, HALF)\n"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points", nargs="*", default=["csa:8", "csa:64", "csa:128", "hca:128"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--clean", action="store_true")
    args = ap.parse_args()
    mod = load_patched("sparse_decode_ws_start", _patched_source())
    if args.check:
        return check_build(mod)
    os.environ["WAVEMLA_LAUNCH"] = "triton"  # every call launches the copy with this call's stamp buffer
    before = flush_before(args.clean)
    for point in args.points:
        rows = stamped_point(mod, point, max(NAMES) + 1, before, slots=SLOTS)
        print(f"  {point}: {len(rows[0])} programs; {summary(rows, NAMES, _END, digits=2)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
