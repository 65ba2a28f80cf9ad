"""Conversations in Redis (SPEC §7), shared by every process of a deployment.

`RedisSessions` is the `collector.store.interface.SessionLog` half of `RedisStore` (a mixin
over its ``client`` and ``keys``). Each operation is one Lua script
(`collector.store.redis.session_scripts`), so receivers noting turns of one session on
different hosts make one session, and two schedulers never claim one session within its
lease. Keys: ``sessions:*`` and ``session:``/``turns:`` + scope (`collector.store.redis.keys`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from collector.common.session_types import DueSession, SessionTurn, arrival
from collector.common.types import RunRecord
from collector.store.interface import PARTIAL_REASONS, SESSION_COUNTS, SessionRules
from collector.store.redis import session_scripts
from collector.store.redis.keys import RedisKeys


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def turn_key(run: RunRecord) -> str:
    """A turn's field in its session's turns hash.

    Example:
        >>> turn_key(RunRecord(trace_id="ab", span_id="cd"))
        'ab/cd'
    """
    return f"{run.trace_id}/{run.span_id}"


def _due(row: list[Any]) -> DueSession:
    scope, session_id, service, revision, reason, texts = row
    runs = sorted((RunRecord.from_json(_text(text)) for text in texts),
                  key=lambda run: (run.start_ns, run.trace_id, run.span_id))
    why = _text(reason)
    return DueSession(_text(scope), _text(session_id), _text(service), tuple(runs), int(revision),
                      why in PARTIAL_REASONS, why)


class RedisSessions:
    """The `SessionLog` methods of `collector.store.redis.store.RedisStore` (see the module)."""

    client: aioredis.Redis
    keys: RedisKeys
    session_rules: SessionRules

    def _init_sessions(self, rules: SessionRules | None) -> None:
        """Keep the rules and register the scripts (from the store's constructor)."""
        self.session_rules = rules or SessionRules()
        self._note = self.client.register_script(session_scripts.NOTE)
        self._take = self.client.register_script(session_scripts.TAKE)
        self._scored = self.client.register_script(session_scripts.SCORED)

    def _prefixes(self) -> list[str]:
        return [self.keys.session_prefix, self.keys.turns_prefix]

    async def note_turns(self, turns: Sequence[SessionTurn], now: float, *, client: Any = None) -> None:
        """Record turns and move their sessions' timers (see `SessionLog.note_turns`); with
        ``client`` (a pinned writer) the script goes on it."""
        if not turns:
            return
        groups: dict[str, list[SessionTurn]] = {}
        for turn in turns:
            groups.setdefault(turn.scope, []).append(turn)
        rules, k = self.session_rules, self.keys
        args: list[Any] = [*self._prefixes(), repr(now), repr(rules.idle_s), repr(rules.max_age_s), rules.max_turns,
                           rules.max_revisions, rules.max_open, repr(rules.retain_s)]
        for scope, group in groups.items():
            args += [scope, group[0].session_id, group[0].run.service, int(any(t.ended for t in group)),
                     repr(arrival(group, now)), len(group)]
            for turn in group:
                args += [turn_key(turn.run), turn.run.to_json()]
        await self._note(
            keys=[k.sessions_due, k.sessions_unforced, k.sessions_scored, k.sessions_counts], args=args, client=client)

    async def take_due_sessions(self, now: float, limit: int, lease_s: float) -> list[DueSession]:
        """Claim due sessions with their turns (see `SessionLog.take_due_sessions`)."""
        k, rules = self.keys, self.session_rules
        rows = await self._take(
            keys=[k.sessions_due, k.sessions_unforced, k.sessions_scored, k.sessions_counts],
            args=[*self._prefixes(), repr(now), int(limit), repr(lease_s), rules.min_turns, repr(rules.retain_s)])
        return [_due(row) for row in rows]

    async def sessions_scored(self, due: Sequence[DueSession], now: float) -> None:
        """Mark claimed sessions scored (see `SessionLog.sessions_scored`)."""
        if not due:
            return
        rules, k = self.session_rules, self.keys
        args: list[Any] = [*self._prefixes(), repr(now), repr(rules.retain_s), rules.max_revisions]
        for session in due:
            args += [session.scope, session.revision, len(session.turns), *map(turn_key, session.turns)]
        await self._scored(
            keys=[k.sessions_due, k.sessions_unforced, k.sessions_scored, k.sessions_counts], args=args)

    async def next_session_due(self) -> float | None:
        """When the earliest open session is due or its claim runs out (None: none open)."""
        first = await self.client.zrange(self.keys.sessions_due, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    async def session_counts(self) -> dict[str, int]:
        """Open and retained sessions, and the totals (see `SessionLog.session_counts`)."""
        k = self.keys
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zcard(k.sessions_due)
            pipe.zcard(k.sessions_scored)
            pipe.hgetall(k.sessions_counts)
            open_, scored, totals = await pipe.execute()
        found = dict.fromkeys(SESSION_COUNTS, 0)
        found.update({_text(name): int(value) for name, value in totals.items()})
        found.update(open=int(open_), scored=int(scored))
        return found
