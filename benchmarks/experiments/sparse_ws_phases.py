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
import importlib.util
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"
NAMES = ["start", "q ready", "tile 0 ready", "last tile ready", "last tile done", "last q ready", "end"]
_END = 6

STAMP = """
    @gluon.jit
    def _stamp(p_ts, o_m, K: gl.constexpr, HALF: gl.constexpr):
        if HALF == 0:
            t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [o_m], dtype=gl.int64, is_pure=False,
                                          pack=1)
            gl.store(p_ts + gl.program_id(0) * 8 + K + o_m * 0, t, mask=(o_m % 64) == 0)

"""
_STAGE_Q = (
    "            else:\n"
    "                i_x = _stage_q(q_smem, p_q, i_b, i_s, stride_qb, stride_qs, o_qh, o_qc, x_bar, i_x, HALF)\n"
)
_WAIT = "                    mbarrier.wait(kv_ready.index(i_st), (i_it // _STAGES) & 1)\n"
_DONE = "                    mbarrier.arrive(kv_empty.index(i_st), count=1)\n                    i_it += 1\n"


def _patched_source() -> str:
    s = SRC.read_text()
    edits = [
        ("    @gluon.jit\n    def _math_partition(q_smem,",
         STAMP + "    @gluon.jit\n    def _math_partition(p_ts, q_smem,"),
        ("        i_tok_q = -1  # the token whose q is staged\n",
         "        i_tok_q = -1  # the token whose q is staged\n        _stamp(p_ts, o_h, 0, HALF)\n"),
        (_STAGE_Q, _STAGE_Q + "                if i_it == 0:\n                    _stamp(p_ts, o_h, 1, HALF)\n"
                              "                _stamp(p_ts, o_h, 5, HALF)\n"),
        (_WAIT, _WAIT + "                    if i_it == 0:\n                        _stamp(p_ts, o_h, 2, HALF)\n"
                        "                    _stamp(p_ts, o_h, 3, HALF)\n"),
        (_DONE, _DONE + "                    _stamp(p_ts, o_h, 4, HALF)\n"),
        ("    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_q,",
         f"        _stamp(p_ts, o_h, {_END}, HALF)\n\n    @gluon.jit\n    def _sparse_mla_decode_ws_kernel(p_ts, p_q,"),
        ("                (_math_partition, (q_smem,", "                (_math_partition, (p_ts, q_smem,"),
        ("        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        q,",
         "        _sparse_mla_decode_ws_kernel,\n        (num_parts * num_hb,),\n        TS[0],\n        q,"),
        ('    types = {"p_q": "*bf16",', '    types = {"p_ts": "*i64", "p_q": "*bf16",'),
    ]  # fmt: skip
    for old, new in edits:
        n = s.count(old)
        if n != (2 if old.startswith("                (_math_partition") else 1):
            raise SystemExit(f"patch point found {n} times: {old[:60]!r}")
        s = s.replace(old, new)
    return s + "\nTS = [None]\n"


def _load():
    tmp = Path(tempfile.mkdtemp()) / "sparse_decode_ws_phases.py"
    tmp.write_text(_patched_source())
    spec = importlib.util.spec_from_file_location("sparse_decode_ws_phases", tmp)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points", nargs="*", default=["csa:8", "csa:32", "csa:64", "csa:128"])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--clean", action="store_true")
    args = ap.parse_args()
    mod = _load()
    if args.check:
        k = mod.compile_sm90()
        print("built for sm_90:", k.metadata.shared, "bytes of shared memory,",
              k.asm["ptx"].count("%globaltimer"), "timer reads")  # fmt: skip
        return 0
    os.environ["WAVEMLA_LAUNCH"] = "triton"  # every call launches the copy with this call's stamp buffer
    import torch
    from merge_ab import decode_point
    from sparse_prof import profile_point

    import wavemla
    import wavemla.kernels.sparse_decode_ws as ws

    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    clean = torch.empty(64 << 20, dtype=torch.float32, device="cuda") if args.clean else None
    for point in args.points:
        if not args.clean:
            profile_point(point, 15)  # the package's kernel: graph time and each kernel's time
        m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?:(\d+)", point)
        assert m is not None
        mode, s_q, h, b = m.group(1), int(m.group(2) or 1), int(m.group(3) or 64), int(m.group(4))
        kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=h)
        shipped = ws.sparse_decode_split_ws
        ws.sparse_decode_split_ws = mod.sparse_decode_split_ws
        try:
            meta, _ = wavemla.get_mla_metadata()
            rows = []
            for rep in range(6):
                ts = torch.zeros(1024 * 8, dtype=torch.int64, device="cuda")
                mod.TS[0] = ts
                flush.zero_()
                if clean is not None:
                    clean.sum()
                wavemla.sparse_mla_decode(**kw, metadata=meta)
                torch.cuda.synchronize()
                t = ts.view(-1, 8)[:, :7].cpu()
                t = t[t[:, 0] > 0]
                if rep:
                    rows.append((t - t[:, 0].min()).double() / 1e3)
        finally:
            ws.sparse_decode_split_ws = shipped
        t = torch.cat(rows)
        med = [statistics.median(t[:, i].tolist()) for i in range(7)]
        span = statistics.median([float(r[:, _END].max()) for r in rows])
        late = statistics.median([float(r[:, 0].max()) for r in rows])
        phases = ", ".join(f"{n} {x:.1f}" for n, x in zip(NAMES, med, strict=True))
        print(f"  {point}: {len(rows[0])} programs; {phases} | last start {late:.1f}, kernel span {span:.1f} µs",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
