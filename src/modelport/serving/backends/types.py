"""Plain records of declared remote backends (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class RemoteKind(StrEnum):
    REMOTE_V2 = "remote_v2"
    """An Open Inference Protocol server: another modelport, Triton, MLServer."""
    REMOTE_OPENAI = "remote_openai"
    """An OpenAI-compatible server (text generation, embeddings)."""


@dataclass(frozen=True)
class RemoteBackendInfo:
    """A remote backend as declared. The API key is kept but never shown."""

    name: str
    tenant: str
    """Only this tenant's deployments may run on it."""
    kind: RemoteKind
    url: str
    has_api_key: bool
    capabilities: dict[str, Any]
    """``formats``, ``max_batch_size``, ``hardware``, ``context_length``, ``tasks`` and
    ``models`` (registry ``owner/name`` to the remote's model name), as declared."""
    created_at: datetime
    created_by: str
