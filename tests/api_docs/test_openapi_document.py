"""``/api/openapi.json`` says what the server does: problem+json errors (never FastAPI's
422), the error responses of every operation, the bearer key, schemas for every answer
with a body, and names and summaries written for people."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from modelport.api.openapi.operations import OPERATIONS

METHODS = ("get", "put", "post", "delete", "patch", "head")


@pytest.fixture(scope="module")
def doc(anon: TestClient) -> dict[str, Any]:
    response = anon.get("/api/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def test_no_operation_documents_fastapis_validation_error(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        assert "422" not in op["responses"], (method, path)
    assert "HTTPValidationError" not in str(doc)
    assert "ValidationError" not in doc["components"]["schemas"]


def test_problem_schema_has_the_rfc_9457_members_and_the_code(doc: dict[str, Any]) -> None:
    problem = doc["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code", "instance"}
    assert problem["additionalProperties"] is True  # extra members depend on the code
    assert "errors" in problem["properties"]


def test_every_api_operation_documents_its_errors_as_problems(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        if not path.startswith("/api/"):
            continue
        responses = op["responses"]
        for status in ("400", "401", "403"):
            assert status in responses, (method, path, status)
        if "{" in path:
            assert "404" in responses, (method, path)
        if method in ("post", "put", "patch", "delete"):
            assert "409" in responses and "429" in responses, (method, path)
        for status, response in responses.items():
            if status.startswith(("4", "5")) and method != "head":
                content = response["content"]
                assert list(content) == ["application/problem+json"], (method, path, status)
                assert content["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"
                }


def test_predict_documents_payment_and_unavailability(doc: dict[str, Any]) -> None:
    responses = doc["paths"]["/api/endpoints/{name}:predict"]["post"]["responses"]
    assert {"402", "429", "503", "504"} <= set(responses)


def test_the_api_key_is_a_security_scheme_on_every_api_operation(doc: dict[str, Any]) -> None:
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "http", "scheme": "bearer"}
    assert schemes["metricsToken"]["scheme"] == "bearer"
    for method, path, op in operations(doc):
        if path.startswith("/api/"):
            assert op["security"] == [{"apiKey": []}], (method, path)
    assert doc["paths"]["/metrics"]["get"]["security"] == [{"metricsToken": []}, {"apiKey": []}]
    assert "security" not in doc["paths"]["/healthz"]["get"]


def test_every_answer_with_a_body_has_a_schema(doc: dict[str, Any]) -> None:
    for method, path, op in operations(doc):
        for status, response in op["responses"].items():
            if status == "204" or method == "head":
                assert not response.get("content"), (method, path, status)
                continue
            content = response.get("content")
            assert content, (method, path, status)
            for media, body in content.items():
                assert body.get("schema"), (method, path, status, media)


def test_summaries_and_ids_are_written_not_generated(doc: dict[str, Any]) -> None:
    ids = []
    for method, path, op in operations(doc):
        assert (method, path) in OPERATIONS, f"{method} {path} is missing from OPERATIONS"
        generated = op["operationId"]
        ids.append(generated)
        assert re.fullmatch(r"[a-z][A-Za-z]+", generated), generated
        summary = op["summary"]
        # FastAPI's generated summary is the function name in title case.
        assert summary[0].isupper() and " " in summary, summary
        assert summary != summary.title() or len(summary.split()) < 2, summary
    assert len(ids) == len(set(ids)), "operation ids are unique"
    stale = set(OPERATIONS) - {(m, p) for m, p, _ in operations(doc)}
    assert not stale, f"OPERATIONS names operations that do not exist: {stale}"


def test_every_tag_used_is_described(doc: dict[str, Any]) -> None:
    described = {tag["name"] for tag in doc["tags"]}
    for method, path, op in operations(doc):
        assert op["tags"], (method, path)
        assert len(op["tags"]) == len(set(op["tags"])), (method, path)
        assert set(op["tags"]) <= described, (method, path)


def test_refs_all_resolve(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    refs = set(re.findall(r"#/components/schemas/([A-Za-z0-9_.-]+)", str(doc)))
    assert refs <= set(schemas), refs - set(schemas)
