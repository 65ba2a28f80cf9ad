"""``[labels]``: where people's labels are pulled from, how often, and what judge agreement
keeps and alerts on (SPEC §11).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_MODEL = ConfigDict(extra="forbid", frozen=True)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def duration_s(text: str) -> float:
    """Seconds in a duration such as ``30s``, ``15m``, ``12h``, ``30d`` or ``2w``.

    Raises:
        ValueError: the text is not a number followed by one of s, m, h, d, w.

    Example:
        >>> duration_s("30d"), duration_s("90m")
        (2592000.0, 5400.0)
        >>> duration_s("a month")
        Traceback (most recent call last):
        ...
        ValueError: must be a duration such as 30d, 12h or 2w, got 'a month'
    """
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"must be a duration such as 30d, 12h or 2w, got {text!r}")
    return float(match.group(1)) * _SECONDS[match.group(2)]


class LabelsConfig(BaseModel):
    """Human labels and judge agreement (SPEC §11).

    Example:
        >>> cfg = LabelsConfig(**{"from": ["phoenix"]})
        >>> (cfg.sources, cfg.poll_s, cfg.since_s, cfg.alert_kappa, cfg.min_labels)
        (['phoenix'], 300.0, 2592000.0, 0.4, 20)
        >>> LabelsConfig(since="a while")
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for LabelsConfig
        since
          Value error, must be a duration such as 30d, 12h or 2w, got 'a while' ...
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    sources: list[Literal["phoenix", "mlflow", "langfuse"]] = Field(default_factory=list, alias="from")
    poll_s: float = Field(default=300.0, gt=0)  # a pull of every source this often (one process at a time)
    since: str = "30d"  # how far back the first pull of a source reads
    alert_kappa: float = Field(default=0.4, ge=-1, le=1)  # the alert fires below this κ ...
    min_labels: int = Field(default=20, gt=0)  # ... over at least this many labels (and `gate --min-kappa`)
    keep_scores: int = Field(default=100_000, ge=0)  # own scores kept per scorer for agreement (0: none)
    retain: str = "30d"  # own scores kept this long (agreement's window is at most this)

    @field_validator("since", "retain")
    @classmethod
    def _duration(cls, text: str) -> str:
        duration_s(text)
        return text

    @field_validator("sources")
    @classmethod
    def _once_each(cls, sources: list[str]) -> list[str]:
        if len(set(sources)) != len(sources):
            raise ValueError(f"names a sink twice: {sources}")
        return sources

    @property
    def since_s(self) -> float:
        """``since`` in seconds."""
        return duration_s(self.since)

    @property
    def retain_s(self) -> float:
        """``retain`` in seconds."""
        return duration_s(self.retain)
