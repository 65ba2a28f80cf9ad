"""`FastPacker` packs every command into the bytes redis-py's own serializer makes, or fails alike."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from collector.store.redis.conn import FailoverConnection, connect
from collector.store.redis.packing import FastPacker

_CONNECTION = Connection()
REDIS_PY = _CONNECTION._command_packer
FAST = FastPacker(_CONNECTION._pack_command_python, _CONNECTION.encoder.encode)

_ARGS = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",))),  # no lone surrogate: neither encodes it
    st.binary(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["EVALSHA", "SET", "XINFO CONSUMERS", "xadd"]), args=st.lists(_ARGS, max_size=40))
def test_the_same_bytes_as_redis_pys_own_serializer(name: str, args: list[Any]) -> None:
    assert b"".join(FAST.pack(name, *args)) == b"".join(REDIS_PY.pack(name, *args))


@pytest.mark.parametrize("value", [True, None, object()])
def test_a_value_redis_py_refuses_is_refused_with_its_error(value: Any) -> None:
    with pytest.raises(DataError) as theirs:
        REDIS_PY.pack("SET", "k", value)
    with pytest.raises(DataError) as ours:
        FAST.pack("SET", "k", value)
    assert str(ours.value) == str(theirs.value)


def test_buffers_are_packed_as_their_bytes() -> None:
    for value in (bytearray(b"chunk"), memoryview(b"chunk")):
        assert b"".join(FAST.pack("RPUSH", "k", value)) == b"".join(REDIS_PY.pack("RPUSH", "k", value))


async def test_the_stores_connections_pack_with_it_and_redis_reads_back_what_was_sent() -> None:
    client = connect("redis://127.0.0.1:6379/0", max_connections=2)
    try:
        key = "test-packing:value"
        text = "é ✓ 𝄞 " + "x" * 1000
        await client.set(key, text)
        assert (await client.get(key)).decode() == text
        await client.set(key, 0.1)
        assert await client.get(key) == b"0.1"
        connection = await client.connection_pool.get_connection()
        try:
            assert isinstance(connection, FailoverConnection) and isinstance(connection._command_packer, FastPacker)
        finally:
            await client.connection_pool.release(connection)
        await client.delete(key)
    finally:
        await client.aclose()


def test_a_connection_with_another_text_encoding_keeps_redis_pys_packer() -> None:
    """hiredis encodes text as strict UTF-8; a URL asking for latin-1 must get latin-1 bytes."""
    latin = FailoverConnection(encoding="latin-1")
    assert not isinstance(latin._command_packer, FastPacker)
    assert b"".join(latin.pack_command("SET", "k", "é")).endswith(b"$1\r\n\xe9\r\n")
