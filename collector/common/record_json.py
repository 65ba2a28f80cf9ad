"""JSON of the daemon's dataclass records (`collector.common.types`), without deep copies.

``dataclasses.asdict`` copies every nested value and ``fields()`` is slow to ask per key:
on the hot path (a job queued, a score settled and exported) records are read and written
as plain dicts of their fields, with the field names looked up once per class, and their
text is made and parsed by orjson (`dumps`, `loads`).
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, fields, is_dataclass
from typing import Any, AnyStr, TypeVar

import orjson

_FIELD_NAMES: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _field_names(cls: type) -> frozenset[str]:
    return _fields_of(cls)[1]


def _fields_of(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    """A dataclass's field names, in order and as a set (looked up once per class); a field
    whose metadata says ``transient`` lives in memory only and is not part of the JSON."""
    known = _FIELD_NAMES.get(cls)
    if known is None:
        names = tuple(f.name for f in fields(cls) if not f.metadata.get("transient"))
        known = _FIELD_NAMES[cls] = (names, frozenset(names))
    return known


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` that ``cls`` has (a record written by a later version still loads)."""
    names = _field_names(cls)
    return data if data.keys() <= names else {k: v for k, v in data.items() if k in names}


def record_dict(record: Any) -> dict[str, Any]:
    """A dataclass record's fields as a dict, values as they are (not deep-copied like ``asdict``):
    what its JSON is made of.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Point:
        ...     x: int
        ...     tags: list[str]
        >>> point = Point(1, ["a"])
        >>> record_dict(point), record_dict(point)["tags"] is point.tags
        ({'x': 1, 'tags': ['a']}, True)
    """
    return {name: getattr(record, name) for name in _fields_of(type(record))[0]}


def json_default(value: Any) -> Any:
    """``json.dumps``'s fallback for record values: a dataclass as its fields, anything else as text.

    Example:
        >>> import json
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Point:
        ...     x: int
        >>> json.dumps({"a": Point(1), "b": {1, 2}}, default=json_default)
        '{"a": {"x": 1}, "b": "{1, 2}"}'
    """
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME  # a datetime through `json_default` (as text), as json wrote it


def _orjson_default(value: Any) -> Any:
    """`json_default` for orjson, which also sends it float subclasses (numpy's float64):
    json wrote those as numbers."""
    if isinstance(value, float):
        return float(value)
    return json_default(value)


def dumps(data: Any) -> str:
    """A record's JSON text: orjson's compact form, or ``json.dumps``'s (spaced) form after one
    space for what orjson refuses (an int past 64 bits, a key that is not a string, a lone
    surrogate). Values it has no JSON for go through `json_default`; where the two differ, orjson
    writes an Enum as its value (json: its text) and a float that is not finite as ``null`` (JSON
    has no NaN).

    Example:
        >>> dumps({"a": [1, 2.5, None], "b": {1}})
        '{"a":[1,2.5,null],"b":"{1}"}'
        >>> dumps({"big": 2**70})
        ' {"big": 1180591620717411303424}'
    """
    try:
        return orjson.dumps(data, default=_orjson_default, option=_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        # The leading space tells `loads` to read it with json: orjson's form never starts so.
        return " " + json.dumps(data, default=json_default)


def loads(text: str | bytes) -> Any:
    """Parse a record's JSON text: `dumps`'s compact form by orjson; any other (`dumps`'s
    json form, which starts with a space, or ``json.dumps``'s spaced form that earlier versions
    wrote: either can hold ints past 64 bits that orjson would read as floats, or NaN) by json,
    exactly as it was written.

    A text with no object key in it (a number, a list of numbers) reads by json too: json.dumps
    writes those without a space, as orjson does, and orjson reads an int past 64 bits as a float.

    Example:
        >>> loads('{"big":1}'), loads('{"big": 1180591620717411303424}'), loads(dumps([-2**63 - 1]))
        ({'big': 1}, {'big': 1180591620717411303424}, [-9223372036854775809])
        >>> loads("[-9223372036854775809]"), loads(b"18446744073709551616")
        ([-9223372036854775809], 18446744073709551616)
        >>> loads(b'{"n": NaN}')
        {'n': nan}
    """
    spaced = _written_by_json(text, _BYTES_MARKS) if isinstance(text, bytes) else _written_by_json(text, _STR_MARKS)
    if spaced:  # json.dumps's form, or a text with no object key (a number, a list of them)
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


_STR_MARKS = ('"', "\\", "{", ": ")
_BYTES_MARKS = (b'"', b"\\", b"{", b": ")


def _written_by_json(text: AnyStr, marks: tuple[AnyStr, AnyStr, AnyStr, AnyStr]) -> bool:
    """Whether ``text`` is read by json rather than orjson: `dumps`'s json form (a leading space),
    an object whose first key json.dumps wrote (``": `` after it; orjson writes ``":``), or no
    object at all (json.dumps writes a number or a list as orjson does, and only json reads an
    int past 64 bits as an int). ``marks``: quote, backslash, brace, colon-space.

    Example:
        >>> [_written_by_json(t, _STR_MARKS) for t in ('{"k": 1}', '{"k":1}', '{}', '[1]', ' [1]')]
        [True, False, False, True, True]
        >>> _written_by_json(b'{"a\\\\"b": 1}', _BYTES_MARKS), _written_by_json(b'{"a\\\\"b":1}', _BYTES_MARKS)
        (True, False)
    """
    quote, backslash, brace, colon_space = marks
    if text[:1] != brace:  # not an object, or `dumps`'s json form (it starts with a space)
        return True
    if text[1:2] != quote:
        return False  # "{}" (or malformed: orjson says where)
    end = 1
    while True:  # the first key's closing quote: the first one not escaped by a backslash
        end = text.find(quote, end + 1)
        if end < 0:
            return False  # malformed: orjson says where
        before = end
        while text[before - 1:before] == backslash:
            before -= 1
        if (end - before) % 2 == 0:
            return text[end + 1:end + 3] == colon_space


_Record = TypeVar("_Record", bound=type)


def fast_init(cls: _Record) -> _Record:
    """Give a frozen dataclass record an ``__init__`` that fills the instance's dict in one step.

    The one ``@dataclass(frozen=True)`` writes sets each field through ``object.__setattr__``
    (the class refuses plain assignment): for a record of 20 or 30 fields, made several times
    per scored run, that is half its cost. The new one takes the same arguments, with the same
    defaults (a ``default_factory`` called for each instance), and makes an equal instance; the
    dataclass's own is kept as ``_dataclass_init``. Only for classes without slots,
    ``__post_init__`` or fields left out of ``__init__``.

    Example:
        >>> from dataclasses import dataclass, field
        >>> @fast_init
        ... @dataclass(frozen=True)
        ... class Point:
        ...     x: int
        ...     y: int = 0
        ...     tags: list[str] = field(default_factory=list)
        >>> Point(1), Point(1, y=2, tags=["a"]), Point(1).tags is Point(1).tags
        (Point(x=1, y=0, tags=[]), Point(x=1, y=2, tags=['a']), False)
    """
    record_fields = fields(cls)
    if hasattr(cls, "__slots__") or hasattr(cls, "__post_init__") or not all(f.init for f in record_fields):
        raise TypeError(f"fast_init: {cls.__name__} has slots, __post_init__ or fields outside __init__")
    namespace: dict[str, Any] = {"_MISSING": MISSING}
    params, items = [], []
    for f in record_fields:
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
            items.append(f"{f.name!r}: {f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            items.append(f"{f.name!r}: _factory_{f.name}() if {f.name} is _MISSING else {f.name}")
        else:
            params.append(f.name)
            items.append(f"{f.name!r}: {f.name}")
    source = f"def __init__(self, {', '.join(params)}):\n    self.__dict__.update({{{', '.join(items)}}})\n"
    exec(source, namespace)  # as dataclasses makes its own __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls._dataclass_init = cls.__init__  # type: ignore[attr-defined,misc]
    cls.__init__ = init  # type: ignore[misc]
    return cls
