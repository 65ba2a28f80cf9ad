"""Keys a judge's structured reply should not have are dropped, not an error (zod's rule).

Mastra validates a judge's structured output with zod, and a zod object (``z.object``,
the default) strips the keys its shape does not declare. Converted to JSON Schema, such
an object reads ``"additionalProperties": false``, which is what the judge is sent (SPEC
§1.5's default score schema says exactly that). So in Mastra the reply
``{"score": 0.5, "extra": "x"}`` is the score 0.5 after one model call, not a validation
failure and a second call. The schema sent is never changed here; only validation reads
it the way zod built it:

- an object schema with ``"additionalProperties": false`` drops the keys it neither lists
  in ``properties`` nor matches with ``patternProperties`` (zod's default object, strip);
- an object schema that allows other keys (``additionalProperties`` absent, true, or a
  schema) keeps them (zod's ``passthrough`` or ``catchall``), validated as it says.

The rule holds at any depth (``properties``, ``patternProperties``, ``items``,
``prefixItems``, local ``$ref``s, and ``anyOf``/``oneOf``, where the first branch the
value fits once its unknown keys are dropped wins) and for both kinds of schema: a
pydantic model is read through its JSON schema, so a model with ``extra="forbid"`` drops
unknown keys as a dict schema with ``additionalProperties: false`` does (the default
``extra="ignore"`` already drops them, and ``extra="allow"`` keeps them). Values under
``allOf`` are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Fits = Callable[[Any, Any], bool]
"""``fits(branch, candidate)``: whether ``candidate`` is valid against one union branch."""

_MAX_REF_HOPS = 32


def drop_unknown_keys(value: Any, schema: Any, fits: Fits, root: Any = None) -> Any:
    """Return a copy of ``value`` without the keys ``schema`` does not allow (module docstring).

    ``value`` is a parsed JSON value and is not modified; ``root`` is the whole schema,
    against which ``$ref``s resolve (``schema`` itself when not given).

    Example:
        >>> score = {"type": "object", "properties": {"score": {"type": "number"}},
        ...          "required": ["score"], "additionalProperties": False}
        >>> drop_unknown_keys({"score": 0.5, "extra": "x"}, score, lambda branch, v: True)
        {'score': 0.5}
        >>> weights = {"type": "object", "properties": {"w": {"type": "object",
        ...            "additionalProperties": {"type": "number"}}}, "additionalProperties": False}
        >>> drop_unknown_keys({"w": {"a": 1, "b": 2}, "note": "x"}, weights, lambda branch, v: True)
        {'w': {'a': 1, 'b': 2}}
    """
    if not isinstance(value, dict | list):
        return value  # a scalar has no keys to drop
    root = schema if root is None else root
    node = _resolve(schema, root)
    if not isinstance(node, dict):
        return value
    for union in ("anyOf", "oneOf"):
        branches = node.get(union)
        if isinstance(branches, list):
            value = _first_fitting(value, branches, fits, root)
    if isinstance(value, dict):
        return _object(value, node, fits, root)
    if isinstance(value, list):
        return _array(value, node, fits, root)
    return value


def _resolve(node: Any, root: Any) -> Any:
    """Follow local ``$ref``s (``#/$defs/Name``); a remote or broken one allows anything."""
    for _hop in range(_MAX_REF_HOPS):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node
        if not ref.startswith("#"):
            return {}
        node = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return {}
            node = node[part]
    return {}


def _first_fitting(value: Any, branches: list[Any], fits: Fits, root: Any) -> Any:
    """The value as the first branch it fits (once that branch's unknown keys are dropped)
    reads it; the value unchanged when it fits none."""
    for branch in branches:
        candidate = drop_unknown_keys(value, branch, fits, root)
        if fits(branch, candidate):
            return candidate
    return value


def _pattern_schema(key: str, patterns: Any) -> tuple[bool, Any]:
    """Whether ``key`` matches one of ``patternProperties``, and that pattern's schema."""
    if not isinstance(patterns, dict):
        return False, None
    for pattern, sub in patterns.items():
        try:
            if re.search(pattern, key):
                return True, sub
        except re.error:  # an ECMA-only pattern Python cannot compile: it matches nothing here
            continue
    return False, None


def _object(value: dict[str, Any], node: dict[str, Any], fits: Fits, root: Any) -> dict[str, Any]:
    properties = node.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    additional = node.get("additionalProperties", True)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if key in properties:
            kept[key] = drop_unknown_keys(item, properties[key], fits, root)
            continue
        matched, sub = _pattern_schema(key, node.get("patternProperties"))
        if matched:
            kept[key] = drop_unknown_keys(item, sub, fits, root)
        elif additional is not False:
            kept[key] = drop_unknown_keys(item, additional, fits, root)
    return kept


def _array(value: list[Any], node: dict[str, Any], fits: Fits, root: Any) -> list[Any]:
    prefix, rest = node.get("prefixItems"), node.get("items")
    if isinstance(rest, list):  # drafts 4 to 7: positional items, then additionalItems
        prefix, rest = rest, node.get("additionalItems")
    prefix = prefix if isinstance(prefix, list) else []
    return [
        drop_unknown_keys(item, prefix[index] if index < len(prefix) else rest, fits, root)
        for index, item in enumerate(value)
    ]
