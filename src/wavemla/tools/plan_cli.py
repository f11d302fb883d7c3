"""Show the planner's choice per batch size: tile shape, resources, occupancy, waves, tail efficiency, predicted time.

Runs anywhere (no GPU needed): ``--gpu`` names a DeviceSpec preset, or ``auto`` for the GPU this process sees (the
``WAVEMLA_GPU`` knob first). Shapes follow DeepSeek-V4 decode: a sliding window of ``--window`` rows (the main index
list) plus ``--topk`` compressed rows (CSA, default 512, or HCA, default 1024; SWA layers have none). For each batch
it prints the configuration, its shared memory and registers, programs per SM, programs, waves, tail efficiency
(the busy fraction of the launch's program slots), predicted time and predicted µs per request, and the reasons.
``--json`` prints the same as one JSON object; ``--png`` plots predicted µs per request against batch size.

``--mode dense`` plans the paged dense decode (DeepSeek-V3 / Kimi-K2 / GLM: d_qk ``--d-qk``, block tables of
``--seqlen`` keys in pages of ``--page`` rows, FP8 V3.2 or ``--bf16`` rows): per batch the tile, its resources,
programs per SM, the parts the device scheduler balances the keys over, programs, the segment overhead in tiles,
predicted time and the reasons. DeepSeek-V3.2's sparse decode runs this decode at page 1, one request per query
token (``--batch`` b·s_q, ``--seqlen`` its list width, 2048).

``--mode prefill`` plans the sparse prefill (FlashMLA's ``flash_mla_sparse_fwd``) for ``--tokens`` query tokens of
``--topk``-entry lists (default 640: DeepSeek-V4's window and picks) of ``--d-qk``-wide rows: per token count the
tile, its resources, programs per SM, the pieces a list is cut into, programs and waves, and the reasons (the
prefill's planner predicts no time).

Example::

    wavemla plan --gpu rtx-pro-6000 --heads 64 --topk 512 --batch 48 64 80 96
    wavemla plan --gpu h200 --mode hca --batch 1 8 64 256 --json
    wavemla plan --gpu rtx-pro-6000 --mode dense --heads 128 --seqlen 16384 --batch 1 32 128
    wavemla plan --gpu h200 --mode dense --heads 128 --seqlen 2048 --page 1 --batch 1 64 128
    wavemla plan --gpu rtx-5090 --mode prefill --tokens 64 1024 8192
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from wavemla.cli import blank_file_name, png_format
from wavemla.device import KIB, PRESETS, DeviceSpec, current_spec, get_spec, is_auto
from wavemla.plan import tiles_label

# Compressed index width per layer kind (DeepSeek-V4: CSA 512 and HCA 1024 as in FlashMLA's MODEL1 benchmark).
DEFAULT_TOPK = {"csa": 512, "hca": 1024, "swa": 0}
DEFAULT_WINDOW = 128
MODES = (*sorted(DEFAULT_TOPK), "dense", "prefill")
DEFAULT_SEQLEN = 4096  # dense: keys a block table holds (max_blocks · page)
DEFAULT_PAGE = 64  # dense: rows a cache page holds
DEFAULT_PREFILL_TOPK = DEFAULT_WINDOW + DEFAULT_TOPK["csa"]  # prefill: a DeepSeek-V4 token's window and picks
DEFAULT_TOKENS = [64, 1024, 4096, 16384]  # prefill: query tokens of a call
DEFAULT_BATCHES = [1, 8, 32, 48, 64, 80, 96, 128, 256]


def resolve_gpu(name: str) -> DeviceSpec:
    """A preset by name, or ``auto``: the ``WAVEMLA_GPU`` preset, else the CUDA device torch sees."""
    if is_auto(name):
        try:
            return current_spec()
        except (RuntimeError, ValueError) as exc:  # no CUDA device, one older than sm_80, a bad WAVEMLA_GPU
            raise ValueError(f"--gpu auto: {exc}") from None
    try:
        return get_spec(name)
    except ValueError as exc:
        raise ValueError(f"--gpu: {exc}") from None


def _check_counts(option: str, heads: int, values: list[int], noun: str) -> None:
    """The heads, and ``option``'s list of ``noun``s (batch sizes, token counts): at least one, each >= 1."""
    if not 1 <= heads <= 128:
        raise ValueError(f"--heads: expected 1..128 query heads, got {heads}")
    if not values:
        raise ValueError(f"{option}: give at least one {noun}")
    bad = [v for v in values if v < 1]
    if bad:
        raise ValueError(f"{option}: {noun}s must be >= 1, got {bad[0]}")


def _check_common(heads: int, s_q: int, batches: list[int], max_s_q: int | None = 4) -> None:
    """The checks every decode mode shares (ValueError naming the option): s_q 1..``max_s_q`` (the sparse decode's
    4; None: the dense decode, any s_q)."""
    if max_s_q is not None and not 1 <= s_q <= max_s_q:
        raise ValueError(f"--s-q: expected 1..{max_s_q} query tokens per request, got {s_q}")
    if s_q < 1:
        raise ValueError(f"--s-q: expected at least 1 query token per request, got {s_q}")
    _check_counts("--batch", heads, batches, "batch size")


def _config_fields(batch: int, p: Any, active: int | None = None) -> dict[str, Any]:
    """What every mode's rows report of a plan ``p`` (a Plan, DensePlan or PrefillPlan): its tile, resources and
    occupancy (``active``: programs resident on a busy SM where the plan does not say)."""
    res = p.resources
    return {
        "batch": batch,
        "config": str(p.config),
        **asdict(p.config),
        "smem_bytes": res.smem_bytes,
        "regs_per_thread": res.regs_per_thread,
        "stack_bytes": res.stack_bytes,
        "resources": res.source,
        "resources_note": res.note,
        "programs_per_sm": p.programs_per_sm,
        "active_per_sm": p.active_per_sm if active is None else active,
    }


def _prediction_fields(batch: int, p: Any) -> dict[str, Any]:
    """What both modes' rows report last: the predicted time, per request, and the plan's reasons."""
    return {"predicted_us": p.predicted_us, "us_per_request": p.predicted_us / batch, "reasons": list(p.reasons)}


def plan_rows(
    device: DeviceSpec,
    *,
    heads: int,
    batches: list[int],
    mode: str = "csa",
    topk: int | None = None,
    window: int = DEFAULT_WINDOW,
    s_q: int = 1,
    is_fp8: bool = True,
) -> list[dict[str, Any]]:
    """One row per batch size: the plan's choices and predictions (what ``wavemla plan --json`` prints).

    Raises ValueError naming the argument for bad input, and the planner's PlanError / KnobError.
    """
    from wavemla.plan import Workload, plan

    if mode not in DEFAULT_TOPK:
        raise ValueError(f"--mode: expected one of {', '.join(DEFAULT_TOPK)}, got {mode!r}")
    _check_common(heads, s_q, batches)
    if window < 1:
        raise ValueError(f"--window: expected >= 1 sliding-window rows, got {window}")
    if mode == "swa":
        if topk:
            raise ValueError("--topk: swa layers have no compressed cache; leave --topk out with --mode swa")
        extra = 0
    else:
        extra = DEFAULT_TOPK[mode] if topk is None else topk
        if extra < 1:
            raise ValueError(f"--topk: expected >= 1 compressed rows for --mode {mode}, got {extra}")
    rows = []
    for b in batches:
        p = plan(Workload(batch=b, s_q=s_q, h_q=heads, topk=window, extra_topk=extra, is_fp8=is_fp8), device)
        rows.append(
            {
                **_config_fields(b, p),
                "slots": p.slots,
                "programs": p.programs,
                "head_blocks": p.num_head_blocks,
                "tiles_per_token": p.n_tiles,
                "units_per_part": p.units_per_part,
                "whole_units": p.whole_units,
                "token_units": p.token_units,
                "combine": p.needs_combine,
                "ws_merge": p.ws_merge,
                "waves": p.waves,
                "tail_efficiency": p.tail_efficiency,
                "tile_us": p.tile_us,
                "combine_us": p.combine_us,
                **_prediction_fields(b, p),
            }
        )
    return rows


def dense_rows(
    device: DeviceSpec,
    *,
    heads: int,
    batches: list[int],
    seqlen: int = DEFAULT_SEQLEN,
    d_qk: int = 576,
    s_q: int = 1,
    is_fp8: bool = True,
    page: int = DEFAULT_PAGE,
) -> list[dict[str, Any]]:
    """One row per batch size of the dense decode's plan (what ``wavemla plan --mode dense --json`` prints).

    Raises ValueError naming the argument for bad input, and the planner's PlanError / KnobError.
    """
    from wavemla.plan import DenseWorkload, plan_dense

    _check_common(heads, s_q, batches, max_s_q=None)
    if seqlen < 1:
        raise ValueError(f"--seqlen: expected >= 1 keys per block table, got {seqlen}")
    if d_qk not in (576, 512):
        raise ValueError(f"--d-qk: expected 576 (512 latent + 64 rope) or 512, got {d_qk}")
    if is_fp8 and d_qk != 576:
        raise ValueError("--d-qk: the FP8 V3.2 cache holds 576-wide rows (add --bf16 for 512-wide rows)")
    if not 1 <= page <= 1024:
        raise ValueError(f"--page: expected 1..1024 rows per page, got {page}")
    rows = []
    for b in batches:
        workload = DenseWorkload(batch=b, s_q=s_q, h_q=heads, d_qk=d_qk, max_seqlen=seqlen, is_fp8=is_fp8, page=page)
        p = plan_dense(workload, device)
        rows.append(
            {
                **_config_fields(b, p),
                "row_blocks": p.num_row_blocks,
                "parts": p.num_parts,
                "programs": p.programs,
                "segment_overhead": p.segment_overhead,
                "cut_units": p.cut_units,
                "tile_us": p.tile_us,
                **_prediction_fields(b, p),
            }
        )
    return rows


def prefill_rows(
    device: DeviceSpec, *, heads: int, tokens: list[int], topk: int = DEFAULT_PREFILL_TOPK, d_qk: int = 512
) -> list[dict[str, Any]]:
    """One row per token count of the sparse prefill's plan (what ``wavemla plan --mode prefill --json`` prints).

    Raises ValueError naming the argument for bad input, and the planner's PlanError / KnobError.
    """
    from wavemla.plan import PREFILL_D_QK, PrefillWorkload, plan_sparse_prefill

    _check_counts("--tokens", heads, tokens, "token count")
    if topk < 1:
        raise ValueError(f"--topk: expected >= 1 list entries per token, got {topk}")
    if d_qk not in PREFILL_D_QK:
        raise ValueError(f"--d-qk: expected 512 (DeepSeek-V4) or 576 (DeepSeek-V3.2), got {d_qk}")
    rows = []
    for t in tokens:
        p = plan_sparse_prefill(PrefillWorkload(s_q=t, h_q=heads, topk=topk, d_qk=d_qk), device)
        slots = device.num_sms * p.programs_per_sm
        # the launch spreads its programs evenly: as many on a busy SM as its slots and the programs allow
        row = _config_fields(t, p, active=min(p.programs_per_sm, -(-p.programs // device.num_sms)))
        del row["batch"]  # a prefill call has query tokens, not requests
        row.update({"tokens": t, "head_blocks": -(-heads // p.block_h), "splits": p.splits,
                    "piece_tiles": p.piece_tiles, "programs": p.programs, "waves": -(-p.programs // slots),
                    "reasons": list(p.reasons)})  # fmt: skip
        rows.append(row)
    return rows


# The text table's columns: (header, alignment and width, the value's format spec, the value of a row).
_Column = tuple[str, str, str, Callable[[dict[str, Any]], Any]]
_HEAD: list[_Column] = [
    ("b", ">5", "", lambda r: r["batch"]),
    ("config", "<11", "", lambda r: r["config"]),
    ("smem KB", ">7", ".1f", lambda r: r["smem_bytes"] / KIB),
    ("regs", ">4", "", lambda r: r["regs_per_thread"]),
    ("prog/SM", ">7", "", lambda r: r["programs_per_sm"]),
]
_TAIL: list[_Column] = [
    ("pred us", ">8", ".1f", lambda r: r["predicted_us"]),
    ("us/req", ">7", ".2f", lambda r: r["us_per_request"]),
]


_SPARSE_COLUMNS: list[_Column] = [
    *_HEAD,
    ("programs", ">8", "", lambda r: r["programs"]),
    ("waves", ">5", "", lambda r: r["waves"]),
    ("tail", ">5", ".2f", lambda r: r["tail_efficiency"]),
    # a spread plan: its run of the leftover tokens' tiles, then its whole tokens' tiles; a padded plan: its tiles,
    # then the units a token occupies
    (
        "tiles/prog",
        ">10",
        "",
        lambda r: tiles_label(r["units_per_part"], r["whole_units"], r["token_units"]),
    ),
    ("combine", ">7", "", lambda r: "yes" if r["combine"] else "no"),
    *_TAIL,
]
_PREFILL_COLUMNS: list[_Column] = [
    ("tokens", ">6", "", lambda r: r["tokens"]),
    *_HEAD[1:],
    ("head blocks", ">11", "", lambda r: r["head_blocks"]),
    # pieces each token's list is cut into, and their tiles (a short call's lists are cut to fill the GPU)
    ("pieces", ">8", "", lambda r: f"{r['splits']}x{r['piece_tiles']}" if r["splits"] > 1 else "1"),
    ("programs", ">8", "", lambda r: r["programs"]),
    ("waves", ">5", "", lambda r: r["waves"]),
]
_DENSE_COLUMNS: list[_Column] = [
    *_HEAD,
    ("parts", ">5", "", lambda r: r["parts"]),
    ("programs", ">8", "", lambda r: r["programs"]),
    ("seg tiles", ">9", "", lambda r: r["segment_overhead"]),
    *_TAIL,
]


def format_text(device: DeviceSpec, workload: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    mode = workload["mode"]
    columns = {"dense": _DENSE_COLUMNS, "prefill": _PREFILL_COLUMNS}.get(mode, _SPARSE_COLUMNS)
    head = " ".join(f"{name:{width}}" for name, width, _, _ in columns)
    basis = "the prefill's planner counts programs and slots (tiles, pieces, head blocks); it predicts no time"
    if mode != "prefill":
        basis = _decode_basis(device, workload)
    lines = [device.summary(), _describe(workload), basis, "", head]
    lines.extend(" ".join(f"{value(r):{width}{spec}}" for _, width, spec, value in columns) for r in rows)
    for r in rows:
        lines.append("")
        label = f"tokens={r['tokens']}" if mode == "prefill" else f"b={r['batch']}"
        lines.append(f"{label}: why {r['config']}")
        lines.extend(f"  - {reason}" for reason in r["reasons"])
    return "\n".join(lines)


def _decode_basis(device: DeviceSpec, workload: dict[str, Any]) -> str:
    """What a decode workload's predicted times rest on (:func:`wavemla.plan.prediction_basis`)."""
    from wavemla.plan import prediction_basis

    return prediction_basis(device, dense_fp8=workload["mode"] == "dense" and workload["fp8"])


def _describe(w: dict[str, Any]) -> str:
    if w["mode"] == "prefill":
        model = "DeepSeek-V4" if w["d_qk"] == 512 else "DeepSeek-V3.2"
        return (
            f"PREFILL (flash_mla_sparse_fwd): h={w['heads']}, {w['topk']}-entry lists, d_qk {w['d_qk']} ({model}), "
            "16-bit rows"
        )
    if w["mode"] == "dense":
        cache = "FP8 V3.2" if w["fp8"] else "bf16 rows"
        return (
            f"DENSE decode: h={w['heads']}, s_q={w['s_q']}, d_qk {w['d_qk']}, {w['seqlen']} keys per block table, "
            f"pages of {w['page']}, {cache} cache"
        )
    cache = "FP8 MODEL1" if w["fp8"] else "bf16 rows"
    extra = f" + {w['topk']} compressed rows" if w["topk"] else ""
    return (
        f"{w['mode'].upper()} decode: h={w['heads']}, s_q={w['s_q']}, window {w['window']} rows{extra}, {cache} cache"
    )


CURVE_POINTS = 2048  # batch sizes the --png curve plans at most: every one up to this, evenly spaced beyond


def curve_batches(top: int) -> list[int]:
    """The batch sizes 1..``top`` that ``--png``'s curve plans: each one up to :data:`CURVE_POINTS`, else evenly
    spaced ones ending at ``top`` (planning every batch size up to a huge ``--batch`` would run for hours)."""
    step = -(-top // CURVE_POINTS)
    return sorted({*range(1, top + 1, step), top})


def render_png(
    device: DeviceSpec, workload: dict[str, Any], rows: list[dict[str, Any]], curve: list[dict[str, Any]], path: str
) -> None:
    """Predicted µs per request against batch size: the full curve, the requested batches marked."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # an optional dependency (the `tools` extra)
        raise ValueError(f"--png: needs matplotlib (pip install 'wavemla[tools]'): {exc}") from None

    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([r["batch"] for r in curve], [r["us_per_request"] for r in curve], lw=1.5, label="planner prediction")
    ax.plot([r["batch"] for r in rows], [r["us_per_request"] for r in rows], "o", label="requested batches")
    for r in rows:
        ax.annotate(
            r["config"], (r["batch"], r["us_per_request"]), textcoords="offset points", xytext=(4, 6), fontsize=7
        )
    ax.set_xlabel("batch (requests)")
    ax.set_ylabel("predicted µs per request")
    ax.set_title(f"{device.display_name}\n{_describe(workload)}", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format=png_format(path))
    except (OSError, ValueError) as exc:  # a missing directory, no permission, a format matplotlib cannot write
        raise ValueError(f"--png: {exc}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu",
        default="auto",
        help=f"DeviceSpec preset ({', '.join(PRESETS)}) or 'auto' (default): the WAVEMLA_GPU preset, else this GPU",
    )
    parser.add_argument("--heads", type=int, default=64, help="query heads h_q (default 64)")
    parser.add_argument(
        "--topk",
        type=int,
        default=None,
        help="compressed rows per token (default: 512 for csa, 1024 for hca; none for swa); prefill: list entries "
        f"per token (default {DEFAULT_PREFILL_TOPK})",
    )
    parser.add_argument(
        "--seqlen",
        type=int,
        default=None,
        help=f"dense: keys a request's block table holds (max_blocks x page; default {DEFAULT_SEQLEN})",
    )
    parser.add_argument(
        "--page",
        type=int,
        default=None,
        help=f"dense: rows a cache page holds (1..1024; default {DEFAULT_PAGE}; DeepSeek-V3.2's sparse decode: 1)",
    )
    parser.add_argument(
        "--d-qk", type=int, default=None, help="dense: key width, 576 (default) or 512; prefill: 512 (default) or 576"
    )
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=None,
        help=f"prefill: query tokens of a call (default {' '.join(map(str, DEFAULT_TOKENS))})",
    )
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=None,
        help=f"batch sizes (requests; default {' '.join(map(str, DEFAULT_BATCHES))})",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="csa",
        help="layer kind (default csa), dense: the paged dense decode, or prefill: the sparse prefill",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        help=f"sliding-window rows per token, the main index list (default {DEFAULT_WINDOW})",
    )
    parser.add_argument("--s-q", type=int, default=1, help="query tokens per request (MTP: 2; default 1)")
    parser.add_argument(
        "--bf16", action="store_true", help="bf16 row caches instead of FP8 (MODEL1 sparse, V3.2 dense)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--png", metavar="FILE", help="plot predicted µs per request vs batch to this PNG")


def run(args: argparse.Namespace) -> int:
    """Print the plans; 2 with a message on stderr for bad arguments or a plan that cannot be made."""
    from wavemla.config import KnobError
    from wavemla.plan import PlanError

    mode = args.mode
    dense, prefill = mode == "dense", mode == "prefill"
    if dense:
        seqlen = DEFAULT_SEQLEN if args.seqlen is None else args.seqlen
        d_qk = 576 if args.d_qk is None else args.d_qk
        page = DEFAULT_PAGE if args.page is None else args.page
        workload = {"mode": "dense", "heads": args.heads, "seqlen": seqlen, "d_qk": d_qk, "s_q": args.s_q,
                    "fp8": not args.bf16, "page": page}  # fmt: skip
    elif prefill:
        workload = {"mode": "prefill", "heads": args.heads, "d_qk": 512 if args.d_qk is None else args.d_qk,
                    "topk": DEFAULT_PREFILL_TOPK if args.topk is None else args.topk}  # fmt: skip
    else:
        window = DEFAULT_WINDOW if args.window is None else args.window
        workload = {
            "mode": mode,
            "heads": args.heads,
            "window": window,
            "topk": 0 if mode == "swa" else (DEFAULT_TOPK[mode] if args.topk is None else args.topk),
            "s_q": args.s_q,
            "fp8": not args.bf16,
        }
    try:
        # each option with the modes it belongs to
        decode = (*DEFAULT_TOPK, "dense")
        owners = {"--seqlen": ("dense",), "--page": ("dense",), "--d-qk": ("dense", "prefill"),
                  "--window": tuple(DEFAULT_TOPK), "--topk": (*DEFAULT_TOPK, "prefill"), "--tokens": ("prefill",),
                  "--batch": decode, "--s-q": decode, "--bf16": decode, "--png": decode}  # fmt: skip
        given = {"--seqlen": args.seqlen, "--page": args.page, "--d-qk": args.d_qk, "--window": args.window,
                 "--topk": args.topk, "--tokens": args.tokens, "--batch": args.batch,
                 "--s-q": None if args.s_q == 1 else args.s_q, "--bf16": args.bf16 or None,
                 "--png": args.png}  # fmt: skip
        for name, value in given.items():
            if value is not None and mode not in owners[name]:
                raise ValueError(
                    f"{name}: not an option of --mode {mode} (it is one of --mode {', '.join(owners[name])})"
                )
        blank = blank_file_name("--png", args.png)
        if blank is not None:
            raise ValueError(blank)
        device = resolve_gpu(args.gpu)
        make: Callable[..., list[dict[str, Any]]]
        batches = list(DEFAULT_BATCHES if args.batch is None else args.batch)
        if prefill:
            tokens = list(DEFAULT_TOKENS if args.tokens is None else args.tokens)
            rows = prefill_rows(device, heads=args.heads, tokens=tokens, topk=workload["topk"], d_qk=workload["d_qk"])
        else:
            if dense:
                kw: dict[str, Any] = {"heads": args.heads, "seqlen": workload["seqlen"], "d_qk": workload["d_qk"],
                                      "s_q": args.s_q, "is_fp8": not args.bf16, "page": workload["page"]}  # fmt: skip
                make = functools.partial(dense_rows, device, **kw)
            else:
                kw = {"heads": args.heads, "mode": mode, "topk": args.topk, "window": workload["window"],
                      "s_q": args.s_q, "is_fp8": not args.bf16}  # fmt: skip
                make = functools.partial(plan_rows, device, **kw)
            rows = make(batches=batches)
            if args.png:
                curve = make(batches=curve_batches(max(batches)))
                render_png(device, workload, rows, curve, args.png)
    except (ValueError, PlanError, KnobError) as exc:
        print(f"wavemla plan: {exc}", file=sys.stderr)
        return 2
    if args.json:
        basis = "none: the prefill's planner counts programs and slots" if prefill else _decode_basis(device, workload)
        info = {"device": asdict(device), "workload": workload, "prediction_basis": basis, "plans": rows}
        print(json.dumps(info, indent=2))
    else:
        print(format_text(device, workload, rows))
        if args.png:
            print(f"\nwrote {args.png}")
    return 0
