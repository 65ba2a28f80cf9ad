"""Derived ids: the run id is uuid5 of the run's trace and span ids, written out by hand for
speed, so it must equal what `uuid.uuid5` makes for any ids (ids already exported name runs by
it); a score's outcome text is what it was (span ids derive from it)."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.common.ids import run_id_for, score_outcome

HEX = "0123456789abcdef"


@given(st.text(HEX, min_size=32, max_size=32), st.text(HEX, min_size=16, max_size=16))
def test_the_run_id_is_uuid5_of_the_trace_and_span_ids(trace_id: str, span_id: str) -> None:
    expected = str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracescore:run/{trace_id}/{span_id}"))
    assert run_id_for(trace_id, span_id) == expected


@given(st.text(), st.text())
def test_any_text_as_ids_gives_the_uuid5_text(trace_id: str, span_id: str) -> None:
    try:
        expected = str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracescore:run/{trace_id}/{span_id}"))
    except UnicodeEncodeError:  # a lone surrogate: both refuse it alike
        with pytest.raises(UnicodeEncodeError):
            run_id_for(trace_id, span_id)
        return
    assert run_id_for(trace_id, span_id) == expected


def test_a_run_id_known_before_stays_the_same() -> None:
    assert run_id_for("ab" * 16, "cd" * 8) == "f6f8e910-a4f9-578e-90be-7950dfd19071"


def test_the_outcome_text_keeps_json_dumps_spacing_and_unicode() -> None:
    assert score_outcome(0.5, "pass", "café \"ok\"", None) == 'scored:[0.5, "pass", "café \\"ok\\""]'


@given(st.one_of(st.none(), st.floats(), st.integers(), st.booleans()),
       st.one_of(st.none(), st.text(max_size=6)), st.one_of(st.none(), st.text(max_size=6)))
def test_the_outcome_text_is_what_json_dumps_writes_for_any_score(score: object, label: str | None,
                                                                  reason: str | None) -> None:
    # A plain float score with no label or reason is written without the encoder: the same text.
    assert score_outcome(score, label, reason, None) == "scored:" + json.dumps([score, label, reason],  # type: ignore[arg-type]
                                                                               ensure_ascii=False)


def test_an_outcome_known_before_stays_the_same() -> None:
    assert (score_outcome(0.1, None, None, None), score_outcome(1e-07, None, None, None),
            score_outcome(float("nan"), None, None, None)) == (
        "scored:[0.1, null, null]", "scored:[1e-07, null, null]", "scored:[NaN, null, null]")
