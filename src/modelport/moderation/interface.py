"""The moderation plugin interface, and the seam through which a classifier model runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from modelport.moderation.types import Decision, Policy


class Moderator(Protocol):
    """Judges texts under a tenant's policy.

    ``moderate`` is called with every text of one call's input (or of its output) and
    the policy in force; it answers one decision for them all and never records it (the
    ``ModerationService`` does). It raises only when it cannot judge (its classifier
    failed): a caller then fails closed."""

    async def moderate(self, texts: Sequence[str], policy: Policy) -> Decision: ...


Classify = Callable[[str, str, Sequence[str]], Awaitable[Mapping[str, Sequence[float]]]]
"""``classify(tenant, model, texts)``: the classifier model ``model`` (``owner/name`` or
``owner/name:version``) run on ``texts`` on behalf of ``tenant``; answers its score
outputs by name (category), one score per text. The composition root hands one that
goes through the inference service (``inference.moderation.classifier_of``)."""
