"""Lineage: parents declared in manifests, walked transitively both ways, with licenses."""

from __future__ import annotations

from tests.registry.helpers import Registry, manifest_for


def _parent(model: str, version: str, relation: str = "derived-from") -> dict[str, str]:
    return {"model": model, "version": version, "relation": relation}


def test_lineage_is_transitive_both_ways_with_licenses(registry: Registry) -> None:
    for ref in ("acme/base", "acme/tuned", "globex/small"):
        registry.create_model(ref)
    data = registry.data
    registry.publish("acme/base", "1", manifest_for(data, license="Apache-2.0"))
    registry.publish("acme/base", "2", manifest_for(data, license="MIT", description="other"))
    registry.publish(
        "acme/tuned",
        "1",
        manifest_for(
            data,
            license="Apache-2.0 AND MIT",
            parents=[
                _parent("acme/base", "1", "fine-tuned-from"),
                _parent("acme/base", "2", "merged-from"),
            ],
        ),
    )
    registry.publish(
        "globex/small",
        "1",
        manifest_for(data, license="MIT", parents=[_parent("acme/tuned", "1", "distilled-from")]),
    )
    # A diamond: small:2 descends from base:1 both directly and through tuned:1.
    registry.publish(
        "globex/small",
        "2",
        manifest_for(
            data,
            license="MIT",
            description="two",
            parents=[_parent("acme/tuned", "1", "quantized-from"), _parent("acme/base", "1")],
        ),
    )

    leaf = registry.client.get("/api/models/globex/small/versions/1/lineage").json()
    assert leaf["version"]["model"] == "globex/small"
    assert [
        (n["model"], n["version"], n["relation"], n["depth"], n["license"])
        for n in leaf["ancestors"]
    ] == [
        ("acme/tuned", "1", "distilled-from", 1, "Apache-2.0 AND MIT"),
        ("acme/base", "1", "fine-tuned-from", 2, "Apache-2.0"),
        ("acme/base", "2", "merged-from", 2, "MIT"),
    ]
    assert leaf["ancestor_licenses"] == ["Apache-2.0", "Apache-2.0 AND MIT", "MIT"]
    assert leaf["descendants"] == []

    root = registry.client.get("/api/models/acme/base/versions/1/lineage").json()
    assert root["ancestors"] == []
    assert root["ancestor_licenses"] == []
    assert [(n["model"], n["version"], n["depth"]) for n in root["descendants"]] == [
        ("acme/tuned", "1", 1),
        ("globex/small", "2", 1),
        ("globex/small", "1", 2),
    ]

    diamond = registry.client.get("/api/models/globex/small/versions/2/lineage").json()
    assert [(n["model"], n["version"], n["depth"]) for n in diamond["ancestors"]] == [
        ("acme/base", "1", 1),
        ("acme/tuned", "1", 1),
        ("acme/base", "2", 2),
    ]


def test_lineage_of_unknown_version_is_404(registry: Registry) -> None:
    registry.create_model("acme/base")
    response = registry.client.get("/api/models/acme/base/versions/1/lineage")
    assert response.status_code == 404
    assert response.json()["code"] == "version_not_found"


def test_duplicate_and_malformed_parents_are_refused(registry: Registry) -> None:
    registry.create_model("acme/base")
    registry.publish("acme/base", "1")
    twice = manifest_for(
        registry.data,
        description="x",
        parents=[_parent("acme/base", "1"), _parent("acme/base", "1")],
    )
    response = registry.client.post(
        "/api/models/acme/base/versions", json={"version": "2", "manifest": twice}
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_manifest")
    malformed = manifest_for(registry.data, description="y", parents=[_parent("no-slash", "1")])
    response = registry.client.post(
        "/api/models/acme/base/versions", json={"version": "2", "manifest": malformed}
    )
    assert (response.status_code, response.json()["code"]) == (400, "unknown_parent")
