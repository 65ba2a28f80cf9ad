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
from pathlib import Path
from typing import Any

from rich.console import Console

import adapters
from collector.commands.demo.printer import Outcome, Printer, describe_scorers, summarize
from collector.commands.demo.replay import IdRemap, replay
from collector.commands.demo.samples import demo_config, load_samples, plan_runs, plan_sessions
from collector.commands.demo.sink import ScoreSink
from collector.common.signals import on_signals
from collector.work.registry import ScorerRegistry


@contextlib.contextmanager
def _signals_stop(task: asyncio.Task[Any] | None, outcome: Outcome) -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM stop the demo while it runs: the outcome is marked interrupted
    and the main task cancelled. The mark holds even when the cancellation itself is lost (a
    cancel landing as an ``asyncio.wait_for`` completes is swallowed on Python 3.11), so an
    interrupted demo never reports itself complete."""
    if task is None:
        yield
        return

    def interrupt() -> None:
        outcome.interrupted = True
        task.cancel()

    with on_signals(interrupt, [signal.SIGTERM, signal.SIGINT]):
        yield


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
        >>> (outcome.expected, len(outcome.received), outcome.runs, outcome.sessions, outcome.timed_out)
        (39, 39, 9, 2, False)
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
        with _signals_stop(asyncio.current_task(), outcome):
            sink = await ScoreSink().start()
            config = demo_config(workdir, sink.endpoint)
            registry = await asyncio.to_thread(ScorerRegistry.load, config.scorers)
            service = Service(config, registry)
            await service.start()
            assert service.grpc is not None and service.http is not None
            ids = IdRemap()
            runs = await asyncio.to_thread(plan_runs, samples, registry, ids)
            sessions = await asyncio.to_thread(plan_sessions, samples, registry)
            outcome.expected = sum(len(r.scorer_ids) for r in runs) + sum(len(s.scorer_ids) for s in sessions)
            outcome.runs, outcome.sessions = len(runs), len(sessions)
            printer = Printer(console, runs, max(len(e.scorer.name) for e in registry.entries),
                              [s.session_id for s in sessions])
            printer.line(f"tracescore demo: the daemon on {len(samples)} sample traces", style="bold")
            printer.line(f"  daemon   OTLP gRPC 127.0.0.1:{service.grpc.port}, HTTP 127.0.0.1:{service.http.port}"
                         f" (/metrics); embedded SQLite queue in {workdir}")
            printer.line(f"  scorers  {describe_scorers(registry)}")
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
            conversations = (f" making {outcome.sessions} conversation(s) (scored once each ended)"
                             if outcome.sessions else "")
            printer.line(f"replayed {len(samples)} traces with the OpenTelemetry SDK's OTLP/gRPC exporter;"
                         f" the adapters find {outcome.runs} agent runs{conversations}, {outcome.expected} scores"
                         " to come:")
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
    while len(sink.received) + _not_scorable(service) < outcome.expected and not outcome.interrupted:
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
    """Whether the daemon has nothing left to do: no trace, job or score waiting, and no
    conversation open (it is scored when it ends, or goes idle)."""
    stats = await service.store.stats()
    if stats.traces or stats.queued or stats.in_flight or stats.outbox:
        return False
    return service.sessions is None or not (await service.store.session_counts()).get("open", 0)


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
    """
    console = Console()
    outcome: Outcome | None = None
    try:
        with loopback_without_proxy():
            outcome = asyncio.run(run_demo(console, args.samples, args.timeout))
    except (KeyboardInterrupt, asyncio.CancelledError):
        outcome = None
    except adapters.OtlpFileError as err:
        Console(stderr=True).print(f"tracescore demo: {err}", style="red", markup=False, soft_wrap=True)
        return 2
    if outcome is None or outcome.interrupted:
        console.print("tracescore demo: interrupted; the daemon stopped", style="yellow")
        return 130
    summarize(outcome, Printer(console, []))
    return 0 if not outcome.missing and not outcome.failures else 1
