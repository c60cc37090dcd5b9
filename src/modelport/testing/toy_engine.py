"""A deterministic generative engine for tests (the fake of ``GenerativeEngine``).

Its tokens are the prompt's whitespace-separated words. In ``echo`` mode it generates
the prompt's words back, in ``count`` mode the numbers ``1 2 3 ...``; one chunk per
token, each after ``delay`` seconds, until ``max_tokens`` (``length``) or, in echo
mode, the end of the prompt (``stop``). It records what it was asked and what was
cancelled, so a test can see that a consumer going away stopped the work.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from modelport.manifest import Manifest
from modelport.runtime.types import GenerationChunk, GenerationRequest

TOY_FORMAT = "toy-generative"


@dataclass
class ToyRecord:
    """What happened to one submitted request."""

    request: GenerationRequest
    produced: int = 0
    """Tokens generated (each one produced after its delay)."""
    finished: bool = False
    cancelled: bool = False


class ToyGeneration:
    """One submitted request of ``ToyEngine``."""

    def __init__(self, engine: ToyEngine, record: ToyRecord) -> None:
        self._engine = engine
        self._record = record
        self.input_tokens = len(record.request.prompt.split())

    def __aiter__(self) -> AsyncIterator[GenerationChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[GenerationChunk]:
        record, request = self._record, self._record.request
        words = self._engine.words(request.prompt)
        for i in range(request.max_tokens):
            if record.cancelled:
                return
            if self._engine.delay:
                await asyncio.sleep(self._engine.delay)
            if record.cancelled:
                return
            record.produced += 1
            last_word = words is not None and i == len(words) - 1
            last = last_word or i == request.max_tokens - 1
            reason = None if not last else ("stop" if last_word else "length")
            record.finished = last
            text = words[i] if words is not None else str(i + 1)
            yield GenerationChunk(
                text=text if i == 0 else f" {text}", tokens=1, finish_reason=reason
            )
            if last:
                return

    def cancel(self) -> None:
        if not self._record.finished:
            self._record.cancelled = True


@dataclass
class ToyEngine:
    """Echoes (or counts) one token per chunk, ``delay`` seconds apart."""

    mode: str = "echo"
    delay: float = 0.0
    records: list[ToyRecord] = field(default_factory=list)
    unloaded: bool = False

    def words(self, prompt: str) -> list[str] | None:
        return prompt.split() if self.mode == "echo" else None

    def submit(self, request: GenerationRequest) -> ToyGeneration:
        record = ToyRecord(request)
        self.records.append(record)
        return ToyGeneration(self, record)

    @property
    def cancelled(self) -> list[str]:
        """Request ids of the generations cancelled before they finished."""
        return [r.request.request_id for r in self.records if r.cancelled]

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        self.unloaded = True


class ToyGenerativeFormat:
    """The format plugin of ``ToyEngine``: every load returns ``engine`` (so a test holds
    the engine the backend streams from). ``mode`` and ``delay`` may also come from the
    manifest's ``runtime`` options."""

    name = TOY_FORMAT

    def __init__(self, engine: ToyEngine | None = None) -> None:
        self.engine = engine or ToyEngine()
        self.loads = 0

    def estimate_memory(self, manifest: Manifest) -> int:
        return 0

    def load(self, files: dict[str, Path], manifest: Manifest, *, name: str = "") -> ToyEngine:
        self.loads += 1
        self.engine.mode = str(manifest.runtime.get("mode", self.engine.mode))
        self.engine.delay = float(manifest.runtime.get("delay", self.engine.delay))
        return self.engine
