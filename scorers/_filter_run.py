"""`filter_run`: a declarative ``prepare_run`` that trims what a scorer (and its judge) sees.

Mastra's ``filterRun`` semantics: part types and tool names match by prefix; only
remembered messages and output messages are filtered (input, system and tagged system
messages are never touched); after filtering, the last N messages are kept. Differences,
on purpose: negative limits are rejected when `filter_run` is called (Mastra silently
drops the first |N|); a dropped request context becomes ``{}`` (our run always has a
dict); Mastra's part type ``"tool-invocation"`` also matches our ``"tool-call"`` parts.
A limit of 0 keeps everything, as in Mastra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scorers._agent_types import Message, ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._agent_types import ToolCallPart as _ToolCallPart
from scorers._agent_types import ToolResultPart as _ToolResultPart
from scorers._run import ScorerRun
from scorers.errors import ScorerDefinitionError

_PART_TYPE_ALIASES = {"tool-invocation": "tool-call"}


def _prefixes(value: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ScorerDefinitionError(f"filter_run: {what} must be a list of strings, got {value!r}")
    return (
        tuple(_PART_TYPE_ALIASES.get(v, v) for v in value) if what == "part_types" else tuple(value)
    )


def _limit(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScorerDefinitionError(f"filter_run: {what} must be an int, got {value!r}")
    if value < 0:
        raise ScorerDefinitionError(f"filter_run: {what} must not be negative, got {value}")
    return value


def _message_list(value: Any, where: str) -> list[Any]:
    """A message field's messages (None is none); anything but a list or tuple is refused."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"filter_run: {where} must be a list of messages, got {type(value).__name__}")
    return list(value)


def _as_message(value: Any) -> Message | None:
    if isinstance(value, Message):
        return value
    try:
        return Message.model_validate(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class RunFilter:
    """The ``prepare_run`` made by `filter_run` (a callable ``run -> run``, synchronous).

    Example:
        >>> RunFilter(max_output_messages=2).max_output_messages
        2
    """

    drop_request_context: bool = False
    drop_ground_truth: bool = False
    drop_expected_trajectory: bool = False
    part_types: tuple[str, ...] | None = None
    tool_names: tuple[str, ...] | None = None
    max_remembered_messages: int | None = None
    max_output_messages: int | None = None

    def __call__(self, run: ScorerRun[Any, Any]) -> ScorerRun[Any, Any]:
        update: dict[str, Any] = {}
        if self.drop_request_context:
            update["request_context"] = {}
        if self.drop_ground_truth:
            update["ground_truth"] = None
        if self.drop_expected_trajectory:
            update["expected_trajectory"] = None
        new_input = self._filter_input(run.input)
        if new_input is not run.input:
            update["input"] = new_input
        new_output = self._filter_output(run.output)
        if new_output is not run.output:
            update["output"] = new_output
        return run.model_copy(update=update) if update else run

    def _filter_input(self, value: Any) -> Any:
        if isinstance(value, ScorerRunInputForAgent):
            remembered = value.remembered_messages
            kept = self._messages(remembered, self.max_remembered_messages)
            if len(kept) == len(remembered):
                return value
            return value.model_copy(update={"remembered_messages": kept})
        if isinstance(value, Mapping):
            for key in ("remembered_messages", "rememberedMessages"):
                if key in value:
                    messages = _message_list(value[key], f"run.input[{key!r}]")
                    return {**value, key: self._messages(messages, self.max_remembered_messages)}
        return value

    def _filter_output(self, value: Any) -> Any:
        if isinstance(value, ScorerRunOutputForAgent | list):
            messages = value.root if isinstance(value, ScorerRunOutputForAgent) else value
            kept = self._messages(messages, self.max_output_messages)
            if len(kept) == len(messages):
                return value
            return (
                ScorerRunOutputForAgent(kept)
                if isinstance(value, ScorerRunOutputForAgent)
                else kept
            )
        return value

    def _messages(self, messages: Sequence[Any], limit: int | None) -> list[Any]:
        kept = list(messages)
        if self.part_types is not None or self.tool_names is not None:
            kept = [m for m in kept if self._keep(m)]
        if limit and len(kept) > limit:
            kept = kept[-limit:]
        return kept

    def _keep(self, raw: Any) -> bool:
        message = _as_message(raw)
        if message is None:
            return True  # not a message we understand: kept, as Mastra keeps part-less ones
        tool_names = [
            p.tool_name for p in message.parts if isinstance(p, _ToolCallPart | _ToolResultPart)
        ]
        if message.role == "tool" and message.name:
            tool_names.append(message.name)
        type_ok = self.part_types is None or any(
            p.type.startswith(self.part_types) for p in message.parts
        )
        if not tool_names:
            return type_ok
        if self.tool_names is not None and not any(
            name.startswith(self.tool_names) for name in tool_names
        ):
            return False
        return type_ok


def filter_run(
    drop_request_context: bool = False,
    drop_ground_truth: bool = False,
    part_types: Sequence[str] | None = None,
    tool_names: Sequence[str] | None = None,
    max_remembered_messages: int | None = None,
    max_output_messages: int | None = None,
    drop_expected_trajectory: bool = False,
) -> RunFilter:
    """Build a ``prepare_run`` that drops context and trims messages (Mastra's ``filterRun``).

    Args:
        drop_request_context: replace ``run.request_context`` with ``{}``.
        drop_ground_truth: replace ``run.ground_truth`` with None.
        part_types: keep only messages with a part whose type starts with one of these
            ("text", "reasoning", "tool-call", "tool-result", "file", "image", or any
            other part type such as "data-").
        tool_names: keep a message with tool calls or results (tool-call / tool-result
            parts, or a role "tool" message's ``name``) only if one of its tools' names
            starts with one of these (messages without tools are unaffected).
        max_remembered_messages: after filtering, keep the last N remembered messages.
        max_output_messages: after filtering, keep the last N output messages.
        drop_expected_trajectory: replace ``run.expected_trajectory`` with None.

    Only ``input.remembered_messages`` and the output messages are filtered; input, system
    and tagged system messages are never touched. A limit of 0 keeps everything.

    Raises:
        ScorerDefinitionError: a negative limit, or a non-list of prefixes.

    The returned ``prepare_run`` raises `TypeError` when a message field of the run it
    filters (remembered messages in a dict input) is not a list, as Mastra's would fail on
    it, instead of iterating a string character by character.

    Example:
        >>> from scorers import create_scorer
        >>> from scorers.utils import make_message
        >>> prepare = filter_run(drop_ground_truth=True, max_output_messages=1)
        >>> scorer = create_scorer(id="last", description="d", type="agent", prepare_run=prepare)
        >>> scorer = scorer.generate_score(lambda run: len(run.output))
        >>> output = [make_message("Checking...", role="assistant"), make_message("Done.", role="assistant")]
        >>> result = scorer.run_sync(input="Go", output=output, ground_truth="secret")
        >>> (result.score, result.output[0].content, result.ground_truth)
        (1.0, 'Done.', None)
    """
    return RunFilter(
        drop_request_context=bool(drop_request_context),
        drop_ground_truth=bool(drop_ground_truth),
        drop_expected_trajectory=bool(drop_expected_trajectory),
        part_types=_prefixes(part_types, "part_types"),
        tool_names=_prefixes(tool_names, "tool_names"),
        max_remembered_messages=_limit(max_remembered_messages, "max_remembered_messages"),
        max_output_messages=_limit(max_output_messages, "max_output_messages"),
    )
