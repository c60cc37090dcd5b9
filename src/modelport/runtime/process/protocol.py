"""The control messages between the host and a worker: JSON over a socket.

JSON, not pickle: the worker runs model code, and nothing it sends may execute code
in the serving process. Tensors never travel here, only their layout in shared memory
(``runtime.process.tensors``).

Host → worker: the ``WorkerSpec`` first (as JSON), then ``execute`` (``in``, ``out``:
segment names; ``layout`` of the inputs), ``out`` (a larger output segment, answering
``grow``) or ``stop``. Worker → host: ``ready`` (after the load), ``failed`` (the load
raised), then per ``execute`` any ``grow`` (``bytes`` the outputs need) and one
``done`` (``layout`` of the outputs, ``seconds`` in the model) or ``error``.
"""

from __future__ import annotations

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
