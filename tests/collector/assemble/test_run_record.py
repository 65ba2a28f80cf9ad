"""The queued form of an agent run: its JSON, and the models it hands a worker in this process."""

from __future__ import annotations

from adapters import AgentRun
from collector.assemble.decide import run_record
from collector.common.types import RunRecord
from scorers._agent_types import Message, ScorerRunInputForAgent, ScorerRunOutputForAgent


def _run() -> AgentRun:
    return AgentRun("ab" * 16, "cd" * 8, "invoke_agent bot", "svc", "genai", 0, 5,
                    ScorerRunInputForAgent(input_messages=[Message(role="user", content="Hi")]),
                    ScorerRunOutputForAgent([Message(role="assistant", content="Hello")]))


def test_the_record_hands_over_the_adapters_run_once() -> None:
    run = _run()
    record = run_record(run, {})
    assert record.typed is not None
    handed = record.typed.take()
    assert handed is run and handed.input is run.input and handed.output is run.output
    assert record.typed.take() is None


def test_the_models_stay_out_of_the_json_and_of_equality() -> None:
    record = run_record(_run(), {})
    parsed = RunRecord.from_json(record.to_json())
    assert '"typed"' not in record.to_json()
    assert parsed == record and parsed.typed is None
    assert parsed.input == record.input and parsed.output == record.output
