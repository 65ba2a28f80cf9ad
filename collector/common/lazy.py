"""Package exports imported on first use (PEP 562): importing one light submodule of a package
(the scorer registry for ``tracescore check``, the SQLite dead letters for ``tracescore
dead-letters``) then does not import the package's heavy siblings (the worker, the stores)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: the first access of an exported ``name``
    imports the module ``where[name]`` and returns its attribute of that name.

    Example:
        >>> getattr_ = lazy_exports("pkg", {"OrderedDict": "collections"})
        >>> getattr_("OrderedDict").__name__
        'OrderedDict'
        >>> getattr_("nope")
        Traceback (most recent call last):
        ...
        AttributeError: module 'pkg' has no attribute 'nope'
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
