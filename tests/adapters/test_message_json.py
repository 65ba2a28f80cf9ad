"""A run's JSON form made from its messages (`adapters._message_json`) is the one its models dump,
and an adapters run makes its models only when they are read (`AgentRun.from_messages`)."""

from __future__ import annotations

import math
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from adapters_support import FIXTURES, runs_from_files
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import AgentRun
from adapters._message_json import message_json
from adapters._messages import Call, Msg, to_message
from adapters._runs import RunMessages

CAPTURES = Path(__file__).resolve().parent / "captures"
TRACE_FILES = sorted([*CAPTURES.glob("*/S?.pb"), *FIXTURES.glob("*/*.pb"), *FIXTURES.glob("*/*.otlp.json")])
TRACE_FILES = [p for p in TRACE_FILES if ".logs." not in p.name]

_text = st.text(max_size=12)
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3),
                            st.tuples(inner, inner)),  # a tuple is dumped as a list: the models' path
    max_leaves=8,
)
_arguments = st.one_of(_json, st.sampled_from(['{"city": "Paris"}', "[1, 2]", "{not json", ' {"a": NaN} ', "plain"]),
                       st.binary(max_size=4))
_well_formed = st.builds(  # the messages the form is made for: mostly of the form's own path
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=_text,
    tool_calls=st.lists(st.builds(Call, id=_text, name=_text, arguments=_arguments), max_size=2).map(tuple),
    tool_call_id=st.one_of(st.none(), _text),
    name=st.one_of(st.none(), _text),
)
_any_message = st.builds(  # anything else the models may be handed: their path, or their error
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool", "developer", ""]),
    content=st.one_of(_text, st.integers()),
    tool_calls=st.lists(st.builds(Call, id=st.one_of(_text, st.integers()), name=st.one_of(_text, st.none()),
                                  arguments=_arguments), max_size=2).map(tuple),
    tool_call_id=st.one_of(st.none(), _text, st.integers()),
    name=st.one_of(st.none(), _text),
    parts=st.sampled_from([(), ({"type": "reasoning", "text": "hmm"},), ({"type": "text", "text": "extra"},)]),
)


def _outcome(make: Any) -> tuple[str, str]:
    """What making a form gave: its repr (key order and NaN included), or the error's type."""
    try:
        return "form", repr(make())
    except Exception as err:  # noqa: BLE001 - the two paths must fail alike
        return "error", type(err).__name__


@settings(max_examples=400, deadline=None)
@given(_well_formed)
def test_the_form_made_from_a_message_is_the_one_its_model_dumps(msg: Msg) -> None:
    assert _outcome(lambda: message_json(msg)) == _outcome(lambda: to_message(msg).model_dump(mode="json"))


@settings(max_examples=300, deadline=None)
@given(_any_message)
def test_any_other_message_gives_the_models_form_or_their_error(msg: Msg) -> None:
    assert _outcome(lambda: message_json(msg)) == _outcome(lambda: to_message(msg).model_dump(mode="json"))


def test_arguments_the_models_would_convert_take_the_models_path() -> None:
    msg = Msg("assistant", "", (Call("c1", "lookup", ("a", 1)),))
    form = message_json(msg)
    assert form["tool_calls"][0]["arguments"] == ["a", 1] and form["parts"][0]["args"] == ["a", 1]
    nan = message_json(Msg("assistant", "", (Call("c1", "lookup", {"x": math.nan}),)))
    assert nan["tool_calls"][0]["arguments"] == {"x": None}  # the models dump NaN as null


def test_arguments_nested_too_deep_to_walk_fare_as_with_the_models() -> None:
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(3000):
        inner["a"] = {}
        inner = inner["a"]  # type: ignore[assignment]
    msg = Msg("assistant", "", (Call("c1", "lookup", deep),))
    assert _outcome(lambda: message_json(msg)) == _outcome(lambda: to_message(msg).model_dump(mode="json"))


def test_there_are_trace_files() -> None:
    assert len(TRACE_FILES) > 100


@pytest.mark.parametrize("path", TRACE_FILES, ids=[f"{p.parent.name}/{p.name}" for p in TRACE_FILES])
def test_every_captured_run_gives_its_models_form_without_making_them(path: Path) -> None:
    runs = runs_from_files(path)
    assert runs
    for run in runs:
        form = run.json_form()
        assert "input" not in vars(run) and "output" not in vars(run)
        assert repr(form) == repr((run.input.model_dump(mode="json"), run.output.model_dump(mode="json")))


def _lazy(session_id: str | None = None) -> AgentRun:
    messages = RunMessages([Msg("user", "Weather?")], [Msg("user", "Hi"), Msg("assistant", "Hello")],
                           [Msg("system", "Be terse.")],
                           [Msg("assistant", "", (Call("c1", "weather", '{"city": "Paris"}'),)),
                            Msg("tool", "sunny", tool_call_id="c1"), Msg("assistant", "Sunny.")])
    return AgentRun.from_messages(messages, trace_id="ab" * 16, span_id="cd" * 8, span_name="invoke_agent bot",
                                  service="svc", convention="genai", start_ns=1, end_ns=2,
                                  request_context={"service": "svc"}, resource={"service.name": "svc"},
                                  session_id=session_id)


def test_a_lazy_run_equals_the_run_made_from_its_models() -> None:
    lazy = _lazy()
    eager = AgentRun("ab" * 16, "cd" * 8, "invoke_agent bot", "svc", "genai", 1, 2, *RunMessages(
        *lazy.__dict__["_messages"]).models(), request_context={"service": "svc"}, resource={"service.name": "svc"})
    assert lazy == eager and repr(lazy) == repr(eager)
    assert lazy.input.remembered_messages[1].content == "Hello" and lazy.output[0].tool_calls[0].arguments == {
        "city": "Paris"}
    assert lazy.input is lazy.input  # made once, then kept


def test_a_lazy_runs_form_is_dumped_from_its_models_once_they_are_made() -> None:
    lazy = _lazy()
    lazy.output[2].content = "Rainy."  # a reader changed the models: the form follows them
    assert lazy.json_form()[1][2]["content"] == "Rainy."


def test_a_turn_of_a_session_stays_lazy_and_the_run_it_came_from_is_unchanged() -> None:
    lazy = _lazy()
    turn = lazy.with_session("s1")
    assert (turn.session_id, lazy.session_id) == ("s1", None)
    assert "input" not in vars(turn) and turn.json_form() == lazy.json_form()
    assert "input" not in vars(lazy)
    assert replace(lazy, session_id="s2") == turn.with_session("s2")  # replace makes the models


def test_a_lazy_run_pickles_and_a_missing_attribute_is_still_an_error() -> None:
    lazy = _lazy("s1")
    again = pickle.loads(pickle.dumps(lazy))
    assert again == lazy and again.session_id == "s1"
    with pytest.raises(AttributeError, match="no attribute 'inputs'"):
        _ = lazy.inputs  # type: ignore[attr-defined]
    bare = AgentRun.__new__(AgentRun)  # neither models nor messages: an error, not a loop
    with pytest.raises(AttributeError, match="no attribute 'input'"):
        _ = bare.input
