"""The user's message in an agent span's recorded input (OpenInference ``input.value`` and the like).

Owned by the adapters. Agent instrumentations record one of three things as the agent's
input: the user's text (Agno, BeeAI), a message list (LangGraph state, AG2
``generate_reply``), or the JSON of the agent call's bound arguments, where one argument
holds the user's message and the others are options:

* smolagents ``MultiStepAgent.run``: ``{"task": ..., "stream", "reset", "images", ...}``;
* AG2 ``initiate_chat``: ``{"message": ..., "sender", "recipient"}``;
* LangChain ``AgentExecutor``: ``{"input": ..., "chat_history": [...]}``;
* CrewAI's LiteAgent ``kickoff``: ``messages`` (text or a message list).

AutoGen AgentChat records ``{"messages": [<repr of a TextMessage>], "cancellation_token"}``:
Python reprs, not JSON, so nothing is read from it (its model calls carry the messages).
A JSON object with no such argument yields no message: the raw JSON is never taken for
the user's words.
"""

from __future__ import annotations

from typing import Any

from adapters._messages import Msg, parse_messages

__all__ = ["USER_ARGUMENTS", "arguments_messages"]

#: Names of the agent-call argument that holds the user's message, in the order tried.
USER_ARGUMENTS: tuple[str, ...] = (
    "task",
    "input",
    "message",
    "messages",
    "query",
    "question",
    "prompt",
    "user_msg",
    "user_input",
    "user_message",
)


def _message_of(value: Any) -> list[Msg]:
    """The user message(s) one argument value holds: text, a message dict, or a message list."""
    if isinstance(value, str):
        return [Msg("user", value)] if value.strip() else []
    if isinstance(value, dict):
        if "role" in value or "content" in value:
            return parse_messages([{"role": "user", **value}])
        return []
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return parse_messages(value)
    return []


def arguments_messages(arguments: dict[str, Any]) -> tuple[list[Msg], str | None]:
    """The user's message(s) from the JSON of an agent call's arguments, and the argument that held them.

    Python-binding wrappers (``{"args": [...], "kwargs": {...}}``) are looked into:
    keyword arguments first, then a text first positional argument.

    Example:
        >>> msgs, name = arguments_messages({"task": "What is the weather in Paris?", "stream": False})
        >>> ([(m.role, m.content) for m in msgs], name)
        ([('user', 'What is the weather in Paris?')], 'task')
        >>> arguments_messages({"message": {"content": "Hi", "role": "user"}, "sender": "a"})[0][0].content
        'Hi'
        >>> arguments_messages({"cancellation_token": "<token>"})
        ([], None)
    """
    kwargs = arguments.get("kwargs")
    if isinstance(kwargs, dict) and set(arguments) <= {"args", "kwargs"}:
        msgs, name = arguments_messages(kwargs)
        args = arguments.get("args")
        if not msgs and isinstance(args, list) and args and isinstance(args[0], str):
            return _message_of(args[0]), "args[0]"
        return msgs, name
    for name in USER_ARGUMENTS:
        if name in arguments:
            msgs = _message_of(arguments[name])
            if msgs:
                return msgs, name
    return [], None
