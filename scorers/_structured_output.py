"""Structured judge output: schemas, JSON prompt injection, tolerant parsing, validation.

Pure functions (no I/O, no litellm), so what is sent can be checked in unit tests; the one
exception, `ensure_jsonschema`, imports the validator library off the event loop.
The injected texts are Mastra's / the AI SDK's, verbatim (SPEC §1.5, mastra §6.1):

- system: ``<system text>\\n\\nJSON schema:\\n<compact schema>\\nYou MUST answer with a JSON
  object that matches the JSON schema above.``
- inline: ``Return your response as JSON matching this schema:\\n\\n<compact schema>\\n\\n
  Return only valid JSON. Do not include markdown or explanatory text.`` appended to the
  last user message (joined with a blank line: the content stays a plain string).
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from scorers._schema_keys import drop_unknown_keys

Mode = Literal["native", "system", "inline"]

SYSTEM_PREFIX = "JSON schema:"
SYSTEM_SUFFIX = "You MUST answer with a JSON object that matches the JSON schema above."
INLINE_PREFIX = "Return your response as JSON matching this schema:"
INLINE_SUFFIX = "Return only valid JSON. Do not include markdown or explanatory text."
NO_OBJECT = "No object generated: could not parse the response."

_FENCE_JSON = re.compile(r"```json[^\n]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_FENCE_ANY = re.compile(r"```[A-Za-z0-9_-]*[^\n]*\n(.*?)```", re.DOTALL)


class OutputInvalid(ValueError):
    """The reply could not be parsed or validated (this triggers the JSON fallback)."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


_jsonschema_ready = False
"""Whether jsonschema's import has finished (`ensure_jsonschema`)."""


async def ensure_jsonschema() -> None:
    """Import jsonschema (which validates dict schemas) in a worker thread on first use.

    An import reads the file system: done on the event loop it would stall every other
    task (and BlockBuster says so). The default generate_score schema is a dict, so the
    first prompt-mode score of a process needs it; a pydantic schema needs it to choose a
    union branch when a reply's unknown keys are dropped (`scorers._schema_keys`).

    Example:
        >>> import asyncio
        >>> asyncio.run(ensure_jsonschema())
    """
    global _jsonschema_ready
    if not _jsonschema_ready:  # not "in sys.modules": a module is there from the start of its import
        await asyncio.to_thread(importlib.import_module, "jsonschema")  # concurrent callers wait in threads
        _jsonschema_ready = True


def resolve_mode(setting: Any, supports_native: Any) -> Mode:
    """The injection mode for a ``json_prompt_injection`` setting.

    ``supports_native`` is a zero-argument callable, asked only for "auto".

    Example:
        >>> [resolve_mode(s, lambda: True) for s in ("auto", True, "system", "inline", False)]
        ['native', 'system', 'system', 'inline', 'native']
        >>> resolve_mode("auto", lambda: False)
        'inline'
    """
    if setting is True or setting == "system":
        return "system"
    if setting == "inline":
        return "inline"
    if setting is False or setting is None:
        return "native"
    if setting == "auto":
        return "native" if supports_native() else "inline"
    raise ValueError(f"json_prompt_injection must be 'auto', True, 'system', 'inline' or False, not {setting!r}")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict form: every object lists all its properties as required and forbids others.

    Recurses into properties, items, ``anyOf``/``allOf``/``oneOf`` and ``$defs``; drops
    ``default: null`` (OpenAI rejects it in strict mode). The input is not modified.

    Example:
        >>> strict_schema({"type": "object", "properties": {"a": {"type": "string"}}})
        {'type': 'object', 'properties': {'a': {'type': 'string'}}, 'additionalProperties': False, 'required': ['a']}
    """
    result = copy.deepcopy(schema)
    _make_strict(result)
    return result


def _make_strict(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _make_strict(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "object" or "properties" in node:
        props = node.get("properties")
        if isinstance(props, dict):
            node["additionalProperties"] = False
            node["required"] = list(props)
        elif node.get("type") == "object" and "additionalProperties" not in node:
            node["additionalProperties"] = False
    if "default" in node and node["default"] is None:
        del node["default"]
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        if isinstance(node.get(key), dict):
            for child in node[key].values():
                _make_strict(child)
    for key in ("items", "anyOf", "allOf", "oneOf", "prefixItems", "not", "additionalProperties"):
        if key in node and isinstance(node[key], dict | list):
            _make_strict(node[key])


class SchemaSpec:
    """A step's output schema, prepared once: JSON schema, compact text, validator.

    The JSON schema is exactly the user's: a pydantic model's ``model_json_schema()`` or the
    dict given; nothing of ours (title, description) is added to what the judge receives.

    Example:
        >>> spec = SchemaSpec.of({"type": "object", "properties": {"score": {"type": "number"}},
        ...                       "required": ["score"]})
        >>> spec.validate({"score": 0.5}), spec.name
        ({'score': 0.5}, 'response')
    """

    _cache: dict[Any, SchemaSpec] = {}

    def __init__(self, schema: type[BaseModel] | dict[str, Any]) -> None:
        self.model: type[BaseModel] | None = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self.model = schema
            self.json_schema: dict[str, Any] = schema.model_json_schema()
            self._validator: Any = None
        elif isinstance(schema, dict):
            self.json_schema = schema
            import jsonschema  # deferred: only prompt steps with dict schemas need it

            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._validator = cls(schema)
        else:
            raise TypeError(
                f"output_schema must be a pydantic model class or a JSON Schema dict, not {schema!r}"
            )
        # The response_format name: the schema's own title, else the AI SDK's "response".
        raw_name = str(self.json_schema.get("title") or "response")
        self.name = re.sub(r"[^A-Za-z0-9_-]", "_", raw_name)[:64] or "response"
        self.compact = json.dumps(self.json_schema, separators=(",", ":"), ensure_ascii=False)
        self._strict: dict[str, Any] | None = None
        # Native structured output needs an object at the root (OpenAI, Anthropic tools): an
        # array is sent as {"elements": [...]}, anything else as {"result": ...}, and unwrapped.
        root_is_object = self.json_schema.get("type") == "object" or "properties" in self.json_schema
        self.wrap_key: str | None = None
        self.native_schema = self.json_schema
        if not root_is_object:
            self.wrap_key = "elements" if self.json_schema.get("type") == "array" else "result"
            inner = {k: v for k, v in self.json_schema.items() if k not in ("$defs", "definitions")}
            self.native_schema = {
                "type": "object",
                "properties": {self.wrap_key: inner},
                "required": [self.wrap_key],
                **{k: v for k, v in self.json_schema.items() if k in ("$defs", "definitions")},
            }

    @classmethod
    def of(cls, schema: type[BaseModel] | dict[str, Any]) -> SchemaSpec:
        """The (cached) spec of ``schema``.

        Example:
            >>> SchemaSpec.of({"type": "string"}) is SchemaSpec.of({"type": "string"})
            True
        """
        key: Any = schema if isinstance(schema, type) else json.dumps(schema, sort_keys=True)
        spec = cls._cache.get(key)
        if spec is None:
            if len(cls._cache) > 512:
                cls._cache.clear()
            spec = cls._cache[key] = cls(schema)
        return spec

    def response_format(self, *, strict: bool) -> dict[str, Any]:
        """The OpenAI-style ``response_format`` for native structured output.

        Example:
            >>> SchemaSpec.of({"type": "object", "properties": {}})\\
            ...     .response_format(strict=False)["json_schema"]["name"]
            'response'
        """
        if not strict:
            return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.native_schema}}
        if self._strict is None:
            self._strict = strict_schema(self.native_schema)
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self._strict, "strict": True},
        }

    def validate(self, value: Any) -> Any:
        """Validate a parsed JSON value: a model instance for pydantic schemas, else the value.

        A value that fails only because of keys the schema does not allow is valid without
        them, as zod validates Mastra's judge output (`scorers._schema_keys`): those keys
        are dropped, not an error.

        Raises:
            OutputInvalid: with Mastra's "Structured output validation failed:" message.

        Example:
            >>> SchemaSpec.of({"type": "integer"}).validate("x")
            Traceback (most recent call last):
            ...
            scorers._structured_output.OutputInvalid: Structured output validation failed:
            - (root): 'x' is not of type 'integer'
            >>> SchemaSpec.of({"type": "object", "properties": {"score": {"type": "number"}},
            ...                "additionalProperties": False}).validate({"score": 1, "extra": "x"})
            {'score': 1}
        """
        try:
            return self._validate_exactly(value)
        except OutputInvalid:
            kept = drop_unknown_keys(value, self.json_schema, self._fits)
            if kept == value:
                raise
        return self._validate_exactly(kept)

    def _fits(self, branch: Any, candidate: Any) -> bool:
        """Whether ``candidate`` is valid against ``branch``, a subschema of this schema."""
        if self._validator is None:  # a pydantic model's JSON schema, checked as JSON Schema
            import jsonschema  # already imported off the loop by ensure_jsonschema

            self._validator = jsonschema.validators.validator_for(self.json_schema)(self.json_schema)
        return bool(self._validator.evolve(schema=branch).is_valid(candidate))

    def _validate_exactly(self, value: Any) -> Any:
        """`validate` without dropping keys the schema does not allow."""
        if self.model is not None:
            try:
                return self.model.model_validate(value)
            except ValidationError as exc:
                lines = [
                    f"- {'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                    for err in exc.errors()
                ]
                raise OutputInvalid(
                    "Structured output validation failed:\n" + "\n".join(lines), json.dumps(value)
                ) from exc
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            lines = [f"- {'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors]
            raise OutputInvalid(
                "Structured output validation failed:\n" + "\n".join(lines), json.dumps(value)
            )
        return value


def inject(messages: list[dict[str, Any]], spec: SchemaSpec, mode: Mode) -> list[dict[str, Any]]:
    """Return the messages with the schema injected for ``mode`` ("native" leaves them as is).

    Example:
        >>> spec = SchemaSpec.of({"type": "object"})
        >>> inject([{"role": "system", "content": "Judge."}, {"role": "user", "content": "Go"}],
        ...        spec, "system")[0]["content"]
        'Judge.\\n\\nJSON schema:\\n{"type":"object"}\\nYou MUST answer with a JSON object that matches the JSON schema above.'
        >>> inject([{"role": "user", "content": "Go"}], spec, "inline")[0]["content"]
        'Go\\n\\nReturn your response as JSON matching this schema:\\n\\n{"type":"object"}\\n\\nReturn only valid JSON. Do not include markdown or explanatory text.'
    """
    if mode == "native":
        return messages
    out = list(messages)
    if mode == "system":
        if out and out[0].get("role") == "system":
            previous = _text(out[0].get("content"))
            lines = ([previous, ""] if previous else []) + [SYSTEM_PREFIX, spec.compact, SYSTEM_SUFFIX]
            out[0] = {**out[0], "content": "\n".join(lines)}
        else:
            text = "\n".join([SYSTEM_PREFIX, spec.compact, SYSTEM_SUFFIX])
            out.insert(0, {"role": "system", "content": text})
        return out
    instruction = f"{INLINE_PREFIX}\n\n{spec.compact}\n\n{INLINE_SUFFIX}"
    for index in range(len(out) - 1, -1, -1):
        if out[index].get("role") == "user":
            previous = _text(out[index].get("content"))
            joined = f"{previous}\n\n{instruction}" if previous else instruction
            out[index] = {**out[index], "content": joined}
            return out
    out.append({"role": "user", "content": instruction})
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def extract_json(text: str) -> Any:
    """Parse the JSON value in a reply: bare, in a fenced block, or wrapped in prose.

    Raises:
        OutputInvalid: when no JSON value can be found.

    Example:
        >>> extract_json('Sure!\\n```json\\n{"score": 1}\\n```')
        {'score': 1}
        >>> extract_json('The verdict is {"score": 0.2} as requested.')
        {'score': 0.2}
    """
    stripped = text.strip()
    if not stripped:
        raise OutputInvalid(NO_OBJECT, text)
    candidates: list[str] = []
    fenced = _FENCE_JSON.search(stripped)
    if fenced:
        candidates.append(fenced.group(1))
    candidates.append(stripped)
    if stripped.startswith("```"):
        candidates.append(re.sub(r"^```[A-Za-z]*\s*|\s*```$", "", stripped))
    candidates.extend(m.group(1) for m in _FENCE_ANY.finditer(stripped))
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    tried = 0
    for match in re.finditer(r"[{\[]", stripped):
        tried += 1
        if tried > 64:
            break
        try:
            value, _end = decoder.raw_decode(stripped, match.start())
        except ValueError:
            continue
        return value
    raise OutputInvalid(f"Judge reply is not valid JSON: {preview(text)}", text)


def preview(text: str, limit: int = 200) -> str:
    """The start of a reply, quoted, for error messages.

    Example:
        >>> preview("x" * 300, limit=5)
        "'xxxxx...'"
    """
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def parse_reply(text: str, spec: SchemaSpec, *, native: bool = False) -> Any:
    """Parse and validate a reply against the schema (raises `OutputInvalid`).

    With ``native``, a non-object schema was sent wrapped (``{"elements": ...}`` or
    ``{"result": ...}``) and the reply is unwrapped first; other keys beside the wrapper's
    are dropped, as unknown keys are (`SchemaSpec.validate`).

    Example:
        >>> parse_reply('```json\\n{"score": 3}\\n```', SchemaSpec.of({"type": "object"}))
        {'score': 3}
        >>> parse_reply('{"elements": [1, 2], "note": "x"}', SchemaSpec.of({"type": "array"}), native=True)
        [1, 2]
    """
    value = extract_json(text)
    if native and spec.wrap_key and isinstance(value, dict) and spec.wrap_key in value:
        value = value[spec.wrap_key]
    return spec.validate(value)
