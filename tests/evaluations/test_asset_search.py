"""/api/assets on SQLite and PostgreSQL: datasets and templates found by the words of
their names, descriptions, task and license, ranked name first; another tenant's private
asset is never listed nor counted, until a grant shares it; the kind, task and license
facets count the matches under every filter but their own."""

from __future__ import annotations

from typing import Any

from tests.evaluations.conftest import CLASSIFICATION_COLUMNS, Trained, World

TEMPLATE: dict[str, Any] = {
    "license": "MIT",
    "description": "Answers questions about sentiment of reviews",
    "messages": [{"role": "user", "content": "{{review}}"}],
    "variables": [{"name": "review"}],
}


def _search(world: World, key: str | None = None, **params: Any) -> dict[str, Any]:
    response = world.client.get("/api/assets", params=params, headers=world.bearer(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


def _names(found: dict[str, Any]) -> list[str]:
    return [f"{i['kind']}:{i['owner']}/{i['name']}" for i in found["items"]]


def _catalog(world: World, classifier: Trained) -> None:
    rows = {"test": {"X": classifier.x[:20], "y": classifier.y[:20]}}
    for name, visibility, description in (
        ("flowers", "public", "Iris petals measured for sentiment-free classification"),
        ("reviews", "public", "Product reviews labelled by sentiment"),
        ("sentiment", "public", "A small benchmark"),
        ("secret-reviews", "private", "Private reviews labelled by sentiment"),
    ):
        created = world.client.post(
            "/api/datasets",
            json={
                "owner": "acme",
                "name": name,
                "visibility": visibility,
                "description": description,
            },
        )
        assert created.status_code == 201, created.text
        world.dataset(
            f"acme/{name}",
            rows,
            CLASSIFICATION_COLUMNS,
            task="classification",
            visibility=visibility,
        )
    created = world.client.post(
        "/api/templates", json={"owner": "acme", "name": "review-reply", "visibility": "public"}
    )
    assert created.status_code == 201, created.text
    published = world.client.post(
        "/api/templates/acme/review-reply/versions", json={"version": "1", "manifest": TEMPLATE}
    )
    assert published.status_code == 201, published.text


def test_search_finds_public_assets_by_their_words_and_never_a_private_one(
    world: World, classifier: Trained
) -> None:
    _catalog(world, classifier)
    # A word of the description finds a dataset; the other tenant's private one is absent.
    found = _search(world, q="labelled")
    assert _names(found) == ["dataset:acme/reviews"] and found["total"] == 1
    # The name outranks descriptions; templates are found beside datasets.
    ranked = _search(world, q="sentiment")
    assert _names(ranked) == [
        "dataset:acme/sentiment",
        "dataset:acme/flowers",
        "dataset:acme/reviews",
        "template:acme/review-reply",
    ]
    assert ranked["items"][0]["latest"] == {
        "version": "1",
        "task": "classification",
        "license": "CC-BY-4.0",
    }
    # The last word matches as a prefix; the kind facet counts under the other filters.
    prefix = _search(world, q="revi")
    assert _names(prefix) == ["dataset:acme/reviews", "template:acme/review-reply"]
    assert prefix["facets"]["kind"] == [
        {"value": "dataset", "count": 1},
        {"value": "template", "count": 1},
    ]
    only = _search(world, q="sentiment", kind="template")
    assert _names(only) == ["template:acme/review-reply"] and only["total"] == 1
    assert only["facets"]["kind"] == [
        {"value": "dataset", "count": 3},
        {"value": "template", "count": 1},
    ]
    assert only["facets"]["task"] == []  # a template has no task
    assert only["facets"]["license"] == [{"value": "MIT", "count": 1}]
    by_task = _search(world, task="classification", license="cc-by-4.0")
    assert by_task["total"] == 3 and {i["kind"] for i in by_task["items"]} == {"dataset"}
    # The listing without q: every asset the caller may read, by kind, owner and name.
    listing = _search(world, limit=2)
    assert _names(listing) == ["dataset:acme/flowers", "dataset:acme/reviews"]
    assert listing["total"] == 4
    rest = _search(world, limit=2, cursor=listing["next_cursor"])
    assert _names(rest) == ["dataset:acme/sentiment", "template:acme/review-reply"]
    assert rest["next_cursor"] is None
    # Query text is never syntax: only punctuation finds nothing.
    assert _search(world, q='"*')["total"] == 0
    bad = world.client.get("/api/assets", params={"cursor": "x"}, headers=world.bearer())
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_cursor")

    # The asset's own tenant and the operator find the private one; a grant shares it.
    assert "dataset:acme/secret-reviews" in _names(
        world.client.get("/api/assets", params={"q": "private"}).json()
    )
    grant = world.client.post(
        "/api/grants", json={"grantee": "beta", "namespace": "acme", "model": "secret-reviews"}
    )
    assert grant.status_code == 201, grant.text
    assert _names(_search(world, q="private reviews")) == ["dataset:acme/secret-reviews"]
