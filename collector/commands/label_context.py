"""What ``tracescore labels``, ``agreement`` and ``gate`` share: the deployment's configuration,
its scorers' rules and its label store, opened beside a running daemon (SPEC §11)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import dataclass

from collector.commands.label_store import open_label_store
from collector.common.errors import ConfigError
from collector.config import Config, load_config
from collector.config.labels import duration_s
from collector.status.agreement import AgreementReport, measure
from collector.status.verdicts import ScorerRule
from collector.store.labels_interface import LabelStoreAdmin
from collector.work.agreement import scorer_rules
from collector.work.few_shot import example_exclusions
from collector.work.registry import ScorerRegistry


@dataclass
class Deployment:
    """A deployment as a command beside it sees it."""

    config: Config
    registry: ScorerRegistry
    rules: dict[str, ScorerRule]  # by the name scores and labels carry

    def name_of(self, scorer_id: str) -> str:
        """The name a scorer's scores and labels carry (the id itself for one not configured).

        Example:
            >>> Deployment(Config(), ScorerRegistry([]), {"Tone": ScorerRule("tone", "Tone")}).name_of("tone")
            'Tone'
        """
        return next((rule.name for rule in self.rules.values() if rule.scorer_id == scorer_id), scorer_id)

    def store(self) -> LabelStoreAdmin:
        """The deployment's label store (``close()`` it after use)."""
        return open_label_store(self.config)


def deployment(args: argparse.Namespace, *, secrets: bool = False) -> Deployment:
    """Load ``--config`` (``secrets``: the sinks' keys too, for a pull) and import its scorers.

    Raises:
        ConfigError: the configuration or a scorer is bad.

    Example:
        >>> import argparse
        >>> deployment(argparse.Namespace(config=None)).rules
        {}
    """
    config = load_config(getattr(args, "config", None), secrets=secrets)
    registry = ScorerRegistry.load(config.scorers)
    return Deployment(config, registry, scorer_rules(registry.entries))


def since_of(args: argparse.Namespace, config: Config) -> float:
    """The epoch second ``--since`` (a duration back from now; default ``[labels] retain``) names.

    Raises:
        ConfigError: ``--since`` is not a duration.
    """
    text = getattr(args, "since", None) or config.labels.retain
    try:
        return time.time() - duration_s(text)
    except ValueError as err:
        raise ConfigError(f"--since {err}") from None


async def measured(store: LabelStoreAdmin, rules: Mapping[str, ScorerRule], since: float,
                   scorer: str | None = None) -> AgreementReport:
    """The agreement of every series with the store's labels, over the scores kept since ``since``
    (a few-shot revision's own examples left out of it)."""
    labels = await store.labels()
    exclude = await example_exclusions(store, {rule.scorer_id for rule in rules.values()})
    return await measure(store.scan_kept_scores(since=since), labels, rules, since=since, scorer=scorer,
                         exclude=exclude)
