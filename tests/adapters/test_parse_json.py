"""The adapters read JSON attributes with orjson where it gives what ``json.loads`` gives, and
with json everywhere else: the same values, types included, and the same refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters._messages import loads, parse_json

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**100), max_value=2**100),
    st.floats(allow_nan=True, allow_infinity=True), st.text(),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)), max_leaves=30)


def _json_loads(text: str) -> tuple[str, Any]:
    try:
        return "value", repr(json.loads(text))  # repr: 1 and 1.0, nan and nan told apart and alike
    except ValueError:
        return "refused", None


def _ours(text: str) -> tuple[str, Any]:
    try:
        return "value", repr(parse_json(text))
    except ValueError:
        return "refused", None


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, spaced=st.booleans())
def test_any_json_document_reads_as_json_loads_reads_it(value: Any, spaced: bool) -> None:
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=False)
    assert _ours(text) == _json_loads(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='{}[]",:0123456789.eE+-truefalsnNaIiy \\u\t\n', max_size=40))
def test_any_text_is_read_or_refused_as_json_loads_does(text: str) -> None:
    assert _ours(text) == _json_loads(text)


@pytest.mark.parametrize("text", [
    "18446744073709551616", "-9223372036854775809", "[1e400]", '"\\ud800"', "NaN", "-Infinity",
    '{"a": 1, "a": 2}', "1.0000000000000002", "-0", "-0.0", '"\\u0000"', "[1,]",
])
def test_the_edges_orjson_reads_otherwise(text: str) -> None:
    assert _ours(text) == _json_loads(text)


def test_invalid_json_is_still_reported() -> None:
    reported: list[str] = []
    assert loads("[oops", reported.append) is None and reported == ["invalid_json"]
