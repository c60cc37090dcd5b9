"""/v2 calls under a tenant's moderation policy, on real ONNX models: inputs blocked
before anything is reserved (no charge), outputs withheld after the call was billed,
every decision audited; a tenant without a policy (or one not for synchronous calls)
is unaffected; a classifier model moderates through the inference service."""

from __future__ import annotations

from modelport.moderation import Disposition, Stage, Strictness, Threshold
from modelport.moderation.types import DecisionQuery
from tests.moderation.conftest import World


def decisions(world: World, tenant: str = "beta") -> list:
    return list(world.services.moderation.decisions(DecisionQuery(tenant=tenant)).items)


def test_a_blocked_input_is_refused_before_anything_is_reserved_and_costs_nothing(
    moderated: World,
) -> None:
    moderated.price("acme/echo", 1_000)
    policy = moderated.policy()
    refused = moderated.say("hello", "the password = hunter2", request_id="req-block")
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "content_blocked"
    assert moderated.balance() == (10_000, 0)
    assert moderated.platform.entries() == []
    [record] = decisions(moderated)
    assert record.tenant == "beta" and record.stage is Stage.INPUT
    assert record.disposition is Disposition.BLOCKED and record.categories == ("secrets",)
    assert "password" in record.reason
    assert (record.policy_id, record.policy_version) == (policy.id, policy.version)
    assert (record.model, record.version) == ("acme/echo", "1")
    assert record.request_id == "req-block" and record.job_id is None
    assert record.created_at.tzinfo is not None


def test_an_allowed_call_is_answered_and_billed_with_its_decision_recorded(
    moderated: World,
) -> None:
    moderated.price("acme/echo", 1_000)
    moderated.policy()
    answered = moderated.say("Darn", "hello")  # low severity: flagged at medium
    assert answered.status_code == 200, answered.text
    assert answered.json()["outputs"][0]["data"] == ["Darn", "hello"]
    assert moderated.balance() == (9_000, 0)
    found = {(r.stage, r.disposition) for r in decisions(moderated)}
    assert found == {(Stage.INPUT, Disposition.FLAGGED), (Stage.OUTPUT, Disposition.FLAGGED)}


def test_a_blocked_output_is_withheld_and_billed_as_answered(moderated: World) -> None:
    moderated.price("acme/labeller", 1_000)
    moderated.policy()
    assert moderated.label(0).status_code == 200
    withheld = moderated.label(0, 1, request_id="req-out")
    assert withheld.status_code == 400, withheld.text
    assert withheld.json()["code"] == "content_blocked"
    assert "forbidden" not in withheld.text  # the answer is not shown
    assert moderated.balance() == (8_000, 0)  # the model ran: both calls billed
    assert len(moderated.platform.entries()) == 2
    blocked = [r for r in decisions(moderated) if r.disposition is Disposition.BLOCKED]
    assert [(r.stage, r.categories, r.request_id) for r in blocked] == [
        (Stage.OUTPUT, ("fruit",), "req-out")
    ]
    # Its input (numbers) had no text: no input decision.
    assert all(r.stage is Stage.OUTPUT for r in decisions(moderated))


def test_strictness_decides_what_blocks(moderated: World) -> None:
    moderated.policy(strictness=Strictness.LOW)
    assert moderated.label(1).status_code == 200  # medium severity: only flagged at low
    moderated.policy(strictness=Strictness.HIGH)
    assert moderated.say("darn").status_code == 400  # low severity blocks at high
    moderated.policy(strictness=Strictness.OFF)
    assert moderated.say("password = x").status_code == 200
    versions = [r.policy_version for r in decisions(moderated)]
    assert set(versions) == {1, 2}  # an "off" policy decides nothing


def test_a_tenant_without_a_policy_or_with_one_for_jobs_only_is_unaffected(
    moderated: World,
) -> None:
    moderated.policy()
    assert moderated.say("password = x", key=moderated.gamma_key).status_code == 200
    assert decisions(moderated, "gamma") == []
    moderated.policy(sync=False)
    assert moderated.say("password = x").status_code == 200
    assert decisions(moderated) == []


def test_a_classifier_model_scores_the_texts_through_the_inference_service(
    moderated: World,
) -> None:
    moderated.price("acme/echo", 1_000)
    moderated.policy(rules=(), classifier="beta/toxicity")
    assert moderated.say("we will destroy them").status_code == 400  # 0.95 >= 0.7
    assert moderated.balance() == (10_000, 0)
    [record] = decisions(moderated)
    assert record.categories == ("violence",) and record.scores["violence"] > 0.9
    assert record.scores["spam"] == 0.0
    flagged = moderated.say("kill time")  # 0.5: flagged at medium, not blocked
    assert flagged.status_code == 200
    assert decisions(moderated)[0].disposition is Disposition.FLAGGED
    # A tenant's own thresholds replace the strictness's.
    moderated.policy(
        rules=(), classifier="beta/toxicity", thresholds={"violence": Threshold(0.1, 0.4)}
    )
    assert moderated.say("kill time").status_code == 400


def test_a_classifier_that_cannot_run_fails_the_call_closed(moderated: World) -> None:
    moderated.policy(rules=(), classifier="beta/missing")
    failed = moderated.say("hello")
    assert failed.status_code == 503, failed.text
    assert failed.json()["code"] == "moderation_unavailable"
    assert moderated.balance() == (10_000, 0)


def test_another_tenants_private_classifier_is_not_reachable(moderated: World) -> None:
    moderated.policy("gamma", rules=(), classifier="beta/toxicity")
    failed = moderated.say("hello", key=moderated.gamma_key)
    assert failed.status_code == 503
    assert failed.json()["code"] == "moderation_unavailable"
