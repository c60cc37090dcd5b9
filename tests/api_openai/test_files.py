"""OpenAI's Files API (``/v1/files``) with the official ``openai`` SDK: a tenant uploads a
batch's requests, lists, reads and deletes its files; a batch file that breaks the
format is refused whole, naming the line; another tenant sees none of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from modelport.app import Services
from tests.conftest import ADMIN_KEY, LiveServer


@dataclass
class Tenants:
    acme: openai.OpenAI
    beta: openai.OpenAI
    url: str
    acme_key: str


def _client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@pytest.fixture
def tenants(live_server: LiveServer, services: Services) -> Iterator[Tenants]:
    keys = {}
    for slug in ("acme", "beta"):
        services.tenancy.create_tenant(slug, actor="admin")
        services.tenancy.add_member(slug, "app", roles=["consumer"], actor="admin")
        keys[slug] = services.tenancy.create_key(slug, "app", name="t", actor="admin").secret
    acme, beta = _client(live_server.url, keys["acme"]), _client(live_server.url, keys["beta"])
    yield Tenants(acme, beta, live_server.url, keys["acme"])
    acme.close()
    beta.close()


def batch_file(rows: int, url: str = "/v1/chat/completions") -> bytes:
    lines = []
    for i in range(rows):
        body = {"model": "acme/writer", "messages": [{"role": "user", "content": f"n {i}"}]}
        lines.append({"custom_id": f"row-{i}", "method": "POST", "url": url, "body": body})
    return "\n".join(json.dumps(line) for line in lines).encode() + b"\n"


def test_a_batch_file_is_uploaded_listed_read_and_deleted(tenants: Tenants) -> None:
    data = batch_file(3)
    uploaded = tenants.acme.files.create(file=("requests.jsonl", data), purpose="batch")
    assert uploaded.id.startswith("file-")
    assert (uploaded.filename, uploaded.bytes, uploaded.purpose) == (
        "requests.jsonl",
        len(data),
        "batch",
    )
    assert uploaded.status == "processed"
    assert tenants.acme.files.retrieve(uploaded.id).bytes == len(data)
    assert tenants.acme.files.content(uploaded.id).content == data
    listed = tenants.acme.files.list(purpose="batch")
    assert [f.id for f in listed.data] == [uploaded.id]
    deleted = tenants.acme.files.delete(uploaded.id)
    assert deleted.deleted is True and deleted.id == uploaded.id
    with pytest.raises(openai.NotFoundError) as gone:
        tenants.acme.files.retrieve(uploaded.id)
    assert gone.value.code == "file_not_found"


def test_listing_pages_newest_first_by_cursor(tenants: Tenants) -> None:
    made = [
        tenants.acme.files.create(file=(f"f{i}.txt", f"data {i}".encode()), purpose="user_data")
        for i in range(5)
    ]
    page = tenants.acme.files.list(limit=2)
    seen = [f.id for f in page.data]
    while page.has_more:
        page = tenants.acme.files.list(limit=2, after=seen[-1])
        seen += [f.id for f in page.data]
    assert sorted(seen) == sorted(f.id for f in made) and len(seen) == 5
    oldest_first = tenants.acme.files.list(order="asc", limit=10)
    assert [f.id for f in oldest_first.data] == list(reversed(seen))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"\n', "line 1"),
        (batch_file(2)[:-1] + b"\n[1, 2]\n", "line 3 of the batch file: not a JSON object"),
        (batch_file(1).replace(b'"POST"', b'"GET"'), "method must be POST"),
        (batch_file(1, url="/v2/models/x/infer"), "url must be one of"),
        (batch_file(2) + batch_file(1), "custom_id 'row-0' is used twice"),
        (batch_file(1) + batch_file(2, url="/v1/embeddings")[-200:], "line 2"),
        (b"\n\n", "holds no request"),
    ],
)
def test_a_batch_file_that_breaks_the_format_is_refused_whole(
    tenants: Tenants, services: Services, data: bytes, problem: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        tenants.acme.files.create(file=("bad.jsonl", data), purpose="batch")
    assert refused.value.code == "invalid_batch_file"
    assert problem in refused.value.message
    assert tenants.acme.files.list().data == []  # nothing stored


def test_unknown_purposes_and_missing_parts_are_refused(tenants: Tenants) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        tenants.acme.files.create(file=("a.jsonl", b"x"), purpose="fine-tune")
    assert refused.value.code == "unsupported_purpose"
    bare = httpx.post(
        f"{tenants.url}/v1/files",
        headers={"Authorization": f"Bearer {tenants.acme_key}"},
        data={"purpose": "batch"},
        files={"other": ("a", b"x")},
    )
    assert bare.status_code == 400
    assert bare.json()["error"]["code"] == "missing_file"


def test_another_tenant_sees_none_of_its_files(tenants: Tenants) -> None:
    mine = tenants.acme.files.create(file=("r.jsonl", batch_file(1)), purpose="batch")
    assert tenants.beta.files.list().data == []
    for call in (tenants.beta.files.retrieve, tenants.beta.files.content):
        with pytest.raises(openai.NotFoundError) as hidden:
            call(mine.id)
        assert hidden.value.code == "file_not_found"
    with pytest.raises(openai.NotFoundError):
        tenants.beta.files.delete(mine.id)
    assert tenants.acme.files.retrieve(mine.id).id == mine.id  # still there


def test_the_same_bytes_twice_are_two_files_over_one_blob(
    tenants: Tenants, services: Services
) -> None:
    first = tenants.acme.files.create(file=("a.jsonl", batch_file(2)), purpose="batch")
    second = tenants.acme.files.create(file=("b.jsonl", batch_file(2)), purpose="batch")
    assert first.id != second.id
    stored = [services.files.get("acme", f.id) for f in (first, second)]
    assert stored[0].digest == stored[1].digest and stored[0].lines == 2
    assert services.blobs.held_by("acme", stored[0].digest)


def test_a_file_above_the_limit_is_refused(live_server: LiveServer, services: Services) -> None:
    services.tenancy.create_tenant("acme", actor="admin")
    services.tenancy.add_member("acme", "app", roles=["consumer"], actor="admin")
    key = services.tenancy.create_key("acme", "app", name="t", actor="admin").secret
    services.files.max_bytes = 1000
    client = _client(live_server.url, key)
    with pytest.raises(openai.APIStatusError) as refused:
        client.files.create(file=("big.txt", b"x" * 1001), purpose="user_data")
    assert refused.value.status_code == 413
    assert refused.value.code == "file_too_large"
    client.close()


def test_the_admin_key_has_no_tenant_to_hold_files(live_server: LiveServer) -> None:
    client = _client(live_server.url, ADMIN_KEY)
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.list()
    assert refused.value.code == "tenant_required"
    client.close()
