"""A deterministic OpenAI-compatible server for the capture generator.

Chat completions (plain and streamed) and the Responses API (plain, and streamed as
``response.created`` + ``response.completed``). A request that offers tools and asks about
the weather, with no tool result yet, gets the ``get_weather`` tool call (under the name the
request offers it by); every other request gets the scenario's fixed answer. A chat request that offers a ``final_answer`` tool
(smolagents' way of ending a run) gets that answer as a ``final_answer`` tool call.
A generator whose framework writes its own prompt format (DSPy) sets `CHAT_HOOK`: it gets
every chat request first, and the message it returns (if any) is the answer.

Every request and the answer it got is appended to `LOG` (``{"path", "request",
"response"}``): the ground truth of a capture comes from there, never from the spans.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWERS = {
    "What is the capital of France?": "The capital of France is Paris.",
    "What is my name?": "Your name is Ada.",
    "Count from one to five.": "One, two, three, four, five.",
    "What is the weather in Paris?": "The weather in Paris is sunny and 21 degrees Celsius.",
}
CALL_ID = "call_68e4854238118622674403a6"
FINAL_CALL_ID = "call_5f1a2e0c9b7d4e3a8c6b1d20"
ARGUMENTS = '{"city": "Paris"}'
LOG: list[dict[str, Any]] = []
#: Each Responses API answer's conversation (its input items and output), by response id: a
#: request with ``previous_response_id`` goes on from there, as the Responses API keeps it.
STORED: dict[str, list[Any]] = {}
#: ``(request body) -> assistant message or None``; None everywhere but in generators that set it.
CHAT_HOOK: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None


def last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def question(messages: list[dict[str, Any]]) -> str:
    """The scenario question of a request: the last user message, else one that contains a question.

    Frameworks may wrap the question (smolagents sends ``"New task:\\n<question>"``) or send
    the tool result as a user message after it.
    """
    last = last_user(messages)
    if last in ANSWERS:
        return last
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if message.get("role") == "user" and isinstance(content, str):
            found = next((q for q in ANSWERS if q in content), None)
            if found:
                return found
    return last


def _offers(body: dict[str, Any], name: str) -> bool:
    return any((t.get("function") or {}).get("name") == name for t in body.get("tools") or [] if isinstance(t, dict))


def _weather_tool(body: dict[str, Any]) -> str:
    """The name the request offers the weather tool under (Semantic Kernel offers ``<Plugin>-get_weather``)."""
    for tool in body.get("tools") or []:
        name = (tool.get("function") or tool).get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name.endswith("get_weather"):
            return name
    return "get_weather"


def _request_id(prefix: str, payload: Any) -> str:
    return prefix + "%024x" % (hash(json.dumps(payload)) & ((1 << 96) - 1))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        return

    def _json(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, line: bytes) -> None:
        self.wfile.write(line)
        self.wfile.flush()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if self.path.endswith("/responses"):
            self._responses(body)
        else:
            self._chat(body)

    def _chat(self, body: dict[str, Any]) -> None:
        msgs = body.get("messages", [])
        tool_turn = (
            bool(body.get("tools"))
            and "weather" in last_user(msgs)
            and not any(m.get("role") == "tool" for m in msgs)
        )
        hooked = CHAT_HOOK(body) if CHAT_HOOK is not None else None
        if hooked is not None:
            message, finish = hooked, "stop"
        elif tool_turn:
            fn = {"name": _weather_tool(body), "arguments": ARGUMENTS}
            call = {"id": CALL_ID, "type": "function", "function": fn}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        elif _offers(body, "final_answer"):
            answer = json.dumps({"answer": ANSWERS.get(question(msgs), "OK.")})
            call = {"id": FINAL_CALL_ID, "type": "function", "function": {"name": "final_answer", "arguments": answer}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": ANSWERS.get(question(msgs), "OK.")}
            finish = "stop"
        n = len(json.dumps(msgs)) // 40
        usage = {"prompt_tokens": n, "completion_tokens": 7, "total_tokens": n + 7}
        rid = _request_id("chatcmpl-", msgs)
        completion = {"id": rid, "object": "chat.completion", "created": 1700000000, "model": body["model"],
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
        LOG.append({"path": self.path, "request": body, "response": completion})
        if not body.get("stream"):
            self._json(completion)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        base = {"id": rid, "object": "chat.completion.chunk", "created": 1700000000, "model": body["model"]}

        def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            self._sse(b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n")

        if message.get("tool_calls"):
            delta = {"role": "assistant", "tool_calls": [{"index": 0, **message["tool_calls"][0]}]}
            send([{"index": 0, "delta": delta, "finish_reason": None}])
        else:
            for i, word in enumerate(message["content"].split(" ")):
                delta = {"content": word} if i == 0 else {"content": " " + word}
                if i == 0:
                    delta["role"] = "assistant"
                send([{"index": 0, "delta": delta, "finish_reason": None}])
        send([{"index": 0, "delta": {}, "finish_reason": finish}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], usage=usage)
        self._sse(b"data: [DONE]\n\n")

    def _responses(self, body: dict[str, Any]) -> None:
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        items = [*STORED.get(body.get("previous_response_id") or "", []), *items]  # the conversation kept here
        msgs = [i for i in items if isinstance(i, dict) and i.get("role")]
        answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        if body.get("tools") and "weather" in last_user(msgs) and not answered:
            output: list[dict[str, Any]] = [{"type": "function_call", "id": "fc_1", "call_id": CALL_ID,
                                             "name": _weather_tool(body), "arguments": ARGUMENTS, "status": "completed"}]
        else:
            text = ANSWERS.get(last_user(msgs), "OK.")
            output = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        resp = {
            "id": _request_id("resp_", items), "object": "response", "created_at": 1700000000,
            "model": body["model"], "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": body.get("tools") or [], "instructions": body.get("instructions"), "status": "completed",
            "usage": {"input_tokens": 17, "output_tokens": 6, "total_tokens": 23,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        }
        LOG.append({"path": self.path, "request": body, "response": resp})
        STORED[resp["id"]] = [*items, *output]
        if not body.get("stream"):
            self._json(resp)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        events = [{"type": "response.created", "response": {**resp, "output": [], "status": "in_progress"}},
                  {"type": "response.completed", "response": resp}]
        for seq, event in enumerate(events):
            event["sequence_number"] = seq
            self._sse(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())


def start() -> str:
    """Serve on a free local port in a daemon thread; returns the base URL (``.../v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
