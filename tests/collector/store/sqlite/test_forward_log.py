"""The SQLite forward log: written with the trace buffer in one transaction, kept across
restarts, bounded in bytes (refusing before anything is stored), sharing the body log's
bytes and keeping their segment until forwarded."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.common.errors import QueueFull
from collector.common.types import CANDIDATE, TraceChunk
from collector.store.sqlite.body_log import BodyLog
from collector.store.sqlite.store import SqliteStore

T1, T2 = b"\x01" * 16, b"\x02" * 16


async def open_store(path: Path, **options: object) -> SqliteStore:
    store = SqliteStore(str(path), decision_wait=0.0, **options)  # type: ignore[arg-type]
    await store.start()
    return store


async def test_a_stored_request_is_in_the_forward_log_and_survives_a_restart(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "q.db", forward=True)
    await store.append_request("spans", b"first request", [(T1, 2, CANDIDATE)], forward=True)
    await store.append([TraceChunk(T2, "logs", b"chunk", 1, False)], forward=("logs", b"logs request"))
    await store.append_request("spans", b"not forwarded", [(T2, 1, 0)])
    assert (await store.forward_log.forward_state()).head == 2  # the third was not for forwarding
    await store.shutdown()

    again = await open_store(tmp_path / "q.db", forward=True)
    items = await again.forward_log.forward_pending(1 << 20, 10)
    assert [(i.position, i.signal, i.body) for i in items] == [
        (1, "traces", b"first request"), (2, "logs", b"logs request")]
    state = await again.forward_log.forward_state()
    assert (state.head, state.sent, state.requests, state.bytes) == (2, 0, 2, 25)
    assert (await again.stats()).forward_requests == 2
    await again.forward_log.forward_release(1)
    await again.shutdown()

    third = await open_store(tmp_path / "q.db", forward=True)
    state = await third.forward_log.forward_state()
    assert (state.head, state.sent, state.requests) == (2, 1, 1)
    assert [i.body for i in await third.forward_log.forward_pending(1 << 20, 10)] == [b"logs request"]
    await third.shutdown()


async def test_pending_reads_in_order_within_a_byte_budget(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "q.db", forward=True)
    for n in range(5):
        await store.forward_log.forward_append("traces", bytes([n]) * 100)
    first = await store.forward_log.forward_pending(250, 10)
    assert [i.position for i in first] == [1, 2]
    assert [i.position for i in await store.forward_log.forward_pending(10, 10)] == [1]  # at least one
    await store.forward_log.forward_release(2)
    assert [i.position for i in await store.forward_log.forward_pending(1 << 20, 2)] == [3, 4]
    await store.shutdown()


async def test_a_full_backlog_refuses_before_storing_anything(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "q.db", forward=True, max_forward_bytes=100, retry_after_s=3.0)
    await store.append_request("spans", b"x" * 80, [(T1, 1, CANDIDATE)], forward=True)
    with pytest.raises(QueueFull) as refused:
        await store.append_request("spans", b"y" * 30, [(T2, 1, CANDIDATE)], forward=True)
    assert refused.value.retry_after_s == 3.0
    assert "export.max_forward_backlog_bytes" in str(refused.value)
    assert (await store.stats()).traces == 1  # the refused request's trace was not buffered
    with pytest.raises(QueueFull):
        await store.append([TraceChunk(T2, "logs", b"c", 1, False)], forward=("logs", b"z" * 30))
    assert await store.load(T2) == []
    await store.forward_log.forward_release(1)
    await store.append_request("spans", b"y" * 30, [(T2, 1, CANDIDATE)], forward=True)  # room again
    assert (await store.forward_log.forward_state()).bytes == 30
    await store.shutdown()


async def test_a_forwarded_body_keeps_its_segment_until_released(tmp_path: Path) -> None:
    """The trace buffer lets go of a request (its trace was dropped) while the forward log
    still needs its bytes: the segment stays until the forward log released it too."""
    path = tmp_path / "q.db"
    store = SqliteStore(str(path), decision_wait=0.0, forward=True)
    store._buffer.log = BodyLog(str(path) + ".bodies", segment_bytes=16)  # one body per segment
    await store.start()
    log = store._buffer.log
    await store.append_request("spans", b"a" * 20, [(T1, 1, CANDIDATE)], forward=True)
    await store.append_request("spans", b"b" * 20, [(T2, 1, CANDIDATE)], forward=True)
    first_segment = log.segments()[0]
    await store.discard(T1, "dropped by the test")  # the buffer no longer needs the first body
    assert first_segment in log.segments()
    assert [i.body for i in await store.forward_log.forward_pending(1 << 20, 1)] == [b"a" * 20]
    await store.forward_log.forward_release(1)
    assert first_segment not in log.segments()
    await store.shutdown()


async def test_turning_forwarding_off_forgets_what_waited(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "q.db", forward=True)
    await store.append_request("spans", b"request", [(T1, 1, CANDIDATE)], forward=True)
    await store.shutdown()
    off = await open_store(tmp_path / "q.db")
    assert await off.forward_log.forward_pending(1 << 20, 10) == []
    assert (await off.stats()).traces == 1  # the trace itself is still buffered for scoring
    await off.shutdown()
    on = await open_store(tmp_path / "q.db", forward=True)
    assert (await on.forward_log.forward_state()).requests == 0
    await on.shutdown()
