"""UploadService on both databases: offsets, races, commits, aborts and expiry."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from modelport.blobs.local import LocalBlobStore
from modelport.blobs.uploads import UploadService
from modelport.errors import InvalidInput, NotFound, PayloadTooLarge, RangeNotSatisfiable
from modelport.store import Database, create_database, upgrade
from modelport.store.tables import BlobOwnerRow, BlobRow
from tests.blobs.support import FakeClock, digest_of, new_upload_id, read_all, stage

TTL = 3600


@pytest.fixture
def database(database_url: str) -> Database:
    if database_url.startswith("sqlite"):
        upgrade(database_url)
    db = create_database(database_url)
    yield db
    db.dispose()


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture
def uploads(database: Database, store: LocalBlobStore, clock: FakeClock) -> UploadService:
    return UploadService(database, store, ttl_seconds=TTL, max_chunk_bytes=1000, clock=clock)


def staged_ids(store: LocalBlobStore) -> set[str]:
    return {s.upload_id for s in store.staged_uploads()}


def recorded_size(database: Database, digest: str) -> int | None:
    with database.transaction() as session:
        row = session.get(BlobRow, digest)
        return None if row is None else row.size


def holders(database: Database, digest: str) -> set[str]:
    with database.transaction() as session:
        return set(
            session.scalars(select(BlobOwnerRow.tenant).where(BlobOwnerRow.digest == digest))
        )


class TestAppend:
    def test_chunks_move_the_offset_and_commit_stores_the_blob(
        self, uploads: UploadService, store: LocalBlobStore, database: Database
    ) -> None:
        upload = uploads.start()
        assert upload.offset == 0
        assert uploads.append(upload.id, 0, [b"hello ", b"wor"]).offset == 9
        assert uploads.append(upload.id, 9, [b"ld"]).offset == 11
        assert uploads.get(upload.id).offset == 11
        blob = uploads.commit(upload.id, digest_of(b"hello world"))
        assert (blob.digest, blob.size) == (digest_of(b"hello world"), 11)
        assert read_all(store, blob.digest) == b"hello world"
        assert recorded_size(database, blob.digest) == 11
        assert staged_ids(store) == set()
        with pytest.raises(NotFound) as info:
            uploads.get(upload.id)
        assert info.value.code == "upload_not_found"

    def test_start_none_appends_where_the_upload_is(self, uploads: UploadService) -> None:
        upload = uploads.start()
        uploads.append(upload.id, None, [b"ab"])
        assert uploads.append(upload.id, None, [b"cd"]).offset == 4

    @pytest.mark.parametrize("start", [0, 3, 100])
    def test_a_wrong_offset_is_refused_with_the_current_one(
        self, uploads: UploadService, store: LocalBlobStore, start: int
    ) -> None:
        upload = uploads.start()
        uploads.append(upload.id, 0, [b"12"])
        with pytest.raises(RangeNotSatisfiable) as info:
            uploads.append(upload.id, start, [b"xyz"])
        assert info.value.code == "offset_mismatch"
        assert info.value.extra["offset"] == 2
        assert uploads.get(upload.id).offset == 2
        uploads.commit(upload.id, digest_of(b"12"))

    def test_a_chunk_over_the_limit_is_refused_and_dropped(
        self, uploads: UploadService, store: LocalBlobStore
    ) -> None:
        upload = uploads.start()
        with pytest.raises(PayloadTooLarge) as info:
            uploads.append(upload.id, 0, [b"x" * 600, b"x" * 600])
        assert info.value.code == "chunk_too_large"
        with pytest.raises(PayloadTooLarge):
            uploads.begin_chunk(upload.id, 0, length=1001)
        assert uploads.get(upload.id).offset == 0
        # Nothing of the refused chunk is left beside the upload's (empty) staged bytes.
        assert [p.name for p in (store.root / "_uploads" / upload.id).iterdir()] == []

    def test_a_chunk_shorter_or_longer_than_declared_is_dropped(
        self, uploads: UploadService
    ) -> None:
        upload = uploads.start()
        for chunks in ([b"abc"], [b"abcdefg"]):
            with pytest.raises(InvalidInput) as info:
                uploads.append(upload.id, 0, chunks, length=5)
            assert info.value.code == "chunk_length_mismatch"
        assert uploads.get(upload.id).offset == 0
        assert uploads.append(upload.id, 0, [b"abcde"], length=5).offset == 5

    def test_of_two_chunks_at_one_offset_only_one_wins(
        self, uploads: UploadService, store: LocalBlobStore
    ) -> None:
        upload = uploads.start()
        first = uploads.begin_chunk(upload.id, 0)
        second = uploads.begin_chunk(upload.id, 0)  # both passed the offset check
        first.write(b"A" * 10)
        second.write(b"B" * 20)
        assert first.finish().offset == 10
        with pytest.raises(RangeNotSatisfiable) as info:
            second.finish()
        assert info.value.code == "offset_mismatch"
        assert info.value.extra["offset"] == 10
        uploads.commit(upload.id, digest_of(b"A" * 10))
        assert read_all(store, digest_of(b"A" * 10)) == b"A" * 10

    def test_racing_threads_leave_exactly_one_chunk(
        self, uploads: UploadService, store: LocalBlobStore
    ) -> None:
        upload = uploads.start()
        contenders = 4
        chunks = [uploads.begin_chunk(upload.id, 0) for _ in range(contenders)]
        for i, chunk in enumerate(chunks):
            chunk.write(bytes([65 + i]) * (i + 1))
        barrier = threading.Barrier(contenders)
        outcomes: list[object] = [None] * contenders

        def finish(i: int) -> None:
            barrier.wait()
            try:
                outcomes[i] = chunks[i].finish().offset
            except RangeNotSatisfiable as exc:
                outcomes[i] = exc.code

        threads = [threading.Thread(target=finish, args=(i,)) for i in range(contenders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [i for i, o in enumerate(outcomes) if isinstance(o, int)]
        assert len(winners) == 1, outcomes
        assert outcomes.count("offset_mismatch") == contenders - 1
        won = bytes([65 + winners[0]]) * (winners[0] + 1)
        assert uploads.get(upload.id).offset == len(won)
        uploads.commit(upload.id, digest_of(won))
        assert read_all(store, digest_of(won)) == won

    def test_unknown_uploads_are_not_found(self, uploads: UploadService) -> None:
        for upload_id in (new_upload_id(), "../../escape", "x"):
            with pytest.raises(NotFound) as info:
                uploads.append(upload_id, 0, [b"x"])
            assert info.value.code == "upload_not_found"


class TestCommit:
    def test_a_wrong_digest_stores_nothing_and_the_upload_can_be_fixed(
        self, uploads: UploadService, store: LocalBlobStore, database: Database
    ) -> None:
        upload = uploads.start()
        uploads.append(upload.id, 0, [b"real bytes"])
        wrong = digest_of(b"claimed bytes")
        with pytest.raises(InvalidInput) as info:
            uploads.commit(upload.id, wrong)
        assert info.value.code == "digest_mismatch"
        assert store.size(wrong) is None
        assert store.size(digest_of(b"real bytes")) is None
        assert recorded_size(database, wrong) is None
        assert uploads.get(upload.id).offset == 10
        assert uploads.commit(upload.id, digest_of(b"real bytes")).size == 10

    def test_an_invalid_digest_is_refused_before_anything_happens(
        self, uploads: UploadService
    ) -> None:
        upload = uploads.start()
        uploads.append(upload.id, 0, [b"abc"])
        for bad in ("sha256:abc", "md5:" + "0" * 32, "SHA256:" + "A" * 64, ""):
            with pytest.raises(InvalidInput) as info:
                uploads.commit(upload.id, bad)
            assert info.value.code == "invalid_digest"
        assert uploads.get(upload.id).offset == 3

    def test_a_second_commit_of_the_same_bytes_does_not_rewrite_the_blob(
        self, uploads: UploadService, store: LocalBlobStore, database: Database
    ) -> None:
        data = os.urandom(500)
        first = uploads.start()
        uploads.append(first.id, 0, [data])
        blob = uploads.commit(first.id, digest_of(data))
        before = store.path(blob.digest).stat()
        second = uploads.start()
        uploads.append(second.id, 0, [data])
        assert uploads.commit(second.id, digest_of(data)) == blob
        after = store.path(blob.digest).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        assert staged_ids(store) == set()
        assert recorded_size(database, blob.digest) == 500

    def test_a_stored_digest_with_a_different_size_is_a_mismatch(
        self, uploads: UploadService, store: LocalBlobStore
    ) -> None:
        first = uploads.start()
        uploads.append(first.id, 0, [b"abc"])
        uploads.commit(first.id, digest_of(b"abc"))
        second = uploads.start()
        uploads.append(second.id, 0, [b"abcd"])
        with pytest.raises(InvalidInput) as info:
            uploads.commit(second.id, digest_of(b"abc"))
        assert info.value.code == "digest_mismatch"
        assert read_all(store, digest_of(b"abc")) == b"abc"

    def test_other_bytes_of_the_same_size_do_not_commit_as_a_stored_digest(
        self, uploads: UploadService, store: LocalBlobStore, database: Database
    ) -> None:
        """The stored copy is no proof: only bytes that hash to the digest make a tenant
        its holder."""
        first = uploads.start("acme")
        uploads.append(first.id, 0, [b"secret"])
        digest = uploads.commit(first.id, digest_of(b"secret")).digest
        forged = uploads.start("globex")
        uploads.append(forged.id, 0, [b"guess!"])
        with pytest.raises(InvalidInput) as info:
            uploads.commit(forged.id, digest)
        assert info.value.code == "digest_mismatch"
        assert uploads.get(forged.id).offset == 6  # kept, to retry or abort
        assert holders(database, digest) == {"acme"}
        assert read_all(store, digest) == b"secret"

    def test_a_commit_records_the_uploading_tenant_as_holder(
        self, uploads: UploadService, store: LocalBlobStore, database: Database
    ) -> None:
        data = os.urandom(100)
        for tenant in ("acme", "globex", "acme", None):
            upload = uploads.start(tenant)
            uploads.append(upload.id, 0, [data])
            uploads.commit(upload.id, digest_of(data))
        # One stored copy; a holder row per tenant; none for the admin key's upload.
        assert holders(database, digest_of(data)) == {"acme", "globex"}
        assert recorded_size(database, digest_of(data)) == 100
        assert staged_ids(store) == set()

    def test_a_committed_upload_cannot_be_appended_to_or_committed_again(
        self, uploads: UploadService
    ) -> None:
        upload = uploads.start()
        uploads.append(upload.id, 0, [b"abc"])
        uploads.commit(upload.id, digest_of(b"abc"))
        with pytest.raises(NotFound):
            uploads.append(upload.id, 3, [b"d"])
        with pytest.raises(NotFound):
            uploads.commit(upload.id, digest_of(b"abc"))


class TestAbortAndExpiry:
    def test_abort_drops_the_upload_and_its_bytes(
        self, uploads: UploadService, store: LocalBlobStore
    ) -> None:
        upload = uploads.start()
        uploads.append(upload.id, 0, [b"abc"])
        uploads.abort(upload.id)
        assert staged_ids(store) == set()
        with pytest.raises(NotFound):
            uploads.get(upload.id)
        with pytest.raises(NotFound):
            uploads.abort(upload.id)
        with pytest.raises(NotFound):
            uploads.commit(upload.id, digest_of(b"abc"))
        assert store.size(digest_of(b"abc")) is None

    def test_an_expired_upload_is_refused_then_swept(
        self, uploads: UploadService, store: LocalBlobStore, clock: FakeClock
    ) -> None:
        stale = uploads.start()
        uploads.append(stale.id, 0, [b"old"])
        clock.advance(TTL / 2)
        fresh = uploads.start()
        uploads.append(fresh.id, 0, [b"new"])
        clock.advance(TTL / 2)
        for call in (
            lambda: uploads.get(stale.id),
            lambda: uploads.append(stale.id, 3, [b"x"]),
            lambda: uploads.commit(stale.id, digest_of(b"old")),
            lambda: uploads.abort(stale.id),
        ):
            with pytest.raises(NotFound) as info:
                call()
            assert info.value.code == "upload_not_found"
        assert staged_ids(store) == {stale.id, fresh.id}
        assert uploads.sweep_expired() == 1
        assert staged_ids(store) == {fresh.id}
        assert uploads.get(fresh.id).offset == 3
        assert uploads.sweep_expired() == 0

    def test_each_chunk_extends_the_lifetime(
        self, uploads: UploadService, clock: FakeClock
    ) -> None:
        upload = uploads.start()
        for _ in range(3):
            clock.advance(TTL - 1)
            uploads.append(upload.id, None, [b"x"])
        assert uploads.sweep_expired() == 0
        assert uploads.get(upload.id).offset == 3
        clock.advance(TTL)
        assert uploads.sweep_expired() == 1

    def test_staged_bytes_without_an_upload_are_swept_once_old(
        self, uploads: UploadService, store: LocalBlobStore, clock: FakeClock
    ) -> None:
        # What a crash between giving up a row and discarding its bytes leaves behind.
        clock.now = datetime.now(UTC)  # staged files carry real modification times
        orphan = new_upload_id()
        stage(store, orphan, 0, b"left behind")
        live = uploads.start()
        uploads.append(live.id, 0, [b"in progress"])
        assert uploads.sweep_expired() == 0  # too recent: it may be a commit in progress
        clock.advance(TTL + 1)
        live_again = uploads.start()
        uploads.append(live_again.id, 0, [b"still going"])
        assert uploads.sweep_expired() == 2  # the orphan, and the now expired upload
        assert staged_ids(store) == {live_again.id}
