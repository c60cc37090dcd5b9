"""One settings object, read from ``MODELPORT_*`` environment variables.

Settings are validated once at start and frozen; each component receives only
the values it needs from ``modelport.app``.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIN_ADMIN_KEY_LENGTH = 24


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("modelport", appauthor=False))


class Settings(BaseSettings):
    """Server-wide settings. Every field maps to ``MODELPORT_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MODELPORT_", frozen=True, extra="ignore")

    home: Path = Field(default_factory=default_home)
    """Folder of the embedded state: SQLite database, blobs, staging, keys."""

    database_url: str | None = None
    """SQLAlchemy URL of the metadata database; default a SQLite file under ``home``."""

    blob_url: str | None = None
    """Where blobs live: ``s3://bucket/prefix`` for S3-compatible storage; default ``home/blobs``."""

    s3_endpoint_url: str | None = None
    """Endpoint of an S3-compatible service (MinIO, Ceph...); default AWS."""

    s3_region: str = "us-east-1"

    admin_key: str = ""
    """The operator's break-glass credential for ``/api`` (at least 24 characters)."""

    signing_key_path: Path | None = None
    """Ed25519 private key (PEM) that signs manifests; default ``home/keys/signing.pem``."""

    upload_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    """An upload untouched this long expires and its staged bytes are removed."""

    max_chunk_bytes: int = Field(default=1 << 30, gt=0)
    """Largest single chunk accepted by ``PATCH /api/uploads/{id}``."""

    verify_below_bytes: int = Field(default=64 << 20, ge=0)
    """Blobs up to this size are verified against their digest before they are served."""

    validation_timeout_seconds: float = Field(default=120.0, gt=0)
    validation_memory_bytes: int = Field(default=4 << 30, gt=0)

    auto_migrate: bool | None = None
    """Apply migrations at start; default on for SQLite (embedded), off otherwise."""

    @field_validator("home")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'modelport.db'}"

    @property
    def is_embedded_database(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")

    @property
    def should_auto_migrate(self) -> bool:
        return self.is_embedded_database if self.auto_migrate is None else self.auto_migrate

    @property
    def resolved_signing_key_path(self) -> Path:
        return self.signing_key_path or self.home / "keys" / "signing.pem"
