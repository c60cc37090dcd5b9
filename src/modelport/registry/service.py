"""Registry service (to be implemented).

Contract other layers code against (implemented by the registry work):

- ``get_model(owner, name) -> Model`` (NotFound code ``model_not_found``)
- ``get_version(owner, name, version) -> ModelVersion`` (NotFound code ``version_not_found``)
- ``resolve(owner, name, ref) -> ModelVersion``: ``ref`` is a version, or an alias name;
  ``resolve(owner, name, None)`` uses the ``default`` alias (NotFound ``alias_not_found``).
- ``list_versions(owner, name) -> list[ModelVersion]``
"""

from __future__ import annotations

from typing import Any

from modelport.blobs import BlobStore
from modelport.store import Database


class RegistryService:
    def __init__(
        self, database: Database, blobs: BlobStore, *, signer: Any, validator: Any
    ) -> None:
        self.database = database
        self.blobs = blobs
        self.signer = signer
        self.validator = validator
