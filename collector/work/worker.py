"""Score workers: take jobs, run scorers with bounded concurrency, settle each job.

A job's result is written to the outbox in the same store transaction that
acknowledges it (`JobQueue.settle` with `Done`), and the settle completes even when the job
is cancelled meanwhile (the store shields it). A transient failure (a judge error the provider marked retryable) hands the
job back with backoff; any other failure dead-letters it and exports a failure span.
On shutdown, jobs still running after the drain timeout are cancelled and handed back.

A score's label comes from the scorer's config (``labels`` or ``pass_threshold``), else
from the scorer object itself when it has ``label_for(score)`` or ``pass_threshold``.
Reasons and step-result JSON are cut to ``max_attribute_chars``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collector.common.aio import bounded, cancel_and_wait, wait_event
from collector.common.judge_types import Park
from collector.common.metrics import Metrics
from collector.common.types import Dead, Done, LeasedJob, Retry, RunRecord, ScoreRecord, Settlement
from collector.store.interface import JobQueue, JudgeReplies
from collector.work.conversation import conversation_run, scored_what
from collector.work.deadlines import JobDeadlines
from collector.work.few_shot import FewShot, shown_prompt
from collector.work.heartbeat import LeaseHeartbeat
from collector.work.parked_log import ParkedLog
from collector.work.record import judge_summary, requests_sent, score_record, truncate_json
from collector.work.registry import RegisteredScorer, ScorerRegistry
from collector.work.replies import StoredReplies
from scorers._agent_types import ScorerRunInputForAgent, ScorerRunOutputForAgent
from scorers._judge_examples import judge_examples
from scorers._judge_governor import JudgeGovernor, govern_judge_calls, parked_cause
from scorers._reply_memo import remember_judge_replies

logger = logging.getLogger(__name__)

HANDBACK_TIMEOUT_S = 5.0
"""How long a draining worker tries to hand a job back before leaving it to its lease."""

DEAD_LETTER_CHARS = 65536
"""A dead letter keeps this much of the failure's traceback and of the partial result's JSON."""


class JobTimeout(Exception):
    """A scorer run exceeded ``workers.job_timeout_s``; retried like a transient failure.

    Example:
        >>> JobTimeout("slow").retryable
        True
    """

    retryable = True


def _retryable(err: BaseException) -> tuple[bool, float | None]:
    seen: BaseException | None = err
    while seen is not None:
        if getattr(seen, "retryable", False) is True:
            return True, getattr(seen, "retry_after_s", None)
        seen = seen.__cause__
    return False, None


@dataclass(frozen=True, slots=True)
class _ScorerInstruments:
    """One scorer's labelled metric children: score latency, scored decisions, scores."""

    latency: Any
    scored: Any
    scores: Any


def _holds(partial: Any, execution: Any) -> bool:
    """Whether a partial result's judge record holds this very execution (Mastra keeps the failed
    step's executions on the partial result)."""
    judge = getattr(partial, "judge", None)
    if not isinstance(judge, dict):
        return False
    return any(ex is execution for step in judge.values() for ex in getattr(step, "executions", None) or ())


def _scored_what(run: RunRecord) -> str:
    """The run (or, for a conversation job, the session) a ``-v`` line names (`scored_what`)."""
    conversation = run.conversation
    if conversation is None:
        return scored_what(run.trace_id, run.span_id)
    return scored_what(run.trace_id, run.span_id, str(conversation.get("session_id")), conversation.get("revision"))


class Worker:
    """Runs score jobs from a `JobQueue`.

    Args:
        queue: the job queue.
        registry: scorers by (id, version).
        metrics: the service's instruments.
        concurrency: jobs in flight at most.
        max_attempts: takes of a job before a transient failure becomes permanent.
        max_attribute_chars: cut step-result JSON to this many characters.
        job_timeout_s: a run taking longer is cancelled and retried (a transient failure).
        on_result: called after a result reached the outbox (wakes the exporter).
        lease_s: the queue's lease, renewed for running jobs (`collector.work.heartbeat`).
        max_take: jobs taken per call at most (bounded read-ahead; default concurrency / 4).
        replies: where each job's judge replies are kept until it settles (the store), so a
            job run again never pays for a judge call twice; None keeps none.
        governor: governs the judge calls of every job (budgets, shared rates, breakers: SPEC §8);
            a job it refuses is parked (`Park`: its attempts untouched), and dead-lettered with
            the park's reason once parked longer than ``max_park_s``.
        park_log_s: parked jobs are logged once per reason and this interval (`ParkedLog`), not
            once per park.
        kept: given each score once its job settled (`collector.work.keeper.ScoreKeeper.add`:
            what judge agreement keeps of it, with what a few-shot judge was shown); None keeps nothing.
        examples: the few-shot examples in force (`FewShot`): a few-shot scorer's judge calls get
            them after the instructions, and its score their judge revision.
    """

    def __init__(
        self, queue: JobQueue, registry: ScorerRegistry, metrics: Metrics, *,
        concurrency: int = 64, max_attempts: int = 5, max_attribute_chars: int = 4096,
        on_result: Callable[[], None] | None = None, poll_s: float = 0.5, retry_base_s: float = 1.0,
        job_timeout_s: float = 240.0, replies: JudgeReplies | None = None, lease_s: float = 300.0, max_take: int | None = None,
        governor: JudgeGovernor | None = None, max_park_s: float = 86400.0, park_log_s: float = 60.0,
        kept: Callable[[ScoreRecord, str | None], None] | None = None, examples: FewShot | None = None,
    ) -> None:
        self._kept = kept
        self._examples = examples
        self._parked_log = ParkedLog(park_log_s)
        self._governor = governor
        self._max_park_s = max_park_s
        self._replies = replies
        self._deadlines = JobDeadlines(job_timeout_s)  # holds the timeout (`timeout_s`)
        self._max_take = max_take or max(1, concurrency // 4)
        self._heartbeat = LeaseHeartbeat(queue, lambda: list(self._inflight.values()), lease_s)
        self._queue = queue
        self._registry = registry
        self._metrics = metrics
        self._concurrency = concurrency
        self._max_attempts = max_attempts
        self._max_chars = max_attribute_chars
        self._on_result = on_result
        self._poll = poll_s
        self._retry_base = retry_base_s
        self._inflight: dict[asyncio.Task[None], LeasedJob] = {}
        self._per_scorer: dict[str, _ScorerInstruments] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._wake: asyncio.Event | None = None
        self._slot_freed: asyncio.Event | None = None

    def notify(self) -> None:
        """Wake the take loop (jobs were queued)."""
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """Start taking jobs."""
        self._wake = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name="tracescore-worker")
        self._heartbeat.start()

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Stop taking jobs, let running ones finish for ``timeout`` s, hand back the rest."""
        if self._task is None:
            return
        self._stopping = True  # ends the loop at its next turn even if a cancellation were lost
        await cancel_and_wait([self._task])  # the loop's outcome (cancelled) is not an error here
        self._task = None
        pending = set(self._inflight)
        if pending:
            _, still = await asyncio.wait(pending, timeout=timeout)
            for task in still:
                task.cancel()  # once: a second cancel would cut the hand-back short
            if still:
                await asyncio.wait(still, timeout=HANDBACK_TIMEOUT_S + 1.0)
        await self._heartbeat.stop()  # after the drain: draining jobs keep their leases
        self._parked_log.close()

    async def _loop(self) -> None:
        wake, freed = self._wake or asyncio.Event(), self._slot_freed or asyncio.Event()
        while not self._stopping:
            free = self._concurrency - len(self._inflight)
            if free <= 0:
                freed.clear()
                await freed.wait()
                continue
            try:
                jobs = await self._queue.take(min(free, self._max_take))
            except Exception:
                self._metrics.errors.labels(component="worker").inc()
                logger.exception("taking jobs failed")
                jobs = []
            for leased in jobs:
                task = asyncio.create_task(self._run(leased))
                self._inflight[task] = leased
                task.add_done_callback(self._done)
            if not jobs:
                await wait_event(wake, self._poll)
                wake.clear()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _run(self, leased: LeasedJob) -> None:
        try:
            outcome = await self.process(leased)
        except asyncio.CancelledError:
            # Draining: hand the job back at once instead of waiting for its lease to expire.
            # Bounded: a queue that cannot take it back promptly (Redis unreachable) would
            # otherwise hold shutdown for as long as settle retries; the lease returns it then.
            handback = asyncio.shield(self._queue.settle(leased, Retry(0.0, "worker shut down")))
            try:
                await bounded(handback, HANDBACK_TIMEOUT_S)
            except Exception:
                logger.warning("handing job %s back failed; it returns after its lease",
                               leased.job.key, exc_info=True)
            raise
        try:
            await self._queue.settle(leased, outcome)  # shielded by the store
        except Exception:
            self._metrics.errors.labels(component="worker").inc()
            logger.exception("settling job %s failed; it is retried after its lease", leased.job.key)
            return
        if isinstance(outcome, (Done, Dead)) and outcome.record is not None:
            if self._on_result:
                self._on_result()
            if self._kept is not None and isinstance(outcome, Done):
                self._kept(outcome.record, outcome.shown)

    async def process(self, leased: LeasedJob) -> Settlement:
        """Run one job's scorer and decide how to settle it."""
        job = leased.job
        entry = self._registry.get(job.scorer_id, job.scorer_version)
        if entry is None:
            self._metrics.decisions.labels(scorer=job.scorer_id, reason="failed").inc()
            return Dead("UnknownScorer", f"scorer {job.scorer_id!r} version {job.scorer_version!r} "
                        "is not registered", None)
        return await self._score(leased, entry)

    async def _memo_of(self, job_key: str) -> StoredReplies | None:
        """The job's judge replies kept by an earlier run of it (none without a store for them).
        Asked only for a scorer with a prompt step: one without calls no judge."""
        if self._replies is None:
            return None
        try:
            kept = await self._replies.judge_replies(job_key)
        except Exception:  # scoring goes on; only replies of an earlier run are asked for again
            self._metrics.errors.labels(component="worker").inc()
            logger.warning("reading the judge replies of job %s failed", job_key, exc_info=True)
            kept = {}
        return StoredReplies(self._replies, job_key, kept)

    async def _score(self, leased: LeasedJob, entry: RegisteredScorer) -> Settlement:
        job, run = leased.job, leased.job.run
        start_ns = time.time_ns()
        started = time.perf_counter()
        shot = self._examples.in_force(entry) if self._examples is not None else None  # few-shot examples
        try:
            memo = await self._memo_of(job.key) if entry.asks_judge else None
            async with self._deadlines.guard():  # one timer for every job in flight
                with (remember_judge_replies(memo), govern_judge_calls(self._governor, job.scorer_id),
                      judge_examples(shot.text if shot is not None else "")):
                    result = await self._run_scorer(entry, run)
        except TimeoutError:
            timeout = JobTimeout(f"scorer {job.scorer_id!r} took longer than {self._deadlines.timeout_s:g}s")
            return self._failed(leased, entry, timeout, start_ns)
        except Exception as err:
            return self._failed(leased, entry, err, start_ns)
        finally:
            self._instruments(job.scorer_id).latency.observe(time.perf_counter() - started)
        self._count_judge(result)
        elapsed_ms = (time.time_ns() - start_ns) / 1e6
        if getattr(result, "not_scorable", False):
            self._metrics.decisions.labels(scorer=job.scorer_id, reason="not_scorable").inc()
            logger.info("not scorable: %s on %s (%.0f ms): %s", job.scorer_id, _scored_what(run), elapsed_ms,
                        getattr(result.not_scorable, "reason", None) or "-")
            return Done(None)
        instruments = self._instruments(job.scorer_id)
        instruments.scored.inc()
        record = score_record(leased.job, entry, result, start_ns, max_chars=self._max_chars,
                              judge_revision=shot.revision if shot is not None else None)
        if record.score is not None:
            instruments.scores.observe(record.score)
        logger.info("scored %s on %s: %s (%.0f ms)", job.scorer_id, _scored_what(run), record.score, elapsed_ms)
        return Done(record, shown_prompt(result) if shot is not None else None)

    @staticmethod
    async def _run_scorer(entry: RegisteredScorer, run: RunRecord) -> Any:
        """Run the job's scorer on its run, or on its session's conversation (SPEC §7)."""
        if run.conversation is not None:
            return await entry.scorer.run(conversation_run(run))
        # The adapters' own run when assembly ran in this process (the first scorer of the run
        # takes it; its models are made from its messages), else the models validated again from
        # the record's JSON form: equal either way.
        handed = run.typed.take() if run.typed is not None else None
        run_input, run_output = (handed.input, handed.output) if handed is not None else (
            ScorerRunInputForAgent.model_validate(run.input), ScorerRunOutputForAgent.model_validate(run.output))
        return await entry.scorer.run(
            input=run_input,
            output=run_output,
            run_id=run.run_id,  # one id per agent run, the same for all its scorers
            request_context=dict(run.request_context),
            trace_id=run.trace_id,
            span_id=run.span_id,
        )

    def _instruments(self, scorer_id: str) -> _ScorerInstruments:
        """The per-scorer metric children every scored job updates (labelled once per scorer)."""
        found = self._per_scorer.get(scorer_id)
        if found is None:
            m = self._metrics
            found = self._per_scorer[scorer_id] = _ScorerInstruments(
                m.score_latency.labels(scorer=scorer_id), m.decisions.labels(scorer=scorer_id, reason="scored"),
                m.scores.labels(scorer=scorer_id))
        return found

    def _count_failed_judge_call(self, err: BaseException, partial: Any = None) -> None:
        """Count the judge call that failed a run, unless ``partial`` (the failed run's partial
        result, which `_count_judge` counts) already holds its execution."""
        seen: BaseException | None = err
        while seen is not None:
            execution = getattr(seen, "execution", None)
            model = getattr(execution, "model", None)
            if model:
                if not _holds(partial, execution):
                    self._metrics.judge_attempts.labels(model=model).inc(requests_sent(execution))
                    self._metrics.judge_errors.labels(model=model).inc()
                return
            seen = seen.__cause__

    def _count_judge(self, result: Any) -> None:
        models, tin, tout, cost, attempts, errors = judge_summary(result)
        model = models[0] if len(models) == 1 else ("mixed" if models else "")
        if not models:
            return
        self._metrics.judge_attempts.labels(model=model).inc(attempts)
        self._metrics.judge_errors.labels(model=model).inc(errors)
        self._metrics.judge_tokens.labels(model=model, direction="input").inc(tin)
        self._metrics.judge_tokens.labels(model=model, direction="output").inc(tout)
        if cost:
            self._metrics.judge_cost.labels(model=model).inc(cost)

    def _record(self, leased: LeasedJob, entry: RegisteredScorer, result: Any, start_ns: int,
                error: BaseException | None = None) -> ScoreRecord:
        return score_record(leased.job, entry, result, start_ns, max_chars=self._max_chars, error=error)

    def _failed(self, leased: LeasedJob, entry: RegisteredScorer, err: Exception, start_ns: int) -> Settlement:
        job = leased.job
        parked = parked_cause(err)
        if parked is not None:
            since = leased.parked_since if leased.parked_since is not None else time.time()
            if time.time() - since < self._max_park_s:
                self._metrics.decisions.labels(scorer=job.scorer_id, reason="parked").inc()
                self._parked_log.note(parked.reason, job.scorer_id, job.key, str(parked))
                return Park(parked.retry_after_s or 60.0, parked.reason)
            logger.warning("scorer %s parked longer than %.0f s on %s: dead-lettered (%s)",
                           job.scorer_id, self._max_park_s, job.key, parked.reason)
            self._metrics.decisions.labels(scorer=job.scorer_id, reason="failed").inc()
            return Dead(parked.reason, str(parked), self._record(leased, entry, None, start_ns, error=parked))
        retryable, retry_after = _retryable(err)
        partial = getattr(err, "partial_result", None)
        # The traceback at -v (INFO): the one-line message is enough to see that scorers fail.
        trace = err if logger.isEnabledFor(logging.INFO) else None
        if retryable and leased.attempt < self._max_attempts:
            delay = retry_after if retry_after is not None else self._retry_base * 2 ** (leased.attempt - 1)
            self._count_failed_judge_call(err)
            self._metrics.decisions.labels(scorer=job.scorer_id, reason="retried").inc()
            logger.warning("scorer %s failed transiently on %s; retry in %.1fs: %s",
                           job.scorer_id, job.key, delay, err, exc_info=trace)
            return Retry(delay, f"{type(err).__name__}: {err}")
        self._count_failed_judge_call(err, partial)
        self._count_judge(partial)  # the calls that completed, and the failed one when it is kept there
        self._metrics.decisions.labels(scorer=job.scorer_id, reason="failed").inc()
        logger.warning("scorer %s failed on trace %s span %s: %s", job.scorer_id, job.run.trace_id,
                       job.run.span_id, err, exc_info=trace)
        record = self._record(leased, entry, partial, start_ns, error=err)
        text = "".join(traceback.format_exception(err))
        return Dead(record.error_type or type(err).__name__, str(err), record,
                    traceback=text[-DEAD_LETTER_CHARS:], partial_json=truncate_json(partial, DEAD_LETTER_CHARS))
