"""Repository-level pytest hooks.

`--doctest-modules` (pyproject) would also collect every ``conftest.py`` as a doctest
module; two test folders' conftests (both named ``conftest``, tests are not packages)
then clash by module name depending on collection order. Conftests hold fixtures, not
doctests, so they are never collected as test files (pytest still loads them as conftests).
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip conftest files as collection targets; everything else is decided by pytest."""
    return True if collection_path.name == "conftest.py" else None


SHARED_SERVERS = ("phoenix", "mlflow")
"""Session fixtures that start a real backend server: the tests using one run in one xdist
worker (``--dist loadgroup``), so each server starts once per run, not once per worker."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests of each shared backend server, and run the long tests first.

    It runs first: pytest-xdist's own hook of the same name reads the ``xdist_group`` markers
    to name each test's group (``nodeid@group``), and a marker added after it is ignored, so
    every worker then started a Phoenix and an MLflow server of its own.

    Parallel workers (pytest-xdist) hand out tests in collection order; a test that lasts tens
    of seconds by design (an outage, a drain, a lease running out; marked ``long``) started
    last would keep one worker busy after the others ran out of work, so those go first.
    """
    for item in items:
        used = [name for name in SHARED_SERVERS if name in getattr(item, "fixturenames", ())]
        if used:
            item.add_marker(pytest.mark.xdist_group(used[0]))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: else as collected


@pytest.fixture(autouse=True)
def shared_server_grouped(request: pytest.FixtureRequest) -> None:
    """Fail a test that uses a shared backend server outside that server's xdist group.

    With ``--dist loadgroup`` xdist names a grouped test ``nodeid@group``; a test without the
    suffix may run on any worker, which then starts a server of its own (seconds of CPU each).
    """
    if not getattr(request.config.option, "loadgroup", False):  # set in xdist's workers
        return
    for name in SHARED_SERVERS:
        if name in request.fixturenames:
            assert request.node.nodeid.endswith(f"@{name}"), (
                f"{request.node.nodeid} uses the shared {name} server outside its xdist group")


EXIT_WATCHDOG_S = 120.0
"""How long the process may take to exit after the last test before it is ended with stacks."""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Bound the time from the last test to process exit.

    A gRPC aio server that a failed test left running is finalised by the garbage collector,
    and grpc's finaliser can then block the process for ever (it joins a poller thread that
    never ends): a CI run that had already reported its result once hung to its time limit.
    The watchdog prints every thread's stack and exits, with the session's status, or 1
    when the session had passed (a process that cannot exit is a bug worth a red run).
    """
    import faulthandler
    import os
    import sys
    import threading
    import time

    def watchdog() -> None:
        time.sleep(EXIT_WATCHDOG_S)
        sys.stderr.write(f"\npytest did not exit within {EXIT_WATCHDOG_S:.0f}s of the last test; "
                         "threads:\n")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(int(exitstatus) or 1)

    threading.Thread(target=watchdog, name="pytest-exit-watchdog", daemon=True).start()
