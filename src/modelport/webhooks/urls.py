"""Where webhooks may go: ``https`` URLs whose host resolves only to public addresses,
unless the operator allow-lists the host (``webhook_allow_hosts``: ``host`` or
``host:port``, for local development), which waives both rules.

The check runs when a webhook is given (so a bad URL is refused at submission) and
again before every attempt, and the attempt then connects to the very addresses just
checked (``Target``): a name that resolved to a public address first and to an
internal one later (DNS rebinding) reaches nothing internal.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from modelport.errors import InvalidInput

Resolver = Callable[[str, int], Sequence[str]]
"""Host and port to the IP addresses a connection may reach (``getaddrinfo``)."""

MAX_URL_LENGTH = 2048

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Target:
    """A checked URL and the addresses it may be reached at."""

    url: str
    host: str
    port: int
    addresses: tuple[str, ...]
    """Empty when the host is allow-listed: connect by name."""


def _refuse(url: str, message: str, code: str) -> InvalidInput:
    return InvalidInput(message, code=code, field="webhook.url", url=url[:200])


def forbidden_reason(address: IpAddress) -> str | None:
    """Why no webhook may reach ``address`` (None: it is a public address)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for reason, hit in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved or address.is_unspecified),
    ):
        if hit:
            return reason
    return None if address.is_global else "not global"


class UrlPolicy:
    """Checks webhook URLs against the rules above."""

    def __init__(
        self, allow_hosts: Iterable[str] = (), resolver: Resolver = system_resolver
    ) -> None:
        self._allow = frozenset(h.strip().lower() for h in allow_hosts if h.strip())
        self._resolve = resolver

    def allowed(self, host: str, port: int) -> bool:
        """Whether the operator allow-listed ``host`` (on any port) or ``host:port``."""
        bare = host.lower()
        named = f"[{bare}]" if ":" in bare else bare
        return bare in self._allow or named in self._allow or f"{named}:{port}" in self._allow

    def check(self, url: str) -> Target:
        """The target of ``url``, or ``InvalidInput`` naming which rule it breaks:
        ``webhook_url_invalid``, ``webhook_url_not_https``, ``webhook_url_unresolvable``,
        ``webhook_url_forbidden_address``."""
        parts = _parse(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if self.allowed(host, port):
            return Target(url, host, port, ())
        if parts.scheme != "https":
            raise _refuse(
                url,
                "webhook URLs must use https (an operator may allow a host for local "
                "development with the setting webhook_allow_hosts)",
                "webhook_url_not_https",
            )
        try:
            literal: IpAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses: Sequence[str] = [str(literal)]
        else:
            try:
                addresses = self._resolve(host, port)
            except (OSError, UnicodeError) as exc:
                raise _refuse(
                    url, f"the webhook host {host!r} does not resolve", "webhook_url_unresolvable"
                ) from exc
            if not addresses:
                raise _refuse(
                    url, f"the webhook host {host!r} does not resolve", "webhook_url_unresolvable"
                )
        for address in addresses:
            reason = forbidden_reason(ipaddress.ip_address(address))
            if reason is not None:
                raise _refuse(
                    url,
                    f"the webhook host {host!r} is (or resolves to) a {reason} address "
                    f"({address}); webhooks go only to public addresses",
                    "webhook_url_forbidden_address",
                )
        return Target(url, host, port, tuple(addresses))


def _parse(url: str) -> SplitResult:
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise _refuse(str(url), "a webhook URL is at most 2048 characters", "webhook_url_invalid")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise _refuse(url, f"not a valid URL: {exc}", "webhook_url_invalid") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(url, "a webhook URL is an absolute http(s) URL", "webhook_url_invalid")
    if parts.username is not None or parts.password is not None:
        raise _refuse(url, "a webhook URL may not carry credentials", "webhook_url_invalid")
    if parts.fragment:
        raise _refuse(url, "a webhook URL may not have a fragment", "webhook_url_invalid")
    return parts
