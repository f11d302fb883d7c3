"""A/B of the split kernel against a frozen earlier copy: same bits, and the time of each, at chosen plans.

    bash benchmarks/experiments/materialize.sh          # here: writes variants/sd_2fd72ff.py (git-ignored)
    PYTHONPATH=src python3 benchmarks/experiments/merge_ab.py OUT.json --points csa:128:2 csa:133:0 ...

A point is ``MODE:B:PIECES`` — PIECES 0 for the planner's default plan, N for batch-invariant mode with N pieces a
token (64x64 tiles pinned). The earlier kernel (``--old``, default ``variants/sd_2fd72ff.py``: the merge that loads
one piece per memory round trip) and the current one run the same plan on the same inputs; the outputs and lse must
be bitwise equal, and both are timed in alternation (CUDA-graph replay, L2 flushed; the lower of each kernel's
per-round medians).
DSV4 shapes: h=64, s_q=1, FP8 MODEL1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import torch

import wavemla.kernels.sparse_decode as sd
from wavemla import config, get_mla_metadata, sparse_mla_decode
from wavemla.testing import make_sparse_decode_inputs
from wavemla.tools.bench import MODES, timings_us


def load_variant(path: Path) -> Any:
    """The Python file at ``path`` imported as a module named after it (a frozen or patched kernel copy)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_point(point: str, heads: int = 64) -> tuple[str, int, int, int]:
    """``MODE[-sN][-hN]:B`` (e.g. ``csa:128``, ``csa-s2:96``, ``hca-h128:64``) as (mode, s_q, heads, batch); s_q 1 and
    ``heads`` unless given."""
    m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?:(\d+)", point)
    if m is None:
        raise SystemExit(f"point {point!r}: expected MODE[-sN][-hN]:B")
    return m.group(1), int(m.group(2) or 1), int(m.group(3) or heads), int(m.group(4))


def decode_point(
    mode: str, b: int, pieces: int | None, seed: int, s_q: int = 1, h: int = 64
) -> tuple[dict[str, Any], dict[str, int]]:
    """(call keywords, knobs) of one point: DSV4 FP8 inputs for ``mode`` at batch ``b`` (``h`` heads, ``s_q`` query
    tokens); with ``pieces`` batch-invariant mode with that many pieces a token on pinned 64x64 tiles, else the
    planner's default plan."""
    topk, page, xtopk, xpage, xpool = MODES[mode]
    inputs = make_sparse_decode_inputs(
        batch=b, s_q=s_q, h_q=h, topk=topk, page=page, extra_topk=xtopk, extra_page=xpage, extra_pool=xpool,
        fp8=True, device="cuda", seed=seed,
    )  # fmt: skip
    kw = {k: v for k, v in inputs.items() if v is not None}
    if not pieces:
        return kw, {}
    return {**kw, "batch_invariant": True}, dict(WAVEMLA_NUM_SPLITS=pieces, WAVEMLA_BLOCK_H=64, WAVEMLA_BLOCK_N=64)


def time_call(call_kw: dict, meta: object, reps: int, flush: bool = True) -> float:
    """Median µs of one decode call (CUDA-graph replay; L2 flushed before each unless ``flush`` is off)."""
    return timings_us(lambda: sparse_mla_decode(**call_kw, metadata=meta), reps=reps, flush=flush, graph=True)[1]


def alternate(
    variants: tuple[tuple[str, Any], ...], call_kw: dict, meta: object, rounds: int, reps: int, flush: bool = True
) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], dict[str, list[float]]]:
    """Each variant's split launcher (a ``sparse_decode_split`` stand-in) swapped in behind the public call in turn,
    ``rounds`` times: its (out, lse) and its per-round median µs (:func:`time_call`). The package's launcher is put
    back after."""
    original = sd.sparse_decode_split
    res: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    try:
        for _ in range(rounds):
            for name, fn in variants:
                sd.sparse_decode_split = fn
                o, lse = sparse_mla_decode(**call_kw, metadata=meta)
                res[name] = (o.clone(), lse.clone())
                times[name].append(time_call(call_kw, meta, reps, flush))
    finally:
        sd.sparse_decode_split = original
    return res, times


def same_bits(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> bool:
    """Whether two (out 16-bit, lse fp32) results are bitwise equal."""
    return torch.equal(a[0].view(torch.int16), b[0].view(torch.int16)) and torch.equal(
        a[1].view(torch.int32), b[1].view(torch.int32)
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=None)
    ap.add_argument("--old", default=str(Path(__file__).parent / "variants" / "sd_2fd72ff.py"))
    ap.add_argument("--points", nargs="+", default=["csa:128:2", "csa:133:0"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-flush", action="store_true", help="time back-to-back replays, L2 not flushed")
    args = ap.parse_args()
    old = load_variant(Path(args.old))
    new_split = sd.sparse_decode_split
    records = []
    for item in args.points:
        mode, b, pieces = item.split(":")
        b, pieces = int(b), int(pieces)
        call_kw, knobs = decode_point(mode, b, pieces, seed=1)
        with config.override(**knobs):
            meta, _ = get_mla_metadata()
            variants = (("old", old.sparse_decode_split), ("new", new_split))
            res, times = alternate(variants, call_kw, meta, args.rounds, args.reps, not args.no_flush)
        same = same_bits(res["old"], res["new"])
        t_old, t_new = min(times["old"]), min(times["new"])
        p = meta.plan
        rec = dict(
            mode=mode, batch=b, pieces=pieces or None, config=str(p.config), programs=p.programs,
            units_per_part=p.units_per_part, old_us=t_old, new_us=t_new, old_all=times["old"],
            new_all=times["new"], bit_identical=same,
        )  # fmt: skip
        records.append(rec)
        print(
            f"{mode} b={b:3d} pieces={pieces or '-':>2} {p.config!s:10s} progs={p.programs:4d} "
            f"upp={p.units_per_part:3d}"
            f"  old {t_old:7.1f}  new {t_new:7.1f} us  ({t_new / t_old:.3f})  bits {'same' if same else 'DIFFER'}",
            flush=True,
        )
        del call_kw, res
        torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    main()
