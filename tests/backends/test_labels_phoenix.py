"""People's labels read from a real Phoenix (`collector.receive.labels.PhoenixLabels`, SPEC §11):
HUMAN span and session annotations written as Phoenix's REST API and its UI (GraphQL mutation)
write them, in two projects, beside tracescore's own LLM and CODE annotations of the same name
(never read); then a label given later to an old span and an edit are found by an incremental
pull, and a pull after it finds nothing."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
from backends_support import Phoenix, agent_trace_body, conversation_turns, poll, post_body

from collector.common.labels import Label
from collector.config import SinksConfig
from collector.receive.labels import PhoenixLabels

HOUR = 3600.0


def pull(reader: PhoenixLabels, cursor: str | None, names: list[str]) -> list[tuple[list[Label], str]]:
    async def pages() -> list[tuple[list[Label], str]]:
        return [page async for page in reader.pages(cursor, HOUR, names)]
    return asyncio.run(pages())


def annotate(phoenix: Phoenix, kind: str, *rows: dict[str, Any]) -> list[str]:
    """POST span or session annotations (``sync``: the ids back); the ids, in order."""
    reply = httpx.post(f"{phoenix.url}/v1/{kind}_annotations", params={"sync": "true"}, json={"data": list(rows)},
                       timeout=30)
    assert reply.status_code == 200, reply.text
    return [row["id"] for row in reply.json()["data"]]


def test_people_s_annotations_are_read_and_then_only_what_changed(phoenix: Phoenix) -> None:
    tag = uuid.uuid4().hex[:8]
    name, goal, other = f"Helpful {tag}", f"Goal met {tag}", f"Tone {tag}"  # names no other test writes
    projects = [f"labels-{tag}", f"labels-{tag}-b"]
    bodies = [agent_trace_body("Paris.", {"openinference.project.name": projects[0]}),
              agent_trace_body("Lyon.", {"openinference.project.name": projects[0]}),
              agent_trace_body("Nice.", {"openinference.project.name": projects[1]})]
    session = f"chat-{tag}"
    turns = conversation_turns(session, ["Paris.", "The Louvre."], {"openinference.project.name": projects[0]})
    for body in [b for b, _, _ in bodies] + [t.body for t in turns]:
        post_body(f"{phoenix.url}/v1/traces", body)
    poll(lambda: len(phoenix.spans_of_project(projects[0])) == 8 and len(phoenix.spans_of_project(projects[1])) == 2,
         60, "the agent's spans in Phoenix")
    (_, trace_a, span_a), (_, trace_b, span_b), (_, trace_c, span_c) = bodies

    def human(span: str, result: dict[str, Any], identifier: str = "") -> dict[str, Any]:
        return {"span_id": span, "name": name, "annotator_kind": "HUMAN", "result": result, "identifier": identifier}

    def own(span: str, kind: str = "LLM") -> dict[str, Any]:  # as tracescore's sink writes its scores
        return {"span_id": span, "name": name, "annotator_kind": kind, "identifier": f"tracescore:helpful:{kind}",
                "result": {"score": 0.1, "label": "fail", "explanation": "judge"}, "metadata": {"scorer_id": "h"}}

    ids = annotate(phoenix, "span",
                   human(span_a, {"label": "pass", "explanation": "right city"}),
                   human(span_a, {"score": 0.0, "label": "fail"}, identifier="ana"),  # a second annotator
                   human(span_c, {"score": 1.0}),  # another project
                   own(span_a), own(span_b), own(span_b, "CODE"),
                   {"span_id": span_b, "name": other, "annotator_kind": "HUMAN", "result": {"label": "warm"}})
    session_ids = annotate(phoenix, "session",
                           {"session_id": session, "name": goal, "annotator_kind": "HUMAN", "identifier": "ana",
                            "result": {"label": "met", "explanation": "booked"}},
                           {"session_id": session, "name": goal, "annotator_kind": "LLM",
                            "identifier": "tracescore:goal:1", "result": {"score": 0.2}})
    # A person in Phoenix's UI: its GraphQL mutation, on the span's node (source APP).
    node = phoenix.graphql("query ($s: String!) { getSpanByOtelId(spanId: $s) { id } }", s=span_b)
    made = phoenix.graphql(
        "mutation ($input: [CreateSpanAnnotationInput!]!) { createSpanAnnotations(input: $input) { "
        "spanAnnotations { id } } }",
        input=[{"spanId": node["getSpanByOtelId"]["id"], "name": name, "annotatorKind": "HUMAN", "label": "pass",
                "score": None, "explanation": None, "metadata": {}, "source": "APP"}])
    ui_id = made["createSpanAnnotations"]["spanAnnotations"][0]["id"]

    reader = PhoenixLabels(SinksConfig(phoenix={"endpoint": phoenix.url}), page_size=2)
    pages = pull(reader, None, [name, goal])
    assert [len(page) for page, _ in pages] == [2, 2, 1]  # pages of at most page_size, the last with the cursor
    assert pages[0][1] == pages[1][1] != pages[2][1]
    found = {label.source_id: label for page, _ in pages for label in page}
    assert reader.skipped == 0 and len(found) == 5
    now = time.time()
    assert all(now - HOUR < label.at <= now + 5 for label in found.values())
    at = {key: label.at for key, label in found.items()}
    assert found == {
        ids[0]: Label(name, trace_a, span_a, None, "pass", "phoenix", annotator="API", rationale="right city",
                      at=at[ids[0]], source_id=ids[0]),
        ids[1]: Label(name, trace_a, span_a, None, 0.0, "phoenix", annotator="ana", at=at[ids[1]], source_id=ids[1]),
        ids[2]: Label(name, trace_c, span_c, None, 1.0, "phoenix", annotator="API", at=at[ids[2]], source_id=ids[2]),
        ui_id: Label(name, trace_b, span_b, None, "pass", "phoenix", annotator="APP", at=at[ui_id], source_id=ui_id),
        session_ids[0]: Label(goal, "", None, session, "met", "phoenix", annotator="ana", rationale="booked",
                              at=at[session_ids[0]], source_id=session_ids[0]),
    }
    assert {(x.annotator, x.item) for x in found.values()} == {  # two annotators on span a: two labels
        ("API", f"span:{span_a}"), ("ana", f"span:{span_a}"), ("API", f"span:{span_c}"),
        ("APP", f"span:{span_b}"), ("ana", f"session:{session}")}

    cursor = pages[-1][1]
    assert [page for page, _ in pull(reader, cursor, [name, goal])] == [[]]
    # Later: a person labels the old span b, and ana changes her verdict on span a (in place).
    (late,) = annotate(phoenix, "span", human(span_b, {"score": 1.0, "explanation": "fine"}, identifier="bob"))
    (edited,) = annotate(phoenix, "span", human(span_a, {"score": 1.0, "label": "pass"}, identifier="ana"))
    assert edited == ids[1]  # Phoenix updated the annotation: same id
    changed = pull(reader, cursor, [name, goal])
    assert sorted((x.source_id, x.span_id, x.value, x.annotator) for page, _ in changed for x in page) == sorted(
        [(late, span_b, 1.0, "bob"), (ids[1], span_a, 1.0, "ana")])
    cursor = changed[-1][1]
    assert [page for page, _ in pull(reader, cursor, [name, goal])] == [[]]
    # A scorer name the cursor was not swept for reads its labels from the start.
    renamed = pull(reader, cursor, [name, goal, other])
    assert [x.value for page, _ in renamed for x in page if x.name == other] == ["warm"]
    assert json.loads(renamed[-1][1])["names"] == sorted([name, goal, other])
