"""The one wall-clock time an evaluation span carries as text: ``tracescore.scored_at``."""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime

__all__ = ["scored_at"]


def scored_at(start_ns: int) -> str:
    """When scoring started, as an ISO 8601 UTC timestamp with milliseconds: the text of
    ``datetime.fromtimestamp(start_ns / 1e9, UTC)``, each second's part formatted once.

    Example:
        >>> scored_at(1_700_000_000_123_000_000), scored_at(1_700_000_000_999_999_600)
        ('2023-11-14T22:13:20.123Z', '2023-11-14T22:13:21.000Z')
    """
    fraction, whole = math.modf(start_ns / 1e9)
    micros = round(fraction * 1e6)  # as fromtimestamp rounds (half to even), carried as it carries
    carry = 1 if micros >= 1_000_000 else -1 if micros < 0 else 0
    return f"{_second_text(int(whole) + carry)}.{(micros - carry * 1_000_000) // 1000:03d}Z"


@functools.lru_cache(maxsize=256)
def _second_text(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").removesuffix("+00:00")
