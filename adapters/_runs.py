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
from typing import Any

from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent

__all__ = ["SKIP_REASONS", "AgentRun", "Extraction", "Skip"]

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


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One agent run found in a trace: the span it is scored on and its agent-typed input/output.

    ``session_id`` names the conversation the run is a turn of (SPEC §7: the first session
    attribute found on the run span, then on the spans above it up to the root; see
    `adapters._session`), exactly as the spans carry it; None when it is a turn of none. With
    ``service`` it names the session across a deployment.

    Example:
        >>> run = AgentRun(trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent bot",
        ...                service="svc", convention="genai", start_ns=0, end_ns=1,
        ...                input=ScorerRunInputForAgent(), output=ScorerRunOutputForAgent([]),
        ...                request_context={"service": "svc"})
        >>> (run.convention, len(run.output))
        ('genai', 0)
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


@dataclass(frozen=True, slots=True)
class Extraction:
    """The runs found in one trace and what was skipped on the way.

    Example:
        >>> Extraction(runs=[], skipped=[Skip(None, "parent_cycle")]).skipped[0].reason
        'parent_cycle'
    """

    runs: list[AgentRun]
    skipped: list[Skip]
