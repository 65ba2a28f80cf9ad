"""Reading decided traces in helper processes (``[assembly] decide_processes``).

The adapters' work on a decided trace (decoding its spans, finding its runs, building their
agent-typed messages) is pure CPU. In the daemon's own process it shares one interpreter lock
with receiving, scoring and exporting, so one process uses about one core however many the
machine has. `DecisionProcesses` sends each batch of decided traces to N spawned processes
(`read_batch`) and gets back their `TraceReading`s (each run's queued record, pickled); the
daemon then matches scorers, counts and queues as before (`RunDecider.decide_read`). The
records come without the adapters' models: plain dicts unpickle in half the time pydantic
models do, and a worker validates them as it does any record read from the store.

The processes hold no state: a batch lost with a process that died is read again in the
daemon's own thread, the pool is started anew, and no trace is lost.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from collector.assemble.decide import ReadSettings, TraceReading, read_trace
from collector.common.types import TraceChunk

logger = logging.getLogger(__name__)

PARENT_CHECK_S = 1.0
"""How often a decision process looks whether the daemon is still its parent."""

RESTART_RETRY_S = 30.0
"""After the processes failed to start again, how long batches are read in the daemon before the next try."""

START_TIMEOUT_S = 60.0
"""How long starting the processes (each imports the adapters) may take."""


def _start_process() -> None:
    """A decision process's start: the daemon alone handles signals (a Ctrl-C reaches the whole
    process group; the daemon stops its processes when it drains), a daemon killed outright
    leaves no process behind (`_exit_with_parent`), and the adapters are imported (and kept out of
    the garbage collector's walks, as the daemon keeps what its start made: `gc.freeze`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="tracescore-parent-watch",
                     daemon=True).start()
    importlib.import_module("adapters")
    gc.freeze()


def _exit_with_parent(parent: int) -> None:
    """Exit once the daemon is gone (killed: it could not stop its processes; the process is then
    re-parented, so its parent id changes)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def read_batch(batch: list[tuple[bytes, list[TraceChunk]]], settings: ReadSettings) -> list[TraceReading]:
    """Read every trace of a batch with the adapters (in a decision process).

    Example:
        >>> [r.runs for r in read_batch([(b"\\x01" * 16, [])], ReadSettings())]
        [[]]
    """
    adapters = importlib.import_module("adapters")
    settings = settings._replace(with_models=False)  # records as JSON-ready dicts: cheaper to send than models
    return [read_trace(adapters, trace_id, chunks, settings) for trace_id, chunks in batch]


def _ready() -> bool:
    return True


class DecisionProcesses:
    """N spawned processes that read decided traces (`read_batch`).

    Args:
        processes: how many (at least 1).
        settings: what reading a trace needs besides its chunks (`RunDecider.reading`).
    """

    def __init__(self, processes: int, settings: ReadSettings) -> None:
        if processes < 1:
            raise ValueError("decision processes: at least 1")
        self._processes = processes
        self._settings = settings
        self._pool: ProcessPoolExecutor | None = None
        self._restart_at: float | None = None  # when starting them again is tried next (after a failure)

    def _new_pool(self) -> ProcessPoolExecutor:
        # Spawned, not forked: the daemon's threads (store, gRPC) hold locks a fork would copy.
        return ProcessPoolExecutor(self._processes, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_process)

    async def start(self) -> None:
        """Start the processes and wait until each has imported the adapters."""
        self._pool = await asyncio.to_thread(self._started_pool)

    def _started_pool(self) -> ProcessPoolExecutor:
        """A new pool whose processes are up (made off the event loop: making one starts
        multiprocessing's helper process, and every submit writes to the pool's pipe)."""
        pool = self._new_pool()
        for started in [pool.submit(_ready) for _ in range(self._processes)]:
            started.result(timeout=START_TIMEOUT_S)
        return pool

    async def read(self, batch: list[tuple[bytes, list[TraceChunk]]]) -> list[TraceReading] | None:
        """The readings of a batch, in its order, shared among the processes; None when they
        could not read it (a process died, or a reading could not be sent back): the caller
        reads the batch itself. A pool that lost a process is started anew."""
        if self._pool is None and self._restart_at is not None and time.monotonic() >= self._restart_at:
            await self._restart()
        pool = self._pool
        if pool is None:
            return None
        if not batch:
            return []
        size = -(-len(batch) // self._processes)
        parts = [batch[i:i + size] for i in range(0, len(batch), size)]
        try:
            submitted = await asyncio.to_thread(lambda: [pool.submit(read_batch, part, self._settings)
                                                         for part in parts])
            read = await asyncio.gather(*(asyncio.wrap_future(future) for future in submitted))
        except BrokenProcessPool:
            logger.warning("a decision process died; its traces are read in the daemon, and the processes "
                           "are started again")
            self._pool = None
            await asyncio.to_thread(pool.shutdown, False, cancel_futures=True)
            await self._restart()
            return None
        except Exception:  # e.g. a reading that cannot be pickled: read here instead
            logger.warning("reading traces in a decision process failed; read in the daemon", exc_info=True)
            return None
        return [reading for part in read for reading in part]

    async def _restart(self) -> None:
        """Start the processes anew; when that fails, batches are read in the daemon and it is
        tried again `RESTART_RETRY_S` later."""
        try:
            self._pool = await asyncio.to_thread(self._started_pool)
            self._restart_at = None
        except Exception:
            logger.exception("starting the decision processes again failed; retried in %.0f s", RESTART_RETRY_S)
            self._restart_at = time.monotonic() + RESTART_RETRY_S

    async def shutdown(self) -> None:
        """Stop the processes (a batch being read is finished first)."""
        self._restart_at = None
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)
