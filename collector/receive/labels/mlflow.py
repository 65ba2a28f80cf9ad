"""People's labels in MLflow: feedback assessments whose ``source.source_type`` is ``HUMAN``, in
every experiment of the tracking server (``[sinks.mlflow]`` names none).

MLflow 3 has no API that lists assessments: they come with their traces. Its trace search
(``POST /api/3.0/mlflow/traces/search``, 500 traces a request, several experiments at once)
filters on a feedback's name (``feedback.`NAME` IS NOT NULL``: a valid feedback of that name,
any source, tracescore's own included) and on the trace's start time, never on an assessment's
time or source, and every trace it returns carries all its assessments. A label added later to
an old trace changes nothing a search can see, so a pull sweeps (`collector.receive.labels.sweep`):

- the experiments (``POST /api/2.0/mlflow/experiments/search``, active ones), 100 to a search;
- per scorer name, the traces with a feedback of that name that started in the window, oldest
  first; of their assessments, the valid HUMAN feedback of a known name changed since the cursor
  is handed on: on its span (``span_id``), on the whole trace (no span), or, when its metadata
  names ``mlflow.trace.session`` (as on a session's first trace), on that session;
- the window: every ``full_every_s`` (an hour) the whole ``since_s``; in between, only the traces
  of the last ``recent_s`` (an hour). A label given to a recent trace is read by the next pull,
  one given to an older trace within the hour.

Limits: a pull reads every trace of its window that has feedback of a known name, people's and
tracescore's alike (its cost grows with the scored traces of the last hour, and of ``since``
once an hour); a label on a trace that started before ``since`` is never read; an assessment's
times come from the client that wrote it, so a client clock more than 30 minutes behind can
hide its labels (`collector.receive.labels.sweep.LOOKBACK_S`). Values are the feedback's JSON
values as MLflow gives them (booleans, numbers as floats, strings); ``at`` = ``last_update_time``;
annotator = ``source.source_id``; ``source_id`` = the assessment id; an overridden (invalid)
assessment is not a label.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from collector.common.labels import Label
from collector.config import SinksConfig
from collector.receive.labels.reader import BackendReader, chunks
from collector.receive.labels.sweep import Sweep, epoch_s
from collector.receive.pull import JsonClient, Retry

logger = logging.getLogger(__name__)

SESSION_KEY = "mlflow.trace.session"
EXPERIMENTS_PER_SEARCH = 100
TRACES_PER_SEARCH = 500


def assessment_label(item: Mapping[str, Any], names: Sequence[str]) -> list[Label]:
    """The label an assessment of a search's trace is (none when it is not a person's valid
    feedback of one of ``names``).

    Example:
        >>> a = {"assessment_id": "a-1", "assessment_name": "Q", "trace_id": "tr-" + "ab" * 16, "span_id": "cd" * 8,
        ...      "source": {"source_type": "HUMAN", "source_id": "ana"}, "feedback": {"value": True},
        ...      "rationale": "right", "last_update_time": "2026-12-06T06:04:37.120Z", "valid": True}
        >>> [(x.trace_id[:4], x.span_id, x.value, x.annotator, x.at) for x in assessment_label(a, ["Q"])]
        [('abab', 'cdcdcdcdcdcdcdcd', True, 'ana', 1796537077.12)]
        >>> session = {**a, "span_id": None, "metadata": {"mlflow.trace.session": "chat-1"}}
        >>> [(x.session_id, x.span_id, x.item) for x in assessment_label(session, ["Q"])]
        [('chat-1', None, 'session:chat-1')]
        >>> assessment_label({**a, "source": {"source_type": "LLM_JUDGE"}}, ["Q"]), assessment_label({**a, "valid": False}, ["Q"])
        ([], [])
    """
    source = item.get("source") or {}
    feedback = item.get("feedback")
    if (source.get("source_type") != "HUMAN" or not isinstance(feedback, Mapping) or item.get("valid") is False
            or item["assessment_name"] not in names):
        return []
    value = feedback.get("value")
    if not (value is None or isinstance(value, (bool, int, float, str))):
        raise ValueError(f"a feedback value that is not a verdict: {value!r}")
    metadata = item.get("metadata") or {}
    session = metadata.get(SESSION_KEY) if isinstance(metadata, Mapping) else None
    rationale = item.get("rationale")
    return [Label(str(item["assessment_name"]), str(item["trace_id"]).removeprefix("tr-"),
                  None if session else (str(item["span_id"]) if item.get("span_id") else None),
                  str(session) if session else None, value, "mlflow", annotator=str(source.get("source_id") or ""),
                  rationale=None if rationale is None else str(rationale), at=epoch_s(item["last_update_time"]),
                  source_id=str(item["assessment_id"]))]


def assessments_of(trace: Mapping[str, Any]) -> list[Any]:
    """The assessments a search's trace carries.

    Example:
        >>> assessments_of({"trace_id": "tr-1", "assessments": [{"assessment_id": "a-1"}]}), assessments_of({})
        ([{'assessment_id': 'a-1'}], [])
    """
    found = trace.get("assessments") or []
    if not isinstance(found, list):
        raise TypeError(f"assessments that are not a list: {found!r}")
    return found


def search_filter(name: str, start_ms: int) -> str:
    """The trace search's filter: a valid feedback named ``name``, on a trace started since ``start_ms``.

    Raises:
        ValueError: the name has a backtick (MLflow's filter cannot quote it).

    Example:
        >>> search_filter("Answer relevancy", 1796083200000)
        'feedback.`Answer relevancy` IS NOT NULL AND trace.timestamp_ms >= 1796083200000'
    """
    if "`" in name:
        raise ValueError(f"a scorer name with a backtick cannot be searched in MLflow: {name!r}")
    return f"feedback.`{name}` IS NOT NULL AND trace.timestamp_ms >= {start_ms}"


class MlflowLabels(BackendReader):
    """People's feedback on the traces of every experiment of one MLflow tracking server."""

    def __init__(self, sinks: SinksConfig, retry: Retry | None = None, page_size: int = 500,
                 recent_s: float = 3600.0, full_every_s: float = 3600.0) -> None:
        super().__init__("mlflow", sinks.mlflow.url(), sinks, retry, page_size)
        self.recent_s = recent_s
        self.full_every_s = full_every_s

    async def pages(self, cursor: str | None, since_s: float,
                    names: Sequence[str]) -> AsyncIterator[tuple[list[Label], str]]:
        """The labels new or changed since ``cursor``, in pages (see the module docstring).

        Raises:
            collector.common.errors.PullError: MLflow refused, failed or garbled an answer.
        """
        self.begin()
        now = time.time()
        sweep = Sweep(cursor, names, since_s=since_s, now=now, page_size=self.page_size,
                      full_every_s=self.full_every_s)
        start_ms = int((now - (since_s if sweep.full else min(self.recent_s, since_s))) * 1000)
        wanted = []
        for name in sorted(set(names)):
            try:
                wanted.append((name, search_filter(name, start_ms)))
            except ValueError as err:
                logger.warning("mlflow labels: %s", err)
        if wanted:
            async with self.client() as client:
                experiments = await self._experiments(client)
                for group in chunks(experiments, EXPERIMENTS_PER_SEARCH):
                    for _, where in wanted:
                        async for traces in self._traces(client, group, where):
                            found = self.rows(traces, assessments_of)
                            labels = self.rows(found, lambda item: assessment_label(item, names))
                            for page in sweep.add(labels):
                                yield page, sweep.resume
        yield sweep.finish()

    async def _experiments(self, client: JsonClient) -> list[str]:
        """The ids of every active experiment."""
        url = f"{self.base_url}/api/2.0/mlflow/experiments/search"
        ids: list[str] = []
        token: str | None = None
        while True:
            query: dict[str, Any] = {"max_results": 1000, "view_type": "ACTIVE_ONLY"}
            if token:
                query["page_token"] = token
            body, found = await client.listing("POST", url, "experiments", json=query)
            ids.extend(self.rows(found, lambda e: [str(e["experiment_id"])]))
            token = body.get("next_page_token") or None
            if token is None or not found:
                return ids

    async def _traces(self, client: JsonClient, experiments: list[str], where: str) -> AsyncIterator[list[Any]]:
        """The traces ``where`` finds in ``experiments``, oldest first, a search page at a time."""
        url = f"{self.base_url}/api/3.0/mlflow/traces/search"
        token: str | None = None
        while True:
            query: dict[str, Any] = {
                "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": e}}
                              for e in experiments],
                "filter": where, "max_results": TRACES_PER_SEARCH, "order_by": ["timestamp_ms ASC"]}
            if token:
                query["page_token"] = token
            body, traces = await client.listing("POST", url, "traces", json=query)
            yield traces
            token = body.get("next_page_token") or None
            if token is None or not traces:
                return
