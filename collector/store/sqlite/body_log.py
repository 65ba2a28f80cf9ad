"""Append-only segment files holding the request bodies of the SQLite trace buffer.

A body is written once, here, and the store's ``received`` row points at it (segment,
offset, length). Inside SQLite it would be written twice (the WAL, then the database at
checkpoint) in page-sized pieces: on a small VM that cost more CPU than everything else
on the ingest path. Bodies are flushed (``fdatasync``) before the transaction that
references them commits (`BodyLog.sync` is the runner's pre-commit step), so a committed
row never points at bytes a crash could lose; bytes written by a transaction that did
not commit are never referenced. Each process starts a new segment; a segment is deleted
once no row points into it.

A write that fails (a full disk: ENOSPC, or EIO) is cut back: the segment is truncated to
the last good offset, so the offsets of later bodies still match the file; when even the
truncation fails, the next body starts a new segment. `disk_bytes` is what the segments
take on disk (the store's ``max_buffer_bytes`` cap is checked against it).
"""

from __future__ import annotations

import os
from pathlib import Path

SEGMENT_BYTES = 64 * 1024 * 1024


class BodyLog:
    """Segment files ``NNNNNNNN.seg`` in one directory.

    Example:
        >>> import tempfile
        >>> log = BodyLog(tempfile.mkdtemp())
        >>> log.open()
        >>> where = log.append(b"body")
        >>> log.sync()
        >>> log.read(*where, 4)
        b'body'
        >>> log.close()
    """

    def __init__(self, directory: str, segment_bytes: int = SEGMENT_BYTES) -> None:
        self._dir = Path(directory)
        self._limit = segment_bytes
        self._segment = 0
        self._fd: int | None = None
        self._size = 0
        self._unsynced: list[int] = []  # fds written since the last sync
        self._sizes: dict[int, int] = {}  # segment -> bytes on disk
        self._broken = False  # the current segment's end is unknown: start a new one

    @property
    def current(self) -> int:
        """The segment being written (0 before `open`).

        Example:
            >>> BodyLog("unused").current
            0
        """
        return self._segment

    @property
    def disk_bytes(self) -> int:
        """Bytes the segments take on disk (as written by this process, and found at `open`).

        Example:
            >>> BodyLog("unused").disk_bytes
            0
        """
        return sum(self._sizes.values())

    def segments(self) -> list[int]:
        """The segment numbers on disk, ascending.

        Example:
            >>> import tempfile
            >>> BodyLog(tempfile.mkdtemp()).segments()
            []
        """
        if not self._dir.is_dir():
            return []
        return sorted(int(p.stem) for p in self._dir.glob("*.seg") if p.stem.isdigit())

    def open(self) -> None:
        """Create the directory and start a new segment after any on disk."""
        self._dir.mkdir(parents=True, exist_ok=True)
        existing = self.segments()
        for segment in existing:
            self._sizes[segment] = self._path(segment).stat().st_size
        self._start(existing[-1] + 1 if existing else 1)

    def _path(self, segment: int) -> Path:
        return self._dir / f"{segment:08d}.seg"

    def _start(self, segment: int) -> None:
        previous = self._fd
        if previous is not None and previous not in self._unsynced:
            os.close(previous)  # flushed already (one still unsynced is closed by `sync`)
        self._segment = segment
        self._fd = os.open(self._path(segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = 0
        self._sizes[segment] = 0
        self._broken = False

    def append(self, data: bytes) -> tuple[int, int]:
        """Write ``data``; returns (segment, offset). Durable only after `sync`.

        Raises:
            OSError: the write failed (nothing of ``data`` is left in the segment).
        """
        if self._fd is None:
            raise RuntimeError("body log is not open")
        if self._broken or (self._size and self._size + len(data) > self._limit):
            self._start(self._segment + 1)
        fd = self._fd
        where = (self._segment, self._size)
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError:
            self._cut_back(fd)
            raise
        self._size += len(data)
        self._sizes[self._segment] = self._size
        if not self._unsynced or self._unsynced[-1] != self._fd:
            self._unsynced.append(self._fd)
        return where

    def _cut_back(self, fd: int) -> None:
        """Truncate the segment to the last good offset after a failed write."""
        try:
            os.ftruncate(fd, self._size)
        except OSError:
            self._broken = True  # its end is unknown: never append to it again

    def sync(self) -> None:
        """Flush everything written since the last call to disk.

        Raises:
            OSError: a flush failed; the bytes written since the last sync are not durable
                (the transaction that references them must not commit), and the next body
                goes to a new segment.

        Example:
            >>> BodyLog("unused").sync()
        """
        try:
            for fd in self._unsynced:
                os.fdatasync(fd)
        except OSError:
            self._broken = True  # a failed flush may have lost pages of this segment
            raise
        finally:
            for fd in self._unsynced:
                if fd != self._fd:
                    os.close(fd)
            self._unsynced = []

    def read(self, segment: int, offset: int, length: int) -> bytes:
        """The bytes written at (segment, offset)."""
        fd = os.open(self._path(segment), os.O_RDONLY)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise OSError(f"segment {segment} ends before offset {offset} + {length}")
        return data

    def delete(self, segments: list[int]) -> None:
        """Delete segments (never the one being written).

        Example:
            >>> BodyLog("unused").delete([])
        """
        for segment in segments:
            if segment != self._segment:
                self._path(segment).unlink(missing_ok=True)
                self._sizes.pop(segment, None)

    def close(self) -> None:
        """Flush and close; safe twice.

        Example:
            >>> BodyLog("unused").close()
        """
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None
