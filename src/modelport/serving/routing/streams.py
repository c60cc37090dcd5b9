"""Streams through an endpoint: what ``Router.predict`` does for a tensor call, for a
generative one.

``Router.streams(plan)`` gives a ``PlannedStream``, the stream source that the
inference pipeline (which admits, holds and settles: ``inference.pipeline``) draws one
stream from. Its ``stream`` opens the planned version through the dispatcher's
``open_stream`` (replicas, breakers, the fallback chain, all before the first
chunk), then passes the chunks on. When the stream ends it:

- records the outcome in the canary's traffic window, as a tensor call's: a stream
  that ended is a success of the chosen version (unless a fallback served it), a
  failure or the deadline is an error, a consumer that left is not counted;
- offers a copy to the deployment's shadow version when the chosen version served it
  whole (``ShadowRunner.offer_stream``): drained in the background, compared and
  logged as tensor shadows are, never billed.

``provenance`` (who serves it) is known once the stream opened, ``texts`` (per choice,
as produced) as it goes: the inference layer's prediction log reads both.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from modelport.errors import InvalidInput, ModelportError
from modelport.runtime.types import ChatMessage
from modelport.serving.types import Provenance, StreamChunk, StreamRequest

if TYPE_CHECKING:
    from modelport.serving.routing.router import Plan, Router

PROMPT = "prompt"
TEXT = "text"
"""Names of a stream's request and answer when logged or compared as tensors."""


def prompt_tensor(
    prompt: str, messages: Sequence[ChatMessage] | None = None
) -> dict[str, np.ndarray]:
    """A streamed request as tensors, for the prediction log: its prompt, or its chat's
    messages as ``role: content`` lines."""
    lines = (f"{m.role}: {m.content}" for m in messages or ())
    text = prompt if messages is None else "\n".join(lines)
    array = np.empty(1, dtype=object)
    array[0] = text.encode("utf-8")
    return {PROMPT: array}


def texts_tensor(texts: Mapping[int, Sequence[str]]) -> dict[str, np.ndarray]:
    """A stream's answer as tensors: one text per choice, in choice order."""
    array = np.empty(len(texts), dtype=object)
    array[:] = ["".join(texts[choice]).encode("utf-8") for choice in sorted(texts)]
    return {TEXT: array}


class PlannedStream:
    """The stream source of one planned endpoint call (see the module docstring)."""

    def __init__(self, router: Router, plan: Plan) -> None:
        self.router = router
        self.plan = plan
        self.provenance: Provenance | None = None
        self.texts: dict[int, list[str]] = {}

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        """The planned version's stream of ``request`` (``Backend.stream``'s contract)."""
        return self._stream(request)

    async def _stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        router, plan = self.router, self.plan
        route = plan.route
        assert route.deployment is not None
        ref = plan.version.ref
        started = time.perf_counter()
        try:
            opened = await router.dispatcher.open_stream(
                request,
                route.replicas.get(ref, ()),
                fallback=route.fallback_options,
                endpoint=route.endpoint.name,
            )
        except ModelportError as exc:
            if not isinstance(exc, InvalidInput):
                router.stats.record(route.deployment, ref, time.perf_counter() - started, ok=False)
            raise
        self.provenance = opened.provenance
        by_chosen = opened.provenance.fallback is None
        ok: bool | None = None  # None: the consumer left, which says nothing of the version
        texts = self.texts
        open_choices = set(range(request.n))
        try:
            first = opened.first
            texts.setdefault(first.choice, []).append(first.text)
            yield first
            async for chunk in opened.rest:
                texts.setdefault(chunk.choice, []).append(chunk.text)
                if chunk.finish_reason is not None:
                    open_choices.discard(chunk.choice)
                    if not open_choices:
                        ok = True  # whole: its consumer may stop reading here
                yield chunk
            ok = True
        except InvalidInput:
            raise
        except (GeneratorExit, asyncio.CancelledError):
            if self.router.dispatcher.clock.monotonic() >= request.deadline:
                ok = False  # cut by the deadline: as a tensor call's timeout
            raise
        except Exception:
            ok = False
            raise
        finally:
            with contextlib.suppress(Exception):
                await opened.rest.aclose()  # type: ignore[attr-defined]
            seconds = time.perf_counter() - started
            if ok is not None:
                router.stats.record(route.deployment, ref, seconds, ok=ok and by_chosen)
            if ok and by_chosen and route.shadow is not None:
                router.shadow.offer_stream(
                    route.endpoint,
                    route.deployment,
                    route.shadow,
                    route.replicas.get(route.shadow.ref, ()),
                    request,
                    texts_tensor(texts),
                    seconds,
                    timeout=route.endpoint.deadline_ms / 1000,
                )
