"""Where the platform may connect on a tenant's behalf (webhooks, remote backends):
``http(s)`` URLs whose host resolves only to public addresses, unless the operator
allow-lists the host (``host`` or ``host:port``), which waives the address rule (and,
where the use requires ``https``, that rule too).

A use checks a URL when it is given (so a bad URL is refused at once) and again before
every connection, and then connects to the very addresses just checked (``Target``,
``pinned_url``): a name that resolved to a public address first and to an internal one
later (DNS rebinding) reaches nothing internal.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

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


class UrlRefused(ValueError):
    """A URL the policy refuses; ``rule`` is one of ``invalid``, ``not_https``,
    ``unresolvable``, ``forbidden_address``."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def forbidden_reason(address: IpAddress) -> str | None:
    """Why nothing may reach ``address`` (None: it is a public address)."""
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
    """Checks URLs against the rules above. ``subject`` and ``setting`` name the use and
    its allow-list setting in refusals."""

    def __init__(
        self,
        allow_hosts: Iterable[str] = (),
        resolver: Resolver = system_resolver,
        *,
        require_https: bool = True,
        subject: str = "webhook",
        setting: str = "webhook_allow_hosts",
    ) -> None:
        self._allow = frozenset(h.strip().lower() for h in allow_hosts if h.strip())
        self._resolve = resolver
        self._require_https = require_https
        self._subject = subject
        self._setting = setting

    def allowed(self, host: str, port: int) -> bool:
        """Whether the operator allow-listed ``host`` (on any port) or ``host:port``."""
        bare = host.lower()
        named = f"[{bare}]" if ":" in bare else bare
        return bare in self._allow or named in self._allow or f"{named}:{port}" in self._allow

    def check(self, url: str) -> Target:
        """The target of ``url``, or ``UrlRefused`` naming the rule it breaks."""
        parts = self._parse(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if self.allowed(host, port):
            return Target(url, host, port, ())
        subject = self._subject
        if self._require_https and parts.scheme != "https":
            raise UrlRefused(
                "not_https",
                f"{subject} URLs must use https (an operator may allow a host for local "
                f"development with the setting {self._setting})",
            )
        try:
            literal: IpAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses: Sequence[str] = [str(literal)]
        else:
            unresolvable = UrlRefused(
                "unresolvable", f"the {subject} host {host!r} does not resolve"
            )
            try:
                addresses = self._resolve(host, port)
            except (OSError, UnicodeError) as exc:
                raise unresolvable from exc
            if not addresses:
                raise unresolvable
        for address in addresses:
            reason = forbidden_reason(ipaddress.ip_address(address))
            if reason is not None:
                raise UrlRefused(
                    "forbidden_address",
                    f"the {subject} host {host!r} is (or resolves to) a {reason} address "
                    f"({address}); {subject}s go only to public addresses unless the "
                    f"operator allows the host with the setting {self._setting}",
                )
        return Target(url, host, port, tuple(addresses))

    def _parse(self, url: str) -> SplitResult:
        subject = self._subject
        if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
            raise UrlRefused("invalid", f"a {subject} URL is at most 2048 characters")
        try:
            parts = urlsplit(url.strip())
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError as exc:
            raise UrlRefused("invalid", f"not a valid URL: {exc}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UrlRefused("invalid", f"a {subject} URL is an absolute http(s) URL")
        if parts.username is not None or parts.password is not None:
            raise UrlRefused("invalid", f"a {subject} URL may not carry credentials")
        if parts.fragment:
            raise UrlRefused("invalid", f"a {subject} URL may not have a fragment")
        return parts


def pinned_url(target: Target, address: str) -> str:
    """``target.url`` with its host replaced by ``address``, so the connection goes
    where the policy checked and not wherever the name resolves by then."""
    parts = urlsplit(target.url)
    host = f"[{address}]" if ":" in address else address
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


@functools.cache
def verified_tls() -> ssl.SSLContext:
    """The context outgoing HTTPS clients verify servers with (httpx's own default),
    loaded once a process: loading the certificate store costs more than the client."""
    import httpx

    return httpx.create_ssl_context()
