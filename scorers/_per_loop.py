"""Objects kept per event loop and key (asyncio primitives belong to the loop that made them)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One object per (running event loop, key), made on first use; forgotten with the loop.

    Example:
        >>> semaphores: PerLoop[asyncio.Semaphore] = PerLoop()
        >>> async def same() -> bool:
        ...     first = semaphores.get("m", lambda: asyncio.Semaphore(2))
        ...     return semaphores.get("m", lambda: asyncio.Semaphore(2)) is first
        >>> asyncio.run(same())
        True
    """

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, T]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, key: str, make: Callable[[], T]) -> T:
        """The running loop's object for ``key``, made by ``make()`` the first time.

        Example:
            >>> asyncio.run(asyncio.sleep(0, PerLoop[int]())).clear()
        """
        loop = asyncio.get_running_loop()
        per_key = self._by_loop.get(loop)
        if per_key is None:
            per_key = self._by_loop[loop] = {}
        found = per_key.get(key)
        if found is None:
            found = per_key[key] = make()
        return found

    def clear(self) -> None:
        """Forget every object (new settings apply to objects made afterwards).

        Example:
            >>> PerLoop[int]().clear()
        """
        self._by_loop.clear()
