"""``tracescore status [URL...]``: a live view of a running daemon or a scale-out group.

Each URL is a daemon's HTTP listener (default ``http://127.0.0.1:4318``); its ``/status``
answers with the snapshots of the replicas it knows (itself; on Redis, every live replica
of its group). The snapshots of all URLs are merged (`collector.status.group`) and drawn,
refreshed every ``--interval`` seconds, until Ctrl-C. ``--once`` prints one view and exits;
``--format json`` prints it as JSON. When the daemons require a bearer token, give it with
``--token`` or ``TRACESCORE_TOKEN``. Exit codes: 0 shown, 1 no URL answered, 2 refused (401).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import aiohttp
from rich.console import Console
from rich.live import Live

from collector.commands.arguments.status import DEFAULT_URL
from collector.status.group import merge
from collector.status.view import render


def status_url(url: str) -> str:
    """The ``/status`` URL of a daemon given as a URL or ``HOST:PORT``.

    Example:
        >>> status_url("127.0.0.1:4318"), status_url("https://ts.example:4318/")
        ('http://127.0.0.1:4318/status', 'https://ts.example:4318/status')
    """
    base = url if "://" in url else f"http://{url}"
    return base.rstrip("/").removesuffix("/status") + "/status"


class Refused(Exception):
    """A daemon answered 401: the token is missing or wrong."""


async def fetch(session: aiohttp.ClientSession, urls: Sequence[str], token: str | None) -> tuple[
        list[dict[str, Any]], list[str]]:
    """The snapshots every URL answered with, and a problem line per URL that did not.

    Raises:
        Refused: a daemon refused the token.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def one(url: str) -> list[dict[str, Any]] | str:
        try:
            async with session.get(status_url(url), headers=headers) as resp:
                if resp.status == 401:
                    raise Refused(f"{url}: 401 unauthorized (give --token or TRACESCORE_TOKEN)")
                if resp.status != 200:
                    return f"{url}: HTTP {resp.status}"
                return list((await resp.json())["replicas"])
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as err:
            return f"{url}: {type(err).__name__}: {err}"

    snapshots: list[dict[str, Any]] = []
    problems: list[str] = []
    for answer in await asyncio.gather(*(one(u) for u in urls)):
        if isinstance(answer, str):
            problems.append(answer)
        else:
            snapshots.extend(answer)
    return snapshots, problems


async def _watch(args: argparse.Namespace, urls: list[str], token: str | None) -> int:
    timeout = aiohttp.ClientTimeout(total=max(2.0, args.interval * 2))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        snapshots, problems = await fetch(session, urls, token)
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
        console = Console()
        with Live(console=console, auto_refresh=False, screen=False) as live:
            while True:
                note = "  ".join(problems)
                live.update(render(merge(snapshots), f"from {' '.join(urls)} {note}".rstrip()), refresh=True)
                await asyncio.sleep(args.interval)
                snapshots, problems = await fetch(session, urls, token)


def run(args: argparse.Namespace) -> int:
    """Show the status; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(urls=["127.0.0.1:1"], token=None, once=True, format="json", interval=0.5))
        1
    """
    urls = list(args.urls) or [DEFAULT_URL]
    token = args.token or os.environ.get("TRACESCORE_TOKEN") or None
    try:
        return asyncio.run(_watch(args, urls, token))
    except Refused as err:
        print(f"tracescore: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
