"""A chat call that names a prompt template through the ``openai`` SDK: the template's
messages, with the call's variables, come before the call's own; the caller must be
allowed to read the template, and a missing variable is the call's 400."""

from __future__ import annotations

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
