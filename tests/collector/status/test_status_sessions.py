"""`tracescore status` shows the store's conversations (SPEC §7): open, scored, reopened,
forced and short (under min_turns, not scored), counted once per store however many replicas
report them."""

from __future__ import annotations

import io
import re

from rich.console import Console

from collector.common.metrics import Metrics
from collector.common.types import StoreStats
from collector.status.group import merge
from collector.status.snapshot import build_snapshot, samples
from collector.status.view import render


def _snapshot(replica: str, role: str, at: float, sessions: dict[str, float] | None) -> dict:
    metrics = Metrics()
    for state, value in (sessions or {}).items():
        metrics.sessions.labels(state=state).set(value)
    return build_snapshot(samples(metrics.registry), StoreStats(0, 0, 0, 0, 0), replica=replica, role=role,
                          store="redis://r test:", now=at)


def test_sessions_are_the_stores_counted_once_and_shown() -> None:
    counts = {"open": 4, "scored": 10, "reopened": 2, "forced": 1, "short": 7}
    receivers = [_snapshot("a", "receiver", 1.0, counts), _snapshot("b", "receiver", 2.0, counts)]
    worker = _snapshot("w", "worker", 3.0, None)  # the latest snapshot of the store, with no sessions
    view = merge([*receivers, worker])
    assert view["sessions"] == counts
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render(view))
    text = console.export_text()
    assert "sessions open" in text and "10 / 2 / 1" in text
    (short,) = [line for line in text.splitlines() if "sessions short (< min_turns)" in line]
    assert re.search(r"sessions short \(< min_turns\)[\s│]+7\b", short), short


def test_without_conversation_scorers_status_shows_no_sessions() -> None:
    view = merge([_snapshot("a", "all", 1.0, None)])
    assert view["sessions"] == {}
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render(view))
    assert "sessions" not in console.export_text()
