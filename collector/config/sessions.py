"""``[sessions]``: when a conversation is scored, how short one may be, how many are kept, and
which extra span attributes name a session (SPEC §7).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from collector.config.checks import KeyProblem

_MODEL = ConfigDict(extra="forbid", frozen=True)


class SessionsConfig(BaseModel):
    """Conversations (SPEC §7): when a session is scored, how many are kept, and which extra
    span attributes name a session.

    Example:
        >>> cfg = SessionsConfig(idle_s=60, extra_keys=["thread.id"])
        >>> (cfg.idle_s, cfg.end_attribute, cfg.max_revisions, cfg.extra_keys, cfg.min_turns)
        (60.0, 'tracescore.session.end', 5, ['thread.id'], 1)
        >>> from collector.config import config_from_dict
        >>> config_from_dict({"sessions": {"min_turns": 3, "max_turns": 2}}, env={})
        Traceback (most recent call last):
        ...
        collector.common.errors.ConfigError: invalid configuration: sessions.min_turns: must be at most sessions.max_turns (2), got 3
    """

    model_config = _MODEL
    idle_s: float = Field(default=300.0, gt=0)  # scored this long after its last turn arrived, with no new one
    min_turns: int = Field(default=1, gt=0)  # a session with fewer turns is counted (short), not scored
    end_attribute: str = Field(default="tracescore.session.end", min_length=1)  # true on a run span: scored at once
    max_age_s: float = Field(default=86_400.0, gt=0)  # forced (partial) this long after its first turn
    max_turns: int = Field(default=200, gt=0)  # forced (partial) at this many turns
    max_revisions: int = Field(default=5, gt=0)  # scored at most this many times (late turns reopen it)
    max_open: int = Field(default=100_000, gt=0)  # open sessions kept at most; the oldest is forced
    extra_keys: list[str] = Field(default_factory=list)  # attributes naming a session after the standard ones

    @model_validator(mode="after")
    def _turn_bounds(self) -> SessionsConfig:
        if self.min_turns > self.max_turns:  # every session would be scored at max_turns, never finished
            raise KeyProblem("sessions.min_turns",
                             f"must be at most sessions.max_turns ({self.max_turns}), got {self.min_turns}")
        return self
