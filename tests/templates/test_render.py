"""A template's manifest refuses placeholders it does not declare and variables it does
not use; rendering puts values in literally, once, and refuses what does not fit."""

from __future__ import annotations

from typing import Any

import pytest

from modelport.errors import InvalidInput
from modelport.templates.render import render
from modelport.templates.types import parse_template_manifest, template_digest


def manifest(**fields: Any) -> Any:
    doc = {
        "license": "MIT",
        "messages": [
            {"role": "system", "content": "You answer for {{company}} in {{ tone }} words."},
            {"role": "user", "content": "{{question}}"},
        ],
        "variables": [
            {"name": "company"},
            {"name": "tone", "default": "kind"},
            {"name": "question", "max_length": 40},
        ],
        **fields,
    }
    return parse_template_manifest(doc)


def test_values_and_defaults_are_put_in() -> None:
    messages = render(manifest(), {"company": "Acme", "question": "Where is my parcel?"})
    assert messages == [
        {"role": "system", "content": "You answer for Acme in kind words."},
        {"role": "user", "content": "Where is my parcel?"},
    ]
    assert render(manifest(), {"company": "Acme", "tone": "few", "question": 42})[0] == {
        "role": "system",
        "content": "You answer for Acme in few words.",
    }


def test_a_value_is_inserted_as_text_and_never_read_again() -> None:
    sneaky = "{{company}} {% import os %} ${HOME}"
    [_, user] = render(manifest(), {"company": "Acme", "question": sneaky})
    assert user["content"] == sneaky


@pytest.mark.parametrize(
    ("values", "code"),
    [
        ({"question": "?"}, "missing_variable"),
        ({"company": "Acme", "question": "?", "extra": "x"}, "unknown_variable"),
        ({"company": ["Acme"], "question": "?"}, "invalid_variable"),
        ({"company": True, "question": "?"}, "invalid_variable"),
        ({"company": "Acme", "question": "x" * 41}, "invalid_variable"),
    ],
)
def test_values_that_do_not_fit_are_refused(values: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        render(manifest(), values)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"variables": [{"name": "company"}, {"name": "tone"}]}, "undeclared variables: question"),
        (
            {
                "variables": [
                    {"name": "company"},
                    {"name": "tone"},
                    {"name": "question"},
                    {"name": "x"},
                ]
            },
            "no message uses: x",
        ),
        ({"messages": []}, "messages"),
        ({"variables": [{"name": "1bad"}]}, "variables.0.name"),
        ({"prompt": "free-form"}, "prompt"),
    ],
)
def test_a_manifest_that_does_not_hold_together_is_refused(
    fields: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        manifest(**fields)
    assert refused.value.code == "invalid_template_manifest"
    assert where in refused.value.message


def test_the_digest_is_the_canonical_manifest_s() -> None:
    assert template_digest(manifest()) == template_digest(manifest())
    assert template_digest(manifest()) != template_digest(manifest(description="other"))
