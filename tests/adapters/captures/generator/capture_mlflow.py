"""Capture MLflow tracing over OTLP: ``python capture_mlflow.py native|genai|native-tags SCENARIO OUTDIR``.

Needs mlflow (or mlflow-tracing), openai and opentelemetry-exporter-otlp-proto-http; a
throwaway environment, never the project's. A small weather agent traced as a user would:
``mlflow.openai.autolog()`` (one ``CHAT_MODEL`` span per chat completion), the agent under
``@mlflow.trace(span_type=SpanType.AGENT)`` and its tool under ``span_type=SpanType.TOOL``.
MLflow exports over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, here to
`otlp_sink` on loopback; the model is `fake_openai`. ``native``: ``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV``
unset, MLflow's own ``mlflow.*`` attributes; ``genai``: set to ``true``, MLflow translates them
to the OpenTelemetry GenAI conventions before export.

The session: ``mlflow.update_current_trace(session_id=...)`` as MLflow documents it (trace
metadata ``mlflow.trace.session``, which the OTLP export leaves out), and ``session.id`` set
on the agent span (exported, JSON-encoded like every value set through MLflow; MLflow's own
server reads it as the trace's session). ``native-tags`` names it with a trace tag instead, as
MLflow 3.0's docs did (``tags={"session_id": ...}``): exported as ``mlflow.traceTag.session_id``
on the root span, but with opentelemetry-sdk 1.43 or later MLflow 3.17.2 fails to end that span
("Cannot mutate immutable BoundedAttributes") and the agent span is lost, so that variant was
made with opentelemetry-sdk 1.42.

S1 is the tool round trip (``What is the weather in Paris?``); S2 is the second turn of a
two-turn session (``My name is Ada.``, then ``What is my name?`` with the first turn as
history): only the second turn's trace is kept. Every export request the sink received is
merged into one ``ExportTraceServiceRequest`` (``<SCENARIO>.pb``); the ground truth is what
`fake_openai` saw in the kept turn (``<SCENARIO>.expected.json``).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import threading
from http.server import ThreadingHTTPServer
from typing import Any

import fake_openai
import groundtruth
import otlp_sink

SESSION = "weather-chat-7"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TURNS = {"S1": [groundtruth.PROMPTS["S3"]], "S2": ["My name is Ada.", groundtruth.PROMPTS["S2"]]}
PACKAGES = ["mlflow", "mlflow-skinny", "mlflow-tracing", "opentelemetry-exporter-otlp-proto-http"]
_NATIVE = (
    "MLflow's native OTLP export (its OtelSpanProcessor; MLFLOW_ENABLE_OTEL_GENAI_SEMCONV unset). Every span INTERNAL, "
    "scope `mlflow.tracing.provider`, resource telemetry.sdk.name = mlflow: `weather_agent` (mlflow.spanType = "
    "'\"AGENT\"', the root) -> `Completions` (CHAT_MODEL, one per chat completion, from mlflow.openai.autolog) and, "
    "in S1, `get_weather` (TOOL). Every value MLflow sets is JSON text, strings included. CHAT_MODEL: "
    "mlflow.spanInputs = the request's keyword arguments {model, messages, tools, temperature} (OpenAI chat messages, "
    "a replayed tool call and its role-tool result included), mlflow.spanOutputs = the whole ChatCompletion, "
    "mlflow.chat.tools = the tool definitions, mlflow.message.format = '\"openai\"', mlflow.llm.model, "
    "mlflow.chat.tokenUsage = {input_tokens, output_tokens, total_tokens}, and the request's own keyword arguments "
    "again as plain attributes (model, tools, temperature; JSON). AGENT and TOOL spans: mlflow.spanFunctionName, "
    "mlflow.spanInputs = the function's bound arguments as a JSON object ({question, history} / {city}), "
    "mlflow.spanOutputs = its JSON-encoded return value; no tool call id on the TOOL span. The trace's metadata "
    "(mlflow.trace.session, set by update_current_trace(session_id=...)) is NOT exported over OTLP; the session "
    "is the agent span's session.id, set with span.set_attribute and so JSON-encoded too ('\"weather-chat-7\"')."
)
_GENAI = (
    "MLflow's GenAI-semconv OTLP export (MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true): the same spans translated before "
    "export, every mlflow.* attribute dropped (mlflow.traceTag.* kept). `invoke_agent weather_agent` (INTERNAL, "
    "gen_ai.operation.name = invoke_agent, gen_ai.agent.name; no messages) -> `chat gpt-4o-mini` (CLIENT: "
    "gen_ai.input.messages / gen_ai.output.messages in the parts format, the system prompt in "
    "gen_ai.system_instructions, gen_ai.tool.definitions, usage, response id) and `execute_tool get_weather` "
    "(gen_ai.tool.name, gen_ai.tool.call.arguments, gen_ai.tool.call.result = the JSON-encoded return value; no call "
    "id). Attributes not MLflow's stay as set: the agent span's session.id is still JSON text ('\"weather-chat-7\"'), "
    "and the request's keyword arguments (model, tools, temperature) are still on the chat spans."
)
_TAGS = _NATIVE.replace(
    "the session is the agent span's session.id, set with span.set_attribute and so JSON-encoded too "
    "('\"weather-chat-7\"').",
    "the session is the trace tag session_id, exported on the root span only as mlflow.traceTag.session_id = "
    "'weather-chat-7' (plain text: MLflow writes the tags itself when the root span ends; opentelemetry-sdk < 1.43).")
NOTES = {"native": _NATIVE, "genai": _GENAI, "native-tags": _TAGS}


def start_sink(prefix: str) -> tuple[ThreadingHTTPServer, str]:
    """`otlp_sink` on a free loopback port in a thread: ``(server, traces endpoint)``."""
    otlp_sink.Sink.prefix = prefix
    server = ThreadingHTTPServer(("127.0.0.1", 0), otlp_sink.Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1/traces"


def merged_request(prefix: str, trace_id: bytes) -> tuple[Any, int, list[str]]:
    """The spans of one trace from every request the sink wrote, as one request: ``(request, n requests, names)``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = ExportTraceServiceRequest()
    files = sorted(glob.glob(prefix + ".*"), key=lambda p: int(p[len(prefix) + 1:].split(".")[0]))
    names: list[str] = []
    for path in files:
        req = ExportTraceServiceRequest()
        with open(path, "rb") as fh:
            req.ParseFromString(fh.read())
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                spans = [s for s in ss.spans if s.trace_id == trace_id]
                if not spans:
                    continue
                target_rs = next((r for r in out.resource_spans if r.resource == rs.resource), None)
                if target_rs is None:
                    target_rs = out.resource_spans.add()
                    target_rs.resource.CopyFrom(rs.resource)
                    target_rs.schema_url = rs.schema_url
                target_ss = next((s for s in target_rs.scope_spans if s.scope == ss.scope), None)
                if target_ss is None:
                    target_ss = target_rs.scope_spans.add()
                    target_ss.scope.CopyFrom(ss.scope)
                    target_ss.schema_url = ss.schema_url
                target_ss.spans.extend(spans)
                names += [f"{s.name} [{ss.scope.name}]" for s in spans]
    for rs in out.resource_spans:
        for ss in rs.scope_spans:
            ordered = sorted(ss.spans, key=lambda s: s.start_time_unix_nano)
            del ss.spans[:]
            ss.spans.extend(ordered)
    return out, len(files), names


def main(mode: str, scenario: str, outdir: str) -> None:
    fake_openai.ANSWERS["My name is Ada."] = "Nice to meet you, Ada."  # the first turn of S2
    base = fake_openai.start()
    prefix = os.path.join(tempfile.mkdtemp(prefix="mlflow-otlp-"), "req")
    server, endpoint = start_sink(prefix)
    os.environ.update({
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": f"gen-mlflow-{mode}",
        "OPENAI_BASE_URL": base,
        "OPENAI_API_KEY": "sk-test",
        "MLFLOW_TRACKING_URI": "file://" + tempfile.mkdtemp(prefix="mlflow-store-"),
    })
    if mode == "genai":
        os.environ["MLFLOW_ENABLE_OTEL_GENAI_SEMCONV"] = "true"
    import mlflow
    import openai
    from mlflow.entities import SpanType

    mlflow.openai.autolog()
    client = openai.OpenAI()
    trace_ids: list[str] = []

    @mlflow.trace(span_type=SpanType.TOOL)
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        return groundtruth.get_weather(city)

    @mlflow.trace(span_type=SpanType.AGENT)
    def weather_agent(question: str, history: list[dict[str, Any]]) -> str:
        span = mlflow.get_current_active_span()
        if mode == "native-tags":
            mlflow.update_current_trace(session_id=SESSION, tags={"session_id": SESSION})
        else:
            mlflow.update_current_trace(session_id=SESSION)  # trace metadata: not exported over OTLP
            span.set_attribute("session.id", SESSION)  # what an OTLP receiver gets (MLflow's server reads it too)
        trace_ids.append(span.trace_id)
        messages: list[Any] = [{"role": "system", "content": groundtruth.SYSTEM}, *history,
                               {"role": "user", "content": question}]
        for _ in range(4):
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS,
                                                   temperature=0).choices[0].message
            if not reply.tool_calls:
                return reply.content or ""
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = get_weather(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return ""

    history: list[dict[str, Any]] = []
    for question in TURNS[scenario]:
        fake_openai.LOG.clear()
        groundtruth.TOOL_RESULTS.clear()
        answer = weather_agent(question, history)
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    from mlflow.tracing.provider import provider

    provider.get().force_flush()  # MLflow's own tracer provider: its OTLP batch processor sends now
    otel_id = bytes.fromhex(trace_ids[-1].removeprefix("tr-"))
    request, n_requests, names = merged_request(prefix, otel_id)
    server.shutdown()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{scenario}.pb"), "wb") as fh:
        fh.write(request.SerializeToString())
    truth = groundtruth.expected("S3" if scenario == "S1" else "S2", HISTORY_OF[scenario])
    truth["span_kind_notes"] = NOTES[mode]
    truth["capture"] = {"export_requests": n_requests, "content_type": "application/x-protobuf",
                        "transport": "OTLP/HTTP to generator/otlp_sink.py, merged to the kept trace", "spans": names}
    truth["session"] = {"id": SESSION, "not_exported": "mlflow.trace.session (trace metadata)",
                        "carried_by": "mlflow.traceTag.session_id on the root span" if mode == "native-tags"
                        else "session.id on the agent span (JSON text)"}
    from importlib import metadata

    versions = {}
    for name in ["opentelemetry-sdk", "openai", *PACKAGES]:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    truth["generator"] = {"script": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                          "python": sys.version.split()[0], "packages": versions}
    with open(os.path.join(outdir, f"{scenario}.expected.json"), "w") as fh:
        json.dump(truth, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(outdir, scenario, len(names), "spans", n_requests, "requests", len(fake_openai.LOG), "model requests")


HISTORY_OF: dict[str, list[dict[str, Any]]] = {"S1": [], "S2": groundtruth.HISTORY}

if __name__ == "__main__":
    main(*sys.argv[1:4])
