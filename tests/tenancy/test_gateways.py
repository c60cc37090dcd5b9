"""Two gateway processes (``modelport serve``) sharing PostgreSQL and Redis: a key revoked
or rotated on one stops working on the other at once, though both cache keys."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from modelport.store import upgrade
from tests.conftest import PG_ENV, free_port, skip_or_fail
from tests.tenancy.conftest import bearer

pytestmark = pytest.mark.slow  # starts real processes

ADMIN_KEY = "gateway-admin-key-" + "y" * 24
ADMIN = bearer(ADMIN_KEY)


@pytest.fixture
def shared_database() -> Iterator[str]:
    base = os.environ.get(PG_ENV)
    if not base:
        skip_or_fail(f"the two-gateway test needs {PG_ENV}")
    assert base is not None
    url = make_url(base)
    name = f"mp_gateways_{os.getpid()}_{secrets.token_hex(3)}"
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    database = url.set(database=name).render_as_string(hide_password=False)
    upgrade(database)
    yield database
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Gateway:
    def __init__(self, home: Path, database: str, redis_url: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
        env |= {
            "MODELPORT_HOME": str(home),
            "MODELPORT_DATABASE_URL": database,
            "MODELPORT_ADMIN_KEY": ADMIN_KEY,
            # Long enough that only an invalidation can explain a key stopping.
            "MODELPORT_KEY_CACHE_TTL_SECONDS": "600",
        }
        if redis_url:
            env["MODELPORT_REDIS_URL"] = redis_url
        home.mkdir(parents=True)
        self.log = (home / "serve.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--port", str(self.port)],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {Path(self.log.name).read_text()}")
            try:
                if self.http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("gateway did not start")

    def status(self, key: str) -> int:
        return self.http.get("/api/tenants", headers=bearer(key)).status_code

    def warm(self, key: str) -> None:
        """Use the key until its credential is surely cached here (the subscription to
        invalidations starts with the first request)."""
        for _ in range(5):
            assert self.status(key) == 200
            time.sleep(0.1)

    def close(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        finally:
            self.log.close()


def stops_within(gateway: Gateway, key: str, seconds: float) -> float:
    """Seconds until ``key`` is refused on ``gateway``; fails after ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if gateway.status(key) == 401:
            return time.monotonic() - start
        time.sleep(0.005)
    pytest.fail(f"the key still worked on {gateway.url} after {seconds}s")


def test_revocation_and_rotation_reach_every_gateway(
    tmp_path: Path, shared_database: str, redis_url: str
) -> None:
    with ExitStack() as stack:
        a, b = (Gateway(tmp_path / n, shared_database, redis_url) for n in ("a", "b"))
        # Without Redis, a third process only learns of changes when its cache expires.
        lone = Gateway(tmp_path / "lone", shared_database, None)
        for gateway in (a, b, lone):
            stack.callback(gateway.close)
        for gateway in (a, b, lone):
            gateway.wait_ready()

        created = a.http.post(
            "/api/tenants", json={"slug": "acme", "owner": "alice"}, headers=ADMIN
        )
        assert created.status_code == 201, created.text
        for name in ("bob", "carol"):
            a.http.post(
                "/api/tenants/acme/members",
                json={"name": name, "roles": ["consumer"]},
                headers=ADMIN,
            )

        def new_key(member: str) -> dict[str, str]:
            body = {"tenant": "acme", "member": member, "name": member}
            response = a.http.post("/api/keys", json=body, headers=ADMIN)
            assert response.status_code == 201, response.text
            return response.json()  # type: ignore[no-any-return]

        bob, alice = new_key("bob"), new_key("alice")
        for gateway in (a, b, lone):
            gateway.warm(bob["key"])
        b.warm(alice["key"])

        # Revoked on A: refused on B at once. Half a minute leaves a loaded machine
        # time to pass the message on, yet is far inside the cache's ten minutes: only
        # the invalidation can explain it.
        assert a.http.delete(f"/api/keys/{bob['id']}", headers=ADMIN).status_code == 200
        stops_within(b, bob["key"], 30.0)
        assert a.status(bob["key"]) == 401
        # The process without Redis still trusts its cached copy: the reason for Redis.
        assert lone.status(bob["key"]) == 200

        # Rotated on A: the old key stops on B, the new one works there.
        rotated = a.http.post(f"/api/keys/{alice['id']}/rotate", headers=bearer(alice["key"]))
        assert rotated.status_code == 201, rotated.text
        stops_within(b, alice["key"], 30.0)
        assert b.status(rotated.json()["key"]) == 200

        # Removing a member on B revokes its keys on A.
        carol = new_key("carol")
        a.warm(carol["key"])
        removed = b.http.delete("/api/tenants/acme/members/carol", headers=ADMIN)
        assert removed.status_code == 204
        stops_within(a, carol["key"], 30.0)
