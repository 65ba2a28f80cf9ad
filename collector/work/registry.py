"""Scorer registration: the scorers the configuration's refs name (`collector.work.scorer_ref`),
with their filters and sampling, and the judge client the registered scorers need
(`load_judge_client`).

Sampling is deterministic on the trace id (sha256 of the 16 id bytes, first 6 bytes
big-endian / 2**48 < ratio), so every replica and every restart makes the same choice.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from collector.common.errors import ConfigError
from collector.common.labels import judge_revision
from collector.config import FilterConfig, ScorerConfig
from collector.config.instructions import read_instructions
from collector.work.scorer_ref import resolve_scorer

logger = logging.getLogger(__name__)

Decision = Literal["admitted", "filtered_out", "sampled_out"]
"""What a scorer does with a run before any job exists."""


class Scorer(Protocol):
    """What the daemon needs of a scorer (`scorers.create_scorer` builds these)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str | None: ...

    async def run(self, **kwargs: Any) -> Any: ...


def sampled(trace_id: str, ratio: float) -> bool:
    """Whether a trace is inside the sample: sha256 of the id, first 6 bytes / 2**48 < ratio.

    Example:
        >>> sampled("0af7651916cd43dd8448eb211c80319c", 1.0), sampled("0af7651916cd43dd8448eb211c80319c", 0.0)
        (True, False)
    """
    if ratio >= 1.0:
        return True
    if ratio <= 0.0:
        return False
    try:
        raw = bytes.fromhex(trace_id)
    except ValueError:
        raw = trace_id.encode()
    digest = hashlib.sha256(raw).digest()
    return int.from_bytes(digest[:6], "big") / 2**48 < ratio


def has_prompt_step(scorer: Any) -> bool | None:
    """Whether ``scorer`` has a prompt (LLM judge) step; None when it does not say (a scorer
    object without ``get_steps``, or one whose ``get_steps`` fails).

    Example:
        >>> from scorers import create_scorer
        >>> code = create_scorer(id="c", description="d").generate_score(lambda run: 1.0)
        >>> judged = code.analyze(description="a", output_schema={"type": "object"},
        ...                       create_prompt=lambda run: "Check it.")
        >>> [has_prompt_step(s) for s in (code, judged, object())]
        [False, True, None]
    """
    get_steps = getattr(scorer, "get_steps", None)
    if not callable(get_steps):
        return None
    try:
        return any(step.get("type") == "prompt" for step in get_steps())
    except Exception:  # a user scorer outside the engine
        return None


async def load_judge_client(scorers: Iterable[Any]) -> bool:
    """Import the judge client (litellm: seconds of CPU, in a thread) when a scorer has a prompt
    step, before any scoring: then no job or score pays for the import inside its duration.
    Returns whether a scorer needed it.

    Example:
        >>> import asyncio
        >>> from scorers import create_scorer
        >>> code = create_scorer(id="c", description="d").generate_score(lambda run: 1.0)
        >>> asyncio.run(load_judge_client([code]))  # function steps only: nothing to load
        False
    """
    if not any(has_prompt_step(scorer) for scorer in scorers):
        return False
    from scorers._judge_transport import ensure_litellm

    started = time.perf_counter()
    await ensure_litellm()
    logger.info("judge client (litellm) ready after %.1f s", time.perf_counter() - started)
    return True


@dataclass(frozen=True)
class RegisteredScorer:
    """A loaded scorer with its sampling ratio and filter.

    Example:
        >>> class S:
        ...     id = name = "q"; version = None
        ...     async def run(self, **kw): ...
        >>> RegisteredScorer(S(), ScorerConfig(ref="x:S")).scorer_id
        'q'
    """

    scorer: Any
    config: ScorerConfig

    @property
    def scorer_id(self) -> str:
        """The scorer's id.

        Example:
            >>> class S:
            ...     id = 7; version = 2
            >>> RegisteredScorer(S(), ScorerConfig(ref="x:S")).scorer_id
            '7'
        """
        return str(self.scorer.id)

    @property
    def version(self) -> str | None:
        """The scorer's version (part of the idempotency key), or None.

        Example:
            >>> class S:
            ...     id = "q"; version = 2
            >>> RegisteredScorer(S(), ScorerConfig(ref="x:S")).version
            '2'
        """
        version = getattr(self.scorer, "version", None)
        return None if version is None else str(version)

    @functools.cached_property
    def has_prompt_step(self) -> bool | None:
        """`has_prompt_step` of the scorer, asked once.

        Example:
            >>> from scorers import create_scorer
            >>> code = create_scorer(id="c", description="d").generate_score(lambda run: 1.0)
            >>> RegisteredScorer(code, ScorerConfig(ref="x:c")).has_prompt_step
            False
        """
        return has_prompt_step(self.scorer)

    @functools.cached_property
    def judges(self) -> tuple[tuple[str | None, str | None], ...]:
        """The model and instructions of each prompt step's judge (none: a scorer without ``get_judges``)."""
        get_judges = getattr(self.scorer, "get_judges", None)
        return tuple((judge.model, judge.instructions) for judge in (get_judges() if callable(get_judges) else ()))

    @functools.cached_property
    def judge_revision(self) -> str:
        """The scorer's judge as it judges without few-shot examples (`collector.common.labels.judge_revision`:
        the model and instructions of each prompt step's judge), ``""`` for a scorer without one.
        Scores of different revisions are different agreement series (SPEC §11); a few-shot
        scorer's scores carry the revision of the examples in force (`collector.work.few_shot`).

        Example:
            >>> from scorers import Judge, create_scorer
            >>> def judged(instructions):
            ...     return create_scorer(id="j", description="d", judge=Judge(model="openai/gpt-4o-mini",
            ...         instructions=instructions)).generate_score(description="s", create_prompt=lambda run: "?")
            >>> a, b = (RegisteredScorer(judged(i), ScorerConfig(ref="m:j")).judge_revision for i in ("Be fair.", "Be strict."))
            >>> len(a), a != b
            (8, True)
            >>> RegisteredScorer(create_scorer(id="c", description="d").generate_score(lambda run: 1.0),
            ...                  ScorerConfig(ref="m:c")).judge_revision
            ''
        """
        return judge_revision(self.judges)

    @property
    def asks_judge(self) -> bool:
        """Whether running the scorer may call an LLM judge: a prompt step, or a scorer that does
        not say. A scorer of function steps never does (SPEC 1.1), so its jobs need no judge
        replies kept.

        Example:
            >>> from scorers import create_scorer
            >>> code = create_scorer(id="c", description="d").generate_score(lambda run: 1.0)
            >>> RegisteredScorer(code, ScorerConfig(ref="x:c")).asks_judge
            False
        """
        return self.has_prompt_step is not False

    @property
    def is_conversation(self) -> bool:
        """Whether it scores conversations (``type="conversation"``, SPEC §7), not runs."""
        return getattr(self.scorer, "type", None) == "conversation"


def matches(flt: FilterConfig, service: str, agent: str | None, span_name: str,
            attributes: Mapping[str, Any]) -> bool:
    """Whether a run passes a scorer's filter (every given field must be equal).

    Example:
        >>> f = FilterConfig(service="bot", attributes={"env": "prod"})
        >>> matches(f, "bot", None, "invoke_agent", {"env": "prod"}), matches(f, "other", None, "x", {})
        (True, False)
    """
    if flt.service is not None and flt.service != service:
        return False
    if flt.agent is not None and flt.agent != agent:
        return False
    if flt.span_name is not None and flt.span_name != span_name:
        return False
    return all(attributes.get(k) == v for k, v in flt.attributes.items())


class ScorerRegistry:
    """The scorers a daemon runs, looked up by (id, version)."""

    def __init__(self, entries: Sequence[RegisteredScorer]) -> None:
        self.entries = list(entries)
        self._by_key: dict[tuple[str, str | None], RegisteredScorer] = {}
        for entry in self.entries:
            key = (entry.scorer_id, entry.version)
            if key in self._by_key:
                raise ConfigError(f"scorers: two scorers share id {entry.scorer_id!r} and version {entry.version!r}")
            self._by_key[key] = entry

    @classmethod
    def load(cls, configs: Sequence[ScorerConfig]) -> ScorerRegistry:
        """Import every configured scorer.

        Raises:
            ConfigError: naming the failing ``scorers[i].ref``, or ``instructions_file`` or
                ``few_shot`` given to a scorer without a judge, or a bad instructions file.
        """
        entries = []
        for i, cfg in enumerate(configs):
            try:
                obj = resolve_scorer(cfg.ref, cfg.args)
            except ConfigError as err:
                raise ConfigError(f"scorers[{i}].ref: {err}") from err
            judged = has_prompt_step(obj) is True
            for key, given in (("instructions_file", cfg.instructions_file is not None), ("few_shot", cfg.few_shot > 0)):
                if given and not (judged and (key == "few_shot" or callable(getattr(obj, "with_instructions", None)))):
                    raise ConfigError(f"scorers[{i}].{key}: scorer {getattr(obj, 'id', cfg.ref)!r} has no LLM judge"
                                      " (no prompt step) to give instructions or examples to")
            if cfg.instructions_file is not None:
                obj = obj.with_instructions(read_instructions(cfg.instructions_file, f"scorers[{i}].instructions_file"))
            entries.append(RegisteredScorer(obj, cfg))
        return cls(entries)

    def decisions(
        self, *, trace_id: str, service: str, agent: str | None, span_name: str,
        attributes: Mapping[str, Any],
    ) -> list[tuple[RegisteredScorer, Decision]]:
        """What each run scorer does with a run: filter first, then sampling (conversation
        scorers are asked by `conversation_decisions`).

        Sampling is deterministic on the trace id, so every replica decides alike.

        Example:
            >>> from collector.config import ScorerConfig
            >>> class S:
            ...     id = name = "q"; version = None
            ...     async def run(self, **kw): ...
            >>> reg = ScorerRegistry([RegisteredScorer(S(), ScorerConfig(ref="m:q", filter={"service": "bot"}))])
            >>> [d for _, d in reg.decisions(trace_id="ab" * 16, service="bot", agent=None,
            ...                               span_name="invoke_agent", attributes={})]
            ['admitted']
            >>> [d for _, d in reg.decisions(trace_id="ab" * 16, service="other", agent=None,
            ...                               span_name="invoke_agent", attributes={})]
            ['filtered_out']
        """
        return self._decide([e for e in self.entries if not e.is_conversation], trace_id, service, agent,
                            span_name, attributes)

    def judge_models(self) -> frozenset[str] | None:
        """The judge models the registered scorers' prompt steps call, or None when a scorer that
        may ask a judge does not say which (a scorer object without ``get_judges``).

        Example:
            >>> from scorers import Judge, create_scorer
            >>> judged = create_scorer(id="j", description="d", judge=Judge(model="openai/gpt-4o-mini")
            ...                        ).generate_score(description="s", create_prompt=lambda run: "Score it.")
            >>> code = create_scorer(id="c", description="d").generate_score(lambda run: 1.0)
            >>> reg = ScorerRegistry([RegisteredScorer(s, ScorerConfig(ref="m:s")) for s in (judged, code)])
            >>> sorted(reg.judge_models())
            ['openai/gpt-4o-mini']
        """
        models: set[str] = set()
        for entry in self.entries:
            if not entry.asks_judge:
                continue
            get_judges = getattr(entry.scorer, "get_judges", None)
            if not callable(get_judges):
                return None
            models.update(judge.model for judge in get_judges() if judge.model)
        return frozenset(models)

    @property
    def has_conversation_scorers(self) -> bool:
        """Whether any registered scorer scores conversations (sessions are tracked only then)."""
        return any(entry.is_conversation for entry in self.entries)

    def conversation_decisions(
        self, *, scope: str, service: str, agent: str | None, span_name: str, attributes: Mapping[str, Any],
    ) -> list[tuple[RegisteredScorer, Decision]]:
        """What each conversation scorer does with a due session: its filter on the session's
        last turn, then sampling, deterministic on the session's scope (SPEC §7)."""
        return self._decide([e for e in self.entries if e.is_conversation], scope, service, agent,
                            span_name, attributes)

    @staticmethod
    def _decide(entries: Sequence[RegisteredScorer], sample_key: str, service: str, agent: str | None,
                span_name: str, attributes: Mapping[str, Any]) -> list[tuple[RegisteredScorer, Decision]]:
        out: list[tuple[RegisteredScorer, Decision]] = []
        for entry in entries:
            if not matches(entry.config.filter, service, agent, span_name, attributes):
                out.append((entry, "filtered_out"))
            elif not sampled(sample_key, entry.config.sampling):
                out.append((entry, "sampled_out"))
            else:
                out.append((entry, "admitted"))
        return out

    def get(self, scorer_id: str, version: str | None) -> RegisteredScorer | None:
        """The entry for a job's scorer, or None when it is no longer registered.

        Example:
            >>> ScorerRegistry([]).get("q", None) is None
            True
        """
        return self._by_key.get((scorer_id, version))
