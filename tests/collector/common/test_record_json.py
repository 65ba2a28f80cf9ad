"""Record JSON (`collector.common.record_json`): orjson writes and reads the records of the hot path;
what it would not keep exactly is written and read by json, so every record reads back as it
was written, and records written by earlier versions (json.dumps's spaced form) read exactly."""

from __future__ import annotations

import json
import math
from dataclasses import FrozenInstanceError, dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.common.record_json import dumps, loads
from collector.common.types import RunRecord, ScoreJob, ScoreRecord
from collector.store.redis.job_json import job_json, parse_job

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_any_json_value_reads_back_as_written(value: object) -> None:
    assert loads(dumps(value)) == value


@given(JSON_VALUES)
def test_text_written_by_json_dumps_reads_exactly(value: object) -> None:
    text = json.dumps(value)
    assert loads(text) == value
    assert loads(text.encode()) == value


def test_an_int_past_64_bits_stays_an_int() -> None:
    record = {"run": {"attributes": {"id": 2**80 + 1}}}
    assert loads(dumps(record)) == record
    assert type(loads(dumps(record))["run"]["attributes"]["id"]) is int


def test_values_without_json_go_through_the_records_fallback() -> None:
    @dataclass
    class Point:
        x: int

    when = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    assert loads(dumps({"p": Point(1), "s": {3}, "when": when, 1: "k"})) == {
        "p": {"x": 1}, "s": "{3}", "when": str(when), "1": "k"}


def test_a_float_subclass_is_written_as_a_number_as_json_wrote_it() -> None:
    class Float(float):
        pass

    assert dumps({"score": Float(0.5)}) == '{"score":0.5}'


def test_a_float_that_is_not_finite_is_written_null() -> None:
    assert loads(dumps({"a": math.nan, "b": [math.inf]})) == {"a": None, "b": [None]}


def test_nan_written_by_an_earlier_version_still_reads() -> None:
    assert math.isnan(loads('{"a":NaN}')["a"])


def test_jobs_and_scores_read_back_as_they_were() -> None:
    run = RunRecord("ab" * 16, "cd" * 8, span_name="invoke_agent bot", input={"messages": [{"role": "user",
                    "content": "héllo 😀 \ud83d"}]}, request_context={"n": 2**70, "f": 0.1}, resource={"service.name": "s"})
    job = ScoreJob(run, "q", "1", supersedes="ef" * 8)
    assert parse_job(job_json(job)) == job
    assert parse_job(job_json(job).encode()) == job
    assert parse_job(job_json(job)).run.run_id == run.run_id  # carried by the job, equal to the one made
    score = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", score=0.25, reason="ok")
    assert ScoreRecord.from_json(score.to_json()) == score
    assert RunRecord.from_json(run.to_json()) == run


@given(st.text(), st.text(), st.integers(), st.dictionaries(st.text(), st.integers(), max_size=3))
def test_records_made_by_fast_init_equal_the_dataclasses_own(trace_id: str, span_id: str, end: int,
                                                              resource: dict[str, int]) -> None:
    for cls, args, kwargs in [
        (RunRecord, (trace_id, span_id), {"end_ns": end, "resource": resource}),
        (RunRecord, (trace_id, span_id, "invoke_agent x"), {}),
        (ScoreRecord, ("k", trace_id, span_id, "ef" * 8, "q", "Q"), {"score": 0.5, "resource": resource}),
    ]:
        made = cls(*args, **kwargs)
        own = object.__new__(cls)
        cls._dataclass_init(own, *args, **kwargs)
        assert made == own and vars(made) == vars(own)


def test_a_fast_init_record_stays_frozen_and_its_factories_give_each_record_its_own_value() -> None:
    first, second = RunRecord("t", "s"), RunRecord("t", "s")
    assert first.input is not second.input and first.resource is not second.resource
    with pytest.raises(FrozenInstanceError):
        first.span_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunRecord("t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RunRecord("t", "s", unknown=1)  # type: ignore[call-arg]


def test_an_int_past_64_bits_reads_back_wherever_it_is() -> None:
    """Not only in a dict whose first key is short (what json.dumps's spacing showed): at the
    top, in a list, after a long first key (found by the property test above)."""
    for value in (-2**63 - 1, [2**64], {"k" * 80: 1, "big": -2**70}):
        assert loads(dumps(value)) == value
        assert loads(dumps(value).encode()) == value
