"""What a Redis ``queue.url`` names: one server, a Sentinel-managed primary, or a Cluster (SPEC §9).

``redis://`` and ``rediss://`` name one server (or a managed endpoint that follows its
primary); ``redis+sentinel://`` and ``rediss+sentinel://`` name the sentinels and the
primary they watch; ``redis+cluster://`` and ``rediss+cluster://`` name startup nodes of a
Cluster. `parse_redis_url` splits such a URL into the nodes and an equivalent one-server
URL (``redis://user:password@first-node/db?options``) that carries the credentials,
database and connection options, so that redis-py's own URL parser reads those exactly as
it does for ``redis://``. Options only Sentinel has (``sentinel_username``,
``sentinel_password``) are taken out of the query first.

Only the standard library is imported here: the collector's store builds its clients from
the result (`collector.store.redis.conn`), the config checks validate with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

Mode = Literal["server", "sentinel", "cluster"]

SCHEMES: dict[str, tuple[Mode, bool]] = {
    "redis": ("server", False), "rediss": ("server", True), "unix": ("server", False),
    "redis+sentinel": ("sentinel", False), "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False), "rediss+cluster": ("cluster", True),
}
"""URL scheme -> (what it names, TLS)."""

SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
"""Query options of a Sentinel URL that apply to the sentinels, not to the primary."""


@dataclass(frozen=True)
class RedisUrl:
    """A parsed ``queue.url``.

    Attributes:
        mode: ``server``, ``sentinel`` or ``cluster``.
        url: a one-server URL with the credentials, database and options of ``queue.url``
            (the URL itself for ``server``; the first node's address otherwise).
        nodes: the sentinels' or the Cluster startup nodes' (host, port); empty for a server.
        service: the primary's name the sentinels know (Sentinel only).
        tls: connections use TLS.
        sentinel: ``sentinel_username`` / ``sentinel_password`` given in the query (Sentinel only).
    """

    mode: Mode
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    tls: bool = False
    sentinel: dict[str, str] = field(default_factory=dict)


def parse_redis_url(url: str) -> RedisUrl:
    """Split a Redis ``queue.url`` into what to connect to.

    Raises:
        ValueError: a scheme, node list, primary name or database redis-py could not use.

    Example:
        >>> parse_redis_url("redis://127.0.0.1:6379/0").mode
        'server'
        >>> s = parse_redis_url("redis+sentinel://u:pw@h1:26379,h2/primary/2?sentinel_password=spw&socket_timeout=3")
        >>> s.mode, s.nodes, s.service, s.url, s.sentinel
        ('sentinel', (('h1', 26379), ('h2', 26379)), 'primary', 'redis://u:pw@h1:26379/2?socket_timeout=3', {'sentinel_password': 'spw'})
        >>> c = parse_redis_url("rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001")
        >>> c.mode, c.nodes, c.url, c.tls
        ('cluster', (('10.0.0.1', 7000), ('10.0.0.2', 7001)), 'rediss://:pw@10.0.0.1:7000', True)
        >>> parse_redis_url("redis+cluster://h1:7000/3")
        Traceback (most recent call last):
        ...
        ValueError: a Cluster has only database 0 (no SELECT), got '3'
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}: use one of {', '.join(s + '://' for s in SCHEMES)}")
    mode, tls = SCHEMES[scheme.lower()]
    if mode == "server":
        return RedisUrl("server", url, tls=tls)
    parts = urlsplit(url)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    nodes = tuple(_node(text, 26379 if mode == "sentinel" else 6379) for text in hostlist.split(","))
    path = [unquote(p) for p in parts.path.split("/") if p]
    service, db = "", "0"
    if mode == "sentinel":
        if not path:
            raise ValueError("name the primary the sentinels watch: redis+sentinel://h1:26379,h2:26379/<primary>/<db>")
        service, db = path[0], (path[1] if len(path) > 1 else "0")
        if len(path) > 2:
            raise ValueError(f"expected /<primary>/<db> after the sentinels, got {parts.path!r}")
    elif path:
        if len(path) > 1 or path[0] != "0":
            raise ValueError(f"a Cluster has only database 0 (no SELECT), got {'/'.join(path)!r}")
    if not db.isdigit():
        raise ValueError(f"the database must be a number, got {db!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    sentinel = {k: v for k, v in query if k in SENTINEL_OPTIONS}
    if sentinel and mode != "sentinel":
        raise ValueError(f"{', '.join(sentinel)} applies to redis+sentinel:// URLs only")
    options = urlencode([(k, v) for k, v in query if k not in SENTINEL_OPTIONS])
    host, port = nodes[0]
    host = f"[{host}]" if ":" in host else host
    single = f"{'rediss' if tls else 'redis'}://{userinfo}{at}{host}:{port}"
    single += f"/{db}" if mode == "sentinel" else ""
    single += f"?{options}" if options else ""
    return RedisUrl(mode, single, nodes, service, tls, sentinel)


def _node(text: str, default_port: int) -> tuple[str, int]:
    """``host[:port]`` (an IPv6 host in brackets) as (host, port).

    Example:
        >>> _node("h1:7000", 6379), _node("[::1]", 26379)
        (('h1', 7000), ('::1', 26379))
    """
    if not text:
        raise ValueError("an empty host in the node list")
    if text.startswith("["):
        host, _, tail = text[1:].partition("]")
        port_text = tail.removeprefix(":")
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise ValueError(f"no host in {text!r}")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} is not in 1..65535 in {text!r}")
    return host, int(port_text)
