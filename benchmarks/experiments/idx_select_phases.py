"""Where the per-token select's time goes: SM clock stamps between its phases, per program, on an H200.

    PYTHONPATH=src python3 benchmarks/experiments/idx_select_phases.py OUT.json      # on a GPU

A copy of ``_indexer_select_kernel`` (from src/wavemla/kernels/indexer.py, patched as text, not part of the package)
takes a debug buffer and, after a CTA barrier, stores ``%clock64`` at: start, sample sorted, bracket found, list
written, k-th key found, selected rows written, end. For each shape the score kernel writes the keys, then the
patched select runs once per repetition (L2 flushed before each); the median over programs and repetitions of each
phase's cycles is printed in µs at the H200's SM clock. Variants: the shipped kernel ("base"), its bracket walk with
sixteen 16-byte loads in flight per thread instead of four ("unroll16"), and a 256-key sample ("sample256"); each
variant's output is compared with the base's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from idx_ab import import_file  # this directory: the script's own path entry
from idx_select import call_setup

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import _flush_l2
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case

SHAPES = ((32, 32768, "fp8-paged"), (1, 32768, "fp8-paged"), (1, 2048, "fp8-paged"), (32, 262144, "fp8-paged"))
PHASES = ("sample", "bracket", "list", "kth", "output", "pad")
REPS = 10

_STAMP = "{ind}tl.debug_barrier()\n{ind}tl.store(p_dbg + i_t * 8 + {k}, _clock())\n"
# (anchor, stamp index, where): "after"/"before" a line, or "after_call" after the statement starting at the anchor
_ANCHORS = (
    ("    length = tl.minimum(n_vis, topk)\n", 0, "after"),
    ("            t0, t1, t2, t3 = _sample_ladder(p_row_keys, n_vis, topk, SAMPLE)\n", 1, "after"),
    ("        if cnt_lo <= CAP:\n", 2, "before"),
    ("        tl.debug_barrier()  # the list is read back by other threads\n", 3, "after"),
    ("        thr, need_eq, n_eq = _list_kth(", 4, "after_call"),
    ("    for i_k in range(0, topk, BLOCK_L):\n", 5, "before"),
    ("    tl.store(p_len + i_b * stride_lb + i_s * stride_ls, length)\n", 6, "after"),
)
_CLOCK = """

@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


"""
SM_MHZ = 1980.0  # H200 boost clock (nvidia-smi clocks.max.sm): cycles -> µs
SAMPLE_256 = 256  # the "sample256" variant's sample size (the shipped rule takes 512 at 32K rows)


def _patched_module(name: str, edits: tuple[tuple[str, str], ...] = ()) -> Any:
    """The indexer module with a stamped copy of the select kernel and ``edits`` (old, new) applied to its text
    (written to a temporary file, imported as ``name``)."""
    src = Path(ix.__file__).read_text()
    for old, new in edits:
        assert src.count(old) == 1, f"edit target {old!r}"
        src = src.replace(old, new)
    i_def = src.index("def _indexer_select_kernel(\n")
    i_dec = src.rindex("\n@triton.jit", 0, i_def) + 1
    head, decorator, rest = src[:i_dec], src[i_dec:i_def], src[i_def + len("def _indexer_select_kernel(\n") :]
    kernel, sep, tail = rest.partition("\n\n\n# ")
    assert sep
    kernel = kernel.replace("    p_keys,\n", "    p_dbg,\n    p_keys,\n", 1) + "\n"
    for anchor, k, where in _ANCHORS:
        i = kernel.find(anchor)
        assert i >= 0 and kernel.count(anchor) == 1, f"anchor {k}: {anchor!r}"
        stamp = _STAMP.format(ind=" " * (len(anchor) - len(anchor.lstrip(" "))), k=k)
        j = {"after": i + len(anchor), "before": i, "after_call": kernel.find(")\n", i) + 2}[where]
        kernel = kernel[:j] + stamp + kernel[j:]
    text = head + _CLOCK + decorator + "def _indexer_select_kernel(\n" + kernel.rstrip("\n") + "\n\n\n# " + tail
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(text)
    return import_file(path, name)


def _run_shape(
    mods: dict[str, Any], b: int, n: int, kv: str, generator: torch.Generator, mhz: float
) -> list[dict[str, Any]]:
    case = IndexerBenchCase(b=b, n_comp=n, kv_format=kv, q_format="fp8")
    data = _fill_case(case, generator)
    call, cfg, layout = call_setup(case, data)
    assert cfg.select == "token", "every shape here takes the per-token select"
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
