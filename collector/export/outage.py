"""`OutageWatch`: one line when a destination stops taking what is sent, one when it takes it again.

A backend outage makes every attempt fail, for as long as it lasts: a warning per attempt
would flood the log, a rate-limited one says nothing new each time. The watch turns the
attempts into two lines instead, the first naming the destination and what went wrong, the
last saying how long it lasted and how many attempts failed meanwhile (in between, each
failed attempt is the caller's DEBUG line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

MAX_CAUSE_CHARS = 300
"""A cause longer than this is cut (a server's error page is not a log line)."""


def describe_error(err: BaseException) -> str:
    """A failed send's cause in one line: the exception's type and what it says.

    Example:
        >>> describe_error(ConnectionRefusedError(111, "Connection refused"))
        'ConnectionRefusedError: [Errno 111] Connection refused'
        >>> describe_error(TimeoutError())
        'TimeoutError'
    """
    text = " ".join(str(err).split())
    return one_line(f"{type(err).__name__}: {text}" if text else type(err).__name__)


def one_line(cause: str) -> str:
    """``cause`` on one line, cut at `MAX_CAUSE_CHARS`.

    Example:
        >>> one_line("HTTP 503\\nService Unavailable")
        'HTTP 503 Service Unavailable'
        >>> len(one_line("x" * 1000)) == MAX_CAUSE_CHARS
        True
    """
    flat = " ".join(cause.split())
    return flat if len(flat) <= MAX_CAUSE_CHARS else flat[: MAX_CAUSE_CHARS - 1] + "…"


@dataclass
class Outage:
    """One outage so far: when its first failed attempt was (monotonic seconds), how many
    attempts failed and how many requests they carried, and the latest cause."""

    started: float
    cause: str
    attempts: int = 0
    requests: int = 0


class OutageWatch:
    """Tells when sending to one destination starts failing and when it works again.

    Args:
        what: names the sending and its destination (``forwarding to http://backend:4317 (grpc)``).
        meanwhile: what happens to the data during an outage, for the first line.
        unit: what one attempt carries (``requests``, ``score records``), for the last line.

    Example:
        >>> watch = OutageWatch("forwarding to http://backend:4317", "requests are kept and retried")
        >>> watch.failed("HTTP 503 Service Unavailable", requests=3, now=10.0)
        'forwarding to http://backend:4317 failed: HTTP 503 Service Unavailable; requests are kept and retried'
        >>> watch.failed("HTTP 503 Service Unavailable", requests=3, now=12.0) is None  # the same outage
        True
        >>> watch.recovered(now=40.5)
        'forwarding to http://backend:4317 recovered after 30.5 s and 2 failed attempts (6 requests retried); last error: HTTP 503 Service Unavailable'
        >>> watch.recovered(now=41.0) is None  # no outage to end
        True
    """

    def __init__(self, what: str, meanwhile: str, unit: str = "requests") -> None:
        self._what = what
        self._meanwhile = meanwhile
        self._unit = unit
        self.outage: Outage | None = None

    def failed(self, cause: str, requests: int = 1, now: float | None = None) -> str | None:
        """Count a failed attempt carrying ``requests`` requests; the warning to log when it
        starts an outage (None when one was already going on)."""
        at = time.monotonic() if now is None else now
        started = self.outage is None
        outage = self.outage = self.outage or Outage(started=at, cause=cause)
        outage.attempts += 1
        outage.requests += requests
        outage.cause = cause
        return f"{self._what} failed: {cause}; {self._meanwhile}" if started else None

    def recovered(self, now: float | None = None) -> str | None:
        """Note that the destination took what was sent; the line to log when that ends an
        outage (None when there was none)."""
        outage, self.outage = self.outage, None
        if outage is None:
            return None
        lasted = (time.monotonic() if now is None else now) - outage.started
        return (f"{self._what} recovered after {lasted:.1f} s and {outage.attempts} failed attempt"
                f"{'s' if outage.attempts != 1 else ''} ({outage.requests} {self._unit} retried); "
                f"last error: {outage.cause}")
