"""Each sink's payload checked against the vendor's own published request type: Langfuse's
``CreateScoreRequest`` (the ``langfuse`` package), Phoenix's ``AnnotateSpansRequestBody``
(``phoenix.client``, in Phoenix's own virtualenv) and MLflow's ``CreateAssessment`` protobuf
message (in MLflow's own virtualenv, parsed strictly: an unknown field fails)."""

from __future__ import annotations

import json
import subprocess
import sys

from langfuse.api import CreateScoreRequest, ScoreDataType
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse_server import known_keys
from repo_paths import REPO

from collector.common.session_types import SessionScore
from collector.common.types import ScoreRecord
from collector.export.sinks.langfuse import score_body, session_score_body
from collector.export.sinks.mlflow import assessment
from collector.export.sinks.phoenix import annotation, session_annotation

sys.path.insert(0, str(REPO / "tests" / "backends"))
from backends_support import venv  # noqa: E402

JUDGED = ScoreRecord(
    "5b8efff798038103d269b633813fc60c/eee19b7ec3c1b174/relevance/2", "5b8efff798038103d269b633813fc60c",
    "eee19b7ec3c1b174", "00f067aa0ba902b7", "relevance", "Relevance", "2", run_id="run-1", score=0.25,
    reason="off topic", label="fail", judge_models=["openai/gpt-4o-mini"], cost_usd=0.0012,
    scored_end_ns=1_700_000_000_000_000_000, llm_judged=True)
CODE = ScoreRecord("k", JUDGED.trace_id, JUDGED.span_id, "00f067aa0ba902b8", "brevity", "Brevity", None, score=1.0)
SESSION = SessionScore("support-bot/chat-42", "chat-42", turns=3, revision=2, partial=True,
                       first_trace_id="0af7651916cd43dd8448eb211c80319c", first_span_id="b7ad6b7169203331",
                       trace_ids=["0af7651916cd43dd8448eb211c80319c", JUDGED.trace_id],
                       first_start_ns=1_600_000_000_000_000_000)
CONVERSATION = ScoreRecord("session/support-bot/chat-42/2/goal/1", JUDGED.trace_id, JUDGED.span_id,
                           "00f067aa0ba902b9", "goal", "Goal met", "1", run_id="run-1", score=0.5,
                           reason="one request unanswered", judge_models=["openai/gpt-4o-mini"], llm_judged=True,
                           scored_end_ns=1_700_000_000_000_000_000, session=SESSION.to_dict())


def in_venv(name: str, code: str, payloads: list[dict], *args: str) -> str:
    done = subprocess.run([str(venv(name) / "bin" / "python"), "-c", code, *args], input=json.dumps(payloads),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_langfuse_scores_fit_create_score_request() -> None:
    for record in (JUDGED, CODE):
        body = score_body(record)
        assert set(body) <= known_keys()
        parsed = parse_obj_as(CreateScoreRequest, body)
        assert (parsed.trace_id, parsed.observation_id, parsed.name) == (record.trace_id, record.span_id,
                                                                           record.scorer_name)
        assert parsed.value == record.score and parsed.data_type == ScoreDataType.NUMERIC
        assert parsed.id and parsed.timestamp is not None
    assert score_body(JUDGED)["timestamp"] == "2023-11-14T22:13:20.000000Z"  # the run's end: fixed per score


def test_phoenix_annotations_fit_annotate_spans_request_body() -> None:
    # pydantic cannot validate typing.TypedDict on Python 3.11: check keys and types against the
    # TypedDicts' own annotations instead.
    code = (
        "import collections.abc, glob, importlib.util, json, sys, typing\n"
        "# the generated types alone: importing the phoenix package would load the whole server\n"
        "path = glob.glob(sys.prefix + '/lib/python*/site-packages/phoenix/client/__generated__/v1/__init__.py')[0]\n"
        "spec = importlib.util.spec_from_file_location('phoenix_v1_types', path)\n"
        "v1 = importlib.util.module_from_spec(spec); sys.modules['phoenix_v1_types'] = v1\n"
        "spec.loader.exec_module(v1)\n"
        "RequestBody = getattr(v1, sys.argv[1])\n"
        "def check(value, hint, where):\n"
        "    origin, args = typing.get_origin(hint), typing.get_args(hint)\n"
        "    if origin in (typing.Required, typing.NotRequired):\n"
        "        return check(value, args[0], where)\n"
        "    if typing.is_typeddict(hint):\n"
        "        hints = typing.get_type_hints(hint, include_extras=True)\n"
        "        required = {k for k, h in hints.items() if typing.get_origin(h) is not typing.NotRequired}\n"
        "        assert isinstance(value, dict) and set(value) <= set(hints), (where, value)\n"
        "        assert required <= set(value), (where, required)\n"
        "        for key, item in value.items():\n"
        "            check(item, hints[key], f'{where}.{key}')\n"
        "    elif origin is typing.Literal:\n"
        "        assert value in args, (where, value)\n"
        "    elif origin is typing.Union:\n"
        "        errors = []\n"
        "        for option in args:\n"
        "            try:\n"
        "                return check(value, option, where)\n"
        "            except AssertionError as err:\n"
        "                errors.append(err)\n"
        "        raise AssertionError(where, value, errors)\n"
        "    elif origin is collections.abc.Sequence:\n"
        "        for i, item in enumerate(value):\n"
        "            check(item, args[0], f'{where}[{i}]')\n"
        "    elif origin is collections.abc.Mapping:\n"
        "        assert isinstance(value, dict), (where, value)\n"
        "    elif hint is type(None):\n"
        "        assert value is None, (where, value)\n"
        "    elif hint is float:\n"
        "        assert isinstance(value, (int, float)), (where, value)\n"
        "    elif hint is not typing.Any:\n"
        "        assert isinstance(value, hint), (where, value, hint)\n"
        "check({'data': json.load(sys.stdin)}, RequestBody, 'body')\n"
        "print('ok')\n")
    payloads = [annotation(JUDGED), annotation(CODE)]
    assert in_venv("phoenix", code, payloads, "AnnotateSpansRequestBody").strip() == "ok"
    assert [p["annotator_kind"] for p in payloads] == ["LLM", "CODE"]
    assert payloads[0]["result"] == {"score": 0.25, "label": "fail", "explanation": "off topic"}
    assert payloads[0]["metadata"] == {"scorer_id": "relevance", "scorer_version": "2", "run_id": "run-1",
                                       "label": "fail", "judge_model": "openai/gpt-4o-mini", "cost_usd": "0.0012",
                                       "evaluation_span_id": "00f067aa0ba902b7"}
    (session,) = [session_annotation(CONVERSATION)]
    assert in_venv("phoenix", code, [session], "AnnotateSessionsRequestBody").strip() == "ok"
    assert (session["session_id"], session["name"], session["identifier"]) == ("chat-42", "Goal met", "tracescore:goal:1")
    assert session["metadata"] | {"revision": "2", "turns": "3", "partial": "true"} == session["metadata"]


def test_mlflow_assessments_fit_the_create_assessment_message() -> None:
    code = (
        "import json, sys\n"
        "from google.protobuf.json_format import ParseDict\n"
        "from mlflow.entities import Assessment\n"
        "from mlflow.protos.service_pb2 import CreateAssessment\n"
        "for item in json.load(sys.stdin):\n"
        "    message = ParseDict({'assessment': item}, CreateAssessment())\n"
        "    entity = Assessment.from_proto(message.assessment)\n"
        "    print(entity.name, entity.source.source_type, entity.value, entity.span_id)\n")
    out = in_venv("mlflow", code, [assessment(JUDGED), assessment(CODE), assessment(CONVERSATION)]).splitlines()
    assert out == ["Relevance LLM_JUDGE 0.25 eee19b7ec3c1b174", "Brevity CODE 1.0 eee19b7ec3c1b174",
                   "Goal met LLM_JUDGE 0.5 None"]  # a session's: on no span
    session = assessment(CONVERSATION)
    assert session["trace_id"] == f"tr-{SESSION.first_trace_id}"  # the session's first trace
    assert session["metadata"]["mlflow.trace.session"] == "chat-42"
    assert assessment(JUDGED)["trace_id"] == f"tr-{JUDGED.trace_id}"
    assert all(isinstance(v, str) for v in assessment(JUDGED)["metadata"].values())


def test_langfuse_session_scores_fit_create_score_request() -> None:
    body = session_score_body(CONVERSATION)
    assert set(body) <= known_keys()
    parsed = parse_obj_as(CreateScoreRequest, body)
    assert (parsed.session_id, parsed.trace_id, parsed.observation_id) == ("chat-42", None, None)
    assert parsed.value == 0.5 and parsed.name == "Goal met" and parsed.id != score_body(CONVERSATION)["id"]
    assert body["timestamp"] == "2020-09-13T12:26:40.000000Z"  # the first turn's start: the same every revision
