"""``[[scorers]] instructions_file`` (SPEC §11): a TOML file whose string ``instructions`` replace
the instructions of a scorer's judge (``tracescore align --out DIR`` writes ``DIR/<scorer id>.toml``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from collector.common.errors import ConfigError

__all__ = ["read_instructions"]


def read_instructions(path: str | Path, key: str = "instructions_file") -> str:
    """The ``instructions`` of the TOML file at ``path`` (relative: to the working directory).

    Raises:
        ConfigError: naming ``key`` and the file, when the file is missing or unreadable, is not
            TOML, or has no non-empty string ``instructions``.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "relevancy.toml"
        >>> _ = path.write_text('instructions = "Judge only whether the answer is relevant."\\n')
        >>> read_instructions(path)
        'Judge only whether the answer is relevant.'
        >>> _ = path.write_text('instructions = 3\\n')
        >>> read_instructions(path, "scorers[0].instructions_file")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: scorers[0].instructions_file: .../relevancy.toml has no string `instructions` (a TOML file: instructions = "...")
    """
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{key}: file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{key}: cannot read {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{key}: {path} is not valid TOML: {err}") from None
    instructions = data.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise ConfigError(f'{key}: {path} has no string `instructions` (a TOML file: instructions = "...")')
    return instructions
