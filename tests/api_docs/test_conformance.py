"""The descriptions hold against the live server, as checked by schemathesis (a tool no one
here wrote): every answer's status is documented, its content type is the documented one
and its body matches the documented schema (problem+json errors included), operations
that declare a key refuse a request without one, and nothing answers 5xx.

Bounded: a fixed number of examples per operation (``MODELPORT_TEST_DOC_EXAMPLES``, default
4), from a fixed seed, with the admin key and a tenant owner's key, against the seeded world
of the security suite on SQLite, served in a thread of this process.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, ThreadedServer
from tests.security.world import ADMIN, BACKEND_HOSTS, World
from tests.security.world import seed as seed_world

SEED = 20261217
EXAMPLES = int(os.environ.get("MODELPORT_TEST_DOC_EXAMPLES", "4"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    ignored_auth,
]


@dataclass(frozen=True)
class Mismatch:
    operation: str
    status: int
    failure: str
    curl: str

    def __str__(self) -> str:
        return f"{self.operation}: {self.status} {self.failure}\n    {self.curl}"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Any]:
    home = tmp_path_factory.mktemp("conformance-home")
    shutil.copyfile(sqlite_template, home / "modelport.db")
    services = build_services(
        Settings(
            home=home,
            database_url=f"sqlite:///{home / 'modelport.db'}",
            admin_key=ADMIN_KEY,
            auto_migrate=False,
            runtime_intra_op_threads=1,
            backend_allow_hosts=BACKEND_HOSTS,  # the world's backends: names never resolved
        )
    )
    app = create_app(services)
    try:
        with TestClient(app) as client:  # runs the lifespan for the server below too
            world = seed_world(client, services)
            server = ThreadedServer(app, lifespan="off").start()
            try:
                yield server, world
            finally:
                server.stop()
    finally:
        services.close()


def _run(operation: Any, keys: list[dict[str, str]], found: list[Mismatch]) -> None:
    """Each example of ``operation``, sent once with each of ``keys``: drawing it is the
    dear part, and with a fixed seed every key would be sent the same examples anyway."""
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        for headers in keys:
            response = case.call(headers=headers)
            try:
                case.validate_response(response, checks=CHECKS, headers=headers)
            except (AssertionError, BaseExceptionGroup) as exc:  # reported together below
                found.append(
                    Mismatch(
                        operation.label,
                        response.status_code,
                        " | ".join(str(exc).strip().splitlines()[1:4])[:400] or repr(exc),
                        case.as_curl_command(headers=headers),
                    )
                )

    run()


def _check(schema: Any, keys: dict[str, dict[str, str]]) -> None:
    found: list[Mismatch] = []
    for result in schema.get_all_operations():
        _run(result.ok(), list(keys.values()), found)
    distinct = {(m.operation, m.status, m.failure): m for m in found}
    assert not distinct, "the description is wrong:\n" + "\n".join(map(str, distinct.values()))


def test_the_api_description_holds_against_the_server(live: tuple[ThreadedServer, World]) -> None:
    server, world = live
    schema = schemathesis.openapi.from_url(f"{server.url}/api/openapi.json")
    _check(schema, {"admin": ADMIN, "owner": world.victim("owner")})


def test_the_v2_description_holds_against_the_server(live: tuple[ThreadedServer, World]) -> None:
    server, world = live
    schema = schemathesis.openapi.from_url(f"{server.url}/v2/openapi.json")
    _check(schema, {"consumer": world.victim("consumer")})
