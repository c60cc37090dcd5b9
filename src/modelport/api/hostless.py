"""What stands where the ``/v2`` data plane would in a process without a model host
(a gateway): every call that needs the host answers 503 ``role_lacks_service``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn

from modelport.errors import Unavailable
from modelport.serving.placement import ROLE_LACKS_SERVICE


class HostlessDataPlane:
    """Refuses every model call; follows no loads (there are none here)."""

    def __init__(self, role: str) -> None:
        self.role = role

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):  # the interpreter's probes (copy, pickle) are not calls
            raise AttributeError(name)
        # Any use of the host (target, ready, infer, repository...) is refused alike.
        raise Unavailable(
            f"this process ({self.role}) hosts no models: /v2 is served by the platform's "
            "workers, and endpoints by their deployments' remote backends",
            code=ROLE_LACKS_SERVICE,
            role=self.role,
        )

    @asynccontextmanager
    async def syncing(self) -> AsyncIterator[None]:
        yield
