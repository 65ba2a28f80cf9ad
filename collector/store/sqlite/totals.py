"""The deployment's totals in the SQLite file (`collector.store.totals`): the ``totals`` table,
field -> amount. Functions of a connection, run inside the store's transactions: a settlement
adds its tally in its own transaction (`collector.store.sqlite.jobs`), the judge ledger each
settled judge call."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping


def add_totals(db: sqlite3.Connection, tally: Mapping[str, float]) -> None:
    """Add a tally (field -> amount) to the totals.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> add_totals(db, {"a": 1.0}); add_totals(db, {"a": 2.0, "b": 0.5})
        >>> read_totals(db)
        {'a': 3.0, 'b': 0.5}
    """
    db.executemany("INSERT INTO totals(field, amount) VALUES (?, ?)"
                   " ON CONFLICT(field) DO UPDATE SET amount = amount + excluded.amount",
                   [(name, float(amount)) for name, amount in tally.items() if amount])


def read_totals(db: sqlite3.Connection) -> dict[str, float]:
    """Every total (field -> amount)."""
    return {name: float(amount) for name, amount in db.execute("SELECT field, amount FROM totals")}
