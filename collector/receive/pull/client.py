"""The HTTP side of reading a backend: JSON requests with retries, and the one-line errors.

A request that gets 408, 425, 429 or a 5xx, or no answer at all (refused, reset, timed
out), is retried with exponential backoff and full jitter (``min_backoff_s`` doubling up to
``max_backoff_s``), honouring ``Retry-After`` (seconds or an HTTP date) when the backend
sends one, at most ``attempts`` times. Any other status, or a body that is not JSON, is a
`collector.common.errors.PullError` at once: one line naming the method, the URL (credentials
masked) and what the backend said (its first 200 characters).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from collector.common.errors import PullError
from collector.receive.pull.source import mask_url

logger = logging.getLogger(__name__)

RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})
Params = Mapping[str, Any] | Sequence[tuple[str, Any]]


@dataclass(frozen=True, slots=True)
class Retry:
    """How requests are retried.

    Example:
        >>> Retry(attempts=3, min_backoff_s=1.0, max_backoff_s=4.0).cap(5)
        4.0
    """

    attempts: int = 6
    min_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    timeout_s: float = 60.0

    def cap(self, attempt: int) -> float:
        """The largest wait before retry number ``attempt`` (1: the first retry).

        Example:
            >>> [Retry().cap(n) for n in (1, 2, 3)]
            [0.5, 1.0, 2.0]
        """
        return min(self.max_backoff_s, self.min_backoff_s * 2 ** (attempt - 1))


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """The delay a ``Retry-After`` header asks for, in seconds (None: absent or unreadable).

    Example:
        >>> retry_after("3"), retry_after(None), retry_after("soon")
        (3.0, None, None)
        >>> retry_after("Sat, 05 Dec 2026 12:00:10 GMT", datetime(2026, 12, 5, 12, 0, tzinfo=UTC))
        10.0
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def short(text: str, limit: int = 200) -> str:
    """A reply on one line, at most ``limit`` characters.

    Example:
        >>> short("not\\nfound  here")
        'not found here'
    """
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class JsonClient:
    """JSON over HTTP to one backend, with retries; ``async with`` opens and closes its session.

    ``headers`` go with every request (the credentials: they are never part of a message).
    """

    def __init__(self, headers: Mapping[str, str] | None = None, retry: Retry | None = None,
                 auth: aiohttp.BasicAuth | None = None) -> None:
        self.headers = dict(headers or {})
        self.retry = retry or Retry()
        self.auth = auth
        self.requests = 0  # sent, retries included
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> JsonClient:
        self._session = aiohttp.ClientSession(headers=self.headers, auth=self.auth,
                                              timeout=aiohttp.ClientTimeout(total=self.retry.timeout_s))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, url: str, params: Params | None = None) -> Any:
        """GET ``url`` and return its JSON body."""
        return await self.request("GET", url, params=params)

    async def post(self, url: str, body: Any) -> Any:
        """POST ``body`` as JSON to ``url`` and return the JSON answer."""
        return await self.request("POST", url, json=body)

    async def listing(self, method: str, url: str, key: str, **options: Any) -> tuple[dict[str, Any], list[Any]]:
        """One request whose answer is a JSON object holding a list under ``key`` (absent: empty):
        the object and the list.

        Raises:
            PullError: as `request`, or the answer is not shaped so.
        """
        where = f"{method} {mask_url(url)}"
        body = expect(where, await self.request(method, url, **options), dict, "a JSON object")
        return body, expect(where, body.get(key, []), list, f"a list in {key!r}")

    async def request(self, method: str, url: str, **options: Any) -> Any:
        """One request, retried as the module docstring says.

        Raises:
            PullError: refused for good, not JSON, or still failing after the last attempt.
        """
        if self._session is None:
            raise RuntimeError("JsonClient used outside `async with`")
        where = f"{method} {mask_url(url)}"
        problem, status = "", None  # the last failure, and its HTTP status when it had one
        for attempt in range(1, self.retry.attempts + 1):
            self.requests += 1
            delay: float | None = None
            try:
                async with self._session.request(method, url, **options) as resp:
                    text = await resp.text(errors="replace")
                    if resp.status < 300:
                        return _json(where, text)
                    problem, status = f"HTTP {resp.status}: {said(text) or resp.reason}", resp.status
                    if resp.status not in RETRYABLE:
                        raise PullError(f"{where}: {problem}", status=resp.status)
                    delay = retry_after(resp.headers.get("Retry-After"))
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                problem, status = f"no answer: {short(str(err)) or type(err).__name__}", None
            if attempt == self.retry.attempts:
                break
            wait = delay if delay is not None else random.uniform(0, self.retry.cap(attempt))
            logger.warning("%s: %s; retry %d/%d in %.1fs", where, problem, attempt, self.retry.attempts - 1, wait)
            await asyncio.sleep(wait)
        raise PullError(f"{where}: {problem} (after {self.retry.attempts} attempts)", status=status)


def said(text: str) -> str:
    """What an error reply says, on one line: the message of a JSON error body (Langfuse's
    ``message``, MLflow's ``error_code`` and ``message``, FastAPI's ``detail``), else the text.

    Example:
        >>> said('{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No Experiment with id=9 exists"}')
        'RESOURCE_DOES_NOT_EXIST: No Experiment with id=9 exists'
        >>> said('{"message": "Invalid credentials"}'), said("Project not found")
        ('Invalid credentials', 'Project not found')
    """
    try:
        body = json.loads(text)
    except ValueError:
        return short(text)
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail")
        if message:
            code = body.get("error_code")
            return short(f"{code}: {message}" if code else str(message))
    return short(text)


def _json(where: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise PullError(f"{where}: the answer is not JSON: {short(text)!r}") from None


def expect(where: str, value: Any, kind: type, what: str) -> Any:
    """``value`` when it is a ``kind``; else the `PullError` of an answer not shaped like the API's.

    Example:
        >>> expect("GET http://h/x", {"data": []}, dict, "a JSON object")
        {'data': []}
        >>> expect("GET http://h/x", [1], dict, "a JSON object")
        Traceback (most recent call last):
        ...
        collector.common.errors.PullError: GET http://h/x: expected a JSON object, got [1]
    """
    if not isinstance(value, kind):
        raise PullError(f"{where}: expected {what}, got {short(repr(value), 80)}")
    return value
