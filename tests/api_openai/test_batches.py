"""OpenAI's Batch API (``/v1/batches``) with the official ``openai`` SDK: a batch file of
chat requests runs to its output and error files; each line is billed once; a cancel
stops a batch between shards; another tenant sees none of it; a run killed between
shards is resumed by another runner with no finished shard redone; a batch its
completion window closes on ends ``expired``, its unrun requests ``batch_expired``
lines of its error file."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from modelport.api.openai.batch_lines import OpenAILineRunner
from modelport.clock import Clock, ManualClock
from modelport.jobs.batch import PublishStage, ShardStage
from modelport.jobs.runner import JobRunner
from modelport.jobs.stages import StageRegistry, StageServices
from modelport.jobs.types import LineOutcome
from modelport.metering.types import Unit, UsageStatus
from modelport.tenancy import Principal
from tests.api_openai.conftest import World, build_world
from tests.databases import migrated_sqlite
from tests.polling import eventually

IN_PRICE, OUT_PRICE = 10, 100
CREDIT = 10_000_000


def _lines(rows: int, model: str = "acme/writer", unknown: int | None = None) -> bytes:
    out = []
    for i in range(rows):
        body = {
            "model": "acme/nope" if i == unknown else model,
            "messages": [{"role": "user", "content": f"row {i}"}],
            "max_tokens": 8,
        }
        out.append(
            {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
    return "\n".join(json.dumps(line) for line in out).encode() + b"\n"


def _priced(world: World, model: str = "acme/writer") -> None:
    for unit, micros in (("input_token", IN_PRICE), ("output_token", OUT_PRICE)):
        world.price(model, unit, micros)
    world.credit(CREDIT)


def _wait(client: openai.OpenAI, batch_id: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "cancelled", "expired"):
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}"
        time.sleep(0.05)


def _jsonl(client: openai.OpenAI, file_id: str) -> list[dict[str, Any]]:
    data = client.files.content(file_id).content
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _batch_calls(world: World) -> Counter[tuple[str, Unit]]:
    """Ledger events of batch lines, by (call id, unit)."""
    return Counter(
        (e.event.prediction_id, e.event.unit)
        for e in world.entries()
        if e.event.prediction_id.startswith("batch:")
    )


def test_a_batch_runs_to_its_output_and_error_files_each_line_billed_once(
    world_on: World,
) -> None:
    world = world_on
    _priced(world)
    client = world.client()
    rows = 7
    uploaded = client.files.create(
        file=("requests.jsonl", _lines(rows, unknown=3)), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"purpose": "test"},
        extra_body={"shard_rows": 3},
    )
    assert batch.id.startswith("batch_") and batch.object == "batch"
    assert batch.metadata == {"purpose": "test"}
    assert batch.input_file_id == uploaded.id
    done = _wait(client, batch.id)
    assert done.status == "completed", done
    assert done.request_counts is not None
    counts = done.request_counts
    assert (counts.total, counts.completed, counts.failed) == (rows, rows - 1, 1)
    assert done.completed_at is not None and done.output_file_id and done.error_file_id

    outputs = {line["custom_id"]: line for line in _jsonl(client, done.output_file_id)}
    assert set(outputs) == {f"r{i}" for i in range(rows) if i != 3}
    answer = outputs["r5"]["response"]
    assert answer["status_code"] == 200 and outputs["r5"]["error"] is None
    assert answer["body"]["object"] == "chat.completion"
    assert answer["body"]["choices"][0]["message"]["content"] == "row 5"
    [error] = _jsonl(client, done.error_file_id)
    assert error["custom_id"] == "r3"
    assert error["response"]["status_code"] == 404
    assert error["response"]["body"]["error"]["code"] == "model_not_found"
    assert error["error"]["code"] == "model_not_found"
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"

    # Each answered line is one metered call, charged once; the balance is the ledger's.
    assert eventually(lambda: len(_batch_calls(world)) == 2 * (rows - 1))
    calls = _batch_calls(world)
    assert set(calls.values()) == {1}
    entries = [e.event for e in world.entries() if e.event.prediction_id.startswith("batch:")]
    assert {e.status for e in entries} == {UsageStatus.SUCCEEDED}
    assert world.balance() == (CREDIT - sum(e.amount_micros for e in entries), 0)

    listed = client.batches.list()
    assert [b.id for b in listed.data] == [batch.id]


def test_a_batch_is_cancelled_between_shards(world: World) -> None:
    client = world.client()
    lines = []
    for i in range(20):
        body = {"model": "acme/counter", "prompt": f"p {i}", "max_tokens": 30}
        lines.append(
            {"custom_id": f"c{i}", "method": "POST", "url": "/v1/completions", "body": body}
        )
    data = "\n".join(json.dumps(line) for line in lines).encode()
    uploaded = client.files.create(file=("slow.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/completions",
        completion_window="24h",
        extra_body={"shard_rows": 4},
    )

    def first_shard_done() -> bool:
        counts = client.batches.retrieve(batch.id).request_counts
        return counts is not None and counts.completed >= 4

    assert eventually(first_shard_done, 30)
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status in ("cancelling", "cancelled")
    ended = _wait(client, batch.id)
    assert ended.status == "cancelled" and ended.cancelled_at is not None
    # What the shards done answered is published, as OpenAI does.
    assert ended.request_counts is not None and 4 <= ended.request_counts.completed < 20
    assert ended.output_file_id is not None and ended.error_file_id is None
    answered = _jsonl(client, ended.output_file_id)
    assert len(answered) == ended.request_counts.completed
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)


def test_refusals_and_another_tenant_sees_nothing(world: World) -> None:
    tenancy = world.services.tenancy
    tenancy.add_member("acme", "app", roles=["consumer"], actor="admin")
    other = world.client(tenancy.create_key("acme", "app", name="t", actor="admin").secret)
    client = world.client()
    uploaded = client.files.create(file=("r.jsonl", _lines(2)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    with pytest.raises(openai.NotFoundError) as missing:
        other.batches.retrieve(batch.id)
    assert missing.value.code == "batch_not_found"
    with pytest.raises(openai.NotFoundError):
        other.batches.cancel(batch.id)
    assert other.batches.list().data == []
    with pytest.raises(openai.NotFoundError) as no_file:
        other.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert no_file.value.code == "file_not_found"
    done = _wait(client, batch.id)
    assert done.output_file_id is not None
    with pytest.raises(openai.NotFoundError):
        other.files.content(done.output_file_id)

    # A body that does not fit: the endpoint, the window, the file's purpose.
    with pytest.raises(openai.BadRequestError) as mismatch:
        client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    assert mismatch.value.code == "endpoint_mismatch"
    with pytest.raises(openai.BadRequestError) as window:
        client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="1h",  # type: ignore[arg-type]
        )
    assert window.value.code == "invalid_completion_window"
    plain = client.files.create(file=("notes.txt", b"hello"), purpose="user_data")
    with pytest.raises(openai.BadRequestError) as purpose:
        client.batches.create(
            input_file_id=plain.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert purpose.value.code == "invalid_input_file"
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_missing")


# ---- a run killed between shards, resumed by another runner
class CountingLines:
    """The /v1 line runner, counting the lines it ran to their end."""

    def __init__(self, inner: OpenAILineRunner) -> None:
        self.inner = inner
        self.ran: Counter[str] = Counter()

    async def run_line(
        self,
        principal: Principal,
        endpoint: str,
        custom_id: str,
        body: dict[str, Any],
        *,
        call_id: str,
        request_id: str,
    ) -> LineOutcome:
        outcome = await self.inner.run_line(
            principal, endpoint, custom_id, body, call_id=call_id, request_id=request_id
        )
        self.ran[custom_id] += 1
        return outcome

    def expired_line(self, custom_id: str, *, call_id: str, request_id: str) -> LineOutcome:
        return self.inner.expired_line(custom_id, call_id=call_id, request_id=request_id)


@pytest.fixture
def idle_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The platform on SQLite whose server runs no jobs (the test drives runners)."""
    built = build_world(
        tmp_path / "home",
        migrated_sqlite(tmp_path / "home.db"),
        monkeypatch,
        job_runner_concurrency=0,
        job_lease_seconds=1.0,
    )
    yield built
    built.server.stop()
    built.services.close()


@pytest.fixture
def idle_world_on(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """``idle_world`` on each database (SQLite, and PostgreSQL where configured)."""
    built = build_world(tmp_path / "home", database_url, monkeypatch, job_runner_concurrency=0)
    yield built
    built.server.stop()
    built.services.close()


def _runner(
    world: World,
    lines: CountingLines,
    on_shard: Callable[[int], None],
    clock: Clock | None = None,
) -> JobRunner:
    services = world.services
    stages = StageRegistry.builtin()
    stage = ShardStage(
        services.database,
        lines,
        now=(clock or services.clock).now,
        on_shard=lambda _, position: on_shard(position),
    )
    stages.register("batch_shards", stage)
    stages.register("batch_publish", PublishStage(services.database, services.files))
    return JobRunner(
        services.job_runner.queue,
        stages,
        StageServices(blobs=services.blobs, inference=services.inference),
        poll_seconds=0.05,
    )


def test_a_batch_killed_between_shards_is_resumed_with_no_shard_redone(
    idle_world: World,
) -> None:
    world = idle_world
    _priced(world, "acme/counter")
    client = world.client()
    rows, size = 24, 4
    data = _lines(rows, model="acme/counter")
    uploaded = client.files.create(file=("r.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"shard_rows": size},
    )
    assert client.batches.retrieve(batch.id).status == "validating"

    first_lines = CountingLines(
        OpenAILineRunner(world.services.inference, world.services.templates)
    )
    checkpointed: list[int] = []
    second_shard = threading.Event()

    def noted(position: int) -> None:
        checkpointed.append(position)
        if len(checkpointed) >= 2:
            second_shard.set()

    first = _runner(world, first_lines, noted)
    first.start()
    assert second_shard.wait(60), "the first runner never finished two shards"
    first.stop(release=False)  # as if killed: its lease is left to expire
    killed_at = list(checkpointed)
    assert len(killed_at) < rows // size
    assert client.batches.retrieve(batch.id).status == "in_progress"

    second_lines = CountingLines(
        OpenAILineRunner(world.services.inference, world.services.templates)
    )
    second = _runner(world, second_lines, checkpointed.append)
    second.start()
    try:
        done = _wait(client, batch.id)
    finally:
        second.stop()
    assert done.status == "completed", done
    assert done.request_counts is not None and done.request_counts.completed == rows
    # Every shard checkpointed once; the second runner ran none the first finished.
    assert sorted(checkpointed) == list(range(rows // size))
    assert len(checkpointed) == len(set(checkpointed))
    finished_first = {f"r{i}" for p in killed_at for i in range(p * size, (p + 1) * size)}
    assert second_lines.ran and not finished_first & set(second_lines.ran)
    outputs = [line["custom_id"] for line in _jsonl(client, done.output_file_id or "")]
    assert sorted(outputs) == sorted(f"r{i}" for i in range(rows))

    # Each line's call is in the ledger once, whichever runner ran it (a line cut by
    # the kill and run again reuses its call's hold); the balance is the ledger's.
    assert eventually(lambda: len({call for call, _ in _batch_calls(world)}) == rows)
    calls = _batch_calls(world)
    assert set(calls.values()) == {1}
    entries = [e.event for e in world.entries() if e.event.prediction_id.startswith("batch:")]
    assert world.balance()[0] == CREDIT - sum(e.amount_micros for e in entries)


def test_a_batch_of_embeddings_answers_as_the_route_does(shared_world: World) -> None:
    client = shared_world.client()
    texts = ["one two", "three", "four five six"]
    lines = [
        {
            "custom_id": f"e{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "acme/embedder", "input": text},
        }
        for i, text in enumerate(texts)
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    uploaded = client.files.create(file=("e.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
    )
    done = _wait(client, batch.id)
    assert done.status == "completed" and done.error_file_id is None
    answers = {
        line["custom_id"]: line["response"]["body"]
        for line in _jsonl(client, done.output_file_id or "")
    }
    for i, text in enumerate(texts):
        direct = client.embeddings.create(model="acme/embedder", input=text)
        assert answers[f"e{i}"]["object"] == "list"
        assert answers[f"e{i}"]["data"][0]["embedding"] == direct.data[0].embedding
        assert answers[f"e{i}"]["usage"]["prompt_tokens"] == direct.usage.prompt_tokens


def test_batches_are_listed_newest_first_by_cursor(world: World) -> None:
    client = world.client()
    uploaded = client.files.create(file=("r.jsonl", _lines(1)), purpose="batch")
    made = [
        client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        ).id
        for _ in range(3)
    ]
    page = client.batches.list(limit=2)
    seen = [b.id for b in page.data]
    assert page.has_more is True and len(seen) == 2
    rest = client.batches.list(limit=2, after=seen[-1])
    assert rest.has_more is False
    seen += [b.id for b in rest.data]
    assert sorted(seen) == sorted(made) and len(set(seen)) == 3
    assert [b.id for b in client.batches.list(limit=10).data] == seen  # newest first
    with pytest.raises(openai.BadRequestError) as limit:
        client.batches.list(limit=0)
    assert limit.value.code == "invalid_limit"


def test_a_batch_past_its_completion_window_expires_with_its_unrun_lines_as_errors(
    idle_world_on: World,
) -> None:
    world = idle_world_on
    _priced(world, "acme/counter")
    client = world.client()
    rows, size = 7, 2
    uploaded = client.files.create(
        file=("r.jsonl", _lines(rows, model="acme/counter", unknown=1)), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"shard_rows": size},
    )
    assert batch.expires_at == batch.created_at + 24 * 3600
    clock = ManualClock()  # the shard stage's: the window closes when the test says
    lines = CountingLines(OpenAILineRunner(world.services.inference, world.services.templates))

    def noted(position: int) -> None:
        if position == 0:
            clock.advance(24 * 3600 + 1)  # after the first shard, the window closes

    runner = _runner(world, lines, noted, clock)
    runner.start()
    try:
        done = _wait(client, batch.id)
    finally:
        runner.stop()
    assert done.status == "expired", done
    assert done.expired_at is not None and done.completed_at is None
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.failed) == (rows, rows - 1)
    assert done.request_counts.completed == 1
    # Only the first shard ran; its answered line is in the output file.
    assert sorted(lines.ran) == ["r0", "r1"]
    assert [line["custom_id"] for line in _jsonl(client, done.output_file_id or "")] == ["r0"]
    errors = {line["custom_id"]: line for line in _jsonl(client, done.error_file_id or "")}
    assert sorted(errors) == [f"r{i}" for i in range(1, rows)]
    assert errors["r1"]["error"]["code"] == "model_not_found"  # it ran, and failed
    for custom_id in (f"r{i}" for i in range(2, rows)):
        line = errors[custom_id]
        assert line["response"] is None and line["id"].startswith("batch_req_")
        assert line["error"]["code"] == "batch_expired"
    # Nothing it did not run is billed.
    job_id = world.services.batches.get(None, batch.id).job_id
    assert eventually(lambda: len({call for call, _ in _batch_calls(world)}) == 1)
    assert {call for call, _ in _batch_calls(world)} == {f"batch:{job_id}:r0"}


def test_a_batch_whose_shards_expired_before_a_crash_still_ends_expired(
    idle_world: World,
) -> None:
    world = idle_world
    _priced(world, "acme/counter")
    client = world.client()
    uploaded = client.files.create(
        file=("r.jsonl", _lines(4, model="acme/counter")), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"shard_rows": 2},
    )
    clock = ManualClock()
    crashed: list[int] = []

    def noted(position: int) -> None:
        if position == 0:
            clock.advance(24 * 3600 + 1)
        elif not crashed:
            # The last shard expired and is checkpointed; the attempt dies before the
            # stage is recorded done, and the retry finds nothing left to run.
            crashed.append(position)
            raise RuntimeError("the runner died here")

    lines = CountingLines(OpenAILineRunner(world.services.inference, world.services.templates))
    runner = _runner(world, lines, noted, clock)
    runner.start()
    try:
        done = _wait(client, batch.id)
    finally:
        runner.stop()
    assert crashed == [1]
    assert done.status == "expired", done
    assert [line["custom_id"] for line in _jsonl(client, done.output_file_id or "")] == ["r0", "r1"]
    errors = _jsonl(client, done.error_file_id or "")
    assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [
        ("r2", "batch_expired"),
        ("r3", "batch_expired"),
    ]
