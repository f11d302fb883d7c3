"""Whole tokens first, the leftover spread: a partition for the warp-specialized sm_90 sparse kernel past a perfect
fit, timed against the planner's.

At b·s_q = P·W + L query tokens (P parts, one per SM or per SM and head block) the kernel's uniform partition cuts
programs of ``ceil(T·n / P)`` tiles out of the flattened (token, tile) space: past a perfect fit (CSA h=64 b = 133:
11 tiles) nearly every program starts two segments and nearly every token is cut and merged, which measured 84.8 µs
against 61.4 at b = 132 (+39% per request). Here each program runs ``W`` whole tokens, and only the ``L`` leftover
tokens are cut, into runs of ``U = ceil(L·n / P)`` tiles spread over the programs, which run them first: the busiest
program holds ``W·n + U`` tiles and two segments, and the combine merges ``L`` tokens.

The variant kernel is the package's (``src/wavemla/kernels/sparse_decode_ws.py``) with each partition's single unit
range replaced by two (the cut runs ``[p·U, min((p+1)·U, L·n))``, then the whole tokens ``[L·n + p·W·n, ...)``),
written at run time into ``variants/sparse_decode_ws_spread.py`` (git-ignored) by text replacements that must each
match once. With its defaults (every unit in the first range) it runs the package's partition, which times the
cost of the two-range loop itself.

    PYTHONPATH=src python3 benchmarks/experiments/ws_spread.py --build      # write it and compile it for sm_90
    PYTHONPATH=src python3 benchmarks/experiments/ws_spread.py --points csa:133 hca:133 csa-s2:67 csa-h128:67 \
        [--reps 15] [--json F] [--breakdown]

Each point runs the planner's plan (the package's kernel), the variant on the planner's partition, and the variant on
the spread partition; each output is checked against the fp64 reference, then timed (CUDA-graph replay, L2 flushed,
median), then the planner's plan again (the order's effect); ``--breakdown`` also times each with no combine
launched. DSV4 shapes as ``partition_sweep.py``: ``csa`` or ``hca``, ``-sN`` query tokens, ``-hN`` heads.
"""

import argparse
import importlib.util
import json
import math
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "src" / "wavemla" / "kernels" / "sparse_decode_ws.py"
VARIANT = HERE / "variants" / "sparse_decode_ws_spread.py"

_TWO_RANGES = """{ind}for i_rng in range(2):
{ind}    # the cut runs of the leftover tokens first, then this program's whole tokens
{ind}    unit_lo = (1 - i_rng) * (i_part * units_per_part) + i_rng * (cut_units + i_part * whole_units)
{ind}    unit_hi = gl.minimum(
{ind}        unit_lo + (1 - i_rng) * units_per_part + i_rng * whole_units,
{ind}        (1 - i_rng) * cut_units + i_rng * total_units,
{ind}    )
{ind}    seg_end = gl.where(unit_hi > unit_lo, (unit_hi - 1) // {g} + 1, unit_lo // {g})
{ind}    for i_seg in range(unit_lo // {g}, seg_end):
"""


def _once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise SystemExit(f"the kernel source changed: {old[:60]!r} is there {text.count(old)} times, not once")
    return text.replace(old, new)


def _wrap_loop(text: str, header: str, g: str) -> str:
    """Put the segment loop that starts at ``header`` (and its body, indented deeper) inside the two-range loop."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    if len(starts) != 1:
        raise SystemExit(f"the kernel source changed: {header!r} is there {len(starts)} times, not once")
    i = starts[0]
    ind = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    end = i + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > len(ind)):
        end += 1
    while not lines[end - 1].strip():  # trailing blank lines stay outside
        end -= 1
    body = ["    " + line if line.strip() else line for line in lines[i + 1 : end]]
    return "\n".join(lines[:i] + _TWO_RANGES.format(ind=ind, g=g).rstrip("\n").split("\n") + body + lines[end:])


_UNIT_RANGE = (
    "        unit_lo = i_part * units_per_part\n        unit_hi = gl.minimum(unit_lo + units_per_part, total_units)\n"
)
_LAUNCH_ARGS = (
    "        counts if counts is not None else indices,  # last: the default build's parameters keep their offsets\n"
)


def variant_source() -> str:
    """The package's warp-specialized kernel with the two-range partition."""
    text = SOURCE.read_text()
    if text.count(_UNIT_RANGE) != 2:
        raise SystemExit("the kernel source changed: a part's unit range is not set once in each partition")
    text = text.replace(_UNIT_RANGE, "")
    text = _wrap_loop(text, "for i_seg in range(unit_lo // g_units, (unit_hi - 1) // g_units + 1):", "g_units")
    text = _wrap_loop(text, "for i_seg in range(unit_lo // seg_units, (unit_hi - 1) // seg_units + 1):", "seg_units")
    two = "cut_units, whole_units, "
    text = _once(text, "def _gather_partition(kv_smem,", f"def _gather_partition({two}kv_smem,")
    text = _once(text, "def _math_partition(q_smem,", f"def _math_partition({two}q_smem,")
    text = _once(text, "(_gather_partition, (kv_smem,", f"(_gather_partition, ({two}kv_smem,")
    if text.count("(_math_partition, (q_smem,") != 2:
        raise SystemExit("the kernel source changed: the math partitions are not launched twice")
    text = text.replace("(_math_partition, (q_smem,", f"(_math_partition, ({two}q_smem,")
    text = _once(text, "qk_scale, p_cnt, PAGE: gl.constexpr,", f"qk_scale, p_cnt, {two}PAGE: gl.constexpr,")
    counts = "    counts: torch.Tensor | None = None,\n"
    text = _once(
        text, counts + ") -> Any:", counts + "    cut_units: int | None = None,\n    whole_units: int = 0,\n) -> Any:"
    )
    new_args = "        b * s_q * n_tiles if cut_units is None else cut_units,\n        whole_units,\n"
    return _once(text, _LAUNCH_ARGS, _LAUNCH_ARGS + new_args)


def load_variant() -> ModuleType:
    VARIANT.parent.mkdir(exist_ok=True)
    VARIANT.write_text(variant_source())
    spec = importlib.util.spec_from_file_location("sparse_decode_ws_spread", VARIANT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spread(tokens: int, n_tiles: int, parts: int) -> tuple[int, int, int] | None:
    """(whole tokens a program, leftover tokens, tiles per cut run) for ``tokens`` over ``parts`` parts, or None
    where every program runs whole tokens (a perfect fit) or no program can (fewer tokens than parts)."""
    whole, left = divmod(tokens, parts)
    if whole == 0 or left == 0:
        return None
    return whole, left, math.ceil(left * n_tiles / parts)


def check_partition(tokens: int, n_tiles: int, parts: int) -> int:
    """The kernel's two ranges (the same arithmetic) for ``tokens`` over ``parts`` parts: every (token, tile) run
    exactly once, every cut token among the leftover ones, its pieces in the workspace slots the combine reads
    (``token + (token·n) // U .. token + ((token+1)·n - 1) // U``, below ``L + parts``). Returns the busiest program's
    tiles."""
    shape = spread(tokens, n_tiles, parts)
    assert shape is not None
    whole, left, upp = shape
    cut, whole_units, total = left * n_tiles, whole * n_tiles, tokens * n_tiles
    seen: set[tuple[int, int]] = set()
    slots: dict[int, list[int]] = {}
    busiest = 0
    for part in range(parts):
        load = 0
        for r in range(2):
            lo = (1 - r) * (part * upp) + r * (cut + part * whole_units)
            hi = min(lo + (1 - r) * upp + r * whole_units, (1 - r) * cut + r * total)
            for seg in range(lo // n_tiles, (hi - 1) // n_tiles + 1 if hi > lo else lo // n_tiles):
                seg_lo = max(seg * n_tiles, lo)
                tok = seg_lo // n_tiles
                t_lo, t_hi = seg_lo - tok * n_tiles, min((seg + 1) * n_tiles, hi) - tok * n_tiles
                for t in range(t_lo, t_hi):
                    assert (tok, t) not in seen
                    seen.add((tok, t))
                load += t_hi - t_lo
                if (t_lo, t_hi) != (0, n_tiles):
                    assert tok < left
                    slots.setdefault(tok, []).append(tok + seg_lo // upp)
        busiest = max(busiest, load)
    assert len(seen) == total
    for tok, got in slots.items():
        first, last = tok + (tok * n_tiles) // upp, tok + ((tok + 1) * n_tiles - 1) // upp
        assert sorted(got) == list(range(first, last + 1)) and last < left + parts
    return busiest


def build() -> None:
    """Check the partition's arithmetic at the timed points, then write the variant and compile it for sm_90 without
    a GPU (its default build and the one that merges cut tokens in the kernel)."""
    for tokens, n_tiles, parts in ((133, 10, 132), (200, 10, 132), (148, 18, 132), (134, 10, 132), (67, 18, 66)):
        print(f"{tokens} tokens of {n_tiles} tiles over {parts} parts: {spread(tokens, n_tiles, parts)} (whole tokens a"
              f" program, leftover tokens, tiles a cut run), busiest program {check_partition(tokens, n_tiles, parts)}"
              " tiles")  # fmt: skip
    variant = load_variant()
    for name, merge in (("default", False), ("merge", True)):
        k = variant.compile_sm90(merge=merge)
        print(f"variant ({name}): shared memory {k.metadata.shared} B, PTX {len(k.asm['ptx'])} characters")


def time_point(point: str, variant: ModuleType, reps: int, breakdown: bool = False) -> list[dict[str, Any]]:
    """The planner's plan, the variant on the planner's partition and (past a perfect fit) on the spread partition
    at one point, each checked against the fp64 reference, then timed; then the planner's plan again (the order's
    effect). ``breakdown``: each also timed with no combine launched (the split kernel and the API's host path)."""
    import torch

    from wavemla import get_mla_metadata, sparse_mla_decode
    from wavemla.kernels import combine as cb
    from wavemla.kernels import sparse_decode_ws as ws
    from wavemla.reference import sparse_decode_ref
    from wavemla.testing import TOLERANCES, check_close
    from wavemla.tools.bench import timings_us

    sys.path.insert(0, str(HERE))
    from merge_ab import decode_point

    m = re.fullmatch(r"(csa|hca)(?:-s(\d+))?(?:-h(\d+))?:(\d+)", point)
    if m is None:
        raise SystemExit(f"point {point!r}: expected MODE[-sN][-hN]:B")
    mode, s_q, heads, b = m.group(1), int(m.group(2) or 1), int(m.group(3) or 64), int(m.group(4))
    kw, _ = decode_point(mode, b, 0, seed=0, s_q=s_q, h=heads)
    rest = {k: v for k, v in kw.items() if k not in ("q", "kv_cache", "indices")}
    ref_o, ref_l = sparse_decode_ref(kw["q"], kw["kv_cache"], kw["indices"], **rest)
    meta, _ = get_mla_metadata()  # the planner's plan; where it cuts tokens, a workspace of b·s_q + parts slots
    sparse_mla_decode(**kw, metadata=meta)
    p = meta.plan
    assert p is not None
    n_tiles, tokens = p.n_tiles, b * s_q
    parts = torch.cuda.get_device_properties(0).multi_processor_count // (heads // 64)
    shape = spread(tokens, n_tiles, parts)
    shipped_split, shipped_combine = ws.sparse_decode_split_ws, cb.sparse_decode_combine
    combine_off = [False]

    def run_variant(**launch: Any) -> Any:
        return variant.sparse_decode_split_ws(**launch)

    def run_spread(**launch: Any) -> Any:
        assert shape is not None
        whole, left, upp = shape
        launch.pop("counts", None)
        launch.update(units_per_part=upp, num_parts=parts, cut_units=left * n_tiles, whole_units=whole * n_tiles)
        k = variant.sparse_decode_split_ws(**launch)
        if combine_off[0]:
            return k
        shipped_combine(
            out=launch["out"].view(tokens, 1, heads, 512)[:left], lse=launch["lse"].view(tokens, 1, heads)[:left],
            o_ws=launch["o_ws"], lse_ws=launch["lse_ws"], attn_sink=launch["attn_sink"], n_tiles=n_tiles,
            units_per_part=upp,
        )  # fmt: skip
        return k

    runs: list[tuple[str, Any]] = [("planner", None), ("variant, planner's partition", run_variant)]
    if shape is not None and meta.o_ws is not None and meta.o_ws.shape[0] >= shape[1] + parts:
        runs.append((f"spread W={shape[0]} L={shape[1]} U={shape[2]}", run_spread))
    runs.append(("planner, again", None))
    records = []
    for name, launcher in runs:
        ws.sparse_decode_split_ws = shipped_split if launcher is None else launcher
        # the spread run merges its cut tokens itself
        cb.sparse_decode_combine = (lambda **_: None) if launcher is run_spread else shipped_combine
        try:
            meta, _ = get_mla_metadata()
            out, lse = sparse_mla_decode(**kw, metadata=meta)
            bad = check_close("out", out, ref_o, TOLERANCES[("out", "gpu")]) or check_close(
                "lse", lse, ref_l, TOLERANCES[("lse", "gpu")]
            )
            call = lambda meta=meta: sparse_mla_decode(**kw, metadata=meta)  # noqa: E731
            med = timings_us(call, reps=reps, graph=True)[1]
            split = None
            if breakdown:  # outputs unmerged: timed, not checked
                combine_off[0] = True
                cb.sparse_decode_combine = lambda **_: None
                split = timings_us(lambda meta=meta: sparse_mla_decode(**kw, metadata=meta), reps=reps, graph=True)[1]
        except Exception as e:  # a failing run is reported, the others still run
            print(f"{point:14s} {name:34s} ERROR {str(e).splitlines()[0][:100]}", flush=True)
            continue
        finally:
            ws.sparse_decode_split_ws, cb.sparse_decode_combine = shipped_split, shipped_combine
            combine_off[0] = False
        without = f"  (no combine {split:6.1f} us)" if split is not None else ""
        print(
            f"{point:14s} {name:34s} {med:7.1f} us{without}  {'ok' if not bad else 'MISMATCH ' + bad[:60]}", flush=True
        )
        records.append(
            dict(point=point, run=name, plan=f"{p.config}:{p.units_per_part}", median_us=med, no_combine_us=split,
                 ok=not bad)
        )  # fmt: skip
    return records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", nargs="+", default=["csa:133", "hca:133", "csa-s2:67", "csa-h128:67"])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", default=None)
    ap.add_argument("--breakdown", action="store_true", help="also time each run with no combine launched")
    args = ap.parse_args()
    variant = load_variant()
    # launch replays off: a fresh metadata object would replay the first call's launches, not the swapped launcher's
    from wavemla import config

    with config.override(WAVEMLA_LAUNCH="triton"):
        records = [r for point in args.points for r in time_point(point, variant, args.reps, args.breakdown)]
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv, "records": records}, indent=1))


if __name__ == "__main__":
    if "--build" in sys.argv:
        build()
    else:
        main()
