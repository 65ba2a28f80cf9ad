"""The run context and token usage read from a span's attributes: the same whichever attributes
are present as when every attribute is looked up in order (property tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters._view import _CONTEXT_PAIRS, common_context, int_attr, str_attr, usage_from

_CONTEXT_KEYS = [key for _, keys in _CONTEXT_PAIRS for key in keys]
_USAGE = ["input_tokens", "prompt_tokens", "output_tokens", "completion_tokens", "total_tokens"]
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=False),
                    st.text(max_size=5), st.sampled_from(["", " ", "12", "gpt-4o"]), st.lists(st.integers(), max_size=2))


def _context_oracle(attrs: dict[str, Any]) -> dict[str, Any]:
    """Every entry's attributes looked up in order, whatever the span holds."""
    return {name: value for name, keys in _CONTEXT_PAIRS if (value := str_attr(attrs, *keys)) is not None}


def _usage_oracle(attrs: dict[str, Any], prefix: str) -> dict[str, int]:
    """Every usage attribute looked up in order; a total made of the two counts when none is given."""
    names = {"input_tokens": ("input_tokens", "prompt_tokens"), "output_tokens": ("output_tokens", "completion_tokens")}
    found = {name: int_attr(attrs, *(prefix + key for key in keys)) for name, keys in names.items()}
    total = int_attr(attrs, prefix + "total_tokens", "llm.usage.total_tokens")
    if total is None and None not in found.values():
        total = sum(v for v in found.values() if v is not None)
    return {name: value for name, value in {**found, "total_tokens": total}.items() if value is not None}


@given(st.dictionaries(st.sampled_from([*_CONTEXT_KEYS, "other.key", "gen_ai.operation.name"]), _VALUES, max_size=8))
def test_the_run_context_is_what_reading_every_attribute_in_order_gives(attrs: dict[str, Any]) -> None:
    assert common_context(attrs) == _context_oracle(attrs)


@given(st.sampled_from(["gen_ai.usage.", "llm.token_count.", "ai.usage."]),
       st.data())
def test_token_usage_is_what_reading_every_attribute_in_order_gives(prefix: str, data: st.DataObject) -> None:
    keys = [prefix + name for name in _USAGE] + ["llm.usage.total_tokens", "gen_ai.usage.input_tokens", "other"]
    attrs = data.draw(st.dictionaries(st.sampled_from(keys), _VALUES, max_size=6))
    assert usage_from(attrs, prefix) == _usage_oracle(attrs, prefix)


def test_a_span_without_any_of_those_attributes_has_no_context_and_no_usage() -> None:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]"}
    assert (common_context(attrs), usage_from(attrs)) == ({}, {})
