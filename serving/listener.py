"""Closing a listening socket without resetting connections a client has already opened.

Closing a listener resets every connection in its accept queue: connections the kernel completed
(the client saw its connect succeed, and has likely sent its request) that the server had not yet
accepted. Under load that lost requests at every shutdown. Instead, new connection attempts are
dropped first (a classic BPF socket filter that discards SYN segments: the client's connect
retries, then meets the closed port and is refused, having sent nothing), the queue is drained
by the event loop's own accepting, and only then is the listener closed.
"""

from __future__ import annotations

import asyncio
import ctypes
import select
import socket
import struct
import sys

SO_ATTACH_FILTER = 26  # Linux's setsockopt option number
# ldb [13] (the TCP flags byte); jset #0x02 (SYN) ? drop : keep. A listener's filter sees each
# segment from its TCP header on; segments of established connections pass.
_DROP_SYN = ((0x30, 0, 0, 13), (0x45, 0, 1, 0x02), (0x06, 0, 0, 0), (0x06, 0, 0, 0xFFFFFFFF))


def refuse_new_connections(sock: socket.socket) -> bool:
    """Drop connection attempts (SYNs) to listening ``sock``; True where done (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    program = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *insn) for insn in _DROP_SYN))
    fprog = struct.pack("HL", len(_DROP_SYN), ctypes.addressof(program))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)  # the kernel copies the program
    except OSError:
        return False
    return True


async def drain_accept_queue(sock: socket.socket, timeout: float = 0.5) -> None:
    """Wait (at most ``timeout`` seconds) until ``sock``'s accept queue stays empty while the event
    loop, still serving it, accepts what is queued. Handshakes under way when SYNs began to be
    dropped complete within a round trip, so the queue is checked twice, a little apart."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    quiet = 0
    while quiet < 2 and loop.time() < deadline:
        await asyncio.sleep(0.02)
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):  # closed meanwhile
            return
        quiet = 0 if readable else quiet + 1
