"""Judge agreement against a real MLflow (SPEC §11), end to end with the commands a user runs:
twelve agent runs in an MLflow experiment, scored by a backfill into the deployment (its
assessments in MLflow, its scores kept in the store); two people give feedback on every run in
MLflow (HUMAN assessments on the run span, as its UI writes them), ben after ana; ``labels
pull`` reads them once; ``agreement --json`` equals kappa, accuracy, the confusion matrix and the
people's own kappa counted here from the same verdicts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
from agreement_support import ANA, ANSWERS, BEN, backfill_here, check_row, tracescore
from backends_support import SCORERS, Mlflow, agent_trace_body, readme_block


def label(mlflow: Mlflow, who: str, runs: list[tuple[str, str]], verdicts: list[bool]) -> None:
    """``who`` gives ``Relevance`` feedback true or false on each run's span in MLflow (a HUMAN
    assessment, his name its source id)."""
    for (trace_id, span_id), verdict in zip(runs, verdicts, strict=True):
        reply = httpx.post(f"{mlflow.url}/api/3.0/mlflow/traces/tr-{trace_id}/assessments", timeout=30, json={
            "assessment": {"trace_id": f"tr-{trace_id}", "span_id": span_id, "assessment_name": "Relevance",
                           "source": {"source_type": "HUMAN", "source_id": who}, "feedback": {"value": verdict},
                           "rationale": f"{who}'s call"}})
        assert reply.status_code == 200, reply.text


def test_people_s_feedback_in_mlflow_is_pulled_once_and_agreement_equals_the_count_here(
    tmp_path: Path, mlflow: Mlflow,
) -> None:
    experiment = mlflow.experiment(f"agreement-{uuid.uuid4().hex[:8]}")
    made = [agent_trace_body(answer) for answer in ANSWERS]
    body = b"".join(b for b, _, _ in made)  # one request of twelve traces (protobuf messages merge)
    reply = httpx.post(f"{mlflow.url}/v1/traces", content=body, timeout=60, headers={
        "Content-Type": "application/x-protobuf", "x-mlflow-experiment-id": experiment})
    assert reply.status_code == 200, reply.text
    saved = tmp_path / "runs.pb"
    saved.write_bytes(body)
    runs = [(trace_id, span_id) for _, trace_id, span_id in made]
    readme = readme_block("toml", "[sinks.mlflow]").replace("http://127.0.0.1:5000", mlflow.url)
    config = (readme.replace('"x-mlflow-experiment-id" = "0"', f'"x-mlflow-experiment-id" = "{experiment}"')
              + f'[queue]\nurl = "sqlite:///{tmp_path / "queue.db"}"\n'
              + '[labels]\nfrom = ["mlflow"]\nmin_labels = 10\n'
              + f'[[scorers]]\nref = "{SCORERS}:relevance"\n')
    assert f'"x-mlflow-experiment-id" = "{experiment}"' in config

    # ana labels first, ben after the backfill: where they differ the item's verdict is his (a
    # tie goes to the newest label; MLflow dates an assessment to the millisecond).
    label(mlflow, "ana", runs, ANA)
    done = backfill_here(config, [saved], tmp_path, f"{SCORERS}:relevance")
    assert done.returncode == 0 and "exported 12 score(s)" in done.stderr, done.stderr
    label(mlflow, "ben", runs, BEN)
    options = ("--config", str(tmp_path / "backfill.toml"))

    pulled = tracescore("labels", "pull", *options)
    assert (pulled.returncode, pulled.stdout) == (0, "mlflow: 24 label(s) read, 24 new or changed\n"), pulled.stderr
    again = tracescore("labels", "pull", *options)
    assert (again.returncode, again.stdout) == (0, "mlflow: 0 label(s) read, 0 new or changed\n"), again.stderr

    measured = tracescore("agreement", "--json", "--disagreements", *options)
    assert measured.returncode == 0, measured.stderr
    (row,) = [json.loads(line) for line in measured.stdout.splitlines()]
    check_row(row, runs, lambda verdict: verdict)  # MLflow gives the feedback's JSON value back: a boolean
