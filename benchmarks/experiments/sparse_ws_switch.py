"""Where a warp-specialized sparse program's switch from one token segment to the next goes: a copy of
``kernels/sparse_decode_ws.py`` with ``%globaltimer`` stamps (ns) for a program's first segment and for its later
ones (the stamps of a third segment overwrite the second's), in the first math warpgroup and in the gather.

Math warpgroup (first), per segment: its start; q's loads issued; q stored (the loads arrived and written to shared
memory); q staged (after the exchange with the other math warpgroup); the first tile ready; the last tile's math
done; the row sums crossed; the segment's output or partial stored (its end).
Gather warpgroup, per segment: its start; the first tiles' index entries known (after the second tile's L2
prefetch, or in a build that asks for the first three tiles' entries at once, once the first tile's row addresses are
computed); the first tile's first box stored; the first tile handed over; the last tile handed over.

Points whose programs hold two segments show the switch: ``csa:256`` and ``hca:256`` (two whole tokens a program),
``csa:133`` (the spread: a leftover token's piece, then whole tokens), ``csa-s2:96``. Prints, per point and segment,
the medians over the programs that ran it and over calls (µs from the kernel's first start), then the switch's
intervals (medians of per-program differences).

    PYTHONPATH=src:benchmarks/experiments python3 benchmarks/experiments/sparse_ws_switch.py csa:256 hca:256 [--check]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dense_ws_phases import check_build, gather_stamp_source, load_patched, patch, stamp_source
from sparse_ws_phases import flush_before, stamped_point

SRC = Path(__file__).resolve().parents[2] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"
SEG = 24  # stamps a segment: the first segment's at 0.., the later ones' at 24..
SLOTS = 2 * SEG
MATH = {0: "start", 1: "q loads issued", 2: "q stored", 3: "q staged", 4: "tile 0 ready", 5: "last tile done",
        6: "row sums", 13: "out boxes stored", 14: "out copies issued", 15: "out copies read", 7: "end"}  # fmt: skip
GATHER = {
    8: "g start",
    9: "g entries known",
    10: "g box 0 stored",
    11: "g tile 0 handed",
    16: "g tile 1 handed",
    12: "g last handed",
}
# the switch's intervals: (name, (segment, stamp) from, (segment, stamp) to)
SWITCH = [
    ("last math -> row sums", (0, 5), (0, 6)),
    ("row sums -> out boxes stored", (0, 6), (0, 13)),
    ("out boxes stored -> copies issued", (0, 13), (0, 14)),
    ("copies issued -> copies read", (0, 14), (0, 15)),
    ("copies read -> end", (0, 15), (0, 7)),
    ("out stored -> q loads issued", (0, 7), (1, 1)),
    ("q loads -> q stored", (1, 1), (1, 2)),
    ("q stored -> q staged", (1, 2), (1, 3)),
    ("q staged -> tile 0 ready", (1, 3), (1, 4)),
    ("last math -> next tile 0 ready", (0, 5), (1, 4)),
    ("g last handed -> g next start", (0, 12), (1, 8)),
    ("g start -> entries known", (1, 8), (1, 9)),
    ("g entries -> box 0 stored", (1, 9), (1, 10)),
    ("g box 0 -> tile 0 handed", (1, 10), (1, 11)),
    ("g last handed (seg 0) -> g tile 0 handed (seg 1)", (0, 12), (1, 11)),
]

STAMPS = (
    stamp_source(SLOTS, "_stamp_m")
    + gather_stamp_source(SLOTS)
    + """
    @gluon.jit
    def _sleep(o, NS: gl.constexpr):
        return gl.inline_asm_elementwise(f"nanosleep.u32 {NS};\\n mov.u32 $0, 0;", "=r,r", [o], dtype=gl.int32,
                                         is_pure=False, pack=1)

"""
)


def _patched_source(sleep_ns: int = 0) -> str:
    """The stamped copy; ``sleep_ns`` > 0: the gather, once it has handed over a later segment's first tile, sleeps
    that long before the next (a probe: does its work slow the math warpgroups' switch?)."""
    s = SRC.read_text()
    i16 = " " * 16
    i20 = " " * 20
    i24 = " " * 24
    stage_call = "_stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)\n"
    store_call = "_store_q(q_smem, b_q0, b_q1, b_q2, b_q3, x_bar, i_x, HALF)\n"
    gather_seg = i16 + "_, _, i_b, i_s, t_lo, t_hi = segment(i_seg, unit_lo, unit_hi, g_units, n_tiles, S_Q)\n"
    math_seg = i16 + "seg_lo, i_tok, i_b, i_s, t_lo, t_hi = segment(i_seg, unit_lo, unit_hi, seg_units, n_tiles, S_Q)\n"
    pf = i16 + "_prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)\n" + i16 + "idx = _tile_entries(_live_from(u2 + 1,"
    # the build that asks for the first three tiles' entries at once: "entries known" once the first tile's row
    # addresses are computed from them
    rows1 = i16 + "p_r, p_s, ok = _tile_rows(u1, idx1, n_tiles_main, caches, PAGE, PAGE_X, HAS_EXTRA)\n"
    box0 = i24 + "r0 = _box_step(kv_smem, base + 0, r0, s_lo, s_hi, p_r, ok, o_w4, o_w8, ld8, 0)\n"
    g_arrive = i24 + "mbarrier.arrive(kv_ready.index(i_st), count=1)\n" + i24 + "i_it += 1\n"
    SLEEP = ""
    if sleep_ns:
        SLEEP = i24 + "if (offg > 0) & (i_it == i_it0 + 1):\n" + i24 + "    _sleep(o_r, " + str(sleep_ns) + ")\n"
    m_wait = i24 + "mbarrier.wait(kv_ready.index(i_st), (i_it // _STAGES) & 1)\n"
    m_done = i24 + "mbarrier.arrive(kv_empty.index(i_st), count=1)\n" + i24 + "i_it += 1\n"
    sums = i16 + "b_l, i_x = _row_sums(b_l, x_smem, x_bar, i_x, HALF)\n"
    fence = "        fence_async_shared()\n        _warps_barrier()\n"
    tma0 = "        _tma_store(desc, [row, HALF * 256 + 0 * _BLOCK], b0)\n"
    tma3 = "        _tma_store(desc, [row, HALF * 256 + 3 * _BLOCK], b3)\n"

    def stamp_out(k: int) -> str:  # a stamp in _out_by_tma, whose rows are ``row ..``
        rows = "row + gl.arange(0, 64, gl.BlockedLayout([1], [32], [4], [0]))"
        return f"        _stamp_m(p_ts, {rows}, off + {k}, HALF)\n"

    edits = [
        ("    @gluon.jit\n    def _list_len(", STAMPS + "    @gluon.jit\n    def _list_len("),
        # the whole token's output
        ("    def _out_by_tma(q_smem, desc,", "    def _out_by_tma(p_ts, off, q_smem, desc,"),
        (fence + tma0, fence + stamp_out(13) + tma0),
        (tma3 + "        tma.store_wait(0)\n", tma3 + stamp_out(14) + "        tma.store_wait(0)\n" + stamp_out(15)),
        (i20 + "_out_by_tma(q_smem, o_desc,", i20 + "_out_by_tma(p_ts, off, q_smem, o_desc,"),
        (i24 + "_out_by_tma(q_smem, w_desc,", i24 + "_out_by_tma(p_ts, off, q_smem, w_desc,"),
        # q staging
        ("    def _stage_q(q_smem, p_q,", "    def _stage_q(p_ts, off, q_smem, p_q,"),
        ("        b_q0 = gl.load(p_qt + 0 * _BLOCK)\n",
         "        _stamp_m(p_ts, o_qh, off + 1, HALF)\n        b_q0 = gl.load(p_qt + 0 * _BLOCK)\n"),
        ("            else:\n" + i20 + "i_x = " + stage_call,
         "            else:\n" + i20 + "i_x = _stage_q(p_ts, off, " + stage_call[len("_stage_q("):]
         + i20 + "_stamp_m(p_ts, o_h, off + 3, HALF)\n")
         if "i_x = " + stage_call in s.replace(i24 + "i_x = " + stage_call, "") else
         # the build that loads q a segment ahead: "q loads issued" is when its staging starts
         ("            else:\n" + i20 + "i_x = " + store_call,
          "            else:\n" + i20 + "_stamp_m(p_ts, o_h, off + 1, HALF)\n" + i20 + "i_x = " + store_call
          + i20 + "_stamp_m(p_ts, o_h, off + 3, HALF)\n"),
        (i24 + "i_x = " + stage_call, i24 + "i_x = _stage_q(p_ts, off, " + stage_call[len("_stage_q("):]),
        # the gather
        ("    def _gather_partition(kv_smem,", "    def _gather_partition(p_ts, kv_smem,"),
        ("        i_it = 0\n        # batch-invariant pieces (PIECES)",
         "        i_it = 0\n        i_sg = 0\n        # batch-invariant pieces (PIECES)"),
        (gather_seg, gather_seg + i16 + "offg = gl.minimum(i_sg, 1) * " + str(SEG) + "\n" + i16 + "i_it0 = i_it\n"
         + i16 + "_stamp_g(p_ts, o_r, offg + 8)\n"),
        (pf, i16 + "_prefetch_l2(p_r2, p_s2, ok2, _ROW_BYTES)\n" + i16 + "_stamp_g(p_ts, o_r, offg + 9)\n" + i16
         + "idx = _tile_entries(_live_from(u2 + 1,")
         if pf in s else (rows1, rows1 + i16 + "_stamp_g(p_ts, o_r, offg + 9)\n"),
        (box0, box0 + i24 + "if i_it == i_it0:\n" + i24 + "    _stamp_g(p_ts, o_r, offg + 10)\n"),
        (g_arrive, g_arrive + i24 + "if i_it == i_it0 + 1:\n" + i24 + "    _stamp_g(p_ts, o_r, offg + 11)\n"
         + i24 + "if i_it == i_it0 + 2:\n" + i24 + "    _stamp_g(p_ts, o_r, offg + 16)\n"
         + i24 + "_stamp_g(p_ts, o_r, offg + 12)\n" + SLEEP),
        ("\n    @gluon.jit\n    def _math_partition(q_smem,",
         i16 + "i_sg += 1\n\n    @gluon.jit\n    def _math_partition(p_ts, q_smem,"),
        ("                (_gather_partition, (kv_smem,", "                (_gather_partition, (p_ts, kv_smem,"),
        # the math warpgroup
        ("        i_tok_q = -1  # the token whose q is staged\n",
         "        i_tok_q = -1  # the token whose q is staged\n        i_sg = 0\n"),
        (math_seg, math_seg + i16 + "off = gl.minimum(i_sg, 1) * " + str(SEG) + "\n" + i16 + "i_it0 = i_it\n"
         + i16 + "_stamp_m(p_ts, o_h, off + 0, HALF)\n"),
        (m_wait, m_wait + i24 + "if i_it == i_it0:\n" + i24 + "    _stamp_m(p_ts, o_h, off + 4, HALF)\n"),
        (m_done, m_done + i24 + "_stamp_m(p_ts, o_h, off + 5, HALF)\n"),
        (sums, sums + i16 + "_stamp_m(p_ts, o_h, off + 6, HALF)\n"),
        ("    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_q,",
         i16 + "_stamp_m(p_ts, o_h, off + 7, HALF)\n" + i16 + "i_sg += 1\n"
         "\n    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_ts, p_q,"),
        ("                (_math_partition, (q_smem,", "                (_math_partition, (p_ts, q_smem,"),
        ("        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        q,",
         "        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        TS[0],\n        q,"),
        ('    types = {"p_q": "*bf16",', '    types = {"p_ts": "*i64", "p_q": "*bf16",'),
    ]  # fmt: skip
    # "q stored": in _stage_q only (a build that loads q a segment ahead has the same store in _store_q)
    stored = "        q_smem.index(HALF * 4 + 3).store(b_q3.to(gl.float16))\n"
    at = s.index(stored, s.index("    def _stage_q("))
    s = s[:at] + stored + "        _stamp_m(p_ts, o_qh, off + 2, HALF)\n" + s[at + len(stored) :]
    return patch(s, edits)


def _report(point: str, rows: list) -> None:
    import torch

    t = torch.cat(rows)  # [programs x calls, SLOTS], µs from each call's first start; unwritten: far below zero

    def col(seg: int, k: int):
        return t[:, seg * SEG + k]

    two = col(1, 0) > -1e6  # programs that ran a second segment
    print(f"  {point}: {t.shape[0] // len(rows)} programs, {int(two.sum()) // len(rows)} with a second segment")
    for seg in (0, 1):
        sel = two if seg else torch.ones_like(two)
        vals = []
        for k, name in {**MATH, **GATHER}.items():
            c = col(seg, k)[sel]
            c = c[c > -1e6]
            if len(c):
                vals.append(f"{name} {statistics.median(c.tolist()):.2f}")
        print(f"    segment {seg}: " + ", ".join(vals))
    if not bool(two.any()):
        return
    for name, a, b in SWITCH:
        d = (col(*b) - col(*a))[two]
        ok = (col(*a)[two] > -1e6) & (col(*b)[two] > -1e6)
        d = d[ok]
        if len(d):
            print(f"    {name}: {statistics.median(d.tolist()):.2f} µs (p20 {d.quantile(0.2).item():.2f}, "
                  f"p80 {d.quantile(0.8).item():.2f})")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points", nargs="*", default=["csa:256", "hca:256", "csa:133"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--clean", action="store_true")
    ap.add_argument("--gather-sleep", type=int, default=0, metavar="NS")
    args = ap.parse_args()
    mod = load_patched("sparse_decode_ws_switch", _patched_source(args.gather_sleep))
    if args.check:
        return check_build(mod)
    os.environ["WAVEMLA_LAUNCH"] = "triton"  # every call launches the copy with this call's stamp buffer
    before = flush_before(args.clean)
    for point in args.points:
        rows = stamped_point(mod, point, SLOTS, before, slots=SLOTS)
        _report(point, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
