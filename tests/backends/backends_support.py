"""Real trace backends (Phoenix, MLflow) and real `tracescore serve` processes for tests/backends.

Each backend runs from its own virtualenv, made by ``make backends`` (``~/.cache/tracescore/backends/``), on
free loopback ports with its data in a temporary folder. Agent traces are made by the
OpenTelemetry SDK and sent with its OTLP/HTTP exporter to a daemon, as an agent would.
Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from ports import hold_port  # tests/support
from repo_paths import REPO

SCORERS = Path(__file__).parent / "backend_scorers.py"
SPANS = ["chat gpt-4o-mini", "evaluation Brevity", "evaluation Relevance", "invoke_agent support"]
"""The span names of one scored agent trace: the agent's two spans and one evaluation span per scorer."""
RESOURCE = {"service.name": "support-bot", "deployment.environment": "test", "service.version": "1.2.3"}


def readme_block(language: str, containing: str) -> str:
    """The README's fenced ``language`` block that contains ``containing`` (tests run them as written)."""
    import re

    blocks = re.findall(rf"```{language}\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"README has {len(found)} {language} blocks with {containing!r}"
    return found[0]


_HELD_PORTS: list[socket.socket] = []


def free_port() -> int:
    """A TCP port on 127.0.0.1, held for this process's life (`ports.hold_port`): a server
    that binds it only after a start-up of seconds (Phoenix takes tens), or binds it again
    after an outage, finds it still free of other tests' sockets. Held, it refuses
    connections as a free port does; the servers here (uvicorn, gRPC, the daemon) set
    ``SO_REUSEADDR`` and bind it all the same. The few ports these tests use are never given
    back (session servers keep theirs to the end anyway)."""
    holder = hold_port()
    _HELD_PORTS.append(holder)
    return int(holder.getsockname()[1])


def poll(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    """Call ``predicate`` until it returns something truthy (returned); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def venv(name: str) -> Path:
    """The virtualenv ``make backends`` made for ``name`` (``phoenix`` or ``mlflow``)."""
    given = os.environ.get(f"TRACESCORE_{name.upper()}_VENV")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracescore" / "backends"
    found = [Path(given)] if given else sorted(cache.glob(f"{name}-*"))
    ready = [p for p in found if (p / ".installed").exists()]
    if not ready:
        raise AssertionError(f"no {name} virtualenv: run `make backends` (looked for {found or cache})")
    return ready[-1]


@dataclass
class Process:
    """A child process with its log file."""

    args: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd,
                                         env={**os.environ, **self.env}, start_new_session=True)

    def alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"{self.args[0]} exited: {self.log.read_text(errors='replace')[-3000:]}")
        return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            os.killpg(proc.pid, sig)  # the server and any workers it started
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait(10)
        return proc.returncode


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class Phoenix:
    """A real Phoenix server (``phoenix serve``)."""

    def __init__(self, workdir: Path) -> None:
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        bin_dir = venv("phoenix") / "bin"
        self.process = Process([str(bin_dir / "phoenix"), "serve"], workdir / "phoenix.log", env={
            "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port), "PHOENIX_TELEMETRY_ENABLED": "false"})

    def start(self) -> Phoenix:
        self.process.start()
        poll(lambda: self.process.alive() and http_ok(f"{self.url}/healthz"), 180, "Phoenix to start")
        return self

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        reply = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables}, timeout=30)
        reply.raise_for_status()
        body = reply.json()
        assert not body.get("errors"), body
        return dict(body["data"])

    def spans(self, trace_id: str, project: str = "default") -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/v1/projects/{project}/spans", params={"trace_id": trace_id, "limit": 100},
                          timeout=30)
        return list(reply.json().get("data", [])) if reply.status_code == 200 else []

    def spans_of_project(self, project: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=30)
        return list(reply.json().get("data", [])) if reply.status_code == 200 else []

    def annotations(self, span_ids: list[str], project: str = "default") -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/v1/projects/{project}/span_annotations",
                          params=[("span_ids", s) for s in span_ids], timeout=30)
        return list(reply.json().get("data", [])) if reply.status_code == 200 else []


class Mlflow:
    """A real MLflow tracking server (``mlflow server`` on a SQLite backend store)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.python = venv("mlflow") / "bin" / "python"
        self.process = Process([
            str(venv("mlflow") / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(self.port),
            "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}",
            "--artifacts-destination", str(workdir / "artifacts"), "--workers", "1"],
            workdir / "mlflow.log", cwd=workdir)

    def start(self) -> Mlflow:
        self.process.start()
        poll(lambda: self.process.alive() and http_ok(f"{self.url}/health"), 180, "MLflow to start")
        return self

    def experiment(self, name: str) -> str:
        reply = httpx.post(f"{self.url}/api/2.0/mlflow/experiments/create", json={"name": name}, timeout=30)
        reply.raise_for_status()
        return str(reply.json()["experiment_id"])

    def next_experiment_id(self) -> str:
        """The id MLflow gives the next experiment created (ids count up; deleted ones included)."""
        reply = httpx.post(f"{self.url}/api/2.0/mlflow/experiments/search", timeout=30,
                           json={"max_results": 1000, "view_type": "ALL"})
        reply.raise_for_status()
        return str(max(int(e["experiment_id"]) for e in reply.json()["experiments"]) + 1)

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        reply = httpx.get(f"{self.url}/api/3.0/mlflow/traces/tr-{trace_id}", timeout=30)
        return dict(reply.json()["trace"]["trace_info"]) if reply.status_code == 200 else None

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/3.0/mlflow/traces/batchGet", params={"trace_ids": f"tr-{trace_id}"},
                          timeout=30)
        if reply.status_code != 200:
            return []
        traces = reply.json().get("traces", [])
        return list(traces[0].get("spans", [])) if traces else []

    def run_python(self, code: str) -> str:
        """Run ``code`` in MLflow's own virtualenv, as a user would (tracking URI set)."""
        done = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "MLFLOW_TRACKING_URI": self.url})
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


class Daemon:
    """A `tracescore serve` process with its own config, queue and ports."""

    def __init__(self, workdir: Path, config: str, redis_prefix: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        queue = (f'url = "redis://127.0.0.1:6379/0"\nkey_prefix = "{redis_prefix}"\n' if redis_prefix
                 else f'url = "sqlite:///{workdir / "queue.db"}"\n')
        self.config = workdir / "tracescore.toml"
        self.config.write_text(
            f'[receiver]\ngrpc_endpoint = "127.0.0.1:{self.grpc_port}"\n'
            f'http_endpoint = "127.0.0.1:{self.http_port}"\n'
            f'[assembly]\ndecision_wait = 0.5\n[queue]\n{queue}'
            f'[[scorers]]\nref = "{SCORERS}:relevance"\n[[scorers]]\nref = "{SCORERS}:brevity"\n' + config)
        self.process = Process([sys.executable, "-m", "collector.cli", "-v", "serve", "--config", str(self.config)],
                               workdir / "daemon.log", env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
                               cwd=workdir)

    @property
    def traces_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def start(self) -> Daemon:
        self.process.start()
        poll(lambda: self.process.alive() and http_ok(f"http://127.0.0.1:{self.http_port}/readyz"), 60,
             f"the daemon to be ready (log: {self.process.log})")
        return self

    def status(self) -> dict[str, Any]:
        """This daemon's own ``/status`` snapshot."""
        reply = httpx.get(f"http://127.0.0.1:{self.http_port}/status", timeout=10)
        reply.raise_for_status()
        (snapshot,) = reply.json()["replicas"]
        return dict(snapshot)

    def sender(self, name: str) -> dict[str, Any]:
        """One sender's state in ``/status`` (``forward``, ``export``, ``sink mlflow``...)."""
        (found,) = [s for s in self.status().get("sending", []) if s["sender"] == name]
        return dict(found)

    def metric(self, name: str, **labels: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10).text
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        return self.process.stop(sig)


def send_agent_trace(url: str, answer: str, agent: str = "support") -> tuple[str, str, int]:
    """One agent run (invoke_agent -> chat, GenAI conventions) sent by the SDK's OTLP/HTTP exporter.

    Returns the trace id, the run span id (hex) and the run span's duration in ns.
    """
    return _agent_trace(OTLPSpanExporter(endpoint=url, timeout=10), answer, agent)


def agent_trace_body(answer: str, resource: dict[str, str] | None = None) -> tuple[bytes, str, str]:
    """One agent run as the protobuf body the SDK's OTLP/HTTP exporter would post (replayable, and
    a saved OTLP file for ``tracescore score``): the body, its trace id and run span id
    (``resource``: more resource attributes, as a Phoenix project name)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    trace_id, span_id, _ = _agent_trace(memory, answer, "support", resource=resource)
    return encode_spans(memory.get_finished_spans()).SerializeToString(), trace_id, span_id


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation as an agent sent it: its OTLP body, trace id, run span id, start."""

    body: bytes
    trace_id: str
    span_id: str
    start_ns: int


def conversation_turns(session_id: str, answers: list[str], resource: dict[str, str] | None = None) -> list[Turn]:
    """An agent's conversation: one agent run (its own trace) per answer, every span carrying
    ``session.id`` (as an instrumented agent sets it), as the SDK's OTLP/HTTP exporter would post them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    turns = []
    for answer in answers:
        memory = InMemorySpanExporter()
        trace_id, span_id, _ = _agent_trace(memory, answer, "support", {"session.id": session_id}, resource)
        spans = memory.get_finished_spans()
        turns.append(Turn(encode_spans(spans).SerializeToString(), trace_id, span_id,
                          min(int(s.start_time or 0) for s in spans)))
    return turns


def post_body(url: str, body: bytes) -> None:
    """POST an OTLP/HTTP protobuf body (an agent's request, replayed)."""
    reply = httpx.post(url, content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=30)
    assert reply.status_code == 200, reply.text


def backfill(config: str, files: list[Path], workdir: Path,
             scorers: tuple[str, ...] = ("relevance", "brevity")) -> subprocess.CompletedProcess[str]:
    """``tracescore score FILES --scorer ... --export --config`` (backend scorers, in this order),
    as a user runs it."""
    path = workdir / "backfill.toml"
    path.write_text(config)
    refs = [arg for name in scorers for arg in ("--scorer", f"{SCORERS}:{name}")]
    args = [sys.executable, "-m", "collector.cli", "score", *map(str, files), *refs, "--format", "jsonl",
            "--export", "--config", str(path), "--export-timeout", "60"]
    return subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=workdir,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One ``tracescore`` command (``dead-letters replay --all --config ...``), as a user runs it."""
    return subprocess.run([sys.executable, "-m", "collector.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})


def _agent_trace(exporter: Any, answer: str, agent: str, extra: dict[str, str] | None = None,
                 resource: dict[str, str] | None = None) -> tuple[str, str, int]:
    messages = [{"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    provider = TracerProvider(resource=Resource({**RESOURCE, **(resource or {})}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-agent")
    attrs = {"gen_ai.input.messages": json.dumps(messages), "gen_ai.output.messages": json.dumps(output),
             **(extra or {})}
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, **attrs,
    }) as root:
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", **attrs,
        }):
            time.sleep(0.05)  # a run that takes a visible 50 ms
        ctx = root.get_span_context()
    provider.shutdown()
    span = root  # ended: its times are final
    duration = int(span.end_time or 0) - int(span.start_time or 0)  # type: ignore[attr-defined]
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"), duration
