"""``tracescore status [URL...]``: a live view of a running daemon or a scale-out group.

Each URL is a daemon's HTTP listener; given none, the command reads the listener that
``--config FILE`` names (``[receiver] http_endpoint``, a wildcard address reached on
127.0.0.1), else ``http://127.0.0.1:4318``. Its ``/status`` answers with the snapshots of
the replicas it knows (itself; on Redis, every live replica of its group). The snapshots of all URLs are merged (`collector.status.group`) and drawn,
refreshed every ``--interval`` seconds, until Ctrl-C. ``--once`` prints one view and exits;
``--format json`` prints it as JSON. When the daemons require a bearer token, give it with
``--token`` or ``TRACESCORE_TOKEN`` (else the ``auth_token`` of ``--config``). Exit codes: 0
shown, 1 no URL answered, 2 refused (401) or a configuration without an HTTP listener.

The command starts fast: it imports no asyncio, aiohttp, redis-py or daemon code, and reads
the configuration (pydantic) only when ``--config`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rich.console import Console

from collector.commands.arguments.status import DEFAULT_URL
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.status.group import merge
from collector.status.view import render

if TYPE_CHECKING:
    from collector.config import ReceiverConfig

WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})
"""Listen addresses meaning every interface: the daemon is reached on 127.0.0.1 there."""


def status_url(url: str) -> str:
    """The ``/status`` URL of a daemon given as a URL or ``HOST:PORT``.

    Example:
        >>> status_url("127.0.0.1:4318"), status_url("https://ts.example:4318/")
        ('http://127.0.0.1:4318/status', 'https://ts.example:4318/status')
    """
    base = url if "://" in url else f"http://{url}"
    return base.rstrip("/").removesuffix("/status") + "/status"


def listener_url(http_endpoint: str, tls: bool = False) -> str:
    """The URL of a daemon's HTTP listener from its ``[receiver] http_endpoint``: a wildcard
    address (0.0.0.0, ::) is reached on 127.0.0.1.

    Raises:
        ConfigError: no HTTP listener (``""``), or port 0 (any free port: only the daemon knows which).

    Example:
        >>> listener_url("0.0.0.0:14318"), listener_url("[::]:4318", tls=True), listener_url("[::1]:4318")
        ('http://127.0.0.1:14318', 'https://127.0.0.1:4318', 'http://[::1]:4318')
        >>> listener_url("")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: receiver.http_endpoint is empty: the daemon has no HTTP listener to read /status from; give its URL
    """
    if not http_endpoint:
        raise ConfigError("receiver.http_endpoint is empty: the daemon has no HTTP listener to read /status from;"
                          " give its URL")
    host, _, port = http_endpoint.rpartition(":")
    if port == "0":
        raise ConfigError(f"receiver.http_endpoint is {http_endpoint}: the daemon listens on a port chosen at start;"
                          " give its URL")
    return f"{'https' if tls else 'http'}://{'127.0.0.1' if host in WILDCARDS else host}:{port}"


def read_receiver(path: str) -> ReceiverConfig:
    """The ``[receiver]`` section of the configuration at ``path`` (imports pydantic: only for ``--config``).

    Raises:
        ConfigError: the file is missing, not TOML, or the section does not validate.
    """
    from collector.config import load_receiver

    return load_receiver(path)


def targets(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The URLs to read and the bearer token to send: the URLs given, else the listener
    ``--config`` names, else `DEFAULT_URL`; ``--token``, else ``$TRACESCORE_TOKEN``, else
    the configuration's ``auth_token``.

    Raises:
        ConfigError: the configuration is unreadable, names no usable HTTP listener while no
            URL was given, or names its token by a variable this shell does not set.

    Example:
        >>> targets(argparse.Namespace(urls=["b:4318"], config=None, token="t"))
        (['b:4318'], 't')
        >>> targets(argparse.Namespace(urls=[], config=None, token="t"))
        (['http://127.0.0.1:4318'], 't')
    """
    urls = list(args.urls)
    token = args.token or os.environ.get("TRACESCORE_TOKEN") or None
    if args.config is not None:
        receiver = read_receiver(args.config)
        urls = urls or [listener_url(receiver.http_endpoint, tls=bool(receiver.tls_cert_file))]
        token = token or receiver.token()
    return urls or [DEFAULT_URL], token


class Refused(Exception):
    """A daemon answered 401: the token is missing or wrong."""


def fetch_one(url: str, token: str | None, timeout: float) -> list[dict[str, Any]] | str:
    """The snapshots one daemon answered with, or a problem line (the standard library's HTTP
    client: the command starts without importing an async HTTP stack).

    Raises:
        Refused: the daemon refused the token.

    Example:
        >>> fetch_one("127.0.0.1:1", None, 2.0).startswith("127.0.0.1:1: URLError:")
        True
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(status_url(url), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310 (http(s) only)
            return list(json.loads(resp.read())["replicas"])
    except urllib.error.HTTPError as err:
        if err.code == 401:
            raise Refused(f"{url}: 401 unauthorized (give --token or TRACESCORE_TOKEN)") from None
        return f"{url}: HTTP {err.code}"
    except (urllib.error.URLError, OSError, ValueError, KeyError) as err:
        return f"{url}: {type(err).__name__}: {err}"


def fetch(urls: Sequence[str], token: str | None, timeout: float) -> tuple[list[dict[str, Any]], list[str]]:
    """The snapshots every URL answered with (asked at once), and a problem line per URL that did not.

    Raises:
        Refused: a daemon refused the token.
    """
    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        answers = list(pool.map(lambda url: fetch_one(url, token, timeout), urls))
    snapshots: list[dict[str, Any]] = []
    problems: list[str] = []
    for answer in answers:
        if isinstance(answer, str):
            problems.append(answer)
        else:
            snapshots.extend(answer)
    return snapshots, problems


def _watch(args: argparse.Namespace, urls: list[str], token: str | None) -> int:
    timeout = max(2.0, args.interval * 2)
    snapshots, problems = fetch(urls, token, timeout)
    if args.once:
        for problem in problems:
            print(f"tracescore: {problem}", file=sys.stderr)
        if not snapshots:
            return 1
        view = merge(snapshots)
        if args.format == "json":
            print(json.dumps(view, indent=2))
        else:
            console = Console()
            if not console.is_terminal:  # a file or a pipe: wide enough for every column
                console = Console(width=200)
            console.print(render(view, f"from {' '.join(urls)}"))
        return 0
    from rich.live import Live

    console = Console()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        while True:
            note = "  ".join(problems)
            live.update(render(merge(snapshots), f"from {' '.join(urls)} {note}".rstrip()), refresh=True)
            time.sleep(args.interval)
            snapshots, problems = fetch(urls, token, timeout)


def run(args: argparse.Namespace) -> int:
    """Show the status; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(urls=["127.0.0.1:1"], config=None, token=None, once=True, format="json",
        ...                        interval=0.5))
        1
    """
    try:
        urls, token = targets(args)
    except ConfigError as err:
        report_config_error(err)
        return 2
    try:
        return _watch(args, urls, token)
    except Refused as err:
        print(f"tracescore: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
