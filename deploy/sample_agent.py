"""A sample agent for the compose demo: it sends one agent run's trace every few seconds.

Each trace is what an instrumented agent exports with the OpenTelemetry GenAI conventions:
an ``invoke_agent`` span with a ``chat`` span under it, carrying the messages. The OTLP
exporter reads ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``http://tracescore:4317`` in compose), so
the traces go to tracescore, which scores them and forwards them to the trace backend.

    python sample_agent.py                 # for ever, one run every INTERVAL_S (default 5) seconds
    python sample_agent.py --count 3 --interval 0
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

# (question, answer): a good answer, a long-winded one, an empty one, so scores differ.
CONVERSATIONS = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How do I reset my password?", "Open Settings, choose Security, then Reset password. " * 12),
    ("Which plan includes SSO?", ""),
    ("What are your opening hours?", "We are open from 9:00 to 17:00, Monday to Friday."),
]


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def send_run(provider: TracerProvider, question: str, answer: str) -> None:
    """Export one agent run (invoke_agent -> chat) through ``provider``."""
    tracer = provider.get_tracer("sample-agent")
    attrs = {"gen_ai.input.messages": _messages("user", question),
             "gen_ai.output.messages": _messages("assistant", answer)}
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", **attrs}):
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", **attrs}):
            time.sleep(0.05)


def main() -> None:
    """Send ``--count`` runs (0: for ever), ``--interval`` seconds apart."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=0, help="runs to send (0: for ever)")
    parser.add_argument("--interval", type=float, default=float(os.environ.get("INTERVAL_S", "5")))
    args = parser.parse_args()
    provider = TracerProvider(resource=Resource({"service.name": "sample-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_* variables
    runs = itertools.cycle(CONVERSATIONS)
    for n in itertools.count(1):
        question, answer = next(runs)
        send_run(provider, question, answer)
        print(f"sent run {n}: {question}", flush=True)
        if args.count and n >= args.count:
            break
        time.sleep(args.interval)
    provider.shutdown()


if __name__ == "__main__":
    main()
