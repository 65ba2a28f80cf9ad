"""Ids derived from other ids, so every replica, restart and backfill computes the same ones:
the id of an agent run (from its trace and span ids) and the span id of a score's
evaluation span (from the score's idempotency key and its outcome).

A score's key names the job (trace, span, scorer id, version); its *outcome* names what the
job came to (a score with its label and reason, or a failure of one error type). The
evaluation span id derives from both: the same outcome sent again (an export retried, a
second replica, a backfill that scores alike) keeps its span id, so backends that keep the
first copy of a span lose nothing; a new outcome (a dead letter replayed, a run scored
again to another value) is a new span, which names the one it replaces
(``tracescore.supersedes``), since Phoenix and Jaeger never replace a span they already have."""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from typing import Any

_URL_NAMESPACE = uuid.NAMESPACE_URL.bytes
_OUTCOME_JSON = json.JSONEncoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), made once

def run_id_for(trace_id: str, span_id: str) -> str:
    """The id of the agent run scored on span ``span_id`` of trace ``trace_id``: a UUID derived
    from the two ids, so every scorer, replica and backfill of one run names it alike.

    Example:
        >>> run_id_for("ab" * 16, "cd" * 8) == run_id_for("ab" * 16, "cd" * 8)
        True
        >>> run_id_for("ab" * 16, "cd" * 8) == run_id_for("ab" * 16, "ef" * 8)
        False
    """
    # uuid.uuid5(NAMESPACE_URL, name), written out: the same text in half the time (it is made
    # for every run on the hot path); `tests/collector/common/test_ids.py` checks it against uuid5.
    digest = bytearray(hashlib.sha1(_URL_NAMESPACE + f"tracescore:run/{trace_id}/{span_id}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def score_outcome(score: float | None, label: str | None, reason: str | None, error_type: str | None) -> str:
    """What a job came to, as the text its evaluation span id derives from: a failure of one
    error type (its message may hold times or addresses, so it is left out), or a score with
    its label and reason.

    Example:
        >>> score_outcome(None, None, None, "ZeroDivisionError")
        'failed:ZeroDivisionError'
        >>> score_outcome(1.0, "pass", "names Paris", None)
        'scored:[1.0, "pass", "names Paris"]'
    """
    if error_type is not None:
        return f"failed:{error_type}"
    if label is None and reason is None and type(score) is float and math.isfinite(score):
        return f"scored:[{score!r}, null, null]"  # what the encoder writes (a float as its repr), written directly
    return "scored:" + _OUTCOME_JSON.encode([score, label, reason])


def score_span_id_for(key: str, outcome: str = "") -> str:
    """The span id of a score's evaluation span (16 hex digits, never all zero), derived from the
    score's idempotency key and its `score_outcome`: the same outcome sent again keeps its span
    id, another outcome of the same job gets another one. Without an outcome it is the id
    tracescore derived from the key alone before outcomes were part of it (dead letters
    written then name their failure span by it).

    Example:
        >>> failed = score_span_id_for("t/s/q/1", score_outcome(None, None, None, "ValueError"))
        >>> scored = score_span_id_for("t/s/q/1", score_outcome(1.0, None, None, None))
        >>> failed == score_span_id_for("t/s/q/1", "failed:ValueError"), failed == scored, len(scored)
        (True, False, 16)
    """
    seed = f"tracescore:score/{key}" + (f"#{outcome}" if outcome else "")
    digest = hashlib.sha256(seed.encode()).digest()
    return (digest[:8] if any(digest[:8]) else digest[8:16]).hex()


def failure_span_of(key: str, error: dict[str, Any]) -> str | None:
    """The evaluation span id of a dead letter's failure span, from its error JSON: the one it
    names, else (a letter the worker wrote before outcomes were part of span ids) the id then
    derived from the key alone; None for a job that exported no failure span (its lease ran out
    too often, or its scorer is not registered).

    Example:
        >>> failure_span_of("t/s/q/1", {"evaluation_span_id": "ab" * 8, "scorer_id": "q"})
        'abababababababab'
        >>> failure_span_of("t/s/q/1", {"type": "LeaseExpired"}) is None
        True
        >>> failure_span_of("t/s/q/1", {"scorer_id": "q"}) == score_span_id_for("t/s/q/1")
        True
    """
    if "evaluation_span_id" in error:
        named = error["evaluation_span_id"]
        return None if named is None else str(named)
    return score_span_id_for(key) if "scorer_id" in error else None
