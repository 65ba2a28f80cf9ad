"""Session-wide real backends: one Phoenix and one MLflow server for all backend tests (each
takes seconds to start), from the virtualenvs ``make backends`` made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends_support import Mlflow, Phoenix


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = Phoenix(Path(tmp_path_factory.mktemp("phoenix")))
    try:
        yield server.start()
    finally:
        server.process.stop()


@pytest.fixture(scope="session")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mlflow]:
    server = Mlflow(Path(tmp_path_factory.mktemp("mlflow")))
    try:
        yield server.start()
    finally:
        server.process.stop()
