"""A small valid instance of a JSON schema: what a judge could have answered, made up.

`tracescore score --estimate` answers every structured judge step with such an instance
instead of asking the model, so that the later steps run and render the prompts they
would send (their token counts are the estimate). The instance is small but shaped like
a model's answer:

* objects: every declared property (OpenAI's strict structured output makes every
  property required, so a model fills them all; a list with a default, such as the
  built-ins' ``statements``, left out would leave the next step nothing to judge);
* arrays: one item (``minItems`` when larger);
* strings: a short placeholder sentence (``minLength``/``maxLength`` respected; ``date``,
  ``date-time``, ``email``, ``uri`` and ``uuid`` formats get a value of that format);
* numbers: the midpoint of ``minimum``/``maximum``, 0.5 when unbounded or when 0.5 is
  within the one bound given (else half a unit inside it); integers the nearest whole
  number in range, 1 when unbounded;
* ``enum``: its first value; ``const``: its value; booleans: true; ``anyOf``/``oneOf``
  and type lists: the first branch that is not null; ``allOf``: the branches merged;
  ``$ref`` to ``#/$defs/...``, ``#/definitions/...`` or ``#`` (recursion stops at
  `MAX_DEPTH`: below it objects keep their required properties only and arrays are
  empty where they may be).

Example:
    >>> sample_instance({"type": "object", "properties": {"score": {"type": "number",
    ...     "minimum": 0, "maximum": 1}}, "required": ["score"]})
    {'score': 0.5}
"""

from __future__ import annotations

import math
from typing import Any

PLACEHOLDER_SENTENCE = "A short placeholder sentence the judge might write."
"""What a string of a made-up instance holds (9 tokens for gpt-4o-mini: a short statement or verdict reason)."""

PLACEHOLDER_TEXT = (
    "The score is 0.5 because this placeholder stands in for the judge's explanation: one or "
    "two sentences on the verdicts and the facts behind them, about as long as a typical reason."
)
"""A free-text reply of a plausible length (40 tokens for gpt-4o-mini: a one- or two-sentence reason)."""

MAX_DEPTH = 8
"""How deep the instance goes before it stops following recursive schemas."""

_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "judge@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def sample_instance(schema: Any) -> Any:
    """A small value valid against ``schema`` (a JSON schema dict), as the module docstring says.

    Example:
        >>> sample_instance({"$defs": {"Verdict": {"type": "object", "properties": {
        ...     "verdict": {"enum": ["yes", "no"]}, "reason": {"type": "string", "maxLength": 7}},
        ...     "required": ["verdict"]}}, "type": "object", "properties": {
        ...     "verdicts": {"type": "array", "items": {"$ref": "#/$defs/Verdict"}}}})
        {'verdicts': [{'verdict': 'yes', 'reason': 'A short'}]}
        >>> sample_instance({"type": "integer", "minimum": 1, "maximum": 5}), sample_instance(True)
        (3, 'A short placeholder sentence the judge might write.')
    """
    return _Sampler(schema if isinstance(schema, dict) else {}).sample(schema, 0)


class _Sampler:
    """Walks one schema, resolving its local ``$ref``s against the root."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def sample(self, node: Any, depth: int) -> Any:
        """The instance of ``node`` at ``depth`` (the root is 0)."""
        if not isinstance(node, dict):  # true, or a missing schema: anything is valid
            return PLACEHOLDER_SENTENCE
        if "$ref" in node:
            target = self.resolve(str(node["$ref"]))
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return self.sample(merged, depth + 1)
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return node["enum"][0]
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                return self.sample(_first_not_null(branches), depth)
        if isinstance(node.get("allOf"), list):
            return self.sample(_merge_all_of(node), depth)
        kind = _kind(node)
        if kind == "object":
            return self.object(node, depth)
        if kind == "array":
            return self.array(node, depth)
        if kind in ("number", "integer"):
            return sample_number(node, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return sample_string(node)

    def resolve(self, ref: str) -> dict[str, Any]:
        """The schema a local ``$ref`` points at ({}: any value, for one it cannot follow)."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return {}
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    def object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        """Every property (below `MAX_DEPTH`, the required ones only)."""
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return {}
        required = set(node.get("required") or ())
        names = [n for n in properties if n in required] if depth >= MAX_DEPTH else list(properties)
        return {name: self.sample(properties[name], depth + 1) for name in names}

    def array(self, node: dict[str, Any], depth: int) -> list[Any]:
        """``minItems`` items, at least one (none below `MAX_DEPTH`, or when ``maxItems`` is 0)."""
        low = int(node.get("minItems") or 0)
        count = low if depth >= MAX_DEPTH or node.get("maxItems") == 0 else max(1, low)
        fixed = node.get("prefixItems")
        if not isinstance(fixed, list):
            fixed = node["items"] if isinstance(node.get("items"), list) else []
        rest = node.get("items") if isinstance(node.get("items"), dict) else node.get("additionalItems")
        count = max(count, len(fixed))
        return [self.sample(fixed[i] if i < len(fixed) else rest, depth + 1) for i in range(count)]


def _first_not_null(branches: list[Any]) -> Any:
    for branch in branches:
        if not (isinstance(branch, dict) and branch.get("type") == "null"):
            return branch
    return branches[0]


def _merge_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``allOf`` branches folded in (properties and required lists joined)."""
    merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
    for branch in node["allOf"]:
        if not isinstance(branch, dict):
            continue
        for key, value in branch.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _kind(node: dict[str, Any]) -> str:
    """The instance type a node asks for (the first that is not null of a type list)."""
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if isinstance(kind, str):
        return kind
    if "properties" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def sample_number(node: dict[str, Any], *, integer: bool = False) -> float | int:
    """A number within the node's bounds (see the module docstring).

    Example:
        >>> [sample_number(n) for n in ({}, {"minimum": 0, "maximum": 10}, {"minimum": 1},
        ...                             {"maximum": 0}, {"exclusiveMinimum": 0, "maximum": 1})]
        [0.5, 5.0, 1.5, -0.5, 0.5]
        >>> [sample_number(n, integer=True) for n in ({}, {"minimum": 0, "maximum": 1},
        ...                                           {"exclusiveMinimum": 0, "maximum": 1}, {"minimum": 7})]
        [1, 0, 1, 7]
        >>> sample_number({"maximum": -3}, integer=True), sample_number({"exclusiveMaximum": -3}, integer=True)
        (-3, -4)
    """
    low, low_open = _bound(node, "minimum", "exclusiveMinimum")
    high, high_open = _bound(node, "maximum", "exclusiveMaximum")

    def fits(value: float) -> bool:
        return ((low is None or (value > low if low_open else value >= low))
                and (high is None or (value < high if high_open else value <= high)))

    candidates: list[float]
    if low is not None and high is not None:
        candidates = [(low + high) / 2]
    elif integer:
        candidates = [1.0]
    elif low is not None:
        candidates = [0.5, low + 0.5, low + 1]
    elif high is not None:
        candidates = [0.5, high - 0.5, high - 1]
    else:
        candidates = [0.5]
    if integer:  # the whole numbers around the midpoint (or 1), then the bounds and one inside them
        candidates = [float(c) for x in candidates for c in (math.floor(x), math.ceil(x))]
        candidates += [] if low is None else [float(math.ceil(low)), math.ceil(low) + 1.0]
        candidates += [] if high is None else [float(math.floor(high)), math.floor(high) - 1.0]
    for value in candidates:
        if fits(value):
            return int(value) if integer else float(value)
    return int(candidates[0]) if integer else float(candidates[0])


def _bound(node: dict[str, Any], inclusive: str, exclusive: str) -> tuple[float | None, bool]:
    """A bound and whether it is exclusive (draft 4's boolean ``exclusiveMinimum`` too)."""
    open_value = node.get(exclusive)
    if isinstance(open_value, int | float) and not isinstance(open_value, bool):
        return float(open_value), True
    value = node.get(inclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), open_value is True
    return None, False


def sample_string(node: dict[str, Any]) -> str:
    """A placeholder sentence, or a value of the node's ``format``, fitted to its length bounds.

    Example:
        >>> sample_string({"format": "date"}), sample_string({"maxLength": 5}), len(sample_string({"minLength": 80}))
        ('2026-01-01', 'A sho', 80)
    """
    text = _FORMATS.get(str(node.get("format")), PLACEHOLDER_SENTENCE)
    least = node.get("minLength")
    if isinstance(least, int) and len(text) < least:
        text = (text + " ") * (least // (len(text) + 1) + 1)
        text = text[:least]
    most = node.get("maxLength")
    if isinstance(most, int) and len(text) > most:
        text = text[:most]
    return text
