"""Helpers of the built-in scorer tests: the fake OpenAI-compatible server and a responder
that answers each judge prompt by its first words (so steps are independent of order)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server

Reply = llm_server.Reply


def user_prompt(body: Mapping[str, Any]) -> str:
    """The text of the user message of a chat-completions request body."""
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, list):
                return "\n\n".join(p.get("text", "") for p in content)
            return str(content)
    return ""


def by_prefix(replies: Mapping[str, Any]) -> Any:
    """A responder: the reply whose key starts the prompt (dicts become JSON, str text)."""

    def respond(body: Mapping[str, Any]) -> Any:
        text = user_prompt(body)
        for prefix, reply in replies.items():
            if text.startswith(prefix):
                if isinstance(reply, str):
                    return Reply.text(reply)
                return Reply.json(reply)
        raise AssertionError(f"unexpected judge prompt: {text[:120]!r}")

    return respond


def prompts(server: Any) -> list[str]:
    """The user prompts the server received, in order."""
    return [user_prompt(r.body) for r in server.requests]


def schema_of(request: Any) -> dict[str, Any]:
    """The JSON schema a request asked for (native response_format)."""
    fmt = request.body.get("response_format") or {}
    return dict(fmt.get("json_schema", {}).get("schema", {}))


def dumps(value: Any) -> str:
    return json.dumps(value)
