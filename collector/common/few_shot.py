"""Few-shot examples from people's labels, as a judge's system message shows them (SPEC §11).

An example is one labelled item: the content the judge was shown for it (the user prompt of
its judge call), the person's verdict and their rationale. `balanced_examples` picks up to N
of them, balanced across verdicts and newest first; `format_examples` writes them as the
text that follows the judge's instructions (`scorers._judge_examples.judge_examples`). Both
are pure: the same examples always give the same text, so that a provider's prompt cache
can reuse the whole system message, and ``tracescore align`` measures a judge "with
few-shot" exactly as the daemon runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest

__all__ = ["FewShotExample", "balanced_examples", "format_examples"]

HEADER = ("Examples judged by people: the content a judge was shown, the people's verdict, and why. "
          "Judge new content the way they did.")
"""The first line of the examples' text."""

MAX_CONTENT_CHARS = 4000
"""An example's content is cut to this many characters (a judge's prompt can be a whole run)."""


@dataclass(frozen=True)
class FewShotExample:
    """One labelled item as a few-shot example.

    ``id`` names it (the label's item key: part of the judge revision); ``at`` is when it was
    labelled (epoch seconds: newest first).
    """

    content: str
    verdict: str
    rationale: str | None = None
    id: str = ""
    at: float = 0.0


def balanced_examples(examples: Sequence[FewShotExample], n: int) -> list[FewShotExample]:
    """Up to ``n`` examples, balanced across verdicts: one of each verdict in turn (verdicts
    in name order), each verdict's newest first; the result is in that order.

    Example:
        >>> e = [FewShotExample(f"c{i}", "pass" if i % 3 else "fail", at=float(i)) for i in range(7)]
        >>> [(x.content, x.verdict) for x in balanced_examples(e, 3)]
        [('c6', 'fail'), ('c5', 'pass'), ('c3', 'fail')]
        >>> len(balanced_examples(e, 50)), balanced_examples(e, 0)
        (7, [])
    """
    by_verdict: dict[str, list[FewShotExample]] = {}
    for example in sorted(examples, key=lambda x: (-x.at, x.id, x.content)):
        by_verdict.setdefault(example.verdict, []).append(example)
    turns = zip_longest(*(by_verdict[v] for v in sorted(by_verdict)))
    picked = [example for turn in turns for example in turn if example is not None]
    return picked[:max(0, n)]


def format_examples(examples: Sequence[FewShotExample]) -> str:
    """The examples as the text after a judge's instructions ("" for none): a header line, then
    per example its content (cut to `MAX_CONTENT_CHARS`), verdict and rationale.

    Example:
        >>> print(format_examples([FewShotExample("Answer: Paris.", "pass", "names the capital"),
        ...                        FewShotExample("Answer: Lyon.", "fail")]))
        Examples judged by people: the content a judge was shown, the people's verdict, and why. Judge new content the way they did.
        <BLANKLINE>
        ## Example 1
        Content:
        Answer: Paris.
        Verdict: pass
        Rationale: names the capital
        <BLANKLINE>
        ## Example 2
        Content:
        Answer: Lyon.
        Verdict: fail
        Rationale: (none given)
        >>> format_examples([])
        ''
    """
    if not examples:
        return ""
    blocks = [HEADER]
    for number, example in enumerate(examples, 1):
        content = example.content.strip()
        if len(content) > MAX_CONTENT_CHARS:
            content = content[:MAX_CONTENT_CHARS] + " […]"
        rationale = " ".join((example.rationale or "").split()) or "(none given)"
        blocks.append(f"## Example {number}\nContent:\n{content}\nVerdict: {example.verdict}\nRationale: {rationale}")
    return "\n\n".join(blocks)
