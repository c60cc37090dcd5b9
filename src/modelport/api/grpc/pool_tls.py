"""TLS on the pool's gRPC hop (gateway → worker): the PEM material a process holds,
and the gRPC credentials made of it.

A worker with a certificate serves TLS only (a plaintext connection fails its
handshake); with an authority too, it wants a client certificate signed by it (mutual
TLS: a gateway without one, or with one of another authority, is refused). A gateway
with an authority checks each worker's certificate by it, and presents its own
certificate when it has one. The worker token is checked on top, either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc


@dataclass(frozen=True)
class PoolTls:
    """PEM bytes of one process's side of the hop."""

    cert: bytes | None = None
    """Its certificate chain: a worker's server certificate, a gateway's client one."""
    key: bytes | None = None
    """The private key of ``cert``."""
    ca: bytes | None = None
    """The authority the other side's certificate must be signed by."""
    server_name: str = ""
    """A gateway's: the name every worker's certificate must carry (empty: its address)."""


def server_credentials(tls: PoolTls) -> grpc.ServerCredentials:
    """A worker's: its certificate; mutual when it has an authority to check gateways by."""
    if tls.cert is None or tls.key is None:
        raise ValueError("a worker serving TLS needs its certificate and key")
    return grpc.ssl_server_credentials(
        [(tls.key, tls.cert)], root_certificates=tls.ca, require_client_auth=tls.ca is not None
    )


def channel_options(tls: PoolTls | None) -> list[tuple[str, str]]:
    """A gateway's channel options for ``tls``: the name workers' certificates are checked
    for, when one is set."""
    if tls is None or not tls.server_name:
        return []
    return [("grpc.ssl_target_name_override", tls.server_name)]


def channel_credentials(tls: PoolTls) -> grpc.ChannelCredentials:
    """A gateway's: the authority of workers' certificates, and its own certificate."""
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert
    )
