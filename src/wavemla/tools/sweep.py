"""Concurrency sweep of an OpenAI-compatible server: tok/s, tok/s per user, TTFT, TPOT, ITL, E2E per level.

For each concurrency level ``c`` a closed loop keeps ``c`` streaming requests in flight: ``--warmup`` requests
first (default ``c``), then ``--num-requests`` measured requests (default ``5 × c``), then filler requests
that hold the load until the last measured request has finished; the fillers are then cancelled. The
measured window runs from the send of the first measured request to the end of the last one, so the ramp-up
burst is outside it and the concurrency inside it is ``c`` throughout.

Results go to ``--out`` as they are measured: ``sweep.json`` is rewritten after every level, one row per level
is appended to ``sweep.csv``, ``requests.jsonl`` gets one line per measured request when ``--save-requests``
is given, and ``sweep.png`` (output tok/s vs concurrency; output tok/s vs tok/s per user) is drawn at the end,
also when a level fails. A level whose output tok/s is below that of a lower concurrency level (by more than
``--cliff-tolerance``) is flagged "suspected wave cliff or queueing".

Exit codes: 0 swept (failed requests are counted, not fatal); 2 bad arguments; 3 the server could not be
reached or rejected the first request.

Example::

    wavemla sweep --url http://127.0.0.1:30000 --concurrency 48 64 80 96 --input-len 1024 --output-len 256 \\
        --ignore-eos --out sweep-dsv4
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import datetime as _dt
import json
import math
import os
import random
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from wavemla.cli import blank_file_name
from wavemla.tools.openai_client import (
    ENDPOINT_PATHS,
    OpenAIClient,
    RequestRecord,
    RequestSpec,
    ServerUnreachableError,
    UsageError,
    check_endpoint,
    check_timeout,
    closed_loop,
    error_counts,
    normalize_base_url,
    resolve_model,
    summarize,
)

# Printed by --help and written into sweep.json, so a result file explains its own numbers.
DEFINITIONS: dict[str, str] = {
    "output tokens": "usage.completion_tokens from the server when it sends usage, else the number of "
    "output chunks; content, reasoning_content and tool_calls deltas all count as output; in output_tok_s "
    "a request without usage (a filler cancelled at the end of the window) counts the tokens per chunk of "
    "the level's requests with usage",
    "window": "from the send of the first measured request to the end of the last measured request; "
    "the closed loop holds the concurrency at c inside it (warm-up before, fillers after)",
    "output_tok_s": "output tokens whose chunk arrived inside the window (from any request in flight), "
    "divided by the window length; mean/median/p90/p99 are over equal slices of the window of about "
    "--bucket-s seconds",
    "tok_s_per_user": "per measured request, (tokens - 1) / (E2E - TTFT): the decode rate one user sees "
    "after the first token (1/TPOT); aggregate_tok_s_per_user is output_tok_s / c",
    "ttft_ms": "per measured request, send to the first output chunk",
    "tpot_ms": "per measured request, (E2E - TTFT) / (tokens - 1); requests with fewer than 2 tokens "
    "skipped; statistics are over requests (request-weighted)",
    "itl_ms": "every gap between consecutive output chunks of a measured request, pooled over all "
    "measured requests; per chunk, not per token",
    "e2e_ms": "per measured request, send to the end of its stream",
    "statistics": "mean, median, p90, p99 (linear interpolation) over successful measured requests",
    "cliff flag": "a level whose output_tok_s is below (1 - cliff_tolerance) x that of some lower "
    "concurrency level: suspected wave cliff or queueing",
}

# Random prompts draw words from this list; a number up front keeps prefix caches from sharing prompts.
_WORDS: tuple[str, ...] = tuple(
    " ".join(
        (
            "time person year way day thing man world life hand part child eye woman place work week case",
            "point number group problem fact water room mother area money story month lot right study book",
            "job word business issue side kind head house service friend father power hour game line end",
            "member law car city community name president team minute idea kid body information back",
            "parent face others level office door health art war history party result change morning",
            "reason research girl guy moment air teacher force education kernel attention decode cache",
            "page index sparse latent wave batch token prompt stream model server",
        )
    ).split()
)

_CSV_STATS = ("mean", "median", "p90", "p99")
_CSV_METRICS = ("tok_s_per_user", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
_MIN_BUCKET_S = 1e-3


@dataclass(frozen=True)
class PromptItem:
    """One prompt: chat ``messages`` or completions ``prompt``, with optional per-prompt overrides."""

    messages: tuple[dict[str, Any], ...] | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True)
class SweepConfig:
    """What ``wavemla sweep`` measures; field names match the command-line flags."""

    url: str
    concurrency: tuple[int, ...]
    endpoint: str = "chat"
    model: str | None = None
    num_requests: int | None = None
    warmup: int | None = None
    input_len: int = 128
    output_len: int = 128
    prompts: str | None = None
    ignore_eos: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    temperature: float | None = None
    seed: int = 0
    timeout: float = 600.0
    include_usage: bool = True
    out: str = "sweep-results"
    plot: bool = True
    save_requests: bool = False
    cliff_tolerance: float = 0.03
    bucket_s: float = 1.0

    def validate(self) -> None:
        """Raise :class:`UsageError` naming the flag of the first unusable value."""
        normalize_base_url(self.url)
        check_endpoint(self.endpoint)
        if blank_file_name("--out", self.out, "directory") is not None:  # "" would write into the current directory
            raise UsageError("--out", "expected a directory name, got an empty one")
        if not self.concurrency:
            raise UsageError("--concurrency", "give at least one level")
        for c in self.concurrency:
            if c < 1:
                raise UsageError("--concurrency", f"levels must be >= 1, got {c}")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise UsageError("--concurrency", f"levels repeat: {list(self.concurrency)}")
        if self.num_requests is not None and self.num_requests < 1:
            raise UsageError("--num-requests", f"must be >= 1, got {self.num_requests}")
        if self.warmup is not None and self.warmup < 0:
            raise UsageError("--warmup", f"must be >= 0, got {self.warmup}")
        if self.input_len < 1:
            raise UsageError("--input-len", f"must be >= 1, got {self.input_len}")
        if self.output_len < 1:
            raise UsageError("--output-len", f"must be >= 1, got {self.output_len}")
        check_timeout(self.timeout)
        if not 0 <= self.cliff_tolerance < 1:
            raise UsageError("--cliff-tolerance", f"must be in [0, 1), got {self.cliff_tolerance}")
        # Shorter slices would time network packets, not throughput, and a window of seconds cut into
        # them needs a list of that many slices.
        if not (self.bucket_s >= _MIN_BUCKET_S and math.isfinite(self.bucket_s)):
            raise UsageError("--bucket-s", f"must be a finite number >= {_MIN_BUCKET_S:g}, got {self.bucket_s}")
        if self.temperature is not None and not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise UsageError("--temperature", f"must be a finite number >= 0, got {self.temperature}")

    def requests_for(self, c: int) -> int:
        return self.num_requests if self.num_requests is not None else 5 * c

    def warmup_for(self, c: int) -> int:
        return self.warmup if self.warmup is not None else c


# ----- prompts -----


def random_prompt(seed: str, n_words: int) -> str:
    """``n_words`` random words after a request number; deterministic in ``seed``."""
    rng = random.Random(seed)
    return f"{seed}: " + " ".join(rng.choice(_WORDS) for _ in range(n_words))


def load_prompts(path: str | os.PathLike[str], endpoint: str) -> list[PromptItem]:
    """Read prompts, one per line: a JSON string, a JSON object with ``prompt`` or ``messages`` (and optional
    ``max_tokens``, ``tools``), or plain text (a line that JSON reads as a number, true, false, null or an array is
    text too). Blank lines and a leading byte-order mark are skipped. Errors name ``--prompts``."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise UsageError("--prompts", f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError("--prompts", f"{str(p)!r} is not UTF-8 text (byte {exc.start})") from None
    items: list[PromptItem] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj: Any = json.loads(line)
        except ValueError:
            obj = line
        except RecursionError:  # JSON nested past the parser's depth: no prompt either way
            raise UsageError("--prompts", f"{p}:{lineno}: JSON nested too deeply to parse") from None
        if not isinstance(obj, (str, dict)):  # "42", "true", "[1, 2]": text that happens to be JSON
            obj = line
        items.append(_prompt_item(obj, endpoint, f"{p}:{lineno}"))
    if not items:
        raise UsageError("--prompts", f"no prompts in {str(p)!r}")
    return items


def _prompt_item(obj: Any, endpoint: str, where: str) -> PromptItem:
    text: str | None
    if isinstance(obj, str):
        text = obj
        messages: tuple[dict[str, Any], ...] | None = None
    elif isinstance(obj, dict) and ("prompt" in obj or "messages" in obj):
        text = obj.get("prompt")
        raw_messages = obj.get("messages")
        if raw_messages is not None and (
            not isinstance(raw_messages, list) or not all(isinstance(m, dict) for m in raw_messages)
        ):
            raise UsageError("--prompts", f"{where}: 'messages' must be a list of objects")
        messages = tuple(raw_messages) if raw_messages is not None else None
        if text is not None and not isinstance(text, str):
            raise UsageError("--prompts", f"{where}: 'prompt' must be a string")
    else:
        raise UsageError("--prompts", f"{where}: expected text, a JSON string or an object with prompt/messages")
    max_tokens = obj.get("max_tokens") if isinstance(obj, dict) else None
    # bool is an int subclass: JSON true must not pass as max_tokens 1.
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise UsageError("--prompts", f"{where}: 'max_tokens' must be a positive integer")
    tools = obj.get("tools") if isinstance(obj, dict) else None
    if tools is not None and not isinstance(tools, list):
        raise UsageError("--prompts", f"{where}: 'tools' must be a list")
    if endpoint == "completions":
        if text is None:
            raise UsageError("--prompts", f"{where}: the completions endpoint needs 'prompt', not 'messages'")
        return PromptItem(prompt=text, max_tokens=max_tokens)
    if messages is None:
        messages = ({"role": "user", "content": text},)
    return PromptItem(messages=messages, max_tokens=max_tokens, tools=tuple(tools) if tools else None)


def make_spec(cfg: SweepConfig, item: PromptItem) -> RequestSpec:
    extra = dict(cfg.extra_body)
    if cfg.ignore_eos:
        extra.setdefault("ignore_eos", True)
    return RequestSpec(
        endpoint=cfg.endpoint,
        messages=item.messages,
        prompt=item.prompt,
        max_tokens=item.max_tokens or cfg.output_len,
        temperature=cfg.temperature,
        tools=item.tools,
        include_usage=cfg.include_usage,
        extra_body=extra,
    )


class PromptSource:
    """The i-th prompt of a level: from the file (cycled) or a fresh random one."""

    def __init__(self, cfg: SweepConfig, items: list[PromptItem] | None) -> None:
        self.cfg = cfg
        self.items = items

    def spec(self, c: int, i: int) -> RequestSpec:
        if self.items is not None:
            return make_spec(self.cfg, self.items[(i + c) % len(self.items)])
        text = random_prompt(f"{self.cfg.seed}-{c}-{i}", self.cfg.input_len)
        if self.cfg.endpoint == "completions":
            return make_spec(self.cfg, PromptItem(prompt=text))
        return make_spec(self.cfg, PromptItem(messages=({"role": "user", "content": text},)))


# ----- metrics (pure) -----


@dataclass
class LevelRun:
    """The raw outcome of one level: every record and the measured window."""

    concurrency: int
    warmup: list[RequestRecord]
    measured: list[RequestRecord]
    others: list[RequestRecord]
    window: tuple[float, float]
    wall_s: float


def tokens_per_chunk(records: Sequence[RequestRecord]) -> float:
    """Server-reported tokens per output chunk over the records that have usage and output; 1.0 if none."""
    with_usage = [r for r in records if r.completion_tokens is not None and r.chunk_times]
    chunks = sum(len(r.chunk_times) for r in with_usage)
    return sum(r.completion_tokens or 0 for r in with_usage) / chunks if chunks else 1.0


def chunk_tokens(r: RequestRecord, per_chunk: float = 1.0) -> list[tuple[float, float]]:
    """``(arrival_time, tokens)`` per output chunk. With server usage each chunk carries
    ``completion_tokens / chunks`` (servers may pack several tokens per chunk, or stream tokens that decode to
    no text); usage without any output chunk is placed at the end of the stream. Without usage (a request
    cancelled or broken before its usage arrived), ``per_chunk`` each: :func:`tokens_per_chunk` of the level."""
    n = len(r.chunk_times)
    if r.completion_tokens is None:
        return [(t, per_chunk) for t in r.chunk_times]
    if n == 0:
        return [(r.end, float(r.completion_tokens))] if r.completion_tokens and not math.isnan(r.end) else []
    weight = r.completion_tokens / n
    return [(t, weight) for t in r.chunk_times]


def tokens_in_window(records: Sequence[RequestRecord], t0: float, t1: float, per_chunk: float = 1.0) -> float:
    """Output tokens whose chunks arrived in ``[t0, t1]`` (see :func:`chunk_tokens`)."""
    return math.fsum(w for r in records for t, w in chunk_tokens(r, per_chunk) if t0 <= t <= t1)


def bucket_rates(
    records: Sequence[RequestRecord], t0: float, t1: float, bucket_s: float, per_chunk: float = 1.0
) -> list[float]:
    """Output tok/s in equal slices of ``[t0, t1]`` about ``bucket_s`` long (at least one slice)."""
    length = t1 - t0
    if not length > 0:
        return []
    n = max(1, round(length / bucket_s))
    width = length / n
    tokens = [0.0] * n
    for r in records:
        for t, w in chunk_tokens(r, per_chunk):
            if t0 <= t <= t1:
                # Half-open slices, the last one closed, so a chunk on an edge is counted once.
                tokens[min(int((t - t0) / width), n - 1)] += w
    return [x / width for x in tokens]


def level_metrics(run: LevelRun, bucket_s: float = 1.0) -> dict[str, Any]:
    """Every metric of one level, as written to sweep.json (see :data:`DEFINITIONS`)."""
    c = run.concurrency
    t0, t1 = run.window
    window = t1 - t0
    everything = [*run.warmup, *run.measured, *run.others]
    ok = [r for r in run.measured if r.ok]
    per_chunk = tokens_per_chunk(everything)
    tokens = tokens_in_window(everything, t0, t1, per_chunk) if window > 0 else 0.0
    tok_s = tokens / window if window > 0 else math.nan
    per_user = [(r.output_tokens - 1) / (r.latency - r.ttft) for r in ok if r.tpot > 0]
    with_usage = sum(1 for r in ok if r.usage_from_server)
    usage_source = "none" if not ok else "server" if with_usage == len(ok) else "chunks" if not with_usage else "mixed"
    return {
        "concurrency": c,
        "requests": len(run.measured),
        "warmup_requests": len(run.warmup),
        "completed": len(ok),
        "failed": len(run.measured) - len(ok),
        "errors": error_counts(run.measured),
        "warmup_errors": error_counts(run.warmup),
        "filler_errors": {k: v for k, v in error_counts(run.others).items() if k != "cancelled"},
        "window_s": window,
        "wall_s": run.wall_s,
        "output_tokens_in_window": tokens,
        "output_tok_s": tok_s,
        "output_tok_s_slices": summarize(bucket_rates(everything, t0, t1, bucket_s, per_chunk)),
        "requests_per_s": len(ok) / window if window > 0 else math.nan,
        "aggregate_tok_s_per_user": tok_s / c,
        "tok_s_per_user": summarize(per_user),
        "ttft_ms": summarize([r.ttft for r in ok], 1e3),
        "tpot_ms": summarize([r.tpot for r in ok], 1e3),
        "itl_ms": summarize([g for r in ok for g in r.itls], 1e3),
        "e2e_ms": summarize([r.latency for r in ok], 1e3),
        "input_tokens": summarize([float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]),
        "output_tokens": summarize([float(r.output_tokens) for r in ok]),
        "usage_source": usage_source,
        "flags": [],
    }


def flag_levels(levels: list[dict[str, Any]], tolerance: float) -> None:
    """Set each level's ``flags``: no completed request, failed requests, and the wave-cliff/queueing flag."""
    for lv in levels:
        flags = []
        if lv["completed"] == 0:
            flags.append("no request completed")
        elif lv["failed"]:
            kinds = ", ".join(f"{k} {n}" for k, n in lv["errors"].items())
            flags.append(f"{lv['failed']} of {lv['requests']} requests failed ({kinds})")
        lower = [
            o
            for o in levels
            if o["concurrency"] < lv["concurrency"] and o["completed"] > 0 and _finite(o["output_tok_s"])
        ]
        if lv["completed"] > 0 and _finite(lv["output_tok_s"]) and lower:
            best = max(lower, key=lambda o: o["output_tok_s"])
            if lv["output_tok_s"] < (1.0 - tolerance) * best["output_tok_s"]:
                flags.append(
                    f"suspected wave cliff or queueing: {lv['output_tok_s']:.1f} tok/s at "
                    f"c={lv['concurrency']} < {best['output_tok_s']:.1f} tok/s at c={best['concurrency']}"
                )
        lv["flags"] = flags


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def csv_row(level: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        k: level[k]
        for k in (
            "concurrency",
            "requests",
            "completed",
            "failed",
            "window_s",
            "output_tok_s",
            "requests_per_s",
        )
    }
    for s in _CSV_STATS:
        row[f"output_tok_s_{s}"] = level["output_tok_s_slices"][s]
    row["aggregate_tok_s_per_user"] = level["aggregate_tok_s_per_user"]
    for m in _CSV_METRICS:
        for s in _CSV_STATS:
            row[f"{m}_{s}"] = level[m][s]
    row["usage_source"] = level["usage_source"]
    row["errors"] = ";".join(f"{k}={v}" for k, v in level["errors"].items())
    row["flags"] = " | ".join(level["flags"])
    return row


CSV_FIELDS: tuple[str, ...] = (
    "concurrency",
    "requests",
    "completed",
    "failed",
    "window_s",
    "output_tok_s",
    "requests_per_s",
    *(f"output_tok_s_{s}" for s in _CSV_STATS),
    "aggregate_tok_s_per_user",
    *(f"{m}_{s}" for m in _CSV_METRICS for s in _CSV_STATS),
    "usage_source",
    "errors",
    "flags",
)


# ----- output -----


class ResultWriter:
    """Writes sweep.json (atomically, whole), sweep.csv (appended per level) and requests.jsonl.

    The files of an earlier run in the same directory are left alone until this run writes its first file, so a
    sweep that fails before it has measured anything does not destroy them."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(out_dir)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError("--out", f"cannot create {str(self.dir)!r}: {exc.strerror or exc}") from None
        self.json_path = self.dir / "sweep.json"
        self.csv_path = self.dir / "sweep.csv"
        self.requests_path = self.dir / "requests.jsonl"
        self.png_path = self.dir / "sweep.png"
        self.started = False

    def _start(self) -> None:
        """Clear the earlier run's files, once, before this run's first write."""
        if self.started:
            return
        self.started = True
        self._write_csv([])
        self.requests_path.unlink(missing_ok=True)
        self.png_path.unlink(missing_ok=True)

    def write_json(self, doc: dict[str, Any]) -> None:
        self._start()
        tmp = self.json_path.with_suffix(".json.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(json_safe(doc), f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.json_path)

    def append_csv(self, level: dict[str, Any]) -> None:
        self._start()
        with self.csv_path.open("a", newline="", encoding="utf-8") as f:
            csv.DictWriter(f, fieldnames=CSV_FIELDS).writerow(_csv_cells(csv_row(level)))
            f.flush()
            os.fsync(f.fileno())

    def rewrite_csv(self, levels: list[dict[str, Any]]) -> None:
        """Rewrite with final flags (a later level can flag nothing earlier, but order may be descending)."""
        self._start()
        self._write_csv(levels)

    def _write_csv(self, levels: list[dict[str, Any]]) -> None:
        tmp = self.csv_path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            w.writeheader()
            for lv in levels:
                w.writerow(_csv_cells(csv_row(lv)))
        os.replace(tmp, self.csv_path)

    def append_requests(self, run: LevelRun) -> None:
        self._start()
        with self.requests_path.open("a", encoding="utf-8") as f:
            for r in run.measured:
                f.write(json.dumps(json_safe(request_row(run.concurrency, r, run.window[0]))) + "\n")


def request_row(c: int, r: RequestRecord, t0: float) -> dict[str, Any]:
    return {
        "concurrency": c,
        "index": r.index,
        "start_s": r.start - t0,
        "ok": r.ok,
        "error": r.error_kind,
        "error_detail": r.error_detail or None,
        "ttft_ms": r.ttft * 1e3,
        "tpot_ms": r.tpot * 1e3,
        "e2e_ms": r.latency * 1e3,
        "output_tokens": r.output_tokens,
        "chunks": len(r.chunk_times),
        "prompt_tokens": r.prompt_tokens,
        "finish_reason": r.finish_reason,
    }


def _csv_cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v) for k, v in row.items()}


def json_safe(obj: Any) -> Any:
    """NaN and inf become null: strict JSON readers reject them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_plot(levels: list[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Two panels: output tok/s vs concurrency (flagged levels marked); output tok/s vs tok/s per user."""
    from matplotlib.figure import Figure

    pts = [lv for lv in levels if _finite(lv["output_tok_s"])]
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    pts_by_c = sorted(pts, key=lambda lv: lv["concurrency"])
    xs = [lv["concurrency"] for lv in pts_by_c]
    ys = [lv["output_tok_s"] for lv in pts_by_c]
    ax1.plot(xs, ys, marker="o")
    cliffs = [lv for lv in pts_by_c if any(f.startswith("suspected wave cliff") for f in lv["flags"])]
    if cliffs:
        ax1.scatter(
            [lv["concurrency"] for lv in cliffs],
            [lv["output_tok_s"] for lv in cliffs],
            marker="x",
            s=120,
            color="red",
            zorder=3,
            label="suspected wave cliff or queueing",
        )
        ax1.legend(loc="best")
    ax1.set_xlabel("concurrency (requests in flight)")
    ax1.set_ylabel("output tok/s")
    ax1.set_title("Throughput vs concurrency")
    ax1.grid(True, alpha=0.3)
    users = [(lv["tok_s_per_user"]["median"], lv["output_tok_s"], lv["concurrency"]) for lv in pts_by_c]
    users = [u for u in users if u[0] is not None]
    ax2.plot([u[0] for u in users], [u[1] for u in users], marker="o")
    for x, y, c in users:
        ax2.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax2.set_xlabel("tok/s per user (median of 1/TPOT)")
    ax2.set_ylabel("output tok/s")
    ax2.set_title("Throughput vs interactivity")
    ax2.grid(True, alpha=0.3)
    fig.savefig(os.fspath(path), dpi=110)


# ----- progress -----


class Progress:
    """One status line on a terminal (rewritten in place), a few milestone lines otherwise."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self._last = 0.0
        self._milestone = -1

    def update(
        self, c: int, warm_done: int, warm: int, done: int, total: int, failed: int, force: bool = False
    ) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if self.tty:
            if not force and now - self._last < 0.2:
                return
            self._last = now
            bar_w = 24
            filled = int(bar_w * done / total) if total else bar_w
            line = (
                f"\r[c={c}] warm-up {warm_done}/{warm}  measured [{'#' * filled}{'.' * (bar_w - filled)}] "
                f"{done}/{total}  failed {failed}"
            )
            self.stream.write(line)
            self.stream.flush()
            return
        quarter = 4 * done // total if total else 4
        if quarter != self._milestone and quarter > 0:
            self._milestone = quarter
            self.stream.write(f"[c={c}] warm-up {warm_done}/{warm}, measured {done}/{total}, failed {failed}\n")
            self.stream.flush()

    def end_level(self, text: str) -> None:
        if self.stream is None:
            return
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        self.stream.flush()
        self._milestone = -1


# ----- running -----


class SweepError(RuntimeError):
    """The sweep could not start: the server is unreachable or rejected the first request."""


async def measure_level(
    client: OpenAIClient, cfg: SweepConfig, source: PromptSource, c: int, progress: Progress
) -> LevelRun:
    """Run one level: warm-up, measured requests, fillers until the last measured request ends."""
    n_warm = cfg.warmup_for(c)
    n_meas = cfg.requests_for(c)
    warmup: list[RequestRecord] = []
    measured: list[RequestRecord] = []
    others: list[RequestRecord] = []
    issued = 0
    done = {"warmup": 0, "measured": 0, "failed": 0}
    stop = asyncio.Event()
    t_end = math.nan

    def next_job() -> tuple[Any, RequestSpec] | None:
        nonlocal issued
        i = issued
        issued += 1
        kind = "warmup" if i < n_warm else "measured" if i < n_warm + n_meas else "filler"
        return (kind, i), source.spec(c, i)

    def on_start(key: Any, rec: RequestRecord) -> None:
        kind, i = key
        rec.tag, rec.index = kind, i
        {"warmup": warmup, "measured": measured, "filler": others}[kind].append(rec)

    def on_done(key: Any, rec: RequestRecord) -> None:
        nonlocal t_end
        kind, _ = key
        if kind == "warmup":
            done["warmup"] += 1
        elif kind == "measured":
            done["measured"] += 1
            done["failed"] += 0 if rec.ok else 1
            if done["measured"] == n_meas:
                t_end = rec.end
                stop.set()
        progress.update(c, done["warmup"], n_warm, done["measured"], n_meas, done["failed"])

    wall0 = time.perf_counter()
    await closed_loop(client, c, next_job, on_start, on_done, stop)
    wall = time.perf_counter() - wall0
    progress.update(c, done["warmup"], n_warm, done["measured"], n_meas, done["failed"], force=True)
    t_start = min(r.start for r in measured)
    # All measured requests ended by t_end (the last one to end set it); max() guards clock ties.
    t_end = max([t_end, *(r.end for r in measured)])
    return LevelRun(c, warmup, measured, others, (t_start, t_end), wall)


async def preflight(client: OpenAIClient, cfg: SweepConfig, source: PromptSource) -> None:
    """One short request; a clear error when the server cannot serve the sweep at all."""
    spec = dataclasses.replace(source.spec(0, 0), max_tokens=min(cfg.output_len, 4))
    rec = await client.send(spec)
    if rec.error_kind == "connect":
        raise SweepError(f"--url: cannot connect to {client.base_url}: {rec.error_detail}")
    if not rec.ok:
        path = client.base_url + ENDPOINT_PATHS[cfg.endpoint]
        raise SweepError(f"first request to {path} failed ({rec.error_kind}): {rec.error_detail}")


async def arun_sweep(cfg: SweepConfig, progress_stream: IO[str] | None = None) -> dict[str, Any]:
    """Run the sweep and return the document written to sweep.json."""
    cfg.validate()
    items = load_prompts(cfg.prompts, cfg.endpoint) if cfg.prompts else None
    writer = ResultWriter(cfg.out)
    progress = Progress(progress_stream)
    source = PromptSource(cfg, items)
    doc: dict[str, Any] = {
        "tool": "wavemla sweep",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": dataclasses.asdict(cfg),
        "definitions": DEFINITIONS,
        "status": "running",
        "levels": [],
    }
    levels: list[dict[str, Any]] = doc["levels"]
    async with OpenAIClient(cfg.url, cfg.model, cfg.timeout) as client:
        try:
            doc["config"]["model"] = client.model = await resolve_model(client, cfg.model)
        except ServerUnreachableError as exc:
            raise SweepError(f"--url: {exc}") from None
        doc["server"] = client.base_url
        try:
            await preflight(client, cfg, source)
            for c in cfg.concurrency:
                run = await measure_level(client, cfg, source, c, progress)
                level = level_metrics(run, cfg.bucket_s)
                levels.append(level)
                flag_levels(levels, cfg.cliff_tolerance)
                writer.write_json(doc)
                writer.append_csv(level)
                if cfg.save_requests:
                    writer.append_requests(run)
                progress.end_level(format_level(level))
            doc["status"] = "complete"
        except BaseException as exc:
            doc["status"] = f"aborted: {type(exc).__name__}: {exc}"
            raise
        finally:
            # Nothing measured: the files of the run before stay as they were.
            if levels:
                writer.write_json(doc)
                writer.rewrite_csv(levels)
            if cfg.plot and levels:
                write_plot(levels, writer.png_path)
                doc["plot"] = str(writer.png_path)
                writer.write_json(doc)
    return doc


def run_sweep(cfg: SweepConfig, progress_stream: IO[str] | None = None) -> dict[str, Any]:
    """Blocking :func:`arun_sweep`."""
    return asyncio.run(arun_sweep(cfg, progress_stream))


def _fmt(x: Any, digits: int = 1) -> str:
    return f"{x:.{digits}f}" if _finite(x) else "-"


def format_level(lv: dict[str, Any]) -> str:
    return (
        f"c={lv['concurrency']:<4} ok {lv['completed']}/{lv['requests']}  "
        f"out {_fmt(lv['output_tok_s'])} tok/s  "
        f"user {_fmt(lv['tok_s_per_user']['median'])} tok/s  "
        f"TTFT p50 {_fmt(lv['ttft_ms']['median'])} ms  "
        f"TPOT p50 {_fmt(lv['tpot_ms']['median'], 2)} ms  "
        f"ITL p99 {_fmt(lv['itl_ms']['p99'], 2)} ms" + ("".join(f"\n    ! {f}" for f in lv["flags"]))
    )


def format_table(levels: list[dict[str, Any]]) -> str:
    head = (
        f"{'conc':>5} {'ok':>9} {'out tok/s':>10} {'tok/s/user':>10} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'TPOT p50':>9} {'TPOT p99':>9} {'ITL p50':>8} {'ITL p99':>8} {'E2E p50':>9}  flags"
    )
    lines = [head, "-" * len(head)]
    for lv in levels:
        lines.append(
            f"{lv['concurrency']:>5} {str(lv['completed']) + '/' + str(lv['requests']):>9} "
            f"{_fmt(lv['output_tok_s']):>10} {_fmt(lv['tok_s_per_user']['median']):>10} "
            f"{_fmt(lv['ttft_ms']['median']):>9} {_fmt(lv['ttft_ms']['p99']):>9} "
            f"{_fmt(lv['tpot_ms']['median'], 2):>9} {_fmt(lv['tpot_ms']['p99'], 2):>9} "
            f"{_fmt(lv['itl_ms']['median'], 2):>8} {_fmt(lv['itl_ms']['p99'], 2):>8} "
            f"{_fmt(lv['e2e_ms']['median']):>9}  {'; '.join(lv['flags'])}"
        )
    lines.append("(times in ms; tok/s/user is the median of 1/TPOT)")
    return "\n".join(lines)


# ----- command line -----


def _definitions_epilog() -> str:
    lines = ["metric definitions:"]
    for name, text in DEFINITIONS.items():
        lines.append(textwrap.fill(f"{name}: {text}", width=100, initial_indent="  ", subsequent_indent="      "))
    lines.append("")
    lines.append("exit codes: 0 swept, 2 bad arguments, 3 server unreachable or first request rejected")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _definitions_epilog()
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", required=True, help="concurrency levels, run in the order given"
    )
    parser.add_argument("--endpoint", choices=sorted(ENDPOINT_PATHS), default="chat", help="API (default chat)")
    parser.add_argument("--model", help="model name to send (default: the first id from GET /v1/models)")
    parser.add_argument("--num-requests", type=int, help="measured requests per level (default 5 x concurrency)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per level (default = concurrency)")
    parser.add_argument("--input-len", type=int, default=128, help="random prompt length in words (default 128)")
    parser.add_argument("--output-len", type=int, default=128, help="max_tokens per request (default 128)")
    parser.add_argument("--prompts", help="prompt file: one text, JSON string or {prompt|messages} object per line")
    parser.add_argument("--ignore-eos", action="store_true", help="send ignore_eos: true (vLLM, SGLang)")
    parser.add_argument("--extra-body", default="{}", help="JSON object merged into every request body")
    parser.add_argument("--temperature", type=float, help="sampling temperature (default: server default)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random prompts (default 0)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    parser.add_argument(
        "--no-usage",
        action="store_true",
        help="do not send stream_options.include_usage (servers that reject it)",
    )
    parser.add_argument("--out", default="sweep-results", help="output directory (default sweep-results)")
    parser.add_argument("--no-plot", action="store_true", help="skip sweep.png")
    parser.add_argument("--save-requests", action="store_true", help="write requests.jsonl (one line per request)")
    parser.add_argument(
        "--cliff-tolerance", type=float, default=0.03, help="relative drop that flags a cliff (default 0.03)"
    )
    parser.add_argument(
        "--bucket-s", type=float, default=1.0, help="slice length for tok/s statistics, >= 0.001 (default 1)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def parse_extra_body(text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise UsageError("--extra-body", f"not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError("--extra-body", "not valid JSON (nested too deeply to parse)") from None
    if not isinstance(obj, dict):
        raise UsageError("--extra-body", "must be a JSON object")
    return obj


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    return SweepConfig(
        url=args.url,
        concurrency=tuple(args.concurrency),
        endpoint=args.endpoint,
        model=args.model,
        num_requests=args.num_requests,
        warmup=args.warmup,
        input_len=args.input_len,
        output_len=args.output_len,
        prompts=args.prompts,
        ignore_eos=args.ignore_eos,
        extra_body=parse_extra_body(args.extra_body),
        temperature=args.temperature,
        seed=args.seed,
        timeout=args.timeout,
        include_usage=not args.no_usage,
        out=args.out,
        plot=not args.no_plot,
        save_requests=args.save_requests,
        cliff_tolerance=args.cliff_tolerance,
        bucket_s=args.bucket_s,
    )


def run(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
        doc = run_sweep(cfg, None if args.quiet else sys.stderr)
    except UsageError as exc:
        print(f"wavemla sweep: error: {exc}", file=sys.stderr)
        return 2
    except SweepError as exc:
        print(f"wavemla sweep: error: {exc}", file=sys.stderr)
        return 3
    print(format_table(doc["levels"]))
    print(
        f"wrote {Path(cfg.out) / 'sweep.json'}, {Path(cfg.out) / 'sweep.csv'}"
        + (f", {doc['plot']}" if "plot" in doc else "")
    )
    return 0
