"""Commands packed for the wire in one C call.

redis-py's hiredis serializer already builds the bytes in C, but first walks every argument
twice in Python (a check for memoryviews, then its encoder called once per argument). A
settle or append script call carries a hundred arguments and more, so that walk cost more
than the packing itself. `FastPacker` hands the arguments to ``hiredis.pack_command`` as
they are: it encodes text as UTF-8 and numbers as their ``repr``, as redis-py's encoder
does, and refuses every other type, which then goes to redis-py's own way (its errors, for
a bool or None, are the ones callers know).
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.connection import HiredisRespSerializer


def encodes_strict_utf8(encoder: Any) -> bool:
    """Whether a redis-py ``Encoder`` sends text as strict UTF-8, as ``hiredis.pack_command`` does
    (a client's comes from ``get_encoder()``; a URL may ask for another encoding).

    Example:
        >>> from redis.asyncio import Redis
        >>> encodes_strict_utf8(Redis().get_encoder()), encodes_strict_utf8(Redis(encoding="latin-1").get_encoder())
        (True, False)
    """
    return encoder.encoding.lower() in ("utf-8", "utf8") and encoder.encoding_errors == "strict"


class FastPacker(HiredisRespSerializer):
    """redis-py's hiredis serializer (made with the same arguments) that packs a command with
    ``hiredis.pack_command`` alone, and leaves to redis-py's own way a command whose name holds
    a space (``XINFO CONSUMERS``: redis-py splits it into words) and arguments of any other
    type than text, bytes and numbers.

    Example:
        >>> from redis.asyncio.connection import Connection
        >>> connection = Connection()
        >>> redis_py = connection._command_packer
        >>> packer = FastPacker(connection._pack_command_python, connection.encoder.encode)
        >>> args = ("EVALSHA", "ab" * 20, 1, "jobs", "grp", 1.5, "é")
        >>> packer.pack(*args) == redis_py.pack(*args)
        True
        >>> packer.pack("SET", "k", True)
        Traceback (most recent call last):
        redis.exceptions.DataError: Invalid input of type: 'bool'. Convert to a bytes, string, int or float first.
    """

    def pack(self, *args: Any) -> list[bytes]:
        """The command's wire bytes (see the class)."""
        name = args[0]
        if type(name) is not str or " " in name:
            return list(super().pack(*args))
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # a bool, None, a bytearray...: redis-py packs it, or says why not
            return list(super().pack(*args))
