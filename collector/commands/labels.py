"""``tracescore labels pull|list|import`` (SPEC §11), beside a running daemon.

``pull`` reads every ``[labels] from`` source now, from its stored cursor, under the
deployment's pull lease (a daemon pulling at that moment makes it wait, up to
`LEASE_WAIT_S`); ``list`` prints the kept labels newest first, with the reason a label cannot
be read as a verdict of its scorer; ``import FILE.jsonl`` keeps a file's labels, or none of
them when a line is bad (its line number is printed). Exit codes: 0 done; 1 a source failed
(``pull``: the others were pulled), the store cannot be reached or the lease stayed taken;
2 a bad configuration or a bad file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from datetime import UTC, datetime

from collector.commands.dead_letters import unreachable
from collector.commands.label_context import Deployment, deployment
from collector.commands.label_store import open_label_store_made
from collector.commands.report import report_config_error
from collector.common.errors import ConfigError
from collector.common.labels import IMPORTED, Label
from collector.status.verdicts import Unreadable, read_label, rule_for
from collector.store.labels_interface import LabelStoreAdmin

LEASE_WAIT_S = 30.0
"""How long ``labels pull`` waits for a pull in progress elsewhere to finish."""


def label_line(label: Label, problem: str | None) -> str:
    """One label as ``labels list`` prints it.

    Example:
        >>> label_line(Label("Tone", "ab" * 16, "cd" * 8, None, 0.0, "phoenix", "ana", "rude", 0.0), None)
        '1970-01-01 00:00 UTC  Tone  span cdcdcdcdcdcdcdcd  0.0  phoenix/ana  rude'
        >>> label_line(Label("Tone", "", None, "chat-1", "meh", "file"), "not a verdict")
        '1970-01-01 00:00 UTC  Tone  session chat-1  "meh"  file/-  UNREADABLE: not a verdict'
    """
    when = datetime.fromtimestamp(label.at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    kind, _, item = label.item.partition(":")
    tail = f"UNREADABLE: {problem}" if problem else (label.rationale or "")
    return f"{when}  {label.name}  {kind} {item}  {json.dumps(label.value)}  {label.source}/{label.annotator or '-'}  {tail}".rstrip()


async def _pull(found: Deployment, store: LabelStoreAdmin) -> int:
    from collector.receive.labels import label_readers
    from collector.receive.labels.puller import LabelPuller

    lab = found.config.labels
    if not lab.sources:
        print("tracescore: [labels] from names no source to pull (phoenix, mlflow, langfuse)", file=sys.stderr)
        return 2
    puller = LabelPuller(store, label_readers(found.config), sorted(found.rules), since_s=lab.since_s,
                         poll_s=lab.poll_s, holder=f"labels-pull:{socket.gethostname()}:{os.getpid()}")
    deadline = time.monotonic() + LEASE_WAIT_S
    while (record := await puller.pull()) is None:
        if time.monotonic() > deadline:
            print(f"tracescore: another process of this deployment has been pulling labels for over "
                  f"{LEASE_WAIT_S:g} s; try again later", file=sys.stderr)
            return 1
        await asyncio.sleep(1.0)
    for source in record.sources:
        print(f"{source.source}: {source.read} label(s) read, {source.added} new or changed"
              + (f"; stopped: {source.error} (retried at the next pull)" if source.error else ""))
    return 1 if any(source.error for source in record.sources) else 0


async def _list(found: Deployment, store: LabelStoreAdmin, args: argparse.Namespace) -> int:
    name = found.name_of(args.scorer) if args.scorer else None
    labels = await store.labels(name)
    unreadable = 0
    for label in labels:
        reading = read_label(label.value, rule_for(label.name, found.rules))
        problem = reading.reason if isinstance(reading, Unreadable) else None
        unreadable += problem is not None
        if args.json:
            print(json.dumps({**label.to_dict(), "unreadable": problem}))
        else:
            print(label_line(label, problem))
    if not args.json:
        print(f"{len(labels)} label(s){f' of {name}' if name else ''}; {unreadable} cannot be read as a verdict")
    return 0


async def _import(store: LabelStoreAdmin, path: str, labels: list[Label]) -> int:
    added = await store.put_labels(labels)
    await store.set_label_cursor(IMPORTED, str(time.time()))  # the daemons measure agreement again
    print(f"imported {len(labels)} label(s) from {path}: {added} new or changed")
    return 0


def read_file(path: str) -> list[Label] | None:
    """The labels of ``labels import FILE``, or None after printing why none can be imported."""
    from collector.receive.labels import LabelFileError, read_label_file

    try:
        return read_label_file(path)
    except LabelFileError as err:
        print(f"tracescore: {err}; nothing of {path} was imported", file=sys.stderr)
    except OSError as err:
        print(f"tracescore: cannot read {path}: {err.strerror or err}", file=sys.stderr)
    return None


async def _act(args: argparse.Namespace, found: Deployment, labels: list[Label] | None) -> int:
    store = await open_label_store_made(found.config) if args.action != "list" else found.store()
    try:
        if args.action == "pull":
            return await _pull(found, store)
        if labels is not None:
            return await _import(store, args.file, labels)
        return await _list(found, store, args)
    finally:
        await store.close()


def run(args: argparse.Namespace) -> int:
    """Pull, list or import; see the module docstring for exit codes.

    Example:
        >>> run(argparse.Namespace(config="/nonexistent/ts.toml", action="list", scorer=None, json=False))
        2
    """
    try:
        found = deployment(args, secrets=args.action == "pull")
    except ConfigError as err:
        report_config_error(err)
        return 2
    labels = read_file(args.file) if args.action == "import" else None
    if args.action == "import" and labels is None:
        return 2
    try:
        return asyncio.run(_act(args, found, labels))
    except unreachable(found.config) as err:
        print(f"tracescore: cannot reach the store at {found.config.queue.display_url}: {err}", file=sys.stderr)
        return 1
