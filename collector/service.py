"""The daemon's wiring: the only module that builds the pipeline graph.

receive (`GrpcReceiver`, `HttpReceiver`) -> receive's `Pipeline` (assemble's `TraceAssembler`,
then export's `Forwarder`) -> store (trace buffer, job queue) -> work's `Worker` ->
store (outbox) -> export's `ScoreExporter` -> the OTLP backend.

Start order is sinks first (store, exporter, worker, assembly, forwarder) then
receivers; shutdown is the reverse: stop receiving, stop deciding, drain workers (jobs
not finished in time are handed back), flush the outbox, close the store.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import signal
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from collector.assemble.assembler import TraceAssembler
from collector.assemble.sessions import SessionScheduler
from collector.common.aio import cancel_and_wait
from collector.common.errors import ConfigError
from collector.common.metrics import Metrics
from collector.common.signals import on_signals
from collector.config import Config, KeyProblem, check_destinations
from collector.export.forward import Forwarder
from collector.export.scores import ScoreExporter
from collector.export.signals import ScoreSignals
from collector.export.sinks import make_senders
from collector.receive.consumer import Pipeline, TraceConsumer
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver
from collector.receive.limits import AcceptErrorFilter, connection_cap, raise_open_file_limit
from collector.receive.memory import BodyBudget
from collector.receive.save import SavedRequests
from collector.status.reporter import StatusReporter
from collector.status.snapshot import replica_id
from collector.store.redis.from_config import redis_store_for
from collector.store.redis.partitioned import PartitionedRedisStore
from collector.store.redis.status import RedisStatusBoard
from collector.store.redis.store import RedisStore
from collector.store.sqlite.from_config import sqlite_store_for
from collector.store.sqlite.store import SqliteStore
from collector.store.totals import nested
from collector.work.agreement import AgreementWatch, scorer_rules
from collector.work.few_shot import FewShot
from collector.work.governor import JudgeGovernance, close_unused_breakers, judge_report
from collector.work.keeper import ScoreKeeper
from collector.work.registry import ScorerRegistry, load_judge_client
from collector.work.worker import Worker
from scorers import set_judge_concurrency
from scorers._sync_calls import allow_sync_calls_on_loop

logger = logging.getLogger(__name__)


ROLES = ("all", "receiver", "worker")
"""``serve --role``: receivers and assembly, workers and export, or everything. A worker listens
only on ``[workers] http_endpoint`` (metrics, health, status), never on the receivers' ports."""


class Service:
    """The whole daemon for one configuration.

    Args:
        config: the validated configuration.
        registry: the loaded scorers.
        adapters: the adapters module (default: ``import adapters``).
        role: ``all``; or, on a Redis queue, ``receiver`` (receivers, assembly, forwarding)
            or ``worker`` (workers and score export; it listens only on ``[workers] http_endpoint``,
            for metrics, health probes and ``/status``).

    Example:
        >>> Service(Config(), ScorerRegistry([])).ready
        False
    """

    def __init__(self, config: Config, registry: ScorerRegistry, adapters: ModuleType | Any = None,
                 role: str = "all") -> None:
        if role not in ROLES:
            raise ConfigError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if role != "all" and config.queue.kind != "redis":
            raise ConfigError(f"--role {role} needs a shared queue: set queue.url to redis://...")
        self.role = role
        self.config = config
        self.metrics = Metrics()
        self.registry = registry
        self._adapters = adapters
        self.ready = False
        q, w, e = config.queue, config.workers, config.export
        # Received spans pass through the store's forward log to the export endpoint, unless
        # that endpoint is this daemon's own receiver: they would come back for ever.
        self.forwarding = bool(e.endpoint and e.forward_spans)
        self.store: SqliteStore | RedisStore | PartitionedRedisStore = (
            redis_store_for(config, forwarding=self.forwarding) if q.kind == "redis"
            else sqlite_store_for(config, forwarding=self.forwarding))
        forwarded = self.store.forward_log if self.forwarding else None  # scores wait for their run's spans
        self.sinks = make_senders(config.sinks, self.store.sink_outbox, self.metrics, forwarded=forwarded)
        self.signals = ScoreSignals(e)
        self.exporter = ScoreExporter(
            self.store, e, self.metrics, on_exported=self.signals.exported if self.signals.enabled else None,
            forwarded=forwarded,
        )
        allow_sync_calls_on_loop(w.sync_steps == "adaptive")
        lab = config.labels  # judge agreement (SPEC §11): own scores kept, labels pulled, agreement measured
        self.keeper = (ScoreKeeper(self.store, max_per_scorer=lab.keep_scores, retain_s=lab.retain_s)
                       if lab.keep_scores and role in ("all", "worker") else None)
        self.metrics.labels_alert_kappa.set(lab.alert_kappa)
        self.metrics.labels_min_labels.set(lab.min_labels)
        self.few_shot = FewShot(self.store, registry.entries, scorer_rules(registry.entries),  # SPEC §11 few-shot
                                holder=f"{replica_id()}:examples", poll_s=lab.poll_s)
        self.agreement = AgreementWatch(self.store, scorer_rules(registry.entries), self.metrics,
                                        window_s=lab.retain_s, poll_s=lab.poll_s, examples=self.few_shot)
        self.label_puller: Any = None
        if lab.sources:
            from collector.receive.labels import label_readers
            from collector.receive.labels.puller import LabelPuller

            names = sorted(scorer_rules(registry.entries))
            self.label_puller = LabelPuller(self.store, label_readers(config), names, since_s=lab.since_s,
                                            poll_s=lab.poll_s, holder=replica_id(), on_pull=self.agreement.wake)
        self.governance = JudgeGovernance(self.store, config.judge, w, self.metrics,
                                          reservation_ttl_s=w.job_timeout_s + 60)
        self.worker = Worker(
            self.store, registry, self.metrics, concurrency=w.concurrency,
            governor=self.governance, max_park_s=config.judge.max_park_s, park_log_s=config.judge.park_recheck_s,
            max_attempts=q.max_attempts,
            max_attribute_chars=e.max_attribute_chars, on_result=self._on_result,
            job_timeout_s=w.job_timeout_s, replies=self.store, lease_s=q.visibility_timeout_s,
            poll_s=0.01 if q.kind == "redis" else 0.5,  # a Redis take waits on the stream
            kept=self.keeper.add if self.keeper is not None else None, examples=self.few_shot,
        )
        self.forwarder = Forwarder(e, self.store.forward_log, self.metrics) if self.forwarding else None
        board = None if isinstance(self.store, SqliteStore) else RedisStatusBoard(self.store.client, self.store.keys)
        store_name = (f"{q.display_url} {q.key_prefix}" if q.kind == "redis"
                      else f"sqlite:{q.sqlite_path}@{socket.gethostname()}")
        self.status = StatusReporter(self.metrics, self.store.stats, role=role, store=store_name, board=board,
                                     governance=lambda: judge_report(self.store, config.judge),
                                     totals=self._totals, sending=self.sending, labels=lambda: self.agreement.summary)
        self.assembler: TraceAssembler | None = None
        # Conversations are tracked only for conversation scorers (SPEC §7); every receiver
        # schedules the due ones (on Redis a due session is claimed by one of them).
        self.sessions: SessionScheduler | None = None
        if registry.has_conversation_scorers and role in ("all", "receiver"):
            self.sessions = SessionScheduler(self.store, self.store, registry, self.metrics,
                                             lease_s=q.visibility_timeout_s, on_jobs=self.worker.notify)
        self.http: HttpReceiver | None = None
        self.grpc: GrpcReceiver | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._stopped = False

    async def start(self) -> None:
        """Start every component; `ready` turns True once all are up."""
        cfg = self.config
        # Judge calls in flight are limited per model and process; their rates are shared by
        # every process of the deployment (the store's ledger: `collector.work.governor`).
        set_judge_concurrency(cfg.workers.judge_concurrency)
        adapters = self._adapters or importlib.import_module("adapters")
        self.assembler = TraceAssembler(
            self.store, self.store, self.registry, self.metrics, adapters,
            max_pending_jobs=cfg.queue.max_pending_jobs, retry_after_s=cfg.receiver.retry_after_s,
            tick_s=min(0.5, max(0.02, cfg.assembly.decision_wait / 4)), on_jobs=self.worker.notify,
            decision_wait=cfg.assembly.decision_wait,
            forward_log=self.store.forward_log if self.forwarding else None,
            sessions=cfg.sessions, session_log=self.store if self.sessions is not None else None,
            on_turns=self.sessions.notify if self.sessions is not None else None,
            decide_processes=cfg.assembly.decide_processes,
        )
        receives, works = self.role in ("all", "receiver"), self.role in ("all", "worker")
        await self.store.start()
        if works:
            await close_unused_breakers(self.store, self.registry.judge_models())
            await self.exporter.start()
            for sink in self.sinks:
                await sink.start()
            await self.few_shot.refresh()  # the examples in force before the first job
            await self.worker.start()
            if self.keeper is not None:
                await self.keeper.start()
        for part in (self.agreement, self.label_puller):
            if part is not None:
                await part.start()
        pipeline: TraceConsumer | None = None  # a worker's HTTP listener takes no OTLP
        if receives:
            await self.assembler.start()
            if self.sessions is not None:
                await self.sessions.start()
            if self.forwarder is not None:
                await self.forwarder.start()
            pipeline = Pipeline(self.assembler, self.forwarder)
            if cfg.receiver.save_dir:  # each accepted request also as a file `inspect` and `score` read
                pipeline = SavedRequests(pipeline, cfg.receiver.save_dir, cfg.receiver.save_max_bytes)
        token = cfg.receiver.token()
        tls = cfg.receiver.tls()
        ssl_context = None
        if tls is not None:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(cfg.receiver.tls_cert_file, cfg.receiver.tls_key_file)
        r = cfg.receiver
        AcceptErrorFilter().install(asyncio.get_running_loop())
        cap = connection_cap(r.max_connections, 2, raise_open_file_limit())
        if cap < r.max_connections:
            logger.warning("receiver.max_connections lowered to %d per listener to fit the open-file limit", cap)
        # Both listeners' bodies in flight: two of the largest at once (each takes about four
        # times its size in memory while it is received and decoded; see bench/README.md).
        budget = BodyBudget(2 * r.max_body_bytes, retry_after_s=1.0)
        if cfg.receiver.grpc_endpoint and pipeline is not None:
            self.grpc = GrpcReceiver(cfg.receiver.grpc_endpoint, pipeline, self.metrics, token=token,
                                     max_body_bytes=cfg.receiver.max_body_bytes, tls=tls, max_connections=cap,
                                     header_timeout_s=r.header_timeout_s,
                                     keepalive_timeout_s=r.keepalive_timeout_s, budget=budget,
                                     body_timeout_s=r.body_timeout_s)
            await self.grpc.start()
        http_endpoint, label = self._http_endpoint()
        if http_endpoint:
            self.http = HttpReceiver(http_endpoint, pipeline, self.metrics, token=token,
                                     max_body_bytes=cfg.receiver.max_body_bytes, ready=self.is_ready,
                                     ssl_context=ssl_context, status=self.status.group, max_connections=cap,
                                     header_timeout_s=r.header_timeout_s, body_timeout_s=r.body_timeout_s,
                                     keepalive_timeout_s=r.keepalive_timeout_s, budget=budget, label=label)
            await self.http.start()
        bound = [f"{rx.endpoint.rpartition(':')[0]}:{rx.port}" for rx in (self.grpc, self.http) if rx is not None]
        try:  # again with the bound ports: a listener on port 0 got its port only now
            await asyncio.to_thread(check_destinations, cfg.destinations(), bound)
        except KeyProblem as err:
            raise ConfigError(f"invalid configuration: {err.key}: {err.message}") from None
        if works:  # the judge client before /readyz: a worker that takes over a dead one's jobs is warm
            await load_judge_client(entry.scorer for entry in self.registry.entries)
        self._stats_task = asyncio.create_task(self._stats_loop(), name="tracescore-stats")
        self.ready = True
        logger.info("tracescore ready: %d scorers", len(self.registry.entries))

    def _http_endpoint(self) -> tuple[str, str]:
        """Where the HTTP listener binds ("": none), and its name in a bind failure: the OTLP/HTTP
        receiver's, or a worker's own (``[workers] http_endpoint``: metrics, health, status)."""
        if self.role == "worker":
            return self.config.workers.http_endpoint, "HTTP, workers.http_endpoint"
        return self.config.receiver.http_endpoint, "HTTP"

    async def _totals(self) -> dict[str, Any]:
        """The store's totals as status shows them (`collector.store.totals.nested`)."""
        return nested(await self.store.totals())

    def sending(self) -> list[dict[str, Any]]:
        """Each durable sender's state (``status``): forwarding on receivers, score export and sinks on workers."""
        works = self.role in ("all", "worker")
        senders: list[Any] = [self.forwarder] if self.forwarder is not None and self.role != "worker" else []
        senders += ([self.exporter] if works and self.config.export.endpoint else []) + (self.sinks if works else [])
        return [sender.state() for sender in senders]

    def _on_result(self) -> None:
        """A result reached the outbox: wake the exporter and the sinks."""
        self.exporter.notify()
        for sink in self.sinks:
            sink.notify()

    def is_ready(self) -> bool:
        """``/readyz``: started and not draining, and the queue's store answering (a Redis
        that cannot be reached, or refuses, makes every request fail: traffic should go elsewhere).

        Example:
            >>> Service(Config(), ScorerRegistry([])).is_ready()
            False
        """
        return self.ready and bool(getattr(self.store, "reachable", True))

    async def _stats_loop(self) -> None:
        last_prune = 0.0
        while True:
            try:
                if time.monotonic() - last_prune > 600:
                    last_prune = time.monotonic()
                    await self.store.prune(self.config.queue.retention_s)
                stats = await self.store.stats()
                self.metrics.jobs.labels(state="queued").set(stats.queued)
                self.metrics.jobs.labels(state="in_flight").set(stats.in_flight)
                self.metrics.jobs.labels(state="dead").set(stats.dead)
                self.metrics.jobs.labels(state="failed").set(stats.dead)  # SPEC's name: failed for good
                self.metrics.outbox_records.set(stats.outbox)
                self.metrics.traces_buffered.set(stats.traces)
                self.metrics.backlog.labels(backlog="outbox", destination="otlp").set(stats.outbox)
                self.metrics.backlog.labels(backlog="forward", destination="otlp").set(stats.forward_requests)
                self.metrics.forward_backlog_bytes.set(stats.forward_bytes)
                if self.sessions is not None:
                    counts = await self.store.session_counts()
                    for state in ("open", "scored", "reopened", "forced", "short"):
                        self.metrics.sessions.labels(state=state).set(
                            counts.get(state if state == "open" else f"{state}_total", 0))
                await self.governance.refresh_gauges()
                await self.status.refresh(stats)
            except Exception:
                logger.debug("stats refresh failed", exc_info=True)
            await asyncio.sleep(2.0)

    async def shutdown(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Drain and stop: receivers, assembly, forwarding, workers, export flush, store.

        Each part gets ``timeout / 4`` seconds, except the workers: running jobs finish for up
        to ``workers.drain_timeout_s``, then the rest are handed back to the queue.
        """
        if self._stopped:
            return
        self._stopped = True
        self.ready = False
        share = max(0.5, timeout / 4)
        grpc, http, assembler, forwarder, stats = (self.grpc, self.http, self.assembler,
                                                   self.forwarder, self._stats_task)
        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        if grpc is not None:
            steps.append(("gRPC receiver", lambda: grpc.shutdown(min(1.0, share))))
        if http is not None:
            steps.append(("HTTP receiver", lambda: http.shutdown(min(1.0, share))))
        if assembler is not None:
            steps.append(("assembly", lambda: assembler.shutdown(share)))
        if (sessions := self.sessions) is not None:
            steps.append(("session scheduling", sessions.shutdown))
        if forwarder is not None:
            steps.append(("forwarding", lambda: forwarder.shutdown(share)))
        drain = self.config.workers.drain_timeout_s  # in-flight jobs finish, then the rest is handed back
        steps += [("workers", lambda: self.worker.shutdown(drain)),
                  ("export", lambda: self.exporter.shutdown(share))]
        steps += [(what, part.stop) for what, part in (("score keeping", self.keeper), ("label pulls", self.label_puller),
                                                      ("agreement", self.agreement)) if part is not None]
        steps += [(f"{sink.name} sink", functools.partial(sink.shutdown, share)) for sink in self.sinks]
        steps.append(("score signals", lambda: asyncio.to_thread(self.signals.shutdown)))
        if stats is not None:
            steps.append(("stats", lambda: cancel_and_wait([stats])))
        steps.append(("store", self.store.shutdown))
        failed = 0
        for what, step in steps:  # each part stops even when an earlier one failed
            try:
                await step()
            except Exception:
                failed += 1
                logger.exception("stopping the %s failed", what)
        logger.info("tracescore stopped%s", f" ({failed} parts failed to stop cleanly)" if failed else "")

    def describe(self) -> str:
        """One line saying what the daemon serves (OTLP, or a worker's metrics and health), where it
        listens and where scores go.

        Example:
            >>> Service(Config(), ScorerRegistry([])).describe()
            'tracescore: 0 scorers; OTLP not listening; scores NOT exported (no export endpoint; -v logs them)'
        """
        e = self.config.export
        sent = {"all": ["scores", "received spans"], "worker": ["scores"], "receiver": ["received spans"]}[self.role]
        if not self.forwarding:
            sent = [what for what in sent if what == "scores"]
        target = (f"{' and '.join(sent)} to {e.endpoint} ({e.protocol})" if e.endpoint and sent
                  else "scores exported by the workers" if self.role == "receiver"
                  else "scores NOT exported (no export endpoint; -v logs them)")
        sinks = f"; sinks: {', '.join(s.name for s in self.sinks)}" if self.sinks else ""
        return f"tracescore: {len(self.registry.entries)} scorers; {self._listening()}; {target}{sinks}"

    def _listening(self) -> str:
        """What `describe` says of the listeners (after `start`: the bound ports)."""
        http = f"{self.http.endpoint.rpartition(':')[0]}:{self.http.port}" if self.http is not None else ""
        if self.role == "worker":
            where = f"on HTTP {http}" if http else "not listening (workers.http_endpoint is empty)"
            return f"worker (no OTLP: send it to a receiver); metrics, health and status {where}"
        listeners = []
        if self.grpc is not None:
            listeners.append(f"gRPC {self.config.receiver.grpc_endpoint.rpartition(':')[0]}:{self.grpc.port}")
        if http:
            listeners.append(f"HTTP {http}")
        return ("OTLP on " + " and ".join(listeners)) if listeners else "OTLP not listening"

    async def run_until_signal(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Start, serve until SIGTERM or SIGINT, then drain and stop."""
        stop = asyncio.Event()
        with on_signals(stop.set, (signal.SIGTERM, signal.SIGINT)):
            try:
                await self.start()
                if on_ready is not None:
                    on_ready(self.describe())
                await stop.wait()
                logger.info("signal received: draining")
            finally:
                await self.shutdown()
