"""Moving blobs between local files and a server: digesting, resumable chunked uploads and
verified, resumable downloads. Used by ``Client`` and the CLI's ``push`` and ``pull``.

Neither direction holds a whole file in memory: files are read and written in pieces of
``PIECE`` bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import orjson
import platformdirs

from modelport.client.errors import ClientError, error_from_response

PIECE = 1 << 20

Advance = Callable[[int], None]
"""Told how many more bytes were done (drives a progress bar)."""


class TransferError(ClientError):
    """A transfer failed in a way the user must hear about; the message says what to do."""


@dataclass(frozen=True)
class LocalFile:
    """A file of a model package: its manifest path, where it is, size and digest."""

    path: str
    source: Path
    size: int
    digest: str


_SIZE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.IGNORECASE)
_FACTORS: dict[str, int] = {"": 1, "b": 1} | {
    unit: base**power
    for power, prefix in enumerate("kmgt", start=1)
    for unit, base in ((prefix, 1000), (prefix + "b", 1000), (prefix + "ib", 1024))
}


def parse_size(text: str) -> int:
    """``16MiB``, ``512KiB``, ``1GB``, ``1048576`` → bytes."""
    match = _SIZE.match(text)
    factor = _FACTORS.get(match[2].lower()) if match else None
    if match is None or factor is None:
        raise ValueError(f"not a size: {text!r} (try 16MiB)")
    return int(match[1]) * factor


def digest_file(path: Path, advance: Advance) -> str:
    hasher = hashlib.sha256()
    buffer = bytearray(PIECE)
    view = memoryview(buffer)
    with path.open("rb") as handle:
        while n := handle.readinto(view):
            hasher.update(view[:n])
            advance(n)
    return "sha256:" + hasher.hexdigest()


class UploadState:
    """Where each unfinished upload is on which server, kept across runs in a small file.

    Entries are hints: a location the server no longer knows is simply forgotten.
    """

    def __init__(self, path: Path | None = None) -> None:
        cache = Path(platformdirs.user_cache_dir("modelport", appauthor=False))
        self.path = path or cache / "uploads.json"

    def _load(self) -> dict[str, str]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        os.replace(temporary, self.path)

    def get(self, server: str, digest: str) -> str | None:
        return self._load().get(f"{server}|{digest}")

    def put(self, server: str, digest: str, location: str) -> None:
        data = self._load()
        data[f"{server}|{digest}"] = location
        self._save(data)

    def forget(self, server: str, digest: str) -> None:
        data = self._load()
        if data.pop(f"{server}|{digest}", None) is not None:
            self._save(data)


def problem(response: httpx.Response) -> str:
    """A server error as one line: its detail and code."""
    return error_from_response(response).message


class Uploader:
    """Uploads blobs the server lacks, in chunks, resuming uploads a previous run began."""

    def __init__(
        self, http: httpx.Client, server: str, state: UploadState, chunk_size: int
    ) -> None:
        self.http = http
        self.server = server
        self.state = state
        self.chunk_size = chunk_size

    def has(self, digest: str) -> bool:
        response = self.http.head(f"/api/blobs/{digest}")
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise TransferError(f"cannot check blob {digest}: HTTP {response.status_code}")
        return True

    def upload(self, file: LocalFile, advance: Advance) -> None:
        """Upload ``file`` from wherever an earlier run left it; commit it as its digest."""
        location, offset = self._resume_or_start(file.digest)
        advance(offset)
        refused = 0
        try:
            with file.source.open("rb") as handle:
                while offset < file.size:
                    moved, accepted = self._send_chunk(handle, location, offset, file)
                    advance(moved - offset)
                    offset = moved
                    refused = 0 if accepted else refused + 1
                    if refused > 5:
                        raise TransferError(
                            f"upload of {file.path} keeps losing its offset; is another push "
                            "of the same file running?"
                        )
        except httpx.TransportError as exc:
            raise TransferError(
                f"upload of {file.path} broke off ({exc}); run the same command again to "
                "resume where it stopped"
            ) from None
        response = self.http.put(location, params={"digest": file.digest})
        if response.status_code == 400 and response.json().get("code") == "digest_mismatch":
            self.http.delete(location)
            self.state.forget(self.server, file.digest)
            raise TransferError(f"{file.path} changed while it was being uploaded; push again")
        if response.status_code != 201:
            raise TransferError(f"commit of {file.path} failed: {problem(response)}")
        self.state.forget(self.server, file.digest)

    def _resume_or_start(self, digest: str) -> tuple[str, int]:
        location = self.state.get(self.server, digest)
        if location is not None:
            response = self.http.get(location)
            if response.status_code == 200:
                return location, int(response.json()["offset"])
            self.state.forget(self.server, digest)
        response = self.http.post("/api/uploads")
        if response.status_code != 202:
            raise TransferError(f"cannot start an upload: {problem(response)}")
        location = response.headers["location"]
        self.state.put(self.server, digest, location)
        return location, 0

    def _send_chunk(
        self, handle: BinaryIO, location: str, offset: int, file: LocalFile
    ) -> tuple[int, bool]:
        """Send the chunk at ``offset``; the server's offset after it, and if it was taken."""
        length = min(self.chunk_size, file.size - offset)
        handle.seek(offset)
        response = self.http.patch(
            location,
            content=_pieces(handle, length),
            headers={
                "Content-Range": f"{offset}-{offset + length - 1}",
                "Content-Length": str(length),
                "Content-Type": "application/octet-stream",
            },
        )
        if response.status_code == 202:
            return int(response.headers["upload-offset"]), True
        if response.status_code == 416 and "upload-offset" in response.headers:
            # Our last chunk landed but its answer was lost, or another run moved it on.
            return int(response.headers["upload-offset"]), False
        raise TransferError(f"upload of {file.path} failed: {problem(response)}")


def _pieces(handle: BinaryIO, length: int) -> Iterator[bytes]:
    remaining = length
    while remaining:
        data = handle.read(min(PIECE, remaining))
        if not data:
            raise TransferError("the file shrank while it was being uploaded; push again")
        remaining -= len(data)
        yield data


def download(http: httpx.Client, digest: str, size: int, dest: Path, advance: Advance) -> None:
    """Fetch a blob to ``dest``, verified; resume a partial file an earlier run left.

    Bytes go to ``.<name>.partial`` beside ``dest`` and are renamed into place only once
    the whole file hashes to ``digest``; on a mismatch the partial file is removed.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.partial")
    have = partial.stat().st_size if partial.exists() else 0
    if have >= size:  # complete (a run stopped before renaming it) or bigger than it can be
        hasher = _hash_file(partial, have)
        if have == size and "sha256:" + hasher.hexdigest() == digest:
            advance(have)
            os.replace(partial, dest)
            return
        have = 0
    try:
        hasher, have = _fetch(http, digest, partial, have, advance)
    except httpx.TransportError as exc:
        raise TransferError(
            f"download of {dest.name} broke off ({exc}); run the same command again to resume"
        ) from None
    actual = "sha256:" + hasher.hexdigest()
    if actual != digest or have != size:
        partial.unlink(missing_ok=True)
        raise TransferError(
            f"{dest.name}: digest mismatch: expected {digest} ({size} bytes), got {actual} "
            f"({have} bytes); the file was not kept"
        )
    os.replace(partial, dest)


def _fetch(
    http: httpx.Client, digest: str, partial: Path, have: int, advance: Advance
) -> tuple[Any, int]:
    """Append the rest of the blob to ``partial``; its hasher and size after."""
    headers = {"Range": f"bytes={have}-"} if have else {}
    with http.stream("GET", f"/api/blobs/{digest}", headers=headers) as response:
        if response.status_code == 200:
            have = 0  # the whole blob is coming
        elif response.status_code != 206:
            response.read()
            raise TransferError(f"download of {digest} failed: {problem(response)}")
        hasher = _hash_file(partial, have)
        advance(have)
        with partial.open("r+b" if have else "wb") as out:
            out.seek(have)
            out.truncate()
            for data in response.iter_bytes(PIECE):
                out.write(data)
                hasher.update(data)
                have += len(data)
                advance(len(data))
    return hasher, have


def _hash_file(path: Path, size: int) -> Any:
    """A sha256 fed the first ``size`` bytes of ``path``."""
    hasher = hashlib.sha256()
    if size:
        with path.open("rb") as handle:
            remaining = size
            while remaining and (data := handle.read(min(PIECE, remaining))):
                hasher.update(data)
                remaining -= len(data)
    return hasher
