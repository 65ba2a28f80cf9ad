"""`SendWatch`: how sending to one destination goes, for the log and for ``status``.

A backend outage, or a configuration the backend refuses, makes every attempt fail for as
long as it lasts: a warning per attempt would flood the log, a rate-limited one says
nothing new each time. The watch turns the attempts into few lines instead: one when
sending starts failing, naming the destination and the backend's answer (and, for an
answer a configuration change cures, the fix); one more when the kind of trouble changes
(the backend came back but refuses the experiment, or a hold needs another fix); one when it takes what is sent
again, saying how long it lasted and how many attempts failed meanwhile (in between, each
failed attempt is the sender's DEBUG line). `SendWatch.state` is the same knowledge as
``status`` shows it: ``ok``, ``retrying`` (an outage) or ``held`` (waiting for a
configuration fix), since when, the backend's answer, and what was refused for good.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from collector.export.send.answers import Answer, Verdict

STATES = ("ok", "retrying", "held")
"""The states of a sender, from best to worst (`SendWatch.state`)."""


@dataclass
class Trouble:
    """One stretch of failed attempts: when it began (monotonic and wall-clock seconds), the
    latest answer, how many attempts failed and how many items they carried."""

    started: float
    since: float
    answer: Answer
    attempts: int = 0
    items: int = 0


class SendWatch:
    """Tells when sending to one destination starts failing, how, and when it works again.

    Args:
        sender: which sender (``forward``, ``export``, ``sink mlflow``), as ``status`` names it.
        destination: where it sends (URL, credentials masked), as ``status`` names it.
        meanwhile: what happens to the data while it fails, for the first line.
        unit: what one attempt carries (``requests``, ``score records``), for the last line.

    Example:
        >>> from collector.export.send.answers import classify_http
        >>> watch = SendWatch("forward", "http://backend:4318", "requests are kept and retried")
        >>> watch.failed(classify_http(503), items=3, now=10.0)
        'forward to http://backend:4318 failed: HTTP 503 Service Unavailable; requests are kept and retried'
        >>> watch.failed(classify_http(503), items=3, now=12.0) is None  # the same outage
        True
        >>> held = watch.failed(classify_http(404, '{"message": "No Experiment with id=1 exists"}'), items=3, now=13.0)
        >>> held.split("; ")[:2]  # the kind of trouble changed: a line again, with the fix
        ['forward to http://backend:4318 failed: HTTP 404 Not Found: No Experiment with id=1 exists', 'a configuration change is needed: what the request names does not exist on the backend (an MLflow experiment, a project): create it, or name one that exists in the configuration']
        >>> watch.state()["state"], watch.state()["message"]
        ('held', 'No Experiment with id=1 exists')
        >>> watch.recovered(now=40.5)
        'forward to http://backend:4318 recovered after 30.5 s and 3 failed attempts (9 requests retried); last error: HTTP 404 Not Found: No Experiment with id=1 exists'
        >>> watch.recovered(now=41.0) is None  # nothing to end
        True
    """

    def __init__(self, sender: str, destination: str, meanwhile: str, unit: str = "requests",
                 what: str | None = None) -> None:
        self.sender = sender
        self.destination = destination
        self._what = what or f"{sender} to {destination}"
        self._meanwhile = meanwhile
        self._unit = unit
        self.trouble: Trouble | None = None
        self._refused = 0
        self._last_refused: dict[str, Any] | None = None

    def failed(self, answer: Answer, items: int = 1, now: float | None = None) -> str | None:
        """Count an attempt that was kept for later (``RETRY`` or ``HOLD``) carrying ``items``;
        the warning to log when it starts the trouble or changes its kind (None otherwise)."""
        at = time.monotonic() if now is None else now
        trouble = self.trouble
        new = trouble is None or trouble.answer.verdict is not answer.verdict or (
            answer.verdict is Verdict.HOLD and answer.status != trouble.answer.status)  # another fix to make
        if trouble is None:
            trouble = self.trouble = Trouble(started=at, since=time.time(), answer=answer)
        trouble.attempts += 1
        trouble.items += items
        trouble.answer = answer
        if not new:
            return None
        fix = f"a configuration change is needed: {answer.fix}; " if answer.verdict is Verdict.HOLD else ""
        return f"{self._what} failed: {answer.cause}; {fix}{self._meanwhile}"

    def recovered(self, now: float | None = None) -> str | None:
        """Note that the destination took what was sent; the line to log when that ends a
        stretch of failed attempts (None when there was none)."""
        trouble, self.trouble = self.trouble, None
        if trouble is None:
            return None
        lasted = (time.monotonic() if now is None else now) - trouble.started
        return (f"{self._what} recovered after {lasted:.1f} s and {trouble.attempts} failed attempt"
                f"{'s' if trouble.attempts != 1 else ''} ({trouble.items} {self._unit} retried); "
                f"last error: {trouble.answer.cause}")

    def refused(self, answer: Answer, items: int) -> None:
        """Count ``items`` refused for good (shown by `state`)."""
        self._refused += items
        self._last_refused = {"cause": answer.cause, "at": time.time(), "items": items}

    def state(self) -> dict[str, Any]:
        """Where sending stands, as ``status`` shows it (JSON).

        Example:
            >>> SendWatch("sink phoenix", "http://127.0.0.1:6006", "kept").state()["state"]
            'ok'
        """
        trouble = self.trouble
        answer = trouble.answer if trouble is not None else None
        state = "ok" if answer is None else "held" if answer.verdict is Verdict.HOLD else "retrying"
        return {"sender": self.sender, "destination": self.destination, "state": state,
                "cause": answer.cause if answer else None, "message": answer.message or None if answer else None,
                "fix": answer.fix or None if answer else None, "since": trouble.since if trouble else None,
                "attempts": trouble.attempts if trouble else 0, "items": trouble.items if trouble else 0,
                "refused": self._refused, "last_refused": self._last_refused}
