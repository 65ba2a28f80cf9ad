"""Ids derived from other ids, so every replica, restart and backfill computes the same ones:
the id of an agent run (from its trace and span ids) and the span id of a score's
evaluation span (from the score's idempotency key)."""

from __future__ import annotations

import hashlib
import uuid


def run_id_for(trace_id: str, span_id: str) -> str:
    """The id of the agent run scored on span ``span_id`` of trace ``trace_id``: a UUID derived
    from the two ids, so every scorer, replica and backfill of one run names it alike.

    Example:
        >>> run_id_for("ab" * 16, "cd" * 8) == run_id_for("ab" * 16, "cd" * 8)
        True
        >>> run_id_for("ab" * 16, "cd" * 8) == run_id_for("ab" * 16, "ef" * 8)
        False
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracescore:run/{trace_id}/{span_id}"))


def score_span_id_for(key: str) -> str:
    """The span id of a score's evaluation span (16 hex digits, never all zero), derived from the
    score's idempotency key: a redelivered job, a replica or a backfill sends the same span again.

    Example:
        >>> score_span_id_for("t/s/q/1") == score_span_id_for("t/s/q/1"), len(score_span_id_for("t/s/q/1"))
        (True, 16)
    """
    digest = hashlib.sha256(f"tracescore:score/{key}".encode()).digest()
    return (digest[:8] if any(digest[:8]) else digest[8:16]).hex()
