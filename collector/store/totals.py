"""The deployment's totals: what every worker settled and what every judge call cost, kept in
the store, so that ``tracescore status`` shows them across every worker, living or dead.

A replica's Prometheus counters start at zero with its process and vanish with it: after a
worker died, a group's status summed the living only. These totals are written by the store
in the same step as what they count, so each outcome is counted once whichever process wrote
it (both stores do the same):

* settling a leased job (`collector.store.interface.JobQueue.settle`) adds `settlement_tally`
  in the settlement's own transaction or script, only when the store accepts it: the lease
  holds, and a `Done` or `Dead` only for a job not done already. A settlement refused counts
  nothing, so the totals of a deployment can confirm that every run was scored once;
* a job dead-lettered at take for running out of leases counts ``failed`` for its scorer;
* a judge call settled by the governor adds `judge_tally` (the ledger's
  `collector.store.judge_interface.JudgeLedger.count_judge_call`): a call in flight when its
  worker died was never settled, so it is not counted (nor kept: its job sends it again).

A total is a float under a flat *field* name: ``scorer<US>ID<US>WHAT`` or ``judge<US>MODEL<US>WHAT``
(``<US>``, the unit separator ``\\x1f``, appears in no scorer id or model name a config can
give). Both stores keep them as field -> amount (a SQLite table, a Redis hash per key set) and
`nested` turns them into what status shows.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.utils import floatToGoString

from collector.common.judge_types import Park
from collector.common.metrics import SCORE_BUCKETS
from collector.common.types import Dead, Done, Retry, ScoreJob, Settlement

SEP = "\x1f"
"""Separates the parts of a field name."""

OUTCOMES = ("scored", "not_scorable", "failed", "retried", "parked")
"""A scorer's settled outcomes: scored (a score in the outbox), not scorable, failed (dead-lettered,
once per dead letter: a replayed job that then scores counts in both), handed back to retry,
parked (once per park)."""

JUDGE_FIELDS = ("calls", "errors", "input_tokens", "output_tokens", "cost_usd")
"""A judge model's totals: requests that returned (answered or failed), failed ones, tokens, USD."""

_HANDED_BACK: dict[type, str] = {Dead: "failed", Retry: "retried", Park: "parked"}
"""The outcome a settlement other than `Done` counts."""
_BOUNDS = [(bound, floatToGoString(bound)) for bound in SCORE_BUCKETS]
_LE = [label for _, label in _BOUNDS] + ["+Inf"]


def field(kind: str, name: str, what: str) -> str:
    """The field name of one total.

    Example:
        >>> field("scorer", "relevance", "scored").split(SEP)
        ['scorer', 'relevance', 'scored']
    """
    return f"{kind}{SEP}{name}{SEP}{what}"


def score_bucket(score: float) -> str:
    """The one bucket (upper bound, as Prometheus writes it) a score falls in: the lowest bound
    at or above it, else ``+Inf``.

    Example:
        >>> score_bucket(0.31), score_bucket(0.0), score_bucket(1.5), score_bucket(-2.0)
        ('0.4', '0.0', '+Inf', '0.0')
    """
    return next((label for bound, label in _BOUNDS if score <= bound), "+Inf")


def settlement_tally(job: ScoreJob, outcome: Settlement) -> dict[str, float]:
    """What settling ``job`` with ``outcome`` adds to the totals: its outcome, and for a score its
    count, sum and bucket.

    Example:
        >>> from collector.common.types import RunRecord, ScoreRecord
        >>> job = ScoreJob(RunRecord("t", "s"), "q", "1")
        >>> done = Done(ScoreRecord("k", "t", "s", "e", "q", "q", score=0.75))
        >>> sorted(key.split(SEP)[2] for key in settlement_tally(job, done))
        ['le:0.8', 'score_count', 'score_sum', 'scored']
        >>> settlement_tally(job, Done(None)), settlement_tally(job, Retry(1.0, "boom"))
        ({'scorer\\x1fq\\x1fnot_scorable': 1.0}, {'scorer\\x1fq\\x1fretried': 1.0})
    """
    scorer = job.scorer_id
    if isinstance(outcome, Done):
        if outcome.record is None:
            return {field("scorer", scorer, "not_scorable"): 1.0}
        tally = {field("scorer", scorer, "scored"): 1.0}
        score = outcome.record.score
        if score is not None and math.isfinite(score):
            tally[field("scorer", scorer, "score_count")] = 1.0
            tally[field("scorer", scorer, "score_sum")] = float(score)
            tally[field("scorer", scorer, f"le:{score_bucket(score)}")] = 1.0
        return tally
    return {field("scorer", scorer, _HANDED_BACK[type(outcome)]): 1.0}


@functools.lru_cache(maxsize=4096)
def _quoted(scorer: str, what: str) -> str:
    """A scorer's field name as a JSON string (made once per scorer and outcome)."""
    return json.dumps(field("scorer", scorer, what))


def settlement_json(job: ScoreJob, outcome: Settlement) -> str:
    """`settlement_tally` as the Redis settle scripts take it: a JSON object, written without
    ``json.dumps`` (the field names are quoted once per scorer): a worker settles every job.

    Example:
        >>> from collector.common.types import RunRecord, ScoreRecord
        >>> job = ScoreJob(RunRecord("t", "s"), "q", "1")
        >>> outcomes = [Done(ScoreRecord("k", "t", "s", "e", "q", "q", score=s)) for s in (0.75, 1e-7, None)]
        >>> outcomes += [Done(None), Dead("E", "m", None), Retry(1.0, "boom"), Park(60.0, "budget_exhausted")]
        >>> all(json.loads(settlement_json(job, o)) == settlement_tally(job, o) for o in outcomes)
        True
    """
    scorer = job.scorer_id
    if isinstance(outcome, Done):
        if outcome.record is None:
            return f"{{{_quoted(scorer, 'not_scorable')}:1}}"
        score = outcome.record.score
        if score is None or not math.isfinite(score):
            return f"{{{_quoted(scorer, 'scored')}:1}}"
        return (f"{{{_quoted(scorer, 'scored')}:1,{_quoted(scorer, 'score_count')}:1,"
                f"{_quoted(scorer, 'score_sum')}:{float(score)!r},{_quoted(scorer, 'le:' + score_bucket(score))}:1}}")
    return f"{{{_quoted(scorer, _HANDED_BACK[type(outcome)])}:1}}"


def judge_tally(model: str, *, failed: bool, input_tokens: int, output_tokens: int,
                cost_usd: float) -> dict[str, float]:
    """What one settled judge call adds to the totals of its model.

    Example:
        >>> tally = judge_tally("m", failed=False, input_tokens=10, output_tokens=2, cost_usd=0.001)
        >>> {key.split(SEP)[2]: value for key, value in tally.items()}
        {'calls': 1.0, 'errors': 0.0, 'input_tokens': 10.0, 'output_tokens': 2.0, 'cost_usd': 0.001}
    """
    values = (1.0, float(failed), float(input_tokens), float(output_tokens), float(cost_usd))
    return {field("judge", model, what): value for what, value in zip(JUDGE_FIELDS, values, strict=True)}


def add(into: dict[str, float], tallies: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Sum tallies (or several key sets' totals) into ``into``; returns it.

    Example:
        >>> add({}, [{"a": 1.0}, {"a": 2.0, "b": 0.5}])
        {'a': 3.0, 'b': 0.5}
    """
    for tally in tallies:
        for key, value in tally.items():
            into[key] = into.get(key, 0.0) + float(value)
    return into


def nested(totals: Mapping[str, float]) -> dict[str, Any]:
    """The totals as status shows them: per scorer its `OUTCOMES` and ``scores`` (count, sum,
    cumulative buckets, as a Prometheus histogram's), per judge model its `JUDGE_FIELDS`.

    Example:
        >>> from collector.common.types import RunRecord, ScoreRecord
        >>> job = ScoreJob(RunRecord("t", "s"), "q", "1")
        >>> done = Done(ScoreRecord("k", "t", "s", "e", "q", "q", score=0.75))
        >>> view = nested(add({}, [settlement_tally(job, done), settlement_tally(job, Dead("E", "m", None))]))
        >>> view["scorers"]["q"]["scored"], view["scorers"]["q"]["failed"], view["scorers"]["q"]["scores"]["count"]
        (1.0, 1.0, 1.0)
        >>> [le for le, n in view["scorers"]["q"]["scores"]["buckets"].items() if n]
        ['0.8', '0.9', '1.0', '+Inf']
    """
    scorers: dict[str, dict[str, float]] = {}
    judge: dict[str, dict[str, float]] = {}
    for key, value in totals.items():
        kind, name, what = key.split(SEP, 2)
        (scorers if kind == "scorer" else judge).setdefault(name, {})[what] = float(value)
    view: dict[str, Any] = {"scorers": {}, "judge": {}}
    for scorer, found in sorted(scorers.items()):
        below, buckets = 0.0, {}
        for label in _LE:
            below += found.get(f"le:{label}", 0.0)
            buckets[label] = below
        view["scorers"][scorer] = {**{what: found.get(what, 0.0) for what in OUTCOMES},
                                   "scores": {"count": found.get("score_count", 0.0),
                                              "sum": found.get("score_sum", 0.0), "buckets": buckets}}
    for model, found in sorted(judge.items()):
        view["judge"][model] = {what: found.get(what, 0.0) for what in JUDGE_FIELDS}
    return view
