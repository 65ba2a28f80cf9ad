"""The SQLite store's request buffer through its public API, with real OTLP requests and files:
whole requests stored with their summaries, cut by trace on load, index rebuilt on restart,
rows deleted when no trace needs them, files of the previous layout upgraded."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

import adapters
from collector.common.types import TraceChunk
from collector.store.split import CANDIDATE, ROOT, summarize_spans
from collector.store.sqlite.store import SqliteStore

T1 = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
T2 = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
T3 = bytes.fromhex("5b8efff798038103d269b633813fc60c")
BAD = bytes(16)  # the all-zero trace id is invalid


def _sid(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _span(trace_id: bytes, n: int, name: str, parent: int | None = None) -> Span:
    return Span(
        trace_id=trace_id, span_id=_sid(n), parent_span_id=_sid(parent) if parent else b"", name=name,
        start_time_unix_nano=1_700_000_000_000_000_000 + n, end_time_unix_nano=1_700_000_001_000_000_000 + n,
        attributes=[KeyValue(key="n", value=AnyValue(int_value=n))],
    )


def _resource(service: str, scopes: list[tuple[str, list[Span]]]) -> ResourceSpans:
    return ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service))]),
        scope_spans=[ScopeSpans(scope=InstrumentationScope(name=name, version="1.2"), spans=spans)
                     for name, spans in scopes],
        schema_url="https://opentelemetry.io/schemas/1.24.0",
    )


def _request(*resources: ResourceSpans) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=list(resources))


async def _append(store: SqliteStore, request: ExportTraceServiceRequest, now: float) -> Any:
    entries, _ = summarize_spans(request.resource_spans, adapters.is_run_candidate)
    return await store.append_request("spans", request.SerializeToString(), entries, now=now)


def _contents(chunk: TraceChunk) -> list[tuple[str, str, str, Span]]:
    """(service, scope, schema url, span) of every span in a ``spans`` chunk."""
    data = TracesData.FromString(chunk.data)
    return [
        (rs.resource.attributes[0].value.string_value, f"{ss.scope.name}/{ss.scope.version}", rs.schema_url, span)
        for rs in data.resource_spans for ss in rs.scope_spans for span in ss.spans
    ]


def _names(chunks: list[TraceChunk]) -> list[list[str]]:
    return [[span.name for *_, span in _contents(c)] for c in chunks]


# One request of three traces and an invalid span, as an instrumented service sends them.
T1_ROOT = _span(T1, 1, "POST /chat")
T1_LLM = _span(T1, 2, "chat gpt-4o", parent=1)
T2_LLM = _span(T2, 3, "chat gpt-4o", parent=9)  # T2's root comes in a later request
T3_ROOT = _span(T3, 4, "GET /health")
INVALID = _span(BAD, 5, "chat gpt-4o")
T3_CHILD = _span(T3, 6, "SELECT users", parent=4)


def _first_request() -> ExportTraceServiceRequest:
    return _request(
        _resource("svc-a", [("scope-1", [T1_ROOT, T3_ROOT, INVALID]), ("scope-2", [T1_LLM])]),
        _resource("svc-b", [("scope-3", [T2_LLM, T3_CHILD])]),
    )


T2_ROOT = _span(T2, 9, "invoke_agent planner")
T1_LATE = _span(T1, 7, "chat gpt-4o", parent=1)


def _second_request() -> ExportTraceServiceRequest:
    return _request(_resource("svc-c", [("scope-4", [T2_ROOT, T1_LATE])]))


def _read(path: str, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


async def _open(path: str, **kwargs: Any) -> SqliteStore:
    kwargs.setdefault("decision_wait", 5.0)
    kwargs.setdefault("rootless_wait", 30.0)
    store = SqliteStore(path, **kwargs)
    await store.start()
    return store


def test_the_requests_summarize_as_intended() -> None:
    entries, rejected = summarize_spans(_first_request().resource_spans, adapters.is_run_candidate)
    assert rejected == 1
    assert entries == [(T1, 2, CANDIDATE | ROOT), (T3, 2, ROOT), (T2, 1, CANDIDATE)]


async def test_load_cuts_the_request_by_trace_keeping_resource_and_scope(tmp_path: Path) -> None:
    store = await _open(str(tmp_path / "q.db"))
    try:
        result = await _append(store, _first_request(), now=1000.0)
        assert (result.evicted_traces, result.dropped_spans) == (0, 0)
        assert (await store.stats()).traces == 3

        (t1,) = await store.load(T1)
        assert (t1.trace_id, t1.signal) == (T1, "spans")
        url = "https://opentelemetry.io/schemas/1.24.0"
        assert _contents(t1) == [("svc-a", "scope-1/1.2", url, T1_ROOT), ("svc-a", "scope-2/1.2", url, T1_LLM)]

        (t2,) = await store.load(T2)
        assert _contents(t2) == [("svc-b", "scope-3/1.2", url, T2_LLM)]

        (t3,) = await store.load(T3)
        assert _contents(t3) == [("svc-a", "scope-1/1.2", url, T3_ROOT), ("svc-b", "scope-3/1.2", url, T3_CHILD)]

        assert await store.load(BAD) == []
        for chunk in (t1, t2, t3):
            assert all(span.trace_id == chunk.trace_id != BAD for *_, span in _contents(chunk))
            assert INVALID.span_id not in {span.span_id for *_, span in _contents(chunk)}
    finally:
        await store.shutdown()


async def test_request_traces_are_due_by_their_summaries(tmp_path: Path) -> None:
    store = await _open(str(tmp_path / "q.db"))
    try:
        await _append(store, _first_request(), now=1000.0)
        assert await store.due(10, now=1004.9) == ([], 0)
        assert await store.due(10, now=1005.0) == ([T1], 0)  # root and candidate: decision_wait
        assert await store.due(10, now=1030.0) == ([T1, T2], 0)  # candidate only: rootless_wait
        await store.finish(T1)
        assert await store.due(10, now=1031.0) == ([T2], 0)
        # T3 has no run candidate: never due, it only waits to expire.
        assert (await store.stats()).traces == 2
    finally:
        await store.shutdown()


async def test_a_trace_in_two_requests_loads_both_chunks_in_arrival_order(tmp_path: Path) -> None:
    store = await _open(str(tmp_path / "q.db"))
    try:
        await _append(store, _first_request(), now=1000.0)
        await _append(store, _second_request(), now=1002.0)
        t2 = await store.load(T2)
        assert [c.trace_id for c in t2] == [T2, T2]
        assert [[(svc, span) for svc, _, _, span in _contents(c)] for c in t2] == [
            [("svc-b", T2_LLM)], [("svc-c", T2_ROOT)]]
        assert _names(await store.load(T1)) == [["POST /chat", "chat gpt-4o"], ["chat gpt-4o"]]
        # T2's root arrived at 1002: decided decision_wait after it, not rootless_wait after its
        # run; T1's late run span (its root already seen) moved its decision to 1007 as well.
        assert await store.due(10, now=1006.9) == ([], 0)
        due, expired = await store.due(10, now=1007.0)
        assert sorted(due) == sorted([T1, T2]) and len(due) == 2 and expired == 0
    finally:
        await store.shutdown()


async def test_restart_rebuilds_the_index_from_the_stored_summaries(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    probes = [1004.0, 1005.0, 1006.9, 1007.0, 1100.0]

    async def answers(store: SqliteStore) -> tuple[list[Any], dict[bytes, list[list[Span]]]]:
        due = [await store.due(10, now=t) for t in probes]
        loads = {t: [[s for *_, s in _contents(c)] for c in await store.load(t)] for t in (T1, T2, T3)}
        return due, loads

    store = await _open(path, max_trace_age=10_000.0)
    await _append(store, _first_request(), now=1000.0)
    await _append(store, _second_request(), now=1002.0)
    before = await answers(store)
    await store.shutdown()

    store = await _open(path, max_trace_age=10_000.0)
    try:
        after = await answers(store)
        assert after == before
        assert before[0][2] == ([], 0)
        assert sorted(before[0][3][0]) == sorted([T1, T2])  # the answers are not empty
        assert before[1][T3] == [[T3_ROOT, T3_CHILD]]
        assert (await store.stats()).traces == 3
    finally:
        await store.shutdown()


async def test_finished_trace_stays_decided_across_restart_unless_a_run_came_after(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = await _open(path, max_trace_age=10_000.0)
    await _append(store, _first_request(), now=1000.0)
    await _append(store, _second_request(), now=1002.0)
    assert sorted((await store.due(10, now=1010.0))[0]) == sorted([T1, T2])
    await store.finish(T1)
    await store.finish(T2)
    late = _request(_resource("svc-a", [("scope-1", [_span(T2, 11, "chat gpt-4o-mini", parent=9)])]))
    await _append(store, late, now=1020.0)  # a late run span of T2, after its decision
    assert await store.due(10, now=1100.0) == ([T2], 0)
    await store.shutdown()

    store = await _open(path, max_trace_age=10_000.0)
    try:
        assert await store.due(10, now=1024.9) == ([], 0)
        assert await store.due(10, now=1100.0) == ([T2], 0)  # T1 stays decided
        # The decided trace is kept as context: the new decision sees the whole trace.
        assert _names(await store.load(T2)) == [["chat gpt-4o"], ["invoke_agent planner"], ["chat gpt-4o-mini"]]
        assert _names(await store.load(T1)) == [["POST /chat", "chat gpt-4o"], ["chat gpt-4o"]]
        await store.finish(T2)
        assert await store.due(10, now=1200.0) == ([], 0)
    finally:
        await store.shutdown()

    store = await _open(path, max_trace_age=10_000.0)
    try:
        assert await store.due(10, now=1200.0) == ([], 0)
    finally:
        await store.shutdown()


async def test_whole_requests_are_stored_as_received(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = await _open(path)
    first, second = _first_request(), _second_request()
    await _append(store, first, now=1000.0)
    await _append(store, second, now=1001.0)
    await store.shutdown()
    rows = _read(path, "SELECT whole, signal, data, segment, offset, length FROM received ORDER BY id")
    assert [r[:3] for r in rows] == [(1, "spans", b""), (1, "spans", b"")]  # the bytes are in the body log
    segments = sorted((tmp_path / "q.db.bodies").glob("*.seg"))
    assert [p.name for p in segments] == ["00000001.seg"]
    stored = segments[0].read_bytes()
    assert [stored[offset:offset + length] for *_, offset, length in rows] == [
        first.SerializeToString(), second.SerializeToString()]
    assert len(stored) == sum(r[5] for r in rows)  # written once, nothing else


async def test_body_segments_go_once_no_row_points_into_them(tmp_path: Path) -> None:
    from collector.store.sqlite.body_log import BodyLog

    path = str(tmp_path / "q.db")
    store = await _open(path, max_trace_age=60.0)
    assert store._buffer.log is not None
    store._buffer.log._limit = 1  # every body starts a new segment
    await _append(store, _first_request(), now=1000.0)
    await _append(store, _second_request(), now=1001.0)
    bodies = tmp_path / "q.db.bodies"
    assert len(list(bodies.glob("*.seg"))) == 2
    due, _ = await store.due(100, now=1040.0)
    assert due
    for trace_id in due:
        await store.finish(trace_id)
    assert len(list(bodies.glob("*.seg"))) == 2  # decided traces stay as context
    await store.due(100, now=5000.0)  # everything ages out: its rows, then its segments, go
    assert _read(path, "SELECT count(*) FROM received") == [(0,)]
    live = {p.name for p in bodies.glob("*.seg")}
    assert live == {f"{store._buffer.log.current:08d}.seg"}  # only the one being written stays
    await _append(store, _first_request(), now=5001.0)  # rolls over the emptied segment: it goes
    assert len(list(bodies.glob("*.seg"))) == 1
    await store.shutdown()
    # A segment no row points into (bytes of a transaction that never committed) goes at start.
    orphan = BodyLog(str(bodies))
    orphan.open()
    orphan.append(b"never committed")
    orphan.close()
    (held,) = _read(path, "SELECT segment FROM received")  # the one row left, from the roll-over
    store = await _open(path)
    assert _read(path, "SELECT count(*) FROM received") == [(1,)]
    assert {p.name for p in bodies.glob("*.seg")} == {f"{held[0]:08d}.seg", f"{store._buffer.log.current:08d}.seg"}
    await store.shutdown()


async def test_rows_are_deleted_once_every_trace_they_hold_has_left(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    count = "SELECT count(*) FROM received"

    def request(*spans: Span) -> ExportTraceServiceRequest:
        return _request(_resource("svc", [("scope", list(spans))]))

    t4 = bytes.fromhex("6c8efff798038103d269b633813fc60d")
    kwargs: dict[str, Any] = {"max_traces": 2, "max_trace_age": 100.0}
    store = await _open(path, **kwargs)
    await _append(store, request(_span(T1, 1, "chat a"), _span(T2, 2, "chat b")), now=1000.0)  # row 1
    await _append(store, request(_span(T2, 3, "chat c")), now=1001.0)  # row 2
    await store.shutdown()
    assert _read(path, count) == [(2,)]

    store = await _open(path, **kwargs)
    await store.finish(T1)  # decided: the first to make room (no loss)
    result = await _append(store, request(_span(T3, 4, "chat d", parent=1)), now=1002.0)  # row 3
    assert result.evicted_traces == 0  # T1 went; T2 still needs row 1
    await store.shutdown()
    assert _read(path, count) == [(3,)]

    store = await _open(path, **kwargs)
    assert [c.trace_id for c in await store.load(T2)] == [T2, T2]
    await store.finish(T2)
    result = await _append(store, request(_span(t4, 5, "chat e")), now=1003.0)  # row 4: T2 goes
    assert result.evicted_traces == 0
    assert await store.load(T2) == []
    await store.shutdown()
    assert _read(path, "SELECT id FROM received ORDER BY id") == [(3,), (4,)]

    store = await _open(path, **kwargs)
    assert (await store.due(10, now=1040.0))[0] == [t4, T3]  # t4 has its root: 1008; T3 none: 1032
    await store.finish(T3)
    await store.finish(t4)
    await store.shutdown()
    assert _read(path, count) == [(2,)]  # decided traces are kept as context
    assert sorted(_read(path, "SELECT trace_id FROM decided")) == sorted([(T3,), (t4,)])

    store = await _open(path, **kwargs)
    assert await store.due(10, now=1200.0) == ([], 0)  # past max_trace_age: they leave silently
    await store.shutdown()
    assert _read(path, count) == [(0,)]
    assert _read(path, "SELECT count(*) FROM decided") == [(0,)]


async def test_expired_runless_request_rows_are_deleted(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    store = await _open(path, max_trace_age=60.0)
    t5 = bytes.fromhex("7d8efff798038103d269b633813fc60e")
    await _append(store, _request(_resource("svc", [("s", [_span(t5, 1, "GET /health")])])), now=1000.0)
    await _append(store, _first_request(), now=1010.0)
    assert await store.due(10, now=1060.0) == ([T1, T2], 1)  # the first request's only trace expired
    assert await store.load(t5) == []
    await store.shutdown()
    assert _read(path, "SELECT id FROM received") == [(2,)]


def _make_previous_layout(path: str, chunk: dict[str, bytes]) -> None:
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE traces (
            id INTEGER PRIMARY KEY, trace_id BLOB NOT NULL UNIQUE, first_seen REAL NOT NULL,
            span_count INTEGER NOT NULL, decide_at REAL, has_candidate INTEGER NOT NULL,
            root_seen INTEGER NOT NULL, decided INTEGER NOT NULL, data BLOB);
        CREATE TABLE chunks (id INTEGER PRIMARY KEY, trace_id BLOB NOT NULL, signal TEXT NOT NULL,
            data BLOB NOT NULL);
    """)
    db.executemany(
        "INSERT INTO traces(id, trace_id, first_seen, span_count, decide_at, has_candidate, root_seen,"
        " decided, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (1, T1, 1000.0, 3, 1005.0, 1, 1, 0, chunk["t1a"]),
            (2, T2, 1001.0, 1, None, 1, 1, 1, chunk["t2"]),  # decided before the upgrade
            (3, T3, 1002.0, 1, 1032.0, 1, 0, 0, None),  # all of it in chunks
        ],
    )
    db.executemany(
        "INSERT INTO chunks(id, trace_id, signal, data) VALUES (?, ?, ?, ?)",
        [(1, T1, "spans", chunk["t1b"]), (2, T3, "spans", chunk["t3"]), (3, T1, "logs", chunk["t1log"])],
    )
    db.commit()
    db.close()


def _traces_data(*spans: Span) -> bytes:
    return TracesData(resource_spans=[_resource("old", [("scope", list(spans))])]).SerializeToString()


async def test_previous_layout_file_is_upgraded(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    chunk = {
        "t1a": _traces_data(_span(T1, 1, "chat gpt-4o", parent=2)),
        "t1b": _traces_data(_span(T1, 2, "invoke_agent a")),
        "t1log": b"\x0a\x00",  # an (empty) LogsData: chunk rows come back verbatim
        "t2": _traces_data(_span(T2, 3, "chat gpt-4o")),
        "t3": _traces_data(_span(T3, 4, "chat gpt-4o", parent=5)),
    }
    _make_previous_layout(path, chunk)

    store = await _open(path, max_trace_age=10_000.0)
    try:
        assert [(c.signal, c.data) for c in await store.load(T1)] == [
            ("spans", chunk["t1a"]), ("spans", chunk["t1b"]), ("logs", chunk["t1log"])]
        assert [c.data for c in await store.load(T2)] == [chunk["t2"]]  # kept as context
        assert [c.data for c in await store.load(T3)] == [chunk["t3"]]
        assert await store.due(10, now=1004.9) == ([], 0)
        assert await store.due(10, now=1005.0) == ([T1], 0)
        assert await store.due(10, now=1100.0) == ([T1, T3], 0)  # T2 is not decided again
        assert (await store.stats()).traces == 2
    finally:
        await store.shutdown()
    tables = {name for (name,) in _read(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"received", "decided"} <= tables
    assert not tables & {"traces", "chunks"}

    store = await _open(path, max_trace_age=10_000.0)  # a second start: nothing upgraded twice
    try:
        assert len(await store.load(T1)) == 3
        assert await store.due(10, now=1100.0) == ([T1, T3], 0)
    finally:
        await store.shutdown()


async def test_chunk_rows_and_request_rows_of_one_trace_mix(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    own = _traces_data(_span(T1, 8, "chat gpt-4o", parent=1))
    logs = b"\x0a\x02\x0a\x00"  # chunk rows are stored and returned verbatim
    store = await _open(path)
    try:
        await store.append([TraceChunk(T1, "spans", own, 1, True)], now=1000.0)  # rootless: 1030
        await _append(store, _first_request(), now=1001.0)  # T1's root: 1006
        await store.append([TraceChunk(T1, "logs", logs, 0, False)], now=1002.0)
        chunks = await store.load(T1)
        assert [c.signal for c in chunks] == ["spans", "spans", "logs"]
        assert chunks[0].data == own and chunks[2].data == logs
        assert [s for *_, s in _contents(chunks[1])] == [T1_ROOT, T1_LLM]
        assert await store.due(10, now=1005.9) == ([], 0)
        assert await store.due(10, now=1006.0) == ([T1], 0)
        await store.finish(T1)
    finally:
        await store.shutdown()

    store = await _open(path)
    try:
        assert [c.data for c in await store.load(T1)][::2] == [own, logs]
        assert await store.due(10, now=1100.0) == ([T2], 0)  # T1 decided before the restart
    finally:
        await store.shutdown()
