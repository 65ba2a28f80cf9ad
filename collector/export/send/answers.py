"""The one reading of a backend's answer that every durable sender uses (forwarding, the OTLP
score export, the native score sinks): what to do with what was sent, and why, in the
backend's own words.

* ``SENT``: HTTP 2xx; gRPC OK.
* ``RETRY``, an outage: no answer (refused, reset, timed out); HTTP 408, 409, 425, 429, 5xx
  (but 501); gRPC UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, CANCELLED, OUT_OF_RANGE, DATA_LOSS,
  RESOURCE_EXHAUSTED (but "larger than"), INTERNAL, UNKNOWN, ALREADY_EXISTS.
* ``HOLD``, a configuration to fix: HTTP 401, 403, 407, 3xx; a 404 with the backend's message
  (``not_found``); a 404 or 405 without one, and 501 (``no_route``); gRPC UNAUTHENTICATED,
  PERMISSION_DENIED, NOT_FOUND (``not_found``), UNIMPLEMENTED (``no_route``).
* ``WAIT``: what ``not_found=WAIT`` makes of a 404 with the backend's message (gRPC NOT_FOUND).
* ``REFUSE``, for good: every other HTTP 4xx (400, 410, 411, 413, 414, 415, 422...); gRPC
  INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED "larger than" (the message is too
  large for the backend); what ``no_route=REFUSE`` makes of an answer saying there is no such route.

``RETRY`` and ``HOLD`` both keep what was sent in the store and try again with backoff; a
``HOLD`` is what a configuration change cures (an MLflow experiment or a project that does
not exist, credentials refused, a URL the endpoint does not serve), so it is reported as
such, with the fix (`Answer.fix`). ``WAIT``: the backend does not know yet what the item
refers to (a score sink's span or trace, still on its way): retried until the sender's
bound. ``REFUSE``: retrying would fail the same way (a malformed payload, too large); the
item is dropped, counted and logged with the backend's message.

What a 404 means depends on the API: for OTLP it names a missing experiment or project
(``HOLD``), for a score API a span the backend has not received yet (``WAIT``). A 404 or 405
that carries no message of the backend's own (an HTML page, a bare "Not Found": the server
has no such route) says the endpoint does not serve that path at all: a wrong URL (``HOLD``),
or, for an optional signal such as forwarded logs to a backend that takes only traces,
``REFUSE`` (``no_route``), so one unsupported signal never blocks the others.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["Answer", "Verdict", "backend_message", "classify_error", "classify_grpc", "classify_http",
           "describe_error", "no_route", "one_line"]

MAX_CAUSE_CHARS = 300
"""A cause longer than this is cut (a server's error page is not a log line)."""


class Verdict(enum.Enum):
    """What a sender does with what it sent, by the backend's answer."""

    SENT = "sent"  # taken (or already there)
    RETRY = "retry"  # an outage: kept, tried again with backoff
    HOLD = "hold"  # a configuration change cures it: kept, tried again with backoff, reported with the fix
    WAIT = "wait"  # the backend does not know what it refers to yet: tried again, for a bounded time
    REFUSE = "refuse"  # refused for good: dropped, counted, logged with the backend's message

    @property
    def keeps(self) -> bool:
        """Whether the sender keeps the item and stops the round (an outage or a hold).

        Example:
            >>> [v.value for v in Verdict if v.keeps]
            ['retry', 'hold']
        """
        return self in (Verdict.RETRY, Verdict.HOLD)


@dataclass(frozen=True)
class Answer:
    """A backend's answer to one send.

    Attributes:
        verdict: what to do (`Verdict`).
        cause: the answer on one line, as the log and ``status`` show it
            (``HTTP 404 Not Found: No Experiment with id=1 exists``).
        message: the backend's own words, when it said any.
        status: the HTTP status (0: no answer) or the gRPC status name.
        fix: for a ``HOLD``, what to change.
        retry_after_s: how long the backend asked to be left alone (``Retry-After``).

    Example:
        >>> Answer.sent().verdict, Answer.sent().cause
        (<Verdict.SENT: 'sent'>, '')
    """

    verdict: Verdict
    cause: str = ""
    message: str = ""
    status: int | str = 0
    fix: str = ""
    retry_after_s: float | None = None

    @classmethod
    def sent(cls) -> Answer:
        """The answer of a send the backend took."""
        return _SENT

    def but(self, verdict: Verdict) -> Answer:
        """The same answer, read as ``verdict`` (a sender that knows better, e.g. a mark it need not retry).

        Example:
            >>> classify_http(503, "").but(Verdict.SENT).verdict
            <Verdict.SENT: 'sent'>
        """
        return Answer(verdict, self.cause, self.message, self.status, self.fix, self.retry_after_s)


_SENT = Answer(Verdict.SENT)

CREDENTIALS = "the backend refused the credentials: check the token, API key or headers the configuration gives"
FORBIDDEN = "the credentials are not allowed to write there: check their permissions"
MISSING = ("what the request names does not exist on the backend (an MLflow experiment, a project): "
           "create it, or name one that exists in the configuration")
NO_ROUTE = "the endpoint does not serve this path: check the URL (and the protocol) in the configuration"
NOT_IMPLEMENTED = "the server does not implement this request: check the URL, and the server's own configuration"
REDIRECT = "the endpoint redirects elsewhere: configure the URL it points to"

_RETRY_HTTP = frozenset({408, 409, 425, 429})
_HOLD_HTTP = {401: CREDENTIALS, 403: FORBIDDEN, 407: CREDENTIALS}
_NO_ROUTE_HTTP = frozenset({404, 405, 501})  # a bare answer of these: no such route
_RETRY_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "CANCELLED", "OUT_OF_RANGE", "DATA_LOSS",
                         "RESOURCE_EXHAUSTED", "INTERNAL", "UNKNOWN", "ALREADY_EXISTS"})
_HOLD_GRPC = {"UNAUTHENTICATED": CREDENTIALS, "PERMISSION_DENIED": FORBIDDEN}


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


_MESSAGE_KEYS = ("message", "error_message", "detail", "error", "error_description", "errors", "title", "msg")


def _json_message(value: Any) -> str:
    """The message in a decoded JSON error body (MLflow's ``message``, FastAPI's ``detail``,
    ``{"error": {"message": ...}}``, a list of validation errors with their ``loc``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "; ".join(m for m in map(_json_message, value) if m)
    if not isinstance(value, dict):
        return ""
    for key in _MESSAGE_KEYS:
        if key in value:
            found = _json_message(value[key])
            if found:
                where = value.get("loc")
                if isinstance(where, list) and key == "msg":  # a validation error: what it is about
                    found = f"{' '.join(str(part) for part in where)}: {found}"
                return found
    return ""


def backend_message(body: str) -> str:
    """What a backend said in an error body, on one line: a JSON error's message, an HTML
    page's title, or the text itself ("" for an empty body).

    Example:
        >>> backend_message('{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No Experiment with id=1 exists"}')
        'No Experiment with id=1 exists'
        >>> backend_message('{"detail": [{"loc": ["header", "x-mlflow-experiment-id"], "msg": "Field required"}]}')
        'header x-mlflow-experiment-id: Field required'
        >>> backend_message("<!doctype html><html><title>404 Not Found</title><h1>Not Found</h1></html>")
        '404 Not Found'
        >>> backend_message("Spans with IDs abababababababab do not exist.")
        'Spans with IDs abababababababab do not exist.'
    """
    text = body.strip()
    if not text:
        return ""
    if text[0] in "{[":
        try:
            return one_line(_json_message(json.loads(text)))
        except ValueError:
            pass
    if text.startswith("<"):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        return one_line(title.group(1)) if title else ""
    return one_line(text)


def no_route(status: int, body: str) -> bool:
    """Whether an answer says the server has no such route at all (a 404, 405 or 501 carrying
    no message of the backend's own: an HTML page, a bare "Not Found"), rather than a message
    about what the request named.

    Example:
        >>> no_route(404, "<title>404 Not Found</title>"), no_route(405, "Method Not Allowed")
        (True, True)
        >>> no_route(404, '{"message": "No Experiment with id=1 exists"}'), no_route(400, "")
        (False, False)
    """
    return status in _NO_ROUTE_HTTP and _says_nothing(status, backend_message(body))


def _says_nothing(status: int, message: str) -> bool:
    """Whether ``message`` only repeats the status (``Not Found``, ``404 Not Found``, empty): the
    server has no such route, rather than a message about what the request named."""
    words = re.sub(r"^\d{3}\s*", "", message.lower()).strip(" .:")
    try:
        phrase = HTTPStatus(status).phrase.lower()
    except ValueError:
        phrase = ""
    return words in ("", phrase, "page not found", "not found", "method not allowed", "not implemented")


def classify_http(status: int, body: str = "", *, retry_after_s: float | None = None,
                  not_found: Verdict = Verdict.HOLD, no_route: Verdict = Verdict.HOLD) -> Answer:
    """Read an HTTP answer (see the module's table).

    Args:
        status: the status code (0: no answer; ``body`` then says why).
        body: the reply's text (its first few kilobytes are enough).
        retry_after_s: the ``Retry-After`` the reply carried, in seconds.
        not_found: what a 404 carrying the backend's message means for this API.
        no_route: what an answer saying the endpoint has no such route means for this request.

    Example:
        >>> a = classify_http(404, '{"message": "No Experiment with id=1 exists"}')
        >>> a.verdict, a.cause
        (<Verdict.HOLD: 'hold'>, 'HTTP 404 Not Found: No Experiment with id=1 exists')
        >>> [classify_http(s).verdict.value for s in (200, 204, 400, 401, 403, 413, 429, 500, 503)]
        ['sent', 'sent', 'refuse', 'hold', 'hold', 'refuse', 'retry', 'retry', 'retry']
        >>> classify_http(404, "Spans with IDs ab do not exist.", not_found=Verdict.WAIT).verdict
        <Verdict.WAIT: 'wait'>
        >>> classify_http(405, "Method Not Allowed", not_found=Verdict.WAIT, no_route=Verdict.REFUSE).verdict
        <Verdict.REFUSE: 'refuse'>
        >>> classify_http(0, "ConnectionRefusedError: [Errno 111] Connection refused").cause
        'ConnectionRefusedError: [Errno 111] Connection refused'
    """
    if 200 <= status < 300:
        return Answer(Verdict.SENT, status=status)
    if status == 0:
        return Answer(Verdict.RETRY, one_line(body) or "no answer", status=0)
    message = backend_message(body)
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    head = f"HTTP {status} {reason}".rstrip()
    cause = one_line(f"{head}: {message}" if message and not _says_nothing(status, message) else head)
    if status in _NO_ROUTE_HTTP and _says_nothing(status, message):
        verdict, fix = no_route, NO_ROUTE
    elif status == 501:  # with a message ("span logging is not supported by FileStore"): not here either
        verdict, fix = no_route, NOT_IMPLEMENTED
    elif status == 404:
        verdict, fix = not_found, MISSING
    elif status in _HOLD_HTTP:
        verdict, fix = Verdict.HOLD, _HOLD_HTTP[status]
    elif 300 <= status < 400:
        verdict, fix = Verdict.HOLD, REDIRECT
    elif status in _RETRY_HTTP or status >= 500:
        verdict, fix = Verdict.RETRY, ""
    else:
        verdict, fix = Verdict.REFUSE, ""
    return Answer(verdict, cause, message, status, fix if verdict is Verdict.HOLD else "", retry_after_s)


def classify_grpc(code: str, details: str = "", *, not_found: Verdict = Verdict.HOLD,
                  no_route: Verdict = Verdict.HOLD) -> Answer:
    """Read a gRPC status (its name, as ``grpc.StatusCode.X.name`` gives it; see the module's table).

    Example:
        >>> a = classify_grpc("UNAVAILABLE", "no backend")
        >>> a.verdict, a.cause
        (<Verdict.RETRY: 'retry'>, 'gRPC UNAVAILABLE: no backend')
        >>> [classify_grpc(c).verdict.value for c in ("OK", "UNAUTHENTICATED", "NOT_FOUND", "INVALID_ARGUMENT")]
        ['sent', 'hold', 'hold', 'refuse']
        >>> classify_grpc("RESOURCE_EXHAUSTED", "Received message larger than max (5000000 vs. 4194304)").verdict
        <Verdict.REFUSE: 'refuse'>
        >>> classify_grpc("UNIMPLEMENTED", "", no_route=Verdict.REFUSE).verdict
        <Verdict.REFUSE: 'refuse'>
    """
    if code == "OK":
        return Answer(Verdict.SENT, status=code)
    message = one_line(details)
    cause = one_line(f"gRPC {code}: {message}" if message else f"gRPC {code}")
    if code == "RESOURCE_EXHAUSTED" and "larger than" in message:
        verdict, fix = Verdict.REFUSE, ""  # too large for the backend: it would be refused again
    elif code in _RETRY_GRPC:
        verdict, fix = Verdict.RETRY, ""
    elif code in _HOLD_GRPC:
        verdict, fix = Verdict.HOLD, _HOLD_GRPC[code]
    elif code == "NOT_FOUND":
        verdict, fix = not_found, MISSING
    elif code == "UNIMPLEMENTED":
        verdict, fix = no_route, NO_ROUTE
    else:
        verdict, fix = Verdict.REFUSE, ""
    return Answer(verdict, cause, message, code, fix if verdict is Verdict.HOLD else "")


def classify_error(err: BaseException) -> Answer:
    """A send that got no answer (refused, reset, timed out, a client that is closed): an outage.

    Example:
        >>> classify_error(ConnectionResetError("reset by peer")).verdict
        <Verdict.RETRY: 'retry'>
    """
    return Answer(Verdict.RETRY, describe_error(err))
