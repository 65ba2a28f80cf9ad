"""Merge the status snapshots of a group of replicas into one view.

Replicas are told apart by their id (a snapshot seen twice, from two URLs of one Redis
group, counts once). Per-replica counters (received, decisions, scores, judge, exported,
failures) are summed; store counts (queue depth, dead letters, outbox) are shared by the
replicas of one store, so each store counts once (its latest snapshot). Backlogs are summed
per (backlog, destination) over stores alike, items and bytes apart (bytes None where no
store measured them). Senders (forwarding, score export, sinks) are shown per (sender,
destination), in the worst state any replica reports.

The store's totals (``totals``: what every worker settled and every judge call, living or dead
workers alike) count once per store too, and replace the replicas' own counters for what they
count: a scorer's settled outcomes (scored, not scorable, failed, retried, parked) and scores,
its failures, and the judge calls per model. A worker that died takes its own counters with it,
never the deployment's totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _add(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, Mapping):
            _add(into.setdefault(key, {}), value)
        elif isinstance(value, (int, float)):
            into[key] = into.get(key, 0) + value


def merge_backlogs(per_store: Iterable[Iterable[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The backlogs of several stores, summed per (backlog, destination): items, and bytes
    where some store measured them (None where none did).

    Example:
        >>> one = [{"backlog": "forward", "destination": "otlp", "items": 58, "bytes": 54850}]
        >>> two = [{"backlog": "forward", "destination": "otlp", "items": 2, "bytes": 150},
        ...        {"backlog": "outbox", "destination": "otlp", "items": 4}]  # a snapshot of schema 1: no bytes
        >>> merge_backlogs([one, two])
        [{'backlog': 'forward', 'destination': 'otlp', 'items': 60.0, 'bytes': 55000.0}, {'backlog': 'outbox', 'destination': 'otlp', 'items': 4.0, 'bytes': None}]
    """
    summed: dict[tuple[str, str], dict[str, Any]] = {}
    for backlog in per_store:
        for item in backlog:
            key = (str(item["backlog"]), str(item["destination"]))
            entry = summed.setdefault(key, {"backlog": key[0], "destination": key[1], "items": 0.0, "bytes": None})
            entry["items"] += float(item["items"])
            if item.get("bytes") is not None:
                entry["bytes"] = (entry["bytes"] or 0.0) + float(item["bytes"])
    return [summed[key] for key in sorted(summed)]


def merge(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One view of many replicas' snapshots (see the module docstring).

    Example:
        >>> a = {"replica": "a", "store": "redis", "at": 1, "role": "receiver", "queue": {"queued": 5, "dead": 1},
        ...      "received": {"spans": 10}, "backlog": []}
        >>> b = {**a, "replica": "b", "at": 2, "role": "worker", "queue": {"queued": 4, "dead": 1}}
        >>> view = merge([a, b, a])
        >>> view["replicas"], view["received"]["spans"], view["queue"]
        (['a', 'b'], 20, {'queued': 4, 'dead': 1})
    """
    latest: dict[str, Mapping[str, Any]] = {}
    for snap in snapshots:
        seen = latest.get(snap["replica"])
        if seen is None or snap.get("at", 0) >= seen.get("at", 0):
            latest[snap["replica"]] = snap
    view: dict[str, Any] = {"replicas": sorted(latest), "roles": {}, "versions": sorted(
        {str(s.get("version")) for s in latest.values()}), "received": {}, "decisions": {}, "scores": {},
        "judge": {}, "exported": {}, "failures": {}, "queue": {}, "backlog": []}
    stores: dict[str, Mapping[str, Any]] = {}
    for replica, snap in sorted(latest.items()):
        view["roles"][replica] = snap.get("role")
        for part in ("received", "decisions", "scores", "judge", "exported", "failures"):
            _add(view[part], snap.get(part) or {})
        store = str(snap.get("store") or replica)
        if store not in stores or snap.get("at", 0) >= stores[store].get("at", 0):
            stores[store] = snap
    for snap in stores.values():
        _add(view["queue"], snap.get("queue") or {})
    # Sessions are the store's too, counted by the replicas that schedule them (receivers).
    sessions: dict[str, Mapping[str, Any]] = {}
    for snap in latest.values():
        store = str(snap.get("store") or snap["replica"])
        if snap.get("sessions") and (store not in sessions or snap.get("at", 0) >= sessions[store].get("at", 0)):
            sessions[store] = snap
    view["sessions"] = {}
    for snap in sessions.values():
        _add(view["sessions"], snap["sessions"])
    view["governance"] = merge_governance(latest.values())
    apply_totals(view, merge_totals(latest.values()))
    view["sending"] = merge_sending(latest.values())
    measured = [snap["labels"] for snap in latest.values() if snap.get("labels")]  # the store's: the newest measure
    view["labels"] = max(measured, key=lambda labels: labels.get("measured_at") or 0.0, default=None)
    view["backlog"] = merge_backlogs(snap.get("backlog") or () for snap in stores.values())
    view["stores"] = sorted(stores)
    return view


def merge_governance(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Judge governance (budgets, breakers, parked jobs) of the replicas: each store's ledger is
    shared by its replicas, so the latest snapshot of each store counts, once.

    Example:
        >>> a = {"replica": "a", "store": "s", "at": 1, "governance": {"budgets": [], "breakers": [],
        ...      "parked": {"budget_exhausted": 2}}}
        >>> b = {**a, "replica": "b", "at": 2, "governance": {**a["governance"], "parked": {"budget_exhausted": 3}}}
        >>> merge_governance([a, b])["parked"]
        {'budget_exhausted': 3}
    """
    latest: dict[str, Mapping[str, Any]] = {}
    for snap in snapshots:
        store = str(snap.get("store") or snap.get("replica"))
        if snap.get("governance") and (store not in latest or snap.get("at", 0) >= latest[store].get("at", 0)):
            latest[store] = snap
    merged: dict[str, Any] = {"budgets": [], "breakers": [], "parked": {}}
    for snap in latest.values():
        report = snap["governance"]
        merged["budgets"] += report.get("budgets", [])
        merged["breakers"] += report.get("breakers", [])
        _add(merged["parked"], report.get("parked", {}))
    return merged


def merge_totals(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The store totals of the replicas' snapshots: each store's latest, summed over stores (None
    when no snapshot has any: replicas of an earlier version).

    Example:
        >>> a = {"replica": "a", "store": "s", "at": 1, "totals": {"scorers": {"q": {"scored": 2}}, "judge": {}}}
        >>> b = {**a, "replica": "b", "at": 2, "totals": {"scorers": {"q": {"scored": 3}}, "judge": {}}}
        >>> merge_totals([a, b]), merge_totals([{"replica": "c"}])
        ({'scorers': {'q': {'scored': 3}}, 'judge': {}}, None)
    """
    latest: dict[str, Mapping[str, Any]] = {}
    for snap in snapshots:
        store = str(snap.get("store") or snap.get("replica"))
        if snap.get("totals") is not None and (store not in latest or snap.get("at", 0) >= latest[store].get("at", 0)):
            latest[store] = snap
    if not latest:
        return None
    merged: dict[str, Any] = {"scorers": {}, "judge": {}}
    for snap in latest.values():
        _add(merged, snap["totals"])
    return merged


def apply_totals(view: dict[str, Any], totals: Mapping[str, Any] | None) -> None:
    """Put the store's totals in ``view`` (``view["totals"]``), in place of the replicas' own
    counters for what the totals count (see the module docstring).

    Example:
        >>> view = {"decisions": {"q": {"scored": 113, "sampled_out": 4}}, "scores": {}, "judge": {"m": {"calls": 9}},
        ...         "failures": {"scorers": {"q": 0}}}
        >>> totals = {"scorers": {"q": {"scored": 300, "not_scorable": 0, "failed": 1, "retried": 0, "parked": 0,
        ...           "scores": {"count": 300, "sum": 90.0, "buckets": {"+Inf": 300}}}}, "judge": {}}
        >>> apply_totals(view, totals)
        >>> view["decisions"]["q"]["scored"], view["decisions"]["q"]["sampled_out"], view["failures"]["scorers"]["q"]
        (300, 4, 1)
        >>> view["scores"]["q"]["count"], view["judge"]
        (300, {})
    """
    if totals is None:
        return
    view["totals"] = totals
    for scorer, counted in totals.get("scorers", {}).items():
        decisions = view["decisions"].setdefault(scorer, {})
        decisions.update({what: value for what, value in counted.items() if what != "scores"})
        view["scores"][scorer] = counted["scores"]
        view.setdefault("failures", {}).setdefault("scorers", {})[scorer] = counted.get("failed", 0)
    view["judge"] = totals.get("judge", {})


_STATE_RANK = {"ok": 0, "retrying": 1, "held": 2}


def merge_sending(snapshots: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The durable senders of the replicas, per (sender, destination): the worst state any
    replica reports (``held`` > ``retrying`` > ``ok``) with that replica's answer and since
    when, the failed attempts, items kept and items refused for good summed, and the latest
    refusal.

    Example:
        >>> ok = {"sender": "forward", "destination": "d", "state": "ok", "attempts": 0, "items": 0, "refused": 1,
        ...       "last_refused": {"cause": "HTTP 400 Bad Request", "at": 5.0, "items": 1}}
        >>> held = {**ok, "state": "held", "cause": "HTTP 404 Not Found: No Experiment with id=1 exists",
        ...         "attempts": 3, "items": 3, "refused": 0, "last_refused": None}
        >>> (one,) = merge_sending([{"replica": "a", "sending": [ok]}, {"replica": "b", "sending": [held]}])
        >>> one["state"], one["cause"], one["attempts"], one["refused"], one["replicas"]
        ('held', 'HTTP 404 Not Found: No Experiment with id=1 exists', 3, 1, ['a', 'b'])
    """
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for snap in snapshots:
        for sender in snap.get("sending") or ():
            key = (str(sender.get("sender")), str(sender.get("destination")))
            entry = merged.get(key)
            if entry is None:
                merged[key] = entry = {**sender, "attempts": 0, "items": 0, "refused": 0, "replicas": []}
            elif _STATE_RANK.get(sender.get("state", "ok"), 0) > _STATE_RANK.get(entry.get("state", "ok"), 0):
                entry.update({k: v for k, v in sender.items() if k not in ("attempts", "items", "refused",
                                                                             "last_refused")})
            for total in ("attempts", "items", "refused"):
                entry[total] += sender.get(total) or 0
            last = sender.get("last_refused")
            if last and (entry.get("last_refused") is None or last.get("at", 0) >= entry["last_refused"].get("at", 0)):
                entry["last_refused"] = last
            entry["replicas"].append(str(snap.get("replica")))
    return [merged[key] for key in sorted(merged)]
