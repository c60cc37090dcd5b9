"""A job's outputs by signed, expiring URL (``jobs.outputs``, ``jobs.signing``): a URL
opens its output without a key until it expires; a forged one, one for another job or
another output is refused; a large output is not inlined; the tenant's key opens its own
job's outputs, another tenant's opens nothing; the client and the CLI download them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from modelport.cli import modelport
from modelport.client import Client
from modelport.client.errors import ApiError
from modelport.clock import ManualClock
from modelport.errors import Forbidden
from modelport.jobs.signing import OutputSigner
from modelport.store.secrets import SecretBox
from tests.jobs.conftest import Jobs
from tests.metering.conftest import make_platform

ADDED = [2.0, 3.0, 4.0, 5.0]


@pytest.fixture
def small(tmp_path: Path, database_url: str) -> Iterator[Jobs]:
    """The jobs platform with outputs above 16 bytes shown by reference only."""
    platform = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, job_inline_output_bytes=16
    )
    yield Jobs(platform)
    platform.close_client()
    platform.services.close()


def _done(jobs: Jobs, **body: Any) -> dict[str, Any]:
    submitted = jobs.submit(**body)
    assert submitted.status_code == 202, submitted.text
    jobs.drain()
    done = jobs.get(submitted.json()["id"]).json()
    assert done["state"] == "succeeded", done
    return dict(done)


def _anonymous(jobs: Jobs) -> TestClient:
    """A client of the same application with no key at all."""
    return TestClient(jobs.platform.client.app)


def _path(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    return parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}


def _problem(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code


def test_a_signed_url_opens_the_output_without_a_key_until_it_expires(jobs: Jobs) -> None:
    clock = ManualClock()
    jobs.services.job_outputs.signer.now = clock.now  # URLs made and checked on it
    done = _done(jobs)
    output = done["output"]
    assert output["inline"] is True and output["digest"] == done["output_digest"]
    assert done["outputs"][0]["data"] == ADDED  # small: inline as well
    path, query = _path(output["url"])
    assert path == f"/api/jobs/{done['id']}/outputs/{output['digest']}"
    assert int(query["expires"]) - clock.now().timestamp() == pytest.approx(3600, abs=1)

    anonymous = _anonymous(jobs)
    fetched = anonymous.get(path, params=query)
    assert fetched.status_code == 200, fetched.text
    assert fetched.content == jobs.services.blobs.get(output["digest"])
    assert fetched.headers["content-length"] == str(output["size"])
    assert json.loads(fetched.content)["outputs"][0]["data"] == ADDED

    clock.advance(3599)
    assert anonymous.get(path, params=query).status_code == 200
    clock.advance(1)
    _problem(anonymous.get(path, params=query), 403, "url_expired")
    # A fresh read of the job signs a fresh URL.
    again = _path(jobs.get(done["id"]).json()["output"]["url"])
    assert anonymous.get(again[0], params=again[1]).status_code == 200


def test_forged_and_misapplied_signatures_are_refused(jobs: Jobs) -> None:
    done = _done(jobs)
    other = _done(
        jobs, inputs=[{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [9, 9, 9, 9]}]
    )
    path, query = _path(done["output"]["url"])
    anonymous = _anonymous(jobs)
    signature = query["signature"]
    flipped = ("0" if signature[0] != "0" else "1") + signature[1:]
    later = str(int(query["expires"]) + 3600)
    stage = done["stages"][0]["output_digest"]  # one of this job's, but not signed
    refused = [
        (path, {**query, "signature": flipped}),
        (path, {**query, "expires": later}),  # a longer life is not the signer's
        (path, {**query, "expires": "soon"}),
        (path, {"expires": query["expires"]}),
        (path, {"signature": signature}),
        (path.replace(done["id"], other["id"]), query),  # another job's output path
        (f"/api/jobs/{other['id']}/outputs/{other['output_digest']}", query),
        (f"/api/jobs/{done['id']}/outputs/{stage}", query),
        (f"/api/jobs/{'f' * 32}/outputs/{done['output_digest']}", query),
    ]
    for where, params in refused:
        _problem(anonymous.get(where, params=params), 403, "invalid_signature")
    # Another installation's key (the same job id and digest) does not verify either.
    stranger = OutputSigner(b"another key", seconds=60, now=jobs.services.clock.now)
    foreign = stranger.sign(done["id"], done["output_digest"])
    assert foreign is not None
    params = {"expires": str(foreign.expires), "signature": foreign.signature}
    _problem(anonymous.get(path, params=params), 403, "invalid_signature")


def test_the_tenants_key_opens_its_own_jobs_outputs_and_no_other_tenants(jobs: Jobs) -> None:
    done = _done(jobs)
    digest = done["output_digest"]
    path = f"/api/jobs/{done['id']}/outputs/{digest}"
    own = jobs.platform.client.get(path, headers=jobs.headers)
    assert own.status_code == 200 and own.content == jobs.services.blobs.get(digest)
    stage = done["stages"][0]["output_digest"]
    assert jobs.platform.client.get(path.replace(digest, stage), headers=jobs.headers).is_success

    services = jobs.services
    services.tenancy.add_member("acme", "acme-app", roles=["consumer"], actor="admin")
    secret = services.tenancy.create_key("acme", "acme-app", name="k", actor="admin").secret
    other = {"Authorization": f"Bearer {secret}"}
    _problem(jobs.platform.client.get(path, headers=other), 404, "job_not_found")
    # A blob that exists but is not one of the job's outputs.
    theirs = services.blobs.put(b"acme's own bytes", tenant="acme")
    unknown = path.replace(digest, theirs)
    _problem(jobs.platform.client.get(unknown, headers=jobs.headers), 404, "output_not_found")
    _problem(_anonymous(jobs).get(path), 401, "missing_credentials")


def test_a_large_output_is_not_inlined_only_referenced(small: Jobs) -> None:
    done = _done(small)
    assert "outputs" not in done and "model" not in done
    output = done["output"]
    size = small.services.blobs.stat(done["output_digest"]).size
    assert output == {
        "digest": done["output_digest"],
        "size": size,
        "inline": False,
        "url": output["url"],
    }
    assert size > 16
    path, query = _path(output["url"])
    fetched = _anonymous(small).get(path, params=query)
    assert fetched.status_code == 200
    assert json.loads(fetched.content)["outputs"][0]["data"] == ADDED


def test_a_tensor_batchs_shards_have_urls(jobs: Jobs) -> None:
    rows = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    out = io.BytesIO()
    np.save(out, rows)
    file = jobs.services.files.create("beta", "user_data", "rows.npy", out.getvalue())
    pipeline = [
        {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": 2}},
        {"name": "publish", "implementation": "tensor_publish"},
    ]
    done = _done(jobs, input_digest=file.digest, pipeline=pipeline)
    shards = done["manifest"]["shards"]
    assert [s["rows"] for s in shards] == [2, 2, 1]
    anonymous = _anonymous(jobs)
    parts = []
    for shard in shards:
        path, query = _path(shard["url"])
        assert path.endswith(shard["digest"])
        fetched = anonymous.get(path, params=query)
        assert fetched.status_code == 200
        parts.append(np.load(io.BytesIO(fetched.content), allow_pickle=False))
    np.testing.assert_array_equal(np.concatenate(parts), rows + 1)


@pytest.mark.slow
def test_the_client_downloads_and_the_cli_prints_urls(small: Jobs) -> None:
    done = _done(small)
    server = small.platform.live()
    try:
        client = Client(server.url, api_key=small.platform.key)
        data = client.jobs.output(done["id"])
        assert json.loads(data)["outputs"][0]["data"] == ADDED
        stage = done["stages"][0]["output_digest"]
        assert client.jobs.output(done["id"], stage) == small.services.blobs.get(stage)
        with pytest.raises(ApiError) as refused:
            client.jobs.output(done["id"], "sha256:" + "0" * 64)
        assert refused.value.code == "output_not_found"
        shown = CliRunner().invoke(
            modelport,
            ["--url", server.url, "--api-key", small.platform.key, "jobs", "show", done["id"]],
        )
        assert shown.exit_code == 0, shown.output
        assert f"url: {server.url}/api/jobs/{done['id']}/outputs/" in shown.output
        assert "bytes)" in shown.output
    finally:
        server.stop()


def test_the_configured_secret_signs_and_without_any_key_nothing_is_signed(
    tmp_path: Path, database_url: str
) -> None:
    platform = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, job_output_url_secret="s3cret"
    )
    jobs = Jobs(platform)
    try:
        done = _done(jobs)
        _, query = _path(done["output"]["url"])
        # Anyone holding the configured secret (another process) verifies the URL.
        alike = OutputSigner(b"s3cret", seconds=60, now=platform.services.clock.now)
        alike.verify(done["id"], done["output_digest"], query["expires"], query["signature"])
    finally:
        platform.close_client()
        platform.services.close()
    keyless = OutputSigner(None, seconds=60, now=ManualClock().now)
    assert not keyless.can_sign and keyless.sign("job", "sha256:" + "0" * 64) is None
    with pytest.raises(Forbidden) as refused:
        keyless.verify("job", "sha256:" + "0" * 64, "9999999999", "00")
    assert refused.value.code == "invalid_signature"


def test_keys_derived_from_the_secret_key_are_stable_and_apart() -> None:
    key = Fernet.generate_key()
    box, again = SecretBox([key]), SecretBox([key, Fernet.generate_key()])
    derived = box.derive("modelport job output urls")
    assert derived is not None and len(derived) == 32
    assert again.derive("modelport job output urls") == derived  # the newest key's
    assert box.derive("another use") != derived
    assert SecretBox([Fernet.generate_key()]).derive("modelport job output urls") != derived
    assert SecretBox([]).derive("modelport job output urls") is None
