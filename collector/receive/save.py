"""`SavedRequests`: every OTLP request the daemon accepted, also written to a directory as the
files ``tracescore inspect`` and ``tracescore score`` read (``[receiver] save_dir``).

One file per request, as the receivers decoded it: ``<UTC time>-<pid>-<n>.pb`` holds an
``ExportTraceServiceRequest`` (protobuf, whatever encoding the agent sent: JSON bodies are
written as protobuf), ``...logs.pb`` an ``ExportLogsServiceRequest``. A request is written
after the pipeline accepted it (the file set is what the daemon took), in a thread (the event
loop never waits on the disk), under a temporary name renamed into place (a reader never sees
half a file). The process id in the name keeps replicas that share the directory apart.

Saving is a convenience beside the daemon's work, never in its way: a write that fails (a full
disk) is logged and the request stays accepted; once this process has written ``max_bytes``
it stops saving, with one warning (remove or move the files and restart to save again).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.common.errors import ConfigError
from collector.common.types import Accepted
from collector.receive.consumer import TraceConsumer

__all__ = ["SavedRequests"]

logger = logging.getLogger(__name__)


class SavedRequests:
    """A `TraceConsumer` that hands each request to ``inner`` and, once accepted, writes it to
    ``directory`` (module docstring).

    Raises:
        ConfigError: ``directory`` cannot be created or written (``receiver.save_dir`` named).

    Example:
        >>> import asyncio, tempfile
        >>> class Taker:
        ...     async def consume_traces(self, request, raw=None): return Accepted(1)
        ...     async def consume_logs(self, request): return Accepted(1)
        >>> folder = Path(tempfile.mkdtemp()) / "otlp"
        >>> saved = SavedRequests(Taker(), folder, max_bytes=1 << 20)
        >>> _ = asyncio.run(saved.consume_traces(ExportTraceServiceRequest()))
        >>> [path.suffix for path in folder.iterdir()]
        ['.pb']
    """

    def __init__(self, inner: TraceConsumer, directory: str | Path, max_bytes: int) -> None:
        self._inner = inner
        self._dir = Path(directory)
        self._max_bytes = max_bytes
        self._written = 0
        self._full = False
        self._failing = False
        self._numbers = itertools.count(1)
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            if not os.access(self._dir, os.W_OK):
                raise PermissionError(f"{self._dir} is not writable")
        except OSError as err:
            raise ConfigError(f"invalid configuration: receiver.save_dir: cannot write requests there: {err}") from None

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        """Hand the request on; once it is accepted, save it (its protobuf ``raw`` when known)."""
        result = await self._inner.consume_traces(request, raw)
        await self._save(raw if raw is not None else request, ".pb")
        return result

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        """Hand the request on; once it is accepted, save it as a ``.logs.pb`` file."""
        result = await self._inner.consume_logs(request)
        await self._save(request, ".logs.pb")
        return result

    async def _save(self, body: bytes | ExportTraceServiceRequest | ExportLogsServiceRequest, suffix: str) -> None:
        if self._full:
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        path = self._dir / f"{stamp}-{os.getpid()}-{next(self._numbers):06d}{suffix}"
        try:
            size = await asyncio.to_thread(_write, path, body)
        except OSError as err:
            if not self._failing:  # once per run of failures: a full disk fails every request
                logger.warning("saving received requests to %s failed (the requests are accepted all the same): %s",
                               self._dir, err)
            self._failing = True
            return
        if self._failing:
            logger.warning("saving received requests to %s works again", self._dir)
        self._failing = False
        self._written += size
        if self._written >= self._max_bytes:
            self._full = True
            logger.warning("saved %d bytes of received requests to %s ([receiver] save_max_bytes): no more are "
                           "saved until a restart", self._written, self._dir)


def _write(path: Path, body: bytes | ExportTraceServiceRequest | ExportLogsServiceRequest) -> int:
    """Write ``body`` (bytes, or a request to encode) to ``path`` whole; its size."""
    data = body if isinstance(body, bytes) else body.SerializeToString()
    partial = path.with_name(f".{path.name}.part")
    partial.write_bytes(data)
    partial.replace(path)
    return len(data)
