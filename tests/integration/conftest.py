"""Integration-test fixtures: BlockBuster on for the daemon's own code (see `blocking`), the
store deployments the outage tests run on, and the ports `free_port` holds, released after each test."""

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from blocking import blockbuster
from daemon_harness import delete_redis_keys, release_ports

REDIS_URL = "redis://127.0.0.1:6379/0"

__all__ = ["blockbuster", "deployment", "held_ports"]


@pytest.fixture(autouse=True)
def held_ports() -> Iterator[None]:
    """Release the ports `daemon_harness.free_port` held for the test, once its other fixtures
    (daemons, backends) are torn down: an autouse fixture is set up first, so torn down last."""
    yield
    release_ports()


@pytest.fixture(params=["sqlite", "redis", "redis-roles"])
async def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, bool]]:
    """The ``[queue]`` table of a test's daemons, and whether receiver and worker run as
    separate processes (``--role``); a Redis deployment's keys are deleted afterwards."""
    if request.param == "sqlite":
        yield f'url = "sqlite:///{tmp_path / "queue.db"}"', False
        return
    prefix = f"test-deployment-{uuid.uuid4().hex[:12]}:"
    yield f'url = "{REDIS_URL}"\nkey_prefix = "{prefix}"', request.param == "redis-roles"
    await delete_redis_keys(REDIS_URL, prefix)
