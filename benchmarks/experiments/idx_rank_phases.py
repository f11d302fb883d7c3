"""Where the spread select's two kernels spend their time: timer stamps between their steps, per program, on a GPU.

    PYTHONPATH=src:benchmarks/experiments python3 benchmarks/experiments/idx_rank_phases.py OUT.json [B:N ...]
        [--warps 16 8 4]

Copies of ``_indexer_spread_count_kernel`` and ``_indexer_spread_rank_kernel`` (from src/wavemla/kernels/indexer.py,
patched as text, not part of the package) take a stamp buffer and, after a CTA barrier, store ``%globaltimer``. The
count kernel (a program per token and part): its rows known, the sample sorted into the four thresholds
(``sample``), its keys counted at or above each (``count``), its candidates listed into its region (``list``), the
thresholds and counts stored (``store``). The rank kernel (a program per token): its rows known, the parts'
counts read and the bracket found (``meta``), the parts' candidates gathered into the list (``gather``), the k-th
key found by the radix passes (``kth``), the list written out as global slots (``emit``), the padding and length
written (``rest``). For each shape one whole call leaves the keys in the workspace; then each repetition (L2
flushed) runs the stamped count and rank kernels back to back, so that the rank program reads the parts' regions
from L2 as it does in a call. Per shape and launch width (``--warps``: the rank kernel's warps; its walkers stay
512) the medians over programs and repetitions are printed, the count kernel's on the same line. The k-th key's
step is split by the bytes its token's bracket spans (those where ``lo`` and the list's largest key below ``hi``
differ): the radix passes of the kernel before 2a3b7d1, which took one a byte; since, the passes start at the
bracket's highest open bit and stop once the k-th key's bucket is taken, so they can be fewer. The output is
compared with the package's.
FP8 rows in the page-split layout with FP8 queries, top-512, s_q 1, 64 heads.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from idx_ab import import_file  # this directory: the script's own path entry
from idx_select import call_setup
from idx_select_timeline import rank_work

import wavemla.kernels.indexer as ix
from wavemla.tools.bench import _flush_l2
from wavemla.tools.bench_indexer import IndexerBenchCase, _fill_case, run_case

SHAPES = ("1:32768", "8:32768", "32:32768", "64:32768")
PHASES = ("meta", "gather", "kth", "emit", "rest")
COUNT_PHASES = ("sample", "count", "list", "store")
REPS = 10
KERNEL = "_indexer_spread_rank_kernel"
COUNT_KERNEL = "_indexer_spread_count_kernel"

_STAMP = "{ind}tl.debug_barrier()\n{ind}tl.store(p_dbg + {pid} * 8 + {k}, _timer())\n"
# per kernel: the program's stamp row, and (anchor, stamp index, where): "after" or "before" a line, or
# "after_call" after the statement starting at the anchor; a last stamp goes at the kernel's end
_ANCHORS = {
    KERNEL: ("i_t", (
        ("    p_bt_row = p_bt + i_b.to(tl.int64) * stride_btb\n", 0, "after"),
        ("            hi = tl.where(c1 < topk, t1, tl.where(c2 < topk, t2, tl.where(c3 < topk, t3, _KEY_CEIL)))\n", 1,
         "after"),
        ("                tl.debug_barrier()  # the list is read back by other threads\n", 2, "after"),
        ("                thr, need_eq, n_eq = _list_kth(", 3, "after_call"),
        ("        _emit_list(", 4, "after_call"),
    ), 5),
    COUNT_KERNEL: ("tl.program_id(0)", (
        ("    n_vis = _visible_rows(p_ncomp, i_t // S_Q, i_t % S_Q, stride_nb, stride_ns, max_n, S_Q, PER_TOKEN)\n", 0,
         "after"),
        ("        t0, t1, t2, t3 = _sample_ladder(p_row_keys, n_vis, topk, SAMPLE)\n", 1, "after"),
        ("        c0, c1, c2, c3 = _walker_counts(p_row_keys, o_start, o_end, span, t0, t1, t2, t3)\n", 2, "after"),
        ("        o_m = tl.arange(0, _PART_META)\n", 3, "before"),
    ), 4),
}  # fmt: skip
_TIMER = """

@triton.jit
def _timer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


"""


def _stamped(
    src: str,
    name: str,
    spec: tuple[str, tuple[tuple[str, int, str], ...], int | None] | None = None,
    first_param: str = "p_keys",
    stamp: str = _STAMP,
) -> str:
    """``src`` with function ``name`` taking a stamp buffer ``p_dbg`` (before its parameter ``first_param``) and
    storing ``stamp`` (``%globaltimer`` by default) at its anchors: ``spec`` = (the program's stamp row, anchors, the
    index of a last stamp at its end or None), by default ``_ANCHORS[name]``."""
    pid, anchors, last = _ANCHORS[name] if spec is None else spec
    head_def = f"def {name}(\n"
    i_body = src.index(head_def) + len(head_def)
    found = re.search(r"\n\n\n(?=\S)", src[i_body:])  # the function ends before the next top-level statement
    i_end = i_body + found.start() if found else len(src)
    param = f"    {first_param},\n"
    assert src[i_body:i_end].count(param) >= 1, f"{name}: no parameter {first_param}"
    kernel = src[i_body:i_end].replace(param, "    p_dbg,\n" + param, 1)
    for anchor, k, where in anchors:
        i = kernel.find(anchor)
        assert i >= 0 and kernel.count(anchor) == 1, f"{name} anchor {k}: {anchor!r}"
        ind = " " * (len(anchor) - len(anchor.lstrip(" ")))
        j = {"after": i + len(anchor), "before": i, "after_call": kernel.find(")\n", i) + 2}[where]
        kernel = kernel[:j] + stamp.format(ind=ind, pid=pid, k=k) + kernel[j:]
    if last is not None:
        kernel = kernel.rstrip("\n") + "\n" + stamp.format(ind="    ", pid=pid, k=last)
    return src[:i_body] + kernel + src[i_end:]


def patched_module(name: str) -> Any:
    """The indexer module with stamped copies of the spread select's two kernels (written to a temporary file,
    imported as ``name``)."""
    text = Path(ix.__file__).read_text()
    i_first = text.rindex("\n@triton.jit", 0, text.index("def _indexer_score_kernel(")) + 1
    text = text[:i_first] + _TIMER.lstrip("\n") + text[i_first:]
    for kernel in (COUNT_KERNEL, KERNEL):
        text = _stamped(text, kernel)
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(text)
    return import_file(path, name)


def run_shape(mod: Any, b: int, n: int, warps: list[int], gen: torch.Generator) -> list[dict[str, Any]]:
    case = IndexerBenchCase(b=b, n_comp=n, kv_format="fp8-paged", q_format="fp8")
    data = _fill_case(case, gen)
    call, cfg, layout = call_setup(case, data)
    cfg = ix.choose_config(call.b, call.s_q, call.heads, call.max_n, kv_fp8=True, topk=call.topk, select="spread")
    ws = torch.empty(layout.numel, dtype=torch.int32, device="cuda")
    want = (torch.empty(b, 1, 512, dtype=torch.int32, device="cuda"),
            torch.empty(b, 1, dtype=torch.int32, device="cuda"))  # fmt: skip
    run_case(case, data, ws, want, select="spread")  # the package's answer; leaves keys and regions in ws
    torch.cuda.synchronize()
    passes = [nb for _, _, nb in rank_work(b, n, ws, call.topk)]  # 0: the program walked the keys
    keys, parts, hist = ws[layout.keys : layout.hist], ws[layout.parts :], ws[layout.hist : layout.counts]
    idx = torch.empty_like(want[0])
    lens = torch.empty_like(want[1])
    dbg = torch.zeros(b, 8, dtype=torch.int64, device="cuda")
    dbg_count = torch.zeros(b * cfg.parts, 8, dtype=torch.int64, device="cuda")
    shared = {
        "p_keys": keys, "p_parts": parts, "p_ncomp": data["n_comp"], "stride_nb": data["n_comp"].stride(0),
        "stride_ns": 0, "stride_keys": layout.n_pad, "stride_parts": cfg.parts * (ix.PART_META + 2 * cfg.part_cap),
        "max_n": n, "topk": call.topk, "S_Q": 1, "PER_TOKEN": False, "PARTS": cfg.parts, "PART_CAP": cfg.part_cap,
        "CAP": cfg.list_cap, "SAMPLE": cfg.sample, "WALKERS": 32 * cfg.select_warps, "BLOCK_L": cfg.block_list,
        "WHOLE": cfg.list_whole,
    }  # fmt: skip
    rows = []
    for nw in warps:
        samples: dict[str, list[float]] = collections.defaultdict(list)
        for rep in range(REPS + 2):
            _flush_l2()
            mod._indexer_spread_count_kernel[(b * cfg.parts,)](p_dbg=dbg_count, **shared, num_warps=cfg.select_warps)
            mod._indexer_spread_rank_kernel[(b,)](
                p_dbg=dbg, p_list=hist, p_bt=data["table"], p_idx=idx, p_len=lens,
                stride_btb=data["table"].stride(0), stride_list=ix.HIST0_BINS + 2 * ix.HIST_BINS,
                stride_ib=idx.stride(0), stride_is=idx.stride(1), stride_lb=lens.stride(0), stride_ls=lens.stride(1),
                PAGE=call.page, GATHER=ix.spread_gather(cfg.parts, cfg.part_cap), **shared, num_warps=nw,
            )  # fmt: skip
            torch.cuda.synchronize()
            if rep < 2:
                continue
            t_first = int(dbg[:, 0].min())
            for t, row in enumerate(dbg.cpu().tolist()):
                for k, phase in enumerate(PHASES):
                    samples[phase].append((row[k + 1] - row[k]) / 1e3)
                samples["total"].append((row[5] - row[0]) / 1e3)
                samples["start"].append((row[0] - t_first) / 1e3)
                samples[f"kth_p{passes[t]}"].append((row[3] - row[2]) / 1e3)
            samples["span"].append((int(dbg[:, 5].max()) - t_first) / 1e3)
            for row in dbg_count.cpu().tolist():
                for k, phase in enumerate(COUNT_PHASES):
                    samples[f"count_{phase}"].append((row[k + 1] - row[k]) / 1e3)
                samples["count_total"].append((row[4] - row[0]) / 1e3)
            samples["count_span"].append((int(dbg_count[:, 4].max()) - int(dbg_count[:, 0].min())) / 1e3)
        same = torch.equal(idx, want[0]) and torch.equal(lens, want[1])
        med = {p: statistics.median(v) for p, v in sorted(samples.items())}
        by_pass = "  ".join(f"{p} {v:5.2f}" for p, v in med.items() if p.startswith("kth_p"))
        print(f"b={b:<3d} n={n:<6d} warps {nw:2d} | " + "  ".join(f"{p} {med[p]:5.2f}" for p in (*PHASES, "total"))
              + f" | span {med['span']:5.2f} last start {max(samples['start']):5.2f} | {by_pass} us"
              + f" | bracket bytes {dict(sorted(collections.Counter(passes).items()))}"
              + " | count kernel: " + "  ".join(f"{p} {med[f'count_{p}']:5.2f}" for p in (*COUNT_PHASES, "total"))
              + f" span {med['count_span']:5.2f} us"
              + ("" if same else "  OUTPUT DIFFERS"), flush=True)  # fmt: skip
        rows.append({"b": b, "n_comp": n, "warps": nw, "parts": cfg.parts, "block_list": cfg.block_list,
                     "same_output": same, "passes": passes, **{f"{p}_us": v for p, v in med.items()}})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("shapes", nargs="*", default=list(SHAPES), metavar="B:N")
    parser.add_argument("--warps", nargs="+", type=int, default=[ix.TOKEN_SELECT_WARPS])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("idx_rank_phases.py: needs a CUDA device", file=sys.stderr)
        return 2
    mod = patched_module("indexer_rank_phases")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    rows: list[dict[str, Any]] = []
    print(f"phases (us, medians over programs and {REPS} launches): {', '.join(PHASES)}", flush=True)
    for spec in args.shapes:
        b, n = (int(x) for x in spec.split(":"))
        rows += run_shape(mod, b, n, args.warps, gen)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
