"""SPEC §5, no shared ports: a receiver whose port another socket listens on fails `start` with
an `OSError` naming its address, never sharing the port (gRPC's default ``SO_REUSEPORT`` is off),
on real loopback sockets."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import grpc
import pytest

from collector.common.metrics import Metrics
from collector.receive.grpc import GrpcReceiver
from collector.receive.http import HttpReceiver


@pytest.fixture
def held() -> Iterator[int]:
    """A port some other socket listens on at 127.0.0.1."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


async def test_a_grpc_port_held_by_another_socket_fails_start(held: int) -> None:
    receiver = GrpcReceiver(f"127.0.0.1:{held}", None, Metrics())  # type: ignore[arg-type]
    with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{held} \(gRPC\): the port is in use"):
        await receiver.start()
    await receiver.shutdown(0)


async def test_a_grpc_port_held_by_a_default_grpc_server_is_not_shared() -> None:
    """A plain gRPC server sets SO_REUSEPORT; without it on ours too, the kernel refuses the bind."""
    other = grpc.aio.server()
    port = other.add_insecure_port("127.0.0.1:0")
    await other.start()
    try:
        receiver = GrpcReceiver(f"127.0.0.1:{port}", None, Metrics())  # type: ignore[arg-type]
        with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{port} \(gRPC\)"):
            await receiver.start()
        await receiver.shutdown(0)
    finally:
        await other.stop(None)


async def test_a_second_grpc_receiver_on_the_same_port_fails() -> None:
    first = GrpcReceiver("127.0.0.1:0", None, Metrics())  # type: ignore[arg-type]
    await first.start()
    try:
        second = GrpcReceiver(f"127.0.0.1:{first.port}", None, Metrics())  # type: ignore[arg-type]
        with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{first.port} \(gRPC\)"):
            await second.start()
        await second.shutdown(0)
    finally:
        await first.shutdown(0)


async def test_a_name_with_one_of_its_addresses_taken_fails(held: int) -> None:
    """gRPC alone would bind ``localhost`` to ``::1`` only and start: agents sending to
    127.0.0.1 would reach the other process."""
    receiver = GrpcReceiver(f"localhost:{held}", None, Metrics())  # type: ignore[arg-type]
    with pytest.raises(OSError, match=rf"cannot listen on localhost:{held} \(gRPC\)"):
        await receiver.start()
    await receiver.shutdown(0)


async def test_an_http_port_held_by_another_socket_fails_start(held: int) -> None:
    receiver = HttpReceiver(f"127.0.0.1:{held}", None, Metrics())  # type: ignore[arg-type]
    try:
        with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{held} \(HTTP\): address already in use") as err:
            await receiver.start()
        assert err.value.errno == errno.EADDRINUSE
    finally:
        await receiver.shutdown(0)


async def test_a_second_http_receiver_on_the_same_port_fails() -> None:
    first = HttpReceiver("127.0.0.1:0", None, Metrics())  # type: ignore[arg-type]
    await first.start()
    second = HttpReceiver(f"127.0.0.1:{first.port}", None, Metrics())  # type: ignore[arg-type]
    try:
        with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{first.port} \(HTTP\)"):
            await second.start()
    finally:
        await second.shutdown(0)
        await first.shutdown(0)
