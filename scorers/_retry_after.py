"""Retry-After hints and the exception chain walk shared by the judge and its processors.

Mastra's rules (`packages/core/src/utils/retry-after.ts`): walk the error and its cause
chain; at each level look at the response headers (names compared case-insensitively,
string values only); ``retry-after-ms`` (digits only, milliseconds) wins over
``retry-after`` (digits only, seconds; otherwise an HTTP date, used only when it lies in
the future). Signed, decimal and exponent numbers are rejected and never read as dates.
The first usable value wins.

Python exceptions chain through ``__cause__`` and ``__context__`` (litellm raises its
mapped errors while handling the provider's, so the provider error is often only the
context); both are walked, with a visited set against cycles.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

DEFAULT_MAX_RETRY_AFTER_MS = 30_000
"""The default cap on a provider's Retry-After hint (Mastra's ``DEFAULT_MAX_RETRY_AFTER_MS``)."""

_DIGITS = re.compile(r"^\d+$")
_HEADER_ATTRS = ("response_headers", "responseHeaders", "litellm_response_headers", "headers")


def iter_error_chain(error: BaseException | Any) -> Iterator[Any]:
    """Yield ``error``, then every error reachable through ``__cause__``/``__context__``/``cause``.

    Each object is yielded once (cycles are guarded with a visited set).

    Example:
        >>> try:
        ...     try:
        ...         raise KeyError("inner")
        ...     except KeyError as inner:
        ...         raise RuntimeError("outer") from inner
        ... except RuntimeError as outer:
        ...     [type(e).__name__ for e in iter_error_chain(outer)]
        ['RuntimeError', 'KeyError']
    """
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # ``raise X from Y`` suppresses the context (as Python's traceback display does).
        context = None if getattr(current, "__suppress_context__", False) else getattr(
            current, "__context__", None
        )
        nexts = [getattr(current, "__cause__", None), context, getattr(current, "cause", None)]
        # Depth-first in the order cause, context, cause attribute.
        stack.extend(n for n in reversed(nexts) if n is not None and not isinstance(n, str))


def response_headers(level: Any) -> list[Mapping[str, Any]]:
    """The header mappings one error object carries (its own and its HTTP response's).

    Example:
        >>> class E(Exception):
        ...     response_headers = {"Retry-After": "2"}
        >>> response_headers(E())
        [{'Retry-After': '2'}]
    """
    found: list[Mapping[str, Any]] = []
    for attr in _HEADER_ATTRS:
        try:
            value = getattr(level, attr, None)
        except Exception:  # a property that raises is not a header source
            continue
        if value is not None and hasattr(value, "items"):
            found.append(value)
    response = getattr(level, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    if headers is not None and hasattr(headers, "items"):
        found.append(headers)
    return found


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name and isinstance(value, str):
            return value
    return None


def retry_after_ms_from_headers(headers: Mapping[str, Any], *, now: float | None = None) -> float | None:
    """The Retry-After hint of one header mapping, in milliseconds, or None.

    Example:
        >>> retry_after_ms_from_headers({"retry-after-ms": "150", "retry-after": "9"})
        150.0
        >>> retry_after_ms_from_headers({"Retry-After": "2"})
        2000.0
        >>> retry_after_ms_from_headers({"retry-after": "1.5"}) is None
        True
        >>> retry_after_ms_from_headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"},
        ...                             now=1445412470.0)
        10000.0
    """
    value = _header(headers, "retry-after-ms")
    if value is not None and _DIGITS.match(value.strip()):
        return float(int(value.strip()))
    value = _header(headers, "retry-after")
    if value is None:
        return None
    text = value.strip()
    if _DIGITS.match(text):
        return float(int(text)) * 1000.0
    if re.match(r"^[+-]?[\d.eE+-]+$", text):
        return None  # a signed/decimal/exponent number: rejected, not a date
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    delta_ms = (when.timestamp() - current) * 1000.0
    return delta_ms if delta_ms > 0 else None


def parse_retry_after_ms(error: BaseException | Any, *, now: float | None = None) -> float | None:
    """The first usable Retry-After hint along ``error``'s chain, in milliseconds.

    Example:
        >>> class RateLimited(Exception):
        ...     litellm_response_headers = {"retry-after-ms": "250"}
        >>> parse_retry_after_ms(RuntimeError("wrapped"))
        >>> err = RuntimeError("wrapped")
        >>> err.__cause__ = RateLimited()
        >>> parse_retry_after_ms(err)
        250.0
    """
    for level in iter_error_chain(error):
        for headers in response_headers(level):
            value = retry_after_ms_from_headers(headers, now=now)
            if value is not None:
                return value
    return None
