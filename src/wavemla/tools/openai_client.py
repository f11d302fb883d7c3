"""Async streaming client for OpenAI-compatible servers: ``/v1/chat/completions`` and ``/v1/completions``.

The transport shared by ``wavemla sweep`` and ``wavemla check``. It sends one streaming request, parses the
server-sent events (SSE) as they arrive, and fills a :class:`RequestRecord` with the arrival time of every
output chunk, the text, the tool calls, the token usage and, when something goes wrong, an error kind.
It never raises for a failed request: failures are data, counted per concurrency level by the callers.

What counts as output
    A chunk is an *output chunk* when it carries a non-empty ``delta.content``, ``delta.reasoning_content``
    (or ``delta.reasoning``), or any ``delta.tool_calls`` entry (chat), or a non-empty ``text`` (completions).
    The role-only first chunk, empty deltas and the usage-only last chunk are not output. The token count of
    a request is the server's ``usage.completion_tokens`` when the server sends it (requested with
    ``stream_options: {"include_usage": true}``), otherwise the number of output chunks, which undercounts
    when a server packs several tokens into one chunk.

SSE parsing
    Bytes are split into lines (``\\n``, ``\\r\\n`` or ``\\r``); ``data:`` lines accumulate and a blank line
    ends an event, as in the SSE specification. ``:`` comments and ``event:``/``id:``/``retry:`` fields are
    ignored. ``data: [DONE]`` ends the stream. A pending event is still handled at end of stream, for servers
    that omit the last blank line. A stream is complete when it saw ``[DONE]`` or a chunk with a
    ``finish_reason``.

Error kinds (``RequestRecord.error_kind``)
    ``http_<status>``  the server answered with a non-200 status;
    ``connect``        the connection could not be opened;
    ``timeout``        the request ran past its time limit;
    ``disconnect``     the connection broke mid-stream;
    ``malformed_sse``  a ``data:`` payload that is not a JSON object, or a line that is not an SSE field;
    ``server_error``   the stream carried an ``{"error": ...}`` event;
    ``aborted``        the server ended the choice with ``finish_reason`` ``abort`` or ``error`` (SGLang's and
                       vLLM's reasons for a request they gave up on: an aborted request, an engine error);
    ``incomplete``     the stream ended cleanly but without ``[DONE]`` or a ``finish_reason``;
    ``client``         any other transport failure;
    ``cancelled``      the caller stopped the request (filler requests after a level is measured).

Example::

    import asyncio
    from wavemla.tools.openai_client import OpenAIClient, RequestSpec

    async def main() -> None:
        async with OpenAIClient("http://127.0.0.1:8000", model="my-model") as client:
            spec = RequestSpec(endpoint="chat", messages=[{"role": "user", "content": "hi"}])
            rec = await client.send(spec)
            print(rec.ok, rec.ttft, rec.output_tokens, rec.content)

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

ENDPOINT_PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}

ERROR_KINDS: tuple[str, ...] = (
    "connect",
    "timeout",
    "disconnect",
    "malformed_sse",
    "server_error",
    "aborted",
    "incomplete",
    "client",
    "cancelled",
)

# Large enough for one SSE line of a long tool call or a big usage block under heavy load.
_READ_BUFSIZE = 10 * 1024 * 1024
_ERROR_DETAIL_CHARS = 300
# finish_reason values of a choice the server gave up on rather than finished.
_GIVEN_UP = frozenset({"abort", "error"})


class UsageError(ValueError):
    """A user-supplied value cannot be used; the message starts with the argument's name (``--url: ...``)."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument = argument


class ServerUnreachableError(RuntimeError):
    """No connection to the server could be opened (refused, no route, unknown host)."""


def normalize_base_url(url: str) -> str:
    """Return ``scheme://host[:port][/prefix]`` for ``url``, dropping a trailing ``/v1`` or endpoint path.

    Accepts ``http://127.0.0.1:8000``, ``http://127.0.0.1:8000/v1`` and ``.../v1/chat/completions``. Raises
    :class:`UsageError` naming ``--url`` for anything that is not an http(s) URL with a host.
    """
    text = url.strip()
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https"):
        raise UsageError("--url", f"expected an http:// or https:// URL, got {url!r}")
    if not parsed.hostname:
        raise UsageError("--url", f"no host in {url!r}")
    try:
        _ = parsed.port
    except ValueError:
        raise UsageError("--url", f"invalid port in {url!r}") from None
    path = parsed.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/v1"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    path = path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def check_endpoint(endpoint: str) -> str:
    if endpoint not in ENDPOINT_PATHS:
        raise UsageError("--endpoint", f"expected one of {', '.join(ENDPOINT_PATHS)}, got {endpoint!r}")
    return endpoint


@dataclass(frozen=True)
class RequestSpec:
    """One request to send. ``messages`` for ``chat``, ``prompt`` for ``completions``.

    ``top_logprobs`` > 0 asks for that many alternatives per generated token (``logprobs`` on the chat API,
    ``logprobs: k`` on the completions API). ``extra_body`` is merged last, so it can override any field.
    """

    endpoint: str
    messages: Sequence[dict[str, Any]] | None = None
    prompt: str | None = None
    max_tokens: int = 128
    temperature: float | None = None
    seed: int | None = None
    tools: Sequence[dict[str, Any]] | None = None
    top_logprobs: int = 0
    include_usage: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)

    def body(self, model: str | None) -> dict[str, Any]:
        """The JSON body for this request."""
        body: dict[str, Any] = {"stream": True, "max_tokens": self.max_tokens}
        if model is not None:
            body["model"] = model
        if self.endpoint == "chat":
            if self.messages is None:
                raise ValueError("a chat request needs messages")
            body["messages"] = list(self.messages)
            if self.tools:
                body["tools"] = list(self.tools)
            if self.top_logprobs > 0:
                body["logprobs"] = True
                body["top_logprobs"] = self.top_logprobs
        else:
            if self.prompt is None:
                raise ValueError("a completions request needs a prompt")
            body["prompt"] = self.prompt
            if self.top_logprobs > 0:
                body["logprobs"] = self.top_logprobs
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(self.extra_body)
        return body


@dataclass
class ToolCallAccum:
    """A tool call assembled from its streamed fragments."""

    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class TokenLogprob:
    """One generated token with its log-probability and the server's top alternatives (token -> logprob)."""

    token: str
    logprob: float
    top: dict[str, float]


@dataclass
class RequestRecord:
    """Everything measured about one streamed request. Times are ``time.perf_counter()`` seconds.

    ``chunk_times[i]`` is when output chunk ``i`` arrived and ``chunk_texts[i]`` what it carried (content,
    reasoning, tool name and argument fragments, in stream order). ``transcript`` is all output in arrival
    order, the string ``wavemla check`` compares.
    """

    tag: str = ""
    index: int = -1
    start: float = math.nan
    end: float = math.nan
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    content: str = ""
    reasoning: str = ""
    tool_calls: dict[int, ToolCallAccum] = field(default_factory=dict)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    saw_done: bool = False
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error_kind: str | None = None
    error_detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None and not math.isnan(self.end)

    @property
    def transcript(self) -> str:
        return "".join(self.chunk_texts)

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens when available, else the number of output chunks."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.chunk_times)

    @property
    def usage_from_server(self) -> bool:
        return self.completion_tokens is not None

    @property
    def ttft(self) -> float:
        """Send to first output chunk, seconds (NaN without output)."""
        return self.chunk_times[0] - self.start if self.chunk_times else math.nan

    @property
    def latency(self) -> float:
        """Send to end of stream, seconds (the E2E latency)."""
        return self.end - self.start

    @property
    def tpot(self) -> float:
        """(latency - TTFT) / (tokens - 1), seconds; NaN with fewer than two tokens."""
        n = self.output_tokens
        if n < 2 or not self.chunk_times:
            return math.nan
        return (self.latency - self.ttft) / (n - 1)

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive output chunks, seconds."""
        t = self.chunk_times
        return [b - a for a, b in itertools.pairwise(t)]

    def fail(self, kind: str, detail: str = "") -> None:
        if self.error_kind is None:
            self.error_kind = kind
            self.error_detail = detail[:_ERROR_DETAIL_CHARS]

    def tool_calls_list(self) -> list[ToolCallAccum]:
        return [self.tool_calls[i] for i in sorted(self.tool_calls)]


class StreamAccumulator:
    """Incremental SSE parser that fills a :class:`RequestRecord`; fed raw bytes with their arrival times.

    ``feed`` returns False once the stream is over (``[DONE]`` or an error), after which the caller stops
    reading. ``close`` must be called at end of stream; it handles a pending event and checks completeness.
    """

    def __init__(self, record: RequestRecord, endpoint: str) -> None:
        self.record = record
        self.endpoint = check_endpoint(endpoint)
        self._buf = b""
        self._data: list[str] = []
        self._finished = False
        # The last read ended in "\r": a "\n" starting the next read belongs to that line break.
        self._after_cr = False

    def feed(self, data: bytes, t: float) -> bool:
        if self._finished:
            return False
        if self._after_cr and data:
            self._after_cr = False
            data = data.removeprefix(b"\n")
        self._buf += data
        while True:
            line, sep, rest = _split_line(self._buf)
            if not sep:
                break
            self._buf = rest
            self._after_cr = sep == b"\r" and not rest
            if not self._handle_line(line, t):
                self._finished = True
                return False
        return True

    def close(self, t: float) -> None:
        rec = self.record
        if not self._finished:
            if self._buf:
                # A last line without a line break.
                self._handle_line(self._buf, t)
                self._buf = b""
            if not self._finished and self._data:
                self._dispatch(t)
        rec.end = t
        if rec.error_kind is None and not rec.saw_done and rec.finish_reason is None:
            rec.fail("incomplete", "stream ended without [DONE] or a finish_reason")
        self._finished = True

    def _handle_line(self, raw: bytes, t: float) -> bool:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.record.fail("malformed_sse", f"line is not UTF-8: {raw[:80]!r}")
            return False
        if line == "":
            return self._dispatch(t) if self._data else True
        if line.startswith(":"):
            return True
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            return True
        if name in ("event", "id", "retry"):
            return True
        self.record.fail("malformed_sse", f"not an SSE field: {line[:80]!r}")
        return False

    def _dispatch(self, t: float) -> bool:
        payload = "\n".join(self._data)
        self._data = []
        rec = self.record
        if payload.strip() == "[DONE]":
            rec.saw_done = True
            return False
        try:
            obj = json.loads(payload)
        except ValueError:
            rec.fail("malformed_sse", f"data is not JSON: {payload[:80]!r}")
            return False
        if not isinstance(obj, dict):
            rec.fail("malformed_sse", f"data is not a JSON object: {payload[:80]!r}")
            return False
        if obj.get("error") is not None:
            rec.fail("server_error", json.dumps(obj["error"])[:_ERROR_DETAIL_CHARS])
            return False
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("completion_tokens"), int):
                rec.completion_tokens = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                rec.prompt_tokens = usage["prompt_tokens"]
        choices = obj.get("choices")
        if choices is None:
            return True
        if not isinstance(choices, list):
            rec.fail("malformed_sse", f"choices is not a list: {payload[:80]!r}")
            return False
        for choice in choices:
            if not isinstance(choice, dict):
                rec.fail("malformed_sse", f"choice is not an object: {payload[:80]!r}")
                return False
            if choice.get("index", 0) != 0:
                continue
            try:
                self._take_choice(choice, t)
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                rec.fail("malformed_sse", f"unexpected chunk shape ({exc}): {payload[:80]!r}")
                return False
        return True

    def _take_choice(self, choice: dict[str, Any], t: float) -> None:
        rec = self.record
        pieces: list[str] = []
        is_output = False
        if self.endpoint == "chat":
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                rec.reasoning += str(reasoning)
                pieces.append(str(reasoning))
            content = delta.get("content")
            if content:
                rec.content += str(content)
                pieces.append(str(content))
            for tc in delta.get("tool_calls") or []:
                is_output = True
                idx = int(tc.get("index", len(rec.tool_calls)))
                acc = rec.tool_calls.setdefault(idx, ToolCallAccum())
                if tc.get("id"):
                    acc.id = str(tc["id"])
                fn = tc.get("function") or {}
                if fn.get("name"):
                    acc.name += str(fn["name"])
                    pieces.append(str(fn["name"]))
                if fn.get("arguments"):
                    acc.arguments += str(fn["arguments"])
                    pieces.append(str(fn["arguments"]))
            lp = choice.get("logprobs")
            if isinstance(lp, dict):
                for entry in lp.get("content") or []:
                    top = {str(a["token"]): float(a["logprob"]) for a in entry.get("top_logprobs") or []}
                    rec.logprobs.append(TokenLogprob(str(entry["token"]), float(entry["logprob"]), top))
        else:
            text = choice.get("text")
            if text:
                rec.content += str(text)
                pieces.append(str(text))
            lp = choice.get("logprobs")
            if isinstance(lp, dict):
                tokens = lp.get("tokens") or []
                values = lp.get("token_logprobs") or []
                tops = lp.get("top_logprobs") or [None] * len(tokens)
                for tok, value, top in zip(tokens, values, tops, strict=False):
                    alts = {str(k): float(v) for k, v in (top or {}).items()}
                    rec.logprobs.append(TokenLogprob(str(tok), float(value), alts))
        if pieces or is_output:
            rec.chunk_times.append(t)
            rec.chunk_texts.append("".join(pieces))
        if choice.get("finish_reason"):
            rec.finish_reason = str(choice["finish_reason"])
            if rec.finish_reason in _GIVEN_UP:
                rec.fail("aborted", f"finish_reason {rec.finish_reason!r}")


def _split_line(buf: bytes) -> tuple[bytes, bytes, bytes]:
    """Split off the first line. A ``\\r`` that ends ``buf`` ends the line at once (waiting for a possible
    ``\\n`` would time the event at the next read); the caller drops a ``\\n`` that starts the next read."""
    i_n = buf.find(b"\n")
    i_r = buf.find(b"\r")
    if i_r != -1 and (i_n == -1 or i_r < i_n):
        if buf[i_r + 1 : i_r + 2] == b"\n":
            return buf[:i_r], b"\r\n", buf[i_r + 2 :]
        return buf[:i_r], b"\r", buf[i_r + 1 :]
    if i_n != -1:
        return buf[:i_n], b"\n", buf[i_n + 1 :]
    return buf, b"", b""


def record_from_stream(
    pieces: Sequence[tuple[float, bytes]], endpoint: str, start: float, end: float | None = None
) -> RequestRecord:
    """Build a record from recorded ``(arrival_time, bytes)`` pieces, as the live client would have.

    ``end`` defaults to the time of the last piece. Used to replay captured streams and in tests.
    """
    rec = RequestRecord(start=start)
    acc = StreamAccumulator(rec, endpoint)
    last = start
    for t, data in pieces:
        last = t
        if not acc.feed(data, t):
            break
    acc.close(last if end is None else end)
    return rec


def check_timeout(seconds: float) -> None:
    """``--timeout``: a finite number of seconds > 0 (aiohttp cannot schedule an infinite limit: it fails on the
    first request with an OverflowError)."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError("--timeout", f"must be a finite number > 0, got {seconds}")


class OpenAIClient:
    """One aiohttp session against one server; :meth:`send` streams a request into a :class:`RequestRecord`.

    ``timeout_s`` bounds each request from send to the end of its stream. The connection pool is unbounded:
    the callers' worker count is the concurrency.
    """

    def __init__(self, base_url: str, model: str | None, timeout_s: float = 600.0) -> None:
        check_timeout(timeout_s)
        self.base_url = normalize_base_url(base_url)
        self.model = model
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> OpenAIClient:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector, read_bufsize=_READ_BUFSIZE)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("OpenAIClient used outside 'async with'")
        return self._session

    async def list_models(self) -> list[str]:
        """Model ids from ``GET /v1/models``; raises ``RuntimeError`` with the reason when it fails,
        :class:`ServerUnreachableError` when no connection could be opened."""
        import aiohttp

        url = self.base_url + "/v1/models"
        try:
            timeout = aiohttp.ClientTimeout(total=min(30.0, self.timeout_s))
            async with self.session.get(url, timeout=timeout) as r:
                if r.status != 200:
                    raise RuntimeError(f"GET {url} answered HTTP {r.status}")
                obj = await r.json(content_type=None)
        except aiohttp.ClientConnectorError as exc:
            raise ServerUnreachableError(f"cannot connect to {self.base_url}: {exc}") from None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise RuntimeError(f"GET {url} failed: {exc or type(exc).__name__}") from None
        data = obj.get("data") if isinstance(obj, dict) else None
        if not isinstance(data, list):
            raise RuntimeError(f"GET {url} returned no 'data' list")
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]

    async def send(self, spec: RequestSpec, record: RequestRecord | None = None) -> RequestRecord:
        """Stream one request. Fills and returns ``record`` (a new one if None); never raises for a failure.

        Cancellation marks the record ``cancelled`` and propagates.
        """
        import aiohttp

        rec = record if record is not None else RequestRecord()
        url = self.base_url + ENDPOINT_PATHS[check_endpoint(spec.endpoint)]
        body = spec.body(self.model)
        acc = StreamAccumulator(rec, spec.endpoint)
        rec.start = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with self.session.post(url, json=body, timeout=timeout) as resp:
                if resp.status != 200:
                    text = await resp.text(errors="replace")
                    rec.fail(f"http_{resp.status}", text.strip())
                    rec.end = time.perf_counter()
                    return rec
                async for data in resp.content.iter_any():
                    if not acc.feed(data, time.perf_counter()):
                        break
                acc.close(time.perf_counter())
        except asyncio.CancelledError:
            rec.fail("cancelled")
            rec.end = time.perf_counter()
            raise
        except asyncio.TimeoutError:
            rec.fail("timeout", f"no complete answer within {self.timeout_s:g} s")
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, ConnectionResetError) as exc:
            rec.fail("disconnect", str(exc) or type(exc).__name__)
        except aiohttp.ClientConnectorError as exc:
            rec.fail("connect", str(exc))
        except aiohttp.ClientError as exc:
            rec.fail("client", f"{type(exc).__name__}: {exc}")
        if math.isnan(rec.end):
            rec.end = time.perf_counter()
        return rec


async def resolve_model(client: OpenAIClient, model: str | None) -> str:
    """``model`` if given, else the first id the server lists; else a UsageError naming --model.

    An unreachable server raises :class:`ServerUnreachableError`: that is not a missing argument.
    """
    if model:
        return model
    try:
        models = await client.list_models()
    except ServerUnreachableError:
        raise
    except RuntimeError as exc:
        raise UsageError("--model", f"not given and the server did not list models ({exc})") from None
    if not models:
        raise UsageError("--model", "not given and the server lists no models")
    return models[0]


Job = tuple[Any, RequestSpec]


async def closed_loop(
    client: OpenAIClient,
    concurrency: int,
    next_job: Callable[[], Job | None],
    on_start: Callable[[Any, RequestRecord], None],
    on_done: Callable[[Any, RequestRecord], None],
    stop: asyncio.Event,
) -> None:
    """Keep ``concurrency`` requests in flight until ``next_job`` returns None or ``stop`` is set.

    Each worker sends a request, waits for its stream to end, then asks ``next_job`` for the next one (a
    closed loop: the number in flight is the concurrency). ``next_job`` returns ``(key, spec)``; the key is
    handed back to ``on_start``/``on_done``. When ``stop`` is set the requests still in flight are cancelled
    (the client disconnects, which tells the server to abort them); their records carry
    ``error_kind="cancelled"``.
    """

    async def worker() -> None:
        while not stop.is_set():
            job = next_job()
            if job is None:
                return
            key, spec = job
            rec = RequestRecord()
            on_start(key, rec)
            await client.send(spec, rec)
            on_done(key, rec)

    tasks = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    stopper = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = {*tasks, stopper}
    try:
        while not stop.is_set() and any(not t.done() for t in tasks):
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                if t.done() and not t.cancelled():
                    failure = t.exception()
                    if failure is not None:
                        raise failure
    finally:
        stopper.cancel()
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, stopper, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = sorted(v for v in values if not math.isnan(v))
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values: Sequence[float], scale: float = 1.0) -> dict[str, float | int | None]:
    """``{"n", "mean", "median", "p90", "p99"}`` of the non-NaN values times ``scale`` (None when empty)."""
    xs = [v * scale for v in values if not math.isnan(v)]
    if not xs:
        return {"n": 0, "mean": None, "median": None, "p90": None, "p99": None}
    return {
        "n": len(xs),
        "mean": math.fsum(xs) / len(xs),
        "median": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
    }


def error_counts(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Failed records by error kind, sorted by kind."""
    counts: dict[str, int] = {}
    for r in records:
        if r.error_kind is not None:
            counts[r.error_kind] = counts.get(r.error_kind, 0) + 1
    return dict(sorted(counts.items()))
