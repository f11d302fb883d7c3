"""Corruption under load: greedy outputs alone vs. the same prompts among filler requests, per level.

Method
    1. Reference. Each probe prompt is sent alone (concurrency 1) with temperature 0 and a fixed seed,
       ``--reference-runs`` times. Probes whose solo runs disagree are marked unstable (the server is not
       deterministic even alone) and reported; a probe whose reference request fails is left out.
    2. Load. For each level ``c`` the probes (``--repeats`` times each) are sent by ``c`` workers; while any
       probe is in flight the idle workers send filler requests (random prompts, sampled,
       ``--filler-max-tokens``) so the server holds ``c`` requests. Fillers still running when the last
       probe ends are cancelled.
    3. Judge. Every probe output is compared with its reference and checked for structural damage.

Compared text
    The *transcript*: all output in stream order (reasoning_content, content, tool-call names and arguments),
    plus the finish_reason. The first divergence is reported as a character offset, an output-chunk index
    (about one token per chunk on most servers) and, when the server returns logprobs, a token index.

Structural checks (on content, reasoning and tool calls)
    ``tool_args_json``    tool-call arguments that do not parse as a JSON object (not checked for the
                          last call when the output was cut by max_tokens);
    ``tool_name``         a tool call whose name is empty or not among the tools offered;
    ``unbalanced_tag``    a closing tag with no opener, mis-nested tags, or (unless the output was cut by
                          max_tokens) an unclosed opener; tracked tags: think, tool_call(s), function_call(s),
                          invoke, parameter, tool_response, answer, DeepSeek ``<｜DSML｜...>`` tags, and
                          any tag that the output or the reference closes somewhere;
    ``special_token``     a leaked special token, ``<|...|>`` or ``<｜...｜>``;
    ``whitespace_flood``  a run of ``--max-whitespace-run`` or more whitespace characters;
    ``replacement_char``  U+FFFD, the mark of bytes that were not valid UTF-8.

Classification of each probe output under load (the rules, in order)
    ``match``       transcript and finish_reason equal to the reference.
    ``corruption``  any of: a structural violation kind occurring more often than in the reference; letters
                    of a script (Latin, CJK, Cyrillic, ...) found in neither the reference nor the prompt;
                    with logprobs, the first differing token is not among the reference's top alternatives at
                    that position, or its log-probability there is more than ``--margin`` nats below the
                    reference token's (a confident answer replaced: not a near tie).
    ``benign``      with logprobs, the first differing token was within ``--margin`` nats of the reference
                    token (a near-tie flip, as batch-size-dependent reduction order produces); without
                    logprobs, the first divergence lies at or after ``--late-fraction`` of the reference
                    transcript (a late flip).
    ``suspect``     without logprobs, an early divergence with no structural damage: batch variance and
                    corruption cannot be told apart from text alone. Counted separately; ``--strict`` counts
                    it as corruption.
    The corruption rate of a level is corruption / completed probe outputs. Each level also reports the
    exact-match rate, the structurally valid rate (outputs with no violation at all), violations by kind,
    and the violations that are new relative to the reference.

Exit codes: 0 no corruption; 1 corruption found at some level; 2 bad arguments; 3 the server could not be
reached or no probe got a reference.

Example::

    wavemla check --url http://127.0.0.1:30000 --concurrency 1 16 64 --max-tokens 256 --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as _dt
import json
import math
import os
import random
import re
import sys
import unicodedata
from collections import Counter
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
)
from wavemla.tools.sweep import json_safe, load_prompts, parse_extra_body, random_prompt

VIOLATION_KINDS: tuple[str, ...] = (
    "tool_args_json",
    "tool_name",
    "unbalanced_tag",
    "special_token",
    "whitespace_flood",
    "replacement_char",
)
CLASSES: tuple[str, ...] = ("match", "benign", "suspect", "corruption")

_WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
_SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation and return the best matches.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["query"],
        },
    },
}


@dataclass(frozen=True)
class Probe:
    """One prompt whose output is compared with its solo reference."""

    id: str
    messages: tuple[dict[str, Any], ...] | None = None
    prompt: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None  # a probe file's per-prompt max_tokens; None: --max-tokens

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(str(t.get("function", {}).get("name", "")) for t in self.tools or ())

    @property
    def text(self) -> str:
        """Everything the model was shown, for the script check."""
        parts = [self.prompt or ""]
        parts += [str(m.get("content") or "") for m in self.messages or ()]
        parts += [json.dumps(t) for t in self.tools or ()]
        return "\n".join(parts)


def _user(text: str) -> tuple[dict[str, Any], ...]:
    return ({"role": "user", "content": text},)


BUILTIN_PROBES: tuple[Probe, ...] = (
    Probe("sky", _user("Explain in three sentences why the sky is blue.")),
    Probe("primes", _user("List the first twenty prime numbers, separated by commas, then give their sum.")),
    Probe(
        "code",
        _user("Write a Python function fib(n) that returns the n-th Fibonacci number, with a docstring."),
    ),
    Probe("json", _user('Return only a JSON object with keys "name", "age" and "city" for a fictional person.')),
    Probe("weather-tool", _user("What is the weather in Paris right now, in celsius?"), tools=(_WEATHER_TOOL,)),
    Probe(
        "search-tool",
        _user("Find the three most relevant documentation pages about paged attention."),
        tools=(_SEARCH_TOOL,),
    ),
    Probe(
        "two-tools",
        _user("Check the weather in Tokyo, then search the docs for 'sparse decode kernels'."),
        tools=(_WEATHER_TOOL, _SEARCH_TOOL),
    ),
    Probe("story", _user("Tell a short story about a lighthouse keeper, in exactly five sentences.")),
)


@dataclass(frozen=True)
class CheckConfig:
    """What ``wavemla check`` does; field names match the command-line flags."""

    url: str
    concurrency: tuple[int, ...]
    endpoint: str = "chat"
    model: str | None = None
    prompts: str | None = None
    num_prompts: int | None = None
    repeats: int = 1
    max_tokens: int = 128
    seed: int = 0
    filler_max_tokens: int | None = None
    top_logprobs: int = 5
    margin: float = 1.0
    late_fraction: float = 0.5
    max_whitespace_run: int = 64
    reference_runs: int = 1
    timeout: float = 600.0
    include_usage: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    strict: bool = False
    out: str = "check-results"

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
        for flag, value in (
            ("--num-prompts", self.num_prompts),
            ("--repeats", self.repeats),
            ("--max-tokens", self.max_tokens),
            ("--filler-max-tokens", self.filler_max_tokens),
            ("--max-whitespace-run", self.max_whitespace_run),
            ("--reference-runs", self.reference_runs),
        ):
            if value is not None and value < 1:
                raise UsageError(flag, f"must be >= 1, got {value}")
        if self.top_logprobs < 0:
            raise UsageError("--top-logprobs", f"must be >= 0, got {self.top_logprobs}")
        if not self.margin > 0:
            raise UsageError("--margin", f"must be > 0, got {self.margin}")
        if not 0 <= self.late_fraction <= 1:
            raise UsageError("--late-fraction", f"must be in [0, 1], got {self.late_fraction}")
        check_timeout(self.timeout)


# ----- structural checks (pure) -----

_KNOWN_TAGS = frozenset(
    (
        "think",
        "tool_call",
        "tool_calls",
        "function_call",
        "function_calls",
        "invoke",
        "parameter",
        "tool_response",
        "answer",
    )
)
_DSML = "｜DSML｜"
_TAG_RE = re.compile(r"<(/?)((?:｜DSML｜)?[A-Za-z_][\w:.\-]*)(?:\s[^<>]*)?(/?)>")
_SPECIAL_RE = re.compile(r"<\|[^<>|\s]{1,64}\|>|<｜[^<>｜]{1,64}｜>")


@dataclass(frozen=True)
class Violation:
    kind: str
    detail: str


def _tag_name(name: str) -> str:
    return name[len(_DSML) :] if name.startswith(_DSML) else name


def tag_violations(text: str, truncated: bool, also_track: frozenset[str] = frozenset()) -> list[Violation]:
    """Unbalanced tracked tags in ``text``; an unclosed opener is fine when ``truncated`` (max_tokens cut)."""
    matches = [(m.group(1) == "/", m.group(2), m.group(3) == "/") for m in _TAG_RE.finditer(text)]
    tracked = _KNOWN_TAGS | also_track | {_tag_name(n) for closing, n, _ in matches if closing}
    stack: list[str] = []
    out: list[Violation] = []
    for closing, name, self_closing in matches:
        if self_closing or _tag_name(name) not in tracked:
            continue
        if not closing:
            stack.append(name)
        elif stack and stack[-1] == name:
            stack.pop()
        elif name in stack:
            out.append(Violation("unbalanced_tag", f"</{name}> closes across <{stack[-1]}>"))
            while stack.pop() != name:
                pass
        else:
            out.append(Violation("unbalanced_tag", f"</{name}> without an opening tag"))
    if not truncated:
        out += [Violation("unbalanced_tag", f"<{name}> never closed") for name in stack]
    return out


def closed_tag_names(text: str) -> frozenset[str]:
    return frozenset(_tag_name(m.group(2)) for m in _TAG_RE.finditer(text) if m.group(1) == "/")


def reference_tags(ref: RequestRecord) -> frozenset[str]:
    """Tags the reference closes: tracked in an output under load too, though that output never closes them."""
    return closed_tag_names(ref.content) | closed_tag_names(ref.reasoning)


def structural_violations(
    rec: RequestRecord,
    tool_names: frozenset[str],
    max_whitespace_run: int,
    also_track: frozenset[str] = frozenset(),
) -> list[Violation]:
    """Every structural violation in one output (see the module docstring for the kinds)."""
    out: list[Violation] = []
    truncated = rec.finish_reason == "length"
    calls = rec.tool_calls_list()
    texts = [rec.content, rec.reasoning] + [c.arguments for c in calls]
    for i, call in enumerate(calls):
        if call.name not in tool_names:
            offered = ", ".join(sorted(tool_names)) or "none"
            out.append(Violation("tool_name", f"tool call {call.name!r}; offered: {offered}"))
        if truncated and i == len(calls) - 1:
            continue  # cut by max_tokens while being written: incomplete, not damaged (as an unclosed tag)
        try:
            args = json.loads(call.arguments)
        except ValueError:
            out.append(Violation("tool_args_json", f"{call.name}: not JSON: {call.arguments[:80]!r}"))
        else:
            if not isinstance(args, dict):
                out.append(Violation("tool_args_json", f"{call.name}: not a JSON object: {call.arguments[:80]!r}"))
    for text in (rec.content, rec.reasoning):
        out += tag_violations(text, truncated, also_track)
    ws_re = re.compile(rf"\s{{{max_whitespace_run},}}")
    for text in texts:
        out += [Violation("special_token", m.group(0)) for m in _SPECIAL_RE.finditer(text)]
        out += [Violation("whitespace_flood", f"{len(m.group(0))} whitespace characters") for m in ws_re.finditer(text)]
        if "\ufffd" in text:
            out.append(Violation("replacement_char", f"{text.count(chr(0xFFFD))} x U+FFFD"))
    return out


def scripts(text: str) -> set[str]:
    """Unicode scripts of the letters in ``text``: the first word of each letter's name (LATIN, CJK, ...)."""
    found: set[str] = set()
    for ch in set(text):
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            if name:
                found.add(name.split()[0])
    return found


# ----- classification (pure) -----


@dataclass
class Verdict:
    """How one probe output under load compares with its reference."""

    cls: str
    reasons: list[str] = field(default_factory=list)
    divergence_char: int | None = None
    divergence_chunk: int | None = None
    divergence_token: int | None = None
    relative: float | None = None
    new_violations: dict[str, int] = field(default_factory=dict)
    excerpt_ref: str = ""
    excerpt_out: str = ""


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _same_output(ref: RequestRecord, out: RequestRecord) -> bool:
    calls_ref = [(c.name, c.arguments) for c in ref.tool_calls_list()]
    calls_out = [(c.name, c.arguments) for c in out.tool_calls_list()]
    return (
        ref.transcript == out.transcript
        and ref.finish_reason == out.finish_reason
        and ref.content == out.content
        and ref.reasoning == out.reasoning
        and calls_ref == calls_out
    )


def classify(
    ref: RequestRecord,
    out: RequestRecord,
    probe: Probe,
    *,
    margin: float = 1.0,
    late_fraction: float = 0.5,
    max_whitespace_run: int = 64,
) -> Verdict:
    """Apply the classification rules of the module docstring to one probe output."""
    if _same_output(ref, out):
        return Verdict("match")
    t_ref, t_out = ref.transcript, out.transcript
    pos = _common_prefix(t_ref, t_out)
    v = Verdict(
        "benign",
        divergence_char=pos,
        divergence_chunk=_common_prefix(ref.chunk_texts, out.chunk_texts),
        relative=pos / len(t_ref) if t_ref else 1.0,
        excerpt_ref=t_ref[max(0, pos - 20) : pos + 40],
        excerpt_out=t_out[max(0, pos - 20) : pos + 40],
    )
    track = reference_tags(ref)
    n_ref = Counter(x.kind for x in structural_violations(ref, probe.tool_names, max_whitespace_run, track))
    found = structural_violations(out, probe.tool_names, max_whitespace_run, track)
    n_out = Counter(x.kind for x in found)
    v.new_violations = {k: n_out[k] - n_ref[k] for k in VIOLATION_KINDS if n_out[k] > n_ref[k]}
    for kind in v.new_violations:
        example = next(x.detail for x in found if x.kind == kind)
        v.reasons.append(f"{kind}: {example}")
    new_scripts = scripts(t_out) - scripts(t_ref) - scripts(probe.text)
    if new_scripts:
        v.reasons.append(f"letters of a script absent from reference and prompt: {', '.join(sorted(new_scripts))}")
    lp_reason, lp_bad = _logprob_judgement(ref, out, margin, v)
    if v.reasons or lp_bad:
        v.cls = "corruption"
        if lp_bad:
            v.reasons.append(lp_reason)
        return v
    if lp_reason:
        v.reasons.append(lp_reason)
        return v
    if v.relative is not None and v.relative >= late_fraction:
        v.reasons.append(f"late flip at {v.relative:.0%} of the reference")
    else:
        v.cls = "suspect"
        v.reasons.append(f"early divergence at {v.relative or 0:.0%} of the reference, no logprobs to judge it")
    return v


def _logprob_judgement(ref: RequestRecord, out: RequestRecord, margin: float, v: Verdict) -> tuple[str, bool]:
    """``(reason, is_corruption)`` from the logprobs at the first differing token; ``("", False)`` if none."""
    a, b = ref.logprobs, out.logprobs
    if not a or not b:
        return "", False
    i = _common_prefix([x.token for x in a], [x.token for x in b])
    if i >= len(a) or i >= len(b):
        return "", False
    v.divergence_token = i
    ref_tok, out_tok = a[i], b[i]
    if not ref_tok.top:
        return "", False
    alt = ref_tok.top.get(out_tok.token)
    if alt is None:
        return f"token {i}: {out_tok.token!r} is not among the reference's top {len(ref_tok.top)}", True
    gap = ref_tok.logprob - alt
    if gap > margin:
        return (
            f"token {i}: {out_tok.token!r} was {gap:.2f} nats below {ref_tok.token!r} (margin {margin:g})",
            True,
        )
    return f"near-tie flip at token {i}: {out_tok.token!r} vs {ref_tok.token!r}, {gap:.3f} nats apart", False


# ----- running -----


class CheckError(RuntimeError):
    """The check could not run: the server is unreachable or no probe got a reference."""


@dataclass
class ProbeRef:
    probe: Probe
    record: RequestRecord
    stable: bool
    violations: list[Violation]


def select_probes(cfg: CheckConfig) -> tuple[list[Probe], list[str]]:
    """The probes to use and notes about any left out."""
    notes: list[str] = []
    if cfg.prompts:
        items = load_prompts(cfg.prompts, cfg.endpoint)
        probes = [
            Probe(f"prompt-{i}", messages=it.messages, prompt=it.prompt, tools=it.tools, max_tokens=it.max_tokens)
            for i, it in enumerate(items)
        ]
    elif cfg.endpoint == "completions":
        probes = [
            Probe(p.id, prompt=str(p.messages[0]["content"]) if p.messages else "")
            for p in BUILTIN_PROBES
            if not p.tools
        ]
        notes.append("tool-calling probes need the chat endpoint; left out")
    else:
        probes = list(BUILTIN_PROBES)
    if cfg.num_prompts is not None:
        probes = probes[: cfg.num_prompts]
    return probes, notes


def probe_spec(cfg: CheckConfig, probe: Probe) -> RequestSpec:
    return RequestSpec(
        endpoint=cfg.endpoint,
        messages=probe.messages,
        prompt=probe.prompt,
        max_tokens=probe.max_tokens or cfg.max_tokens,
        temperature=0.0,
        seed=cfg.seed,
        tools=probe.tools,
        top_logprobs=cfg.top_logprobs,
        include_usage=cfg.include_usage,
        extra_body=dict(cfg.extra_body),
    )


def filler_spec(cfg: CheckConfig, c: int, i: int) -> RequestSpec:
    text = random_prompt(f"filler-{cfg.seed}-{c}-{i}", 48)
    rng = random.Random(f"{cfg.seed}-{c}-{i}")
    return RequestSpec(
        endpoint=cfg.endpoint,
        messages=_user(text) if cfg.endpoint == "chat" else None,
        prompt=text if cfg.endpoint == "completions" else None,
        max_tokens=cfg.filler_max_tokens or cfg.max_tokens,
        temperature=0.8,
        seed=rng.randrange(2**31),
        include_usage=cfg.include_usage,
        extra_body=dict(cfg.extra_body),
    )


async def reference(
    client: OpenAIClient, cfg: CheckConfig, probes: list[Probe]
) -> tuple[list[ProbeRef], dict[str, str]]:
    """Solo greedy runs; returns the usable references and a summary of failures."""
    refs: list[ProbeRef] = []
    failed: dict[str, str] = {}
    for probe in probes:
        runs = [await client.send(probe_spec(cfg, probe)) for _ in range(cfg.reference_runs)]
        bad = next((r for r in runs if not r.ok), None)
        if bad is not None:
            if bad.error_kind == "connect":
                raise CheckError(f"--url: cannot connect to {client.base_url}: {bad.error_detail}")
            failed[probe.id] = f"{bad.error_kind}: {bad.error_detail}"
            continue
        stable = all(_same_output(runs[0], r) for r in runs[1:])
        violations = structural_violations(runs[0], probe.tool_names, cfg.max_whitespace_run)
        refs.append(ProbeRef(probe, runs[0], stable, violations))
    return refs, failed


async def run_level(
    client: OpenAIClient, cfg: CheckConfig, refs: list[ProbeRef], c: int
) -> tuple[list[tuple[ProbeRef, int, RequestRecord]], list[RequestRecord]]:
    """Probes among fillers at concurrency ``c``: ``(probe ref, repeat, record)`` per probe; the fillers."""
    queue = [(ref, k) for k in range(cfg.repeats) for ref in refs]
    results: list[tuple[ProbeRef, int, RequestRecord]] = []
    fillers: list[RequestRecord] = []
    state = {"next": 0, "in_flight": 0, "fillers": 0}
    stop = asyncio.Event()

    def next_job() -> tuple[Any, RequestSpec] | None:
        if state["next"] < len(queue):
            ref, k = queue[state["next"]]
            state["next"] += 1
            state["in_flight"] += 1
            return ("probe", ref, k), probe_spec(cfg, ref.probe)
        if state["in_flight"] > 0:
            state["fillers"] += 1
            return ("filler", None, state["fillers"]), filler_spec(cfg, c, state["fillers"])
        return None

    def on_start(key: Any, rec: RequestRecord) -> None:
        rec.tag = key[0]
        if key[0] == "filler":
            fillers.append(rec)

    def on_done(key: Any, rec: RequestRecord) -> None:
        kind, ref, k = key
        if kind != "probe":
            return
        state["in_flight"] -= 1
        results.append((ref, k, rec))
        if len(results) == len(queue):
            stop.set()

    await closed_loop(client, c, next_job, on_start, on_done, stop)
    return results, fillers


def judge_level(
    cfg: CheckConfig, c: int, results: list[tuple[ProbeRef, int, RequestRecord]], fillers: list[RequestRecord]
) -> dict[str, Any]:
    counts = dict.fromkeys(CLASSES, 0)
    new_violations: Counter[str] = Counter()
    all_violations: Counter[str] = Counter()
    valid = 0
    rows = []
    for ref, k, rec in sorted(results, key=lambda x: (x[0].probe.id, x[1])):
        row: dict[str, Any] = {"probe": ref.probe.id, "repeat": k}
        if not rec.ok:
            row.update({"class": "error", "error": rec.error_kind, "error_detail": rec.error_detail})
            rows.append(row)
            continue
        v = classify(
            ref.record,
            rec,
            ref.probe,
            margin=cfg.margin,
            late_fraction=cfg.late_fraction,
            max_whitespace_run=cfg.max_whitespace_run,
        )
        counts[v.cls] += 1
        new_violations.update(v.new_violations)
        found = structural_violations(rec, ref.probe.tool_names, cfg.max_whitespace_run, reference_tags(ref.record))
        all_violations.update(x.kind for x in found)
        valid += not found
        row.update({"class": v.cls, "reference_stable": ref.stable, "structurally_valid": not found})
        if v.cls != "match":
            row.update(
                {
                    "reasons": v.reasons,
                    "divergence_char": v.divergence_char,
                    "divergence_chunk": v.divergence_chunk,
                    "divergence_token": v.divergence_token,
                    "relative_position": v.relative,
                    "reference_excerpt": v.excerpt_ref,
                    "output_excerpt": v.excerpt_out,
                }
            )
        rows.append(row)
    completed = sum(counts.values())
    flagged = counts["corruption"] + (counts["suspect"] if cfg.strict else 0)
    return {
        "concurrency": c,
        "probes": len(results),
        "completed": completed,
        "errors": error_counts([rec for _, _, rec in results]),
        "filler_errors": {k: v for k, v in error_counts(fillers).items() if k != "cancelled"},
        "fillers": len(fillers),
        "exact_match": counts["match"],
        "exact_match_rate": counts["match"] / completed if completed else math.nan,
        "benign": counts["benign"],
        "suspect": counts["suspect"],
        "corruption": counts["corruption"],
        "corruption_rate": flagged / completed if completed else math.nan,
        "structurally_valid": valid,
        "structurally_valid_rate": valid / completed if completed else math.nan,
        "violations": dict(sorted(all_violations.items())),
        "new_violations": dict(sorted(new_violations.items())),
        "results": rows,
    }


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(json_safe(doc), f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def arun_check(cfg: CheckConfig, progress: IO[str] | None = None) -> dict[str, Any]:
    """Run the check; returns the document written to ``<out>/check.json``."""
    cfg.validate()
    probes, notes = select_probes(cfg)
    out_dir = Path(cfg.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError("--out", f"cannot create {str(out_dir)!r}: {exc.strerror or exc}") from None
    path = out_dir / "check.json"
    doc: dict[str, Any] = {
        "tool": "wavemla check",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": dataclasses.asdict(cfg),
        "notes": notes,
        "status": "running",
        "reference": [],
        "levels": [],
    }

    def say(text: str) -> None:
        if progress is not None:
            progress.write(text + "\n")
            progress.flush()

    async with OpenAIClient(cfg.url, cfg.model, cfg.timeout) as client:
        try:
            doc["config"]["model"] = client.model = await resolve_model(client, cfg.model)
        except ServerUnreachableError as exc:
            raise CheckError(f"--url: {exc}") from None
        try:
            say(f"reference: {len(probes)} probes alone, temperature 0, seed {cfg.seed}")
            refs, failed = await reference(client, cfg, probes)
            doc["reference"] = [
                {
                    "probe": r.probe.id,
                    "tools": sorted(r.probe.tool_names),
                    "stable": r.stable,
                    "finish_reason": r.record.finish_reason,
                    "output_tokens": r.record.output_tokens,
                    "logprobs": bool(r.record.logprobs),
                    "violations": [dataclasses.asdict(x) for x in r.violations],
                    "transcript": r.record.transcript,
                }
                for r in refs
            ]
            doc["reference_failures"] = failed
            _write_json(path, doc)
            if not refs:
                first = next(iter(failed.values()), "no probes")
                endpoint_url = client.base_url + ENDPOINT_PATHS[cfg.endpoint]
                raise CheckError(f"no probe got a reference from {endpoint_url} ({first})")
            for c in cfg.concurrency:
                results, fillers = await run_level(client, cfg, refs, c)
                level = judge_level(cfg, c, results, fillers)
                doc["levels"].append(level)
                _write_json(path, doc)
                say(format_level(level))
            doc["status"] = "complete"
        except BaseException as exc:
            doc["status"] = f"aborted: {type(exc).__name__}: {exc}"
            raise
        finally:
            _write_json(path, doc)
    doc["corruption_found"] = any(lv["corruption"] + (lv["suspect"] if cfg.strict else 0) > 0 for lv in doc["levels"])
    _write_json(path, doc)
    return doc


def run_check(cfg: CheckConfig, progress: IO[str] | None = None) -> dict[str, Any]:
    """Blocking :func:`arun_check`."""
    return asyncio.run(arun_check(cfg, progress))


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, float) and math.isfinite(x) else "-"


def format_level(lv: dict[str, Any]) -> str:
    errors = sum(lv["errors"].values())
    text = (
        f"c={lv['concurrency']:<4} probes {lv['completed']}/{lv['probes']}  "
        f"exact {_pct(lv['exact_match_rate'])}  "
        f"benign {lv['benign']}  suspect {lv['suspect']}  corruption {lv['corruption']} "
        f"({_pct(lv['corruption_rate'])})  errors {errors}"
    )
    text += f"  valid {_pct(lv['structurally_valid_rate'])}"
    if lv["new_violations"]:
        text += "  new violations " + ", ".join(f"{k} {n}" for k, n in lv["new_violations"].items())
    return text


def format_report(doc: dict[str, Any]) -> str:
    lines = []
    unstable = [r["probe"] for r in doc["reference"] if not r["stable"]]
    if unstable:
        lines.append(f"not deterministic even alone: {', '.join(unstable)}")
    for probe, why in doc.get("reference_failures", {}).items():
        lines.append(f"no reference for {probe}: {why}")
    lines += [format_level(lv) for lv in doc["levels"]]
    for lv in doc["levels"]:
        for row in lv["results"]:
            if row["class"] in ("corruption", "suspect"):
                lines.append(
                    f"  c={lv['concurrency']} {row['probe']}#{row['repeat']} {row['class']} at char "
                    f"{row['divergence_char']}: {'; '.join(row['reasons'])}"
                )
                lines.append(f"      reference: {row['reference_excerpt']!r}")
                lines.append(f"      under load: {row['output_excerpt']!r}")
    verdict = "CORRUPTION FOUND" if doc.get("corruption_found") else "no corruption"
    lines.append(verdict)
    return "\n".join(lines)


# ----- command line -----


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    doc = __doc__ or ""
    parser.epilog = doc[doc.index("Classification") : doc.index("Example::")].rstrip()
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument("--concurrency", type=int, nargs="+", required=True, help="concurrency levels")
    parser.add_argument("--endpoint", choices=sorted(ENDPOINT_PATHS), default="chat", help="API (default chat)")
    parser.add_argument("--model", help="model name to send (default: the first id from GET /v1/models)")
    parser.add_argument("--prompts", help="probe file, as for 'wavemla sweep --prompts' (default: built-in)")
    parser.add_argument("--num-prompts", type=int, help="use only the first N probes")
    parser.add_argument("--repeats", type=int, default=1, help="times each probe is sent per level (default 1)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=128,
        help="max_tokens of each probe (default 128; a probe file's per-prompt max_tokens wins)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed sent with every probe (default 0)")
    parser.add_argument("--filler-max-tokens", type=int, help="max_tokens of filler requests (default --max-tokens)")
    parser.add_argument(
        "--top-logprobs", type=int, default=5, help="alternatives requested per token, 0 for none (default 5)"
    )
    parser.add_argument("--margin", type=float, default=1.0, help="near-tie margin in nats (default 1.0)")
    parser.add_argument("--late-fraction", type=float, default=0.5, help="late-flip threshold (default 0.5)")
    parser.add_argument("--max-whitespace-run", type=int, default=64, help="whitespace flood length (default 64)")
    parser.add_argument("--reference-runs", type=int, default=1, help="solo runs per probe (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    parser.add_argument("--no-usage", action="store_true", help="do not send stream_options.include_usage")
    parser.add_argument("--extra-body", default="{}", help="JSON object merged into every request body")
    parser.add_argument("--strict", action="store_true", help="count suspect divergences as corruption")
    parser.add_argument("--out", default="check-results", help="output directory for check.json")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def config_from_args(args: argparse.Namespace) -> CheckConfig:
    return CheckConfig(
        url=args.url,
        concurrency=tuple(args.concurrency),
        endpoint=args.endpoint,
        model=args.model,
        prompts=args.prompts,
        num_prompts=args.num_prompts,
        repeats=args.repeats,
        max_tokens=args.max_tokens,
        seed=args.seed,
        filler_max_tokens=args.filler_max_tokens,
        top_logprobs=args.top_logprobs,
        margin=args.margin,
        late_fraction=args.late_fraction,
        max_whitespace_run=args.max_whitespace_run,
        reference_runs=args.reference_runs,
        timeout=args.timeout,
        include_usage=not args.no_usage,
        extra_body=parse_extra_body(args.extra_body),
        strict=args.strict,
        out=args.out,
    )


def run(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
        doc = run_check(cfg, None if args.quiet else sys.stderr)
    except UsageError as exc:
        print(f"wavemla check: error: {exc}", file=sys.stderr)
        return 2
    except CheckError as exc:
        print(f"wavemla check: error: {exc}", file=sys.stderr)
        return 3
    print(format_report(doc))
    print(f"wrote {Path(cfg.out) / 'check.json'}")
    return 1 if doc["corruption_found"] else 0
