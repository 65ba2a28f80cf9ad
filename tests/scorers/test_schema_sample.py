"""`scorers._schema_sample`: the made-up judge answers of `tracescore score --estimate` are valid
instances of the schemas they stand for (checked by jsonschema and by the step's own validation)."""

from __future__ import annotations

import inspect
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

import scorers.builtin as builtin
from scorers._schema_sample import MAX_DEPTH, PLACEHOLDER_SENTENCE, sample_instance
from scorers._structured_output import SchemaSpec, strict_schema
from scorers.builtin._llm_common import JudgeSchema


def _judge_schemas() -> list[type[BaseModel]]:
    """Every pydantic schema a built-in LLM scorer asks its judge for."""
    found: dict[str, type[BaseModel]] = {}
    for module in {inspect.getmodule(obj) for obj in vars(builtin).values() if callable(obj)}:
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, JudgeSchema) and obj is not JudgeSchema:
                found[f"{module.__name__}.{name}"] = obj
    return [found[k] for k in sorted(found)]


SCHEMAS = _judge_schemas()


def test_the_built_in_judge_schemas_are_found() -> None:
    assert {"Statements", "Verdicts", "Claims"} <= {s.__name__ for s in SCHEMAS} and len(SCHEMAS) >= 10


@pytest.mark.parametrize("model", SCHEMAS, ids=lambda m: m.__name__)
def test_every_built_in_schema_gets_a_valid_instance_with_every_field(model: type[BaseModel]) -> None:
    """What the step validates (the pydantic model) and what the judge is sent (its JSON schema,
    and OpenAI's strict form of it) all accept the instance; every field is there, lists hold one
    item, so the next step has something to judge."""
    schema = model.model_json_schema()
    instance = sample_instance(schema)
    jsonschema.validate(instance, schema)
    jsonschema.validate(sample_instance(strict_schema(schema)), strict_schema(schema))
    assert isinstance(SchemaSpec.of(model).validate(instance), model)
    assert set(instance) == set(schema["properties"])
    assert all(len(v) == 1 for v in instance.values() if isinstance(v, list))


CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"],
      "additionalProperties": False}, {"score": 0.5}),  # the default generate_score schema
    ({"type": "number", "minimum": 0, "maximum": 10}, 5.0),
    ({"type": "number", "minimum": 2}, 2.5),
    ({"type": "number", "exclusiveMaximum": 0}, -0.5),
    ({"type": "integer", "minimum": 1, "maximum": 5}, 3),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 2}, 1),
    ({"type": "integer", "minimum": 0, "exclusiveMaximum": 1}, 0),
    ({"type": "integer", "maximum": -3}, -3),
    ({"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1}, 0.5),  # draft 4
    ({"enum": ["low", "mid", "high"]}, "low"),
    ({"const": 7}, 7),
    ({"type": ["null", "string"], "maxLength": 5}, "A sho"),
    ({"anyOf": [{"type": "null"}, {"type": "boolean"}]}, True),
    ({"oneOf": [{"type": "null"}]}, None),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 3}, [1, 1, 1]),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 0}, []),
    ({"type": "array", "prefixItems": [{"type": "boolean"}, {"const": "x"}]}, [True, "x"]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
                {"properties": {"b": {"type": "null"}}, "required": ["b"]}]}, {"a": True, "b": None}),
    ({"type": "string", "format": "date-time"}, "2026-01-01T00:00:00Z"),
    ({"type": "string", "format": "email"}, "judge@example.com"),
    ({"type": "object"}, {}),
    ({}, PLACEHOLDER_SENTENCE),
    ({"$ref": "#/definitions/Flag", "definitions": {"Flag": {"type": "boolean"}}}, True),
]


@pytest.mark.parametrize(("schema", "expected"), CASES)
def test_small_instances(schema: dict[str, Any], expected: Any) -> None:
    instance = sample_instance(schema)
    assert instance == expected
    draft4 = isinstance(schema.get("exclusiveMinimum"), bool)  # a draft 4 schema: its own validator
    jsonschema.validate(instance, schema, cls=jsonschema.Draft4Validator if draft4 else None)


def test_a_reference_it_cannot_follow_allows_anything() -> None:
    assert sample_instance({"$ref": "#/$defs/missing"}) == sample_instance({"$ref": "other.json"}) == PLACEHOLDER_SENTENCE


def test_a_string_is_padded_to_its_minimum_length() -> None:
    schema = {"type": "string", "minLength": 150, "maxLength": 160}
    instance = sample_instance(schema)
    assert 150 <= len(instance) <= 160 and instance.startswith(PLACEHOLDER_SENTENCE)


def test_a_recursive_schema_stops_at_max_depth() -> None:
    """A tree (``#`` refers to the root): each level has one child until MAX_DEPTH, where only the
    required properties are kept and arrays may be empty."""
    tree = {"type": "object", "properties": {"label": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["label"]}
    instance = sample_instance(tree)
    jsonschema.validate(instance, tree)
    depth, node = 0, instance
    while node.get("children"):
        node, depth = node["children"][0], depth + 1
    assert node == {"label": PLACEHOLDER_SENTENCE} and 0 < depth <= MAX_DEPTH
