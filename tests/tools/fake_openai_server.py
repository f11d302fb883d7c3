"""A hand-written OpenAI-compatible streaming server, for fault injection only.

It is not a model: a reply is a list of words drawn from a hash of the prompt, so it is deterministic. It exists
to produce what a real server produces only by accident: HTTP 500s, garbage SSE, disconnects mid-stream, hangs,
error events, streams that end without a finish_reason, and output corruption that appears only when many
requests are in flight (leaked special tokens, broken tool-call JSON), or near-tie token flips with logprobs.
Tests of normal behaviour use the real server in ``tiny_transformers_server.py``.

It runs on 127.0.0.1 in a background thread with its own event loop::

    with FakeOpenAIServer(Faults(every=5, kinds=("http500",))) as server:
        ...  # send requests to server.url
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FAULT_KINDS = ("http500", "garbage", "disconnect", "hang", "error_event", "no_finish")

WORDS = tuple(
    " ".join(
        (
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho",
            "sigma tau",
        )
    ).split()
)


@dataclass
class Faults:
    """What the server does wrong. ``every`` = N faults every N-th request (1-based), cycling ``kinds``."""

    every: int = 0
    kinds: tuple[str, ...] = ()
    corrupt_above: int | None = None  # corrupt an output whose middle token is made with more in flight
    flip_above: int | None = None  # near-tie flip of the middle token with more in flight (needs logprobs)
    reasoning_tokens: int = 0  # the first k tokens stream as reasoning_content
    usage: bool = True
    done_marker: bool = True
    delay_s: float = 0.002
    hang_s: float = 5.0
    model: str = "fake-model"


@dataclass
class Stats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)


def reply_words(text: str, n: int) -> list[str]:
    digest = hashlib.sha256(text.encode()).digest()
    return [WORDS[(digest[i % len(digest)] + i) % len(WORDS)] for i in range(n)]


def _sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


class FakeOpenAIServer:
    """Start on a free loopback port; ``stats`` counts requests, faults and the peak in flight."""

    def __init__(self, faults: Faults | None = None) -> None:
        self.faults = faults or Faults()
        self.stats = Stats()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    async def _start(self) -> None:
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    async def _shutdown(self) -> None:
        await self._runner.cleanup()
        # Handlers still sleeping (injected hangs) end here, not with the loop.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.faults.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    def _fault_for(self, n: int) -> str | None:
        f = self.faults
        if f.every and f.kinds and n % f.every == 0:
            return f.kinds[(n // f.every - 1) % len(f.kinds)]
        return None

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await request.json()
        with self._lock:
            self.stats.requests += 1
            n = self.stats.requests
            self.stats.bodies.append(body)
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        fault = self._fault_for(n)
        if fault:
            with self._lock:
                self.stats.faults[fault] = self.stats.faults.get(fault, 0) + 1
        try:
            return await self._stream(request, body, chat, fault)
        except ConnectionResetError:
            # The client went away mid-stream (a cancelled filler): nothing left to send.
            return web.Response(status=499)
        finally:
            with self._lock:
                self.stats.in_flight -= 1

    async def _stream(
        self, request: web.Request, body: dict[str, Any], chat: bool, fault: str | None
    ) -> web.StreamResponse:
        f = self.faults
        if fault == "http500":
            return web.Response(status=500, text="internal error: injected")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if fault == "hang":
            await asyncio.sleep(f.hang_s)
            return resp
        if fault == "garbage":
            await resp.write(b"data: {this is not json\n\n")
            return resp
        if fault == "error_event":
            await resp.write(_sse({"error": {"message": "injected failure", "code": 500}}))
            return resp

        text = json.dumps(body.get("messages")) if chat else str(body.get("prompt"))
        max_tokens = int(body.get("max_tokens") or 16)
        tools = body.get("tools") or []
        want_lp = bool(body.get("logprobs"))
        words = reply_words(text, max_tokens)
        cid = f"fake-{self.stats.requests}"

        def chunk(delta: dict[str, Any], finish: str | None = None, lp: Any = None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            if chat:
                choice["delta"] = delta
            else:
                choice["text"] = delta.get("content", "")
            if lp is not None:
                choice["logprobs"] = lp
            return {"id": cid, "object": "chat.completion.chunk" if chat else "text_completion", "choices": [choice]}

        if chat:
            await resp.write(_sse(chunk({"role": "assistant", "content": ""})))
        middle = max_tokens // 2
        finish = "length"
        if tools and chat:
            name = tools[0]["function"]["name"]
            args = json.dumps({"query": " ".join(words[:3]), "top_k": 3})
            pieces = [args[: len(args) // 3], args[len(args) // 3 : 2 * len(args) // 3], args[2 * len(args) // 3 :]]
            # Decided once the other requests of the wave have arrived (after about half the stream).
            await asyncio.sleep(2 * f.delay_s)
            if f.corrupt_above is not None and self.stats.in_flight > f.corrupt_above:
                pieces[-1] = pieces[-1][:-4]  # the JSON loses its closing characters
            first = {"index": 0, "id": f"call_{cid}", "type": "function", "function": {"name": name, "arguments": ""}}
            await resp.write(_sse(chunk({"tool_calls": [first]})))
            for piece in pieces:
                await asyncio.sleep(f.delay_s)
                if fault == "disconnect":
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                await resp.write(_sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})))
            finish = "tool_calls"
            produced = 1 + len(pieces)
        else:
            for i, word in enumerate(words):
                await asyncio.sleep(f.delay_s)
                token = word if i == 0 else " " + word
                alt = " " + WORDS[(WORDS.index(word) + 1) % len(WORDS)]
                if i == middle and f.corrupt_above is not None and self.stats.in_flight > f.corrupt_above:
                    token = "<|im_end|>"
                if i == middle and f.flip_above is not None and self.stats.in_flight > f.flip_above:
                    token, alt = alt, token
                lp = None
                if want_lp:
                    top = {token: -0.40, alt: -0.45}
                    lp = (
                        {
                            "content": [
                                {
                                    "token": token,
                                    "logprob": -0.40,
                                    "top_logprobs": [{"token": k, "logprob": v} for k, v in top.items()],
                                }
                            ]
                        }
                        if chat
                        else {"tokens": [token], "token_logprobs": [-0.40], "top_logprobs": [top]}
                    )
                if fault == "disconnect" and i == middle:
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                key = "reasoning_content" if chat and i < f.reasoning_tokens else "content"
                await resp.write(_sse(chunk({key: token}, lp=lp)))
            produced = len(words)
        if fault == "no_finish":
            await resp.write_eof()
            return resp
        last = chunk({}, finish=finish)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if f.usage and include_usage:
            await resp.write(_sse(last))
            usage = {"prompt_tokens": len(text.split()), "completion_tokens": produced}
            await resp.write(_sse({"id": cid, "choices": [], "usage": {**usage, "total_tokens": sum(usage.values())}}))
        else:
            await resp.write(_sse(last))
        if f.done_marker:
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
