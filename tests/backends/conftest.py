"""Session-wide real backends: one Phoenix and one MLflow server for all backend tests (each
takes seconds to start), from the virtualenvs ``make backends`` made.

At the session's end a server gets ``STOP_GRACE_S`` to exit on SIGTERM, then SIGKILL: nothing
after the last test reads what it would still write, and MLflow, once it has served the tests,
took 21 s to exit on SIGTERM (its last worker's teardown, at the end of a CI run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends_support import Mlflow, Phoenix

STOP_GRACE_S = 3.0


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = Phoenix(Path(tmp_path_factory.mktemp("phoenix")))
    try:
        yield server.start()
    finally:
        server.process.stop(timeout=STOP_GRACE_S)


@pytest.fixture(scope="session")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mlflow]:
    server = Mlflow(Path(tmp_path_factory.mktemp("mlflow")))
    try:
        yield server.start()
    finally:
        server.process.stop(timeout=STOP_GRACE_S)
