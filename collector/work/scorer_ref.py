"""Scorer refs: the object a ``module:attr`` or ``path/to/file.py:attr`` ref names (`load_ref`), and
the scorer it gives (`resolve_scorer`: the object itself, or what a factory of one returns), with
errors that say what the module offers instead (the closest name, its scorers) and where an import
or a factory failed.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collector.common.errors import ConfigError

__all__ = ["load_ref", "resolve_scorer"]


def _import_from_working_directory() -> None:
    # The console script's sys.path starts with its bin directory, not the working directory:
    # `tracescore serve --scorer my_scorers:quality` run beside my_scorers.py must find it, as
    # `python -m` would. Appended, so an installed package is never shadowed by a local folder.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def load_ref(ref: str) -> Any:
    """Import the object named by ``module:attr`` or ``path/to/file.py:attr``.

    Raises:
        ConfigError: when the module, file or attribute cannot be loaded.

    Example:
        >>> load_ref("collections:OrderedDict").__name__
        'OrderedDict'
        >>> load_ref("collections:nope")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: scorer ref 'collections:nope': module has no attribute 'nope'; it defines no scorer object (a factory that returns one is named the same way: module:factory)
    """
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise ConfigError(f"scorer ref {ref!r}: expected module:attribute or path/file.py:attribute")
    try:
        if target.endswith(".py") or "/" in target or "\\" in target:
            path = Path(target).resolve()
            if not path.is_file():
                raise ConfigError(f"scorer ref {ref!r}: file not found: {path}")
            name = "tracescore_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise ConfigError(f"scorer ref {ref!r}: cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        else:
            _import_from_working_directory()
            module = importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(f"scorer ref {ref!r}: import failed: {type(err).__name__}: {err}{_where(err)}") from err
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"scorer ref {ref!r}: {'module' if obj is module else 'it'} has no attribute "
                              f"{part!r}{_offered(obj, part)}")
        obj = getattr(obj, part)
    return obj


def _offered(owner: Any, missing: str) -> str:
    """What ``owner`` (a module) offers instead of the attribute ``missing``: the closest name
    (difflib) and its scorers, for a ref's error message.

    Example:
        >>> import types
        >>> from scorers import create_scorer
        >>> mod = types.ModuleType("m")
        >>> mod.relevance = create_scorer(id="relevance", description="d").generate_score(lambda run: 1.0)
        >>> mod.tone = create_scorer(id="tone", description="d").generate_score(lambda run: 1.0)
        >>> _offered(mod, "relevanse")
        "; did you mean 'relevance'? Its scorers: relevance, tone"
        >>> _offered(types.ModuleType("empty"), "x")
        '; it defines no scorer object (a factory that returns one is named the same way: module:factory)'
    """
    names = [n for n in dir(owner) if not n.startswith("_")]
    found = [n for n in names if _is_scorer(getattr(owner, n, None))]
    close = difflib.get_close_matches(missing, found or names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if found:
        return f"{hint} Its scorers: {', '.join(found)}" if hint else f"; its scorers: {', '.join(found)}"
    return hint or "; it defines no scorer object (a factory that returns one is named the same way: module:factory)"


def _is_scorer(obj: Any) -> bool:
    return not isinstance(obj, type) and all(hasattr(obj, a) for a in ("id", "name")) and callable(
        getattr(obj, "run", None))


def resolve_scorer(ref: str, args: Mapping[str, Any] | None = None) -> Any:
    """The scorer a ref names: the object itself, or what a factory returns when called with
    ``args`` as keyword arguments (``scorers.builtin:completeness`` is a zero-argument factory).

    Raises:
        ConfigError: the ref cannot be loaded, names neither a scorer nor a factory of one,
            the factory refuses ``args`` or raises, or ``args`` are given for a scorer object.

    Example:
        >>> resolve_scorer("scorers.builtin:completeness").id
        'completeness'
        >>> resolve_scorer("collections:OrderedDict")
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: scorer ref 'collections:OrderedDict': OrderedDict() returned OrderedDict, not a scorer (needs id, name and run)
    """
    obj = load_ref(ref)
    if _is_scorer(obj):
        if args:
            raise ConfigError(f"scorer ref {ref!r}: args are given but it names a scorer, not a factory")
        return obj
    if not callable(obj):
        raise ConfigError(f"scorer ref {ref!r}: {type(obj).__name__} is not a scorer (needs id, name and run) "
                          "nor a factory of one")
    name = getattr(obj, "__name__", type(obj).__name__)
    try:
        inspect.signature(obj).bind(**(args or {}))
    except TypeError as err:
        raise ConfigError(f"scorer ref {ref!r}: {name} is not a scorer, and as a factory it cannot be "
                          f"called with args {dict(args or {})}: {err}") from None
    except ValueError:
        pass  # no signature to check (a builtin): the call says
    try:
        made = obj(**(args or {}))
    except Exception as err:
        raise ConfigError(f"scorer ref {ref!r}: factory {name}() failed: {type(err).__name__}: {err}"
                          f"{_where(err)}") from err
    if not _is_scorer(made):
        raise ConfigError(f"scorer ref {ref!r}: {name}() returned {type(made).__name__}, not a scorer "
                          "(needs id, name and run)")
    return made


def _where(err: BaseException) -> str:
    """`` (at FILE:LINE)`` of the innermost frame of an error, for messages that must name it."""
    if isinstance(err, SyntaxError) and err.filename:
        return f" (at {err.filename}:{err.lineno})"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith("<frozen")]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
