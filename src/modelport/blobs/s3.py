"""Blobs in S3-compatible object storage: ``<prefix>/sha256/ab/<hex>``.

Each published chunk is its own object, ``<prefix>/_uploads/<id>/<offset:020d>``, so
chunks of any size can be staged. A chunk is spooled to a local file while its request
streams in (its length is unknown until then) and put when it is published. Committing
streams the chunks in order through sha256 into a multipart upload to a temporary key,
holding at most one part in memory; only when the digest is proven is the object copied
to its content address, so a wrong blob is never visible there.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from modelport.blobs._common import (
    EMPTY_DIGEST,
    blob_not_found,
    blob_path_parts,
    check_upload_id,
    digest_mismatch,
    staging_lost,
)
from modelport.blobs.interface import BlobStore, StagingWriter
from modelport.blobs.types import StagedUpload
from modelport.errors import RangeNotSatisfiable

MIN_PART = 5 << 20
"""S3's smallest multipart part (all but the last)."""
MAX_PUT = 5 << 30
"""S3's largest single PUT; bigger chunks go through the managed (multipart) transfer."""

_CHUNK_KEY = re.compile(r"^\d{20}$")
_MISSING = ("404", "NoSuchKey", "NotFound")


@dataclass(frozen=True)
class _Part:
    start: int
    size: int
    key: str


class S3BlobStore(BlobStore):
    """Content-addressed objects in one bucket under ``prefix``."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        staging_dir: Path,
        part_size: int = 8 << 20,
        client: Any = None,
    ) -> None:
        if part_size < MIN_PART:
            raise ValueError(f"part_size must be at least {MIN_PART} bytes")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.staging_dir = staging_dir
        self.part_size = part_size
        self._s3 = client or boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        )

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def key(self, digest: str) -> str:
        """The object key of the blob ``digest``."""
        return self._key(*blob_path_parts(digest))

    def _staging_prefix(self, upload_id: str) -> str:
        return self._key("_uploads", check_upload_id(upload_id)) + "/"

    # ---- committed blobs

    def size(self, digest: str) -> int | None:
        try:
            head = self._s3.head_object(Bucket=self.bucket, Key=self.key(digest))
        except ClientError as exc:
            if _is_missing(exc):
                return None
            raise
        return int(head["ContentLength"])

    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        if end is not None and end <= start:
            return iter(())
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key(digest)}
        if start or end is not None:
            request["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            body = self._s3.get_object(**request)["Body"]
        except ClientError as exc:
            if _is_missing(exc):
                raise blob_not_found(digest) from None
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                raise RangeNotSatisfiable(
                    f"bytes {start}- are past the end of {digest}", code="range_not_satisfiable"
                ) from None
            raise
        return _stream(body, self.chunk_size)

    def delete(self, digest: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=self.key(digest))

    # ---- staging

    def open_staging(self, upload_id: str, offset: int) -> StagingWriter:
        key = self._staging_prefix(upload_id) + f"{offset:020d}"
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        return _S3Chunk(self, key, offset)

    def _put(self, key: str, spool: BinaryIO, size: int) -> None:
        spool.seek(0)
        if size <= MAX_PUT:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=spool, ContentLength=size)
        else:
            config = TransferConfig(multipart_chunksize=1 << 30, max_concurrency=2)
            self._s3.upload_fileobj(spool, self.bucket, key, Config=config)

    def _staged_parts(self, upload_id: str) -> list[_Part]:
        prefix = self._staging_prefix(upload_id)
        parts = [
            _Part(int(name), int(obj["Size"]), obj["Key"])
            for obj in self._list(prefix)
            if _CHUNK_KEY.match(name := obj["Key"][len(prefix) :])
        ]
        return sorted(parts, key=lambda p: p.start)

    def _chain(self, upload_id: str, size: int) -> list[_Part]:
        """The published chunks that make up the first ``size`` staged bytes, in order."""
        chain: list[_Part] = []
        position = 0
        for part in self._staged_parts(upload_id):
            if position >= size:
                break  # chunks past the end are leftovers of a failed publish
            if part.start == position:
                chain.append(part)
                position += part.size
        if position != size:
            raise staging_lost(upload_id, size, min(position, size))
        return chain

    def commit_staging(self, upload_id: str, digest: str, size: int) -> bool:
        chain = self._chain(upload_id, size)
        target = self.key(digest)
        if self.size(digest) is not None:
            actual = _digest_of(self._chunks(chain))
            if actual != digest:
                raise digest_mismatch(digest, actual)
            return False
        if size == 0:
            if digest != EMPTY_DIGEST:
                raise digest_mismatch(digest, EMPTY_DIGEST)
            self._s3.put_object(Bucket=self.bucket, Key=target, Body=b"")
            return True
        temporary = self._staging_prefix(upload_id) + f"commit-{secrets.token_hex(8)}"
        try:
            self._assemble(chain, temporary, digest)
            self._s3.copy(
                {"Bucket": self.bucket, "Key": temporary},
                self.bucket,
                target,
                Config=TransferConfig(multipart_threshold=MAX_PUT, max_concurrency=2),
            )
        finally:
            self._s3.delete_object(Bucket=self.bucket, Key=temporary)
        return True

    def _assemble(self, chain: list[_Part], key: str, digest: str) -> None:
        """Multipart-upload the chain to ``key``, proving it hashes to ``digest``."""
        upload_id = self._s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        completed = False
        try:
            hasher = hashlib.sha256()
            etags: list[dict[str, Any]] = []
            pending: list[bytes] = []
            pending_size = 0
            for piece in self._chunks(chain):
                hasher.update(piece)
                pending.append(piece)
                pending_size += len(piece)
                if pending_size >= self.part_size:
                    etags.append(self._upload_part(key, upload_id, len(etags) + 1, pending))
                    pending, pending_size = [], 0
            if pending:
                etags.append(self._upload_part(key, upload_id, len(etags) + 1, pending))
            actual = "sha256:" + hasher.hexdigest()
            if actual != digest:
                raise digest_mismatch(digest, actual)
            self._s3.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": etags}
            )
            completed = True
        finally:
            if not completed:
                self._s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    def _upload_part(
        self, key: str, upload_id: str, number: int, pieces: list[bytes]
    ) -> dict[str, Any]:
        body = b"".join(pieces)
        pieces.clear()
        response = self._s3.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )
        return {"PartNumber": number, "ETag": response["ETag"]}

    def _chunks(self, chain: list[_Part]) -> Iterator[bytes]:
        for part in chain:
            body = self._s3.get_object(Bucket=self.bucket, Key=part.key)["Body"]
            yield from _stream(body, self.chunk_size)

    def discard_staging(self, upload_id: str) -> None:
        prefix = self._staging_prefix(upload_id)
        keys = [obj["Key"] for obj in self._list(prefix)]
        for i in range(0, len(keys), 1000):
            self._s3.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True},
            )
        # A commit that crashed mid-way may have left a multipart upload behind.
        pages = self._s3.get_paginator("list_multipart_uploads")
        for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
            for upload in page.get("Uploads", []):
                self._s3.abort_multipart_upload(
                    Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )

    def staged_uploads(self) -> Iterator[StagedUpload]:
        prefix = self._key("_uploads") + "/"
        latest: dict[str, datetime] = {}
        for obj in self._list(prefix):
            upload_id = obj["Key"][len(prefix) :].split("/", 1)[0]
            modified: datetime = obj["LastModified"]
            if upload_id not in latest or modified > latest[upload_id]:
                latest[upload_id] = modified
        for upload_id, modified in latest.items():
            yield StagedUpload(upload_id, modified)

    def _list(self, prefix: str) -> Iterator[dict[str, Any]]:
        pages = self._s3.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
            yield from page.get("Contents", [])


class _S3Chunk(StagingWriter):
    """A chunk spooled to a local temporary file until it is put as its own object."""

    def __init__(self, store: S3BlobStore, key: str, offset: int) -> None:
        super().__init__(offset)
        self._store = store
        self._key = key
        # Closed (and so removed) by publish or abort, which may be in another call.
        self._spool: BinaryIO | None = tempfile.TemporaryFile(dir=store.staging_dir)  # noqa: SIM115

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert self._spool is not None, "write after publish or abort"
        self._spool.write(data)
        self.size += len(data)

    def publish(self) -> None:
        assert self._spool is not None, "publish after publish or abort"
        self._spool.flush()
        self._store._put(self._key, self._spool, self.size)
        self.abort()

    def abort(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


def _stream(body: Any, chunk_size: int) -> Iterator[bytes]:
    try:
        yield from body.iter_chunks(chunk_size)
    finally:
        body.close()


def _digest_of(chunks: Iterator[bytes]) -> str:
    hasher = hashlib.sha256()
    for chunk in chunks:
        hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


def _is_missing(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return error.get("Code") in _MISSING or status == "404"
