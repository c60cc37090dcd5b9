"""An endpoint call's record is the endpoint's, whatever sampling of direct calls its
tenant or its version asks: one record, its detail by the endpoint's ``log_policy``."""

from __future__ import annotations

from sqlalchemy import select

from modelport.store.tables import PredictionRow
from tests.polling import eventually
from tests.serving.conftest import Serving


def records(serving: Serving) -> list[PredictionRow]:
    with serving.services.database.transaction() as session:
        rows = list(session.scalars(select(PredictionRow)))
        session.expunge_all()
        return rows


def test_endpoint_calls_keep_the_endpoints_policy_under_direct_sampling(
    serving: Serving,
) -> None:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    every = {"rate": 1.0, "payloads": True}
    client = serving.client
    assert client.put("/api/tenants/acme/prediction-log", json=every).status_code == 200
    version_log = "/api/models/acme/fraud/versions/1/prediction-log"
    assert client.put(version_log, json=every).status_code == 200
    tenancy = serving.services.tenancy
    tenancy.add_member("acme", "cid", roles=["consumer"], actor="admin")
    key = tenancy.create_key("acme", "cid", name="k", actor="admin").secret
    answer = serving.predict("fraud", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    prediction = answer.json()["prediction_id"]
    assert eventually(lambda: bool(records(serving)))
    (record,) = records(serving)  # the endpoint's record, and no direct call's beside it
    assert (record.id, record.endpoint, record.tenant) == (prediction, "fraud", "acme")
    assert (record.detail, record.inputs, record.outputs) == ("none", None, None)
