"""Score export over OTLP/gRPC with spans encoded in their place in the request
(`collector.export.evaluation.encode_spans`), to a real OTLP/gRPC backend: a record that cannot
become a span is dropped from the outbox without leaving a trace in the request, and the others
are sent."""

from __future__ import annotations

from pathlib import Path

from daemon_harness import CaptureBackend

from collector.common.metrics import Metrics
from collector.common.types import Done, RunRecord, ScoreJob, ScoreRecord
from collector.config import ExportConfig
from collector.export.scores import ScoreExporter
from collector.store.sqlite.store import SqliteStore

TRACE = "5b8efff798038103d269b633813fc60c"


def _record(job: ScoreJob, n: int, **kw: object) -> ScoreRecord:
    base: dict = dict(key=job.key, trace_id=TRACE, span_id=job.run.span_id, score_span_id=f"{n + 1:016x}",
                      scorer_id="quality", scorer_name="Quality", run_id=f"run-{n}", score=0.5,
                      start_ns=1_000, end_ns=2_000, resource={"service.name": "bot"})
    base.update(kw)
    return ScoreRecord(**base)


async def test_an_unexportable_record_is_dropped_and_leaves_nothing_in_the_request(tmp_path: Path) -> None:
    backend = await CaptureBackend().start()
    store = SqliteStore(str(tmp_path / "q.db"))
    await store.start()
    metrics = Metrics()
    exporter = ScoreExporter(store, ExportConfig(endpoint=backend.endpoint), metrics)
    await exporter.course.open()
    try:
        jobs = [ScoreJob(RunRecord(TRACE, f"{i + 1:016x}"), "quality", "1") for i in range(3)]
        await store.put(jobs)
        leased = sorted(await store.take(3), key=lambda lease: lease.job.run.span_id)
        # The first record, alone on its resource, cannot become a span (its trace id is no hex).
        await store.settle(leased[0], Done(_record(leased[0].job, 0, trace_id="not-hex",
                                                   resource={"service.name": "broken"})))
        for n, lease in enumerate(leased[1:], start=1):
            await store.settle(lease, Done(_record(lease.job, n)))
        assert await exporter.round() == 3  # two sent, one dropped
        assert await store.pending(10) == []  # the broken record is dropped, not retried forever
        (request,) = backend.requests
        assert [[kv.value.string_value for kv in rs.resource.attributes] for rs in request.resource_spans] == [["bot"]]
        spans = request.resource_spans[0].scope_spans[0].spans
        assert sorted(span.parent_span_id.hex() for span in spans) == [f"{2:016x}", f"{3:016x}"]
        assert all(span.trace_id.hex() == TRACE and len(span.events) == 1 for span in spans)
        assert b'tracescore_errors_total{component="export"} 1.0' in metrics.render()
    finally:
        await exporter.course.close()
        await store.shutdown()
        await backend.stop()
