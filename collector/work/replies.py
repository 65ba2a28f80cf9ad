"""A job's judge replies, kept in the store so that running the job again never pays twice.

The worker runs each scorer inside `scorers._reply_memo.remember_judge_replies` with a
`StoredReplies` of its job: replies kept by an earlier run of the same job (handed back by a
drain that ran out of time, or taken over after a crash) are replayed, and every new reply
is written to the store before the scorer goes on. The store forgets them when the job
settles done or dead.
"""

from __future__ import annotations

import json
from typing import Any

from collector.store.interface import JudgeReplies


class StoredReplies:
    """The `scorers._reply_memo.JudgeReplyMemo` of one job, backed by the store.

    Args:
        store: where replies are kept.
        job_key: the job's idempotency key.
        kept: the replies the store held for the job when it was taken (request key -> JSON).

    Example:
        >>> import asyncio
        >>> class Store:
        ...     def __init__(self): self.rows = {}
        ...     async def keep_judge_reply(self, job, request, reply): self.rows[(job, request)] = reply
        >>> store = Store()
        >>> replies = StoredReplies(store, "t/s/q/1", {"a:0": '{"text": "{}"}'})
        >>> asyncio.run(replies.recall("a:0")), asyncio.run(replies.recall("b:0"))
        ({'text': '{}'}, None)
        >>> asyncio.run(replies.keep("b:0", {"text": "ok"}))
        >>> store.rows
        {('t/s/q/1', 'b:0'): '{"text": "ok"}'}
    """

    def __init__(self, store: JudgeReplies, job_key: str, kept: dict[str, str]) -> None:
        self._store = store
        self._job_key = job_key
        self._kept = kept

    async def recall(self, key: str) -> dict[str, Any] | None:
        """The reply an earlier run of this job received for the request ``key``."""
        kept = self._kept.get(key)
        return None if kept is None else dict(json.loads(kept))

    async def keep(self, key: str, reply: dict[str, Any]) -> None:
        """Write a reply to the store (durably) before the scorer goes on."""
        text = json.dumps(reply)
        await self._store.keep_judge_reply(self._job_key, key, text)
        self._kept[key] = text
