"""A run's messages in the JSON form its queued record holds, made without the scorer models.

Owned by the adapters. The daemon's decision thread reads every trace and sends each run on
as JSON; building the agent-typed pydantic models (`adapters._messages.to_message`) only to
dump them again cost it about an eighth of its time. `message_json` writes the form
``to_message(msg).model_dump(mode="json")`` gives, directly, for the messages that make up
nearly every run: a role the models accept, text, and tool calls whose fields are text and
whose arguments are plain JSON values. Any other message (extra typed parts, a value the
models would convert or refuse) goes through the models, so the form is the same either way
(`tests/adapters/test_message_json.py` compares the two on generated messages).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from adapters._messages import Msg, to_message
from scorers._parts import parse_json_arguments

__all__ = ["input_json", "message_json", "output_json"]

_MODEL_ROLES = frozenset({"system", "user", "assistant", "tool"})
_SCALARS = (str, int, bool)


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is JSON as the models dump it unchanged: text, ints, bools, None,
    finite floats, and lists and text-keyed dicts of those (a tuple, bytes or NaN would be
    converted, so such arguments take the models' path)."""
    if value is None or type(value) in _SCALARS:
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_plain_json(item) for item in value)
    if type(value) is dict:
        return all(type(key) is str and _plain_json(item) for key, item in value.items())
    return False


def _checked_plain(value: Any) -> bool:
    """`_plain_json`, and False for a value nested too deep to walk (the models then say what
    becomes of it, as they did before this form existed)."""
    try:
        return _plain_json(value)
    except RecursionError:
        return False


def _optional_text(value: Any) -> bool:
    return value is None or type(value) is str


def message_json(msg: Msg) -> dict[str, Any]:
    """The JSON form of the scorer `Message` that ``msg`` becomes (as a run record holds it).

    Example:
        >>> from adapters._messages import Call
        >>> form = message_json(Msg("assistant", "Checking.", (Call("c1", "weather", '{"city": "Paris"}'),)))
        >>> [part["type"] for part in form["parts"]], form["tool_calls"][0]["arguments"]
        (['text', 'tool-call'], {'city': 'Paris'})
        >>> form == to_message(Msg("assistant", "Checking.", (Call("c1", "weather", '{"city": "Paris"}'),))).model_dump(mode="json")
        True
    """
    if msg.parts or msg.role not in _MODEL_ROLES or type(msg.content) is not str \
            or not _optional_text(msg.tool_call_id) or not _optional_text(msg.name):
        return to_message(msg).model_dump(mode="json")
    calls: list[dict[str, Any]] = []
    call_parts: list[dict[str, Any]] = []
    for call in msg.tool_calls:
        arguments = parse_json_arguments(call.arguments)
        if type(call.id) is not str or type(call.name) is not str or not _checked_plain(arguments):
            return to_message(msg).model_dump(mode="json")
        calls.append({"id": call.id, "name": call.name, "arguments": arguments, "result": None,
                      "state": "call", "is_error": False})
        call_parts.append({"type": "tool-call", "tool_call_id": call.id, "tool_name": call.name,
                           "args": arguments, "result": None, "state": "call", "is_error": False})
    content = msg.content
    parts = [{"type": "text", "text": content}, *call_parts] if content else call_parts
    return {"role": msg.role, "content": content, "parts": parts, "tool_calls": calls,
            "tool_call_id": msg.tool_call_id, "name": msg.name, "id": None, "metadata": {}}


def input_json(
    input_messages: Sequence[Msg], remembered: Sequence[Msg], system: Sequence[Msg]
) -> dict[str, Any]:
    """The JSON form of the `ScorerRunInputForAgent` made of these messages.

    Example:
        >>> form = input_json([Msg("user", "Hi")], [], [Msg("system", "Be terse.")])
        >>> list(form), form["system_messages"][0]["content"]
        (['input_messages', 'remembered_messages', 'system_messages', 'tagged_system_messages'], 'Be terse.')
    """
    return {
        "input_messages": [message_json(m) for m in input_messages],
        "remembered_messages": [message_json(m) for m in remembered],
        "system_messages": [message_json(m) for m in system],
        "tagged_system_messages": {},
    }


def output_json(produced: Sequence[Msg]) -> list[dict[str, Any]]:
    """The JSON form of the `ScorerRunOutputForAgent` made of these messages.

    Example:
        >>> [m["content"] for m in output_json([Msg("assistant", "Paris.")])]
        ['Paris.']
    """
    return [message_json(m) for m in produced]
