"""Blob-layer fixtures: an S3-compatible server (moto, real HTTP on loopback), a store of
each kind, a settable clock, and helpers to drive uploads."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from modelport.blobs.interface import BlobStore
from modelport.blobs.local import LocalBlobStore
from modelport.blobs.s3 import S3BlobStore
from tests.blobs.support import FakeClock

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free loopback port, shared by the session."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    # Keep a developer's real AWS configuration out of the way.
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def s3_bucket(s3_endpoint: str, s3_env: None) -> str:
    """A fresh, empty bucket."""
    name = f"mp-{secrets.token_hex(6)}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_client(s3_endpoint: str, s3_env: None) -> Any:
    """A plain client to inspect or tamper with objects behind the store's back."""
    return boto3.client("s3", endpoint_url=s3_endpoint)


def make_s3_store(endpoint: str, bucket: str, tmp_path: Path) -> S3BlobStore:
    return S3BlobStore(
        bucket=bucket,
        prefix="blobs/test",
        endpoint_url=endpoint,
        staging_dir=tmp_path / "staging",
        part_size=5 << 20,
    )


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """Each test using this runs against the local folder store and the S3 store."""
    if request.param == "local":
        return LocalBlobStore(tmp_path / "blobs")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return make_s3_store(endpoint, bucket, tmp_path)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
