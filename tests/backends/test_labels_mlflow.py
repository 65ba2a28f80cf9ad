"""People's labels read from a real MLflow (`collector.receive.labels.MlflowLabels`, SPEC §11):
HUMAN feedback on a span, on a whole trace and on a session's first trace, in two experiments,
written as MLflow's UI and SDK write them (REST assessments, one overriding another), beside
tracescore's own LLM_JUDGE and CODE assessments of the same name (never read); then an edit and
a label given later to an old trace: a pull between whole sweeps does not see them (its recent
window), the next whole sweep does, and a pull after it finds nothing; a label on a fresh trace
is found between whole sweeps."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
from backends_support import Mlflow, agent_trace_body, conversation_turns

from collector.common.labels import Label
from collector.common.types import ScoreRecord
from collector.config import SinksConfig
from collector.export.sinks.mlflow import assessment
from collector.receive.labels import MlflowLabels

HOUR = 3600.0
API = "/api/3.0/mlflow/traces"


def pull(reader: MlflowLabels, cursor: str | None, names: list[str]) -> tuple[list[Label], str]:
    """One pull: every label it hands on, and the cursor it ends with."""
    async def pages() -> tuple[list[Label], str]:
        pages = [page async for page in reader.pages(cursor, HOUR, names)]
        return [label for found, _ in pages for label in found], pages[-1][1]
    return asyncio.run(pages())


def post_trace(mlflow: Mlflow, experiment: str, body: bytes) -> None:
    reply = httpx.post(f"{mlflow.url}/v1/traces", content=body, timeout=60,
                       headers={"Content-Type": "application/x-protobuf", "x-mlflow-experiment-id": experiment})
    assert reply.status_code == 200, reply.text


def assess(mlflow: Mlflow, trace_id: str, **fields: Any) -> str:
    """POST an assessment on ``tr-<trace_id>`` as MLflow's UI does; its id."""
    reply = httpx.post(f"{mlflow.url}{API}/tr-{trace_id}/assessments", timeout=30,
                       json={"assessment": {"trace_id": f"tr-{trace_id}", **fields}})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["assessment"]["assessment_id"])


def human(name: str, who: str, value: Any, **more: Any) -> dict[str, Any]:
    return {"assessment_name": name, "source": {"source_type": "HUMAN", "source_id": who}, "feedback": {"value": value},
            **more}


def test_people_s_feedback_is_read_and_then_only_what_changed(mlflow: Mlflow) -> None:
    tag = uuid.uuid4().hex[:8]
    name, goal = f"Helpful {tag}", f"Goal met {tag}"  # names no other test writes
    experiments = [mlflow.experiment(f"labels-{tag}"), mlflow.experiment(f"labels-{tag}-b")]
    (body_a, trace_a, span_a), (body_b, trace_b, _) = agent_trace_body("Paris."), agent_trace_body("Nice.")
    session = f"chat-{tag}"
    turns = conversation_turns(session, ["Paris.", "The Louvre."])
    for experiment, body in [(experiments[0], body_a), (experiments[1], body_b),
                             *((experiments[0], t.body) for t in turns)]:
        post_trace(mlflow, experiment, body)
    first = turns[0].trace_id

    on_span = assess(mlflow, trace_a, **human(name, "ana@example.com", True, span_id=span_a, rationale="right city"))
    on_trace = assess(mlflow, trace_a, **human(name, "bob", "pass"))
    on_session = assess(mlflow, first, **human(goal, "ana@example.com", 3, metadata={"mlflow.trace.session": session}))
    replaced = assess(mlflow, trace_b, **human(name, "cy", "fail"))
    overriding = assess(mlflow, trace_b, **human(name, "cy", "pass", overrides=replaced))  # the UI's "edit" of it
    for judged in (True, False):  # tracescore's own LLM_JUDGE and CODE feedback, as its sink writes it
        own = assessment(ScoreRecord(f"k{judged}", trace_a, span_a, "ef" * 8, "helpful", name, "1", score=0.2,
                                     reason="judge", llm_judged=judged))
        assess(mlflow, trace_a, **{k: v for k, v in own.items() if k not in ("trace_id", "assessment_id")})

    reader = MlflowLabels(SinksConfig(mlflow={"tracking_uri": mlflow.url}))
    labels, cursor = pull(reader, None, [name, goal])
    found = {label.source_id: label for label in labels}
    assert len(labels) == len(found) == 4 and reader.skipped == 0
    now = time.time()
    assert all(now - 120 < label.at <= now + 5 for label in labels)
    at = {key: label.at for key, label in found.items()}
    assert found == {
        on_span: Label(name, trace_a, span_a, None, True, "mlflow", annotator="ana@example.com",
                       rationale="right city", at=at[on_span], source_id=on_span),
        on_trace: Label(name, trace_a, None, None, "pass", "mlflow", annotator="bob", at=at[on_trace],
                        source_id=on_trace),
        on_session: Label(goal, first, None, session, 3.0, "mlflow", annotator="ana@example.com",
                          at=at[on_session], source_id=on_session),
        overriding: Label(name, trace_b, None, None, "pass", "mlflow", annotator="cy", at=at[overriding],
                          source_id=overriding),  # the overridden one is no longer valid: not read
    }
    assert [found[k].item for k in (on_span, on_trace, on_session)] == [
        f"span:{span_a}", f"trace:{trace_a}", f"session:{session}"]
    assert pull(reader, cursor, [name, goal])[0] == []

    # Later: bob changes his verdict (PATCH: last_update_time moves) and dan labels the old trace b.
    reply = httpx.patch(f"{mlflow.url}{API}/tr-{trace_a}/assessments/{on_trace}", timeout=30,
                        json={"assessment": {"feedback": {"value": "fail"}}, "update_mask": "feedback"})
    assert reply.status_code == 200, reply.text
    late = assess(mlflow, trace_b, **human(name, "dan", 0.0, rationale="too short"))
    between = MlflowLabels(SinksConfig(mlflow={"tracking_uri": mlflow.url}), recent_s=0.001, full_every_s=HOUR)
    assert pull(between, cursor, [name, goal])[0] == []  # only traces of the last moment: not these
    whole = MlflowLabels(SinksConfig(mlflow={"tracking_uri": mlflow.url}), full_every_s=0.0)
    changed, cursor = pull(whole, cursor, [name, goal])
    assert sorted((x.source_id, x.value, x.annotator, x.rationale) for x in changed) == sorted(
        [(on_trace, "fail", "bob", None), (late, 0.0, "dan", "too short")])
    assert pull(whole, cursor, [name, goal])[0] == []

    # A label on a trace of the last hour is read between whole sweeps (the recent window).
    body_c, trace_c, span_c = agent_trace_body("Lyon.")
    post_trace(mlflow, experiments[1], body_c)
    fresh = assess(mlflow, trace_c, **human(name, "eve", False, span_id=span_c))
    recent, cursor = pull(reader, cursor, [name, goal])
    assert [(x.source_id, x.span_id, x.value) for x in recent] == [(fresh, span_c, False)]
    assert pull(reader, cursor, [name, goal])[0] == []
