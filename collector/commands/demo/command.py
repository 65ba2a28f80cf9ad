"""``tracescore demo``: the daemon end to end on sample agent traces, in one command.

No API key, no Redis, no network beyond 127.0.0.1:

1. a local OTLP/gRPC sink starts (`collector.commands.demo.sink.ScoreSink`): it stands for your
   trace backend;
2. the daemon (`collector.service.Service`) starts in the background of this process on
   the embedded SQLite queue (in a temporary directory), with receivers on free
   127.0.0.1 ports, a short ``decision_wait``, the built-in code scorers of
   `collector.commands.demo.scorers`, and the sink as its export endpoint;
3. the bundled sample traces (real captures of OpenAI, OpenInference, pydantic-ai and
   Traceloop instrumentations, ``collector/commands/demo/traces/*.pb``) are replayed to the daemon's
   OTLP/gRPC receiver with the OpenTelemetry SDK's exporter (`collector.commands.demo.replay`: fresh
   ids, current timestamps);
4. each score is printed as the daemon's export reaches the sink; then everything stops
   (also on Ctrl-C or SIGTERM), and the temporary directory is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from rich.console import Console
from rich.text import Text

import adapters
from collector.config import Config, config_from_dict
from collector.commands.demo.scorers import SCORERS
from collector.commands.demo.sink import ReceivedScore, ScoreSink
from collector.work.registry import ScorerRegistry
from collector.commands.demo.replay import IdRemap, replay

HELP = "run the daemon on bundled sample traces and print the scores it exports (no API key, no Redis)"

DECISION_WAIT_S = 0.5
"""The demo daemon's ``assembly.decision_wait`` (the default is 5 s)."""

ROOTLESS_WAIT_S = 2.0
"""The demo daemon's ``assembly.rootless_wait``: a trace whose root never comes waits this long."""

TRACE_SUFFIXES = (".pb", ".json", ".pb.gz", ".json.gz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--samples`` and ``--timeout``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> args = parser.parse_args([])
        >>> (args.samples, args.timeout)
        (None, 30.0)
    """
    parser.add_argument(
        "--samples", type=Path, default=None, metavar="DIR",
        help="replay the OTLP trace files (.pb or OTLP/JSON) of DIR instead of the bundled samples",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS",
        help="give up waiting for scores after this long (default: 30)",
    )


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
        with resources.as_file(resources.files("collector") / "samples") as bundled:
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
         'openinference-openai', 'pydantic-ai', 'traceloop']
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


def demo_config(directory: Path, export_endpoint: str) -> Config:
    """The demo daemon's configuration: free 127.0.0.1 ports, SQLite in ``directory``.

    The process environment is ignored (``TRACESCORE_*`` and ``OTEL_EXPORTER_OTLP_*``
    variables would otherwise send the demo's scores elsewhere).

    Example:
        >>> cfg = demo_config(Path("/tmp/d"), "http://127.0.0.1:4999")
        >>> (cfg.queue.url, cfg.receiver.grpc_endpoint, cfg.assembly.decision_wait, len(cfg.scorers))
        ('sqlite:////tmp/d/queue.db', '127.0.0.1:0', 0.5, 5)
    """
    return config_from_dict({
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0"},
        "assembly": {"decision_wait": DECISION_WAIT_S, "rootless_wait": ROOTLESS_WAIT_S},
        "queue": {"url": f"sqlite:///{directory / 'queue.db'}"},
        "export": {"endpoint": export_endpoint, "protocol": "grpc", "timeout_s": 5.0, "max_backoff_s": 1.0},
        "scorers": SCORERS,
    }, env={})


@dataclass
class Outcome:
    """What a demo run saw.

    Example:
        >>> Outcome(expected=2).missing
        2
    """

    expected: int
    received: list[ReceivedScore] = field(default_factory=list)
    not_scorable: int = 0
    forwarded_spans: int = 0
    runs: int = 0
    timed_out: bool = False
    elapsed_s: float = 0.0

    @property
    def missing(self) -> int:
        """Expected scores that neither arrived nor were found not scorable.

        Example:
            >>> Outcome(expected=3, not_scorable=1).missing
            2
        """
        return max(0, self.expected - len(self.received) - self.not_scorable)

    @property
    def failures(self) -> int:
        """Scores that arrived as failures (``error.type``).

        Example:
            >>> Outcome(expected=0).failures
            0
        """
        return sum(1 for s in self.received if s.failed)


class Printer:
    """Prints the header, the runs, one line per score as it arrives, and the summary.

    Args:
        console: where to print.
        runs: the planned runs (score lines name their run by its sample).
        scorer_width: the width of the scorer column.

    Example:
        >>> import io
        >>> console = Console(file=io.StringIO(), width=120)
        >>> printer = Printer(console, [PlannedRun("s1", "ab" * 16, "cd" * 8, "bot", "chat", ("q",))])
        >>> printer.score(ReceivedScore("ab" * 16, "cd" * 8, "q", "Quality", 0.5, "pass", "fine"))
        >>> console.file.getvalue().split()
        ['s1', 'Quality', '0.50', 'pass', 'fine']
    """

    def __init__(self, console: Console, runs: list[PlannedRun], scorer_width: int = 20) -> None:
        self.console = console
        self._runs = {(r.trace_id, r.span_id): r for r in runs}
        self._run_width = max((len(r.sample) for r in runs), default=16)
        self._scorer_width = scorer_width

    def line(self, text: str | Text, style: str | None = None) -> None:
        """Print one line as is (no markup).

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO())
            >>> Printer(console, []).line("[x]")
            >>> console.file.getvalue()
            '[x]\\n'
        """
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def runs(self) -> None:
        """Print the planned runs: sample, service, run span, trace id, scorers to come.

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO(), width=200)
            >>> Printer(console, [PlannedRun("s1", "ab" * 16, "cd" * 8, "bot", "chat", ("q",))]).runs()
            >>> console.file.getvalue().split()
            ['s1', 'service', 'bot,', 'span', "'chat',", 'trace', 'abababababababababababababababab,', '1', 'scorers']
        """
        for run in self._runs.values():
            self.line(f"  {run.sample:<{self._run_width}}  service {run.service}, span {run.span_name!r}, "
                      f"trace {run.trace_id}, {len(run.scorer_ids)} scorers")

    def columns(self) -> None:
        """Print the column titles of the score lines.

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO())
            >>> Printer(console, []).columns()
            >>> console.file.getvalue().split()
            ['run', 'scorer', 'score', 'label', 'reason']
        """
        self.line(f"  {'run':<{self._run_width}}  {'scorer':<{self._scorer_width}}  {'score':>5}  "
                  f"{'label':<8}  reason", style="bold")

    def score(self, score: ReceivedScore) -> None:
        """Print one score line (a failure shows its error type and message).

        Example:
            >>> import io
            >>> console = Console(file=io.StringIO(), width=200)
            >>> Printer(console, []).score(ReceivedScore("ab" * 16, "cd" * 8, "q", "Q", None,
            ...     error_type="RuntimeError", error_message="boom", service="bot"))
            >>> console.file.getvalue().split()
            ['bot/cdcdcdcdcdcdcdcd', 'Q', 'error', 'RuntimeError:', 'boom']
        """
        run = self._runs.get((score.trace_id, score.span_id))
        name = run.sample if run is not None else f"{score.service or '?'}/{score.span_id}"
        text = Text(f"  {name:<{self._run_width}}  {score.scorer_name:<{self._scorer_width}}  ")
        if score.failed:
            text.append("error", style="bold red")
            text.append(f"  {score.error_type}: {score.error_message or ''}", style="red")
        else:
            value = "-" if score.score is None else f"{score.score:.2f}"
            good = score.score or 0.0
            text.append(f"{value:>5}", style="green" if good >= 0.8 else "yellow" if good >= 0.5 else "red")
            text.append(f"  {score.label or '':<8}  {score.reason or ''}")
        self.line(text)


def _describe_scorers(registry: ScorerRegistry) -> str:
    parts = []
    for entry in registry.entries:
        cfg, notes = entry.config, []
        if cfg.pass_threshold is not None:
            notes.append(f"pass at {cfg.pass_threshold:g}")
        if cfg.labels:
            notes.append("labels " + "/".join(cfg.labels))
        flt = cfg.filter
        notes.extend(f"only {key} {value}" for key, value in
                     (("service", flt.service), ("agent", flt.agent), ("span", flt.span_name)) if value)
        parts.append(entry.scorer.name + (f" ({', '.join(notes)})" if notes else ""))
    return ", ".join(parts)


@contextlib.contextmanager
def _sigterm_cancels(task: asyncio.Task[Any] | None) -> Iterator[None]:
    """SIGTERM stops the demo like Ctrl-C does (cancelling the main task), while it runs."""
    loop = asyncio.get_running_loop()
    installed = False
    if task is not None:
        try:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here, or not the main thread
            pass
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)


async def run_demo(console: Console, samples_dir: Path | None = None,
                   timeout: float = 30.0) -> Outcome:  # noqa: ASYNC109 (a deadline for scores)
    """Start sink and daemon, replay the samples, print scores until all came (or ``timeout``), stop.

    Args:
        console: where to print.
        samples_dir: the trace files to replay (default: the bundled samples).
        timeout: seconds to wait for the scores after the replay.

    Example:
        >>> import io
        >>> outcome = asyncio.run(run_demo(Console(file=io.StringIO())))
        >>> (outcome.expected, len(outcome.received), outcome.runs, outcome.timed_out)
        (25, 25, 6, False)
    """
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from collector.service import Service

    started = time.monotonic()
    samples = await asyncio.to_thread(load_samples, samples_dir)
    workdir = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="tracescore-demo-"))
    sink: ScoreSink | None = None
    service: Service | None = None
    outcome = Outcome(expected=0)
    try:
        with _sigterm_cancels(asyncio.current_task()):
            sink = await ScoreSink().start()
            config = demo_config(workdir, sink.endpoint)
            registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)
            service = Service(config, registry)
            await service.start()
            assert service.grpc is not None and service.http is not None
            ids = IdRemap()
            runs = await asyncio.to_thread(plan_runs, samples, registry, ids)
            outcome = Outcome(expected=sum(len(r.scorer_ids) for r in runs), runs=len(runs))
            printer = Printer(console, runs, max(len(e.scorer.name) for e in registry.entries))
            printer.line(f"tracescore demo: the daemon on {len(samples)} sample traces", style="bold")
            printer.line(f"  daemon   OTLP gRPC 127.0.0.1:{service.grpc.port}, HTTP 127.0.0.1:{service.http.port}"
                         f" (/metrics); embedded SQLite queue in {workdir}")
            printer.line(f"  scorers  {_describe_scorers(registry)}")
            printer.line(f"  scores   spans 'evaluation <scorer>' (event gen_ai.evaluation.result) exported over"
                         f" OTLP/gRPC to a local sink on 127.0.0.1:{sink.port}, printed as they arrive")
            grpc_target = f"127.0.0.1:{service.grpc.port}"
            exporter = OTLPSpanExporter(endpoint=grpc_target, insecure=True, timeout=5)
            try:
                for sample in samples:
                    result = await asyncio.to_thread(replay, sample.request, exporter, ids=ids)
                    if result.name != "SUCCESS":
                        printer.line(f"replaying {sample.name} to {grpc_target} failed", style="red")
            finally:
                exporter.shutdown()
            printer.line(f"replayed {len(samples)} traces with the OpenTelemetry SDK's OTLP/gRPC exporter;"
                         f" the adapters find {outcome.runs} agent runs, {outcome.expected} scores to come:")
            printer.runs()
            printer.columns()
            outcome.timed_out = not await _print_scores(printer, sink, service, outcome, timeout)
            outcome.not_scorable = _not_scorable(service)
    finally:
        if service is not None:
            await service.shutdown()
        if sink is not None:
            await sink.stop()
            outcome.received = list(sink.received)
            outcome.forwarded_spans = sink.forwarded_spans
        await asyncio.to_thread(shutil.rmtree, workdir, True)
        outcome.elapsed_s = time.monotonic() - started
    return outcome


async def _print_scores(printer: Printer, sink: ScoreSink, service: Any, outcome: Outcome,
                        timeout: float) -> bool:  # noqa: ASYNC109 (a deadline for scores)
    """Print scores as they arrive until every expected one arrived or was found not scorable,
    or the daemon has nothing left to do; False on timeout."""
    deadline = time.monotonic() + timeout
    while len(sink.received) + _not_scorable(service) < outcome.expected:
        if time.monotonic() > deadline:
            return False
        for score in await sink.arrivals(timeout=0.25):
            printer.score(score)
        if await _idle(service):
            break
    for score in await sink.arrivals(timeout=0):
        printer.score(score)
    return True


def _not_scorable(service: Any) -> int:
    """Jobs the daemon's worker found not scorable (its ``tracescore_decisions`` counter)."""
    registry = service.metrics.registry
    return int(sum(
        registry.get_sample_value("tracescore_decisions_total",
                                  {"scorer": entry.scorer_id, "reason": "not_scorable"}) or 0
        for entry in service.registry.entries
    ))


async def _idle(service: Any) -> bool:
    stats = await service.store.stats()
    return not (stats.traces or stats.queued or stats.in_flight or stats.outbox)


def summarize(outcome: Outcome, printer: Printer) -> None:
    """Print the last lines: runs scored, scores, failures, forwarded spans, elapsed time.

    Example:
        >>> import io
        >>> console = Console(file=io.StringIO(), width=200)
        >>> summarize(Outcome(expected=1, runs=1, elapsed_s=1.5), Printer(console, []))
        >>> console.file.getvalue().splitlines()[0]
        'the daemon found nothing more to do: 0 of 1 expected scores arrived or were not scorable'
    """
    scored_runs = len({(s.trace_id, s.span_id) for s in outcome.received})
    line = (f"{len(outcome.received)} scores for {scored_runs} of {outcome.runs} runs, "
            f"{outcome.failures} failed, ")
    if outcome.not_scorable:
        line += f"{outcome.not_scorable} not scorable, "
    line += (f"in {outcome.elapsed_s:.1f} s; {outcome.forwarded_spans} agent spans forwarded unchanged; "
             "daemon stopped")
    if outcome.missing:
        why = "timed out: " if outcome.timed_out else "the daemon found nothing more to do: "
        printer.line(f"{why}{outcome.expected - outcome.missing} of {outcome.expected} expected scores "
                     "arrived or were not scorable", style="red")
    printer.line(line, style="bold" if not outcome.missing and not outcome.failures else "red")


LOOPBACK = ("127.0.0.1", "localhost")


@contextlib.contextmanager
def loopback_without_proxy() -> Iterator[None]:
    """While the demo runs, traffic to 127.0.0.1 bypasses any ``http_proxy`` of the environment.

    gRPC (and the HTTP clients) would otherwise send the demo's loopback traffic to the
    proxy. Adds the loopback names to ``no_grpc_proxy`` (which gRPC reads instead of
    ``no_proxy`` when set) and ``no_proxy``; restores both afterwards.

    Example:
        >>> before = os.environ.get("no_proxy")
        >>> with loopback_without_proxy():
        ...     "127.0.0.1" in os.environ["no_proxy"].split(",")
        True
        >>> os.environ.get("no_proxy") == before
        True
    """
    saved = {name: os.environ.get(name) for name in ("no_grpc_proxy", "no_proxy")}
    http = saved["no_proxy"] or os.environ.get("NO_PROXY") or ""
    given = {"no_grpc_proxy": saved["no_grpc_proxy"] or http, "no_proxy": http}
    for name, hosts in given.items():
        os.environ[name] = ",".join([*(h for h in hosts.split(",") if h.strip()), *LOOPBACK])
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(args: argparse.Namespace) -> int:
    """Run the demo: 0 when every expected score arrived (or was found not scorable) and none
    failed, 1 otherwise, 2 for an unreadable sample file, 130 when interrupted.

    Example:
        >>> run  # doctest: +ELLIPSIS
        <function run at ...>
    """
    console = Console()
    outcome: Outcome | None = None
    try:
        with loopback_without_proxy():
            outcome = asyncio.run(run_demo(console, args.samples, args.timeout))
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("tracescore demo: interrupted; the daemon stopped", style="yellow")
        return 130
    except adapters.OtlpFileError as err:
        Console(stderr=True).print(f"tracescore demo: {err}", style="red", markup=False, soft_wrap=True)
        return 2
    summarize(outcome, Printer(console, []))
    return 0 if not outcome.missing and not outcome.failures else 1
