"""Storage faults of the SQLite store: which errors mean "the disk cannot take writes", and
the store's write health (what ``/readyz`` reports while the disk is full or failing).

A full disk (ENOSPC, EDQUOT, SQLite's SQLITE_FULL) or an I/O error (EIO, SQLITE_IOERR)
while buffering is refused retryably (`collector.common.errors.StorageFault`, 503 / UNAVAILABLE)
so exporters keep the data. While the store is unhealthy a small probe write is tried at
most once per ``probe_every_s``; the first probe (or real write) that succeeds makes the
store healthy again: recovery after space returns needs no restart.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from collector.common.errors import StorageFault

logger = logging.getLogger(__name__)
T = TypeVar("T")

_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
_SQLITE_FULL, _SQLITE_IOERR, _SQLITE_READONLY = 13, 10, 8
PROBE_BYTES = 64 * 1024


def is_storage_fault(err: BaseException) -> bool:
    """Whether ``err`` says the disk cannot take writes (full, read-only or failing).

    Example:
        >>> is_storage_fault(OSError(errno.ENOSPC, "No space left on device"))
        True
        >>> is_storage_fault(sqlite3.OperationalError("database or disk is full"))
        True
        >>> is_storage_fault(ValueError("bad"))
        False
    """
    if isinstance(err, OSError):
        return err.errno in _DISK_ERRNOS
    if isinstance(err, sqlite3.Error):
        code = getattr(err, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in (_SQLITE_FULL, _SQLITE_IOERR, _SQLITE_READONLY)
        text = str(err).lower()
        return "disk is full" in text or "disk i/o error" in text
    return False


class WriteHealth:
    """Whether the store's last write failed for lack of disk, and the probe that clears it.

    Args:
        directory: where the probe file is written (the store's directory), or None for a
            store without files (never unhealthy).
        probe_every_s: the least interval between two probes.

    Example:
        >>> import tempfile
        >>> health = WriteHealth(tempfile.mkdtemp())
        >>> health.failed(OSError(errno.ENOSPC, "No space left on device"))
        >>> health.healthy
        False
        >>> health.probe(now=time.monotonic() + 10), health.healthy
        (True, True)
    """

    def __init__(self, directory: str | None, probe_every_s: float = 1.0) -> None:
        self._dir = Path(directory) if directory else None
        self._every = probe_every_s
        self._fault: str | None = None
        self._last_probe = 0.0

    @property
    def healthy(self) -> bool:
        """False from a failed write until a write or probe succeeds.

        Example:
            >>> WriteHealth(None).healthy
            True
        """
        return self._fault is None

    @property
    def fault(self) -> str | None:
        """The error of the failed write, while unhealthy.

        Example:
            >>> WriteHealth(None).fault is None
            True
        """
        return self._fault

    def failed(self, err: BaseException) -> None:
        """Record a write that failed for lack of disk (logged once per fault, not per request)."""
        if self._fault is None:
            logger.warning("the store cannot write (%s): refusing data with 503 until space returns", err)
        self._fault = str(err) or type(err).__name__
        self._last_probe = time.monotonic()

    def succeeded(self) -> None:
        """Record a successful write.

        Example:
            >>> WriteHealth(None).succeeded()
        """
        if self._fault is not None:
            logger.warning("the store can write again")
            self._fault = None

    async def guard(self, call: Awaitable[T]) -> T:
        """Await a buffering write; a full or failing disk becomes a retryable `StorageFault`.

        Raises:
            StorageFault: the write failed for lack of disk (the store stays consistent:
                the transaction was rolled back and the body log cut back).
        """
        try:
            result = await call
        except (OSError, sqlite3.Error) as err:
            if not is_storage_fault(err):
                raise
            self.failed(err)
            raise StorageFault(f"the trace buffer cannot write: {err}") from err
        self.succeeded()
        return result

    def probe(self, now: float | None = None) -> bool:
        """While unhealthy, write, flush and delete a small file (at most once per interval);
        returns whether the store is healthy. Runs on the store's thread.
        """
        if self._fault is None or self._dir is None:
            return True
        at = time.monotonic() if now is None else now
        if at - self._last_probe < self._every:
            return False
        self._last_probe = at
        path = self._dir / ".write-probe"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"\0" * PROBE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            self._fault = str(err)
            return False
        finally:
            path.unlink(missing_ok=True)
        self.succeeded()
        return True
