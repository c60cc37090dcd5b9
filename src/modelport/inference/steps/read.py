"""Step 3, read: the request, checked against the target's declared tensors, and the
call's time allowance.

A unary call's request is decoded by the surface's ``Decoder`` (a body too large or
malformed is refused here, before the call is admitted). For a version, a request with
more rows than any replica takes is 413 before any work. For an endpoint, the version it
goes to is chosen now (``choose``: weights, or sticky by the request's subject), with
the endpoint's deadline, and an idempotency key is claimed (a repeat is answered by the
first answer, ``Call.replayed``). A stream's request comes parsed: its bounds and
deadline are checked, and an endpoint's version chosen the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import numpy as np

from modelport.errors import DeadlineExceeded, InvalidInput, ModelportError
from modelport.inference.call import Call, Mode
from modelport.inference.steps.authorize import require_files
from modelport.inference.steps.resolve import task_of
from modelport.inference.tokens import counts_tokens, input_token_bound
from modelport.inference.types import Replayed
from modelport.serving.capability import require_rows_fit
from modelport.serving.idempotency import Replay

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env

MAX_TOKENS_LIMIT = 1 << 20
"""The most output tokens one request may ask for (its hold grows with it)."""

MAX_CHOICES = 16
"""The most choices (``n``) one request may ask for."""

DEFAULT_CONTEXT_BOUND = 1024
"""The hold of a generation that asks for no bound, for a version whose manifest
declares no context length (a remote server's)."""


async def read(env: Env, call: Call) -> None:
    if call.mode is Mode.STREAM:
        await _read_stream(env, call)
    elif call.route is None:
        await _read_version(env, call)
    else:
        await _read_endpoint(env, call)


async def _read_version(env: Env, call: Call) -> None:
    resolved = call.resolved
    assert resolved is not None and call.decode is not None
    manifest = resolved.manifest
    try:
        request = await call.decode(manifest.inputs, manifest.outputs)
    except ModelportError as exc:
        if exc.kind == "invalid":
            resolved.observer.request_done("invalid", 0.0)
        raise
    # Larger than any replica takes: 413 before any work (not a 503 to retry).
    ref = resolved.ref
    require_rows_fit(ref, request.inputs, (b.capabilities() for b in env.replicas_for(ref)))
    call.request = request
    call.timeout = env.default_timeout_seconds if request.timeout is None else request.timeout
    if resolved.counts_tokens:
        call.tokens = input_token_bound(request.inputs)


async def _read_endpoint(env: Env, call: Call) -> None:
    route = call.route
    assert route is not None and call.decode is not None
    request = await call.decode(route.inputs, route.outputs)
    timeout = route.endpoint.deadline_ms / 1000
    if request.timeout is not None:
        timeout = min(timeout, request.timeout)
    call.request = request
    call.timeout = timeout
    call.deadline = env.clock.monotonic() + timeout
    if counts_tokens(route.inputs, route.outputs):
        call.tokens = input_token_bound(request.inputs)
    if request.idempotency is not None:
        principal = call.caller.principal
        key, fingerprint = request.idempotency
        claimed = await env.serving.idempotency.claim(
            principal.tenant or principal.id,
            route.endpoint.name,
            key,
            fingerprint,
            hold_seconds=timeout + 5.0,
            wait_until=call.deadline,
        )
        if isinstance(claimed, Replay):
            call.replayed = Replayed(claimed.body, claimed.status)
            return
        call.claim = claimed
    await choose(env, call, request.subject, request.inputs)


async def _read_stream(env: Env, call: Call) -> None:
    request = call.generate
    assert request is not None
    if request.max_tokens is not None and not 1 <= request.max_tokens <= MAX_TOKENS_LIMIT:
        raise InvalidInput(
            f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}", code="invalid_max_tokens"
        )
    if not 1 <= request.n <= MAX_CHOICES:
        raise InvalidInput(f"n must be between 1 and {MAX_CHOICES}", code="invalid_n")
    if call.route is not None:
        call.deadline = min(
            call.deadline, env.clock.monotonic() + call.route.endpoint.deadline_ms / 1000
        )
        await choose(env, call, request.subject)
    elif call.source is None:
        assert call.ref is not None
        call.source = env.replicas_for(call.ref)[0]
    if request.max_tokens is None:
        assert call.ref is not None
        call.generate = replace(
            request, max_tokens=context_bound(call.ref.manifest.runtime), to_context_end=True
        )
    call.timeout = call.deadline - env.clock.monotonic()
    if call.timeout <= 0:
        raise DeadlineExceeded("the deadline passed before the call started")


def context_bound(runtime: Mapping[str, object]) -> int:
    """What a generation that asks for no bound is held for: the model's context
    (``runtime.context_length``), else ``DEFAULT_CONTEXT_BOUND`` tokens."""
    declared = runtime.get("context_length")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return min(declared, MAX_TOKENS_LIMIT)
    return DEFAULT_CONTEXT_BOUND


async def choose(
    env: Env, call: Call, subject: str | None, inputs: Mapping[str, np.ndarray] | None = None
) -> None:
    """The endpoint's version for this call (its active deployment's weights, or sticky
    by ``subject``), once its files are still its publisher's to use (as for a version
    called directly). A unary call's ``inputs`` too large for every backend the plan
    may try are 413 before any work."""
    route = call.route
    assert route is not None
    router = env.serving.router
    plan = router.plan(route.endpoint.name, subject)
    if inputs is not None:
        router.require_fits(plan, inputs)
    chosen = plan.version
    owner, _, name = chosen.model.partition("/")
    version = env.targets.cached(owner, name, chosen.version)
    if version is None:
        version = await env.targets.target(owner, name, chosen.version)
    await require_files(env, version)
    call.plan = plan
    call.ref = chosen
    call.resolved = version
    if call.mode is Mode.STREAM:
        call.task = task_of(chosen)
        call.source = router.streams(plan)


async def free_claim(env: Env, call: Call, exc: BaseException) -> None:
    """The idempotency key's undo: nothing was answered, so a retry with the key runs
    again. Shielded, so that a caller who went away (cancellation) still frees it."""
    claim, call.claim = call.claim, None
    if claim is None:
        return
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(env.serving.idempotency.release, claim)
