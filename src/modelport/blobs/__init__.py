"""Content-addressed blob storage and resumable uploads (the asset layer's bytes)."""

from modelport.blobs.interface import BlobStore, StagingWriter

__all__ = ["BlobStore", "StagingWriter"]
