"""BlockBuster on for the daemon's own code, as a fixture for conftests to take in.

Any blocking call (file or socket I/O, sleeps, lock waits...) made on the event loop from a
``collector`` module fails the test: SQLite, the OTel SDK exporters and user scorers must
run off the loop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from blockbuster import BlockBuster, blockbuster_ctx


@pytest.fixture(autouse=True)
def blockbuster() -> Iterator[BlockBuster]:
    """Fail on blocking calls from `collector` made on a running event loop."""
    with blockbuster_ctx(["collector"]) as bb:
        yield bb
