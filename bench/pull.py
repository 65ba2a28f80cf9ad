"""``tracescore score --from phoenix+...`` (SPEC §10, issue 23): traces pulled and scored per second
from a real Phoenix, and the command's peak memory.

Starts Phoenix from the virtualenv ``make backends`` made (on free loopback ports, its data in a
temporary folder), posts N agent traces (``--traces``; each an ``invoke_agent`` span over a
``chat`` span, GenAI conventions, as the OpenTelemetry SDK's OTLP/HTTP exporter encodes them:
one SDK-made trace copied with fresh ids, 100 traces a request) into a project of their own,
waits until Phoenix lists them all, then runs ``tracescore score --from phoenix+URL/PROJECT``
as a user would (a fresh process; the built-in code scorer ``completeness``, or the
``--scorer`` refs given; ``--format jsonl`` to a file) and prints, per page size
(``--page-size``, repeatable; default 100):

    pull: N traces, page P: T s, X traces/s pulled and scored, peak RSS M MB

The command's wall time includes its start (about a second: imports). Peak RSS is the child's
``ru_maxrss``: a run over more traces with the same page size should peak about the same (a
page at a time is held).

    .venv/bin/python bench/pull.py --traces 2000
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests" / "backends"), str(REPO / "tests" / "support")]

from backends_support import Phoenix, agent_trace_body, poll  # noqa: E402


def requests(project: str, traces: int, per_request: int = 100) -> list[bytes]:
    """``traces`` agent runs as OTLP/HTTP bodies: one SDK-made trace, copied with fresh ids."""
    body, _, _ = agent_trace_body("The capital of France is Paris.", {"openinference.project.name": project})
    template = ExportTraceServiceRequest()
    template.ParseFromString(body)
    out = []
    for start in range(0, traces, per_request):
        request = ExportTraceServiceRequest()
        for _ in range(min(per_request, traces - start)):
            trace_id = secrets.token_bytes(16)
            ids = {span.span_id: secrets.token_bytes(8) for rs in template.resource_spans
                   for ss in rs.scope_spans for span in ss.spans}
            copy = request.resource_spans.add()
            copy.CopyFrom(template.resource_spans[0])
            for ss in copy.scope_spans:
                for span in ss.spans:
                    span.trace_id = trace_id
                    span.span_id = ids[span.span_id]
                    if span.parent_span_id:
                        span.parent_span_id = ids[span.parent_span_id]
        out.append(request.SerializeToString())
    return out


def run_pull(url: str, page_size: int, scorers: list[str], workdir: Path) -> tuple[float, float, int]:
    """One ``score --from`` run: wall seconds, its peak RSS in MB, and the rows it printed."""
    refs = [arg for ref in scorers for arg in ("--scorer", ref)]
    out, err = workdir / f"rows-{page_size}.jsonl", workdir / f"err-{page_size}.txt"
    start = time.perf_counter()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "collector.cli", "score", "--from", url, *refs,
                                 "--format", "jsonl", "--page-size", str(page_size),
                                 "--cursor", str(workdir / f"cursor-{page_size}.json")],
                                stdout=stdout, stderr=stderr, cwd=workdir,
                                env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (Phoenix is a child too)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"score --from failed ({proc.returncode}): {err.read_text()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, len(out.read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--page-size", type=int, action="append", default=None)
    parser.add_argument("--scorer", action="append", default=None,
                        help="scorer refs (default: scorers.builtin:completeness)")
    args = parser.parse_args()
    scorers = args.scorer or ["scorers.builtin:completeness"]
    with tempfile.TemporaryDirectory(prefix="tracescore-bench-pull-") as folder:
        workdir = Path(folder)
        phoenix = Phoenix(workdir)
        phoenix.start()
        try:
            project = f"bench-{secrets.token_hex(4)}"
            for body in requests(project, args.traces):
                reply = httpx.post(f"{phoenix.url}/v1/traces", content=body, timeout=120,
                                   headers={"Content-Type": "application/x-protobuf"})
                reply.raise_for_status()

            poll(lambda: _count(phoenix.url, project) >= args.traces, 300, f"Phoenix to hold {args.traces} traces", every=1.0)
            for page_size in args.page_size or [100]:
                elapsed, peak_mb, rows = run_pull(f"phoenix+{phoenix.url}/{project}", page_size, scorers, workdir)
                print(f"pull: {args.traces} traces, page {page_size}: {elapsed:.1f} s, "
                      f"{args.traces / elapsed:.0f} traces/s pulled and scored, peak RSS {peak_mb:.0f} MB "
                      f"({rows} rows)", flush=True)
        finally:
            phoenix.process.stop()


def _count(url: str, project: str) -> int:
    """How many traces Phoenix lists in the project (paging through its traces endpoint)."""
    total, cursor = 0, None
    while True:
        params: dict[str, str | int] = {"limit": 1000}
        if cursor:
            params["cursor"] = cursor
        reply = httpx.get(f"{url}/v1/projects/{project}/traces", params=params, timeout=60)
        if reply.status_code != 200:
            return 0
        body = reply.json()
        total += len(body.get("data", []))
        cursor = body.get("next_cursor")
        if not cursor:
            return total


if __name__ == "__main__":
    main()
