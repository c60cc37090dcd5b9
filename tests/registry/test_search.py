"""Ranked catalog search on /api/models?q=: ranking, facets, visibility, suggestions,
the index kept in step with the registry, and query text that is never syntax."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.evaluations import repository as evaluations
from modelport.ids import unique_id
from modelport.store.tables import ModelRow
from tests.registry.helpers import Registry, manifest_for


def _search(client: TestClient, headers: dict[str, str] | None = None, **params: Any) -> Any:
    response = client.get("/api/models", params={"limit": 200, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _names(client: TestClient, headers: dict[str, str] | None = None, **params: Any) -> list[str]:
    return [m["model"] for m in _search(client, headers, **params)["items"]]


def _facet(answer: dict[str, Any], name: str) -> dict[str, int]:
    return {f["value"]: f["count"] for f in answer["facets"][name]}


@pytest.fixture
def shelf(registry: Registry) -> Registry:
    """Models whose names, tags, tasks and descriptions mention 'sentiment' differently."""
    registry.create_model(
        "acme/reviews",
        task="classification",
        description="Sentiment of reviews: sentiment scores, sentiment labels, sentiment.",
        visibility="public",
    )
    registry.create_model(
        "acme/sentiment-large", task="classification", license="Apache-2.0", visibility="public"
    )
    registry.create_model(
        "acme/sentiment", task="classification", description="Small.", visibility="public"
    )
    registry.create_model(
        "globex/tagged", task="embedding", tags=["sentiment"], visibility="public"
    )
    registry.create_model("globex/detector", task="sentiment", visibility="public")
    registry.create_model(
        "globex/fraud-risk", task="classification", description="Scores card payments"
    )
    return registry


def test_an_exact_name_ranks_above_every_other_mention(shelf: Registry) -> None:
    ranked = _names(shelf.client, q="sentiment")
    assert ranked[0] == "acme/sentiment"
    # A name beats tags and the task, which beat a description, however often it says it.
    assert ranked.index("acme/sentiment-large") < ranked.index("globex/tagged")
    assert ranked.index("globex/tagged") < ranked.index("acme/reviews")
    assert ranked.index("globex/detector") < ranked.index("acme/reviews")
    assert set(ranked) == {
        "acme/sentiment",
        "acme/sentiment-large",
        "globex/tagged",
        "globex/detector",
        "acme/reviews",
    }
    # The name's own spelling, punctuation and case included, is exact too.
    assert _names(shelf.client, q="Sentiment-LARGE")[0] == "acme/sentiment-large"
    assert _names(shelf.client, q="fraud risk") == ["globex/fraud-risk"]


def test_names_with_numbers_and_dots_are_words(registry: Registry) -> None:
    """PostgreSQL's parser alone would read ``v-2024`` as ``v`` and the number ``-2024``."""
    registry.create_model("acme/model-2024", description="model 2024 of the year 2024")
    registry.create_model("acme/bert-1.5-base")
    assert _names(registry.client, q="model-2024") == ["acme/model-2024"]
    assert _names(registry.client, q="2024") == ["acme/model-2024"]
    assert _names(registry.client, q="bert 1.5") == ["acme/bert-1.5-base"]
    assert _names(registry.client, q="bert-1.5-base") == ["acme/bert-1.5-base"]


def test_every_word_must_match_and_the_last_is_a_prefix(shelf: Registry) -> None:
    assert _names(shelf.client, q="card payments") == ["globex/fraud-risk"]
    assert _names(shelf.client, q="card paym") == ["globex/fraud-risk"]
    assert _names(shelf.client, q="card sentiment") == []


def test_facets_count_matches_under_the_other_filters(shelf: Registry) -> None:
    answer = _search(shelf.client, q="sentiment")
    assert answer["total"] == 5
    assert _facet(answer, "task") == {"classification": 3, "embedding": 1, "sentiment": 1}
    assert _facet(answer, "license") == {"MIT": 4, "Apache-2.0": 1}
    assert _facet(answer, "price") == {"free": 5}
    assert answer["facets"]["format"] == []
    # A facet's own filter narrows the items and the other facets, not its own counts.
    narrowed = _search(shelf.client, q="sentiment", task="classification")
    assert narrowed["total"] == 3
    assert {m["model"] for m in narrowed["items"]} == {
        "acme/sentiment",
        "acme/sentiment-large",
        "acme/reviews",
    }
    assert _facet(narrowed, "task") == _facet(answer, "task")
    assert _facet(narrowed, "license") == {"MIT": 2, "Apache-2.0": 1}
    both = _search(shelf.client, q="sentiment", task="classification", license="apache-2.0")
    assert [m["model"] for m in both["items"]] == ["acme/sentiment-large"]


def test_format_and_price_facets(shelf: Registry) -> None:
    shelf.publish("acme/sentiment", "1", manifest_for(shelf.data, description="v1"))
    shelf.publish("acme/sentiment", "2", manifest_for(shelf.data, description="v2"))
    for model, micros in (("acme/sentiment", 500), ("acme/reviews", 50_000)):
        body = {"model": model, "unit": "prediction", "unit_price_micros": micros}
        assert shelf.client.post("/api/prices", json=body).status_code == 201
    answer = _search(shelf.client, q="sentiment")
    assert _facet(answer, "format") == {"onnx": 1}  # two versions, one model
    assert _facet(answer, "price") == {"free": 3, "low": 1, "high": 1}
    assert _names(shelf.client, q="sentiment", price="low") == ["acme/sentiment"]
    assert _names(shelf.client, q="sentiment", price="high") == ["acme/reviews"]
    assert _names(shelf.client, q="sentiment", format="onnx") == ["acme/sentiment"]
    assert _names(shelf.client, q="sentiment", price="priceless") == []
    # Facets without a query, on request; the listing itself is unchanged.
    listed = _search(shelf.client, facets=True)
    assert listed["total"] == 6
    assert _facet(listed, "price") == {"free": 4, "low": 1, "high": 1}
    assert "facets" not in _search(shelf.client)


def _evaluated(
    services: Services,
    model: str,
    task: str,
    metrics: dict[str, float],
    *,
    kind: str = "verified",
    published: bool = True,
) -> None:
    """A finished evaluation of ``model`` version 1, as its job (or a claim) writes it."""
    owner, name = model.split("/")
    now = datetime.now(UTC)
    with services.database.transaction() as session:
        made = evaluations.insert(
            session,
            id=unique_id(),
            kind=kind,
            tenant=owner,
            created_by="admin",
            model_owner=owner,
            model_name=name,
            model_version="1",
            version_digest="sha256:" + "0" * 64,
            dataset_owner="acme",
            dataset_name="bench",
            dataset_version="1",
            dataset_digest="sha256:" + "1" * 64,
            split="test",
            task=task,
            output="y",
            published=published,
            state="queued",
            created_at=now,
        )
        evaluations.record_result(
            session, made.id, metrics=metrics, rows=10, latency_ms=1.0, at=now
        )


def test_the_score_facet_and_min_score_read_verified_scores_only(
    shelf: Registry, services: Services
) -> None:
    _evaluated(services, "acme/sentiment", "classification", {"accuracy": 0.95})
    _evaluated(services, "acme/sentiment", "classification", {"accuracy": 0.5})  # not its best
    _evaluated(services, "acme/sentiment-large", "classification", {"accuracy": 0.6})
    # A publisher's claim never counts, nor does an evaluation its tenant kept unpublished.
    _evaluated(
        services, "acme/sentiment-large", "classification", {"accuracy": 0.99}, kind="claimed"
    )
    _evaluated(services, "acme/reviews", "classification", {"accuracy": 0.99}, published=False)
    _evaluated(services, "globex/tagged", "embedding", {"recall_at_1": 0.75, "mrr": 0.8})
    _evaluated(services, "globex/detector", "regression", {"mae": 3.0, "rmse": 4.0})
    answer = _search(shelf.client, q="sentiment")
    assert _facet(answer, "score") == {
        "0.9-1": 1,
        "0.7-0.9": 1,
        "0.5-0.7": 1,
        "lower-better": 1,
        "unscored": 1,
    }
    assert _names(shelf.client, q="sentiment", score="0.9-1") == ["acme/sentiment"]
    assert _names(shelf.client, q="sentiment", score="unscored") == ["acme/reviews"]
    assert _names(shelf.client, q="sentiment", score="lower-better") == ["globex/detector"]
    assert _names(shelf.client, q="sentiment", score="perfect") == []
    # The bucket's own filter leaves its counts whole, and narrows the others.
    narrowed = _search(shelf.client, q="sentiment", score="0.5-0.7")
    assert _facet(narrowed, "score") == _facet(answer, "score")
    assert _facet(narrowed, "task") == {"classification": 1}
    # min_score: at least it where higher is better, at most it where lower is.
    assert set(_names(shelf.client, q="sentiment", min_score=0.7)) == {
        "acme/sentiment",
        "globex/tagged",
    }
    assert _names(shelf.client, q="sentiment", min_score=0.7, task="classification") == [
        "acme/sentiment"
    ]
    assert _names(shelf.client, min_score=5) == ["globex/detector"]
    assert _names(shelf.client, min_score=0.99) == []
    filtered = _search(shelf.client, facets=True, min_score=0.7)
    assert filtered["total"] == 2
    assert _facet(filtered, "score") == {"0.9-1": 1, "0.7-0.9": 1}
    bad = shelf.client.get("/api/models", params={"min_score": "many"})
    assert bad.status_code in (400, 422)


def test_another_tenants_private_model_is_never_seen_nor_counted(
    shelf: Registry, services: Services
) -> None:
    shelf.create_model("globex/sentiment-secret", task="classification")
    services.tenancy.add_member("acme", "alice", roles=["consumer"], actor="admin")
    services.tenancy.add_member("globex", "gus", roles=["consumer"], actor="admin")
    alice = {"Authorization": "Bearer " + _key(services, "acme", "alice")}
    gus = {"Authorization": "Bearer " + _key(services, "globex", "gus")}

    seen = _search(shelf.client, alice, q="sentiment")
    assert "globex/sentiment-secret" not in [m["model"] for m in seen["items"]]
    assert seen["total"] == 5
    assert _facet(seen, "task")["classification"] == 3
    assert _search(shelf.client, alice, q="secret")["total"] == 0
    assert _search(shelf.client, alice, q="fraud")["total"] == 0  # globex's, private
    # Suggestions come only from names the viewer may read.
    assert _search(shelf.client, alice, q="secrett")["suggestions"] == []
    assert _search(shelf.client, gus, q="secrett")["suggestions"] == ["secret"]

    owned = _search(shelf.client, gus, q="sentiment")
    assert owned["total"] == 6
    assert _facet(owned, "task")["classification"] == 4


def _key(services: Services, tenant: str, member: str) -> str:
    return services.tenancy.create_key(tenant, member, name="k", actor="admin").secret


def test_a_query_that_finds_nothing_suggests_names(shelf: Registry) -> None:
    answer = _search(shelf.client, q="sentimnet")
    assert answer["items"] == [] and answer["total"] == 0
    assert answer["suggestions"][0] == "sentiment"
    assert _search(shelf.client, q="fruad risk")["suggestions"] == ["fraud risk"]
    assert _search(shelf.client, q="qqqqqq")["suggestions"] == []
    assert _search(shelf.client, q="sentiment")["suggestions"] == []


def test_the_index_follows_publish_and_remove(shelf: Registry, services: Services) -> None:
    assert _names(shelf.client, q="imagenet") == []
    manifest = {**manifest_for(shelf.data, description="Fine-tuned on ImageNet"), "tags": ["cv"]}
    shelf.publish("globex/detector", "1", manifest)
    assert _names(shelf.client, q="imagenet") == ["globex/detector"]
    assert _names(shelf.client, q="cv") == ["globex/detector"]
    registry = services.registry
    with registry.database.transaction() as session:
        mid = session.scalar(select(ModelRow.id).where(ModelRow.name == "detector"))
        assert mid is not None
        registry.search_index.remove(session, mid)
    assert _names(shelf.client, q="imagenet") == []
    assert "globex/detector" in _names(shelf.client)  # the listing reads the models


def test_a_failed_create_leaves_no_document(shelf: Registry) -> None:
    again = shelf.client.post("/api/models", json={"owner": "acme", "name": "sentiment"})
    assert again.status_code == 409
    assert _names(shelf.client, q="sentiment").count("acme/sentiment") == 1


@pytest.mark.parametrize(
    "q",
    [
        '"sentiment',
        "sentiment OR reviews",
        "NOT sentiment",
        "name:sentiment",
        "sentiment*",
        "NEAR(sentiment reviews)",
        "sentiment & !reviews | x:*",
        "'); DROP TABLE models; --",
        "sentiment -reviews",
        "^sentiment",
        "sentiment)",
    ],
)
def test_query_text_is_never_syntax(shelf: Registry, q: str) -> None:
    """Operators, quotes and column filters are separators: a query is plain words, and
    answers exactly what its words answer."""
    plain = " ".join(re.findall(r"[a-z]+", q.lower()))
    assert _names(shelf.client, q=q) == _names(shelf.client, q=plain)
    assert len(_names(shelf.client)) == 6  # nothing was dropped


@pytest.mark.parametrize("q", ["%", "***", "' \"", "--"])
def test_a_query_of_no_words_finds_nothing(shelf: Registry, q: str) -> None:
    answer = _search(shelf.client, q=q)
    assert (answer["items"], answer["total"]) == ([], 0)


def test_an_empty_query_is_the_listing(shelf: Registry) -> None:
    assert _names(shelf.client, q="") == _names(shelf.client)
    assert "facets" not in _search(shelf.client, q="")


def test_ranked_pages_are_stable(shelf: Registry) -> None:
    whole = _names(shelf.client, q="sentiment")
    for limit in (1, 2, 3):
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"q": "sentiment", "limit": limit}
            if cursor:
                params["cursor"] = cursor
            page = shelf.client.get("/api/models", params=params).json()
            seen += [m["model"] for m in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == whole


def test_a_listing_cursor_is_refused_by_a_search(shelf: Registry) -> None:
    first = shelf.client.get("/api/models", params={"limit": 1}).json()
    response = shelf.client.get(
        "/api/models", params={"q": "sentiment", "cursor": first["next_cursor"]}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"
