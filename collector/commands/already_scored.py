"""Which scores a ``tracescore score`` batch leaves out as already scored, and how it says so.

A (run, scorer) pair is left out when the traces read hold its score by the same scorer
version (`collector.commands.scored_before`): for a run, a successful evaluation span under
its run span; for a session, its conversation score at the revision it is scored as
(`collector.commands.conversations.SessionUnit.scored_before`). ``--rescore`` leaves out none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collector.commands.conversations import SessionUnit, is_conversation_scorer
from collector.commands.inspect import Loaded
from collector.commands.scored_before import scorer_key

__all__ = ["skipped_notes", "skipped_pairs"]


def skipped_notes(skipped: int, where: str) -> list[str]:
    """What to tell about the scores skipped as already in ``where`` (empty: none).

    Example:
        >>> skipped_notes(3, "the backend")
        ['skipped 3 score(s) already in the backend (same scorer version; --rescore scores them again)']
    """
    if not skipped:
        return []
    return [f"skipped {skipped} score(s) already in {where} (same scorer version; --rescore scores them again)"]


def skipped_pairs(loaded: Loaded, units: Sequence[SessionUnit], scorers: Sequence[Any],
                  rescore: bool = False) -> set[tuple[int, str]]:
    """The (run index, scorer id) pairs of ``loaded.runs`` and then ``units`` whose score by the same
    scorer version is among the evaluation spans read (none with ``rescore``).

    Example:
        >>> skipped_pairs(Loaded(), [], [], rescore=True)
        set()
    """
    if rescore:
        return set()
    keys = [scorer_key(scorer) for scorer in scorers]
    skip = {(index, key[0]) for index, run in enumerate(loaded.runs) for scorer, key in zip(scorers, keys, strict=True)
            if not is_conversation_scorer(scorer) and loaded.scored.run_scored(run.trace_id, run.span_id, key)}
    first = len(loaded.runs)
    skip |= {(first + i, key[0]) for i, unit in enumerate(units) for scorer, key in zip(scorers, keys, strict=True)
             if is_conversation_scorer(scorer) and key in unit.scored_before}
    return skip
