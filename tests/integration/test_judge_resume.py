"""Parked jobs woken by hand, quietly logged (issue 42, point 5), with a real `tracescore serve`
on each store, the loopback OpenAI-compatible judge (answering as a provider bills) and the CLI:

* ``tracescore judges resume MODEL`` closes the breaker and the parked jobs run within seconds,
  not at their next recheck (``park_recheck_s``, 60 s by default: before, about 55 s);
* a spent budget raised with ``tracescore judges budget SCOPE --usd N`` (no restart) lets its
  parked jobs run; meanwhile the parked jobs, taken again every second, are logged once per
  reason and interval, not once per job and recheck.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import llm_server  # tests/support (pytest pythonpath): the fake OpenAI-compatible server
import pytest
from daemon_harness import CaptureBackend, delete_redis_keys, free_port, wait_until
from serve_process import ServeProcess, cli
from shared_redis import REDIS_URL
from test_judge_governance import GOVERNED_SCORER, Provider
from test_redis_faults import agent_bodies, post_until_accepted

MODEL = "openai/gpt-4o-mini"


class Daemon:
    """A judge daemon (``--role all``) on one store, its judge server, its score backend."""

    def __init__(self, tmp: Path, store: str, judge: str) -> None:
        self.tmp, self.store, self.judge = tmp, store, judge
        self.prefix = f"test-resume-{uuid.uuid4().hex[:12]}:"
        self.provider = Provider()
        self.llm = llm_server.LLMTestServer()
        self.backend = CaptureBackend()
        self.process: ServeProcess | None = None

    async def start(self) -> Daemon:
        await self.llm.start()
        self.llm.responder = self.provider.reply
        await self.backend.start()
        scorer = self.tmp / "governed_scorer.py"
        scorer.write_text(GOVERNED_SCORER)
        http_port = free_port()
        queue = (f'url = "sqlite:///{self.tmp / "queue.db"}"' if self.store == "sqlite"
                 else f'url = "{REDIS_URL}"\nkey_prefix = "{self.prefix}"')
        self.config = self.tmp / "tracescore.toml"
        self.config.write_text(
            f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
            f'[assembly]\ndecision_wait = 0.2\n[queue]\n{queue}\n'
            f'[export]\nendpoint = "{self.backend.endpoint}"\nforward_spans = false\ntimeout_s = 2.0\n'
            f'{self.judge}[[scorers]]\nref = "{scorer}:judged"\n')
        self.process = ServeProcess(self.config, self.tmp / "daemon.log", http_port,
                                    env={"TS_TEST_JUDGE_URL": self.llm.url + "/v1"})
        await self.process.start()
        return self

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.kill()
        await self.backend.stop()
        await self.llm.stop()
        if self.store == "redis":
            await delete_redis_keys(REDIS_URL, self.prefix)

    async def send(self, runs: int) -> set[str]:
        assert self.process is not None
        bodies = agent_bodies(runs, runs)
        async with aiohttp.ClientSession() as session:
            for body, _ in bodies:
                await post_until_accepted(session, f"http://127.0.0.1:{self.process.http_port}/v1/traces", body)
        return {t for _, ids in bodies for t in ids}

    def scored(self) -> set[str]:
        return {s.span.trace_id.hex() for s in self.backend.scores()}

    async def judges(self, *args: str) -> tuple[int, str, str]:
        return await cli("judges", *args, "--config", str(self.config))

    async def parked(self, reason: str) -> int:
        code, out, err = await self.judges("--format", "json")
        assert code == 0, err
        return int(json.loads(out)["parked"][reason])

    def park_lines(self) -> list[str]:
        assert self.process is not None
        return [line for line in self.process.log.read_text().splitlines() if "parked (" in line]


@pytest.fixture
async def daemons() -> AsyncIterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        await daemon.stop()
    from scorers._judge_transport import aclose_judge_clients

    await aclose_judge_clients()


@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_resume_runs_the_parked_jobs_within_seconds(tmp_path: Path, store: str, daemons: list[Daemon]) -> None:
    # No probe before an hour, parked jobs asked again every minute (the default): only the
    # resume can run them within the test's bound.
    daemon = Daemon(tmp_path, store, "[judge]\nprobe_interval_s = 3600\npark_recheck_s = 60\n")
    daemons.append(daemon)
    await daemon.start()
    daemon.provider.refusing = True  # 401: the first call opens the breaker
    runs = await daemon.send(1)
    await wait_until(lambda: len(daemon.llm.requests) == 1, timeout=60, what="the first judge call")

    async def all_parked() -> bool:
        return await daemon.parked("judge_unavailable") == 5

    runs |= await daemon.send(4)  # parked without a call: the breaker is open
    await wait_until(all_parked, timeout=60, what="five jobs parked on the open breaker")
    assert len(daemon.llm.requests) == 1 and not daemon.scored()

    daemon.provider.refusing = False  # the key is fixed at the provider
    resumed = time.monotonic()
    code, out, err = await daemon.judges("resume", MODEL)
    assert code == 0, err
    assert f"closed 1 circuit breaker(s) of {MODEL}: 5 parked job(s) run now" in out, out
    await wait_until(lambda: daemon.scored() == runs, timeout=30, what="the parked runs scored")
    took = time.monotonic() - resumed
    print(f"{store}: 5 parked runs scored {took:.1f} s after `judges resume` (park_recheck_s = 60)")
    assert took < 10, f"the parked jobs ran {took:.1f} s after the resume"
    assert len(daemon.provider.billed) == 5  # each run judged once after the fix
    (first, *_) = daemon.park_lines()  # five jobs parked once each: one line says so
    assert len(daemon.park_lines()) == 1 and "judge_unavailable" in first, daemon.park_lines()


async def test_a_budget_raised_without_a_restart_runs_its_parked_jobs_and_parks_are_logged_once_per_interval(
    tmp_path: Path, daemons: list[Daemon],
) -> None:
    # About 0.0011 USD a call: two calls fit in 0.0025. Parked jobs are asked again every second.
    daemon = Daemon(tmp_path, "redis", "[judge]\npark_recheck_s = 1\n[judge.budgets]\nusd = 0.0025\n")
    daemons.append(daemon)
    await daemon.start()
    assert daemon.process is not None
    runs = await daemon.send(8)

    async def parked_again(times: int) -> bool:  # every parked job taken and parked again, `times` over
        text = await daemon.process.metrics()  # type: ignore[union-attr]
        parks = next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith('tracescore_decisions_total{reason="parked",scorer="judged"}')), 0.0)
        return parks >= times * (len(runs) - len(daemon.provider.billed))

    await wait_until(lambda: len(daemon.provider.billed) == 2 and len(daemon.scored()) == 2, timeout=60,
                     what="two runs judged within the budget")
    first_park = time.monotonic()
    await wait_until(lambda: parked_again(4), timeout=60, what="the six parked jobs parked four times each")
    parking_s = time.monotonic() - first_park
    lines = daemon.park_lines()
    print(f"{len(lines)} log lines for the parks of 6 jobs over {parking_s:.1f} s (a line per park before)")
    assert 1 <= len(lines) <= parking_s / 1.0 + 3, lines  # one per reason and second, not one per park
    assert "budget_exhausted" in lines[0] and "judges budget global --usd" in lines[0], lines[0]

    code, out, err = await daemon.judges("budget", "global", "--usd", "1")
    assert code == 0, err
    assert "judge budget global: limit 1 USD per window for every replica (configured 0.0025)" in out, out
    await wait_until(lambda: daemon.scored() == runs, timeout=30, what="the parked runs scored")
    assert len(daemon.provider.billed) == len(runs)  # each run judged once
    report: dict[str, Any] = json.loads((await daemon.judges("--format", "json"))[1])
    (budget,) = report["budgets"]
    assert (budget["limit"], budget["configured"], report["parked"]["budget_exhausted"]) == (1.0, 0.0025, 0)
    code, _, err = await daemon.judges("budget", "scorer:nope", "--usd", "1")
    assert code == 2 and "has no budget 'scorer:nope' (configured: global)" in err, err
