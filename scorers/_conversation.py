"""`ConversationRun`: a whole session (many agent runs, one per user turn) as one scorer run.

A conversation scorer (``create_scorer(..., type="conversation")``) is run on a
`ConversationRun`. Its ``input`` and ``output`` are agent-typed, built from the turns so the
helpers of `scorers.utils` read a conversation as they read a run; ``conversation`` is the
interleaved transcript that prompt steps usually put in the judge prompt (SPEC §7).

Rules, applied when the run is made from its turns:

* **Order.** A turn's start time is its ``start_ns`` field (nanoseconds since the Unix
  epoch, as OTLP's ``start_time_unix_nano``; `ScorerRun` keeps it as an extra field:
  ``ScorerRun(..., start_ns=...)`` or ``make_agent_run(..., start_ns=...)``). When every
  turn has one, turns are sorted by it (ties keep the given order); when any turn lacks
  one, the given order is kept.
* **New user messages.** A turn's input often repeats the conversation so far (chat APIs
  send the whole history each turn; a memory window sends its end). Of a turn's input
  messages, the longest prefix that equals the end of the conversation so far (compared
  as role and text of its user and assistant messages with text) is history; the user
  messages after it are the turn's new user messages. Remembered messages are history by
  definition and never new. So a turn that repeats nothing contributes all its user
  messages, and a turn whose input only repeats how the conversation ended (a retried
  request) contributes none.
* **Output.** Every turn's assistant and tool messages, in order.
* **System messages.** The first turn's: its ``system_messages`` and system-role input
  messages become ``input.system_messages``; its tagged system messages are kept.
* **Transcript.** Per turn, its new user messages, then its output: an assistant message
  with text, and each tool result (``"<tool>: <result>"``, a result given both on the
  call and in a tool message counted once). Each entry names its turn's ``trace_id``.

A ``prepare_run`` such as `filter_run` sees the `ConversationRun` and trims its ``input``
and ``output`` as a run's; ``turns`` and ``conversation`` are kept as they are. A
``prepare_run`` that returns a dict keeps the conversation fields it leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field, ValidationError, model_validator

from scorers._agent_types import (
    Message,
    ScorerRunInputForAgent,
    ScorerRunOutputForAgent,
    ToolResultPart,
)
from scorers._run import ScorerRun
from scorers.errors import ScorerInputError

CONVERSATION_FIELDS = ("turns", "conversation", "session_id", "service", "revision", "partial")
"""The fields a conversation has beyond a run's (kept when ``prepare_run`` returns a dict)."""

class ConversationRun(ScorerRun[ScorerRunInputForAgent, ScorerRunOutputForAgent]):
    """A session's agent runs as one run, for conversation scorers (``type="conversation"``).

    Build it with `from_turns` (or ``ConversationRun(turns=[...], ...)``, the same): ``input``,
    ``output`` and ``conversation`` are derived from the turns unless given (the rules are
    in this module's docstring). ``trace_id`` and ``span_id`` default to the last turn's,
    where the daemon puts a conversation's score.

    Attributes:
        turns: the session's agent runs (`ScorerRun`s with agent-typed input and output,
            ``trace_id``, ``span_id``), ordered by start time (``start_ns``).
        input: every turn's new user messages in order, with the first turn's system messages.
        output: every turn's assistant and tool messages in order.
        conversation: the transcript, ``[{"role", "content", "trace_id"}]`` (user, assistant, tool).
        session_id: the session's key.
        service: the service the session belongs to (default: the first turn's
            ``request_context["service"]``).
        revision: 1, then 2, 3... each time a late turn reopens a scored session.
        partial: True when the session was scored before it ended (max age or max turns).

    Example:
        >>> from scorers.utils import get_assistant_message, get_user_message, make_agent_run
        >>> first = make_agent_run("My name is Ann.", "Hi Ann!", system_messages=["Be kind."], trace_id="t1")
        >>> second = make_agent_run(["My name is Ann.", {"role": "assistant", "content": "Hi Ann!"},
        ...                          "What is my name?"], "Ann.", trace_id="t2")
        >>> convo = ConversationRun.from_turns([first, second], session_id="s1")
        >>> [m.content for m in convo.input.input_messages]  # the history second repeats is not new
        ['My name is Ann.', 'What is my name?']
        >>> (get_user_message(convo), get_assistant_message(convo), convo.input.system_messages[0].content)
        ('My name is Ann.', 'Ann.', 'Be kind.')
        >>> [(e["role"], e["content"], e["trace_id"]) for e in convo.conversation]
        [('user', 'My name is Ann.', 't1'), ('assistant', 'Hi Ann!', 't1'), ('user', 'What is my name?', 't2'), ('assistant', 'Ann.', 't2')]
        >>> (convo.session_id, convo.revision, convo.partial, convo.trace_id)
        ('s1', 1, False, 't2')
        >>> late, early = make_agent_run("b", start_ns=20), make_agent_run("a", start_ns=10)
        >>> [t.input.input_messages[0].content for t in ConversationRun.from_turns([late, early]).turns]
        ['a', 'b']
    """

    input: ScorerRunInputForAgent = Field(default_factory=ScorerRunInputForAgent)
    output: ScorerRunOutputForAgent = Field(default_factory=lambda: ScorerRunOutputForAgent([]))
    turns: list[ScorerRun[Any, Any]] = Field(default_factory=list)
    conversation: list[dict[str, Any]] = Field(default_factory=list)
    session_id: str | None = None
    service: str | None = None
    revision: int = 1
    partial: bool = False

    @classmethod
    def from_turns(
        cls,
        turns: Iterable[ScorerRun[Any, Any] | Mapping[str, Any]],
        *,
        session_id: str | None = None,
        service: str | None = None,
        revision: int = 1,
        partial: bool = False,
        **fields: Any,
    ) -> ConversationRun:
        """The conversation of ``turns`` (runs, or dicts of their fields); ``fields`` are other
        run fields (``run_id``, ``ground_truth``, ``request_context``, extras...).

        Raises:
            pydantic.ValidationError: a turn is not a run, or its input or output is not
                agent-typed.

        Example:
            >>> from scorers.utils import make_agent_run
            >>> convo = ConversationRun.from_turns([make_agent_run("Hi", "Hello!", request_context={"service": "bot"})],
            ...                                    session_id="s1", revision=2, run_id="c1")
            >>> (convo.run_id, convo.service, convo.revision, len(convo.turns))
            ('c1', 'bot', 2, 1)
        """
        given: list[Any] = list(turns)
        return cls(turns=given, session_id=session_id, service=service, revision=revision,
                   partial=partial, **fields)  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("turns") is None:
            return data
        data = dict(data)
        turns = _ordered([_turn(t, i) for i, t in enumerate(data["turns"])])
        data["turns"] = turns
        built = _build(turns)
        for key in ("input", "output", "conversation"):
            if data.get(key) is None:
                data[key] = built[key]
        if data.get("service") is None and turns:
            service = turns[0].request_context.get("service")
            data["service"] = service if isinstance(service, str) else None
        if turns and data.get("trace_id") is None and data.get("traceId") is None:
            data["trace_id"], data["span_id"] = turns[-1].trace_id, turns[-1].span_id
        return data


def _turn(value: Any, index: int) -> ScorerRun[Any, Any]:
    """One turn as an agent-typed run (a run, or a dict of its fields)."""
    if isinstance(value, ConversationRun):
        raise ValueError(f"turn {index} is a ConversationRun; a turn is one agent run")
    if isinstance(value, Mapping) and ("input" in value or "output" in value):
        value = ScorerRun.model_validate(dict(value))
    if not isinstance(value, ScorerRun):
        raise ValueError(f"turn {index} is not a run (a ScorerRun or a dict with input / output): {value!r:.80}")
    update: dict[str, Any] = {}
    try:
        if not isinstance(value.input, ScorerRunInputForAgent):
            raw = {} if value.input is None else value.input
            update["input"] = ScorerRunInputForAgent.model_validate(raw)
        if not isinstance(value.output, ScorerRunOutputForAgent):
            update["output"] = ScorerRunOutputForAgent.model_validate([] if value.output is None else value.output)
    except ValidationError as exc:
        raise ValueError(f"turn {index} is not an agent run: {exc}") from None
    start = (value.model_extra or {}).get("start_ns")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
        raise ValueError(f"turn {index}: start_ns must be an int (nanoseconds), got {start!r}")
    return value.model_copy(update=update) if update else value


def _start(turn: ScorerRun[Any, Any]) -> int | None:
    start = (turn.model_extra or {}).get("start_ns")
    return start if isinstance(start, int) else None


def _ordered(turns: list[ScorerRun[Any, Any]]) -> list[ScorerRun[Any, Any]]:
    """By start time when every turn has one (stable), else as given."""
    starts = [_start(t) for t in turns]
    known = [s for s in starts if s is not None]
    if len(known) < len(turns):
        return turns
    return [t for _, t in sorted(zip(known, turns, strict=True), key=lambda pair: pair[0])]


def _key(message: Message) -> tuple[str, str] | None:
    """How a message is compared with the history (None: it is not compared)."""
    text = message.content.strip()
    return (message.role, text) if message.role in ("user", "assistant") and text else None


def new_user_messages(history: Sequence[tuple[str, str]], messages: Sequence[Message]) -> list[Message]:
    """The user messages of ``messages`` after the longest prefix that ends ``history``.

    ``history`` is the conversation so far as ``(role, text)`` of its user and assistant
    messages with text; messages without text (tool traffic) are skipped in the comparison.

    Example:
        >>> history = [("user", "Hi"), ("assistant", "Hello!")]
        >>> said = [Message(role="user", content="Hi"), Message(role="assistant", content="Hello!"),
        ...         Message(role="user", content="Bye")]
        >>> [m.content for m in new_user_messages(history, said)]
        ['Bye']
        >>> [m.content for m in new_user_messages(history, said[2:])]
        ['Bye']
        >>> new_user_messages([("user", "Hi")], said[:1])  # a retried request
        []
    """
    keyed = [(i, k) for i, m in enumerate(messages) if (k := _key(m)) is not None]
    overlap = 0
    for size in range(min(len(keyed), len(history)), 0, -1):
        if [k for _, k in keyed[:size]] == list(history[len(history) - size:]):
            overlap = size
            break
    start = keyed[overlap - 1][0] + 1 if overlap else 0
    return [m for m in messages[start:] if m.role == "user"]


def _result_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


def _output_entries(messages: Sequence[Message], trace_id: str | None) -> list[dict[str, Any]]:
    """Transcript entries of one turn's output: assistant text, then each tool result once."""
    names = {c.id: c.name for m in messages for c in m.tool_calls if c.id}
    seen: set[str] = set()
    entries: list[dict[str, Any]] = []

    def tool(call_id: str, name: str, result: Any) -> None:
        if call_id and call_id in seen:
            return
        seen.add(call_id)
        name = name or names.get(call_id, "")
        text = _result_text(result)
        entries.append({"role": "tool", "content": f"{name}: {text}" if name else text, "trace_id": trace_id})

    for message in messages:
        if message.role == "assistant" and message.content:
            entries.append({"role": "assistant", "content": message.content, "trace_id": trace_id})
        for call in message.tool_calls:
            if call.state == "result" and call.result is not None:
                tool(call.id, call.name, call.result)
        parts = [p for p in message.parts if isinstance(p, ToolResultPart)]
        for part in parts:
            tool(part.tool_call_id, part.tool_name, part.result)
        if message.role == "tool" and not parts and message.content:
            tool(message.tool_call_id or "", message.name or "", message.content)
    return entries


def _build(turns: Sequence[ScorerRun[Any, Any]]) -> dict[str, Any]:
    """``input``, ``output`` and ``conversation`` of the (ordered, agent-typed) turns."""
    history: list[tuple[str, str]] = []
    users: list[Message] = []
    outputs: list[Message] = []
    conversation: list[dict[str, Any]] = []
    for turn in turns:
        new = new_user_messages(history, turn.input.input_messages)
        produced = [m for m in turn.output if m.role in ("assistant", "tool")]
        users += new
        outputs += produced
        conversation += [{"role": "user", "content": m.content, "trace_id": turn.trace_id} for m in new]
        conversation += _output_entries(produced, turn.trace_id)
        history += [k for m in [*new, *produced] if (k := _key(m)) is not None]
    first = turns[0].input if turns else ScorerRunInputForAgent()
    system = [*first.system_messages, *(m for m in first.input_messages if m.role == "system")]
    run_input = ScorerRunInputForAgent(input_messages=users, system_messages=system,
                                       tagged_system_messages=dict(first.tagged_system_messages))  # fmt: skip
    return {"input": run_input, "output": ScorerRunOutputForAgent(outputs), "conversation": conversation}


def check_run_kind(scorer_id: str, scorer_type: str | None, run: Any) -> None:
    """Raise `ScorerInputError` when a conversation scorer gets a single run or a run scorer
    gets a conversation.

    Example:
        >>> check_run_kind("s", "conversation", ScorerRun(output="a"))
        Traceback (most recent call last):
        ...
        scorers.errors.ScorerInputError: Scorer "s" is a conversation scorer: run it on a ConversationRun or a list of turns, not a single ScorerRun
        >>> check_run_kind("s", "agent", ScorerRun(output="a"))  # a run scorer on a run: fine
    """
    if scorer_type == "conversation" and not isinstance(run, ConversationRun):
        raise ScorerInputError(
            f'Scorer "{scorer_id}" is a conversation scorer: run it on a ConversationRun or a '
            f"list of turns, not a single {type(run).__name__}",
            field="run",
        )
    if scorer_type != "conversation" and isinstance(run, ConversationRun):
        raise ScorerInputError(
            f'Scorer "{scorer_id}" scores single runs: a ConversationRun needs a scorer with '
            'type="conversation"',
            field="run",
        )
