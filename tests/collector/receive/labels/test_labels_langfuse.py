"""People's labels read from Langfuse (`collector.receive.labels.LangfuseLabels`) through the
Langfuse test server, whose score reads are checked against the ``langfuse`` package's response
types: ANNOTATION scores only (tracescore's own API scores and Langfuse's EVAL ones never), their
subjects, values, authors and comments; cursor pages of v3, or v2's numbered ones where v3 is
missing; an incremental pull finds an edit of an old label and a new one, and nothing twice;
refused keys and an outage are one clear `PullError`, the pages already read kept."""

from __future__ import annotations

import json
import time

import aiohttp
import pytest
from langfuse_server import LangfuseServer

from collector.common.errors import PullError
from collector.common.labels import Label
from collector.common.types import ScoreRecord
from collector.config import LangfuseSinkConfig, SinksConfig
from collector.export.send.answers import Verdict
from collector.export.sinks.langfuse import LangfuseSink
from collector.receive.labels import LangfuseLabels
from collector.receive.labels.sweep import Cursor
from collector.receive.pull import Retry

DAY = 86_400.0
FAST = Retry(attempts=2, min_backoff_s=0.01, max_backoff_s=0.02, timeout_s=10)
TRACE = "ab" * 16


def reader(server: LangfuseServer, secret: str | None = None, page_size: int = 500) -> LangfuseLabels:
    sinks = SinksConfig(langfuse={"host": server.url, "public_key": server.public_key,
                                  "secret_key": secret or server.secret_key})
    return LangfuseLabels(sinks, FAST, page_size=page_size)


async def pull(labels: LangfuseLabels, cursor: str | None, since_s: float = DAY) -> list[tuple[list[Label], str]]:
    return [page async for page in labels.pages(cursor, since_s, ["Relevance"])]


def span(n: int) -> str:
    return f"{n:016x}"


async def test_people_s_scores_are_read_in_pages_and_then_only_what_changed(langfuse: LangfuseServer) -> None:
    now = time.time()
    for n in range(120):  # a person's verdicts on 120 runs: two v3 requests, three label pages
        langfuse.add_score("Relevance", n % 2, data_type="BOOLEAN", trace_id=TRACE, observation_id=span(n),
                           author="user-ana", timestamp=now - 3600 - n)
    trace_label = langfuse.add_score("Relevance", "fail", data_type="CATEGORICAL", trace_id="cd" * 16,
                                     comment="off topic", author="user-bob", timestamp=now - 60)
    session_label = langfuse.add_score("Goal met", 4, session_id="chat-1", author="user-ana", timestamp=now - 30)
    langfuse.add_score("Relevance", 1, data_type="BOOLEAN", trace_id=TRACE, observation_id=span(999),
                       timestamp=now - 2 * DAY)  # given before the window: not read by a first pull
    for source in ("API", "EVAL"):  # a script's and Langfuse's own judge's scores of the same runs
        langfuse.add_score("Relevance", 0.1, source=source, trace_id=TRACE, observation_id=span(0))
    sink = LangfuseSink(LangfuseSinkConfig(host=langfuse.url, public_key=langfuse.public_key,
                                           secret_key=langfuse.secret_key))
    async with aiohttp.ClientSession() as session:  # tracescore's own score, as its sink writes it
        own = ScoreRecord("k", TRACE, span(1), "ef" * 8, "relevance", "Relevance", "1", score=0.9, reason="fine")
        assert (await sink.send(session, own)).verdict is Verdict.SENT
    assert len(langfuse.stored_scores()) == 126

    labels = reader(langfuse, page_size=50)
    pages = await pull(labels, None)
    fresh = Cursor.load(None, []).dump()
    assert [len(page) for page, _ in pages] == [50, 50, 22]
    assert [cursor for _, cursor in pages[:-1]] == [fresh, fresh]  # a pull that fails half-way starts over
    first = [label for page, _ in pages for label in page]
    assert len({label.source_id for label in first}) == 122 and labels.skipped == 0
    by_id = {label.source_id: label for label in first}
    assert {label.source for label in first} == {"langfuse"}
    runs = [label for label in first if label.span_id]
    assert sorted(label.span_id for label in runs) == sorted(span(n) for n in range(120))
    assert {(label.trace_id, label.annotator, label.session_id) for label in runs} == {(TRACE, "user-ana", None)}
    assert {label.value for label in runs} == {True, False} and all(isinstance(x.value, bool) for x in runs)
    assert by_id[trace_label] == Label("Relevance", "cd" * 16, None, None, "fail", "langfuse", annotator="user-bob",
                                       rationale="off topic", at=by_id[trace_label].at, source_id=trace_label)
    assert (by_id[session_label].item, by_id[session_label].value) == ("session:chat-1", 4.0)
    assert by_id[session_label].name == "Goal met"  # every name is read: the caller counts unknown ones
    assert abs(by_id[session_label].at - now) < 5  # when it was given (or last changed)
    queries = langfuse.score_queries
    assert len(queries) == 2 and all(q["endpoint"] == "v3" and q["source"] == "ANNOTATION" for q in queries)
    assert all(q["limit"] == "100" and "subject" in q["fields"] and q["fromTimestamp"] for q in queries)
    assert "cursor" not in queries[0] and queries[1]["cursor"]

    again = await pull(labels, pages[-1][1])
    assert [page for page, _ in again] == [[]]  # nothing new: one empty page, with the cursor to keep
    # A person changes an old verdict (its timestamp stays, updatedAt moves) and gives a new one.
    langfuse.add_score("Relevance", 1, data_type="BOOLEAN", score_id=runs[-1].source_id, trace_id=TRACE,
                       observation_id=runs[-1].span_id, author="user-ana", updated_at=time.time() + 1)
    new = langfuse.add_score("Relevance", 0, data_type="BOOLEAN", trace_id=TRACE, observation_id=span(500),
                             author="user-cy")
    changed = await pull(labels, again[0][1])
    assert len(changed) == 1
    assert sorted((x.source_id, x.value) for x in changed[0][0]) == sorted([(runs[-1].source_id, True), (new, False)])
    assert [page for page, _ in await pull(labels, changed[0][1])] == [[]]
    assert json.loads(changed[0][1])["mark"] <= time.time()  # the edit stamped in the future moves it to now only


async def test_v2_pages_where_v3_is_missing(langfuse: LangfuseServer) -> None:
    langfuse.v3_scores = False  # a Langfuse before 3.179
    for n in range(101):
        langfuse.add_score("Relevance", "good" if n else "bad", data_type="CATEGORICAL", trace_id=TRACE,
                           observation_id=span(n), author="user-ana")
    langfuse.add_score("Relevance", 0, data_type="BOOLEAN", session_id="chat-2", comment="no")
    langfuse.add_score("Relevance", 0.5, source="API", trace_id=TRACE, observation_id=span(1))
    pages = await pull(reader(langfuse), None)
    found = {label.source_id: label for page, _ in pages for label in page}
    assert len(found) == 102
    assert sorted({(x.value, x.span_id is None) for x in found.values()}, key=str) == sorted(
        [("bad", False), ("good", False), (False, True)], key=str)
    (session,) = [x for x in found.values() if x.session_id]
    assert (session.value, session.rationale, session.item) == (False, "no", "session:chat-2")
    assert [q["endpoint"] for q in langfuse.score_queries] == ["v3", "v2", "v2"]
    assert [q.get("page") for q in langfuse.score_queries[1:]] == ["1", "2"]


async def test_rows_not_shaped_like_langfuse_s_are_skipped_and_counted(
        langfuse: LangfuseServer, caplog: pytest.LogCaptureFixture) -> None:
    good = langfuse.add_score("Relevance", 1, trace_id=TRACE, observation_id=span(1))
    stamp = "2026-12-01T00:00:00.000Z"
    langfuse.odd_rows = ["garbage", {"id": "no-name"}, {"id": "s-9", "name": "Relevance", "source": "ANNOTATION",
                                                          "dataType": "NUMERIC", "value": "high", "updatedAt": stamp,
                                                          "traceId": TRACE},
                         {"id": "s-8", "name": "Relevance", "source": "ANNOTATION", "dataType": "NUMERIC", "value": 1,
                          "updatedAt": "yesterday", "traceId": TRACE},
                         {"id": "s-7", "name": "Relevance", "source": "ANNOTATION", "dataType": "NUMERIC", "value": 1,
                          "updatedAt": stamp}]
    labels = reader(langfuse)
    with caplog.at_level("WARNING", logger="collector.receive.labels.reader"):
        pages = await pull(labels, None)
    assert [x.source_id for page, _ in pages for x in page] == [good]
    assert labels.skipped == 5
    (said,) = [r.getMessage() for r in caplog.records]  # one warning a pull, naming the first
    assert said.startswith("langfuse labels: skipped a row not shaped like the API's") and "garbage" in said


async def test_refused_keys_and_an_outage_are_one_clear_error(langfuse: LangfuseServer) -> None:
    with pytest.raises(PullError) as refused:
        await pull(reader(langfuse, secret="sk-wrong"), None)
    message = str(refused.value)
    assert refused.value.status == 401 and "sk-wrong" not in message
    assert message.startswith(f"GET {langfuse.url}/api/public/v3/scores") and "HTTP 401: Invalid credentials" in message

    for n in range(150):
        langfuse.add_score("Relevance", n, trace_id=TRACE, observation_id=span(n))
    labels = reader(langfuse, page_size=100)
    kept: list[tuple[list[Label], str]] = []
    with pytest.raises(PullError, match=r"HTTP 503: down \(after 2 attempts\)"):
        async for page in labels.pages(None, DAY, []):
            kept.append(page)
            langfuse.down = True  # Langfuse goes away after its first answer
    assert [len(page) for page, _ in kept] == [100]  # the labels of the first answer stay kept
    langfuse.down, langfuse.garbage = False, True  # a proxy's error page
    with pytest.raises(PullError, match=r"the answer is not JSON: '<html>gateway</html>'"):
        await pull(labels, kept[-1][1])
    langfuse.garbage = False
    retried = await pull(labels, kept[-1][1])  # the next poll, from the cursor kept: every label
    assert len({x.source_id for page, _ in retried for x in page}) == 150
