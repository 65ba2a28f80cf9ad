"""Stalled-job detection on Redis (issue 13): workers renew the leases of the jobs they run.

Real `tracescore serve --role ...` processes, the real Redis, the loopback OpenAI-compatible
test server as the judge (with latency). A SIGKILLed worker's jobs are scored by another
worker within 30 s of the kill (default lease settings), while a 40 s judge call on a
live worker is never taken from it (it is judged once, scored once).

The 30 s are timed from the kill to the backend's receipt of the last of those scores, with
the standby worker already running and warm (as in a deployment, where it has been scoring):
its start-up, and litellm's import (7.5 to 17 s seen on a loaded machine; a worker makes it
before it answers /readyz, the receiver never does), are not the take-over. With a 20 s lease
renewed every third of it and stalled jobs looked for every 4 s, a working take-over needs at
most about 25 s.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import aiohttp
import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest
from daemon_harness import CaptureBackend, wait_until
from test_redis_faults import JUDGE_SCORER, Proc, agent_bodies, deployment, post_until_accepted

__all__ = ["deployment"]  # the fixture, shared with the other Redis fault tests

pytestmark = pytest.mark.long  # lasts tens of seconds by design: scheduled first (see conftest.py)

LONG_CALL_S = 40.0


async def test_a_dead_workers_jobs_are_taken_over_within_30s_never_a_live_long_judge_call(
    deployment: dict[str, Any],
) -> None:
    tmp, queue = deployment["tmp"], deployment["queue"]  # default lease: visibility_timeout_s = 20
    llm = await llm_server.LLMTestServer().start()
    slow = {"on": True}
    llm.responder = lambda body: llm_server.Reply.json(
        {"score": 0.5}, latency_ms=LONG_CALL_S * 1000 if slow["on"] else 0)
    backend = await CaptureBackend().start()
    deployment["backends"] = [backend]
    try:
        scorer = tmp / "judge_scorer.py"
        scorer.write_text(JUDGE_SCORER)
        ref, env = f"{scorer}:judged", {"TS_TEST_JUDGE_URL": llm.url + "/v1"}
        receiver = Proc(tmp, "receiver", "receiver", queue, backend.endpoint, ref, env=env)
        live = Proc(tmp, "live", "worker", queue, backend.endpoint, ref, env=env, concurrency=1)
        doomed = Proc(tmp, "doomed", "worker", queue, backend.endpoint, ref, env=env, concurrency=20)
        standby = Proc(tmp, "standby", "worker", queue, backend.endpoint, ref, env=env, concurrency=20)
        deployment["procs"] += [receiver, live, doomed, standby]
        await asyncio.gather(receiver.start(), live.start())

        (long_body, long_ids), *rest = agent_bodies(21, 1)
        async with aiohttp.ClientSession() as session:
            await post_until_accepted(session, receiver.url, long_body)
            await wait_until(lambda: len(llm.requests) == 1, timeout=30, what="the live worker's long judge call")
            long_started = time.monotonic()
            await doomed.start()
            for body, _ in rest:
                await post_until_accepted(session, receiver.url, body)
        await wait_until(lambda: len(llm.requests) == 21, timeout=60, what="the doomed worker's 20 judge calls")
        await standby.start()  # every job is leased (and renewed) by now: it has nothing to take yet
        slow["on"] = False  # the judge answers at once from now on
        killed = time.monotonic()  # before the signal: the kill's own latency only adds to the figure
        await doomed.stop(signal.SIGKILL)  # holding 20 leased jobs, their judge calls in flight

        others = {t for _, ids in rest for t in ids}
        await wait_until(lambda: others <= set(backend.first_scored_at()),
                         timeout=90, what="the dead worker's runs scored")
        taken_over_s = max(at for t, at in backend.first_scored_at().items() if t in others) - killed
        print(f"dead worker's 20 jobs scored {taken_over_s:.1f}s after the SIGKILL")  # the figure
        assert taken_over_s < 30, f"the dead worker's jobs were scored {taken_over_s:.1f}s after the kill"

        await wait_until(lambda: long_ids[0] in {s.span.trace_id.hex() for s in backend.scores()},
                         timeout=LONG_CALL_S + 30, what="the long judge call's score")
        assert time.monotonic() - long_started >= LONG_CALL_S - 1  # it was the first call's answer
        prompts = [r.message_text("user") for r in llm.requests]
        assert sum(long_ids[0] in p for p in prompts) == 1, "the live worker's long call was taken over"
        scored = [s.span.trace_id.hex() for s in backend.scores()]
        assert sorted(set(scored)) == sorted(others | set(long_ids)) and len(set(scored)) == 21
        live.assert_alive()
        standby.assert_alive()
    finally:
        from scorers._judge_transport import aclose_judge_clients

        await aclose_judge_clients()
        await llm.stop()
