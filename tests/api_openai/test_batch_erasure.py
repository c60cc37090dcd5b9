"""The right to deletion over a batch (``jobs.erasure``): its input file, its output and
error files and its shards' blobs go, through the official ``openai`` SDK's view; the
batch and its job stay, with their counts and what the ledger charged."""

from __future__ import annotations

import openai
import pytest

from tests.api_openai.conftest import World
from tests.api_openai.test_batches import _lines, _priced, _wait


def test_erasing_a_tenants_data_takes_a_batchs_files_and_keeps_its_record(world: World) -> None:
    _priced(world)
    client = world.client()
    uploaded = client.files.create(file=("requests.jsonl", _lines(4, unknown=1)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"shard_rows": 2},
    )
    done = _wait(client, batch.id)
    assert done.status == "completed" and done.output_file_id and done.error_file_id
    files = [uploaded.id, done.output_file_id, done.error_file_id]
    digests = {
        client.files.retrieve(file_id).id: world.services.files.get("beta", file_id).digest
        for file_id in files
    }
    charged = len(world.entries())
    assert charged > 0

    answer = world.admin.delete("/api/tenants/beta/data")
    assert answer.status_code == 200, answer.text
    assert answer.json()["jobs"] == 1

    for file_id in files:
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(file_id)
    store = world.services.blob_store
    assert all(store.size(digest) is None for digest in digests.values())
    kept = client.batches.retrieve(batch.id)
    assert kept.status == "completed" and kept.request_counts is not None
    assert (kept.request_counts.total, kept.request_counts.failed) == (4, 1)
    assert kept.output_file_id is None and kept.error_file_id is None
    assert len(world.entries()) == charged
