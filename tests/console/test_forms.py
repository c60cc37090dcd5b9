"""The playground's request from the form, the prices the console quotes, and the
example calls: pure functions, checked on the shapes and values a person types."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from modelport.console.playground import BAD_INPUT, body_rows, form_fields, request_body
from modelport.console.pricing import amount_micros, price_of_tokens_micros, price_per_call_micros
from modelport.console.routed_calls import (
    BAD_ROUTE,
    route_form,
    route_preferences,
    route_task,
    served_by,
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


IRIS = [{"name": "features", "datatype": "FP32", "shape": [-1, 4]}]
IRIS_EXAMPLE = {
    "inputs": [
        {
            "name": "features",
            "datatype": "FP32",
            "shape": [2, 4],
            "data": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
        }
    ]
}
IRIS_ROWS = [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]


def test_what_the_form_prefills_from_a_nested_example_it_accepts() -> None:
    [field] = form_fields(IRIS, IRIS_EXAMPLE)
    assert field.value == "[5.1, 3.5, 1.4, 0.2],\n[6.7, 3.0, 5.2, 2.3]"
    [tensor] = request_body([field])["inputs"]
    assert tensor == {"name": "features", "datatype": "FP32", "shape": [2, 4], "data": IRIS_ROWS}


@pytest.mark.parametrize(
    "value",
    [
        "[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]",  # the text the page used to show
        "[5.1, 3.5, 1.4, 0.2]\n[6.7, 3.0, 5.2, 2.3]",  # one row a line, no commas
        "[[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]",  # one JSON array of rows
        "5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3",
        "[5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]",  # one flat array: row-major
    ],
)
def test_rows_are_accepted_as_json_arrays(value: str) -> None:
    [tensor] = request_body(form_fields(IRIS, IRIS_EXAMPLE, {"input:features": value}))["inputs"]
    assert tensor["shape"] == [2, 4] and tensor["data"] == IRIS_ROWS


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("[1, 2, 3, 4], [5, 6, 7]", "rows of different lengths"),
        ("[1, 2], [3, 4]", "give [2, 2]"),  # 4 values, but rows of 2 for [any, 4]
        ("[1, 2, 3, 4", "must be FP32 values"),
        ('[1, 2, "x", 4]', "must be FP32 values"),
        ("[1, 2, true, 4]", "must be FP32 values"),
        ("1, 2, 3", "multiple of 4"),
    ],
)
def test_a_refusal_names_an_accepted_example(value: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        request_body(form_fields(IRIS, IRIS_EXAMPLE, {"input:features": value}))
    assert refused.value.code == BAD_INPUT and says in refused.value.message
    assert refused.value.message.endswith("e.g. [5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]")
    # ... which the form takes.
    example = refused.value.message.split("e.g. ")[1]
    assert request_body(form_fields(IRIS, None, {"input:features": example}))


def test_text_may_hold_brackets_or_be_written_as_a_json_array() -> None:
    spec = [{"name": "t", "datatype": "BYTES", "shape": [-1]}]
    [plain] = request_body(form_fields(spec, None, {"input:t": "[hi], there"}))["inputs"]
    assert plain["data"] == ["[hi]", "there"]
    [quoted] = request_body(form_fields(spec, None, {"input:t": '["a, b", "c"]'}))["inputs"]
    assert quoted["data"] == ["a, b", "c"] and quoted["shape"] == [2]


def test_without_an_example_the_refusal_shows_a_row_of_the_schemas_width() -> None:
    with pytest.raises(InvalidInput) as refused:
        request_body(form_fields(IRIS, None, {"input:features": "x"}))
    assert refused.value.message.endswith("e.g. [1.0, 2.0, 3.0, 4.0]")
    ints = [{"name": "x", "datatype": "INT64", "shape": [3]}]
    with pytest.raises(InvalidInput) as refused:
        request_body(form_fields(ints, None, {"input:x": "[1.5, 2, 3]"}))
    assert refused.value.message.endswith("e.g. [1, 2, 3]")


def rule(unit: str, micros: int, per_units: int = 1) -> dict[str, Any]:
    """A rule in effect, as ``GET /api/prices?…&at=…`` lists it."""
    return {"unit": unit, "unit_price_micros": micros, "per_units": per_units, "version": "1"}


def test_the_price_per_call_is_the_prediction_rules() -> None:
    assert price_per_call_micros([rule("output_token", 7), rule("prediction", 3000)]) == 3000
    assert price_per_call_micros([rule("prediction", 9000, per_units=1000)]) == 9
    assert price_per_call_micros([rule("output_token", 7)]) is None
    assert price_per_call_micros([]) is None


def test_the_price_per_call_adds_its_rows_at_the_row_rule() -> None:
    both = [rule("prediction", 3000), rule("row", 10)]
    assert price_per_call_micros(both, rows=3) == 3030  # a call and three rows
    assert price_per_call_micros([rule("row", 10)], rows=2) == 20
    fields = form_fields(SPEC, None, {"input:x": "1, 2, 3, 4, 5, 6, 7, 8"})
    assert body_rows(fields, request_body(fields)) == 2


def test_a_chats_price_is_its_tokens_at_their_rules() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 30}
    both = [rule("input_token", 2), rule("output_token", 8), rule("prediction", 100)]
    assert price_of_tokens_micros(both, usage) == 10 * 2 + 30 * 8
    assert price_of_tokens_micros([rule("output_token", 7)], usage) == 7 * 30
    assert price_of_tokens_micros([rule("output_token", 1, per_units=1000)], usage) == 0
    assert price_of_tokens_micros([rule("prediction", 100)], usage) is None
    assert amount_micros(rule("output_token", 3, per_units=2), 5) == 7  # rounded down


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


def test_routing_preferences_as_typed_become_the_apis_route_object() -> None:
    assert route_form(None).on is False
    typed = route_form(
        {"route": "1", "prefer": "fastest", "max_price": "$0.0025", "max_latency_ms": "250"}
    )
    assert typed.on and route_preferences(typed) == {
        "prefer": "fastest",
        "max_price": 2_500,
        "max_latency_ms": 250.0,
    }
    assert route_preferences(route_form({"route": "1", "min_score": "0.9"})) == {
        "prefer": "best",
        "min_score": 0.9,
    }
    for bad, field in (
        ({"prefer": "soonest"}, "prefer"),
        ({"max_price": "cheap"}, "max_price"),
        ({"max_price": "0.0000001"}, "max_price"),
        ({"max_latency_ms": "0"}, "max_latency_ms"),
        ({"max_latency_ms": "inf"}, "max_latency_ms"),
        ({"min_score": "nan"}, "min_score"),
    ):
        with pytest.raises(InvalidInput) as refused:
            route_preferences(route_form({"route": "1", **bad}))
        assert refused.value.code == BAD_ROUTE and refused.value.extra["field"] == field


def test_a_task_alias_and_the_version_that_served_a_routed_call() -> None:
    assert route_task("tabular-regression") == "tabular-regression"
    assert route_task("Chat") is None and route_task(None) is None and route_task("a b") is None
    assert served_by({"model_name": "acme/winter", "model_version": "1"}) == ("acme/winter", "1")
    assert served_by({"model_name": "route:chat"}) is None
