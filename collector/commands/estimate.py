"""``tracescore score ... --estimate``: what scoring would cost, from the prompts it would send.

Every scorer runs as usual, inside a governor (`scorers._judge_governor`) that answers each
judge request itself instead of sending it: a structured step gets a small valid instance
of its output schema (`scorers._schema_sample`), so the later steps run and render their
own prompts; a free-text step (a reason) gets a placeholder text of a reason's length.
Per call it counts the prompt tokens (litellm's tokenizer on the messages that would be
sent) and the output tokens (the same tokenizer on the made-up reply, or
``--estimate-output-tokens N``), and prices them at litellm's per-token prices:
USD = prompt × input price + output × output price. The worst case counts each call's
output at its cap instead (``max_tokens`` of the judge's settings, else
``--default-output-tokens``, 1024). A model litellm has no price for shows its tokens and
"unpriced" for USD.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from collector.commands.layout import print_table
from scorers._judge_governor import JudgeRequest, JudgeTicket
from scorers._judge_transport import Reply
from scorers._judge_types import JudgeUsage
from scorers._schema_sample import PLACEHOLDER_TEXT, sample_instance

DEFAULT_OUTPUT_TOKENS = 1024
"""The output cap of a call whose judge sets no ``max_tokens`` (SPEC §8 ``default_output_tokens``)."""


def count_text_tokens(model: str, text: str) -> int:
    """Tokens of a reply's ``text`` for ``model``, as the provider bills them (litellm's tokenizer).

    Example:
        >>> count_text_tokens("openai/gpt-4o-mini", "The capital of France is Paris.")
        7
    """
    from scorers._judge_route import litellm_module

    try:
        return int(litellm_module().token_counter(model=model, text=text))
    except Exception:  # a tokenizer litellm cannot load: about four characters a token
        return max(1, len(text) // 4)


def synthetic_reply_text(output_schema: dict[str, Any] | None) -> str:
    """What the estimate answers for the model: an instance of the step's schema as JSON, or a
    reason-length placeholder for a free-text step.

    Example:
        >>> synthetic_reply_text({"type": "object", "properties": {"score": {"type": "number"}}})
        '{"score": 0.5}'
        >>> synthetic_reply_text(None).startswith("The score is 0.5 because")
        True
    """
    if output_schema is None:
        return PLACEHOLDER_TEXT
    return json.dumps(sample_instance(output_schema), ensure_ascii=False)


@dataclass
class Tally:
    """What one scorer's judge calls would cost (or a total of tallies).

    Example:
        >>> t = Tally()
        >>> t.add("openai/gpt-4o-mini", 1000, 100, 1024, 1.5e-7, 6e-7)
        >>> t.calls, round(t.usd, 6), round(t.worst_usd, 6), t.usd_text(t.usd)
        (1, 0.00021, 0.000764, '0.000210')
        >>> t.add("hosted_vllm/mine", 10, 5, 1024, None, None); t.usd_text(t.usd)
        '0.000210 + unpriced'
        >>> u = Tally(); u.add("hosted_vllm/mine", 10, 5, 1024, None, None); u.usd_text(u.usd), u.usd_value(u.usd)
        ('unpriced', None)
    """

    calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    worst_output_tokens: int = 0
    usd: float = 0.0
    worst_usd: float = 0.0
    models: set[str] = field(default_factory=set)
    unpriced_models: set[str] = field(default_factory=set)

    def add(self, model: str, prompt: int, output: int, cap: int,
            input_price: float | None, output_price: float | None) -> None:
        """Count one call: ``prompt`` and ``output`` tokens, ``cap`` output tokens at worst."""
        self.calls += 1
        self.prompt_tokens += prompt
        self.output_tokens += output
        self.worst_output_tokens += cap
        self.models.add(model)
        if input_price is None or output_price is None:
            self.unpriced_models.add(model)
            return
        self.usd += prompt * input_price + output * output_price
        self.worst_usd += prompt * input_price + cap * output_price

    def merge(self, other: Tally) -> None:
        """Add ``other``'s calls to these (the total row)."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.worst_output_tokens += other.worst_output_tokens
        self.usd += other.usd
        self.worst_usd += other.worst_usd
        self.models |= other.models
        self.unpriced_models |= other.unpriced_models

    def usd_text(self, usd: float) -> str:
        """``usd`` for the table: "unpriced" when a call's model has no price, "+ unpriced"
        after the priced calls' sum when only some have none."""
        if not self.unpriced_models:
            return f"{usd:.6f}"
        return "unpriced" if self.unpriced_models == self.models else f"{usd:.6f} + unpriced"

    def usd_value(self, usd: float) -> float | None:
        """``usd`` for a JSON row: None when a call's model has no price."""
        return None if self.unpriced_models else round(usd, 9)


class EstimatingGovernor:
    """A judge governor that answers every request itself and counts what it would cost.

    ``output_tokens`` (``--estimate-output-tokens``) replaces the made-up reply's token
    count; ``default_output_tokens`` is the worst case's cap for a call without one.

    Example:
        >>> import asyncio
        >>> gov = EstimatingGovernor()
        >>> request = JudgeRequest("openai/gpt-4o-mini", "c", "relevance", [], {"type": "object",
        ...     "properties": {"score": {"type": "number"}}}, input_price=1.5e-7, output_price=6e-7)
        >>> request.prompt_tokens = 300
        >>> ticket = asyncio.run(gov.admit(request))
        >>> ticket.reply.text, ticket.reply.usage.input_tokens, ticket.reply.usage.output_tokens
        ('{"score": 0.5}', 300, 8)
        >>> t = gov.tallies["relevance"]; (t.calls, t.worst_output_tokens)
        (1, 1024)
    """

    def __init__(self, output_tokens: int | None = None,
                 default_output_tokens: int = DEFAULT_OUTPUT_TOKENS) -> None:
        self.output_tokens = output_tokens
        self.default_output_tokens = default_output_tokens
        self.tallies: dict[str, Tally] = {}

    async def admit(self, request: JudgeRequest) -> JudgeTicket:
        """Answer instead of the model; count the call."""
        text = synthetic_reply_text(request.output_schema)
        output = self.output_tokens if self.output_tokens is not None else count_text_tokens(request.model, text)
        prompt = request.prompt_tokens
        tally = self.tallies.setdefault(str(request.scorer_id), Tally())
        tally.add(request.model, prompt, output, request.output_cap(self.default_output_tokens),
                  request.input_price, request.output_price)
        usage = JudgeUsage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)
        return JudgeTicket(reply=Reply(text=text, finish_reason="stop", usage=usage))

    async def settle(self, ticket: JudgeTicket, request: JudgeRequest, usage: JudgeUsage | None,
                     cost_usd: float | None, error: BaseException | None) -> None:
        """Nothing to settle: the call was counted when it was answered."""


@dataclass(frozen=True)
class EstimateRow:
    """One scorer's line of the estimate: its (run, scorer) pairs and the tally of their calls."""

    scorer: str
    runs: int
    failed: int
    tally: Tally

    def as_dict(self) -> dict[str, Any]:
        """The JSON row (``--format jsonl``): tokens, USD (null: unpriced) and the worst case.

        Example:
            >>> t = Tally(); t.add("openai/gpt-4o-mini", 1000, 100, 1024, 1.5e-7, 6e-7)
            >>> row = EstimateRow("relevance", 1, 0, t).as_dict()
            >>> row["judge_calls"], row["usd"], row["worst_case_usd"], row["unpriced_models"]
            (1, 0.00021, 0.0007644, [])
        """
        t = self.tally
        return {"scorer": self.scorer, "runs": self.runs, "failed": self.failed, "judge_calls": t.calls,
                "prompt_tokens": t.prompt_tokens, "output_tokens": t.output_tokens, "usd": t.usd_value(t.usd),
                "worst_case_output_tokens": t.worst_output_tokens, "worst_case_usd": t.usd_value(t.worst_usd),
                "models": sorted(t.models), "unpriced_models": sorted(t.unpriced_models)}

    def cells(self) -> list[str]:
        """The table row."""
        t = self.tally
        return [self.scorer, str(self.runs), str(t.calls), f"{t.prompt_tokens:,}", f"{t.output_tokens:,}",
                t.usd_text(t.usd), f"{t.worst_output_tokens:,}", t.usd_text(t.worst_usd)]


def estimate_rows(scorer_ids: Sequence[str], outcomes: Sequence[Any],
                  governor: EstimatingGovernor) -> list[EstimateRow]:
    """One row per scorer, in the order given, then the total (scorer "total").

    Example:
        >>> from types import SimpleNamespace as O
        >>> gov = EstimatingGovernor(); gov.tallies["q"] = Tally(calls=3, prompt_tokens=900)
        >>> rows = estimate_rows(["q", "code"], [O(scorer_id="q", failed=False)] * 2, gov)
        >>> [(r.scorer, r.runs, r.tally.calls, r.tally.prompt_tokens) for r in rows]
        [('q', 2, 3, 900), ('code', 0, 0, 0), ('total', 2, 3, 900)]
    """
    rows, total = [], Tally()
    for scorer in scorer_ids:
        mine = [o for o in outcomes if o.scorer_id == scorer]
        tally = governor.tallies.get(scorer, Tally())
        total.merge(tally)
        rows.append(EstimateRow(scorer, len(mine), sum(o.failed for o in mine), tally))
    rows.append(EstimateRow("total", sum(r.runs for r in rows), sum(r.failed for r in rows), total))
    return rows


def estimate_table(rows: Sequence[EstimateRow]) -> Table:
    """The estimate as a rich table (the last row is the total).

    Example:
        >>> t = Tally(); t.add("openai/gpt-4o-mini", 1000, 100, 1024, 1.5e-7, 6e-7)
        >>> estimate_table([EstimateRow("q", 1, 0, t)]).row_count
        1
    """
    table = Table(title="judge cost estimate (nothing was sent)")
    for name in ("scorer", "runs", "judge calls", "prompt tokens", "output tokens", "USD",
                 "worst-case output tokens", "worst-case USD"):
        table.add_column(name, justify="left" if name == "scorer" else "right")
    for i, row in enumerate(rows):
        table.add_row(*row.cells(), end_section=i == len(rows) - 2)
    return table


def estimate_notes(rows: Sequence[EstimateRow], outcomes: Sequence[Any]) -> list[str]:
    """Lines to print after the estimate: unpriced models, scorers that failed while estimating.

    Example:
        >>> from types import SimpleNamespace as O
        >>> t = Tally(); t.add("hosted_vllm/mine", 10, 5, 1024, None, None)
        >>> estimate_notes([EstimateRow("q", 1, 1, t)], [O(failed=True, scorer_id="q", error="boom")])
        ['no price in litellm for hosted_vllm/mine: its calls are counted in tokens only', '1 run(s) failed while estimating (their later steps are not counted); first: q: boom']
    """
    notes = []
    unpriced = sorted(set().union(*(r.tally.unpriced_models for r in rows)))
    if unpriced:
        notes.append(f"no price in litellm for {', '.join(unpriced)}: its calls are counted in tokens only")
    failed = [o for o in outcomes if o.failed]
    if failed:
        notes.append(f"{len(failed)} run(s) failed while estimating (their later steps are not counted); "
                     f"first: {failed[0].scorer_id}: {failed[0].error}")
    return notes


def print_estimate(out_format: str, governor: EstimatingGovernor, scorer_ids: Sequence[str],
                   outcomes: Sequence[Any], err: Console) -> None:
    """Print the estimate: the table on stdout, or (``jsonl``) a JSON row per scorer on stdout and
    the table on stderr; then the notes on stderr.

    Example:
        >>> import io
        >>> gov = EstimatingGovernor(); gov.tallies["q"] = Tally(calls=2, prompt_tokens=600)
        >>> print_estimate("jsonl", gov, ["q"], [], Console(file=io.StringIO()))
        {"scorer": "q", "runs": 0, "failed": 0, "judge_calls": 2, "prompt_tokens": 600, "output_tokens": 0, "usd": 0.0, "worst_case_output_tokens": 0, "worst_case_usd": 0.0, "models": [], "unpriced_models": []}
    """
    rows = estimate_rows(scorer_ids, outcomes, governor)
    if out_format == "jsonl":
        for row in rows[:-1]:
            sys.stdout.write(json.dumps(row.as_dict(), ensure_ascii=False) + "\n")
        sys.stdout.flush()
        print_table(err, estimate_table(rows))
    else:
        print_table(Console(), estimate_table(rows))
    for note in estimate_notes(rows, outcomes):
        err.print(note, markup=False, highlight=False, soft_wrap=True)
