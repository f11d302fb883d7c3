"""The streaming client: SSE parsing on recorded streams, the metric fields, and every failure kind."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wavemla.tools.openai_client import (
    OpenAIClient,
    RequestRecord,
    RequestSpec,
    StreamAccumulator,
    UsageError,
    normalize_base_url,
    percentile,
    record_from_stream,
    summarize,
)

from .fake_openai_server import FAULT_KINDS, FakeOpenAIServer, Faults


def sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def delta(**d: Any) -> bytes:
    return sse({"choices": [{"index": 0, "delta": d, "finish_reason": None}]})


def finish(reason: str) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})


# A recorded chat stream of a reasoning model that ends in a tool call. Times are seconds after the send at 0.
CHAT_STREAM: list[tuple[float, bytes]] = [
    (0.050, delta(role="assistant", content="")),  # role only: not output
    (0.200, delta(reasoning_content="Need ")),
    (0.230, delta(reasoning_content="weather.")),
    (0.250, delta(content="Checking")),
    (0.300, delta(tool_calls=[{"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather"}}])),
    (0.340, delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": '}}])),
    (0.400, delta(tool_calls=[{"index": 0, "function": {"arguments": '"Paris"}'}}])),
    (0.410, sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
    (0.420, sse({"choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40}})),
    (0.430, b"data: [DONE]\n\n"),
]


def test_chat_stream_fields_by_hand() -> None:
    rec = record_from_stream(CHAT_STREAM, "chat", start=0.0)
    assert rec.ok and rec.saw_done and rec.finish_reason == "tool_calls"
    # Output chunks: 2 reasoning, 1 content, 3 tool-call fragments.
    assert rec.chunk_times == [0.200, 0.230, 0.250, 0.300, 0.340, 0.400]
    assert rec.reasoning == "Need weather." and rec.content == "Checking"
    calls = rec.tool_calls_list()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("c1", "get_weather", '{"city": "Paris"}')]
    assert rec.transcript == 'Need weather.Checkingget_weather{"city": "Paris"}'
    assert rec.completion_tokens == 9 and rec.prompt_tokens == 31 and rec.output_tokens == 9
    assert rec.ttft == pytest.approx(0.200)
    assert rec.latency == pytest.approx(0.430)
    # TPOT = (E2E - TTFT) / (tokens - 1) = (0.430 - 0.200) / 8
    assert rec.tpot == pytest.approx(0.02875)
    assert rec.itls == pytest.approx([0.030, 0.020, 0.050, 0.040, 0.060])


def test_without_usage_tokens_are_output_chunks() -> None:
    stream = [(0.1, delta(content="a")), (0.3, delta(content="b")), (0.6, delta(content="c"))]
    stream.append((0.7, sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})))
    rec = record_from_stream(stream, "chat", start=0.0)
    assert rec.ok and rec.completion_tokens is None and not rec.usage_from_server
    assert rec.output_tokens == 3
    assert rec.tpot == pytest.approx((0.7 - 0.1) / 2)


def test_completions_stream_with_logprobs() -> None:
    def text(t: str, finish: str | None = None) -> bytes:
        lp = {"tokens": [t], "token_logprobs": [-0.5], "top_logprobs": [{t: -0.5, "x": -2.0}]}
        return sse({"choices": [{"index": 0, "text": t, "logprobs": lp, "finish_reason": finish}]})

    rec = record_from_stream([(0.1, text("Hello")), (0.2, text(" world", "length"))], "completions", start=0.0)
    assert rec.ok and rec.content == "Hello world" and rec.finish_reason == "length"
    assert [(t.token, t.logprob, t.top) for t in rec.logprobs] == [
        ("Hello", -0.5, {"Hello": -0.5, "x": -2.0}),
        (" world", -0.5, {" world": -0.5, "x": -2.0}),
    ]


def test_sse_details_comments_crlf_multiline_and_last_event_without_blank_line() -> None:
    body = (
        b": keep-alive comment\r\n"
        b"event: message\r\nid: 7\r\nretry: 100\r\n"
        b'data: {"choices": [{"index": 0,\r\n'
        b'data: "delta": {"content": "x"}}]}\r\n\r\n'
        b'data: {"choices": [{"index": 0, "delta": {"content": "y"}, "finish_reason": "stop"}]}'
    )
    rec = record_from_stream([(0.5, body)], "chat", start=0.0)
    assert rec.ok, rec.error_detail
    assert rec.content == "xy" and rec.finish_reason == "stop"


def test_cr_line_endings_up_to_the_last_byte() -> None:
    # Bare "\r" ends lines too; the stream's very last byte is a "\r" that no "\n" can follow any more.
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\r\r'
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\r\r'
    )
    rec = record_from_stream([(0.5, body)], "chat", start=0.0)
    assert rec.ok, rec.error_detail
    assert rec.content == "x" and rec.finish_reason == "stop"


def test_event_ending_in_bare_cr_is_timed_when_it_arrives() -> None:
    # The blank line of each event is a lone "\r" at the end of a read: the event is complete there, so its
    # chunk must carry that read's time, not the time of the next read.
    stream = [
        (0.1, b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\r\r'),
        (0.3, b'data: {"choices": [{"index": 0, "delta": {"content": "y"}}]}\r\n\r'),
        (0.4, b'\ndata: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\r\n\r\n'),
    ]
    rec = record_from_stream(stream, "chat", start=0.0)
    assert rec.ok, rec.error_detail
    assert rec.chunk_times == [0.1, 0.3] and rec.content == "xy"
    # A "\r" that ends one read and the "\n" that starts the next are one line break, not two.
    split = [(0.1, b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\r'), (0.2, b"\n\r"), (0.3, b"\n")]
    rec = record_from_stream([*split, (0.5, b"data: [DONE]\r\n\r\n")], "chat", start=0.0)
    assert rec.ok and rec.chunk_times == [0.2] and rec.saw_done


def test_other_choice_indices_and_empty_deltas_are_not_output() -> None:
    stream = [
        (0.1, sse({"choices": [{"index": 1, "delta": {"content": "other"}}]})),
        (0.2, delta(content="")),
        (0.3, delta(content="mine")),
        (0.4, b"data: [DONE]\n\n"),
    ]
    rec = record_from_stream(stream, "chat", start=0.0)
    assert rec.ok and rec.content == "mine" and rec.chunk_times == [0.3]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
def test_any_split_into_network_reads_gives_the_same_record(sizes: list[int]) -> None:
    whole = b"".join(data for _, data in CHAT_STREAM).replace(b"\n\n", b"\r\n\r\n")
    pieces, pos, k = [], 0, 0
    while pos < len(whole):
        n = sizes[k % len(sizes)]
        pieces.append((1.0 + pos, whole[pos : pos + n]))
        pos, k = pos + n, k + 1
    rec = record_from_stream(pieces, "chat", start=0.0)
    ref = record_from_stream(CHAT_STREAM, "chat", start=0.0)
    assert rec.ok
    assert rec.transcript == ref.transcript and rec.chunk_texts == ref.chunk_texts
    assert rec.completion_tokens == 9 and rec.finish_reason == "tool_calls"
    assert len(rec.chunk_times) == 6


@pytest.mark.parametrize(
    ("stream", "kind"),
    [
        pytest.param([delta(content="a"), b"data: {not json\n\n"], "malformed_sse", id="not-json"),
        pytest.param([b"data: [1, 2]\n\n"], "malformed_sse", id="not-object"),
        pytest.param([b"<html>502 Bad Gateway</html>\n\n"], "malformed_sse", id="not-sse"),
        pytest.param([sse({"choices": "x"})], "malformed_sse", id="choices-not-list"),
        pytest.param(
            [sse({"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": {"content": [{"token": "a"}]}}]})],
            "malformed_sse",
            id="logprob-entry-without-logprob",
        ),
        pytest.param([b"data: \xff\xfe\n\n"], "malformed_sse", id="not-utf8"),
        pytest.param([delta(content="a"), sse({"error": {"message": "oom"}})], "server_error", id="error-event"),
        pytest.param([delta(content="a"), finish("abort"), b"data: [DONE]\n\n"], "aborted", id="abort"),
        pytest.param([delta(content="a"), finish("error")], "aborted", id="finish-error"),
        pytest.param([delta(content="a"), delta(content="b")], "incomplete", id="no-finish"),
        pytest.param([], "incomplete", id="empty"),
    ],
)
def test_bad_streams_become_error_kinds(stream: list[bytes], kind: str) -> None:
    rec = record_from_stream([(0.1 * (i + 1), s) for i, s in enumerate(stream)], "chat", start=0.0, end=1.0)
    assert not rec.ok
    assert rec.error_kind == kind
    assert rec.error_detail


def test_done_without_finish_reason_is_complete() -> None:
    rec = record_from_stream([(0.1, delta(content="a")), (0.2, b"data: [DONE]\n\n")], "chat", start=0.0)
    assert rec.ok and rec.finish_reason is None


def test_feed_stops_after_done() -> None:
    rec = record_from_stream(
        [(0.1, delta(content="a")), (0.2, b"data: [DONE]\n\n" + delta(content="late"))], "chat", start=0.0
    )
    assert rec.ok and rec.content == "a" and rec.chunk_times == [0.1]
    acc = StreamAccumulator(RequestRecord(start=0.0), "chat")
    assert acc.feed(delta(content="x"), 0.1) is True
    assert acc.feed(b"data: [DONE]\n\n", 0.2) is False
    assert acc.feed(delta(content="y"), 0.3) is False
    assert acc.record.content == "x"


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000"),
        ("https://host/prefix/v1/completions", "https://host/prefix"),
    ],
)
def test_normalize_base_url(url: str, base: str) -> None:
    assert normalize_base_url(url) == base


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host", "http://", "http://host:notaport", ""])
def test_bad_url_names_the_argument(url: str) -> None:
    with pytest.raises(UsageError, match=r"^--url: "):
        normalize_base_url(url)


def test_request_bodies() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    chat = RequestSpec(
        "chat",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        temperature=0.0,
        seed=3,
        tools=tools,
        top_logprobs=2,
        extra_body={"ignore_eos": True},
    ).body("m")
    assert chat == {
        "stream": True,
        "max_tokens": 5,
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": tools,
        "logprobs": True,
        "top_logprobs": 2,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "seed": 3,
        "ignore_eos": True,
    }
    comp = RequestSpec("completions", prompt="p", top_logprobs=4, include_usage=False).body(None)
    assert comp == {"stream": True, "max_tokens": 128, "prompt": "p", "logprobs": 4}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
    st.floats(min_value=0, max_value=100),
)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


def test_summarize_by_hand_and_empty() -> None:
    s = summarize([0.004, 0.001, 0.003, 0.002, math.nan], scale=1e3)
    assert s["n"] == 4
    assert s["mean"] == pytest.approx(2.5) and s["median"] == pytest.approx(2.5)
    assert s["p90"] == pytest.approx(3.7) and s["p99"] == pytest.approx(3.97)
    assert summarize([]) == {"n": 0, "mean": None, "median": None, "p90": None, "p99": None}


# ----- the live client against the fault-injection server -----


async def _send_all(url: str, specs: list[RequestSpec], timeout_s: float) -> list[Any]:
    async with OpenAIClient(url, "fake-model", timeout_s=timeout_s) as client:
        return [await client.send(s) for s in specs]


def test_live_client_classifies_every_fault() -> None:
    faults = Faults(every=1, kinds=FAULT_KINDS, hang_s=3.0)
    spec = RequestSpec("chat", messages=[{"role": "user", "content": "hi"}], max_tokens=6)
    with FakeOpenAIServer(faults) as server:
        recs = asyncio.run(_send_all(server.url, [spec] * len(FAULT_KINDS), timeout_s=0.5))
    kinds = dict(zip(FAULT_KINDS, [r.error_kind for r in recs], strict=True))
    assert kinds == {
        "http500": "http_500",
        "garbage": "malformed_sse",
        "disconnect": "disconnect",
        "hang": "timeout",
        "error_event": "server_error",
        "no_finish": "incomplete",
    }
    assert all(not math.isnan(r.end) for r in recs)
    assert recs[2].content  # the disconnect came after some output


def test_live_client_ok_stream_and_models() -> None:
    faults = Faults(reasoning_tokens=2)

    async def go(url: str) -> tuple[list[str], Any]:
        async with OpenAIClient(url, None, timeout_s=10) as client:
            models = await client.list_models()
            rec = await client.send(RequestSpec("chat", messages=[{"role": "user", "content": "x"}], max_tokens=5))
            return models, rec

    with FakeOpenAIServer(faults) as server:
        models, rec = asyncio.run(go(server.url))
        body = server.stats.bodies[0]
    assert models == ["fake-model"]
    assert body["stream_options"] == {"include_usage": True} and "model" not in body
    assert rec.ok and rec.completion_tokens == 5 and len(rec.chunk_times) == 5
    assert rec.reasoning and rec.content and rec.transcript == rec.reasoning + rec.content
    assert 0 < rec.ttft <= rec.latency


def test_connection_refused_is_connect_error() -> None:
    with FakeOpenAIServer() as server:
        url = server.url
    # The server is gone: the port refuses connections.
    rec = asyncio.run(_send_all(url, [RequestSpec("completions", prompt="p")], timeout_s=5))[0]
    assert rec.error_kind == "connect"


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, math.nan, math.inf])
def test_timeout_must_be_positive_and_finite(timeout_s: float) -> None:
    # An infinite limit would reach aiohttp, which cannot schedule it (OverflowError on the first request).
    with pytest.raises(UsageError, match=r"^--timeout: "):
        OpenAIClient("http://127.0.0.1:1", None, timeout_s=timeout_s)
