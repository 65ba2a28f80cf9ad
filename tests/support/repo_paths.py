"""Where the repository's files are, for tests at any depth of ``tests/``."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository's root (the folder holding ``pyproject.toml``)."""

FIXTURES = REPO / "tests" / "fixtures"
"""The real OTLP captures shared by the adapter and collector tests."""

INTEGRATION = REPO / "tests" / "integration"
"""The daemon integration tests' folder (its scorer modules are loaded by file path)."""
