"""Where the per-token select's time goes: SM clock stamps between its phases, per program, on an H200.

    PYTHONPATH=src:benchmarks/experiments python3 benchmarks/experiments/idx_select_phases.py OUT.json  # a GPU

A copy of ``_indexer_select_kernel`` (from src/wavemla/kernels/indexer.py, patched as text, not part of the package)
takes a debug buffer and, after a CTA barrier, stores ``%clock64`` at: start, sample sorted, bracket found, list
written, k-th key found (these four in a stamped copy of its helper ``_walk_select``), selected rows written, end.
The per-token select is forced (``choose_config(select="token")``), whatever the call would pick. For each shape the
score kernel writes the keys, then the patched select runs once per repetition (L2 flushed before each); the median
over programs and repetitions of each phase's cycles is printed in µs at the H200's SM clock. Variants: the shipped
kernel ("base"), its bracket walk with sixteen 16-byte loads in flight per thread instead of four ("unroll16"), and
a 256-key sample ("sample256"); each variant's output is compared with the base's.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from idx_ab import import_file  # this directory: the script's own path entry
from idx_rank_phases import _stamped
from idx_select import call_setup

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import _flush_l2
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case

SHAPES = ((32, 32768, "fp8-paged"), (1, 32768, "fp8-paged"), (1, 2048, "fp8-paged"), (32, 262144, "fp8-paged"))
PHASES = ("sample", "bracket", "list", "kth", "output", "pad")
REPS = 10

KERNEL = "_indexer_select_kernel"
WALK = "_walk_select"  # steps 1-3, a helper: stamped in a copy that takes the program's stamp row
_STAMP = "{ind}tl.debug_barrier()\n{ind}tl.store(p_dbg + {pid} * 8 + {k}, _clock())\n"
# (the program's stamp row, (anchor, stamp index, where), a last stamp at the end): "after"/"before" a line, or
# "after_call" after the statement starting at the anchor
_KERNEL_ANCHORS = ("i_t", (
    ("    n_vis = _visible_rows(p_ncomp, i_b, i_s, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)\n", 0, "after"),
    ("        _emit_list(", 5, "after_call"),
), 6)  # fmt: skip
_WALK_ANCHORS = ("0", (
    ("        t0, t1, t2, t3 = _sample_ladder(p_row_keys, n_vis, topk, SAMPLE)\n", 1, "after"),
    ("    if cnt_lo <= CAP:\n", 2, "before"),
    ("    tl.debug_barrier()  # the list is read back by other threads\n", 3, "after"),
    ("    thr, need_eq, n_eq = _list_kth(", 4, "after_call"),
), None)  # fmt: skip
_WALK_CALL = ("m_list, thr, need_eq, n_eq = _walk_select(\n            p_row_keys,",
              "m_list, thr, need_eq, n_eq = _walk_select_dbg(\n            p_dbg + i_t * 8, p_row_keys,")  # fmt: skip
_CLOCK = """

@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


"""
SM_MHZ = 1980.0  # H200 boost clock (nvidia-smi clocks.max.sm): cycles -> µs
SAMPLE_256 = 256  # the "sample256" variant's sample size (the shipped rule takes 512 at 32K rows)


def patched_text(edits: tuple[tuple[str, str], ...] = ()) -> str:
    """The indexer module's text with ``edits`` (old, new) applied, a stamped copy of ``_walk_select``
    (``_walk_select_dbg``) and the select kernel stamped and calling it."""
    src = Path(ix.__file__).read_text()
    for old, new in edits:
        assert src.count(old) == 1, f"edit target {old!r}"
        src = src.replace(old, new)
    i_first = src.rindex("\n@triton.jit", 0, src.index("def _indexer_score_kernel(")) + 1
    src = src[:i_first] + _CLOCK.lstrip("\n") + src[i_first:]
    # the helper's copy goes right after the helper, under its own name
    i_def = src.index(f"def {WALK}(\n")
    found = re.search(r"\n\n\n(?=\S)", src[i_def:])
    assert found
    i_end = i_def + found.start()
    copy = "\n\n\n@triton.jit\n" + src[i_def:i_end].replace(f"def {WALK}(", f"def {WALK}_dbg(", 1)
    src = src[:i_end] + copy + src[i_end:]
    src = _stamped(src, f"{WALK}_dbg", _WALK_ANCHORS, first_param="p_row_keys", stamp=_STAMP)
    assert src.count(_WALK_CALL[0]) == 1, "the select kernel's call of _walk_select"
    src = src.replace(_WALK_CALL[0], _WALK_CALL[1])
    return _stamped(src, KERNEL, _KERNEL_ANCHORS, stamp=_STAMP)


def _patched_module(name: str, edits: tuple[tuple[str, str], ...] = ()) -> Any:
    """:func:`patched_text` written to a temporary file and imported as ``name``."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(patched_text(edits))
    return import_file(path, name)


def _run_shape(
    mods: dict[str, Any], b: int, n: int, kv: str, generator: torch.Generator, mhz: float
) -> list[dict[str, Any]]:
    case = IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format="fp8")
    data = _fill_case(case, generator)
    call, _, _ = call_setup(case, data)
    cfg = ix.choose_config(call.b, call.s_q, call.heads, call.max_n, kv_fp8=True, topk=call.topk, select="token")
    layout = ix.workspace_layout(call.b, call.s_q, call.max_n, cfg)
    ws = torch.empty(layout.numel, dtype=torch.int32, device="cuda")
    keys, hist = ws[layout.keys : layout.hist], ws[layout.hist : layout.counts]
    ix._launch_scores(call, cfg, data["q"], data["w"], data["cache"], data["table"], data["n_comp"], keys,
                      layout.n_pad, 512)  # fmt: skip
    idx = torch.empty(b, 1, 512, dtype=torch.int32, device="cuda")
    lens = torch.empty(b, 1, dtype=torch.int32, device="cuda")
    dbg = torch.zeros(b, 8, dtype=torch.int64, device="cuda")
    rows = []
    for variant, module in mods.items():
        sample = SAMPLE_256 if variant == "sample256" else cfg.sample
        samples: dict[str, list[float]] = {p: [] for p in (*PHASES, "total")}
        for rep in range(REPS + 2):
            _flush_l2()
            module._indexer_select_kernel[(b,)](
                p_dbg=dbg, p_keys=keys, p_list=hist, p_bt=data["table"], p_ncomp=data["n_comp"], p_idx=idx,
                p_len=lens, stride_btb=data["table"].stride(0), stride_nb=data["n_comp"].stride(0), stride_ns=0,
                stride_keys=layout.n_pad, stride_list=ix.HIST0_BINS + 2 * ix.HIST_BINS, stride_ib=idx.stride(0),
                stride_is=idx.stride(1), stride_lb=lens.stride(0), stride_ls=lens.stride(1), max_n=n, topk=512,
                S_Q=1, PER_TOKEN=False, PAGE=call.page, CAP=cfg.list_cap, SAMPLE=sample,
                WALKERS=32 * cfg.select_warps, BLOCK_L=cfg.block_list, WHOLE=cfg.list_whole, num_warps=cfg.select_warps,
            )  # fmt: skip
            torch.cuda.synchronize()
            if rep < 2:
                continue
            for row in dbg.cpu().tolist():
                row[1] = row[1] or row[0]  # a token that lists every key takes no sample
                for k, phase in enumerate(PHASES):
                    samples[phase].append((row[k + 1] - row[k]) / mhz)
                samples["total"].append((row[6] - row[0]) / mhz)
        if variant == "base":
            want = idx.clone()
        same = torch.equal(idx, want)
        med = {p: statistics.median(v) for p, v in samples.items()}
        print(f"b={b:<3d} n={n:<6d} {variant:9s} " + "  ".join(f"{p} {med[p]:5.2f}" for p in (*PHASES, "total"))
              + f" us{'' if same else '  OUTPUT DIFFERS'}", flush=True)  # fmt: skip
        rows.append({"b": b, "n_comp": n, "kv_format": kv, "variant": variant, "same_output": same,
                     **{f"{p}_us": med[p] for p in med}})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_select_phases.py: needs a CUDA device", file=sys.stderr)
        return 2
    base = _patched_module("indexer_phases")
    unroll16 = _patched_module(
        "indexer_phases_u16", (("_WALK_UNROLL = tl.constexpr(4)", "_WALK_UNROLL = tl.constexpr(16)"),)
    )
    mods = {"base": base, "unroll16": unroll16, "sample256": base}
    mhz = SM_MHZ
    print(f"SM clock {mhz:.0f} MHz (cycles -> us); phases: {', '.join(PHASES)}", flush=True)
    generator = torch.Generator(device="cuda")
    generator.manual_seed(0)
    rows: list[dict[str, Any]] = []
    for b, n, kv in SHAPES:
        rows += _run_shape(mods, b, n, kv, generator, mhz)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
