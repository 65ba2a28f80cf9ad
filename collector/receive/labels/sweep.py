"""What every label reader shares: the cursor, and the sweep that hands on only what is new.

No backend can list human labels by the time they were last changed (Phoenix's and MLflow's
filters know nothing of an annotation's time or author; Langfuse filters on a score's creation
time, not on its edits). So a pull *sweeps*: it reads every candidate label of a window of the
backend (in the backend's own order, not by time) and hands on those given or changed since the
cursor. The cursor (`Cursor`, one JSON text per source) holds:

- ``mark``: the newest change time of a label seen by the last whole sweep (never later than the
  clock of this process, so a label stamped in the future cannot hide the ones after it). A
  label changed at or before ``mark - LOOKBACK_S`` is done;
- ``seen``: the labels handed on that changed after ``mark - LOOKBACK_S``, each with its change
  time and a fingerprint of what it says (`fingerprint`): a label is handed on again only when
  that differs (Phoenix keeps whole seconds: an edit in the second of the last read still
  shows). ``LOOKBACK_S`` (30 min) covers
  clocks that disagree (MLflow takes times from its clients), changes made while a sweep runs,
  and backends that show a label late (Langfuse's read API lags up to ~10 min);
- ``names``: the scorer names swept for (a new name starts over: its labels may be older than
  ``mark``; labels read again are no change to the store);
- ``full_at``: when the last whole-window sweep started (a reader that sweeps only its recent
  part between whole sweeps, as MLflow's, leaves ``mark`` alone in between and adds to ``seen``).

A first pull (no cursor) hands on the labels changed in the last ``since_s`` seconds. Pages
hold at most ``page_size`` labels; every page but the last carries the cursor the pull started
from (a pull that fails half-way is swept again next time, and labels read again change
nothing in the store), the last one the new cursor.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from collector.common.labels import Label
from collector.receive.pull.source import iso

logger = logging.getLogger(__name__)

LOOKBACK_S = 1800.0
PAGE_SIZE = 500
_FRACTION = re.compile(r"(\.\d{6})\d+")


def epoch_s(text: Any) -> float:
    """An ISO 8601 time of a backend's answer as Unix seconds (a time without zone is UTC).

    Raises:
        ValueError: not an ISO 8601 time.

    Example:
        >>> epoch_s("2026-12-06T06:04:37.120Z"), epoch_s("2026-12-06T06:02:20+00:00")
        (1796537077.12, 1796536940.0)
        >>> epoch_s("2026-12-06T06:02:20.123456789Z")
        1796536940.123456
    """
    if not isinstance(text, str):
        raise ValueError(f"not a time: {text!r}")
    when = datetime.fromisoformat(_FRACTION.sub(r"\1", text.strip()).replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def iso_time(epoch: float) -> str:
    """Unix seconds as the ISO 8601 text with ``Z`` the backends' time parameters take.

    Example:
        >>> iso_time(1796083200.0)
        '2026-12-01T00:00:00.000000Z'
    """
    return iso(datetime.fromtimestamp(epoch, UTC))


def fingerprint(label: Label) -> str:
    """A short hash of what a label says and when it changed: a label read again with another one
    has changed.

    Example:
        >>> a = Label("Q", "ab" * 16, None, None, True, "x", at=5.0)
        >>> fingerprint(a) == fingerprint(Label("Q", "ab" * 16, None, None, True, "x", at=5.0)), len(fingerprint(a))
        (True, 12)
        >>> fingerprint(a) == fingerprint(Label("Q", "ab" * 16, None, None, False, "x", at=5.0))
        False
    """
    said = [label.at, label.value, label.rationale, label.annotator, label.name, label.item]
    return hashlib.sha256(json.dumps(said, ensure_ascii=False).encode()).hexdigest()[:12]


@dataclass
class Cursor:
    """How far a source's labels were read (see the module docstring).

    Example:
        >>> c = Cursor.load('{"mark": 100.0, "seen": {"a-1": [99.0, "5e1f"]}, "names": ["Q"]}', ["Q"])
        >>> c.mark, c.seen, c.fresh
        (100.0, {'a-1': (99.0, '5e1f')}, False)
        >>> Cursor.load(c.dump(), ["Q", "R"]).mark is None  # a new scorer name: start over
        True
        >>> Cursor.load("not json", ["Q"]).fresh
        True
    """

    mark: float | None = None
    seen: dict[str, tuple[float, str]] = field(default_factory=dict)  # source id -> (at, fingerprint)
    names: list[str] = field(default_factory=list)
    full_at: float | None = None
    fresh: bool = True  # no usable cursor: a first pull

    @classmethod
    def load(cls, text: str | None, names: Sequence[str]) -> Cursor:
        """The cursor ``text`` holds for a pull of ``names`` (a fresh one when there is none, it
        does not read, or it was swept for other names)."""
        wanted = sorted(set(names))
        if text is None:
            return cls(names=wanted)
        try:
            data = json.loads(text)
            mark = data.get("mark")
            cursor = cls(None if mark is None else float(mark),
                         {str(k): (float(at), str(fp)) for k, (at, fp) in (data.get("seen") or {}).items()},
                         [str(n) for n in data.get("names") or []],
                         None if data.get("full_at") is None else float(data["full_at"]), fresh=False)
        except (ValueError, TypeError, AttributeError):
            logger.warning("label cursor %r does not read: labels are read again from the start", text[:80])
            return cls(names=wanted)
        if not set(wanted) <= set(cursor.names):
            return cls(names=wanted)
        cursor.names = wanted
        return cursor

    def dump(self) -> str:
        """The cursor as the JSON text to store."""
        return json.dumps({"mark": self.mark, "seen": self.seen, "names": self.names, "full_at": self.full_at},
                          separators=(",", ":"), sort_keys=True)


class Sweep:
    """One pull's sweep: labels offered in the backend's order, handed on in pages when new.

    Example:
        >>> def label(i, at): return Label("Q", "ab" * 16, None, None, True, "x", source_id=f"l{i}", at=at)
        >>> first = Sweep(None, ["Q"], since_s=100, now=1000.0, page_size=2)
        >>> [len(page) for page in first.add([label(1, 950.0), label(2, 960.0), label(3, 800.0)])]
        [2]
        >>> last, cursor = first.finish()
        >>> last, json.loads(cursor)["mark"]
        ([], 960.0)
        >>> again = Sweep(cursor, ["Q"], since_s=100, now=1100.0)
        >>> list(again.add([label(1, 950.0), label(2, 1050.0), label(4, 990.0)]))
        []
        >>> [lbl.source_id for lbl in again.finish()[0]]
        ['l2', 'l4']
    """

    def __init__(self, cursor: str | None, names: Sequence[str], *, since_s: float, now: float,
                 page_size: int = PAGE_SIZE, full_every_s: float = 0.0) -> None:
        self.old = Cursor.load(cursor, names)
        self.resume = self.old.dump()  # the cursor every page but the last carries
        self.now = now
        last_full = self.old.full_at
        # A whole-window sweep (else only the part a reader reads every pull): the first, and then
        # every full_every_s.
        self.full = self.old.fresh or last_full is None or now - last_full >= full_every_s
        self.floor = self.old.mark - LOOKBACK_S if self.old.mark is not None else now - since_s
        self.page_size = page_size
        self._page: list[Label] = []
        self._handed: dict[str, tuple[float, str]] = {}  # source id -> (at, fingerprint), handed on
        self._swept: dict[str, tuple[float, str]] = {}  # the same, of every label this sweep read

    def add(self, labels: Sequence[Label]) -> Iterator[list[Label]]:
        """Offer labels read; yields each page that fills (a label is offered once per sweep, or
        again unchanged: only its first offer counts)."""
        for label in labels:
            key = label.source_id
            if key in self._swept:
                continue
            said = self._swept[key] = (label.at, fingerprint(label))
            if label.at <= self.floor or self.old.seen.get(key) == said:
                continue
            self._handed[key] = said
            self._page.append(label)
            if len(self._page) >= self.page_size:
                page, self._page = self._page, []
                yield page

    def finish(self) -> tuple[list[Label], str]:
        """The last page (possibly empty) and the cursor to store after it."""
        old = self.old
        if self.full:
            times = [at for at, _ in self._swept.values()] + ([old.mark] if old.mark is not None else [])
            mark = min(max(times), self.now) if times else None
            floor = -float("inf") if mark is None else mark - LOOKBACK_S
            cursor = Cursor(mark, {k: said for k, said in self._swept.items() if said[0] > floor}, old.names,
                            self.now, fresh=False)
        else:
            cursor = Cursor(old.mark, {**old.seen, **self._handed}, old.names, old.full_at, fresh=False)
        page, self._page = self._page, []
        return page, cursor.dump()
