"""What bounds the warp-specialized sm_90 sparse kernel's tile: the package's kernel timed against copies of it with
one part of the work taken out.

At CSA h=64 b=256 on the H200 the kernel runs 20 tiles a program in about 113 µs: about 5.6 µs a 64-row tile. Counted
per tile and SM, the rows are 37 KB (1.2 µs at an SM's share of the copy rate), the MMAs 9.4 MFLOP (1.3 µs at the
bf16 peak), the shared-memory traffic about 370 KB (q and K read by both math warpgroups' QKᵀ, V and P by PV, the
gather's fp16 stores: 1.5 µs at 128 B a clock). Each variant below removes one of these, so the time that is left
says which one the tile waits for:

- ``control``: the kernel unchanged, written and loaded the same way (the variants' own overhead: none expected);
- ``noload``: the gather loads no row words or scales and prefetches no rows into L2 (each word is made from its own
  address instead, so the decode still runs on values that change every tile); the index entries are still loaded;
- ``nodecode``: the rows are loaded, the words are stored as they came (no e4m3 conversion or scale multiply);
- ``nomma``: the math warpgroups issue no wgmma (``QKᵀ`` is 1 everywhere, ``PV`` only rescales), with the softmax,
  the exchanges between the warpgroups and the stage handshakes kept;
- ``noload-nomma``: both;
- ``nomath``: the math warpgroups only take each staged tile and give its stage back (no ``QKᵀ``, softmax or ``PV``):
  the time the gather needs to stage the tiles;
- ``noexchange``: each math warpgroup takes its softmax over its own 32 keys and multiplies its own P into both
  halves of ``V`` (the same wgmma), so neither the row maxima nor P cross between the warpgroups within a tile;
- ``oneexchange``: one exchange between the math warpgroups a tile instead of two (exact, not a bound): each
  warpgroup takes its keys' P against its own running maximum and publishes P (fp16) and that maximum together; each
  then rescales both halves' P to the common maximum in registers (the other's read back from shared memory, so it is
  rounded to fp16 twice) and multiplies them into its columns of ``V``, both from registers. P's buffers are double
  buffered by tile, the maxima sit in four more rows of the exchange buffer (224,192 bytes of shared memory). Checked
  against the fp64 reference like ``control``;
- ``regs:MxG``: the kernel with the second math warpgroup's registers ``M`` and the gather's ``G`` a thread (the first
  math warpgroup gets what is left), checked like ``control``;
- ``file:PATH``: the kernel module in ``PATH`` (another build of it, e.g. ``git show REV:src/wavemla/kernels/
  sparse_decode_ws.py > PATH``), checked against the reference like ``control``: an A/B of two builds in one run.

Outputs of the variants are wrong by construction and are not checked; ``control`` is checked against the fp64
reference. The variants are written into ``variants/sparse_decode_ws_<name>_v.py`` (git-ignored) by text replacements
that must each match once.

    PYTHONPATH=src python3 benchmarks/experiments/ws_bounds.py --build [--spills] [NAME ...]  # sm_90, on the CPU
    PYTHONPATH=src python3 benchmarks/experiments/ws_bounds.py --points csa:128 csa:256 hca:128 [--json F]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"

_ROW_LOAD = "raw = gl.load(p_w[:, None] + o_w4[None, :], mask=ok[:, None], other=0)"
_ROW_FREE = "raw = gl.where(ok[:, None], ((p_w[:, None] + o_w4[None, :]).to(gl.int64) & 0x3C3C3C3C).to(gl.int32), 0)"
_ROPE_LOAD = "raw = gl.load(p_w[:, None] + o_w8[None, :], mask=gl.convert_layout(ok, rows8)[:, None], other=0)"
_ROPE_FREE = (
    "raw = gl.where(gl.convert_layout(ok, rows8)[:, None], "
    "((p_w[:, None] + o_w8[None, :]).to(gl.int64) & 0x3F003F00).to(gl.int32), 0)"
)
_SCALE_LOAD = "return gl.load(p_w, mask=ok, other=0), gl.load(p_w + 1, mask=ok, other=0)"
_SCALE_FREE = "s = gl.where(ok, ((p_w.to(gl.int64) & 0x01010101) | 0x7E7E7E7E).to(gl.int32), 0)\n        return s, s"
_PREFETCH_ROWS = (
    "            @p cp.async.bulk.prefetch.L2.global [$1], {NBYTES};\n            @p prefetch.global.L2 [$2];\n"
)
_QK_MMA = "b_s = warpgroup_mma(q_smem.index(c), b_k, b_s, use_acc=c > 0, is_async=True)"
_QK_WAIT = "b_s = warpgroup_mma_wait(num_outstanding=0, deps=(b_s,))"
_PV_CALL = "acc0, acc1, acc2, acc3 = _tile_pv(b_p16,"
_IMPORTS = "from wavemla.kernels.dense_decode_ws import _exchange, _row_sums, _tile_pv, _tile_softmax, _warps_barrier\n"
_PV_FREE = '''
    @gluon.jit
    def _tile_pv_free(b_p16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, v_base, p_smem, p_bar, i_it,
                      HALF: gl.constexpr):  # fmt: skip
        """_tile_pv without its wgmma: the accumulators rescaled, the wait for the other warpgroup's P kept."""
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK, 16])  # fmt: skip
        b_a = gl.convert_layout(b_alpha, gl.SliceLayout(1, o_layout))[:, None]
        mbarrier.wait(p_bar, i_it & 1)
        return acc0 * b_a, acc1 * b_a, acc2 * b_a, acc3 * b_a
'''

VARIANTS = ("control", "noload", "nodecode", "nomma", "noload-nomma", "nomath", "noexchange", "oneexchange")


def _once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise SystemExit(f"the kernel source changed: {old[:70]!r} is there {text.count(old)} times, not once")
    return text.replace(old, new)


_TILE_BODY_START = "                    b_s = gl.zeros([_BLOCK, HK], gl.float32, layout=s_layout)\n"
_TILE_BODY_END = "                                                      p_smem, p_bar, i_it, HALF)  # fmt: skip\n"
_LOCAL = '''
    @gluon.jit
    def _tile_softmax_local(b_s, b_mx, b_l, p_smem, x_smem, p_bar, i_it, HALF: gl.constexpr):
        """_tile_softmax_one's results over this warpgroup's 32 keys alone: no exchange, its own P given as the
        other's as well."""
        b_mx_new = gl.maximum(b_mx, gl.max(b_s, 1))
        b_mx_safe = gl.where(b_mx_new == float("-inf"), 0.0, b_mx_new)
        b_p = gl.exp2(b_s - b_mx_safe[:, None])
        b_alpha = gl.exp2(b_mx - b_mx_safe)
        b_l = b_l * b_alpha + gl.sum(b_p, 1)
        return b_p.to(gl.float16), b_p.to(gl.float16), b_alpha, b_mx_new, b_l
'''


def _nomath(text: str) -> str:
    start = text.index(_TILE_BODY_START)
    end = text.index(_TILE_BODY_END, start) + len(_TILE_BODY_END)
    if text.count(_TILE_BODY_START) != 1 or text.count(_TILE_BODY_END) != 1:
        raise SystemExit("the kernel source changed: the math tile body is not delimited once")
    return text[:start] + text[end:]


def _noexchange(text: str) -> str:
    # this warpgroup's P into both halves of V: oneexchange's PV with its own P as the other's
    text = _once(text, _SOFTMAX_PV, _SOFTMAX_PV_ONE)
    text = _once(text, "= _tile_softmax_one(b_s,", "= _tile_softmax_local(b_s,")
    return _once(text, _IMPORTS, _IMPORTS + _LOCAL + _ONE)


_I20 = " " * 20
_SOFTMAX_PV = (
    f"{_I20}b_p16, b_alpha, b_mx, b_l, i_x = _tile_softmax(b_s, b_mx, b_l, p_smem, x_smem, x_bar, p_bar, i_x,\n"
    f"{' ' * 67}HALF)  # fmt: skip\n"
    f"{_I20}acc0, acc1, acc2, acc3 = _tile_pv(b_p16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, k_base + v0,\n"
    f"{' ' * 54}p_smem, p_bar, i_it, HALF)  # fmt: skip\n"
)
_SOFTMAX_PV_ONE = (
    f"{_I20}b_p16, b_po16, b_alpha, b_mx, b_l = _tile_softmax_one(b_s, b_mx, b_l, p_smem, x_smem, p_bar,\n"
    f"{' ' * 74}i_it, HALF)  # fmt: skip\n"
    f"{_I20}acc0, acc1, acc2, acc3 = _tile_pv_one(b_p16, b_po16, b_alpha, acc0, acc1, acc2, acc3, kv_smem,\n"
    f"{' ' * 58}k_base + v0, HALF)  # fmt: skip\n"
)
_P_ALLOC = "p_smem = gl.allocate_shared_memory(gl.float16, [2, _BLOCK, _BLOCK // 2], p_sl)"
_X_ALLOC = "x_smem = gl.allocate_shared_memory(gl.float32, [4, _BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))"
_ONE = '''
    @gluon.jit
    def _tile_softmax_one(b_s, b_mx, b_l, p_smem, x_smem, p_bar, i_it, HALF: gl.constexpr):
        """One tile's online softmax with one exchange: this warpgroup's P against its own running maximum goes to
        ``p_smem`` (slot ``2·(i_it & 1) + HALF``) and that maximum to ``x_smem`` row ``4 + 2·(i_it & 1) + HALF``, both
        announced by one arrival at ``p_bar``; then both P are rescaled to the common maximum. Returns (this warpgroup's
        P, the other's, the accumulator's rescale factor, the new maxima, this warpgroup's keys' row sums)."""
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK // 2, 16])  # fmt: skip
        rows_l: gl.constexpr = gl.SliceLayout(1, s_layout)
        x_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        par = i_it & 1
        f_own = gl.maximum(b_mx, gl.max(b_s, 1))
        b_p = gl.exp2(b_s - gl.where(f_own == float("-inf"), 0.0, f_own)[:, None])
        p_smem.index(par * 2 + HALF).store(b_p.to(gl.float16))
        x_smem.index(4 + par * 2 + HALF).store(gl.convert_layout(f_own, x_layout))
        _warps_barrier()
        mbarrier.arrive(p_bar, count=1)
        mbarrier.wait(p_bar, par)
        f_oth = gl.convert_layout(x_smem.index(4 + par * 2 + 1 - HALF).load(x_layout), rows_l)
        b_mx_new = gl.maximum(f_own, f_oth)
        b_mx_safe = gl.where(b_mx_new == float("-inf"), 0.0, b_mx_new)
        g_own = gl.where(f_own == float("-inf"), 0.0, gl.exp2(f_own - b_mx_safe))
        g_oth = gl.where(f_oth == float("-inf"), 0.0, gl.exp2(f_oth - b_mx_safe))
        b_alpha = gl.exp2(b_mx - b_mx_safe)
        b_p = b_p * g_own[:, None]
        b_l = b_l * b_alpha + gl.sum(b_p, 1)
        b_po = p_smem.index(par * 2 + 1 - HALF).load(s_layout).to(gl.float32) * g_oth[:, None]
        return b_p.to(gl.float16), b_po.to(gl.float16), b_alpha, b_mx_new, b_l

    @gluon.jit
    def _tile_pv_one(b_p16, b_po16, b_alpha, acc0, acc1, acc2, acc3, kv_smem, v_base, HALF: gl.constexpr):
        """``O += P·V`` for this warpgroup's four value boxes, both warpgroups' P from registers."""
        HK: gl.constexpr = _BLOCK // 2
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _BLOCK, 16])  # fmt: skip
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        k_mine: gl.constexpr = HALF * HK
        k_other: gl.constexpr = (1 - HALF) * HK
        b_a = gl.convert_layout(b_alpha, gl.SliceLayout(1, o_layout))[:, None]
        b_pa = gl.convert_layout(b_p16, p_layout)
        b_pb = gl.convert_layout(b_po16, p_layout)
        acc0 = warpgroup_mma(b_pa, kv_smem.index(v_base + 0).slice(k_mine, HK, dim=0), acc0 * b_a, is_async=True)
        acc1 = warpgroup_mma(b_pa, kv_smem.index(v_base + 1).slice(k_mine, HK, dim=0), acc1 * b_a, is_async=True)
        acc2 = warpgroup_mma(b_pa, kv_smem.index(v_base + 2).slice(k_mine, HK, dim=0), acc2 * b_a, is_async=True)
        acc3 = warpgroup_mma(b_pa, kv_smem.index(v_base + 3).slice(k_mine, HK, dim=0), acc3 * b_a, is_async=True)
        acc0 = warpgroup_mma(b_pb, kv_smem.index(v_base + 0).slice(k_other, HK, dim=0), acc0, is_async=True)
        acc1 = warpgroup_mma(b_pb, kv_smem.index(v_base + 1).slice(k_other, HK, dim=0), acc1, is_async=True)
        acc2 = warpgroup_mma(b_pb, kv_smem.index(v_base + 2).slice(k_other, HK, dim=0), acc2, is_async=True)
        acc3 = warpgroup_mma(b_pb, kv_smem.index(v_base + 3).slice(k_other, HK, dim=0), acc3, is_async=True)
        return warpgroup_mma_wait(num_outstanding=0, deps=(acc0, acc1, acc2, acc3))
'''


def _oneexchange(text: str) -> str:
    text = _once(text, _SOFTMAX_PV, _SOFTMAX_PV_ONE)
    text = _once(text, _P_ALLOC, _P_ALLOC.replace("[2, _BLOCK", "[4, _BLOCK"))
    text = _once(text, _X_ALLOC, _X_ALLOC.replace("[4, _BLOCK]", "[8, _BLOCK]"))
    return _once(text, _IMPORTS, _IMPORTS + _ONE)


def _noload(text: str) -> str:
    text = _once(text, _ROW_LOAD, _ROW_FREE)
    text = _once(text, _ROPE_LOAD, _ROPE_FREE)
    text = _once(text, _SCALE_LOAD, _SCALE_FREE)
    # the rows' L2 prefetch goes; the q rows' (the same helper, 1024 bytes) goes with it
    return _once(text, _PREFETCH_ROWS, "")


def _nodecode(text: str) -> str:
    # boxes 0-6: the raw words (four e4m3 codes each, plus the scale word) stored as the box's 32 words, the
    # conversion left unused (pure: the compiler drops it); box 7 (rope): the words as loaded
    text = _once(
        text,
        "            out = gl.reshape(gl.join(lo, hi), [_BLOCK, _BLOCK // 2])\n",
        "            out = gl.reshape(gl.join(raw, raw + sc[:, None]), [_BLOCK, _BLOCK // 2])\n",
    )
    return _once(text, "        else:\n            out = gl.inline_asm_elementwise(",
                 "        else:\n            out = raw\n            _unused = gl.inline_asm_elementwise(")  # fmt: skip


def _nomma(text: str) -> str:
    text = _once(text, _QK_MMA, "b_s = b_s + 0.0")
    text = _once(text, _QK_WAIT, "b_s = b_s + 1.0")
    text = _once(text, _PV_CALL, "acc0, acc1, acc2, acc3 = _tile_pv_free(b_p16,")
    return _once(text, _IMPORTS, _IMPORTS + _PV_FREE)


def variant_source(name: str) -> str:
    if name.startswith("file:"):  # another build of the kernel, as a file (e.g. a commit's, from `git show`)
        return Path(name[5:]).read_text()
    text = SOURCE.read_text()
    m = re.fullmatch(r"regs:(\d+)x(\d+)", name)
    if m:  # the second math warpgroup's and the gather's registers (the first math warpgroup gets what is left)
        text, n_g = re.subn(r"\nGATHER_REGS = \d+\b", f"\nGATHER_REGS = {m.group(2)}", text)
        text, n_m = re.subn(r"\nMATH_REGS = \d+\b", f"\nMATH_REGS = {m.group(1)}", text)
        if (n_g, n_m) != (1, 1):
            raise SystemExit("the kernel source changed: GATHER_REGS and MATH_REGS are not set once each")
        return text
    if name in ("noload", "noload-nomma"):
        text = _noload(text)
    if name == "nodecode":
        text = _nodecode(text)
    if name in ("nomma", "noload-nomma"):
        text = _nomma(text)
    if name == "nomath":
        text = _nomath(text)
    if name == "noexchange":
        text = _noexchange(text)
    if name == "oneexchange":
        text = _oneexchange(text)
    if name not in VARIANTS:
        raise SystemExit(f"variant {name!r}: expected one of {VARIANTS}")
    return text


def load_module(path: Path, text: str) -> ModuleType:
    """Write ``text`` to ``path`` (under ``variants/``) and import it as a module of its own."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_variant(name: str) -> ModuleType:
    stem = Path(name[5:]).stem if name.startswith("file:") else re.sub(r"[^a-z0-9]", "_", name)
    return load_module(HERE / "variants" / f"sparse_decode_ws_{stem}_v.py", variant_source(name))


def spills(ptx: str) -> str:
    """ptxas's spill bytes for ``ptx`` (sm_90a) and the local loads and stores (LDL, STL) of each register region
    of the SASS, in order (a region starts at each ``setmaxnreg``; the second math warpgroup's, the gather's and the
    first math warpgroup's are the long ones), with the region's registers a thread."""
    from dense_ws_build_probe import assemble

    info, sass = assemble(ptx)
    found = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    regions: list[tuple[int, int, int]] = []  # (registers, instructions, LDL/STL)
    for line in sass.splitlines():
        m = re.search(r"USETMAXREG\.\w+\.CTAPOOL (?:UP0, )?0x([0-9a-f]+)", line)
        if m:
            regions.append((int(m.group(1), 16), 0, 0))
        elif regions and re.search(r"/\*[0-9a-f]{4,}\*/\s+\S", line):
            r, n, k = regions[-1]
            regions[-1] = (r, n + 1, k + bool(re.search(r"\b(LDL|STL)", line)))
    big = ", ".join(f"{r} registers: {k} LDL/STL of {n}" for r, n, k in regions if n > 100)
    stores, loads = found[0] if found else ("0", "0")
    return f"spill stores/loads {stores}/{loads} B; {big}"


def build() -> None:
    """Write every variant (or those named) and compile it for sm_90 without a GPU; ``--spills``: with ptxas's spills
    and each warpgroup's local loads and stores (:func:`spills`)."""
    for name in [a for a in sys.argv[1:] if not a.startswith("--")] or VARIANTS:
        k = load_variant(name).compile_sm90()
        print(f"{name:14s} shared memory {k.metadata.shared} B, PTX {len(k.asm['ptx'])} characters, "
              f"wgmma {k.asm['ptx'].count('wgmma.mma_async')}, ld.global {k.asm['ptx'].count('ld.global')}, "
              f"cvt e4m3 {k.asm['ptx'].count('e4m3x2')}")  # fmt: skip
        if "--spills" in sys.argv:
            print(f"{'':14s} {spills(k.asm['ptx'])}")


def time_variants(
    point: str,
    variants: dict[str, ModuleType],
    reps: int,
    *,
    owner: ModuleType,
    attr: str,
    checked: Callable[[str], bool],
    heads: int = 64,
) -> list[dict[str, Any]]:
    """The planner's plan at ``point`` (``MODE[-sN][-hN]:B``, ``heads`` unless ``-hN``) with the package's kernel, then
    each variant's launcher swapped in for ``owner.<attr>`` behind the public call, on the same plan; the package's
    again last (the order's effect). The package's runs and the variants ``checked`` accepts are checked against the
    fp64 reference; each is timed (CUDA-graph replay, L2 flushed, median of ``reps``). Launch replays are off for
    every run (``WAVEMLA_LAUNCH=triton``): a call with a fresh metadata object would otherwise replay the launches
    recorded by the first call of its signature (the package's kernel), and never reach the swapped launcher."""
    import torch

    from wavemla import config, get_mla_metadata, sparse_mla_decode
    from wavemla.reference import sparse_decode_ref
    from wavemla.testing import TOLERANCES, check_close
    from wavemla.tools.bench import timings_us

    sys.path.insert(0, str(HERE))
    from merge_ab import decode_point, parse_point

    mode, s_q, h, b = parse_point(point, heads)
    kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=h)
    rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
    shipped = getattr(owner, attr)
    records = []
    runs = [("package", None), *variants.items(), ("package, again", None)]
    plan = None
    for name, module in runs:
        if module is not None:
            setattr(owner, attr, getattr(module, attr))
        try:
            with config.override(WAVEMLA_LAUNCH="triton"):
                meta, _ = get_mla_metadata()
                out, lse = sparse_mla_decode(**kw, metadata=meta)
                assert meta.plan is not None
                plan = f"{meta.plan.config}:{meta.plan.units_per_part}"
                check = module is None or checked(name)
                bad = ""
                if check:
                    bad = check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]) or check_close(
                        "lse", lse, ref_l, TOLERANCES[("lse", "gpu")]
                    )
                med = timings_us(lambda meta=meta: sparse_mla_decode(**kw, metadata=meta), reps=reps, graph=True)[1]
        except Exception as e:  # a failing run is reported, the others still run
            print(f"{point:10s} {name:16s} ERROR {str(e).splitlines()[0][:120]}", flush=True)
            continue
        finally:
            setattr(owner, attr, shipped)
        state = ("ok" if not bad else "MISMATCH " + bad[:60]) if check else "(not checked)"
        print(f"{point:10s} {name:16s} {med:7.1f} us  {state}", flush=True)
        records.append(dict(point=point, run=name, plan=plan, median_us=med, checked=check, ok=not bad))
        torch.cuda.synchronize()
    return records


def run_cli(
    default_points: list[str], names: tuple[str, ...], load: Callable[[str], ModuleType], time_point: Callable[..., Any]
) -> None:
    """``--points``, ``--variants``, ``--reps``, ``--json``: each point's runs (``time_point(point, variants, reps)``)
    printed, and written as JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", nargs="+", default=default_points)
    ap.add_argument("--variants", nargs="+", default=list(names))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    variants = {name: load(name) for name in args.variants}
    records = [r for point in args.points for r in time_point(point, variants, args.reps)]
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


def _checked(name: str) -> bool:
    """The variants that compute the kernel's outputs (the others take work out)."""
    return name in ("control", "oneexchange") or name.startswith(("file:", "regs:"))


def time_point(point: str, variants: dict[str, ModuleType], reps: int) -> list[dict[str, Any]]:
    from wavemla.kernels import sparse_decode_ws as ws

    return time_variants(point, variants, reps, owner=ws, attr="sparse_decode_split_ws", checked=_checked)


def main() -> None:
    run_cli(["csa:128", "csa:256", "hca:128", "hca:256"], VARIANTS, load_variant, time_point)


if __name__ == "__main__":
    if "--build" in sys.argv:
        build()
    else:
        main()
