"""`SavedRequests` (``[receiver] save_dir``): a request is handed on first and saved only once
accepted; a write that fails never fails the request, is said once, and saving resumes when the
directory takes files again; what is saved reads back as the request."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from adapters import read_logs_file, read_trace_file
from collector.common.errors import QueueFull
from collector.common.types import Accepted
from collector.receive.save import SavedRequests


class Taker:
    """The next stage: takes requests, or refuses them (full) when told to."""

    def __init__(self) -> None:
        self.full = False
        self.taken = 0

    async def consume_traces(self, request: ExportTraceServiceRequest, raw: bytes | None = None) -> Accepted:
        if self.full:
            raise QueueFull("full", retry_after_s=1.0)
        self.taken += 1
        return Accepted(1)

    async def consume_logs(self, request: ExportLogsServiceRequest) -> Accepted:
        self.taken += 1
        return Accepted(1)


def request(name: str) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add().spans.add(name=name, trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    return req


def files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


async def test_only_accepted_requests_are_saved_and_read_back_as_sent(tmp_path: Path) -> None:
    taker = Taker()
    saved = SavedRequests(taker, tmp_path / "otlp", max_bytes=1 << 20)
    await saved.consume_traces(request("first"))
    await saved.consume_traces(request("raw"), request("raw").SerializeToString())
    logs = ExportLogsServiceRequest()
    logs.resource_logs.add().scope_logs.add().log_records.add(event_name="gen_ai.choice")
    await saved.consume_logs(logs)
    taker.full = True
    with pytest.raises(QueueFull):
        await saved.consume_traces(request("refused"))
    written = files(tmp_path / "otlp")
    assert len(written) == 3
    traces = [read_trace_file(p) for p in written if not p.name.endswith(".logs.pb")]
    assert [t.resource_spans[0].scope_spans[0].spans[0].name for t in traces] == ["first", "raw"]
    (logs_file,) = [p for p in written if p.name.endswith(".logs.pb")]
    assert read_logs_file(logs_file) == logs


async def test_a_failing_write_never_fails_the_request_and_is_said_once(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "otlp"
    taker = Taker()
    saved = SavedRequests(taker, folder, max_bytes=1 << 20)
    shutil.rmtree(folder)  # the disk goes away under the daemon
    with caplog.at_level(logging.WARNING, logger="collector.receive.save"):
        for _ in range(3):
            assert await saved.consume_traces(request("kept")) == Accepted(1)
        folder.mkdir()
        await saved.consume_traces(request("again"))
    assert taker.taken == 4
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "failed (the requests are accepted all the same)" in messages[0]
    assert messages[1].endswith("works again")
    assert len(files(folder)) == 1
