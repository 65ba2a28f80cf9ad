"""Judge agreement against a real Phoenix (SPEC §11), end to end with the commands a user runs:
twelve agent runs in Phoenix, scored by a backfill into the deployment (its annotations in
Phoenix, its scores kept in the store); two people label every run in Phoenix (HUMAN span
annotations, as its REST API writes them), ben after ana; ``labels pull`` reads them once;
``agreement --json`` equals kappa, accuracy, the confusion matrix and the people's own kappa
counted here from the same verdicts."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
from agreement_support import ANA, ANSWERS, BEN, backfill_here, check_row, tracescore
from backends_support import (
    SCORERS,
    Phoenix,
    agent_trace_body,
    poll,
    post_body,
    readme_block,
)


def label(phoenix: Phoenix, who: str, spans: list[str], verdicts: list[bool]) -> None:
    """``who`` labels the runs ``Relevance`` pass or fail in Phoenix (HUMAN span annotations; his
    name in ``identifier``, which keeps one annotation per person and span)."""
    rows = [{"span_id": span, "name": "Relevance", "annotator_kind": "HUMAN", "identifier": who,
             "result": {"label": "pass" if verdict else "fail", "explanation": f"{who}'s call"}}
            for span, verdict in zip(spans, verdicts, strict=True)]
    reply = httpx.post(f"{phoenix.url}/v1/span_annotations", params={"sync": "true"}, json={"data": rows},
                       timeout=30)
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["data"]) == len(rows)


def test_people_s_labels_in_phoenix_are_pulled_once_and_agreement_equals_the_count_here(
    tmp_path: Path, phoenix: Phoenix,
) -> None:
    project = f"agreement-{uuid.uuid4().hex[:8]}"
    made = [agent_trace_body(answer, {"openinference.project.name": project}) for answer in ANSWERS]
    body = b"".join(b for b, _, _ in made)  # one request of twelve traces (protobuf messages merge)
    post_body(f"{phoenix.url}/v1/traces", body)
    saved = tmp_path / "runs.pb"
    saved.write_bytes(body)
    runs = [(trace_id, span_id) for _, trace_id, span_id in made]
    spans = [span_id for _, span_id in runs]
    poll(lambda: len(phoenix.spans_of_project(project)) == 2 * len(ANSWERS), 60, "the runs' spans in Phoenix")
    config = (readme_block("toml", "[sinks.phoenix]").replace("http://127.0.0.1:6006", phoenix.url)
              .replace('"env:PHOENIX_API_KEY"', '""')
              + f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
              + '[labels]\nfrom = ["phoenix"]\nmin_labels = 10\n'
              + f'[[scorers]]\nref = "{SCORERS}:relevance"\n')

    # ana labels first, ben after the backfill, so where they differ the item's verdict is his (a
    # tie goes to the newest label). Phoenix dates a label to the second: ben's are in a later one
    # (the backfill takes longer than that; were it quicker, the rest of the second is waited).
    label(phoenix, "ana", spans, ANA)
    ana_done = time.time()
    done = backfill_here(config, [saved], tmp_path, f"{SCORERS}:relevance")
    assert done.returncode == 0 and "exported 12 score(s)" in done.stderr, done.stderr
    poll(lambda: int(time.time()) > int(ana_done), 2, "the second after ana's labels", every=0.05)
    label(phoenix, "ben", spans, BEN)
    options = ("--config", str(tmp_path / "backfill.toml"))

    pulled = tracescore("labels", "pull", *options)
    assert (pulled.returncode, pulled.stdout) == (0, "phoenix: 24 label(s) read, 24 new or changed\n"), pulled.stderr
    again = tracescore("labels", "pull", *options)
    assert (again.returncode, again.stdout) == (0, "phoenix: 0 label(s) read, 0 new or changed\n"), again.stderr

    measured = tracescore("agreement", "--json", "--disagreements", *options)
    assert measured.returncode == 0, measured.stderr
    (row,) = [json.loads(line) for line in measured.stdout.splitlines()]
    check_row(row, runs, lambda verdict: "pass" if verdict else "fail")
