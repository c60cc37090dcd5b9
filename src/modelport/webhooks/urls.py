"""Where webhooks may go: ``https`` URLs whose host resolves only to public addresses,
unless the operator allow-lists the host (``webhook_allow_hosts``: ``host`` or
``host:port``, for local development), which waives both rules.

The rules and the pinning against DNS rebinding are ``modelport.netpolicy``'s (shared
with remote backends); this module names a refusal with the webhook's stable codes
(``webhook_url_invalid``, ``webhook_url_not_https``, ``webhook_url_unresolvable``,
``webhook_url_forbidden_address``).
"""

from __future__ import annotations

from collections.abc import Iterable

from modelport import netpolicy
from modelport.errors import InvalidInput
from modelport.netpolicy import Resolver, Target, system_resolver

__all__ = ["Target", "UrlPolicy"]


class UrlPolicy:
    """Checks webhook URLs against the rules above."""

    def __init__(
        self, allow_hosts: Iterable[str] = (), resolver: Resolver = system_resolver
    ) -> None:
        self._policy = netpolicy.UrlPolicy(allow_hosts, resolver)

    def allowed(self, host: str, port: int) -> bool:
        """Whether the operator allow-listed ``host`` (on any port) or ``host:port``."""
        return self._policy.allowed(host, port)

    def check(self, url: str) -> Target:
        """The target of ``url``, or ``InvalidInput`` naming which rule it breaks."""
        try:
            return self._policy.check(url)
        except netpolicy.UrlRefused as exc:
            raise InvalidInput(
                exc.message, code=f"webhook_url_{exc.rule}", field="webhook.url", url=str(url)[:200]
            ) from exc
