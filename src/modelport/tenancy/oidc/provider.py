"""The OpenID provider as this platform sees it: its discovery document and its keys.

``Provider.metadata()`` reads ``<issuer>/.well-known/openid-configuration`` once (and
again after a failure). ``KeyStore`` holds the provider's JWKS: fetched on first use, and
again when a token names a key id it does not hold (the provider rotated its keys), at
most once per ``min_refresh_seconds`` so forged key ids cannot make it hammer the
provider. Every failure to reach the provider is ``Unavailable`` (503), never a 500.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from modelport.errors import Unavailable


def provider_unavailable(what: str, exc: Exception | None = None) -> Unavailable:
    detail = f": {type(exc).__name__}" if exc is not None else ""
    return Unavailable(
        f"the OpenID provider's {what} could not be read{detail}", code="oidc_unavailable"
    )


@dataclass(frozen=True)
class ProviderMetadata:
    """The parts of the discovery document this platform uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


class Provider:
    """Reads the provider's discovery document over ``http`` (thread-safe; cached)."""

    def __init__(self, issuer: str, http: httpx.Client) -> None:
        self.issuer = issuer.rstrip("/")
        self.http = http
        self._metadata: ProviderMetadata | None = None
        self._lock = threading.Lock()

    def metadata(self) -> ProviderMetadata:
        with self._lock:
            if self._metadata is None:
                self._metadata = self._discover()
            return self._metadata

    def _discover(self) -> ProviderMetadata:
        document = self.get_json(f"{self.issuer}/.well-known/openid-configuration", "discovery")
        try:
            metadata = ProviderMetadata(
                issuer=str(document["issuer"]),
                authorization_endpoint=str(document["authorization_endpoint"]),
                token_endpoint=str(document["token_endpoint"]),
                jwks_uri=str(document["jwks_uri"]),
            )
        except KeyError as exc:
            raise provider_unavailable("discovery document", exc) from exc
        # OpenID Connect Discovery 1.0, 4.3: the document must name the issuer it was
        # read from, or an attacker's document could point at its own keys.
        if metadata.issuer.rstrip("/") != self.issuer:
            raise Unavailable(
                f"the provider's discovery document names issuer {metadata.issuer!r}, "
                f"not the configured {self.issuer!r}",
                code="oidc_unavailable",
            )
        return metadata

    def get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            response = self.http.get(url)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise provider_unavailable(what, exc) from exc
        if not isinstance(body, dict):
            raise provider_unavailable(what)
        return body


class KeyStore:
    """The provider's signing keys, refetched on an unknown key id at a bounded rate."""

    def __init__(
        self,
        fetch: Callable[[], dict[str, Any]],
        *,
        min_refresh_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._fetch = fetch
        self._min_refresh = min_refresh_seconds
        self._clock = clock
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()
        self.fetches = 0
        """How many times the JWKS was read (operators' and tests' view of rotation)."""

    def cached(self, kid: str | None) -> KeySet | None:
        """The key set when it can answer for ``kid`` without a fetch; else None."""
        keys = self._keys
        if keys is None or (kid is not None and not _holds(keys, kid)):
            return None
        return keys

    def keys_for(self, kid: str | None) -> KeySet:
        """The key set, fetched first if it is not held yet or lacks ``kid`` (and the
        last fetch is old enough)."""
        with self._lock:
            keys = self._keys
            stale = keys is None or (kid is not None and not _holds(keys, kid))
            if stale and (keys is None or self._clock() - self._fetched_at >= self._min_refresh):
                keys = self._load()
            assert keys is not None
            return keys

    def _load(self) -> KeySet:
        document = self._fetch()
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise provider_unavailable("JWKS", exc) from exc
        self._keys = keys
        self._fetched_at = self._clock()
        self.fetches += 1
        return keys


def _holds(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)
