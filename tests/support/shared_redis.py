"""The Redis every Redis test shares: ``TRACESCORE_TEST_REDIS_URL``, default 127.0.0.1:6379 db 0.

Each test keeps to key prefixes of its own, so tests run side by side on it; CI starts it when
it is not running (`.ci/run`), and a test that needs it fails loudly without it.
"""

from __future__ import annotations

import os

REDIS_URL = os.environ.get("TRACESCORE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
"""The shared test Redis's URL."""
