"""Where a warp-specialized sparse program's time goes (``dense_ws_phases.py`` for the sparse kernel): a copy of
``kernels/sparse_decode_ws.py`` with ``%globaltimer`` stamps (ns) written by the first math warpgroup of every program:
its start, its first q in shared memory, its first tile in shared memory, the last tile's arrival, the end of its
last tile's math, the last q staged (a program of two token segments stages q twice) and its end (after the
epilogue's stores and merges). Calls go through the public API at the planner's plan with the copy swapped in (launch
replays off); the stamps are read after one call behind a 256 MB write (the benchmarks' flush). Prints, per point,
the medians over programs (µs from the kernel's first start), the last start and the kernel span, beside the
call's CUDA-graph-replayed time and each kernel's device time (``sparse_prof.py``).

    PYTHONPATH=src python3 benchmarks/experiments/sparse_ws_phases.py csa:8 csa:32 csa:128 [--clean] [--check]

``--clean``: the write is followed by a read of another 256 MB, so that L2 holds clean lines when the call starts
(the dirty lines' write-back taken out of the call).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this directory: dense_ws_phases' stamp helpers
from dense_ws_phases import STAMP, check_build, load_patched, patch, stamped_calls, summary

SRC = Path(__file__).resolve().parents[2] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"
NAMES = ["start", "q ready", "tile 0 ready", "last tile ready", "last tile done", "last q ready", "end"]
_END = 6

_STAGE_Q = (
    "                else:\n"
    "                    i_x = _stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)\n"
)
_I20, _I24, _I28 = (" " * n for n in (20, 24, 28))
_WAIT = "                        mbarrier.wait(kv_ready.index(i_st), (i_it // _STAGES) & 1)\n"
_DONE = "                        mbarrier.arrive(kv_empty.index(i_st), count=1)\n                        i_it += 1\n"


def _patched_source() -> str:
    s = SRC.read_text()
    edits = [
        ("    @gluon.jit\n    def _math_partition(q_smem,",
         STAMP + "    @gluon.jit\n    def _math_partition(p_ts, q_smem,"),
        ("        i_tok_q = -1  # the token whose q is staged\n",
         "        i_tok_q = -1  # the token whose q is staged\n        _stamp(p_ts, o_h, 0, HALF)\n"),
        (_STAGE_Q, _STAGE_Q + _I20 + "if i_it == 0:\n" + _I24 + "_stamp(p_ts, o_h, 1, HALF)\n"
         + _I20 + "_stamp(p_ts, o_h, 5, HALF)\n"),
        (_WAIT, _WAIT + _I24 + "if i_it == 0:\n" + _I28 + "_stamp(p_ts, o_h, 2, HALF)\n"
         + _I24 + "_stamp(p_ts, o_h, 3, HALF)\n"),
        (_DONE, _DONE + _I24 + "_stamp(p_ts, o_h, 4, HALF)\n"),
    ]  # fmt: skip
    return patch(s, edits + stamp_buffer_edits(f"        _stamp(p_ts, o_h, {_END}, HALF)\n"))


def stamp_buffer_edits(end_stamp: str) -> list[tuple[str, str]]:
    """The edits that pass the stamp buffer ``p_ts`` from the launcher (``TS[0]``) through the kernel to the math
    partitions, with ``end_stamp`` (the math warpgroup's last stamp) at the end of the math partition's code."""
    return [
        ("    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_q,",
         end_stamp + "\n    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_ts, p_q,"),
        ("                (_math_partition, (q_smem,", "                (_math_partition, (p_ts, q_smem,"),
        ("        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        q,",
         "        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        TS[0],\n        q,"),
        ('    types = {"p_q": "*bf16",', '    types = {"p_ts": "*i64", "p_q": "*bf16",'),
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points", nargs="*", default=["csa:8", "csa:32", "csa:64", "csa:128"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--clean", action="store_true")
    args = ap.parse_args()
    mod = load_patched("sparse_decode_ws_phases", _patched_source())
    if args.check:
        return check_build(mod)
    os.environ["WAVEMLA_LAUNCH"] = "triton"  # every call launches the copy with this call's stamp buffer
    from sparse_prof import profile_point

    before = flush_before(args.clean)
    for point in args.points:
        if not args.clean:
            profile_point(point, 15)  # the package's kernel: graph time and each kernel's time
        rows = stamped_point(mod, point, 7, before)
        print(f"  {point}: {len(rows[0])} programs; {summary(rows, NAMES, _END)}", flush=True)
    return 0


def flush_before(clean: bool) -> Callable[[], None]:
    """What runs before each stamped call: the benchmarks' 256 MB write, and with ``clean`` a read of another 256 MB
    after it (L2 left holding clean lines)."""
    import torch

    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    other = torch.empty(64 << 20, dtype=torch.float32, device="cuda") if clean else None

    def before() -> None:
        flush.zero_()
        if other is not None:
            other.sum()

    return before


def stamped_point(mod, point: str, n: int, before: Callable[[], None], slots: int = 8) -> list:
    """:func:`dense_ws_phases.stamped_calls` of the public call at ``point`` (``MODE[-sN][-hN]:B``, DSV4 FP8 inputs,
    the planner's plan) with the patched copy ``mod``'s launcher swapped in for the package's."""
    from merge_ab import decode_point, parse_point

    import wavemla
    import wavemla.kernels.sparse_decode_ws as ws

    mode, s_q, h, b = parse_point(point)
    kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=h)
    shipped = ws.sparse_decode_split_ws
    ws.sparse_decode_split_ws = mod.sparse_decode_split_ws
    try:
        meta, _ = wavemla.get_mla_metadata()
        call = functools.partial(wavemla.sparse_mla_decode, **kw, metadata=meta)
        return stamped_calls(mod, call, n, before, slots=slots)
    finally:
        ws.sparse_decode_split_ws = shipped


if __name__ == "__main__":
    sys.exit(main())
