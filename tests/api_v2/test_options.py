"""Deadline and priority options of /v2 infer."""

from __future__ import annotations

import pytest

from modelport.api.v2.options import model_parameters, priority_of, timeout_seconds
from modelport.errors import InvalidInput
from modelport.runtime.types import Priority


@pytest.mark.parametrize(
    ("header", "parameters", "expected"),
    [
        (None, {}, 30.0),
        ("2.5", {}, 2.5),
        (None, {"timeout": 250_000}, 0.25),
        ("0.1", {"timeout": 250_000}, 0.1),  # the shorter limit wins
        ("5", {"timeout": 1_000_000}, 1.0),
    ],
)
def test_timeout_from_header_seconds_or_parameter_microseconds(
    header, parameters, expected
) -> None:
    assert timeout_seconds(header, parameters, 30.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("header", "parameters"),
    [
        ("soon", {}),
        ("0", {}),
        ("-1", {}),
        ("nan", {}),
        ("inf", {}),
        ("7200", {}),
        (None, {"timeout": "100"}),
        (None, {"timeout": 1.5}),
        (None, {"timeout": True}),
        (None, {"timeout": 0}),
    ],
)
def test_bad_timeouts_are_refused(header, parameters) -> None:
    with pytest.raises(InvalidInput) as info:
        timeout_seconds(header, parameters, 30.0)
    assert info.value.code == "invalid_timeout"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, Priority.INTERACTIVE),
        ("interactive", Priority.INTERACTIVE),
        ("batch", Priority.BATCH),
        ("offline", Priority.OFFLINE),
        (0, Priority.INTERACTIVE),
        (1, Priority.INTERACTIVE),
        (2, Priority.BATCH),
        (3, Priority.OFFLINE),
        (10, Priority.OFFLINE),
    ],
)
def test_priority_names_and_triton_levels(value, expected) -> None:
    parameters = {} if value is None else {"priority": value}
    assert priority_of(parameters) is expected


@pytest.mark.parametrize("value", ["urgent", -1, True, 1.0, [1]])
def test_bad_priorities_are_refused(value) -> None:
    with pytest.raises(InvalidInput) as info:
        priority_of({"priority": value})
    assert info.value.code == "invalid_priority"


def test_scheduling_parameters_are_not_passed_to_the_model() -> None:
    assert model_parameters({"timeout": 5, "priority": 1, "temperature": 0.5}) == {
        "temperature": 0.5
    }
