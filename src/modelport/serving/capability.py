"""What a request needs from a backend, and whether a backend's capabilities cover it.

Pure functions. The dispatcher filters candidate backends with ``unmet`` before it
tries any, so a request is never sent where it cannot be honoured:

- format: the version's manifest ``format`` must be among the backend's ``formats``;
- protocol: the manifest's ``runtime.protocol`` (default ``v2``) must be served, and
  for ``openai`` its ``runtime.task`` (``chat``, ``completions``, ``embeddings``) too;
- hardware: when the manifest lists hardware, the backend must have one of them;
- batch: the request's rows (dimension 0 of inputs the manifest declares with a
  variable first dimension) must not exceed ``max_batch_size``;
- context length: with ``context_length`` set, the prompt (the request parameter
  ``prompt_tokens``, or about one token per 4 bytes of the longest text input) plus
  ``max_tokens`` must fit.

``require_rows_fit`` answers, before any work, a request larger than any replica able
to run the version could take: 413 ``payload_too_large`` (not retryable), where the
dispatcher would only find no capable backend (503, which clients retry).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from modelport.errors import PayloadTooLarge
from modelport.serving.types import BackendRequest, Capabilities, StreamRequest, VersionRef

BYTES_PER_TOKEN = 4
"""Rough size of a token when the caller did not count them (English text, BPE)."""


@dataclass(frozen=True)
class Requirements:
    format: str
    protocol: str = "v2"
    task: str | None = None
    hardware: frozenset[str] = frozenset()
    rows: int = 1
    context_tokens: int = 0


def requirements(request: BackendRequest) -> Requirements:
    manifest = request.version.manifest
    runtime = manifest.runtime
    protocol = str(runtime.get("protocol") or "v2")
    task = runtime.get("task")
    return Requirements(
        format=manifest.format,
        protocol=protocol,
        task=str(task) if task is not None else None,
        hardware=frozenset(manifest.resources.hardware),
        rows=_rows(request),
        context_tokens=_context_tokens(request),
    )


def unmet(capabilities: Capabilities, needs: Requirements) -> str | None:
    """Why a backend with ``capabilities`` cannot serve ``needs``; None when it can."""
    if needs.format not in capabilities.formats:
        return f"format '{needs.format}' is not among {sorted(capabilities.formats)}"
    if needs.protocol not in capabilities.protocols:
        return f"protocol '{needs.protocol}' is not served"
    if needs.protocol == "openai" and needs.task not in capabilities.tasks:
        return f"task '{needs.task}' is not among {sorted(capabilities.tasks)}"
    if needs.hardware and not needs.hardware & capabilities.hardware:
        return f"needs hardware {sorted(needs.hardware)}, has {sorted(capabilities.hardware)}"
    if needs.rows > capabilities.max_batch_size:
        return f"{needs.rows} rows is above its max batch size of {capabilities.max_batch_size}"
    limit = capabilities.context_length
    if limit is not None and needs.context_tokens > limit:
        return f"needs about {needs.context_tokens} tokens of context, has {limit}"
    return None


def unmet_by_version(capabilities: Capabilities, version: VersionRef) -> str | None:
    """``unmet`` for what the version alone decides (format, protocol, task, hardware):
    the same for every request of the version, so the dispatcher keeps the answer."""
    manifest = version.manifest
    runtime = manifest.runtime
    task = runtime.get("task")
    needs = Requirements(
        format=manifest.format,
        protocol=str(runtime.get("protocol") or "v2"),
        task=str(task) if task is not None else None,
        hardware=frozenset(manifest.resources.hardware),
    )
    return unmet(capabilities, needs)


def unmet_by_request(capabilities: Capabilities, request: BackendRequest) -> str | None:
    """``unmet`` for what the request decides (its rows, its context)."""
    rows = _rows(request)
    if rows > capabilities.max_batch_size:
        return f"{rows} rows is above its max batch size of {capabilities.max_batch_size}"
    limit = capabilities.context_length
    if limit is not None:
        tokens = _context_tokens(request)
        if tokens > limit:
            return f"needs about {tokens} tokens of context, has {limit}"
    return None


def unmet_by_stream(capabilities: Capabilities, request: StreamRequest) -> str | None:
    """``unmet`` for what a streamed request decides: its context (the prompt at about
    one token per ``BYTES_PER_TOKEN`` bytes, plus ``max_tokens``)."""
    limit = capabilities.context_length
    if limit is None:
        return None
    if request.messages is None:
        size = len(request.prompt.encode("utf-8"))
    else:
        size = sum(len(m.content.encode("utf-8")) for m in request.messages)
    # Without a bound asked for, the output takes what the context leaves.
    tokens = math.ceil(size / BYTES_PER_TOKEN) + (
        0 if request.to_context_end else request.max_tokens
    )
    if tokens > limit:
        return f"needs about {tokens} tokens of context, has {limit}"
    return None


def require_rows_fit(
    version: VersionRef, inputs: Mapping[str, np.ndarray], replicas: Iterable[Capabilities]
) -> None:
    """413 ``payload_too_large`` when the request's rows are above the largest
    ``max_batch_size`` of the ``replicas`` that can run ``version`` at all (format,
    protocol, hardware). Nothing when none can: the dispatcher says why."""
    largest = max(
        (c.max_batch_size for c in replicas if unmet_by_version(c, version) is None),
        default=None,
    )
    if largest is None:
        return
    rows = request_rows(version, inputs)
    if rows > largest:
        raise PayloadTooLarge(
            f"{rows} rows is above the largest batch any backend of {version.ref} takes "
            f"({largest} rows): send it in parts",
            code="payload_too_large",
            rows=rows,
            max_batch_size=largest,
        )


def request_rows(version: VersionRef, inputs: Mapping[str, np.ndarray]) -> int:
    """The request's rows: dimension 0 of the inputs the manifest declares with a
    variable first dimension (1 when there are none)."""
    rows = 1
    for spec in version.manifest.inputs:
        array = inputs.get(spec.name)
        if array is not None and spec.shape and spec.shape[0] == -1 and array.ndim:
            rows = max(rows, int(array.shape[0]))
    return rows


def _rows(request: BackendRequest) -> int:
    return request_rows(request.version, request.inputs)


def _context_tokens(request: BackendRequest) -> int:
    parameters = request.parameters
    max_tokens = _int(parameters.get("max_tokens"))
    prompt = _int(parameters.get("prompt_tokens"))
    if prompt == 0:
        longest = 0
        for array in request.inputs.values():
            if array.dtype == np.object_:
                for item in array.reshape(-1).tolist():
                    size = len(item.encode() if isinstance(item, str) else item)
                    longest = max(longest, size)
        prompt = math.ceil(longest / BYTES_PER_TOKEN)
    return prompt + max_tokens


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value
