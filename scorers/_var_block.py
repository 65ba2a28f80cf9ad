"""`VarBlock`: a context variable set for the length of a ``with`` block."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Generic, TypeVar

__all__ = ["VarBlock"]

T = TypeVar("T")


class VarBlock(Generic[T]):
    """Within a ``with`` block (and the tasks it starts), ``var`` holds ``value``; after it, what
    it held before. (A class, not a generator-based context manager: the worker enters such
    blocks for every job and the decision thread for every trace, and a generator's costs
    twice as much.)

    Example:
        >>> color = ContextVar("color", default="red")
        >>> with VarBlock(color, "blue"):
        ...     inside = color.get()
        >>> inside, color.get()
        ('blue', 'red')
    """

    __slots__ = ("_token", "_value", "_var")

    def __init__(self, var: ContextVar[T], value: T) -> None:
        self._var = var
        self._value = value

    def __enter__(self) -> None:
        self._token: Token[T] = self._var.set(self._value)

    def __exit__(self, *exc: object) -> None:
        self._var.reset(self._token)
