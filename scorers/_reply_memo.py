"""Judge replies already paid for, replayed instead of asked again.

A daemon that hands a job back while draining, or loses it in a crash, runs the scorer
again from its first step. Inside `remember_judge_replies(memo)`, every judge request first
asks the memo for the reply to the same request (same model, messages and response format),
and every reply the model sends is kept in it: a step whose judge call had finished gets
that reply back, and only unfinished calls reach the model again. The Nth identical
request of a run maps to the Nth reply kept for it, so a scorer that deliberately asks the
same question twice still gets two answers the first time, and the same two on a replay.

The memo decides where replies live (the daemon keeps them in its store, per job);
`DictReplyMemo` keeps them in a dict.
"""

from __future__ import annotations

import hashlib
import json
import logging
from contextvars import ContextVar
from typing import Any, Protocol

from scorers._judge_transport import Reply
from scorers._judge_types import JudgeUsage
from scorers._var_block import VarBlock

logger = logging.getLogger(__name__)


class JudgeReplyMemo(Protocol):
    """Where one run's judge replies are kept, by request key."""

    async def recall(self, key: str) -> dict[str, Any] | None:
        """The reply kept for ``key``, or None."""
        ...

    async def keep(self, key: str, reply: dict[str, Any]) -> None:
        """Keep the reply to the request ``key`` (a JSON-serialisable dict)."""
        ...


class DictReplyMemo:
    """A `JudgeReplyMemo` in a dict (``replies``: request key -> reply).

    Example:
        >>> import asyncio
        >>> memo = DictReplyMemo()
        >>> asyncio.run(memo.keep("k", {"text": "{}"}))
        >>> asyncio.run(memo.recall("k")), asyncio.run(memo.recall("other"))
        ({'text': '{}'}, None)
    """

    def __init__(self, replies: dict[str, dict[str, Any]] | None = None) -> None:
        self.replies: dict[str, dict[str, Any]] = {} if replies is None else replies

    async def recall(self, key: str) -> dict[str, Any] | None:
        """The reply kept for ``key``, or None."""
        return self.replies.get(key)

    async def keep(self, key: str, reply: dict[str, Any]) -> None:
        """Keep the reply to the request ``key``."""
        self.replies[key] = reply


class _RunMemo:
    """The memo of one run, numbering identical requests in the order they are made."""

    def __init__(self, memo: JudgeReplyMemo) -> None:
        self.memo = memo
        self._seen: dict[str, int] = {}

    def key_for(self, model: str, messages: list[dict[str, Any]], response_format: dict[str, Any] | None) -> str:
        digest = request_digest(model, messages, response_format)
        nth = self._seen.get(digest, 0)
        self._seen[digest] = nth + 1
        return f"{digest}:{nth}"

    async def recall(self, key: str) -> Reply | None:
        kept = await self.memo.recall(key)
        return None if kept is None else reply_from_json(kept)

    async def keep(self, key: str, reply: Reply) -> None:
        try:
            await self.memo.keep(key, reply_to_json(reply))
        except Exception:  # the reply is good; only a later replay would ask again
            logger.warning("keeping a judge reply failed; a replay of this run asks again", exc_info=True)


def reply_to_json(reply: Reply) -> dict[str, Any]:
    """A reply as a memo keeps it.

    Example:
        >>> reply_to_json(Reply("{}", "stop", JudgeUsage(input_tokens=3, output_tokens=1)))["usage"]
        {'input_tokens': 3, 'output_tokens': 1, 'total_tokens': 4}
    """
    return {"text": reply.text, "finish_reason": reply.finish_reason,
            "usage": reply.usage.model_dump(exclude_none=True)}


def reply_from_json(kept: dict[str, Any]) -> Reply:
    """A reply kept by `reply_to_json`.

    Example:
        >>> reply = Reply("{}", "stop", JudgeUsage(input_tokens=3, output_tokens=1))
        >>> reply_from_json(reply_to_json(reply)) == reply
        True
    """
    return Reply(str(kept["text"]), kept.get("finish_reason"), JudgeUsage(**kept.get("usage", {})))


_current: ContextVar[_RunMemo | None] = ContextVar("scorers_judge_reply_memo", default=None)


def request_digest(model: str, messages: list[dict[str, Any]], response_format: dict[str, Any] | None) -> str:
    """A stable digest of one judge request: model, messages and response format.

    Example:
        >>> a = request_digest("m", [{"role": "user", "content": "hi"}], None)
        >>> a == request_digest("m", [{"role": "user", "content": "hi"}], None)
        True
        >>> a == request_digest("m", [{"role": "user", "content": "hi!"}], None)
        False
    """
    text = json.dumps([model, messages, response_format], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def remember_judge_replies(memo: JudgeReplyMemo | None) -> VarBlock[_RunMemo | None]:
    """Within this block (and the tasks it starts), judge requests replay and keep replies in ``memo``.

    Example:
        >>> with remember_judge_replies(DictReplyMemo()):
        ...     current_memo() is not None
        True
        >>> current_memo() is None
        True
    """
    return VarBlock(_current, None if memo is None else _RunMemo(memo))


def current_memo() -> _RunMemo | None:
    """The memo of the run in progress (None outside `remember_judge_replies`)."""
    return _current.get()
