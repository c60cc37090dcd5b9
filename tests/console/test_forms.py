"""The playground's request from the form, the price per call, and the example calls:
pure functions, checked on the shapes and values a person types."""

from __future__ import annotations

import shlex

import pytest

from modelport.console.playground import (
    BAD_INPUT,
    form_fields,
    price_of_tokens_micros,
    price_per_call_micros,
    request_body,
)
from modelport.console.snippets import snippets
from modelport.errors import InvalidInput

SPEC = [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]


def body(value: str, spec: list[dict[str, object]] = SPEC) -> dict[str, object]:
    return request_body(form_fields(spec, None, {"input:x": value}))


def test_a_variable_dimension_is_sized_to_the_values() -> None:
    assert body("1,2,3,4\n5,6,7,8") == {
        "inputs": [
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]}
        ]
    }
    fixed = [{"name": "x", "datatype": "INT64", "shape": [3]}]
    assert body("1, 2, 3", fixed)["inputs"][0]["data"] == [1, 2, 3]  # type: ignore[index]
    flags = [{"name": "x", "datatype": "BOOL", "shape": [-1]}]
    assert body("true, 0, False", flags)["inputs"][0]["data"] == [True, False, False]  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "spec"),
    [
        ("1,2,3", SPEC),  # not a multiple of 4
        ("", SPEC),
        ("1,2,x,4", SPEC),
        ("inf,1,2,3", SPEC),
        ("1.5", [{"name": "x", "datatype": "INT32", "shape": [1]}]),
        ("1,2", [{"name": "x", "datatype": "FP32", "shape": [3]}]),
        ("maybe", [{"name": "x", "datatype": "BOOL", "shape": [1]}]),
    ],
)
def test_bad_values_are_refused_with_a_stable_code(
    value: str, spec: list[dict[str, object]]
) -> None:
    with pytest.raises(InvalidInput) as refused:
        body(value, spec)
    assert refused.value.code == BAD_INPUT and refused.value.extra["field"] == "x"


def test_the_form_is_prefilled_from_the_example_then_from_what_was_posted() -> None:
    example = {"inputs": [{"name": "x", "data": [1, 2, 3, 4]}]}
    assert form_fields(SPEC, example)[0].value == "1, 2, 3, 4"
    assert form_fields(SPEC, example, {"input:x": "9"})[0].value == "9"
    assert form_fields(SPEC, None)[0].shape_text == "[any, 4]"


def test_the_price_per_call_prefers_the_versions_own_rule() -> None:
    rules = [
        {"unit": "prediction", "version": None, "unit_price_micros": 3000, "per_units": 1,
         "effective_from": "2026-01-01"},
        {"unit": "prediction", "version": "2", "unit_price_micros": 5000, "per_units": 1,
         "effective_from": "2026-01-01"},
        {"unit": "output_token", "version": None, "unit_price_micros": 7, "per_units": 1,
         "effective_from": "2026-01-01"},
    ]  # fmt: skip
    assert price_per_call_micros(rules, "1") == 3000
    assert price_per_call_micros(rules, "2") == 5000
    assert price_per_call_micros([], "1") is None
    usage = {"prompt_tokens": 4, "completion_tokens": 10}
    assert price_of_tokens_micros(rules, usage) == 70
    assert price_of_tokens_micros(rules[:2], usage) is None


def test_the_curl_example_survives_the_shell() -> None:
    spec = [{"name": "t", "datatype": "BYTES", "shape": [-1]}]
    example = {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["it's"]}]}
    curl = snippets("http://host:8000", "acme/words", spec, example).curl
    words = shlex.split(curl.replace("\\\n", " "))
    assert words[3] == "http://host:8000/v2/models/acme/words/infer"
    assert (
        words[-1]
        == '{"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["it\'s"]}]}'
    )
    chat = snippets("http://h", "acme/writer", spec, None, generative=True).curl
    assert "http://h/v1/chat/completions" in chat and '"model": "acme/writer"' in chat
