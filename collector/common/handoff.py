"""A value one stage hands the next inside one process, beside the record that travels as JSON."""

from __future__ import annotations

from typing import Any


class Once:
    """A value handed over at most once: the adapters' run (its agent-typed ``input`` and
    ``output``), from assembly to the first of its jobs scored in the same process (the others,
    and a job read back from the store, validate them from the record's JSON form again).

    Example:
        >>> once = Once(("input", "output"))
        >>> once.take(), once.take()
        (('input', 'output'), None)
    """

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def take(self) -> Any:
        """The value, the first time; None after."""
        value, self._value = self._value, None
        return value
