"""``tracescore inspect --from URL``: the traces already in Phoenix, MLflow or Langfuse, read
as ``score --from`` reads them (`collector.receive.pull`: the same URLs, window, filter and
credentials), for ``inspect`` to print their runs, sessions or explanations like a file's.

At most ``--limit`` traces are read (the window's oldest first where the backend can sort);
when the window holds more, `Pulled.more` says so and ``inspect`` tells how to see the rest.
A progress bar (stderr, on a terminal) counts the traces read.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, field

from rich.console import Console

from adapters import AssembledTrace
from collector.commands.progress_bar import progress
from collector.config import load_config
from collector.receive.pull import (
    Source,
    Window,
    client_for,
    open_puller,
    parse_source,
    window_between,
)
from collector.receive.pull.client import JsonClient
from collector.receive.pull.page import read_ahead

__all__ = ["Pulled", "pull_traces"]


@dataclass
class Pulled:
    """What ``--from`` read: the traces, the source (credentials masked), whether the window holds
    more than ``--limit``, and the traces the backend listed without giving their spans."""

    source: str
    traces: list[AssembledTrace] = field(default_factory=list)
    more: bool = False
    missing: int = 0

    def summary(self, limit: int) -> str:
        """Where the traces came from, for ``inspect``'s summary line.

        Example:
            >>> Pulled("phoenix+http://h:6006/bot", more=True).summary(2)
            'read from phoenix+http://h:6006/bot; stopped at --limit 2: the window holds more (narrow it with --since and --until, or raise --limit)'
        """
        text = f"read from {self.source}"
        if self.missing:
            text += f"; {self.missing} trace(s) listed without their spans"
        if self.more:
            text += (f"; stopped at --limit {limit}: the window holds more (narrow it with --since and --until, "
                     "or raise --limit)")
        return text


def pull_traces(args: argparse.Namespace, err: Console) -> Pulled:
    """Read the traces of ``args.source`` in the ``--since``/``--until`` window (``--filter``,
    ``--page-size``, ``--limit``; credentials from ``--config``'s ``[sinks.*]``, else the
    backend's usual variables).

    Raises:
        collector.common.errors.ConfigError: a bad URL, time or configuration (nothing was asked).
        collector.common.errors.PullError: the backend refused or failed (naming the URL, credentials masked).
    """
    source = parse_source(args.source)
    window = window_between(getattr(args, "since", None), getattr(args, "until", None))
    config = load_config(getattr(args, "config", None), secrets=False)  # only the backend's own key is read
    client = client_for(source, config.sinks)
    limit = getattr(args, "limit", None) or 1000
    return asyncio.run(_read(client, source, window, args, limit, err))


async def _read(client: JsonClient, source: Source, window: Window, args: argparse.Namespace, limit: int,
                err: Console) -> Pulled:
    pulled = Pulled(str(source))
    async with client:
        puller = open_puller(source, client, window, getattr(args, "filter", None),
                             getattr(args, "page_size", None))
        await puller.check()
        with progress(err) as bar:
            task = bar.add_task(f"reading {source.backend}", total=None)
            async for page in read_ahead(puller.pages(None)):
                room = limit - len(pulled.traces)
                pulled.traces.extend(page.traces[:room])
                pulled.missing += page.missing
                bar.update(task, advance=min(room, len(page.traces)), total=page.total)
                if len(pulled.traces) >= limit:
                    pulled.more = len(page.traces) > room or page.next is not None
                    break
    return pulled
