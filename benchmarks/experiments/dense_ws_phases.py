"""Where a dense warp-specialized program's time goes: a copy of ``kernels/dense_decode_ws.py`` with ``%globaltimer``
stamps (ns) written by the first math warpgroup of every program: its start, the first segment's q in shared memory,
the first tile in shared memory, the last tile's arrival, the end of its last tile's math, and its end (after the
epilogue's stores). Calls go through the public API with the copy swapped in; the stamps are read after one call
behind a 256 MB write (the benchmarks' flush). Prints, per shape, the medians over programs (µs from the kernel's
first start) and the spread of the ends.

    PYTHONPATH=src python3 benchmarks/experiments/dense_ws_phases.py [--check]   (--check: build for sm_90 only)
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "wavemla" / "kernels" / "dense_decode_ws.py"
NAMES = ["start", "q ready", "tile 0 ready", "last tile ready", "last tile done", "end"]


def stamp_source(slots: int = 8, name: str = "_stamp") -> str:
    """A Gluon helper ``name(p_ts, o_m, K, HALF)`` for the patched sources: the first math warpgroup (``HALF`` 0) writes
    ``%globaltimer`` (ns) to stamp ``K`` (a constant or a runtime index) of its program's ``slots`` (one thread, of the
    row ``o_m % 64 == 0``)."""
    return f"""
    @gluon.jit
    def {name}(p_ts, o_m, K, HALF: gl.constexpr):
        if HALF == 0:
            t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [o_m], dtype=gl.int64, is_pure=False,
                                          pack=1)
            gl.store(p_ts + gl.program_id(0) * {slots} + K + o_m * 0, t, mask=(o_m % 64) == 0)

"""


def gather_stamp_source(slots: int, name: str = "_stamp_g") -> str:
    """The same for a partition without halves (the sparse kernel's gather): ``name(p_ts, o, K)`` writes stamp ``K``
    from the threads of the row ``o == 0``."""
    return f"""
    @gluon.jit
    def {name}(p_ts, o, K):
        t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [o], dtype=gl.int64, is_pure=False, pack=1)
        gl.store(p_ts + gl.program_id(0) * {slots} + K + o * 0, t, mask=o == 0)

"""


STAMP = stamp_source()


def _patched_source() -> str:
    s = SRC.read_text()
    edits = [
        (
            "    @gluon.jit\n    def _math_partition(o_desc, w_desc, q_smem,",
            STAMP + "    @gluon.jit\n    def _math_partition(p_ts, o_desc, w_desc, q_smem,",
        ),
        (
            "        o_zr = gl.arange(0, _BLOCK, layout=gl.SliceLayout(1, z_layout))\n",
            "        o_zr = gl.arange(0, _BLOCK, layout=gl.SliceLayout(1, z_layout))\n"
            "        _stamp(p_ts, o_m, 0, HALF)\n",
        ),
        (
            "            mbarrier.wait(q_ready, i_seg & 1)\n",
            "            mbarrier.wait(q_ready, i_seg & 1)\n"
            "            if i_seg == 0:\n                _stamp(p_ts, o_m, 1, HALF)\n",
        ),
        (
            "                mbarrier.wait(kv_ready.index(i_st), (i_it // N_STAGES) & 1)\n",
            "                mbarrier.wait(kv_ready.index(i_st), (i_it // N_STAGES) & 1)\n"
            "                if i_it == 0:\n                    _stamp(p_ts, o_m, 2, HALF)\n"
            "                _stamp(p_ts, o_m, 3, HALF)\n",
        ),
        (
            "                mbarrier.arrive(kv_empty.index(i_st), count=1)\n                i_it += 1\n",
            "                mbarrier.arrive(kv_empty.index(i_st), count=1)\n                i_it += 1\n"
            "                _stamp(p_ts, o_m, 4, HALF)\n",
        ),
        (
            "    @gluon.jit\n    def _dense_mla_decode_ws_kernel(q_desc,",
            "        _stamp(p_ts, o_m, 5, HALF)\n\n    @gluon.jit\n    def _dense_mla_decode_ws_kernel(p_ts, q_desc,",
        ),
        (
            "                (_math_partition, (o_desc, w_desc, q_smem,",
            "                (_math_partition, (p_ts, o_desc, w_desc, q_smem,",
        ),
        (
            "        _dense_mla_decode_ws_kernel,\n        (num_parts * num_rb,),\n        q_desc,",
            "        _dense_mla_decode_ws_kernel,\n        (num_parts * num_rb,),\n        TS[0],\n        q_desc,",
        ),
        ('    types = {"q_desc": desc,', '    types = {"p_ts": "*i64", "q_desc": desc,'),
    ]
    return patch(s, edits)


def patch(s: str, edits: list[tuple[str, str]]) -> str:
    """``s`` with each ``(old, new)`` of ``edits`` replaced (once; twice for the two math partitions' argument lists)
    and a stamp buffer slot ``TS`` appended for the launcher."""
    for old, new in edits:
        n = s.count(old)
        if n != (2 if old.startswith("                (_math_partition") else 1):
            raise SystemExit(f"patch point found {n} times: {old[:60]!r}")
        s = s.replace(old, new)
    return s + "\nTS = [None]\n"


def load_patched(name: str, text: str):
    """``text`` imported as module ``name`` from a temporary file."""
    tmp = Path(tempfile.mkdtemp()) / f"{name}.py"
    tmp.write_text(text)
    spec = importlib.util.spec_from_file_location(name, tmp)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def check_build(mod) -> int:
    """``--check``: build the stamped copy for sm_90 (no GPU) and print its shared memory and timer reads."""
    k = mod.compile_sm90()
    print("built for sm_90:", k.metadata.shared, "bytes of shared memory,",
          k.asm["ptx"].count("%globaltimer"), "timer reads")  # fmt: skip
    return 0


def stamped_calls(mod, call, n: int, before=None, reps: int = 5, slots: int = 8) -> list:
    """``reps`` calls (after one more, dropped), each behind ``before()`` (the flush) with a fresh stamp buffer of
    ``slots`` stamps a program in ``mod.TS``: per call, the first ``n`` stamps of every program that ran, in µs from the
    call's first start (a stamp the program did not write: far below zero)."""
    import torch

    rows = []
    for rep in range(reps + 1):
        ts = torch.zeros(1024 * slots, dtype=torch.int64, device="cuda")
        mod.TS[0] = ts
        if before is not None:
            before()
        call()
        torch.cuda.synchronize()
        t = ts.view(-1, slots)[:, :n].cpu()
        t = t[t[:, 0] > 0]
        if rep:
            rows.append((t - t[:, 0].min()).double() / 1e3)
    return rows


def summary(rows: list, names: list[str] | dict[int, str], end: int, digits: int = 1) -> str:
    """The medians over programs and calls of each stamp (``names``: of stamps 0, 1, .., or by stamp index), over the
    programs that wrote it; the last start and the kernel span (median over calls)."""
    import torch

    t = torch.cat(rows)
    named = names.items() if isinstance(names, dict) else enumerate(names)
    cols = [(name, t[:, i][t[:, i] > -1e6]) for i, name in named]  # unwritten stamps: far below zero after the shift
    span = statistics.median([float(r[:, end].max()) for r in rows])
    late = statistics.median([float(r[:, 0].max()) for r in rows])
    return (", ".join(f"{name} {statistics.median(col.tolist()):.{digits}f}" for name, col in cols)
            + f" | last start {late:.1f}, kernel span {span:.1f} µs")  # fmt: skip


def _load():
    return load_patched("dense_decode_ws_phases", _patched_source())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    mod = _load()
    if args.check:
        return check_build(mod)
    os.environ["WAVEMLA_LAUNCH"] = "triton"  # every call launches the copy with this call's stamp buffer
    import torch

    import wavemla
    import wavemla.kernels.dense_decode_ws as ws
    from wavemla.testing import make_dense_decode_inputs

    ws.dense_decode_split_ws = mod.dense_decode_split_ws
    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    for h, b, s_k in ((64, 8, 4096), (64, 32, 4096), (64, 64, 4096), (64, 128, 4096), (64, 32, 16384)):
        inputs = make_dense_decode_inputs(lengths=[s_k] * b, h_q=h, page=64, device="cuda")
        meta, _ = wavemla.get_mla_metadata()
        call = functools.partial(wavemla.dense_mla_decode, **inputs, metadata=meta)
        rows = stamped_calls(mod, call, 6, flush.zero_, reps=4)
        print(f"h={h} b={b} s_k={s_k}: {summary(rows, NAMES, 5)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
