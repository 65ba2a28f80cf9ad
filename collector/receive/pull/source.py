"""What ``tracescore score --from URL --since T --until T`` names: the backend, where it lives,
what to read there, and the time window.

``--from`` is ``<backend>+<http URL>``: ``phoenix+http://host:6006/<project>`` (a project
name or id; ``default`` when the path is empty), ``mlflow+http://host:5000/<experiment id>``
(required), ``langfuse+https://host`` (the keys name the project). A path before the last
segment is kept as the base URL (a backend served under a prefix). Credentials in the URL
(``user:password@``) are accepted and never printed: `mask_url` hides them in every message.

``--since`` and ``--until`` are ISO 8601 times (a time without zone is UTC) or a duration
back from now: ``30s``, ``15m``, ``12h``, ``7d``, ``2w``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from collector.common.errors import ConfigError

BACKENDS = ("phoenix", "mlflow", "langfuse")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True, slots=True)
class Source:
    """One backend to read runs from.

    Attributes:
        backend: ``phoenix``, ``mlflow`` or ``langfuse``.
        base_url: the server's base URL, without credentials or the target segment.
        target: the Phoenix project or MLflow experiment id ("" for Langfuse).
        username, password: credentials given in the URL ("" when none).
    """

    backend: str
    base_url: str
    target: str = ""
    username: str = ""
    password: str = ""

    def __str__(self) -> str:
        """The source as the user wrote it, credentials masked.

        Example:
            >>> str(parse_source("langfuse+https://pk:sk@cloud.langfuse.com"))
            'langfuse+https://pk:***@cloud.langfuse.com'
        """
        url = self.base_url + (f"/{quote(self.target, safe='')}" if self.target else "")
        if self.username or self.password:
            scheme, _, rest = url.partition("://")
            url = f"{scheme}://{quote(self.username, safe='')}:***@{rest}"
        return f"{self.backend}+{url}"


def parse_source(text: str) -> Source:
    """Parse a ``--from`` URL.

    Raises:
        ConfigError: not ``<phoenix|mlflow|langfuse>+http(s)://host[:port][/target]``.

    Example:
        >>> parse_source("phoenix+http://127.0.0.1:6006/support-bot")
        Source(backend='phoenix', base_url='http://127.0.0.1:6006', target='support-bot', username='', password='')
        >>> parse_source("mlflow+https://ml.example.com/mlflow/42").base_url
        'https://ml.example.com/mlflow'
        >>> parse_source("phoenix+http://localhost:6006").target
        'default'
        >>> parse_source("mlflow+http://localhost:5000")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: --from mlflow+http://localhost:5000: name the experiment id, as mlflow+http://host:5000/<experiment id>
        >>> parse_source("jaeger+http://localhost:16686")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: --from jaeger+http://localhost:16686: expected the backend phoenix, mlflow or langfuse, not 'jaeger' (the backend, '+', then the server's http(s) URL: phoenix+http://HOST:6006/PROJECT, mlflow+http://HOST:5000/EXPERIMENT_ID or langfuse+https://HOST)
    """
    backend, plus, url = text.partition("+")
    if not plus or backend not in BACKENDS:
        raise ConfigError(f"--from {mask_url(text)}: {_fix(text)}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise ConfigError(f"--from {mask_url(text)}: {err}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--from {mask_url(text)}: {_fix(text)}")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{port}" if port is not None else "")
    path = parts.path.rstrip("/")
    prefix, _, last = path.rpartition("/")
    if backend == "langfuse":
        prefix, target = path, ""
    else:
        target = unquote(last)
    if backend == "phoenix" and not target:
        target = "default"
    if backend == "mlflow" and not target:
        raise ConfigError(f"--from {mask_url(text)}: name the experiment id, as mlflow+http://host:5000/<experiment id>")
    base = urlunsplit((parts.scheme, netloc, prefix, "", ""))
    return Source(backend, base, target, unquote(parts.username or ""), unquote(parts.password or ""))


SOURCE_FORMS = ("phoenix+http://HOST:6006/PROJECT, mlflow+http://HOST:5000/EXPERIMENT_ID "
                "or langfuse+https://HOST")
"""What ``--from`` takes: the backend, ``+``, and the server's http(s) URL."""

_USUAL_PORTS = {"6006": "phoenix", "5000": "mlflow"}


def _fix(text: str) -> str:
    """What to write instead of a ``--from`` value `parse_source` refused: the value rewritten
    as ``<backend>+http(s)://...`` (each backend it may be meant for, when it names none and its
    port is not a backend's usual one), and the forms ``--from`` takes.

    Example:
        >>> _fix("phoenix://127.0.0.1:6006/support-bot")
        "write phoenix+http://127.0.0.1:6006/support-bot (the backend, '+', then the server's http(s) URL: phoenix+http://HOST:6006/PROJECT, mlflow+http://HOST:5000/EXPERIMENT_ID or langfuse+https://HOST)"
        >>> _fix("http://127.0.0.1:5000/3").split(" (")[0]
        'write mlflow+http://127.0.0.1:5000/3'
        >>> _fix("mlflow+localhost:5000").split(" (")[0]
        'write mlflow+http://localhost:5000/<experiment id>'
        >>> _fix("https://pk:sk@traces.example.com").split(" (")[0]
        'write phoenix+https://pk:***@traces.example.com or mlflow+https://pk:***@traces.example.com/<experiment id> or langfuse+https://pk:***@traces.example.com'
        >>> _fix("jaeger+http://localhost:16686").split(" (")[0]
        "expected the backend phoenix, mlflow or langfuse, not 'jaeger'"
    """
    forms = f" (the backend, '+', then the server's http(s) URL: {SOURCE_FORMS})"
    other = re.match(r"([A-Za-z][A-Za-z0-9_-]*)\+", text)
    if other and other.group(1).lower() not in BACKENDS:
        return f"expected the backend phoenix, mlflow or langfuse, not {other.group(1)!r}" + forms
    match = re.fullmatch(r"(?i)(?:(phoenix|mlflow|langfuse)(?:\+|://|:))?(?:([a-z][a-z0-9.+-]*)://)?(.*)",
                         text.strip())
    backend, scheme, rest = match.groups() if match else (None, None, "")
    if backend is None and rest.lower() in BACKENDS:
        backend, rest = rest, ""
    if scheme is None:  # phoenix+//host
        rest = rest.lstrip("/")
    if not rest or rest.startswith("/"):
        return f"no server named; expected {SOURCE_FORMS}"
    if scheme is not None and scheme.lower() not in ("http", "https"):
        scheme = None  # phoenix+ftp://...: the backends' read APIs are http(s)
    port = re.match(r"(?:[^/@]*@)?[^/:]*:(\d+)", rest)
    usual = _USUAL_PORTS.get(port.group(1)) if port else None
    candidates = [backend.lower()] if backend else [usual] if usual else list(BACKENDS)
    url = f"{(scheme or 'http').lower()}://{rest}"
    written = [f"{name}+{url}" + ("/<experiment id>" if name == "mlflow" and "/" not in rest.strip("/") else "")
               for name in candidates]
    return "write " + " or ".join(mask_url(text) for text in written) + forms


def mask_url(text: str) -> str:
    """``text`` with the password of a URL's ``user:password@`` replaced by ``***``.

    Example:
        >>> mask_url("langfuse+https://pk-lf-1:sk-lf-2@host/api")
        'langfuse+https://pk-lf-1:***@host/api'
        >>> mask_url("http://host:6006/p")
        'http://host:6006/p'
    """
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", text)


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """A ``--since``/``--until`` value as an aware UTC time.

    Raises:
        ConfigError: neither an ISO 8601 time nor a duration like ``7d``.

    Example:
        >>> now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
        >>> parse_time("7d", now).isoformat()
        '2026-11-28T12:00:00+00:00'
        >>> parse_time("90m", now).isoformat()
        '2026-12-05T10:30:00+00:00'
        >>> parse_time("2026-12-01", now).isoformat()
        '2026-12-01T00:00:00+00:00'
        >>> parse_time("2026-12-01T10:00:00+02:00").isoformat()
        '2026-12-01T08:00:00+00:00'
        >>> parse_time("2026-12-01T10:00:00Z").isoformat()
        '2026-12-01T10:00:00+00:00'
        >>> parse_time("last week")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: 'last week': expected an ISO 8601 time (2026-12-01T00:00:00Z) or a duration back from now (30m, 12h, 7d, 2w)
    """
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text)
    if match:
        amount, unit = float(match.group(1)), match.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{text!r}: expected an ISO 8601 time (2026-12-01T00:00:00Z) or a duration back "
                          "from now (30m, 12h, 7d, 2w)") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Window:
    """The time window of a backfill: traces that started in [since, until) (None: open).

    Example:
        >>> w = Window(datetime(2026, 12, 1, tzinfo=UTC), None)
        >>> (w.since_ms, w.until_ms)
        (1796083200000, None)
    """

    since: datetime | None = None
    until: datetime | None = None

    @property
    def since_ms(self) -> int | None:
        """``since`` in Unix milliseconds."""
        return None if self.since is None else int(self.since.timestamp() * 1000)

    @property
    def until_ms(self) -> int | None:
        """``until`` in Unix milliseconds."""
        return None if self.until is None else int(self.until.timestamp() * 1000)

    def to_dict(self) -> dict[str, str | None]:
        """The window as JSON (the cursor file keeps it: a resumed backfill reads the same one).

        Example:
            >>> Window.from_dict(Window(datetime(2026, 12, 1, tzinfo=UTC)).to_dict()).since.day
            1
        """
        return {"since": None if self.since is None else self.since.isoformat(),
                "until": None if self.until is None else self.until.isoformat()}

    @classmethod
    def from_dict(cls, data: dict[str, str | None]) -> Window:
        """The window `to_dict` wrote."""
        since, until = data.get("since"), data.get("until")
        return cls(None if since is None else datetime.fromisoformat(since),
                   None if until is None else datetime.fromisoformat(until))


def window_between(since: str | None, until: str | None) -> Window:
    """The window ``--since`` and ``--until`` name (None: open on that side).

    Raises:
        ConfigError: a time that does not parse (naming its flag), or ``since`` not before ``until``.

    Example:
        >>> window_between("2026-12-01", None).since.isoformat()
        '2026-12-01T00:00:00+00:00'
        >>> window_between("2026-12-02", "2026-12-01")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: --since 2026-12-02T00:00:00+00:00 is not before --until 2026-12-01T00:00:00+00:00
    """
    def when(flag: str, text: str | None) -> datetime | None:
        if text is None:
            return None
        try:
            return parse_time(text)
        except ConfigError as err:
            raise ConfigError(f"--{flag} {err}") from None

    window = Window(when("since", since), when("until", until))
    if window.since is not None and window.until is not None and window.since >= window.until:
        raise ConfigError(f"--since {window.since.isoformat()} is not before --until {window.until.isoformat()}")
    return window


def iso(when: datetime) -> str:
    """An aware time as the ISO 8601 text with ``Z`` the backends' query parameters take.

    Example:
        >>> iso(datetime(2026, 12, 1, 8, 30, tzinfo=UTC))
        '2026-12-01T08:30:00.000000Z'
    """
    return when.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
