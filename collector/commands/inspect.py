"""``tracescore inspect FILE...`` (or ``--from URL``): print the agent runs the adapters find in
saved OTLP files, or in the traces already in a backend (`collector.commands.inspect_from`).

Files hold one OTLP request each (protobuf or OTLP/JSON, optionally gzip; ``[receiver]
save_dir`` makes the daemon write what it receives as such files). Files named
``*.logs.pb`` / ``*.logs.json`` hold log requests, joined to the traces of the other
files. A file that cannot be read is reported on stderr and makes the exit code 1; the
other files are still processed. ``--format jsonl`` prints one JSON object per run on
stdout (SPEC §3 row format, without the scorer fields; a run that is a turn of a session also
has its ``session_id``, SPEC §7), ``--format json`` one JSON array;
``--format table`` prints a rich table. The default is ``table`` on a terminal and
``jsonl`` otherwise. ``--explain`` prints, per trace, why these runs (`adapters.explain_trace`):
as text for ``table``, one JSON object per trace for ``jsonl``, a JSON array for ``json``.
``--sessions`` prints the conversations instead (`collector.commands.sessions_view`);
``--session-key ATTR`` names a session attribute besides SPEC §7's (as ``[sessions] extra_keys``).
The summary (stderr, on a terminal or with ``table``) counts the runs, the traces and the
files actually read (a directory's files, not the arguments). Helpers here are shared with
``tracescore score``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from adapters import (
    AgentRun,
    AssembledTrace,
    OtlpFileError,
    TraceExplanation,
    TraceLog,
    TraceSpan,
    assemble,
    explain_trace,
    extract_runs,
    is_logs_file,
    logs_from_resource_logs,
    read_logs_file,
    read_trace_file,
    spans_from_resource_spans,
)
from collector.commands.layout import print_table
from collector.commands.paths import expand_paths
from collector.commands.progress_bar import progress
from collector.commands.scored_before import ScoredBefore, restore_services
from collector.commands.sessions_view import group_sessions, session_row, sessions_table
from scorers._agent_types import Message

__all__ = [
    "Loaded",
    "add_runs",
    "explanation_lines",
    "load_runs",
    "load_traces",
    "message_row",
    "resolve_format",
    "run",
    "run_row",
]


def resolve_format(requested: str | None, stream: Any = None) -> str:
    """The output format: as requested, else ``table`` when ``stream`` is a terminal.

    Example:
        >>> import io
        >>> (resolve_format("table"), resolve_format(None, io.StringIO()))
        ('table', 'jsonl')
    """
    if requested:
        return requested
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return "table" if callable(isatty) and isatty() else "jsonl"


@dataclass
class Loaded:
    """What reading the files gave: the runs, the files that failed, and adapter skips.

    Example:
        >>> Loaded().failed_files
        []
    """

    runs: list[AgentRun] = field(default_factory=list)
    failed_files: list[str] = field(default_factory=list)
    traces: int = 0
    skips: Counter[str] = field(default_factory=Counter)
    span_attributes: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)  # of each run span
    scored: ScoredBefore = field(default_factory=ScoredBefore)  # the evaluation spans among the traces read


def load_traces(paths: Sequence[str], err: Console, failed: list[str],
                read: list[str] | None = None) -> list[AssembledTrace]:
    """Read every file (errors reported on ``err``, unreadable paths added to ``failed``, the
    files read to ``read`` when given), join logs to traces.

    Example:
        >>> import io
        >>> failed = []
        >>> (load_traces(["/nonexistent.pb"], Console(file=io.StringIO()), failed), failed)
        ([], ['/nonexistent.pb'])
    """
    spans: list[TraceSpan] = []
    logs: list[TraceLog] = []
    expanded = expand_paths(paths)  # directories and glob patterns
    for arg in expanded.empty:
        err.print(f"tracescore: {arg}: no OTLP files there", markup=False, highlight=False, soft_wrap=True)
        failed.append(arg)
    paths = expanded.files
    with progress(err) as bar:
        task = bar.add_task("reading", total=len(paths))
        for path in paths:
            try:
                if is_logs_file(path):
                    logs.extend(logs_from_resource_logs(read_logs_file(path).resource_logs))
                else:
                    spans.extend(spans_from_resource_spans(read_trace_file(path).resource_spans))
            except OtlpFileError as exc:
                err.print(f"tracescore: {exc}", markup=False, highlight=False, soft_wrap=True)
                failed.append(path)
            else:
                if read is not None:
                    read.append(path)
            bar.advance(task)
    return assemble(spans, logs)


def load_runs(paths: Sequence[str], err: Console, session_keys: Sequence[str] = ()) -> Loaded:
    """Read every file (errors reported on ``err``), join logs to traces, extract the runs
    (``session_keys``: attributes that name a session besides SPEC §7's).

    Example:
        >>> import io
        >>> loaded = load_runs(["/nonexistent.pb"], Console(file=io.StringIO()))
        >>> (loaded.failed_files, loaded.runs)
        (['/nonexistent.pb'], [])
    """
    loaded = Loaded()
    return add_runs(loaded, load_traces(paths, err, loaded.failed_files), session_keys)


def add_runs(loaded: Loaded, traces: Iterable[AssembledTrace], session_keys: Sequence[str] = ()) -> Loaded:
    """Add the runs the adapters find in ``traces`` to ``loaded`` (files' traces, or a page of
    traces pulled from a backend: `collector.commands.score_from`), with their span attributes;
    the traces' evaluation spans go to ``loaded.scored``, and a run read without a service
    (Phoenix keeps no resource) gets the one they name (`collector.commands.scored_before`).

    Example:
        >>> from adapters import TraceSpan
        >>> span = TraceSpan("ab" * 16, "cd" * 8, None, "chat", attributes={"gen_ai.operation.name": "chat"})
        >>> loaded = add_runs(Loaded(), [AssembledTrace("ab" * 16, (span,))])
        >>> (loaded.traces, [r.span_id for r in loaded.runs])
        (1, ['cdcdcdcdcdcdcdcd'])
    """
    for trace in traces:
        extraction = extract_runs(trace, session_keys)
        loaded.traces += 1
        loaded.scored.note(trace.spans)
        loaded.runs.extend(restore_services(extraction.runs, loaded.scored))
        by_id = {span.span_id: span for span in trace.spans}
        for agent_run in extraction.runs:
            span = by_id.get(agent_run.span_id)
            loaded.span_attributes[(agent_run.trace_id, agent_run.span_id)] = span.attributes if span else {}
        loaded.skips.update(s.reason for s in extraction.skipped)
    return loaded


def message_row(message: Message) -> dict[str, Any]:
    """A message as a JSONL row field: ``{role, content, tool_calls, tool_call_id}``.

    Example:
        >>> message_row(Message(role="user", content="Hi"))
        {'role': 'user', 'content': 'Hi', 'tool_calls': [], 'tool_call_id': None}
    """
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
    }


def _messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [message_row(m) for m in messages]


def run_row(run: AgentRun) -> dict[str, Any]:
    """The SPEC §3 JSONL row of one run, without the scorer fields.

    Example:
        >>> from adapters import extract_runs, AssembledTrace, TraceSpan
        >>> span = TraceSpan("ab" * 16, "cd" * 8, None, "chat", attributes={
        ...     "gen_ai.operation.name": "chat",
        ...     "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]'})
        >>> row = run_row(extract_runs(AssembledTrace("ab" * 16, (span,))).runs[0])
        >>> (row["span_id"], row["input"]["input_messages"][0]["content"], row["output"])
        ('cdcdcdcdcdcdcdcd', 'Hi', [])
    """
    return {
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "span_name": run.span_name,
        "service": run.service,
        "convention": run.convention,
        "input": {
            "input_messages": _messages(run.input.input_messages),
            "remembered_messages": _messages(run.input.remembered_messages),
            "system_messages": _messages(run.input.system_messages),
            "tagged_system_messages": {
                tag: _messages(msgs) for tag, msgs in run.input.tagged_system_messages.items()
            },
        },
        "output": _messages(run.output),
    }


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(messages: Iterable[Message]) -> str:
    parts = []
    for m in messages:
        if m.tool_calls:
            parts.append(f"{m.role}: " + ", ".join(f"{c.name}()" for c in m.tool_calls))
        else:
            parts.append(f"{m.role}: {_short(m.content)}")
    return "\n".join(parts)


def _table(runs: Sequence[AgentRun]) -> Table:
    table = Table(title=f"{len(runs)} agent run(s)", show_lines=True)
    for name in ("trace / span", "service / session", "convention", "system", "remembered", "input", "output"):
        table.add_column(name, overflow="fold")
    for r in runs:
        table.add_row(
            f"{r.trace_id[:8]}…/{r.span_id}\n{r.span_name}",
            r.service + (f"\nsession {r.session_id}" if r.session_id is not None else ""),
            r.convention,
            _describe(r.input.system_messages),
            str(len(r.input.remembered_messages)),
            _describe(r.input.input_messages),
            _describe(r.output),
        )
    return table


def explanation_lines(ex: TraceExplanation) -> list[str]:
    """The human-readable ``--explain`` text of one trace: its runs, then its span tree with verdicts.

    Example:
        >>> from adapters import AssembledTrace, TraceSpan, explain_trace
        >>> span = TraceSpan("ab" * 16, "cd" * 8, None, "GET /", attributes={"http.route": "/"})
        >>> explanation_lines(explain_trace(AssembledTrace("ab" * 16, (span,))))[:2]
        ['trace abababababababababababababababab: 0 run(s), 1 span(s)', '  no run: no span is an agent span or a model call']
    """
    lines = [f"trace {ex.trace_id}: {len(ex.runs)} run(s), {len(ex.spans)} span(s)"]
    for r in ex.runs:
        lines.append(f"  run {r.span_name} ({r.span_id}, {r.convention}): {r.reason}")
        lines += [f"    - {note}" for note in r.notes]
    if not ex.runs:
        lines.append("  no run: no span is an agent span or a model call")
    for s in ex.spans:
        read = f"[{s.convention} {s.kind}" + (f", {s.framework}]" if s.framework else "]") if s.convention else "[not read]"
        where = f" of run {s.run_span_id}" if s.status == "in_run" and s.run_span_id else ""
        lines.append(f"  {'  ' * s.depth}{s.name} {read} {s.status}{where}: {s.reason}")
        lines += [f"  {'  ' * s.depth}    - {note}" for note in (*s.notes, *(f"skipped: {k}" for k in s.skips))]
    return lines


def _explain(traces: Iterable[AssembledTrace], out_format: str) -> None:
    """Print why each trace has the runs it has."""
    explanations = [explain_trace(t) for t in traces]
    if out_format in ("jsonl", "json"):
        _print_rows([e.to_dict() for e in explanations], out_format)
    else:
        out = Console(soft_wrap=True)
        for ex in explanations:
            for line in explanation_lines(ex):
                out.print(line, markup=False, highlight=False)
        sys.stdout.flush()


def _inspect_row(run: AgentRun) -> dict[str, Any]:
    """An ``inspect`` row: SPEC §3's, and the run's ``session_id`` when it is a turn of one."""
    row = run_row(run)
    if run.session_id is not None:
        row["session_id"] = run.session_id
    return row


def _print_sessions(loaded: Loaded, out_format: str) -> None:
    """Print the sessions the loaded runs make (``--sessions``; turns read without a service take
    their session's, as ``score`` groups them: `restore_services`)."""
    sessions = group_sessions(restore_services(loaded.runs, loaded.scored))
    unkeyed = sum(1 for r in loaded.runs if r.session_id is None)
    if out_format in ("jsonl", "json"):
        _print_rows([session_row(s) for s in sessions], out_format)
    else:
        print_table(Console(), sessions_table(sessions, unkeyed))


def _print_rows(rows: list[dict[str, Any]], out_format: str) -> None:
    """Print JSON rows on stdout: one per line (``jsonl``) or as one array (``json``)."""
    if out_format == "json":
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    sys.stdout.flush()


def _read(args: argparse.Namespace, err: Console, failed: list[str]) -> tuple[list[AssembledTrace], str] | None:
    """The traces of ``args.files``, or of the backend ``--from`` names (`collector.commands.inspect_from`),
    and where they came from (``from N file(s)``, the files read); None after a usage, configuration
    or backend error was reported on ``err``."""
    source = getattr(args, "source", None)
    if bool(source) == bool(args.files):
        err.print("tracescore: inspect takes FILE... (saved OTLP requests: see the README's \"Saved OTLP files\") "
                  "or --from URL" + (", not both" if source else ""), markup=False, highlight=False, soft_wrap=True)
        return None
    if not source:
        read: list[str] = []
        traces = load_traces(args.files, err, failed, read)
        return traces, f"from {len(read)} file(s)"
    from collector.commands.inspect_from import pull_traces
    from collector.commands.report import report_config_error
    from collector.common.errors import ConfigError, PullError

    try:
        pulled = pull_traces(args, err)
    except ConfigError as exc:
        report_config_error(exc)
        return None
    except PullError as exc:
        err.print(f"tracescore: {exc}", markup=False, highlight=False, soft_wrap=True)
        return None
    if pulled.more:  # said even when piped: what is printed is not the whole window
        err.print(f"tracescore: {pulled.summary(args.limit)}", markup=False, highlight=False, soft_wrap=True)
    return pulled.traces, pulled.summary(args.limit)


def run(args: argparse.Namespace) -> int:
    """Print the runs found in ``args.files`` or in the backend ``--from`` names (or why, with
    ``--explain``; or the sessions they make, with ``--sessions``); 1 when a file could not be
    read, 2 for bad usage, configuration or a backend error, else 0.

    Example:
        >>> run(argparse.Namespace(files=["/nonexistent.pb"], format="jsonl"))
        1
    """
    err = Console(stderr=True)
    out_format = resolve_format(args.format)
    failed: list[str] = []
    found = _read(args, err, failed)
    if found is None:
        return 2
    traces, origin = found
    if getattr(args, "explain", False):
        _explain(traces, out_format)
        return 1 if failed else 0
    loaded = add_runs(Loaded(failed_files=failed), traces, getattr(args, "session_key", None) or ())
    if getattr(args, "sessions", False):
        _print_sessions(loaded, out_format)
    elif out_format in ("jsonl", "json"):
        _print_rows([_inspect_row(agent_run) for agent_run in loaded.runs], out_format)
    else:
        print_table(Console(), _table(loaded.runs), fold=True)
    summary = f"{len(loaded.runs)} run(s) in {loaded.traces} trace(s) {origin}"
    if loaded.skips:
        summary += "; skipped: " + ", ".join(f"{k}={v}" for k, v in sorted(loaded.skips.items()))
    if loaded.failed_files:
        summary += f"; {len(loaded.failed_files)} file(s) unreadable"
    if err.is_terminal or out_format == "table":
        err.print(summary, markup=False, highlight=False, soft_wrap=True)
    return 1 if loaded.failed_files else 0
