"""Formats are an allow-list: a version of a format the platform does not run reaches
``approved`` only after a platform admin accepted the format, with a reason, audited."""

from __future__ import annotations

from typing import Any

import httpx

from tests.registry.helpers import manifest_for
from tests.tenancy.conftest import ADMIN, World, model_bytes


def publish_validated(world: World, version: str, fmt: str) -> None:
    data = model_bytes("acme/private")
    body = manifest_for(data, fmt=fmt, path=f"model.{fmt}", examples=[])
    world.services.registry.publish("acme", "private", version, body, actor="acme/publisher")
    world.force_state("acme", "private", version, "validated")


def approve(world: World, version: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return world.client.post(
        f"/api/models/acme/private/versions/{version}/transitions",
        json={"to": "approved", "reason": "reviewed"},
        headers=headers or world.key("acme", "approver"),
    )


def accept(world: World, fmt: str, reason: str, headers: dict[str, str]) -> httpx.Response:
    return world.client.put(f"/api/formats/{fmt}", json={"reason": reason}, headers=headers)


def state(world: World, version: str) -> str:
    return world.services.registry.get_version("acme", "private", version).state.value


def audited(world: World, action: str) -> list[dict[str, Any]]:
    response = world.client.get("/api/audit", params={"action": action}, headers=ADMIN)
    return list(response.json()["items"])


def test_a_format_the_platform_does_not_run_needs_an_operator_decision(world: World) -> None:
    for version, fmt in (("t1", "pytorch"), ("t2", "gguf")):
        publish_validated(world, version, fmt)
        refused = approve(world, version)
        assert refused.status_code == 409, refused.text
        assert (refused.json()["code"], refused.json()["format"]) == (
            "format_not_approvable",
            fmt,
        )
        assert state(world, version) == "validated"

    # A tenant's own owner cannot take the platform's decision.
    owner = world.key("acme", "owner")
    assert accept(world, "gguf", "we trust it", owner).status_code == 403
    assert approve(world, "t2", owner).json()["code"] == "format_not_approvable"

    # The operator accepts gguf, with a reason that the audit log keeps.
    decided = accept(world, "gguf", "served by our llama.cpp backend; reviewed", ADMIN)
    assert decided.status_code == 200, decided.text
    assert decided.json()["decided_by"] == "admin"
    [event] = audited(world, "formats.accept")
    assert (event["actor"], event["outcome"], event["target"]) == (
        "admin",
        "success",
        "/api/formats/gguf",
    )
    assert event["reason"] == "served by our llama.cpp backend; reviewed"
    listed = world.client.get("/api/formats", headers=world.key("acme", "consumer")).json()
    # the installed format plugins
    assert listed["runnable"] == ["lightgbm", "onnx", "sklearn", "transformers", "xgboost"]
    assert [d["format"] for d in listed["accepted"]] == ["gguf"]

    assert approve(world, "t2").status_code == 201
    assert state(world, "t2") == "approved"
    # Only the format decided on: pytorch stays refused.
    assert approve(world, "t1").json()["code"] == "format_not_approvable"


def test_withdrawing_a_decision_stops_further_approvals(world: World) -> None:
    assert accept(world, "gguf", "trial", ADMIN).status_code == 200
    publish_validated(world, "w1", "gguf")
    publish_validated(world, "w2", "gguf")
    assert approve(world, "w1").status_code == 201
    assert world.client.delete("/api/formats/gguf", headers=ADMIN).status_code == 204
    assert [e["outcome"] for e in audited(world, "formats.withdraw")] == ["success"]
    assert approve(world, "w2").json()["code"] == "format_not_approvable"
    assert state(world, "w1") == "approved"  # not retroactive
    again = world.client.delete("/api/formats/gguf", headers=ADMIN)
    assert (again.status_code, again.json()["code"]) == (404, "format_decision_not_found")


def test_decisions_are_explicit_and_only_for_formats_that_need_one(world: World) -> None:
    for fmt, reason, code in (
        ("gguf", "   ", "reason_required"),
        ("pickle", "please", "unsafe_format"),
        ("onnx", "already runs", "format_runnable"),
        ("GGUF", "bad name", "invalid_format"),
    ):
        response = accept(world, fmt, reason, ADMIN)
        assert (response.status_code, response.json()["code"]) == (400, code), fmt
    assert world.client.get("/api/formats", headers=ADMIN).json()["accepted"] == []


def test_onnx_versions_need_no_decision(world: World) -> None:
    publish_validated(world, "o1", "onnx")
    assert approve(world, "o1").status_code == 201
