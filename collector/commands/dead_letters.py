"""``tracescore dead-letters list | show ID | replay [ID...|--all] | purge [ID...|--all]``.

Acts on the store that ``--config FILE`` names (``queue.url``: the SQLite file or Redis),
while the daemon runs. ``list`` prints what failed (``--format json``: a JSON array of
``{"id", "scorer", "trace_id", "span_id", "error", "failed_at"}``); ``show`` prints one
dead letter whole: its error, the full traceback and the scorer's partial result;
``replay`` re-queues jobs under their own idempotency keys (a running daemon scores each
once); ``purge`` deletes dead letters. Exit codes: 0 done, 1 an ID not found, 2 a bad
configuration or usage. The arguments are in `collector.commands.arguments.dead_letters`;
redis-py is imported only for a Redis store, rich only to draw a table. `open_judge_ledger`
opens the judge ledger the same way (for ``tracescore judges``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.common.types import DeadLetter
from collector.config import Config, load_config
from collector.store.interface import DeadLetterAdmin
from collector.store.judge_interface import JudgeLedgerAdmin
from collector.store.sqlite.dead_letters import SqliteDeadLetters
from collector.store.sqlite.judge_ledger import SqliteJudgeAdmin


def open_dead_letters(config: Config) -> DeadLetterAdmin:
    """The dead letters of the store ``queue.url`` names.

    Example:
        >>> from collector.config import config_from_dict
        >>> type(open_dead_letters(config_from_dict({}, env={}))).__name__
        'SqliteDeadLetters'
    """
    q = config.queue
    if q.kind == "redis":
        from collector.store.redis.conn import connect
        from collector.store.redis.dead_letters import RedisDeadLetters
        from collector.store.redis.keys import RedisKeys
        from collector.store.redis.partitioned_admin import PartitionedDeadLetters

        if q.partitions > 1:
            return PartitionedDeadLetters(connect(q.url), q.key_prefix, q.partitions, idempotency_ttl_s=q.retention_s)
        return RedisDeadLetters(connect(q.url), RedisKeys(q.key_prefix), idempotency_ttl_s=q.retention_s)
    return SqliteDeadLetters(q.sqlite_path)


def open_judge_ledger(config: Config) -> JudgeLedgerAdmin:
    """The judge ledger (budgets, breakers, parked jobs) of the store ``queue.url`` names, for
    a command beside the running daemon (``tracescore judges``); ``close()`` it after use.
    On SQLite its rates and cool-downs are this process's own (the daemon's are in memory).

    Example:
        >>> from collector.config import config_from_dict
        >>> type(open_judge_ledger(config_from_dict({}, env={}))).__name__
        'SqliteJudgeAdmin'
    """
    q = config.queue
    if q.kind == "redis":
        from collector.store.redis.conn import connect
        from collector.store.redis.judge_ledger import RedisJudgeAdmin
        from collector.store.redis.keys import RedisKeys
        from collector.store.redis.partitioned_admin import PartitionedJudgeAdmin

        if q.partitions > 1:
            return PartitionedJudgeAdmin(connect(q.url), q.key_prefix, q.partitions)
        return RedisJudgeAdmin(connect(q.url), RedisKeys(q.key_prefix))
    return SqliteJudgeAdmin(q.sqlite_path)


def unreachable(config: Config) -> tuple[type[Exception], ...]:
    """The errors that mean the store cannot be reached: Redis's connection errors (and any
    `OSError`) for a Redis store, an `OSError` for a SQLite file.

    Example:
        >>> from collector.config import config_from_dict
        >>> unreachable(config_from_dict({}, env={}))
        (<class 'OSError'>,)
    """
    if config.queue.kind == "redis":
        from collector.store.redis.conn import UNREACHABLE

        return UNREACHABLE
    return (OSError,)


def when_utc(at: float) -> str:
    """An epoch time as ``YYYY-MM-DD HH:MM:SS UTC`` (dead letters' and judges' listings)."""
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _detail(letter: DeadLetter) -> dict[str, Any]:
    return {**letter.row(), "key": letter.job.key, "scorer_version": letter.job.scorer_version,
            "error_type": letter.error_type, "message": letter.message, "attempts": letter.attempts,
            "traceback": letter.traceback, "partial": letter.partial}


def _print_list(letters: Sequence[DeadLetter], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([letter.row() for letter in letters], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    from collector.commands.layout import print_table

    table = Table(title=f"{len(letters)} dead letter(s)")
    for name in ("id", "failed at", "scorer", "trace / span", "error"):
        table.add_column(name, overflow="fold")
    for letter in letters:
        error = letter.row()["error"]
        table.add_row(letter.id, when_utc(letter.failed_at), letter.job.scorer_id,
                      f"{letter.job.run.trace_id}\n{letter.job.run.span_id}",
                      error if len(error) <= 300 else error[:299] + "… (dead-letters show ID: all of it)")
    print_table(Console(), table)


def _print_one(letter: DeadLetter, fmt: str) -> None:
    detail = _detail(letter)
    if fmt == "json":
        print(json.dumps(detail, indent=2, default=str))
        return
    for name in ("id", "scorer", "scorer_version", "trace_id", "span_id", "key", "attempts", "failed_at", "error"):
        print(f"{name}: {detail[name]}")
    print("traceback:\n" + (letter.traceback.rstrip() or "  (none kept)"))
    partial = "(none)" if letter.partial is None else json.dumps(letter.partial, indent=2, default=str)
    print("partial result:\n" + partial)


async def _act(admin: DeadLetterAdmin, args: argparse.Namespace) -> int:
    if args.action == "list":
        _print_list(await admin.letters(), args.format)
        return 0
    if args.action == "show":
        letter = next((x for x in await admin.letters() if x.id == args.id), None)
        if letter is None:
            print(f"tracescore: no dead letter {args.id}", file=sys.stderr)
            return 1
        _print_one(letter, args.format)
        return 0
    if bool(args.ids) == bool(args.all):
        print(f"tracescore: dead-letters {args.action}: give IDs or --all", file=sys.stderr)
        return 2
    ids = None if args.all else list(args.ids)
    if args.action == "replay":
        done = await admin.replay(ids)
        print(f"replayed {len(done)} dead letter(s){': ' + ' '.join(done) if done else ''}")
        missing = sorted(set(ids or ()) - set(done))
    else:
        count = await admin.purge(ids)
        print(f"purged {count} dead letter(s)")
        missing = [] if ids is None or count == len(set(ids)) else ["(some IDs)"]
    if missing:
        print(f"tracescore: no dead letter {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


async def _run(config: Config, args: argparse.Namespace) -> int:
    admin = open_dead_letters(config)
    try:
        return await _act(admin, args)
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    """Run one action; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", action="list", format="json"))
        2
    """
    try:
        config = load_config(args.config, secrets=False)  # the store only: no sink key needed
    except ConfigError as err:
        report_config_error(err)
        return 2
    try:
        return asyncio.run(_run(config, args))
    except FileNotFoundError as err:
        print(f"tracescore: {err}", file=sys.stderr)
        return 2
    except unreachable(config) as err:
        print(f"tracescore: cannot reach the store at {config.queue.display_url}: {err}", file=sys.stderr)
        return 1
