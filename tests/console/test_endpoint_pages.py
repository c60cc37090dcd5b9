"""The endpoint pages over the real app: an endpoint's traffic split, its canary's
progress and gates, its shadow's comparison and traffic per version; the rollback form
moves traffic back, and refuses a forged form, a member without the deployer role and
another tenant."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from modelport.console import endpoint_pages
from modelport.console.charts import split_bar
from modelport.console.endpoint_pages import canary_view, duration
from modelport.runtime.types import Priority
from modelport.tenancy.types import Tier
from tests.console.conftest import Console, browser_client, csrf_of, sign_in
from tests.console.endpoint_seed import ENDPOINT, Deployed, deploy_canary, wait_for

PAGE = f"/console/endpoints/{ENDPOINT}"


@pytest.fixture
def deployed(console: Console) -> Deployed:
    return deploy_canary(console)


def signed_in(deployed: Deployed, key: str):  # type: ignore[no-untyped-def]
    client = browser_client(deployed.console)
    sign_in(client, key)
    return client


def rollback_path(deployed: Deployed) -> str:
    return f"{PAGE}/deployments/{deployed.canary_id}/rollback"


def text_of(html: str) -> str:
    """The page's text, tags out and spaces folded, for reading numbers in context."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_list_shows_each_endpoints_split_and_state(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.deployer_key)
    page = client.get("/console/endpoints")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "acme/summer:1 — 50%" in text and "acme/summer:2 — 50%" in text
    assert f"active (deployment {deployed.canary_id})" in text
    assert "canary, progressing" in text
    assert f'href="{PAGE}"' in page.text


def test_the_page_shows_the_split_the_canarys_progress_and_its_gates(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.deployer_key)
    before = text_of(client.get(PAGE).text)
    assert "Step 1 of 2 (50% → 100%)" in before
    assert "Candidate share 50%" in before
    assert re.search(r"In this step for \d+ s of at least 1 h 0 min", before)
    assert "Candidate requests this step 0 at least 5 not judged yet" in before
    deployed.predict(40)
    api = deployed.deployment(deployed.canary_id)
    stable, candidate = (v["traffic"]["requests"] for v in api["versions"])
    assert stable + candidate == 40 and candidate >= 5  # 50/50: fewer than 5 is ~1e-7
    page = client.get(PAGE)
    assert page.status_code == 200
    text = text_of(page.text)
    assert f"Candidate requests this step {candidate} at least 5 passing" in text
    assert re.search(r"Candidate error rate 0\.0% at most 5\.0% passing", text)
    assert "Candidate p99 latency (ms)" in text
    # The split as a bar with a text equivalent, the versions' own windows beside it.
    assert 'role="img"' in page.text
    assert "Traffic by version: acme/summer:1 50%, acme/summer:2 50%" in page.text
    assert f"acme/summer:2 candidate 50% ready {candidate} 0 (0.0%)" in text


def test_the_shadows_comparison_and_the_logged_traffic_are_shown(deployed: Deployed) -> None:
    deployed.predict(12)
    wait_for(
        lambda: deployed.deployment(deployed.canary_id)["shadow"]["comparison"]["requests"] >= 12,
        "the shadow's copies",
    )

    def logged() -> list[dict[str, object]] | None:
        found = deployed.api("GET", f"/api/endpoints/{ENDPOINT}/traffic").json()["versions"]
        return found if sum(int(v["predictions"]) for v in found) >= 24 else None

    versions = wait_for(logged, "the prediction log")
    client = signed_in(deployed, deployed.reader_key)  # reading needs no deployer role
    page = client.get(PAGE)
    assert page.status_code == 200
    text = text_of(page.text)
    assert "Shadow comparison: acme/summer:3" in text
    assert "Agreement 100.0% (0 disagreed)" in text
    assert "Copies answered 12 of 12" in text
    for row in versions:
        name = f"{row['model']}:{row['version']}" + (" (shadow)" if row["shadow"] else "")
        assert f"{name} {row['predictions']} 0 0.0% 0" in text
    assert "acme/summer:3 (shadow) 12 0 0.0% 0" in text


def test_rolling_back_through_the_form_moves_the_traffic_back(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.deployer_key)
    page = client.get(PAGE)
    assert f"Roll back deployment {deployed.canary_id}" in page.text
    response = client.post(
        rollback_path(deployed), data={"csrf_token": csrf_of(page.text)}, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == f"{PAGE}?rolled={deployed.canary_id}"
    assert deployed.traffic() == [{"model": "acme/summer", "version": "1", "weight": 100}]
    assert deployed.deployment(deployed.canary_id)["state"] == "rolled_back"
    after = client.get(response.headers["location"])
    text = text_of(after.text)
    assert f"Deployment {deployed.canary_id} was rolled back" in text
    assert f"{deployed.canary_id} rolled back canary, progressing" in text
    assert f"{deployed.stable_id} active manual acme/summer:1 100%" in text
    assert "Roll back deployment" not in after.text  # nothing left to roll back to
    assert "Canary progress" not in after.text
    # Again: the API's refusal, with its code, on the page.
    again = client.post(rollback_path(deployed), data={"csrf_token": csrf_of(after.text)})
    assert again.status_code == 409
    assert "(deployment_not_active)" in again.text


def test_a_forged_form_is_refused(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.deployer_key)
    for token in ({"csrf_token": "forged"}, {}):
        response = client.post(rollback_path(deployed), data=token)
        assert response.status_code == 403
        assert "csrf_refused" in response.text
    assert [t["weight"] for t in deployed.traffic()] == [50, 50]


def test_a_member_without_the_deployer_role_is_refused_with_the_apis_code(
    deployed: Deployed,
) -> None:
    client = signed_in(deployed, deployed.reader_key)
    page = client.get(PAGE)
    assert page.status_code == 200
    response = client.post(rollback_path(deployed), data={"csrf_token": csrf_of(page.text)})
    assert response.status_code == 403
    assert re.search(r'role="alert" id="error">[^<]*\(forbidden\)', response.text)
    assert [t["weight"] for t in deployed.traffic()] == [50, 50]


def test_another_tenant_is_refused_by_url(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.console.gamma_key)
    listed = client.get("/console/endpoints")
    assert listed.status_code == 200 and ENDPOINT not in text_of(listed.text).split("Endpoints")[-1]
    page = client.get(PAGE)
    assert page.status_code == 404
    assert "endpoint_not_found" in page.text and "acme/summer" not in page.text
    form = client.get("/console/keys")
    response = client.post(rollback_path(deployed), data={"csrf_token": csrf_of(form.text)})
    assert response.status_code == 404 and "endpoint_not_found" in response.text
    assert [t["weight"] for t in deployed.traffic()] == [50, 50]


def test_the_split_bar_gives_each_share_its_width() -> None:
    bar = split_bar([("a:1", 25), ("a:2", 75), ("a:3", 0)])
    assert [(s.x, s.width) for s in bar.segments] == [(0.0, 160.0), (160.0, 480.0), (640.0, 0.0)]
    assert len({s.shade for s in bar.segments}) == 3


def test_a_canarys_progress_reads_the_apis_rollout() -> None:
    deployment = {
        "versions": [
            {"model": "acme/a", "version": "1", "weight": 75},
            {"model": "acme/a", "version": "2", "weight": 25},
        ],
        "rollout": {
            "policy": "canary",
            "status": "progressing",
            "step": 1,
            "steps": [5, 25, 100],
            "since": "2026-12-01T12:00:00+00:00",
            "interval_seconds": 300,
            "gates": [{"name": "requests", "observed": 3, "limit": 20, "passing": False}],
        },
    }
    view = canary_view(deployment, datetime(2026, 12, 1, 12, 2, 5, tzinfo=UTC))
    assert view is not None
    assert (view["step_number"], view["share"], view["candidate"]) == (2, 25, "acme/a:2")
    assert (view["elapsed"], view["remaining"]) == ("2 min 5 s", "2 min 55 s")
    assert view["gates"][0]["label"] == "Candidate requests this step"
    assert canary_view({"versions": [], "rollout": {"policy": "manual"}}, datetime.now(UTC)) is None
    assert duration(7260) == "2 h 1 min" and duration(-3) == "0 s"


def _policy(deployed: Deployed) -> object:
    response = deployed.api("GET", f"/api/endpoints/{ENDPOINT}/degradation")
    assert response.status_code == 200, response.text
    return response.json()["policy"]


def test_the_owner_sets_and_clears_the_degradation_policy(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.deployer_key)
    page = client.get(PAGE).text
    assert "No policy of its own: the installation's applies." in page
    token = csrf_of(page)
    saved = client.post(
        f"{PAGE}/degradation",
        data={
            "csrf_token": token,
            "enabled": "on",
            "queue_wait_seconds": "2.5",
            "fallback": "acme/summer:1",
            "tiers": ["free", "standard"],
        },
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    assert _policy(deployed) == {
        "enabled": True,
        "queue_wait_seconds": 2.5,
        "fallback": "acme/summer:1",
        "priorities": None,  # nothing ticked: the installation's
        "tiers": ["free", "standard"],
    }
    shown = text_of(client.get(PAGE).text)
    assert "Queue wait above 2.5 s Fallback acme/summer:1" in shown
    assert "Priorities that give way the installation's Tiers that give way free, standard" in (
        shown
    )

    refused = client.post(
        f"{PAGE}/degradation",
        data={"csrf_token": token, "enabled": "on", "fallback": "beta/nothing"},
    )
    assert refused.status_code == 400
    assert "(degrade_fallback_not_callable)" in refused.text
    bad = client.post(
        f"{PAGE}/degradation", data={"csrf_token": token, "queue_wait_seconds": "soon"}
    )
    assert bad.status_code == 400 and "(invalid_request)" in bad.text
    assert _policy(deployed)["fallback"] == "acme/summer:1"  # type: ignore[index]

    cleared = client.post(
        f"{PAGE}/degradation/clear", data={"csrf_token": token}, follow_redirects=False
    )
    assert cleared.status_code == 303
    assert _policy(deployed) is None
    assert "the installation's applies" in client.get(PAGE).text


def test_a_reader_sees_the_policy_but_may_not_change_it(deployed: Deployed) -> None:
    client = signed_in(deployed, deployed.reader_key)
    token = csrf_of(client.get(PAGE).text)
    refused = client.post(f"{PAGE}/degradation", data={"csrf_token": token})
    assert refused.status_code == 403 and "(forbidden)" in refused.text
    forged = signed_in(deployed, deployed.deployer_key).post(
        f"{PAGE}/degradation/clear", data={"csrf_token": "forged"}
    )
    assert forged.status_code == 403 and "<code>csrf_refused</code>" in forged.text
    assert _policy(deployed) is None


def test_the_degradation_form_offers_every_priority_and_tier() -> None:
    assert tuple(p.value for p in Priority) == endpoint_pages.PRIORITIES
    assert tuple(t.value for t in Tier) == endpoint_pages.TIERS
