"""The installed tracescore version, read from the package metadata when first asked for.

Apart from `collector.common.metrics` (which reads it once at import) so that ``tracescore
--version`` reads it without importing the Prometheus client.
"""

from __future__ import annotations

import functools


@functools.cache
def build_version() -> str:
    """The installed tracescore version ("unknown" when run from a source tree not installed).

    Example:
        >>> from importlib import metadata
        >>> build_version() == metadata.version("tracescore")
        True
    """
    from importlib import metadata

    try:
        return metadata.version("tracescore")
    except metadata.PackageNotFoundError:
        return "unknown"
