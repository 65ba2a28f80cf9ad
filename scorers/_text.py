"""Finding messages and their text in any accepted shape (internal to `scorers.utils`).

Shapes: our pydantic types, plain dicts and Mastra's camelCase JSON, lists of messages,
plain strings, and a whole `ScorerRun`. Dicts keep Mastra's text rules (see
`get_text_content`); other shapes are validated into `Message`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from scorers._agent_types import Message, ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._run import ScorerRun


def _last_text_part(parts: Any) -> str | None:
    if not isinstance(parts, list):
        return None
    texts = [p.get("text") for p in parts if isinstance(p, Mapping) and p.get("type") == "text"]
    texts = [t for t in texts if isinstance(t, str)]
    return texts[-1] if texts else None


def get_text_content(message: Any) -> str:
    """The text of one message ("" when it has none).

    Dicts follow Mastra's order: a string ``content``; the last text part of a list
    ``content``; a non-empty ``content.content``; ``content.text``; the last text part of
    ``content.parts``; then a top-level ``text``. A `Message` gives its ``content``.

    Example:
        >>> get_text_content({"role": "user", "content": {"format": 2, "parts": [{"type": "text", "text": "Hi"}]}})
        'Hi'
        >>> (get_text_content(Message(role="user", content="Yo")), get_text_content("plain"), get_text_content(None))
        ('Yo', 'plain', '')
    """
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    if isinstance(message, Message):
        return message.content
    if isinstance(message, Mapping):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return _last_text_part(content) or ""
        if isinstance(content, Mapping):
            for key in ("content", "text"):
                if isinstance(content.get(key), str) and content[key]:
                    return str(content[key])
            text = _last_text_part(content.get("parts"))
            if text is not None:
                return text
        return message["text"] if isinstance(message.get("text"), str) else ""
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def to_message(value: Any, default_role: str) -> Message | None:
    """``value`` as a `Message` (``default_role`` when it has none), or None."""
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return Message(role=default_role, content=value)  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        data = dict(value) if value.get("role") else {**value, "role": default_role}
        try:
            return Message.model_validate(data)
        except ValidationError:
            return None
    return None


def messages_of(values: Any, default_role: str) -> list[Message]:
    """Each value that is (or validates into) a message; other values are skipped."""
    if not isinstance(values, Iterable) or isinstance(values, str | bytes | Mapping):
        return []
    return [m for m in (to_message(v, default_role) for v in values) if m is not None]


def input_of(value: Any) -> Any:
    """The run's input when given a whole `ScorerRun`, else ``value``."""
    return value.input if isinstance(value, ScorerRun) else value


def output_messages(output: Any) -> list[Message]:
    output = output.output if isinstance(output, ScorerRun) else output
    if output is None:
        return []
    if isinstance(output, ScorerRunOutputForAgent):
        return list(output.root)
    if isinstance(output, str | Message) or (isinstance(output, Mapping) and "role" in output):
        message = to_message(output, "assistant")
        return [message] if message else []
    return messages_of(output, "assistant")


def input_messages(run_input: Any) -> list[Any]:
    """The raw input messages (dicts kept as dicts, so Mastra's text rules apply)."""
    run_input = input_of(run_input)
    if isinstance(run_input, ScorerRunInputForAgent):
        return list(run_input.input_messages)
    if isinstance(run_input, Mapping):
        for key in ("input_messages", "inputMessages"):
            if isinstance(run_input.get(key), list):
                return list(run_input[key])
        return []
    if isinstance(run_input, str):
        return [Message(role="user", content=run_input)]
    if isinstance(run_input, list):
        return list(run_input)
    return []


def role_of(message: Any) -> Any:
    """The ``role`` of a message or message dict."""
    return message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
