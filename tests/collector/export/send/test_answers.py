"""The one reading of a backend's answer (`collector.export.send.answers`), every class of answer,
HTTP and gRPC, with the bodies real backends send (MLflow 3.17, Phoenix 20.26, FastAPI, nginx)."""

from __future__ import annotations

import pytest

from collector.export.send.answers import (
    Verdict,
    backend_message,
    classify_error,
    classify_grpc,
    classify_http,
    no_route,
)

MLFLOW_NO_EXPERIMENT = ('{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"No Experiment with id=1 exists",'
                        '"sqlstate":"KAM00","error_class":"RESOURCE_NOT_FOUND"}')
MLFLOW_NO_TRACE = ('{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "Trace with ID '
                   "'tr-abababababababababababababababab' not found.\"}")
FLASK_404 = ('<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n<p>The requested URL '
             "was not found on the server.</p>\n")
MLFLOW_NO_HEADER = '{"detail":[{"type":"missing","loc":["header","x-mlflow-experiment-id"],"msg":"Field required"}]}'


@pytest.mark.parametrize(("status", "body", "verdict", "cause"), [
    (200, "", Verdict.SENT, ""),
    (204, "", Verdict.SENT, ""),
    # an outage: kept, sent again
    (0, "ConnectionRefusedError: [Errno 111] Connection refused", Verdict.RETRY,
     "ConnectionRefusedError: [Errno 111] Connection refused"),
    (408, "", Verdict.RETRY, "HTTP 408 Request Timeout"),
    (409, "", Verdict.RETRY, "HTTP 409 Conflict"),
    (425, "", Verdict.RETRY, "HTTP 425 Too Early"),
    (429, "slow down", Verdict.RETRY, "HTTP 429 Too Many Requests: slow down"),
    (500, '{"message": "constraint violation"}', Verdict.RETRY, "HTTP 500 Internal Server Error: constraint violation"),
    (502, "<html><title>502 Bad Gateway</title></html>", Verdict.RETRY, "HTTP 502 Bad Gateway"),
    (503, "", Verdict.RETRY, "HTTP 503 Service Unavailable"),
    (504, "", Verdict.RETRY, "HTTP 504 Gateway Timeout"),
    # a configuration to fix: kept, sent again, reported with the fix
    (401, '{"error": {"message": "bad key"}}', Verdict.HOLD, "HTTP 401 Unauthorized: bad key"),
    (403, "", Verdict.HOLD, "HTTP 403 Forbidden"),
    (407, "", Verdict.HOLD, "HTTP 407 Proxy Authentication Required"),
    (404, MLFLOW_NO_EXPERIMENT, Verdict.HOLD, "HTTP 404 Not Found: No Experiment with id=1 exists"),
    (404, FLASK_404, Verdict.HOLD, "HTTP 404 Not Found"),  # MLflow: a path it does not serve
    (405, "Method Not Allowed", Verdict.HOLD, "HTTP 405 Method Not Allowed"),  # Phoenix: the same
    (501, "", Verdict.HOLD, "HTTP 501 Not Implemented"),
    (501, '{"detail": "REST OTLP span logging is not supported by FileStore"}', Verdict.HOLD,
     "HTTP 501 Not Implemented: REST OTLP span logging is not supported by FileStore"),
    (308, "", Verdict.HOLD, "HTTP 308 Permanent Redirect"),
    # refused for good: dropped, counted, logged
    (400, '{"detail":"Invalid OpenTelemetry format"}', Verdict.REFUSE, "HTTP 400 Bad Request: Invalid OpenTelemetry format"),
    (413, "", Verdict.REFUSE, "HTTP 413 Request Entity Too Large"),
    (415, "Unsupported content type: application/json", Verdict.REFUSE,
     "HTTP 415 Unsupported Media Type: Unsupported content type: application/json"),
    (422, MLFLOW_NO_HEADER, Verdict.REFUSE,
     "HTTP 422 Unprocessable Entity: header x-mlflow-experiment-id: Field required"),
    (410, "", Verdict.REFUSE, "HTTP 410 Gone"),
])
def test_http_answers(status: int, body: str, verdict: Verdict, cause: str) -> None:
    answer = classify_http(status, body)
    assert (answer.verdict, answer.cause, answer.status) == (verdict, cause, status)
    assert bool(answer.fix) == (verdict is Verdict.HOLD)  # a hold says what to change, nothing else does


def test_a_404_means_what_the_api_says_it_means() -> None:
    """A 404 naming what is missing: a hold for OTLP (an experiment), a wait for a score API (the
    span is on its way); a 404 or 405 naming nothing (no such route) follows ``no_route``, whatever
    ``not_found`` says: a score API at a wrong URL is held, forwarded logs to a backend without
    logs are refused."""
    assert classify_http(404, MLFLOW_NO_TRACE, not_found=Verdict.WAIT).verdict is Verdict.WAIT
    assert classify_http(404, "Spans with IDs ab do not exist.", not_found=Verdict.WAIT).verdict is Verdict.WAIT
    assert classify_http(404, FLASK_404, not_found=Verdict.WAIT).verdict is Verdict.HOLD
    assert classify_http(404, FLASK_404, no_route=Verdict.REFUSE).verdict is Verdict.REFUSE
    assert classify_http(405, "Method Not Allowed", no_route=Verdict.REFUSE).verdict is Verdict.REFUSE
    assert classify_http(501, '{"detail": "logs are not supported"}', no_route=Verdict.REFUSE).verdict is Verdict.REFUSE
    assert classify_http(404, MLFLOW_NO_EXPERIMENT, no_route=Verdict.REFUSE).verdict is Verdict.HOLD
    assert "create it" in classify_http(404, MLFLOW_NO_EXPERIMENT).fix
    assert "check the URL" in classify_http(404, FLASK_404).fix
    assert "credentials" in classify_http(401).fix


@pytest.mark.parametrize(("status", "body", "expected"), [
    (404, FLASK_404, True), (404, '{"detail": "Not Found"}', True), (404, "404 page not found", True),
    (404, "", True), (405, "Method Not Allowed", True), (501, "Not Implemented", True),
    (404, MLFLOW_NO_EXPERIMENT, False), (404, "Project with name agents not found", False),
    (501, '{"detail": "REST OTLP span logging is not supported by FileStore"}', False), (400, "", False),
])
def test_no_route_is_an_answer_that_names_nothing(status: int, body: str, expected: bool) -> None:
    assert no_route(status, body) is expected


def test_retry_after_is_kept() -> None:
    assert classify_http(429, "", retry_after_s=3.0).retry_after_s == 3.0


@pytest.mark.parametrize(("code", "details", "verdict"), [
    ("OK", "", Verdict.SENT),
    ("UNAVAILABLE", "failed to connect to all addresses", Verdict.RETRY),
    ("DEADLINE_EXCEEDED", "Deadline Exceeded", Verdict.RETRY),
    ("ABORTED", "", Verdict.RETRY),
    ("CANCELLED", "", Verdict.RETRY),
    ("OUT_OF_RANGE", "", Verdict.RETRY),
    ("DATA_LOSS", "", Verdict.RETRY),
    ("RESOURCE_EXHAUSTED", "queue full", Verdict.RETRY),
    ("INTERNAL", "", Verdict.RETRY),
    ("UNKNOWN", "", Verdict.RETRY),
    ("ALREADY_EXISTS", "", Verdict.RETRY),
    ("UNAUTHENTICATED", "missing token", Verdict.HOLD),
    ("PERMISSION_DENIED", "", Verdict.HOLD),
    ("NOT_FOUND", "no such project", Verdict.HOLD),
    ("UNIMPLEMENTED", "", Verdict.HOLD),
    ("INVALID_ARGUMENT", "bad span", Verdict.REFUSE),
    ("FAILED_PRECONDITION", "", Verdict.REFUSE),
    ("RESOURCE_EXHAUSTED", "Received message larger than max (5000000 vs. 4194304)", Verdict.REFUSE),
])
def test_grpc_answers(code: str, details: str, verdict: Verdict) -> None:
    answer = classify_grpc(code, details)
    assert answer.verdict is verdict and answer.status == code
    assert answer.cause == (f"gRPC {code}: {details}" if details else ("" if code == "OK" else f"gRPC {code}"))
    assert bool(answer.fix) == (verdict is Verdict.HOLD)


def test_grpc_not_found_and_unimplemented_follow_the_api() -> None:
    assert classify_grpc("NOT_FOUND", "span", not_found=Verdict.WAIT).verdict is Verdict.WAIT
    assert classify_grpc("UNIMPLEMENTED", "", no_route=Verdict.REFUSE).verdict is Verdict.REFUSE


def test_no_answer_is_an_outage() -> None:
    answer = classify_error(TimeoutError())
    assert (answer.verdict, answer.cause) == (Verdict.RETRY, "TimeoutError")


@pytest.mark.parametrize(("body", "message"), [
    (MLFLOW_NO_EXPERIMENT, "No Experiment with id=1 exists"),
    (MLFLOW_NO_HEADER, "header x-mlflow-experiment-id: Field required"),
    ('{"error": "invalid api key"}', "invalid api key"),
    ('{"errors": [{"message": "a"}, {"message": "b"}]}', "a; b"),
    (FLASK_404, "404 Not Found"),
    ("Sessions with IDs nope do not exist.", "Sessions with IDs nope do not exist."),
    ("  ", ""),
    ("{not json", "{not json"),
    ("x" * 1000, "x" * 299 + "…"),
])
def test_the_backends_message_is_extracted(body: str, message: str) -> None:
    assert backend_message(body) == message
