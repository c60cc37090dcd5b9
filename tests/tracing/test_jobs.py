"""A job's trace: submitted in a traced request, its run continues that request's trace
(``job``, then a ``stage`` span per stage), and the infer stage's call has its steps under
its stage, with the job's call id and prediction id."""

from __future__ import annotations

import numpy as np

from modelport.observability import tracing
from tests.polling import eventually
from tests.tracing.conftest import Traced, children, named, one, trace_of

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_jobs_stages_continue_the_submitting_requests_trace(traced: Traced) -> None:
    services = traced.services
    services.tenancy.create_tenant("acme", actor="admin")
    traced.publisher.adder()
    services.tenancy.add_member("acme", "alice", roles=["owner"], actor="admin")
    key = services.tenancy.create_key("acme", "alice", name="jobs", actor="admin").secret
    rows = np.array([[1, 2, 3, 4]], np.float32)
    submitted = traced.client.post(
        "/api/jobs",
        json={
            "target": {"model": "acme/adder"},
            "inputs": [
                {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": rows.ravel().tolist()}
            ],
        },
        headers={"Authorization": f"Bearer {key}", "traceparent": TRACEPARENT},
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]

    def finished() -> bool:
        state = traced.client.get(f"/api/jobs/{job_id}", headers={"Authorization": f"Bearer {key}"})
        return state.json()["state"] == "succeeded" and bool(named(traced.spans(), "job"))

    assert eventually(finished)
    spans = traced.spans()
    submit = one(spans, "POST /api/jobs")
    job = one(spans, "job")
    assert job.attributes is not None and job.attributes[tracing.JOB_ID] == job_id
    # The job ran later, elsewhere: its span continues the submitting request's trace.
    assert job.parent is not None and submit.context is not None
    assert job.parent.span_id == submit.context.span_id
    assert format(submit.context.trace_id, "032x") == TRACEPARENT.split("-")[1]
    stages = children(spans, job)
    assert [s.name for s in stages] == ["stage", "stage", "stage"]
    assert [s.attributes["modelport.job.stage"] for s in stages if s.attributes] == [
        "validate",
        "infer",
        "postprocess",
    ]
    call_steps = [s.name for s in children(spans, stages[1])]
    for step in ("authorize", "admit", "reserve", "dispatch", "record", "settle"):
        assert step in call_steps, call_steps
    infer = stages[1].attributes
    assert infer is not None
    assert infer[tracing.PREDICTION_ID] == f"job:{job_id}:infer"
    assert str(infer[tracing.CALL_ID])
    in_trace = {s.name for s in trace_of(spans, submit)}
    assert {"job", "stage", "dispatch"} <= in_trace
