"""Service.shutdown stops every part, even when one of them fails to stop."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
import pytest
from ports import hold_port  # tests/support

from collector.config import config_from_dict
from collector.service import Service
from collector.work.registry import ScorerRegistry


async def test_a_part_that_fails_to_stop_does_not_keep_the_rest_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = config_from_dict({
        "receiver": {"grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0"},
        "queue": {"url": f"sqlite:///{tmp_path / 'q.db'}"},
    }, env={})
    service = Service(config, ScorerRegistry([]))
    await service.start()
    assert service.grpc is not None and service.assembler is not None
    port = service.grpc.port

    async def broken(timeout: float = 5.0) -> None:  # noqa: ASYNC109
        raise RuntimeError("assembly would not stop")

    monkeypatch.setattr(service.assembler, "shutdown", broken)
    with caplog.at_level(logging.INFO, logger="collector.service"):
        await service.shutdown()
    assert "stopping the assembly failed" in caplog.text
    assert "1 parts failed to stop cleanly" in caplog.text
    # Parts after the broken one stopped: the workers' loop, the store (its file is closed),
    # and the gRPC listener before it is gone (nothing left for the garbage collector).
    assert service.worker._task is None
    with pytest.raises(RuntimeError, match="after shutdown"):  # the store's thread is gone
        await service.store.stats()
    try:  # held (never listening) for the check: no other test's server can take the port meanwhile
        holder = hold_port(port)
    except OSError as err:
        raise AssertionError(f"the gRPC listener on {port} is still there: {err}") from None
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:  # refused at once; the deadline
                await channel.unary_unary("/x/y")(b"", timeout=30.0)  # only detects a hang
    finally:
        holder.close()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
