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
        collector.common.errors.ConfigError: --from jaeger+http://localhost:16686: expected phoenix+URL, mlflow+URL or langfuse+URL
    """
    backend, plus, url = text.partition("+")
    if not plus or backend not in BACKENDS:
        raise ConfigError(f"--from {mask_url(text)}: expected phoenix+URL, mlflow+URL or langfuse+URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise ConfigError(f"--from {mask_url(text)}: {err}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--from {mask_url(text)}: expected {backend}+http://host[:port]/... or {backend}+https://...")
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


def iso(when: datetime) -> str:
    """An aware time as the ISO 8601 text with ``Z`` the backends' query parameters take.

    Example:
        >>> iso(datetime(2026, 12, 1, 8, 30, tzinfo=UTC))
        '2026-12-01T08:30:00.000000Z'
    """
    return when.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
