"""Page cursors: what a listing made comes back as its id; anything else, including an
id past its column's range (which PostgreSQL would refuse with a server error), is a
400 ``invalid_cursor``."""

from __future__ import annotations

import base64

import pytest
from starlette.testclient import TestClient

from modelport.errors import InvalidInput
from modelport.store.cursors import INT32_MAX, IdCursor

CATALOG = IdCursor(b"m1:")


def forged(prefix: bytes, value: int) -> str:
    return base64.urlsafe_b64encode(prefix + str(value).encode()).decode().rstrip("=")


def test_a_cursor_comes_back_as_its_id() -> None:
    for value in (0, 1, 12345, INT32_MAX):
        assert CATALOG.decode(CATALOG.encode(value)) == value


@pytest.mark.parametrize(
    "cursor",
    [
        forged(b"a1:", 5),  # another listing's
        forged(b"m1:", -1),
        forged(b"m1:", INT32_MAX + 1),
        forged(b"m1:", 2**70),
        "not base64 !",
        "",
    ],
)
def test_anything_else_is_an_invalid_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        CATALOG.decode(cursor)
    assert refused.value.code == "invalid_cursor"


def test_a_catalog_cursor_past_the_id_range_is_a_bad_request(client: TestClient) -> None:
    response = client.get("/api/models", params={"cursor": forged(b"m1:", 2**40)})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_cursor"
