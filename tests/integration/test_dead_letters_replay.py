"""Dead letters end to end, on both stores (and on Redis in 3 partitions): a scorer that raises is dead-lettered with its
traceback (logged at -v, kept in the record, shown by `dead-letters show`), the scorer is
fixed and the daemon restarted, `dead-letters replay` re-queues the job under its own key,
and the run is scored exactly once, in a new evaluation span that supersedes the failure's."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from daemon_harness import (
    CaptureBackend,
    agent_trace_body,
    delete_redis_keys,
    free_port,
    wait_until,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Status
from serve_process import ServeProcess, cli
from shared_redis import REDIS_URL

from collector.commands.dead_letters import open_dead_letters
from collector.config import load_config

PROTOBUF = {"Content-Type": "application/x-protobuf"}

BROKEN = '''from scorers import create_scorer


def ratio(run):
    total = 0
    return len(run.output) / total  # line 6: the bug


fragile = create_scorer(id="fragile", description="answer count", type="agent", version="1").generate_score(ratio)
'''
FIXED = BROKEN.replace("total = 0", "total = 1")


@pytest.fixture(params=["sqlite", "redis", "redis-partitioned"])
async def daemon(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[ServeProcess, CaptureBackend]]:
    backend = await CaptureBackend().start()
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    url = f"sqlite:///{tmp_path / 'queue.db'}" if request.param == "sqlite" else REDIS_URL
    partitions = 3 if request.param == "redis-partitioned" else 1
    http_port = free_port()
    (tmp_path / "fragile_scorers.py").write_text(BROKEN)
    config = tmp_path / "tracescore.toml"
    config.write_text(
        f'[receiver]\ngrpc_endpoint = ""\nhttp_endpoint = "127.0.0.1:{http_port}"\n'
        f'[assembly]\ndecision_wait = 0.3\n'
        f'[queue]\nurl = "{url}"\nkey_prefix = "{prefix}"\npartitions = {partitions}\n'
        f'[export]\nendpoint = "{backend.endpoint}"\nforward_spans = false\ntimeout_s = 2.0\nmax_backoff_s = 0.5\n'
        f'[[scorers]]\nref = "{tmp_path / "fragile_scorers.py"}:fragile"\n'
    )
    daemon = ServeProcess(config, tmp_path / "daemon.log", http_port, flags=("-v", "--log-format", "json"))
    yield daemon, backend
    await daemon.kill()
    await backend.stop()
    if request.param != "sqlite":
        await delete_redis_keys(REDIS_URL, prefix, partitions)


async def test_dead_letter_keeps_the_traceback_and_replays_once_fixed(
    daemon: tuple[ServeProcess, CaptureBackend], tmp_path: Path,
) -> None:
    serve, backend = daemon
    config = str(serve.config)
    await serve.start()
    body, trace_id, span_id = agent_trace_body()
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{serve.http_port}/v1/traces", data=body, headers=PROTOBUF) as resp:
            assert resp.status == 200

    async def listed() -> list[dict[str, str]]:
        code, out, err = await cli("dead-letters", "list", "--config", config, "--format", "json")
        assert code == 0, err
        return list(json.loads(out))

    async def one_dead_letter() -> bool:  # polled in-process; the command is run once it is there
        admin = open_dead_letters(await asyncio.to_thread(load_config, config))
        try:
            return len(await admin.letters()) == 1
        except FileNotFoundError:
            return False
        finally:
            await admin.close()

    await wait_until(one_dead_letter, timeout=30, what="the dead letter")
    (row,) = await listed()
    assert set(row) == {"id", "scorer", "trace_id", "span_id", "error", "failed_at"}
    assert (row["scorer"], row["trace_id"], row["span_id"]) == ("fragile", trace_id, span_id)
    assert row["error"] == "ZeroDivisionError: Scorer Run Failed: division by zero"
    code, out, _ = await cli("dead-letters", "show", row["id"], "--config", config, "--format", "json")
    shown = json.loads(out)
    assert code == 0 and "ZeroDivisionError: division by zero" in shown["traceback"]
    assert 'fragile_scorers.py", line 6, in ratio' in shown["traceback"]
    await wait_until(lambda: len(backend.scores()) == 1, what="the failure span")
    (failure_span,) = backend.scores()
    assert failure_span.attributes["error.type"] == "ZeroDivisionError"
    failure_span_id = failure_span.span.span_id.hex()

    # -v --log-format json: one JSON object per line; the failure is logged with its traceback.
    lines = [json.loads(line) for line in serve.log.read_text().splitlines() if line.startswith("{")]
    failure = next(x for x in lines if x["message"].startswith("scorer fragile failed on trace"))
    assert failure["level"] == "WARNING" and 'line 6, in ratio' in failure["exc_info"]

    assert await serve.stop() == 0
    await asyncio.to_thread((serve.config.parent / "fragile_scorers.py").write_text, FIXED)  # fixed
    await serve.start()
    code, out, err = await cli("dead-letters", "replay", row["id"], "--config", config)
    assert (code, out.strip()) == (0, f"replayed 1 dead letter(s): {row['id']}"), err

    def successes() -> list[object]:
        return [s for s in backend.scores() if "error.type" not in s.attributes]

    await wait_until(lambda: len(successes()) == 1, timeout=30, what="the replayed score")
    (score,) = successes()
    assert (score.span.trace_id.hex(), score.span.parent_span_id.hex()) == (trace_id, span_id)
    assert score.attributes["gen_ai.evaluation.score.value"] == 1.0
    # A new outcome is a new span (backends keep the first copy of a span id), OK, naming the
    # failure span it replaces.
    assert score.span.span_id.hex() != failure_span_id
    assert score.attributes["tracescore.supersedes"] == failure_span_id
    assert score.span.status.code == Status.STATUS_CODE_OK
    assert await listed() == []
    code, _, err = await cli("dead-letters", "replay", row["id"], "--config", config)
    assert code == 1 and "no dead letter" in err  # replayed once: nothing left to replay
    text = await serve.metrics()
    assert 'tracescore_decisions_total{reason="scored",scorer="fragile"} 1.0' in text
    assert 'tracescore_score_count{scorer="fragile"} 1.0' in text
    lines = [json.loads(line) for line in serve.log.read_text().splitlines() if line.startswith("{")]
    assert any(x["message"].startswith(f"scored fragile on trace {trace_id} span {span_id}: 1.0 (") for x in lines)
    assert await serve.stop() == 0
    assert len(successes()) == 1


async def test_dead_letters_need_no_sink_keys_while_check_still_asks_for_them(tmp_path: Path) -> None:
    """An operator's shell lacks the sinks' secrets (mounted only into the daemon): the
    dead-letter commands work on the store all the same, while `check` names the variable."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[queue]\nurl = "{REDIS_URL}"\nkey_prefix = "{prefix}"\n'
                      '[sinks.langfuse]\nhost = "http://127.0.0.1:9"\npublic_key = "pk-lf-test"\n'
                      'secret_key = "env:TRACESCORE_TEST_UNSET_LANGFUSE_SECRET"\n')
    os.environ.pop("TRACESCORE_TEST_UNSET_LANGFUSE_SECRET", None)
    code, out, err = await cli("dead-letters", "list", "--config", str(config), "--format", "json")
    assert (code, json.loads(out or "null")) == (0, []), err
    code, _, err = await cli("dead-letters", "replay", "--all", "--config", str(config))
    assert code == 0, err
    code, _, err = await cli("check", str(config))
    assert code == 2 and "TRACESCORE_TEST_UNSET_LANGFUSE_SECRET" in err, err
    await delete_redis_keys(REDIS_URL, prefix)
