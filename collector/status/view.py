"""Draw a merged status view (`collector.status.group.merge`) in the terminal with rich."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table

_BARS = " ▁▂▃▄▅▆▇█"
DECISION_COLUMNS = ("scored", "not_scorable", "failed", "retried", "filtered_out", "sampled_out", "duplicate")
TOTALS_NOTE = " (the store's totals: every worker, living or dead)"
"""Added to a table's title when its figures are the store's totals (`collector.status.group.apply_totals`)."""


def histogram_bar(buckets: Mapping[str, float]) -> str:
    """A one-line histogram of cumulative Prometheus buckets (``le`` -> count), one character
    per bucket, ``+Inf`` last.

    Example:
        >>> histogram_bar({"0.5": 1.0, "1.0": 3.0, "+Inf": 3.0})
        '▄█ '
    """
    ordered = sorted(buckets.items(), key=lambda kv: float(kv[0]))
    counts, below = [], 0.0
    for _, cumulative in ordered:
        counts.append(cumulative - below)
        below = cumulative
    top = max(counts, default=0.0)
    if top <= 0:
        return " " * len(counts)
    return "".join(_BARS[round(c / top * (len(_BARS) - 1))] if c > 0 else " " for c in counts)


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{float(value):,.{digits}f}"


def scorer_table(view: Mapping[str, Any]) -> Table:
    """Per scorer: decisions by reason, score count, mean and histogram (0..1), exported.

    Example:
        >>> view = {"decisions": {"q": {"scored": 2}}, "scores": {"q": {"count": 2, "sum": 1.5,
        ...         "buckets": {"0.5": 1, "1.0": 2, "+Inf": 2}}}, "exported": {"q": 2}}
        >>> scorer_table(view).row_count
        1
    """
    table = Table(title="scorers" + TOTALS_NOTE * ("totals" in view), title_justify="left")
    table.add_column("scorer", overflow="fold", min_width=12)
    for name in (*DECISION_COLUMNS, "scores", "mean", "histogram 0..1", "exported"):
        table.add_column(name.replace("_", " "), justify="right" if name != "histogram 0..1" else "left")
    decisions, scores, exported = view.get("decisions", {}), view.get("scores", {}), view.get("exported", {})
    for scorer in sorted(set(decisions) | set(scores)):
        s = scores.get(scorer, {})
        count = s.get("count", 0)
        mean = s.get("sum", 0) / count if count else None
        table.add_row(scorer, *(_n(decisions.get(scorer, {}).get(r, 0)) for r in DECISION_COLUMNS), _n(count),
                      _n(mean, 3), histogram_bar(s.get("buckets", {})), _n(exported.get(scorer, 0)))
    return table


def _pairs(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def backlog_table(view: Mapping[str, Any]) -> Table:
    """Per backlog and destination: the items waiting, and their bytes where measured ("-" elsewhere).

    Example:
        >>> from rich.console import Console
        >>> import io
        >>> console = Console(width=100, record=True, file=io.StringIO())
        >>> console.print(backlog_table({"backlog": [
        ...     {"backlog": "forward", "destination": "otlp", "items": 58, "bytes": 54850},
        ...     {"backlog": "outbox", "destination": "otlp", "items": 2, "bytes": None}]}))
        >>> [line.split() for line in console.export_text().splitlines() if "otlp" in line]
        [['│', 'forward', '│', 'otlp', '│', '58', '│', '54,850', '│'], ['│', 'outbox', '│', 'otlp', '│', '2', '│', '-', '│']]
    """
    table = Table(title="backlog per destination", title_justify="left")
    for name in ("backlog", "destination", "items", "bytes"):
        table.add_column(name, justify="right" if name in ("items", "bytes") else "left")
    for item in view.get("backlog", []):
        table.add_row(item["backlog"], item["destination"], _n(item["items"]), _n(item.get("bytes")))
    return table


def sending_rows(view: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The rows of `sending_table`: per sender and destination, its state (since when), the
    failed attempts and items kept, the items refused for good, and the backend's answer
    with the fix (or the latest refusal).

    Example:
        >>> held = {"sender": "forward", "destination": "http://mlflow:5000 (http/protobuf)", "state": "held",
        ...         "since": 0.0, "attempts": 3, "items": 9, "refused": 0, "last_refused": None,
        ...         "cause": "HTTP 404 Not Found: No Experiment with id=1 exists", "fix": "create it"}
        >>> sending_rows({"sending": [held]})[0][2:]
        ('held since 1970-01-01 00:00 UTC', '3', '9', '0', 'HTTP 404 Not Found: No Experiment with id=1 exists; fix: create it')
    """
    rows: list[tuple[str, ...]] = []
    for s in view.get("sending") or []:
        state = str(s.get("state"))
        if s.get("since") is not None and state != "ok":
            state = f"{state} since {_at(s['since'])}"
        if s.get("cause"):
            answer = str(s["cause"]) + (f"; fix: {s['fix']}" if s.get("fix") else "")
        elif s.get("last_refused"):
            answer = f"last refused: {s['last_refused'].get('cause')}"
        else:
            answer = ""
        rows.append((str(s.get("sender")), str(s.get("destination")), state, _n(s.get("attempts", 0)),
                     _n(s.get("items", 0)), _n(s.get("refused", 0)), answer))
    return rows


def sending_table(view: Mapping[str, Any]) -> Table:
    """Forwarding, the score export and each sink: ok, retrying (an outage) or held (waiting for
    a configuration fix), with the backend's answer (`sending_rows`)."""
    table = Table(title="sending", title_justify="left")
    for name in ("sender", "destination", "state", "failed attempts", "kept", "refused", "backend's answer"):
        table.add_column(name, justify="right" if name in ("failed attempts", "kept", "refused") else "left",
                         overflow="fold")
    for row in sending_rows(view):
        table.add_row(*row)
    return table


def judge_table(view: Mapping[str, Any]) -> Table:
    """Per judge model: calls, errors, tokens and cost.

    Example:
        >>> judge_table({"judge": {"openai/gpt-4o-mini": {"calls": 3, "cost_usd": 0.01}}}).row_count
        1
    """
    table = Table(title="judge per model" + TOTALS_NOTE * ("totals" in view), title_justify="left")
    for name in ("model", "calls", "errors", "input tokens", "output tokens", "cost (USD)"):
        table.add_column(name, justify="left" if name == "model" else "right")
    for model, j in sorted(view.get("judge", {}).items()):
        table.add_row(model, _n(j.get("calls", 0)), _n(j.get("errors", 0)), _n(j.get("input_tokens", 0)),
                      _n(j.get("output_tokens", 0)), _n(j.get("cost_usd", 0), 4))
    return table


def governance_table(view: Mapping[str, Any]) -> Table:
    """Judge budgets (spent, reserved, limit, remaining, reset), open breakers and parked jobs (SPEC §8).

    Example:
        >>> judges = {"budgets": [{"scope": "global", "window": "1d:2026-12-05", "spent": 0.04, "reserved": 0.01,
        ...           "limit": 0.05, "remaining": 0.0, "reset": 1780704000.0}],
        ...           "breakers": [{"model": "m", "reason": "401 authentication refused", "since": 0, "next_probe": 60}],
        ...           "parked": {"budget_exhausted": 7, "judge_unavailable": 0}}
        >>> [row[0] for row in governance_rows(judges)]
        ['budget global (1d:2026-12-05)', 'breaker m', 'parked: budget_exhausted', 'parked: judge_unavailable']
    """
    table = Table(title="judge governance", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for row in governance_rows(view.get("governance") or {}):
        table.add_row(*row)
    return table


def _at(epoch_s: Any) -> str:
    return datetime.fromtimestamp(float(epoch_s), tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def governance_rows(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of `governance_table`."""
    rows = [(f"budget {b['scope']} ({b['window']})",
             f"spent {b['spent']:.4f} + reserved {b['reserved']:.4f} of {b['limit']:g} USD"
             + ("" if b.get("configured", b["limit"]) == b["limit"] else f" (set by hand; configured {b['configured']:g})")
             + f"; {b['remaining']:.4f} left; resets {_at(b['reset'])}") for b in report.get("budgets", [])]
    rows += [(f"breaker {b['model']}", f"OPEN since {_at(b['since'])}: {b['reason']}; next probe {_at(b['next_probe'])}")
             for b in report.get("breakers", [])]
    rows += [(f"parked: {reason}", _n(count)) for reason, count in sorted(report.get("parked", {}).items())]
    return rows


def failure_rows(failures: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The failures table's rows: failed scores, score export attempts refused, forwarded
    requests refused (kept and retried, or dropped) and internal errors per component.

    Example:
        >>> failure_rows({"scorers": {"q": 2}, "export": 0, "forward": {"retried": 232, "rejected": 1},
        ...               "errors": {"forward": 1}})
        [('scorer failures', '2'), ('score export failures', '0'), ('forward failures', '233'), ('forwarded requests dropped', '1'), ('errors: forward', '1')]
    """
    forward = failures.get("forward") or {}
    return [("scorer failures", _n(sum(failures.get("scorers", {}).values()))),
            ("score export failures", _n(failures.get("export", 0))),
            ("forward failures", _n(forward.get("retried", 0) + forward.get("rejected", 0))),
            ("forwarded requests dropped", _n(forward.get("rejected", 0))),
            *((f"errors: {c}", _n(n)) for c, n in sorted(failures.get("errors", {}).items()))]


def agreement_table(view: Mapping[str, Any]) -> Table:
    """Labels per scorer and source, the last pull and each agreement series (SPEC §11).

    Example:
        >>> labels = {"labels": {"tone": {"phoenix": 30}}, "unmatched": {"Tone": 2}, "unreadable": 1,
        ...           "series": [{"scorer": "tone", "version": "1", "revision": "3f2a9c1e", "n": 28, "n_scored": 900,
        ...                       "kappa": 0.71, "accuracy": 0.89, "mae": None}],
        ...           "last_pull": {"finished": 0, "sources": [{"source": "phoenix", "read": 30, "added": 2, "error": None}]}}
        >>> [row[0] for row in agreement_rows(labels)]
        ['labels tone', 'unmatched labels', 'unreadable labels', 'last pull: phoenix', 'agreement tone v1 @3f2a9c1e']
    """
    table = Table(title="human labels and judge agreement", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for row in agreement_rows(view.get("labels") or {}):
        table.add_row(*row)
    return table


def agreement_rows(labels: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of `agreement_table`."""
    rows = [(f"labels {scorer}", ", ".join(f"{source} {_n(n)}" for source, n in sorted(by.items())))
            for scorer, by in sorted(labels.get("labels", {}).items())]
    if unmatched := sum(labels.get("unmatched", {}).values()):
        rows.append(("unmatched labels", f"{_n(unmatched)} (no score of theirs yet)"))
    if labels.get("unreadable"):
        rows.append(("unreadable labels", f"{_n(labels['unreadable'])} (`tracescore labels list` shows why)"))
    last = labels.get("last_pull") or {}
    rows += [(f"last pull: {s['source']}", f"{s['added']} new of {s['read']} at {_at(last.get('finished', 0))}"
              + (f"; stopped: {s['error']}" if s.get("error") else "")) for s in last.get("sources", [])]
    rows += [(f"agreement {r['scorer']} v{r['version'] or '-'} @{r['revision'] or '-'}",
              f"n {r['n']} of {r['n_scored']} scored; kappa {_n(r['kappa'], 3)}; accuracy {_n(r['accuracy'], 3)}"
              + ("" if r.get("mae") is None else f"; MAE {_n(r['mae'], 3)}")) for r in labels.get("series", [])]
    return rows


def render(view: Mapping[str, Any], sources: str = "") -> RenderableType:
    """The whole status screen for a merged view.

    Example:
        >>> from rich.console import Console
        >>> import io
        >>> console = Console(width=160, record=True, file=io.StringIO())
        >>> console.print(render({"replicas": ["r"], "received": {"spans": 3}}))
        >>> "spans received" in console.export_text()
        True
    """
    received, queue = view.get("received", {}), view.get("queue") or {}
    roles = view.get("roles", {})
    header = (f"tracescore {', '.join(view.get('versions', [])) or '?'}: {len(view.get('replicas', []))} "
              f"replica(s) {' '.join(f'{r} ({roles.get(r)})' for r in view.get('replicas', []))} {sources}")
    traffic = _pairs("received", [
        ("spans received", _n(received.get("spans", 0))), ("spans / min", _n(received.get("spans_per_min"), 1)),
        ("runs found", _n(received.get("runs", 0))), ("runs / min", _n(received.get("runs_per_min"), 1)),
        ("log records received", _n(received.get("log_records", 0)))])
    store = _pairs("queue", [(name.replace("_", " "), _n(queue.get(key))) for name, key in (
        ("jobs queued", "queued"), ("jobs in flight", "in_flight"), ("dead letters", "dead"),
        ("outbox", "outbox"), ("traces buffered", "traces"))])
    failed = _pairs("failures", failure_rows(view.get("failures", {})))
    top = Table.grid(padding=(0, 4))
    if sessions := view.get("sessions"):  # conversations (SPEC §7): only with conversation scorers
        store.add_row("sessions open", _n(sessions.get("open", 0)))
        store.add_row("sessions scored / reopened / forced", " / ".join(
            _n(sessions.get(k, 0)) for k in ("scored", "reopened", "forced")))
        store.add_row("sessions short (< min_turns)", _n(sessions.get("short", 0)))  # counted, not scored
    top.add_row(traffic, store, failed)
    parts: list[RenderableType] = [header, top, scorer_table(view), backlog_table(view), judge_table(view)]
    if view.get("sending"):
        parts.insert(4, sending_table(view))
    if governance_rows(view.get("governance") or {}):
        parts.append(governance_table(view))
    if agreement_rows(view.get("labels") or {}):
        parts.append(agreement_table(view))
    return Group(*parts)
