"""A generative model host's main: load one version's engine through its generative
plugin, then serve generations over the control socket.

Started like a tensor worker (``runtime.process.worker``: a clean exec, an empty
environment, under the sandbox, the version's files only), as ``python -m
modelport.runtime.process.generative_worker FD``. The engine (its scheduler thread and
its kernels) runs here, so a parser bug in a publisher's GGUF or tokenizer file reaches
nothing of the platform's. Messages (JSON, ``runtime.process.protocol``):

- host → worker: the spec (as a tensor worker's), then ``submit`` (``id``, ``request``),
  ``cancel`` (``id``), ``stop``;
- worker → host: ``ready`` or ``failed``; per submission ``accepted`` (``id``,
  ``input_tokens``) or ``refused`` (``id`` and the error), then ``chunk`` messages and
  one ``end`` (or ``error``); every ``STATS_SECONDS`` a ``stats`` message (the engine's
  gauges and counters, which the host shows on its ``/metrics``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import traceback
from importlib import import_module
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from modelport.manifest import Manifest
from modelport.runtime.formats.base import Generation, GenerativeEngine
from modelport.runtime.process.protocol import Message, receive, send
from modelport.runtime.process.worker import error_message, watch_parent
from modelport.runtime.types import ChatMessage, GenerationRequest, Priority, ToolCall

STATS_SECONDS = 0.5


def load(spec: Message) -> GenerativeEngine:
    manifest = Manifest.model_validate(spec["manifest"])
    module, _, name = str(spec["entry"]).partition(":")
    plugin = getattr(import_module(module), name)
    files = {path: Path(local) for path, local in spec["files"].items()}
    engine: GenerativeEngine = plugin(**spec["options"]).load(files, manifest, name=spec["name"])
    return engine


def request_of(doc: Message) -> GenerationRequest:
    """A generation request from its JSON form (``request_message``'s)."""
    messages = doc.get("messages")
    return GenerationRequest(
        prompt=str(doc["prompt"]),
        max_tokens=int(doc["max_tokens"]),
        parameters=dict(doc.get("parameters") or {}),
        request_id=str(doc.get("request_id", "")),
        messages=None
        if messages is None
        else tuple(
            ChatMessage(
                str(m["role"]),
                str(m["content"]),
                tuple(ToolCall(*c) for c in m.get("tool_calls", ())),
                m.get("tool_call_id"),
            )
            for m in messages
        ),
        n=int(doc.get("n", 1)),
        priority=Priority(doc.get("priority", Priority.INTERACTIVE.value)),
        to_context_end=bool(doc.get("to_context_end", False)),
    )


class _Server:
    def __init__(self, conn: Connection, engine: GenerativeEngine) -> None:
        self.conn = conn
        self.engine = engine
        self.lock = threading.Lock()
        self.generations: dict[int, Generation] = {}

    def send(self, message: Message) -> None:
        with self.lock:
            send(self.conn, message)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Message | None] = asyncio.Queue()

        def read() -> None:
            while True:
                try:
                    message: Message | None = receive(self.conn)
                except (EOFError, OSError):
                    message = None
                loop.call_soon_threadsafe(inbox.put_nowait, message)
                if message is None or message.get("op") == "stop":
                    return

        threading.Thread(target=read, name="control", daemon=True).start()
        stats = asyncio.create_task(self._stats())
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                message = await inbox.get()
                if message is None or message.get("op") == "stop":
                    return 0
                op, ident = message.get("op"), int(message.get("id", -1))
                if op == "submit":
                    task = asyncio.create_task(self._generate(ident, message["request"]))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                elif op == "cancel":
                    generation = self.generations.pop(ident, None)
                    if generation is not None:
                        generation.cancel()
        finally:
            stats.cancel()
            await asyncio.to_thread(self.engine.unload)

    async def _generate(self, ident: int, doc: Message) -> None:
        try:
            generation = self.engine.submit(request_of(doc))
        except Exception as exc:
            self.send(error_message(exc) | {"op": "refused", "id": ident})
            return
        self.generations[ident] = generation
        self.send({"op": "accepted", "id": ident, "input_tokens": generation.input_tokens})
        try:
            async for chunk in generation:
                self.send(
                    {
                        "op": "chunk",
                        "id": ident,
                        "text": chunk.text,
                        "tokens": chunk.tokens,
                        "finish": chunk.finish_reason,
                        "choice": chunk.choice,
                        "logprobs": chunk.logprobs,
                        "compute": chunk.compute_seconds,
                    }
                )
        except Exception as exc:
            self.send(error_message(exc) | {"op": "error", "id": ident})
        else:
            self.send({"op": "end", "id": ident})
        finally:
            self.generations.pop(ident, None)

    async def _stats(self) -> None:
        engine: Any = self.engine
        while True:
            await asyncio.sleep(STATS_SECONDS)
            scheduler = getattr(engine, "scheduler", None)
            if scheduler is None:
                continue
            metrics = engine.metrics
            self.send(
                {
                    "op": "stats",
                    "running": len(scheduler.running),
                    "waiting": scheduler.waiting_count,
                    "kv_bytes": scheduler.ledger.used_bytes,
                    "preemptions": scheduler.preemptions,
                    "prefix_queried": metrics.prefix_queried_tokens._value.get(),
                    "prefix_hits": metrics.prefix_hit_tokens._value.get(),
                    "kind": getattr(engine, "kind", ""),
                }
            )


def serve(conn: Connection) -> int:
    spec = receive(conn)
    try:
        engine = load(spec)
    except Exception as exc:
        failed = error_message(exc)
        failed["op"] = "failed"
        failed["trace"] = traceback.format_exc(limit=5)
        send(conn, failed)
        return 1
    send(conn, {"op": "ready", "kind": getattr(engine, "kind", "")})
    return asyncio.run(_Server(conn, engine).run())


def main(argv: list[str] | None = None) -> Any:
    args = sys.argv[1:] if argv is None else argv
    watch_parent(os.getppid())
    return serve(Connection(int(args[0])))


if __name__ == "__main__":
    sys.exit(main())
