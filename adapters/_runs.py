"""What the adapters hand on: `AgentRun`, `Skip` and `Extraction`.

Owned by the adapters. ``request_context`` keys (each present only when known):
``service``, ``agent_name``, ``model``, ``provider``, ``conversation_id``, ``session_id``,
``user_id``, ``response_id`` (the run span's own ``gen_ai.response.id``), ``usage``
(``input_tokens`` / ``output_tokens`` / ``total_tokens``).

Skip reasons form a bounded set (`SKIP_REASONS`), suitable as a metrics label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from adapters._message_json import input_json, output_json
from adapters._messages import Msg, to_message
from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent

__all__ = ["SKIP_REASONS", "AgentRun", "Extraction", "RunMessages", "Skip"]

#: Every reason a `Skip` can carry.
SKIP_REASONS: frozenset[str] = frozenset(
    {
        "duplicate_span_id",  # a later span reused an id already seen in the trace: ignored
        "parent_cycle",  # the span's parent chain loops: treated as a root
        "invalid_json",  # a message attribute was not valid JSON: that attribute ignored
        "bad_attribute",  # a message attribute had an unexpected type or shape: ignored
        "duplicate_llm_call",  # an LLM span repeating its LLM parent (two instrumentors): ignored
        "adapter_error",  # an adapter failed on the span unexpectedly: span ignored
        "run_error",  # building a run failed unexpectedly: run dropped
    }
)


@dataclass(frozen=True, slots=True)
class Skip:
    """A span (or run) an adapter skipped or degraded, with a reason from `SKIP_REASONS`.

    Example:
        >>> Skip(span_id="0102030405060708", reason="invalid_json").reason
        'invalid_json'
    """

    span_id: str | None
    reason: str


class RunMessages(NamedTuple):
    """A run's messages as the adapters put them together, before they become the scorer's
    models: this turn's input, the remembered history, the system prompts and what the run
    produced."""

    input: list[Msg]
    remembered: list[Msg]
    system: list[Msg]
    output: list[Msg]

    def models(self) -> tuple[ScorerRunInputForAgent, ScorerRunOutputForAgent]:
        """The agent-typed input and output these messages make.

        Example:
            >>> run_input, run_output = RunMessages([Msg("user", "Hi")], [], [], [Msg("assistant", "Hello")]).models()
            >>> run_input.input_messages[0].content, run_output[0].content
            ('Hi', 'Hello')
        """
        run_input = ScorerRunInputForAgent(
            input_messages=[to_message(m) for m in self.input],
            remembered_messages=[to_message(m) for m in self.remembered],
            system_messages=[to_message(m) for m in self.system],
            tagged_system_messages={},
        )
        return run_input, ScorerRunOutputForAgent([to_message(m) for m in self.output])


@dataclass(frozen=True)
class AgentRun:
    """One agent run found in a trace: the span it is scored on and its agent-typed input/output.

    ``session_id`` names the conversation the run is a turn of (SPEC §7: the first session
    attribute found on the run span, then on the spans above it up to the root; see
    `adapters._session`), as the spans carry it (MLflow's JSON text decoded); None when it is a
    turn of none. With ``service`` it names the session across a deployment.

    Example:
        >>> run = AgentRun(trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent bot",
        ...                service="svc", convention="genai", start_ns=0, end_ns=1,
        ...                input=ScorerRunInputForAgent(), output=ScorerRunOutputForAgent([]),
        ...                request_context={"service": "svc"})
        >>> (run.convention, len(run.output))
        ('genai', 0)

    The adapters make their runs with `AgentRun.from_messages`: the models are then made the
    first time ``input`` or ``output`` is read, and `json_form` gives their JSON form without
    making them (the daemon only sends that form on).
    """

    trace_id: str
    span_id: str
    span_name: str
    service: str
    convention: str
    start_ns: int
    end_ns: int
    input: ScorerRunInputForAgent
    output: ScorerRunOutputForAgent
    request_context: dict[str, Any] = field(default_factory=dict)
    resource: Mapping[str, Any] = field(default_factory=dict)  # the run span's resource attributes
    session_id: str | None = None  # the conversation it is a turn of (`adapters._session`), as the spans carry it

    @classmethod
    def from_messages(
        cls, messages: RunMessages, *, trace_id: str, span_id: str, span_name: str, service: str,
        convention: str, start_ns: int, end_ns: int, request_context: dict[str, Any],
        resource: Mapping[str, Any], session_id: str | None = None,
    ) -> AgentRun:
        """A run whose ``input`` and ``output`` are made from ``messages`` when first read.

        Example:
            >>> run = AgentRun.from_messages(
            ...     RunMessages([Msg("user", "Hi")], [], [], [Msg("assistant", "Hello")]), trace_id="ab" * 16,
            ...     span_id="cd" * 8, span_name="chat", service="svc", convention="genai", start_ns=0, end_ns=1,
            ...     request_context={}, resource={})
            >>> "input" in vars(run), run.output[0].content, "input" in vars(run)
            (False, 'Hello', True)
        """
        run = cls.__new__(cls)
        # Frozen: the fields are set once, straight into the instance's dict (one call, no
        # per-field __setattr__), as the dataclass's __init__ would set them.
        run.__dict__.update(trace_id=trace_id, span_id=span_id, span_name=span_name, service=service,
                            convention=convention, start_ns=start_ns, end_ns=end_ns,
                            request_context=request_context, resource=resource, session_id=session_id,
                            _messages=messages)
        return run

    def with_session(self, session_id: str | None) -> AgentRun:
        """This run as a turn of ``session_id`` (its models still made only when first read).

        Example:
            >>> run = AgentRun("ab" * 16, "cd" * 8, "chat", "svc", "genai", 0, 1,
            ...                ScorerRunInputForAgent(), ScorerRunOutputForAgent([]))
            >>> run.with_session("s1").session_id, run.session_id
            ('s1', None)
        """
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__, session_id=session_id)  # as `from_messages` sets fields
        return copy

    def with_service(self, service: str) -> AgentRun:
        """This run as one of ``service`` (its ``request_context`` too), for a run read back from a
        backend that kept no resource (its models still made only when first read).

        Example:
            >>> run = AgentRun("ab" * 16, "cd" * 8, "chat", "", "genai", 0, 1,
            ...                ScorerRunInputForAgent(), ScorerRunOutputForAgent([]))
            >>> named = run.with_service("bot")
            >>> (named.service, named.request_context, run.service)
            ('bot', {'service': 'bot'}, '')
        """
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__, service=service,  # as `from_messages` sets fields
                             request_context={**self.request_context, "service": service})
        return copy

    def json_form(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The JSON form of this run's input and output, as its queued record holds them: made
        from its messages while its models are not made, else dumped from the models (as they
        are now).

        Example:
            >>> lazy = AgentRun.from_messages(
            ...     RunMessages([Msg("user", "Hi")], [], [], [Msg("assistant", "Hello")]), trace_id="ab" * 16,
            ...     span_id="cd" * 8, span_name="chat", service="svc", convention="genai", start_ns=0, end_ns=1,
            ...     request_context={}, resource={})
            >>> form = lazy.json_form()
            >>> "input" in vars(lazy), form == (lazy.input.model_dump(mode="json"), lazy.output.model_dump(mode="json"))
            (False, True)
        """
        state = self.__dict__
        messages = state.get("_messages")
        if messages is not None and "input" not in state:
            return input_json(messages.input, messages.remembered, messages.system), output_json(messages.output)
        return self.input.model_dump(mode="json"), self.output.model_dump(mode="json")

    if not TYPE_CHECKING:  # mypy keeps checking attribute names: only input and output come here

        def __getattr__(self, name: str) -> Any:
            """Make the models of a run from `from_messages` the first time they are read."""
            messages = self.__dict__.get("_messages") if name in ("input", "output") else None
            if messages is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            run_input, run_output = messages.models()
            object.__setattr__(self, "input", run_input)
            object.__setattr__(self, "output", run_output)
            return run_input if name == "input" else run_output


@dataclass(frozen=True, slots=True)
class Extraction:
    """The runs found in one trace and what was skipped on the way.

    Example:
        >>> Extraction(runs=[], skipped=[Skip(None, "parent_cycle")]).skipped[0].reason
        'parent_cycle'
    """

    runs: list[AgentRun]
    skipped: list[Skip]
