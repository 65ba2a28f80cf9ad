"""A fake OpenAI-compatible chat-completions server for judge tests and the benchmark.

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``, and Ollama's
``/api/chat`` and ``/api/generate`` with Ollama-shaped replies) on 127.0.0.1 with
scripted replies: JSON, fenced JSON, junk or plain text with usage; HTTP errors with
headers (429 + ``retry-after-ms`` / ``retry-after``, 5xx, 4xx); dropped connections (a TCP
reset); a fixed or per-reply latency, or a reply held until the test releases it. Every
request received is logged (path, headers, parsed body) and the maximum number of concurrent
requests in flight is tracked.

Usage: a reply's own ``usage``, else `DEFAULT_USAGE` (10 prompt and 5 completion tokens); with
``realistic_usage=True`` (``--realistic-usage``) a reply without its own is billed as a real
provider would: prompt tokens counted on the request's messages and completion tokens on the
reply's content, with litellm's tokenizer for the request's model. The usage billed is summed
(``prompt_tokens``, ``completion_tokens``, also in ``/stats``), so a test can price what was spent.

This file is the network boundary fake (STYLE: fakes only at boundaries). It has no
dependency on tracescore: tests ``import llm_server`` (``tests/support`` is on pytest's
``pythonpath``; the ``server`` fixture is in ``tests/conftest.py``) and the benchmark runs
it in a subprocess (``python tests/support/llm_server.py --latency-ms 100`` prints the port).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the server.

    Build with the class methods rather than the constructor.

    Example:
        >>> Reply.json({"score": 0.5}).content
        '{"score": 0.5}'
        >>> Reply.error(429, headers={"retry-after-ms": "5"}).status
        429
    """

    status: int = 200
    content: str | None = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    latency_ms: float | None = None
    drop: bool = False
    usage: dict[str, int] | None = None
    finish_reason: str = "stop"
    gate: asyncio.Event | None = field(default=None, compare=False, repr=False)

    @classmethod
    def text(cls, text: str, *, usage: dict[str, int] | None = None,
             latency_ms: float | None = None) -> Reply:
        """A 200 reply whose assistant message is ``text``.

        Example:
            >>> Reply.text("fine").content
            'fine'
        """
        return cls(content=text, usage=usage, latency_ms=latency_ms)

    @classmethod
    def json(cls, obj: Any, *, usage: dict[str, int] | None = None,
             latency_ms: float | None = None) -> Reply:
        """A 200 reply whose assistant message is ``obj`` as JSON text.

        Example:
            >>> Reply.json([1, 2]).content
            '[1, 2]'
        """
        return cls(content=json.dumps(obj), usage=usage, latency_ms=latency_ms)

    @classmethod
    def fenced(cls, obj: Any, *, prose: str = "Here is my answer:",
               usage: dict[str, int] | None = None) -> Reply:
        """A 200 reply with ``obj`` in a fenced ```json block, wrapped in prose.

        Example:
            >>> "```json" in Reply.fenced({"a": 1}).content
            True
        """
        return cls(content=f"{prose}\n```json\n{json.dumps(obj)}\n```\nHope it helps.",
                   usage=usage)

    @classmethod
    def error(cls, status: int, *, headers: dict[str, str] | None = None,
              message: str | None = None, error_type: str | None = None,
              code: str | None = None, latency_ms: float | None = None) -> Reply:
        """An HTTP error with an OpenAI-shaped error body and the given headers.

        Example:
            >>> Reply.error(503).body["error"]["message"]
            'scripted error 503'
        """
        body = {"error": {"message": message or f"scripted error {status}",
                          "type": error_type or "server_error", "param": None,
                          "code": code}}
        return cls(status=status, content=None, headers=dict(headers or {}), body=body,
                   latency_ms=latency_ms)

    def held(self, gate: asyncio.Event) -> Reply:
        """This reply, sent only once ``gate`` is set (after its latency, if any): a call that is
        in flight for exactly as long as the test needs, however slow the machine. Set the gate
        before `LLMTestServer.stop`, which waits for the requests being answered.

        Example:
            >>> Reply.json({"score": 1}).held(asyncio.Event()).gate is not None
            True
        """
        return dataclasses.replace(self, gate=gate)

    @classmethod
    def reset(cls, *, latency_ms: float | None = None) -> Reply:
        """Drop the connection with a TCP reset instead of answering.

        Example:
            >>> Reply.reset().drop
            True
        """
        return cls(drop=True, content=None, latency_ms=latency_ms)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received.

    Example:
        >>> RecordedRequest("/v1/chat/completions", {}, {"messages": []}).messages
        []
    """

    path: str
    headers: Mapping[str, str]  # case-insensitive
    body: Any
    received_at: float = 0.0  # time.monotonic() when the request arrived
    usage: dict[str, int] = field(default_factory=dict)  # the usage billed for its reply (none: an error)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request body.

        Example:
            >>> RecordedRequest("/", {}, {"messages": [{"role": "user"}]}).messages[0]["role"]
            'user'
        """
        return list((self.body or {}).get("messages") or [])

    def message_text(self, role: str) -> str:
        """The text of the first message with ``role`` ("" when there is none).

        Example:
            >>> RecordedRequest("/", {}, {"messages": [{"role": "user", "content": "hi"}]}).message_text("user")
            'hi'
        """
        for message in self.messages:
            if message.get("role") == role:
                content = message.get("content")
                if isinstance(content, list):
                    return "\n\n".join(p.get("text", "") for p in content)
                return str(content or "")
        return ""


DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def realistic_usage(model: str, body: Any, content: str) -> dict[str, int]:
    """The usage a real provider would bill: the request's messages (or Ollama's ``prompt``) and
    the reply's ``content``, counted with litellm's tokenizer for ``model``.

    Example:
        >>> realistic_usage("gpt-4o-mini", {"messages": [{"role": "user", "content": "Hi"}]}, "Hello there.")
        {'prompt_tokens': 8, 'completion_tokens': 3, 'total_tokens': 11}
    """
    import litellm  # a third-party tokenizer, imported only in this mode

    messages = body.get("messages") if isinstance(body, dict) else None
    if messages:
        prompt = litellm.token_counter(model=model, messages=messages)
    else:
        prompt = litellm.token_counter(model=model, text=str((body or {}).get("prompt") or ""))
    completion = litellm.token_counter(model=model, text=content) if content else 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class LLMTestServer:
    """The fake server. ``await start()`` in the running loop; ``await stop()`` at the end.

    Replies come from ``script(...)`` in order; when the script is empty, ``responder``
    (a function of the request body returning a `Reply` or None) is asked, and then the
    ``default`` reply is used.

    Example:
        >>> server = LLMTestServer(latency_ms=0)
        >>> server.script(Reply.json({"score": 1}), Reply.error(500))
        >>> (len(server.requests), server.max_in_flight)
        (0, 0)
    """

    def __init__(self, *, latency_ms: float = 0.0, default: Reply | None = None,
                 realistic_usage: bool = False) -> None:
        self.latency_ms = latency_ms
        self.default = default or Reply.json({"score": 0.5})
        self.realistic_usage = realistic_usage
        self.prompt_tokens = 0  # usage billed, summed over replies
        self.completion_tokens = 0
        self.responder: Callable[[Any], Reply | None] | None = None
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.request_count = 0
        self._script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:40123`` (the OpenAI API is under ``/v1``).

        Example:
            >>> LLMTestServer().url
            'http://127.0.0.1:0'
        """
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order to the next requests.

        Example:
            >>> s = LLMTestServer(); s.script(Reply.text("a")); s.pending
            1
        """
        self._script.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued.

        Example:
            >>> LLMTestServer().pending
            0
        """
        return len(self._script)

    def reset_stats(self) -> None:
        """Forget logged requests and the in-flight maximum.

        Example:
            >>> s = LLMTestServer(); s.reset_stats(); s.requests
            []
        """
        self.requests.clear()
        self.max_in_flight = self.in_flight
        self.request_count = 0
        self.prompt_tokens = self.completion_tokens = 0

    async def start(self, port: int = 0) -> LLMTestServer:
        """Listen on 127.0.0.1 (``port`` 0 picks a free port).

        Example:
            >>> import asyncio
            >>> async def main():
            ...     server = await LLMTestServer().start()
            ...     try:
            ...         return server.port > 0
            ...     finally:
            ...         await server.stop()
            >>> asyncio.run(main())
            True
        """
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_post("/api/chat", self._handle)  # Ollama's native chat API
        app.router.add_post("/api/generate", self._handle)  # Ollama's completion API (litellm's ollama/)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/reset", self._reset)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        """Stop listening and close open connections.

        Example:
            >>> import asyncio
            >>> asyncio.run(LLMTestServer().stop())
        """
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _next_reply(self, body: Any) -> Reply:
        if self._script:
            return self._script.popleft()
        if self.responder is not None:
            reply = self.responder(body)
            if reply is not None:
                return reply
        return self.default

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            self.request_count += 1
            record = RecordedRequest(request.path, CIMultiDict(request.headers), body, time.monotonic())
            self.requests.append(record)
            reply = self._next_reply(body)
            latency = self.latency_ms if reply.latency_ms is None else reply.latency_ms
            if latency > 0:
                await asyncio.sleep(latency / 1000)
            if reply.gate is not None:
                await reply.gate.wait()
            if reply.drop:
                transport = request.transport
                if transport is not None:
                    sock = transport.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                    transport.abort()
                return web.Response(status=500)  # never written: the connection is gone
            if reply.status != 200:
                return web.json_response(reply.body, status=reply.status, headers=reply.headers)
            model = body.get("model", "test-model") if isinstance(body, dict) else "test-model"
            usage = reply.usage or DEFAULT_USAGE
            if reply.usage is None and self.realistic_usage:
                usage = await asyncio.to_thread(realistic_usage, model, body, reply.content or "")
            record.usage.update(usage)
            self.prompt_tokens += usage["prompt_tokens"]
            self.completion_tokens += usage["completion_tokens"]
            if request.path in ("/api/chat", "/api/generate"):
                answer = ({"message": {"role": "assistant", "content": reply.content}} if request.path == "/api/chat"
                          else {"response": reply.content})
                return web.json_response({
                    "model": model, "created_at": "2026-01-01T00:00:00Z", **answer,
                    "done": True, "done_reason": reply.finish_reason,
                    "prompt_eval_count": usage["prompt_tokens"],
                    "eval_count": usage["completion_tokens"],
                }, headers=reply.headers)
            payload = {
                "id": f"chatcmpl-{self.request_count}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }],
                "usage": usage,
                "service_tier": "default",
                "system_fingerprint": "fp_test",
            }
            return web.json_response(payload, headers=reply.headers)
        finally:
            self.in_flight -= 1

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.request_count, "max_in_flight": self.max_in_flight,
                                  "prompt_tokens": self.prompt_tokens,
                                  "completion_tokens": self.completion_tokens})

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset_stats()
        return web.json_response({"ok": True})


async def _serve(args: argparse.Namespace) -> None:
    server = LLMTestServer(latency_ms=args.latency_ms, realistic_usage=args.realistic_usage)
    await server.start(args.port)
    print(server.port, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main() -> None:
    """Run the server in the foreground (used by the benchmark as a subprocess).

    Example:
        >>> callable(main)
        True
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--realistic-usage", action="store_true",
                        help="bill each reply's usage as a provider would (litellm's tokenizer)")
    args = parser.parse_args()
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
