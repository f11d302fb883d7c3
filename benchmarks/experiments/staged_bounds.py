"""What bounds the 16-head sparse decode (the Triton split kernel's staged 16x32 FP8 tiles, two programs an SM on the
H200): the package's kernel against copies of it with one part of the work taken out, as ``ws_bounds.py`` does for
the warp-specialized kernel.

At CSA h=16 b=256 the H200 takes 79.4 µs, 31.6% of the roofline (``2026-12-03-h200-sparse-decode-curve-h16-
staged.json``): a program runs a 32-row tile in about 4 µs
while its 18.7 KB of rows take 0.6 µs at an SM's share of copy and its MMAs (``mma.sync``, 16 rows of heads) far less.
The copies, written at run time into ``variants/sparse_decode_<name>_v.py`` (git-ignored) by text replacements that must
each match once, and swapped in for the package's split launcher behind the public call:

- ``control``: the kernel unchanged (checked against the fp64 reference);
- ``noload``: no row bytes, scale words or rope from memory in the staged tile loop (each made from its own address
  instead, so the decode still runs on values that change every tile; the index entries are still loaded). Triton's
  pipeliner then has no load to put through cp.async, so this also removes the staging in shared memory;
- ``nodot``: no ``tl.dot`` in the staged tile loop: each is replaced by row and column sums of its operands (cheap
  reductions that keep the decode and the softmax alive, not free: read it as an upper bound on what the MMAs cost).
  The raw loads then no longer feed a dot, so Triton may not stage them through cp.async either.

Outputs of ``noload`` and ``nodot`` are wrong by construction and not checked.

    PYTHONPATH=src python3 benchmarks/experiments/staged_bounds.py --build     # compile each for sm_90 (CPU)
    PYTHONPATH=src python3 benchmarks/experiments/staged_bounds.py --points csa:128 csa:256 hca:256 [--json F]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # this directory: ws_bounds' variant helpers and runner
from ws_bounds import _once, load_module, run_cli, time_variants

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "src" / "wavemla" / "kernels" / "sparse_decode.py"
VARIANTS = ("control", "noload", "nodot")

_SCALES = "b_sc = tl.load((p_page + PAGE * 576 + b_tok * 8).to(tl.pointer_type(tl.int64)), mask=m_n, other=0)"
_SCALES_FREE = "b_sc = tl.where(m_n, ((p_page + b_tok * 8).to(tl.int64) & 1) | 0x7E7E7E7E7E7E7E, 0)"
_ROW = re.compile(
    r"b_x(\d) = tl\.load\(p_row\[:, None\] \+ \((\d) \* 64 \+ o_e\[None, :\]\), mask=m_n\[:, None\], other=0\)"
)
_ROW_FREE = (
    r"b_x\1 = tl.where(m_n[:, None], ((p_row[:, None] + (\2 * 64 + o_e[None, :])).to(tl.int64) & 0x3C).to(tl.uint8), 0)"
)
_ROPE = (
    "b_r = tl.load((p_row + 448).to(tl.pointer_type(tl.bfloat16))[:, None] + o_e[None, :], mask=m_n[:, None],\n"
    "                          other=0.0).to(tl.float16)  # fmt: skip"
)
_ROPE_FREE = (
    "b_r = tl.where(m_n[:, None], (((p_row + 448)[:, None] + o_e[None, :]).to(tl.int64) & 0x3F00).to(tl.int16)"
    ".to(tl.bfloat16, bitcast=True), 0.0).to(tl.float16)"
)
_QK = "return b_e, tl.dot(b_q, tl.trans(b_e)) * (b_c * k_f)[None, :]"
_QK_FREE = (
    "return b_e, (tl.sum(b_q.to(tl.float32), 1)[:, None] + tl.sum(b_e.to(tl.float32), 1)[None, :]) "
    "* (b_c * k_f)[None, :]"
)
_QK_ROPE = "tl.dot(b_qr, tl.trans(b_r)) * qk_scale"
_QK_ROPE_FREE = "(tl.sum(b_qr.to(tl.float32), 1)[:, None] + tl.sum(b_r.to(tl.float32), 1)[None, :]) * qk_scale"
_PV = re.compile(
    r"b_a(\d) = tl\.dot\(\(b_p \* \(b_c(\d) \* 256\.0\)\[None, :\]\)\.to\(tl\.float16\), b_e\d, b_a\d \* b_alpha\)"
)
_PV_FREE = r"b_a\1 = b_a\1 * b_alpha + tl.sum(b_p * (b_c\2 * 256.0)[None, :], 1)[:, None]"
_PV_ROPE = "b_ar = tl.dot(b_p.to(tl.float16), b_r, b_ar * b_alpha)"
_PV_ROPE_FREE = "b_ar = b_ar * b_alpha + tl.sum(b_p, 1)[:, None]"


def _subn(text: str, pattern: re.Pattern[str], repl: str, count: int) -> str:
    text, n = pattern.subn(repl, text)
    if n != count:
        raise SystemExit(f"the kernel source changed: {pattern.pattern[:60]!r} matched {n} times, not {count}")
    return text


def variant_source(name: str) -> str:
    if name not in VARIANTS:
        raise SystemExit(f"variant {name!r}: expected one of {VARIANTS}")
    text = SOURCE.read_text()
    if name == "noload":
        text = _once(text, _SCALES, _SCALES_FREE)
        text = _subn(text, _ROW, _ROW_FREE, 7)
        text = _once(text, _ROPE, _ROPE_FREE)
    if name == "nodot":
        text = _once(text, _QK, _QK_FREE)
        text = _once(text, _QK_ROPE, _QK_ROPE_FREE)
        text = _subn(text, _PV, _PV_FREE, 7)
        text = _once(text, _PV_ROPE, _PV_ROPE_FREE)
    return text


def load_variant(name: str) -> ModuleType:
    return load_module(HERE / "variants" / f"sparse_decode_{name}_v.py", variant_source(name))


def build() -> None:
    """Write every variant and compile its staged 16x32x4x3 FP8 tile for sm_90 without a GPU."""
    from wavemla.kernels.sparse_decode import WORKLOAD_INTS
    from wavemla.resources import _sparse_decode_spec, compile_for_target

    spec = _sparse_decode_spec(16, 32, 3, True, "bf16", 90)
    for name in VARIANTS:
        k = compile_for_target(
            load_variant(name)._sparse_mla_decode_kernel, arch=90, num_warps=4, num_stages=3,
            pointers=spec["pointers"], ints=spec["ints"], constexprs=spec["constexprs"], fp32=("qk_scale",),
            unspecialized=WORKLOAD_INTS,
        )  # fmt: skip
        ptx = k.asm["ptx"]
        cp_async = ptx.count("cp.async.cg") + ptx.count("cp.async.ca")
        print(f"{name:8s} shared memory {k.metadata.shared} B, cp.async {cp_async}, mma {ptx.count('mma.sync')}, "
              f"ld.global {ptx.count('ld.global')}")  # fmt: skip


def time_point(point: str, variants: dict[str, ModuleType], reps: int) -> list[dict[str, Any]]:
    """The planner's 16-head plan with the package's split launcher, then each variant's on the same plan (points
    ``MODE:B``; ``-hN`` as ``ws_bounds.py``'s)."""
    import wavemla.kernels.sparse_decode as sd

    return time_variants(
        point, variants, reps, owner=sd, attr="sparse_decode_split", checked=lambda name: name == "control", heads=16
    )


def main() -> None:
    run_cli(["csa:128", "csa:256", "hca:256"], VARIANTS, load_variant, time_point)


if __name__ == "__main__":
    if "--build" in sys.argv:
        build()
    else:
        main()
