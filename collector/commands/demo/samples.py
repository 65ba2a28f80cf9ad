"""The demo's inputs: the bundled sample traces, the runs the adapters find in them (and
the scorers each gets), and the demo daemon's configuration."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import adapters
from collector.commands.demo.replay import IdRemap
from collector.commands.demo.scorers import SCORERS
from collector.commands.sessions_view import group_sessions
from collector.common.session_types import session_scope
from collector.config import Config, config_from_dict
from collector.work.registry import ScorerRegistry

DECISION_WAIT_S = 0.5
"""The demo daemon's ``assembly.decision_wait`` (the default is 5 s)."""

ROOTLESS_WAIT_S = 2.0
"""The demo daemon's ``assembly.rootless_wait``: a trace whose root never comes waits this long."""

SESSION_IDLE_S = 1.0
"""The demo daemon's ``sessions.idle_s``: a conversation without an end marker is scored this long
after its last turn (the bundled one ends with a marker)."""

TRACE_SUFFIXES = (".pb", ".json", ".pb.gz", ".json.gz")


@dataclass(frozen=True)
class Sample:
    """One sample trace file: its name (the file name without suffix) and its OTLP request.

    Example:
        >>> Sample("s1", ExportTraceServiceRequest()).name
        's1'
    """

    name: str
    request: ExportTraceServiceRequest


def _trace_files(directory: Path | None) -> Iterator[Path]:
    if directory is None:
        with resources.as_file(resources.files("collector.commands.demo") / "traces") as bundled:
            yield from _trace_files(bundled)
        return
    for path in sorted(directory.iterdir()):
        if path.name.endswith(TRACE_SUFFIXES) and not adapters.is_logs_file(path.name):
            yield path


def load_samples(directory: Path | None = None) -> list[Sample]:
    """Read every OTLP trace file of ``directory`` (default: the bundled samples), by name.

    Raises:
        adapters.OtlpFileError: when a file is not an OTLP trace request, or there is none.

    Example:
        >>> [s.name for s in load_samples()]  # doctest: +NORMALIZE_WHITESPACE
        ['openai-v2-multi-turn', 'openai-v2-single-turn', 'openai-v2-tool-call',
         'openinference-openai', 'pydantic-ai', 'support-conversation-turn1', 'support-conversation-turn2',
         'support-conversation-turn3', 'traceloop']
        >>> load_samples(Path("/nonexistent"))
        Traceback (most recent call last):
        ...
        adapters.otlp_files.OtlpFileError: /nonexistent: not a directory
    """
    if directory is not None and not directory.is_dir():
        raise adapters.OtlpFileError(str(directory), "not a directory")
    samples = []
    for path in _trace_files(directory):
        name = path.name
        for suffix in TRACE_SUFFIXES:
            name = name.removesuffix(suffix)
        samples.append(Sample(name, adapters.read_trace_file(str(path))))
    if not samples:
        raise adapters.OtlpFileError(str(directory), f"no OTLP trace files ({', '.join(TRACE_SUFFIXES)})")
    return samples


@dataclass(frozen=True)
class PlannedRun:
    """An agent run the daemon will find in a replayed sample, under its replayed ids.

    Example:
        >>> PlannedRun("s1", "ab" * 16, "cd" * 8, "bot", "chat", ("q",)).scorer_ids
        ('q',)
    """

    sample: str
    trace_id: str
    span_id: str
    service: str
    span_name: str
    scorer_ids: tuple[str, ...]


def plan_runs(samples: list[Sample], registry: ScorerRegistry, ids: IdRemap) -> list[PlannedRun]:
    """The runs the adapters find in ``samples`` and the scorers each will get.

    Ids are the replayed ones (``ids`` is the mapping the replay uses); scorers are matched
    the way the daemon matches them (filter, then sampling on the trace id).

    Example:
        >>> from collector.config import ScorerConfig
        >>> registry = ScorerRegistry.load([ScorerConfig(**t) for t in SCORERS])
        >>> runs = plan_runs(load_samples(), registry, IdRemap())
        >>> [(r.sample, len(r.scorer_ids)) for r in runs][1:3]
        [('openai-v2-single-turn', 4), ('openai-v2-tool-call', 5)]
    """
    planned = []
    for sample in samples:
        spans = adapters.spans_from_resource_spans(sample.request.resource_spans)
        by_id = {s.span_id: s for s in spans}
        for trace in adapters.assemble(spans):
            for run in adapters.extract_runs(trace).runs:
                span = by_id.get(run.span_id)
                attributes = dict(span.attributes) if span is not None else {}
                agent = (run.request_context or {}).get("agent_name") or attributes.get("gen_ai.agent.name")
                trace_id = ids.trace_hex(run.trace_id)
                scorer_ids = tuple(
                    entry.scorer_id
                    for entry, decision in registry.decisions(
                        trace_id=trace_id, service=run.service,
                        agent=None if agent is None else str(agent),
                        span_name=run.span_name, attributes=attributes,
                    )
                    if decision == "admitted"
                )
                planned.append(PlannedRun(sample.name, trace_id, ids.span_hex(run.span_id),
                                          run.service, run.span_name, scorer_ids))
    return planned


@dataclass(frozen=True)
class PlannedSession:
    """A conversation the replayed samples make (SPEC §7) and the conversation scorers it gets."""

    service: str
    session_id: str
    turns: int
    scorer_ids: tuple[str, ...]


def plan_sessions(samples: list[Sample], registry: ScorerRegistry) -> list[PlannedSession]:
    """The conversations the runs of ``samples`` make and the conversation scorers each will get
    (filter on its last turn, then sampling on its scope, as the daemon decides).

    Example:
        >>> from collector.config import ScorerConfig
        >>> registry = ScorerRegistry.load([ScorerConfig(**t) for t in SCORERS])
        >>> [(s.service, s.turns, s.scorer_ids) for s in plan_sessions(load_samples(), registry)]
        [('acceptance-pydantic-ai', 1, ('conversation-answered',)), ('support-bot', 3, ('conversation-answered',))]
    """
    runs: list[adapters.AgentRun] = []
    for sample in samples:
        for trace in adapters.assemble(adapters.spans_from_resource_spans(sample.request.resource_spans)):
            runs.extend(run for run in adapters.extract_runs(trace).runs if run.session_id is not None)
    planned = []
    for session in group_sessions(runs):
        last = session.turns[-1]
        scorer_ids = tuple(
            entry.scorer_id for entry, decision in registry.conversation_decisions(
                scope=session_scope(session.service, session.session_id), service=session.service,
                agent=(last.request_context or {}).get("agent_name"), span_name=last.span_name,
                attributes=last.request_context or {})
            if decision == "admitted")
        planned.append(PlannedSession(session.service, session.session_id, len(session.turns), scorer_ids))
    return planned


def demo_config(directory: Path, export_endpoint: str) -> Config:
    """The demo daemon's configuration: free 127.0.0.1 ports, SQLite in ``directory``.

    The process environment is ignored (``TRACESCORE_*`` and ``OTEL_EXPORTER_OTLP_*``
    variables would otherwise send the demo's scores elsewhere).

    Example:
        >>> cfg = demo_config(Path("/tmp/d"), "http://127.0.0.1:4999")
        >>> (cfg.queue.url, cfg.receiver.grpc_endpoint, cfg.assembly.decision_wait, len(cfg.scorers))
        ('sqlite:////tmp/d/queue.db', '127.0.0.1:0', 0.5, 6)
    """
    return config_from_dict({
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0"},
        "assembly": {"decision_wait": DECISION_WAIT_S, "rootless_wait": ROOTLESS_WAIT_S},
        "sessions": {"idle_s": SESSION_IDLE_S},
        "queue": {"url": f"sqlite:///{directory / 'queue.db'}"},
        "export": {"endpoint": export_endpoint, "protocol": "grpc", "timeout_s": 5.0, "max_backoff_s": 1.0},
        "scorers": SCORERS,
    }, env={})


