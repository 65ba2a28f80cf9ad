"""A scorer's result -> the `collector.common.types.ScoreRecord` that export and the sinks send.

The daemon's worker and ``tracescore score --export`` build records here, so a backfill
sends exactly what the daemon would: the same evaluation span id (derived from the
score's key and its outcome, `collector.common.ids.score_span_id_for`), the same ``tracescore.run.id`` (derived from the run's ids), the scored
span's resource and end time. Reasons and step-result JSON are cut to ``max_chars``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from collector.common.ids import score_outcome, score_span_id_for
from collector.common.types import ScoreJob, ScoreRecord
from collector.work.conversation import session_run_id, session_score
from collector.work.registry import RegisteredScorer

_STEP_JSON = json.JSONEncoder(default=str, ensure_ascii=False)  # json.dumps's encoder for these options, made once


def truncate_json(value: Any, limit: int) -> str | None:
    """JSON of a step result, cut to ``limit`` characters (None for None).

    Example:
        >>> truncate_json({"a": "x" * 10}, 12)
        '{"a": "xxxx…'
        >>> truncate_json(None, 10) is None
        True
    """
    if value is None:
        return None
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = _STEP_JSON.encode(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def requests_sent(execution: Any) -> int:
    """HTTP requests one judge execution sent to the model (at least one): its
    ``request_count``, failed requests included, not its ``model_call_count`` (only the
    calls that returned a reply, as Mastra counts them).

    Example:
        >>> from types import SimpleNamespace
        >>> requests_sent(SimpleNamespace(attempt_count=1, model_call_count=1, request_count=3))
        3
        >>> requests_sent(SimpleNamespace(attempt_count=1, model_call_count=0, request_count=1))
        1
    """
    return max(1, int(getattr(execution, "request_count", 0) or 0))


def judge_summary(result: Any) -> tuple[list[str], int, int, float | None, int, int]:
    """Models, input/output tokens, cost, requests sent and failed executions of a result's judge calls.

    Requests are each execution's ``request_count`` (failed requests, error-processor retries
    and the JSON fallback included), neither its ``model_call_count`` (the calls that returned
    a reply) nor its ``attempt_count`` (structured-output attempts), as Mastra counts those.

    Example:
        >>> judge_summary(None)
        ([], 0, 0, None, 0, 0)
    """
    models: list[str] = []
    tokens_in = tokens_out = attempts = errors = 0
    cost: float | None = None
    judge = getattr(result, "judge", None) or {}
    for step in judge.values() if isinstance(judge, dict) else ():
        for ex in getattr(step, "executions", None) or ():
            model = getattr(ex, "model", None)
            if model and model not in models:
                models.append(str(model))
            usage = getattr(ex, "usage", None)
            tokens_in += int(getattr(usage, "input_tokens", 0) or 0)
            tokens_out += int(getattr(usage, "output_tokens", 0) or 0)
            if getattr(ex, "cost_usd", None) is not None:
                cost = (cost or 0.0) + float(ex.cost_usd)
            attempts += requests_sent(ex)
            if getattr(ex, "status", "success") not in ("success", "ok"):
                errors += 1
    return models, tokens_in, tokens_out, cost, attempts, errors


def score_label(entry: RegisteredScorer, score: float | None) -> str | None:
    """A score's label: from the scorer's config (``labels``, ``pass_threshold``), else from the
    scorer itself (``label_for(score)`` or ``pass_threshold``), else None.

    Example:
        >>> from collector.config import ScorerConfig
        >>> class S:
        ...     id = name = "q"; version = None
        >>> score_label(RegisteredScorer(S(), ScorerConfig(ref="m:q", pass_threshold=0.5)), 0.2)
        'fail'
    """
    if score is None:
        return None
    configured = entry.config.label_for(score)
    if configured is not None or entry.config.labels or entry.config.pass_threshold is not None:
        return configured
    scorer = entry.scorer
    labeler: Callable[[float], Any] | None = getattr(scorer, "label_for", None)
    if callable(labeler):
        label = labeler(score)
        return None if label is None else str(label)
    threshold = getattr(scorer, "pass_threshold", None)
    if isinstance(threshold, (int, float)):
        return "pass" if score >= threshold else "fail"
    return None


def cut(text: Any, limit: int) -> str | None:
    """``str(text)`` cut to ``limit`` characters (None for None).

    Example:
        >>> cut("abcdef", 4), cut(None, 4)
        ('abc…', None)
    """
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def score_record(
    job: ScoreJob, entry: RegisteredScorer, result: Any, start_ns: int, *, max_chars: int,
    error: BaseException | None = None, end_ns: int | None = None, judge_revision: str | None = None,
) -> ScoreRecord:
    """The outbox record of one job's result (``error``: the scorer failed; ``result`` is then
    its partial result, or None). Its evaluation span id derives from the job's key and the
    outcome (`collector.common.ids.score_outcome`); a replayed job's record names the span it replaces.
    ``judge_revision``: the revision the judge judged under (few-shot examples in force), else the scorer's.

    Example:
        >>> from collector.config import ScorerConfig
        >>> from collector.common.types import RunRecord
        >>> class S:
        ...     id = name = "q"; version = "1"
        >>> class Result:
        ...     score, reason = 0.25, "short"
        >>> job = ScoreJob(RunRecord("ab" * 16, "cd" * 8, end_ns=7, resource={"service.name": "bot"}), "q", "1")
        >>> rec = score_record(job, RegisteredScorer(S(), ScorerConfig(ref="m:q")), Result(), 1, max_chars=100)
        >>> (rec.score, rec.run_id == job.run.run_id, rec.scored_end_ns, rec.resource["service.name"])
        (0.25, True, 7, 'bot')
        >>> failed = score_record(job, RegisteredScorer(S(), ScorerConfig(ref="m:q")), None, 1, max_chars=100,
        ...                       error=ValueError("bad"))
        >>> again = score_record(job, RegisteredScorer(S(), ScorerConfig(ref="m:q")), Result(), 2, max_chars=100)
        >>> again.score_span_id == rec.score_span_id, failed.score_span_id == rec.score_span_id
        (True, False)
    """
    run = job.run
    session = session_score(run)
    models, tin, tout, cost, attempts, _ = judge_summary(result)
    score = None if error is not None else getattr(result, "score", None)
    score = None if score is None else float(score)
    cause = error.__cause__ if error is not None and error.__cause__ is not None else error
    reason = cut(getattr(result, "reason", None), max_chars)
    label = score_label(entry, score)
    error_type = None if cause is None else type(cause).__qualname__
    span_id = score_span_id_for(job.key, score_outcome(score, label, reason, error_type))
    return ScoreRecord(
        key=job.key, trace_id=run.trace_id, span_id=run.span_id,
        score_span_id=span_id,
        scorer_id=job.scorer_id,
        scorer_name=str(getattr(entry.scorer, "name", None) or job.scorer_id),
        scorer_version=job.scorer_version,
        run_id=run.run_id if session is None else session_run_id(session["scope"], session["revision"],
                                                                  session["first_trace_id"]),
        score=score,
        reason=reason,
        label=label,
        response_id=run.response_id,
        error_type=error_type,
        error_message=None if error is None else str(error)[:max_chars],
        start_ns=start_ns, end_ns=time.time_ns() if end_ns is None else end_ns,
        judge_models=models, input_tokens=tin, output_tokens=tout, cost_usd=cost,
        judge_attempts=attempts,
        preprocess_json=truncate_json(getattr(result, "preprocess_step_result", None), max_chars),
        analyze_json=truncate_json(getattr(result, "analyze_step_result", None), max_chars),
        service=run.service, resource=dict(run.resource), scored_end_ns=run.end_ns,
        llm_judged=entry.has_prompt_step is True or bool(models), forward_mark=run.forward_mark,
        supersedes=job.supersedes if job.supersedes != span_id else None,  # failed alike again: the same span
        session=session, judge_revision=entry.judge_revision if judge_revision is None else judge_revision,
    )
