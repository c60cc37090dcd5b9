"""A chat call that names a prompt template through the ``openai`` SDK: the template's
messages, with the call's variables, come before the call's own; the caller must be
allowed to read the template, and a missing variable is the call's 400. A batch line's
chat body names a template the same way, rendered per line under the same rule, and a
line with a bad template fails alone with its code."""

from __future__ import annotations

import json
import time
from typing import Any

import openai
import pytest

from tests.api_openai.conftest import World

MANIFEST = {
    "license": "MIT",
    "messages": [{"role": "system", "content": "answer {{company}} questions briefly"}],
    "variables": [{"name": "company"}],
}


def publish_template(world: World, visibility: str) -> None:
    created = world.admin.post(
        "/api/templates", json={"owner": "acme", "name": "support", "visibility": visibility}
    )
    assert created.status_code == 201, created.text
    published = world.admin.post(
        "/api/templates/acme/support/versions", json={"version": "1", "manifest": MANIFEST}
    )
    assert published.status_code == 201, published.text


def test_a_chat_names_a_template_and_its_variables(world: World) -> None:
    publish_template(world, "public")
    client = world.client()
    answer = client.chat.completions.create(
        model="acme/writer",
        messages=[{"role": "user", "content": "where is my parcel"}],
        max_tokens=20,
        extra_body={"template": {"ref": "acme/support:1", "variables": {"company": "Acme"}}},
    )
    # The toy engine answers the prompt's words: the template's system message, then the user's.
    assert answer.choices[0].message.content == "answer Acme questions briefly where is my parcel"
    assert answer.usage is not None and answer.usage.prompt_tokens == 8
    alone = client.chat.completions.create(
        model="acme/writer",
        messages=[],
        max_tokens=20,
        extra_body={"template": {"ref": "acme/support:1", "variables": {"company": "Globex"}}},
    )
    assert alone.choices[0].message.content == "answer Globex questions briefly"


def test_a_template_the_caller_may_not_read_or_fill_is_refused(world: World) -> None:
    publish_template(world, "private")
    client = world.client()
    for template, status, code in (
        ({"ref": "acme/support:1", "variables": {"company": "Acme"}}, 404, "template_not_found"),
        ({"ref": "acme/support"}, 400, "invalid_template_ref"),
        ({"ref": "acme/support:1", "extra": 1}, 400, "invalid_template_ref"),
    ):
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(
                model="acme/writer", messages=[], max_tokens=5, extra_body={"template": template}
            )
        assert refused.value.status_code == status, refused.value.body
        assert refused.value.code == code
    world.admin.post(
        "/api/grants", json={"namespace": "acme", "grantee": "beta", "model": "support"}
    )
    with pytest.raises(openai.BadRequestError) as missing:
        client.chat.completions.create(
            model="acme/writer",
            messages=[],
            max_tokens=5,
            extra_body={"template": {"ref": "acme/support:1"}},
        )
    assert missing.value.code == "missing_variable"


def test_batch_lines_name_templates_and_a_bad_one_fails_alone(world_on: World) -> None:
    world = world_on
    publish_template(world, "public")
    # A second template private to acme: beta (the batch's submitter) may not read it.
    world.admin.post("/api/templates", json={"owner": "acme", "name": "inside"})
    world.admin.post(
        "/api/templates/acme/inside/versions", json={"version": "1", "manifest": MANIFEST}
    )
    world.credit(10_000_000)
    filled = {"ref": "acme/support:1", "variables": {"company": "Acme"}}
    templates: list[Any] = [
        filled,
        {"ref": "acme/inside:1", "variables": {"company": "Acme"}},
        {"ref": "acme/support:1"},
        {"ref": "acme/support"},
        {"ref": "acme/support:2", "variables": {"company": "Acme"}},
    ]
    lines = [
        {
            "custom_id": f"r{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "acme/writer",
                "messages": [{"role": "user", "content": f"row {i}"}],
                "max_tokens": 20,
                "template": template,
            },
        }
        for i, template in enumerate(templates)
    ]
    client = world.client()
    uploaded = client.files.create(
        file=("t.jsonl", "\n".join(json.dumps(line) for line in lines).encode()), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.05)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed", batch
    assert batch.output_file_id and batch.error_file_id

    def jsonl(file_id: str) -> dict[str, Any]:
        data = client.files.content(file_id).content
        found = [json.loads(line) for line in data.splitlines() if line.strip()]
        return {line["custom_id"]: line for line in found}

    [answered] = jsonl(batch.output_file_id).values()
    assert answered["custom_id"] == "r0"
    content = answered["response"]["body"]["choices"][0]["message"]["content"]
    assert content == "answer Acme questions briefly row 0"
    errors = jsonl(batch.error_file_id)
    assert {k: (v["response"]["status_code"], v["error"]["code"]) for k, v in errors.items()} == {
        "r1": (404, "template_not_found"),
        "r2": (400, "missing_variable"),
        "r3": (400, "invalid_template_ref"),
        "r4": (404, "template_version_not_found"),
    }
