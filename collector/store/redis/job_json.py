"""A score job as a Redis stream entry's payload: JSON (never a pickle), and back."""

from __future__ import annotations

from typing import Any

from collector.common.record_json import dumps, known_fields, loads, record_dict
from collector.common.types import RunRecord, ScoreJob


def job_json(job: ScoreJob) -> str:
    """The stream payload of a job (JSON, never a pickle); ``supersedes`` only when a replay set it.

    Example:
        >>> job = ScoreJob(RunRecord(trace_id="t", span_id="s"), "q", None)
        >>> parse_job(job_json(job)) == job, "supersedes" in job_json(job)
        (True, False)
        >>> replayed = ScoreJob(RunRecord(trace_id="t", span_id="s"), "q", "1", supersedes="ab" * 8)
        >>> parse_job(job_json(replayed)) == replayed
        True
    """
    data: dict[str, Any] = {"run": record_dict(job.run), "scorer_id": job.scorer_id,
                            "scorer_version": job.scorer_version, "run_id": job.run.run_id}
    if job.supersedes is not None:
        data["supersedes"] = job.supersedes
    return dumps(data)


def parse_job(text: str | bytes) -> ScoreJob:
    """Parse `job_json` output.

    The run's id comes with the job (made once, by the receiver); an older job's is made when asked.

    Example:
        >>> parse_job('{"run": {"trace_id": "t", "span_id": "s"}, "scorer_id": "q"}').key
        't/s/q/'
        >>> parse_job('{"run": {"trace_id": "t", "span_id": "s"}, "scorer_id": "q", "run_id": "r-1"}').run.run_id
        'r-1'
    """
    data = loads(text)
    run = RunRecord(**known_fields(RunRecord, data["run"]))
    if "run_id" in data:
        vars(run)["run_id"] = data["run_id"]  # where functools.cached_property keeps RunRecord.run_id
    return ScoreJob(run, data["scorer_id"], data.get("scorer_version"), data.get("supersedes"))
