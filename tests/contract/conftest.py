"""Fixtures for the contract tests: one factory per queue backend (SQLite file, real Redis).

The Redis backend needs the server at ``REDIS_URL`` (default 127.0.0.1:6379); when it is
missing the tests fail (they never skip). Each test gets its own key prefix and deletes
its keys at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from collector.store.redis.store import RedisStore
from collector.store.sqlite.store import SqliteStore

REDIS_URL = os.environ.get("TRACESCORE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

StoreFactory = Callable[..., Awaitable[Any]]


@pytest.fixture(params=["sqlite", "redis"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """``await make_store(**options)`` opens a started store of the parametrized backend."""
    opened: list[Any] = []

    async def factory(**options: Any) -> Any:
        if request.param == "sqlite":
            store: Any = SqliteStore(str(tmp_path / f"q{len(opened)}.db"), **options)
            store.test_path = str(tmp_path / f"q{len(opened)}.db")  # for a second connection (dead letters)
        else:
            prefix = f"test-{uuid.uuid4().hex[:12]}:"
            store = RedisStore(REDIS_URL, key_prefix=prefix, block_ms=0, **options)
            await store.client.ping()  # fail loudly when Redis is missing
        await store.start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        if isinstance(store, RedisStore):
            await store.delete_all()
        await store.shutdown()
