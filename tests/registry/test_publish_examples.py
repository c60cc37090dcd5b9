"""Publishing refuses examples that cannot be right, before a version number is spent:
data that disagrees with its shape, or tensors that do not fit the declared ones."""

from __future__ import annotations

from typing import Any

import pytest

from tests.registry.helpers import Registry, add_one_example, manifest_for

REF = "acme/adder"


def tensor(name: str, shape: list[int], data: list[Any], datatype: str = "FP32") -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


GOOD_X = tensor("x", [1, 4], [1, 2, 3, 4])
GOOD_Y = tensor("y", [1, 4], [2, 3, 4, 5])


@pytest.mark.parametrize(
    ("example", "field", "needle"),
    [
        (
            {"inputs": [tensor("x", [2, 4], [1, 2, 3, 4])], "outputs": [GOOD_Y]},
            "manifest.examples.0.inputs.0",
            "example 0 input 'x': shape [2, 4] needs 8 elements, got 4",
        ),
        (
            {"inputs": [GOOD_X], "outputs": [tensor("y", [1, 4], [2, 3, 4])]},
            "manifest.examples.0.outputs.0",
            "example 0 output 'y': shape [1, 4] needs 4 elements, got 3",
        ),
        (
            {"inputs": [GOOD_X], "outputs": [tensor("y", [1, 4], [1, 2, 3, 4], "INT64")]},
            "manifest.examples.0.outputs.0",
            "example 0 output 'y' is INT64, but the manifest declares FP32",
        ),
        (
            {"inputs": [tensor("x", [1, 3], [1, 2, 3])], "outputs": [GOOD_Y]},
            "manifest.examples.0.inputs.0",
            "does not fit the declared shape [-1, 4]",
        ),
        (
            {"inputs": [GOOD_X], "outputs": [tensor("label", [1], [1])]},
            "manifest.examples.0.outputs.0",
            "example 0 output 'label' is not declared",
        ),
        (
            {"inputs": [GOOD_X, GOOD_X], "outputs": []},
            "manifest.examples.0.inputs.1",
            "given twice",
        ),
        (
            {"inputs": [GOOD_X], "outputs": [tensor("y", [1, 4], ["a", "b", "c", "d"])]},
            "manifest.examples.0.outputs.0",
            "example 0 output 'y': FP32 data must be numbers",
        ),
    ],
)
def test_an_example_that_cannot_be_right_is_refused_at_publish(
    registry: Registry, example: dict[str, Any], field: str, needle: str
) -> None:
    registry.create_model(REF)
    manifest = manifest_for(registry.data, examples=[add_one_example(), example])
    problem = registry.publish(REF, "1", manifest, status=400)
    assert problem["code"] == "invalid_example"
    assert problem["field"] == field.replace("examples.0", "examples.1")
    assert needle.replace("example 0", "example 1") in problem["detail"]
    assert registry.client.get(f"/api/models/{REF}/versions/1").status_code == 404
    assert registry.publish(REF, "1", manifest_for(registry.data))["version"] == "1"


def test_an_example_with_a_subset_of_the_outputs_is_fine(registry: Registry) -> None:
    registry.create_model(REF)
    manifest = manifest_for(registry.data, examples=[{"inputs": [GOOD_X], "outputs": []}])
    assert registry.publish(REF, "1", manifest)["version"] == "1"


def test_a_validation_failure_names_an_example_output_as_an_output(registry: Registry) -> None:
    """Decoding an example's expected output said ``input 'y'``; it says what it is."""
    from modelport.manifest import Example
    from modelport.runtime.examples import run_example

    class Echo:
        def execute(self, inputs: dict[str, Any]) -> dict[str, Any]:
            return {"y": inputs["x"]}

    example = Example.model_validate(
        {"inputs": [GOOD_X], "outputs": [tensor("y", [1, 4], [1, 2, 3, 1 << 70], "INT64")]}
    )
    with pytest.raises(Exception, match="example output 'y': value out of range for INT64"):
        run_example(Echo(), example)  # type: ignore[arg-type]
