"""A page's name taken from its URL stays a name: ``%2E`` or ``%2E%2E`` in a console URL
reaches the API as that name (its 404 with its code), never as a step to another API
resource (a list shown as one document, or a 500)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from modelport.console.calls import literal_dots
from tests.console.conftest import Console, browser_client, sign_in


@pytest.fixture
def beta(console: Console) -> TestClient:
    client = browser_client(console)
    sign_in(client, console.beta_key)
    return client


@pytest.mark.parametrize(
    ("page", "code"),
    [
        ("/console/jobs/%2E", "job_not_found"),
        ("/console/jobs/%2E%2E", "job_not_found"),
        ("/console/endpoints/%2E", "endpoint_not_found"),
    ],
)
def test_a_dot_name_is_the_apis_not_found(beta: TestClient, page: str, code: str) -> None:
    response = beta.get(page)
    assert response.status_code == 404, response.text
    assert f"<code>{code}</code>" in response.text


@pytest.mark.parametrize("page", ["/console/invoices/%2E", "/console/invoices/%2E%2E"])
def test_a_dot_invoice_is_a_clear_refusal_not_a_crash(beta: TestClient, page: str) -> None:
    response = beta.get(page)
    assert 400 <= response.status_code < 500, response.text
    assert "<code>" in response.text  # the API's stable code is shown


def test_only_whole_dot_segments_are_encoded() -> None:
    assert literal_dots("/api/invoices/.") == "/api/invoices/%2E"
    assert literal_dots("/api/jobs/../cancel") == "/api/jobs/%2E%2E/cancel"
    assert (
        literal_dots("/api/models/acme/v1.0/versions/1.2") == "/api/models/acme/v1.0/versions/1.2"
    )
    assert literal_dots("/api/x/.../y") == "/api/x/.../y"
