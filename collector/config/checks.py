"""Checks of configuration values that pydantic's types cannot express: listen addresses,
export endpoints, backend URLs (and whether one reaches the daemon's own listeners: `check_destinations`,
at load and again at start with the ports actually bound) and Redis URLs. A failed check raises
`KeyProblem`, which names the key."""

from __future__ import annotations

import functools
import inspect
import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from collector.config.redis_url import parse_redis_url


class KeyProblem(ValueError):
    """A bad value found by a check across keys: ``key`` is its dotted path from the root.

    Pydantic reports a model-level check at the model's own path; this carries the path of
    the key at fault, so the message names it (``receiver.tls_key_file: ...``).

    Example:
        >>> KeyProblem("export.endpoint", "is this daemon's own receiver").key
        'export.endpoint'
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?)$")


def valid_host(host: str) -> bool:
    """Whether ``host`` is a host name, an IPv4 address or a bracketed IPv6 address.

    Example:
        >>> valid_host("jaeger"), valid_host("10.0.0.1"), valid_host("[::1]"), valid_host("htp//127.0.0.1")
        (True, True, True, False)
    """
    return bool(_HOST.match(host))


def valid_port(port: str, *, allow_zero: bool = False) -> bool:
    """Whether ``port`` is a TCP port number: 1..65535 (0 too where it picks a free port).

    Example:
        >>> valid_port("4317"), valid_port("99999"), valid_port("0"), valid_port("0", allow_zero=True)
        (True, False, False, True)
    """
    return port.isdigit() and (0 if allow_zero else 1) <= int(port) <= 65535


def check_receiver_endpoint(value: str, key: str, section: str = "receiver") -> None:
    """A listen address (``section.key``) must be ``HOST:PORT`` (port 1..65535, or 0: any free
    port) or empty (disabled).

    Example:
        >>> check_receiver_endpoint("127.0.0.1:4317", "grpc_endpoint")
        >>> check_receiver_endpoint("localhost", "grpc_endpoint")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: must be HOST:PORT or empty, got 'localhost'
        >>> check_receiver_endpoint("0.0.0.0:99999", "http_endpoint")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: port 99999 is outside 1..65535
    """
    if not value:
        return
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not valid_host(host):
        raise KeyProblem(f"{section}.{key}", f"must be HOST:PORT or empty, got {value!r}")
    if not valid_port(port, allow_zero=True):
        raise KeyProblem(f"{section}.{key}", f"port {port} is outside 1..65535")


def url_problem(url: str, schemes: tuple[str, ...] = ("http", "https"), *, bare: bool = False) -> str | None:
    """What is wrong with a URL that must be ``scheme://host[:port][/path]`` (None: nothing).

    ``bare`` also accepts ``HOST:PORT`` without a scheme (an OTLP gRPC endpoint).

    Example:
        >>> url_problem("http://127.0.0.1:14317") is None, url_problem("backend:4317", bare=True) is None
        (True, True)
        >>> url_problem("htp//127.0.0.1:14317", bare=True)
        "must be http(s)://HOST[:PORT][/path] or HOST:PORT, got 'htp//127.0.0.1:14317'"
        >>> url_problem("http://backend:99999")
        "port 99999 is outside 1..65535 in 'http://backend:99999'"
    """
    shape = "/".join(schemes) if len(schemes) > 2 else f"{schemes[0]}(s)" if schemes == ("http", "https") else schemes[0]
    expected = f"must be {shape}://HOST[:PORT][/path]{' or HOST:PORT' if bare else ''}, got {url!r}"
    if any(c.isspace() for c in url):
        return expected
    if "://" not in url:
        host, sep, port = url.rpartition(":")
        if not (bare and sep and port.isdigit() and valid_host(host)):
            return expected
        return None if valid_port(port) else f"port {port} is outside 1..65535 in {url!r}"
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    host, sep, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    if parts.scheme not in schemes or not valid_host(host if sep else netloc):
        return expected
    if sep and not valid_port(port):
        return f"port {port} is outside 1..65535 in {url!r}"
    return None


_SINK_APIS = {"phoenix": ("Phoenix", ("v1",), "/v1/span_annotations"),
              "mlflow": ("MLflow", ("api/2.0", "api/3.0", "ajax-api", "v1/traces"), "/api/3.0/mlflow/traces/..."),
              "langfuse": ("Langfuse", ("api/public",), "/api/public/scores")}
"""Per sink backend: its name, the paths its API (and OTLP receiver) begin with below the
server's base URL, and the path a sink adds."""


def sink_base_problem(backend: str, url: str) -> str | None:
    """What is wrong with a sink URL that goes on into the backend's API (``http://phoenix:6006/v1/traces``,
    Phoenix's OTLP endpoint, where the server's base URL belongs: every annotation would be
    answered 405), with the base URL to write instead; None for a base URL (a path that does not
    reach into the API is kept: a backend served under a prefix behind a proxy).

    Example:
        >>> sink_base_problem("phoenix", "http://127.0.0.1:6006/v1/traces")
        "must be the Phoenix server's base URL, without the API path '/v1/traces' (the sink adds /v1/span_annotations): write 'http://127.0.0.1:6006'"
        >>> sink_base_problem("phoenix", "https://example.com/phoenix") is None, sink_base_problem("phoenix", "http://p:6006/") is None
        (True, True)
        >>> sink_base_problem("mlflow", "http://u:pw@mlflow:5000/ml/api/2.0/mlflow").split(": write ")[1]
        "'http://u:***@mlflow:5000/ml'"
    """
    name, roots, adds = _SINK_APIS[backend]
    parts = urlsplit(url)
    segments = parts.path.rstrip("/").split("/")
    at = next((i for i in range(1, len(segments)) for root in roots
               if segments[i:i + root.count("/") + 1] == root.split("/")), None)
    if at is None:
        return None
    base = f"{parts.scheme}://{parts.netloc}{'/'.join(segments[:at])}"
    return (f"must be the {name} server's base URL, without the API path {'/' + '/'.join(segments[at:])!r} "
            f"(the sink adds {adds}): write {without_password(base)!r}")


def endpoint_host_port(endpoint: str) -> str:
    """The ``host:port`` an export endpoint URL (or bare ``host:port``) points at.

    Example:
        >>> endpoint_host_port("http://127.0.0.1:4318/v1/traces"), endpoint_host_port("backend:4317")
        ('127.0.0.1:4318', 'backend:4317')
    """
    return endpoint.split("://", 1)[-1].split("/", 1)[0]


_SIGNAL_PATHS = ("/v1/traces", "/v1/logs", "/v1/metrics")


def http_url(endpoint: str, path: str) -> str:
    """The OTLP/HTTP URL of one signal (``path``: ``/v1/traces``, ``/v1/logs`` or ``/v1/metrics``).

    The endpoint is a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is in the OpenTelemetry
    specification: the signal's path is appended to whatever path it has (Langfuse's
    ``.../api/public/otel``). An endpoint that already ends in a signal path is taken as
    that signal's URL, and the other signals use the same base.

    Example:
        >>> http_url("http://h:4318", "/v1/traces"), http_url("http://h/api/public/otel/", "/v1/traces")
        ('http://h:4318/v1/traces', 'http://h/api/public/otel/v1/traces')
        >>> http_url("http://h:6006/v1/traces", "/v1/traces"), http_url("http://h:6006/v1/traces", "/v1/logs")
        ('http://h:6006/v1/traces', 'http://h:6006/v1/logs')
    """
    base = (endpoint if "://" in endpoint else f"http://{endpoint}").rstrip("/")
    for signal_path in _SIGNAL_PATHS:
        if base.endswith(signal_path):
            base = base[: -len(signal_path)]
            break
    return f"{base}{path}"


def without_password(url: str) -> str:
    """``url`` fit for a log line or ``check``'s output: a password in it replaced by ``***``
    (in the user info, and any ``...password=`` query option, as Sentinel URLs carry).

    Example:
        >>> without_password("redis://:s3cret@redis:6379/0"), without_password("https://user:pw@backend:4318/otel")
        ('redis://:***@redis:6379/0', 'https://user:***@backend:4318/otel')
        >>> without_password("redis+sentinel://:pw@h1:26379,h2:26379/primary/0?sentinel_password=spw&db=0")
        'redis+sentinel://:***@h1:26379,h2:26379/primary/0?sentinel_password=***&db=0'
        >>> without_password("backend:4317")
        'backend:4317'
    """
    url = _QUERY_PASSWORD.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{hosts}{slash}{path}"


_QUERY_PASSWORD = re.compile(r"([?&][A-Za-z_]*password=)[^&#]*")


def check_redis_url(url: str) -> None:
    """Refuse what redis-py would refuse only when connecting: a bad scheme, node list, port,
    database or option (`collector.config.redis_url` says which URLs name what).

    Example:
        >>> check_redis_url("redis://127.0.0.1:6379/0")
        >>> check_redis_url("redis+sentinel://h1:26379,h2:26379/primary/0?sentinel_password=pw")
        >>> check_redis_url("redis://127.0.0.1:6379/zero")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: the database must be a number, got 'zero'
        >>> check_redis_url("redis+cluster://h1:7000,h2:notaport")
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: not a valid Redis URL: port 'notaport' is not in 1..65535 in 'h2:notaport'
    """
    # Imported here: only a redis:// queue.url needs redis-py, loading any other config does not.
    from redis.asyncio.connection import Connection, parse_url

    try:
        target = parse_redis_url(url)
        options = parse_url(target.url)
    except ValueError as err:
        raise KeyProblem("queue.url", f"not a valid Redis URL: {err}") from None
    database = urlsplit(target.url).path.strip("/")
    if database and not database.isdigit():
        raise KeyProblem("queue.url", f"the database must be a number, got {database!r}")
    connection_class: Any = options.get("connection_class", Connection)
    unknown = sorted(set(options) - {"connection_class"} - _connection_options(connection_class))
    if unknown:
        raise KeyProblem("queue.url", f"options Redis does not know: {', '.join(unknown)}")


@functools.cache
def _connection_options(connection_class: type) -> frozenset[str]:
    """The keyword options a redis-py connection class takes (its __init__ and its bases')."""
    names: set[str] = set()
    for klass in connection_class.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(p.name for p in inspect.signature(init).parameters.values()
                         if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return frozenset(names - {"self"})


def _local_addresses() -> set[str]:
    """This host's own addresses: loopback, wildcard and whatever its host name resolves to."""
    addresses = {"127.0.0.1", "::1", "0.0.0.0", "::"}
    for name in {socket.gethostname(), socket.getfqdn()}:
        addresses |= _resolve(name)
    return addresses


def _resolve(host: str) -> set[str]:
    """The IP addresses of ``host`` (itself when it is one; empty when it does not resolve)."""
    host = host.strip("[]")
    try:
        return {str(ipaddress.ip_address(host))}
    except ValueError:
        pass
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return set()


def _host_port(target: str) -> tuple[str, int] | None:
    """Host and port of a URL or ``HOST:PORT`` (the scheme's default port when none is given)."""
    parts = urlsplit(target if "://" in target else f"//{target}")
    try:
        port = parts.port
    except ValueError:
        return None
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def own_listener(target: str, listeners: Iterable[str]) -> str | None:
    """The listener (``HOST:PORT``) of this daemon that ``target`` (a URL or ``HOST:PORT``) reaches,
    or None: sending there would feed the daemon its own output.

    Host names are resolved: ``localhost``, any 127.0.0.0/8 address, ``::1``, ``0.0.0.0`` and
    the host's own addresses all reach a listener bound to a loopback or wildcard address on
    the same port. Only targets on a listener's port are resolved at all.

    Example:
        >>> own_listener("http://localhost:4318/v1/traces", ["127.0.0.1:4317", "127.0.0.1:4318"])
        '127.0.0.1:4318'
        >>> own_listener("http://[::1]:4317", ["0.0.0.0:4317"]), own_listener("http://127.0.0.1:6006", ["127.0.0.1:4317"])
        ('0.0.0.0:4317', None)
    """
    aim = _host_port(target)
    if aim is None:
        return None
    host, port = aim
    local: set[str] | None = None
    for listener in listeners:
        bound = _host_port(listener) if listener else None
        if bound is None or bound[1] != port:
            continue
        target_ips, listener_ips = _resolve(host), _resolve(bound[0])
        if target_ips & listener_ips:
            return listener
        if local is None:
            local = _local_addresses()
        target_local = any(ipaddress.ip_address(ip).is_loopback or ip in local for ip in target_ips)
        listener_everywhere = any(ipaddress.ip_address(ip).is_unspecified for ip in listener_ips)
        listener_loopback = any(ipaddress.ip_address(ip).is_loopback for ip in listener_ips)
        target_loopback = any(ipaddress.ip_address(ip).is_loopback or ipaddress.ip_address(ip).is_unspecified
                              for ip in target_ips)
        if target_local and (listener_everywhere or (listener_loopback and target_loopback)):
            return listener
    return None


def check_destinations(targets: dict[str, str], listeners: list[str]) -> None:
    """Refuse a destination (export endpoint or sink URL, by dotted key) that reaches one of
    the daemon's own ``listeners`` (``HOST:PORT``): the daemon would receive its own output
    for ever (SPEC §5, "never a loop"). Run at load with the configured listeners and at
    start with the bound ones (a port 0 is only known then).

    Raises:
        KeyProblem: naming the first such key.

    Example:
        >>> check_destinations({"export.endpoint": "http://backend:4317"}, ["127.0.0.1:4317"])
        >>> check_destinations({"export.endpoint": "http://localhost:4318"}, ["127.0.0.1:4317", "127.0.0.1:4318"])
        Traceback (most recent call last):
        ...
        collector.config.checks.KeyProblem: http://localhost:4318 is this daemon's own listener 127.0.0.1:4318: it would receive its own output for ever
    """
    for key, url in targets.items():
        listener = own_listener(url, listeners) if url else None
        if listener is not None:
            raise KeyProblem(key, f"{url} is this daemon's own listener {listener}: "
                                  "it would receive its own output for ever")
