"""Few-shot examples in a judge's system message (SPEC §11, "Few-shot from labels").

The daemon and ``tracescore align`` hold, per scorer, a set of people's labelled examples;
within `judge_examples`, every judge call's system message is the judge's instructions and,
after them, the examples' text (static first: a provider's prompt cache can reuse the whole
system message across runs). Outside such a block the system message is the instructions alone.
"""

from __future__ import annotations

from contextvars import ContextVar

from scorers._var_block import VarBlock

__all__ = ["current_examples", "judge_examples", "system_message"]

_current: ContextVar[str] = ContextVar("tracescore_judge_examples", default="")


def judge_examples(text: str) -> VarBlock[str]:
    """Within this block, judge calls get ``text`` after their instructions ("": none).

    Example:
        >>> with judge_examples("Example 1: ..."):
        ...     inside = current_examples()
        >>> inside, current_examples()
        ('Example 1: ...', '')
    """
    return VarBlock(_current, text)


def current_examples() -> str:
    """The examples text in force ("" outside `judge_examples`)."""
    return _current.get()


def system_message(instructions: str) -> str:
    """A judge's system message: its instructions, then the examples in force.

    Example:
        >>> system_message("Is the answer relevant?")
        'Is the answer relevant?'
        >>> with judge_examples("Examples labelled by people:\\n1. ..."):
        ...     print(system_message("Is the answer relevant?"))
        Is the answer relevant?
        <BLANKLINE>
        Examples labelled by people:
        1. ...
    """
    examples = _current.get()
    return f"{instructions}\n\n{examples}" if examples else instructions
