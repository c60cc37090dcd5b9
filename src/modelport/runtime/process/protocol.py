"""The control messages between the host and a worker: JSON over a socket.

JSON, not pickle: the worker runs model code, and nothing it sends may execute code
in the serving process. Tensors never travel here, only their layout in shared memory
(``runtime.process.tensors``), whose segments cross as file descriptors
(``SCM_RIGHTS``) right after the message that names them in ``fds``.

Host → worker: the ``WorkerSpec`` first (as JSON), then ``execute`` (``in``, ``out``:
segment names; ``layout`` of the inputs; ``fds``: the names of segments new to the
worker, whose descriptors follow), ``out`` (``name`` and ``fds``: a larger output
segment, answering ``grow``) or ``stop``. Worker → host: ``ready`` (after the load), ``failed`` (the load
raised), then per ``execute`` any ``grow`` (``bytes`` the outputs need) and one
``done`` (``layout`` of the outputs, ``seconds`` in the model) or ``error``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import orjson

Message = dict[str, Any]


def send(conn: Connection, message: Message) -> None:
    conn.send_bytes(orjson.dumps(message))


def receive(conn: Connection) -> Message:
    """The next message; ``EOFError`` when the other side is gone."""
    message = orjson.loads(conn.recv_bytes())
    if not isinstance(message, dict):
        raise EOFError("malformed control message")
    return message


def send_fds(conn: Connection, fds: Sequence[int]) -> None:
    """Pass ``fds`` to the other side (duplicates arrive there); nothing when empty."""
    if not fds:
        return
    with socket.socket(fileno=_dup(conn)) as sock:
        socket.send_fds(sock, [bytes([len(fds)])], list(fds))


def receive_fds(conn: Connection, count: int) -> list[int]:
    """The ``count`` descriptors the other side passed with ``send_fds``."""
    if not count:
        return []
    with socket.socket(fileno=_dup(conn)) as sock:
        data, fds, _, _ = socket.recv_fds(sock, 1, count)
    if len(data) != 1 or len(fds) != count:
        for fd in fds:
            os.close(fd)
        raise EOFError("expected file descriptors on the control socket")
    return fds


def _dup(conn: Connection) -> int:
    return os.dup(conn.fileno())
