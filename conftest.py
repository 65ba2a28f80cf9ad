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
