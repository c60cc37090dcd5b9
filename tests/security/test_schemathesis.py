"""Property-based fuzzing of every ``/api`` operation in ``/api/openapi.json`` against a
live server on the real PostgreSQL: no request, valid or not, gets a 5xx.

Bounded: a fixed number of examples per operation, from a fixed seed, with the admin
key and with a tenant owner's key (the seeded adversarial world gives the operations
something to find). Every distinct server error is collected and reported together,
each with a ``curl`` line that reproduces it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from modelport.app import build_services
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, PG_ENV, LiveServer, skip_or_fail
from tests.databases import truncate_tables
from tests.security.world import ADMIN, BACKEND_HOSTS
from tests.security.world import seed as seed_world

# The run is bounded by its examples, not by time: on a loaded machine it can pass 300 s.
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.postgres, pytest.mark.timeout(900)]

SEED = 20261201
EXAMPLES = int(os.environ.get("MODELPORT_TEST_FUZZ_EXAMPLES", "40"))
"""Examples per operation and key (about 60-120 s in all on two cores)."""
REQUEST_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class ServerError:
    operation: str
    status: int
    detail: str
    curl: str

    def __str__(self) -> str:
        return f"{self.operation}: {self.status} {self.detail}\n    {self.curl}"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, postgres_url: str | None) -> Iterator[Any]:
    """A live server on PostgreSQL with the adversarial world seeded through it."""
    if postgres_url is None:
        skip_or_fail(f"the fuzzing run needs {PG_ENV}")
    assert postgres_url is not None
    truncate_tables(postgres_url)
    settings_ = Settings(
        home=tmp_path_factory.mktemp("fuzz-home"),
        database_url=postgres_url,
        admin_key=ADMIN_KEY,
        auto_migrate=False,
        runtime_intra_op_threads=1,
        backend_allow_hosts=BACKEND_HOSTS,  # the world's backends: names never resolved
    )
    services = build_services(settings_)
    server = LiveServer(services).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            world = seed_world(client, services)  # type: ignore[arg-type]
        yield server, world
    finally:
        server.stop()
        services.close()


def _fuzz(
    operation: Any,
    headers: dict[str, str],
    found: list[ServerError],
    statuses: dict[int, int],
) -> None:
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
        # A generous timeout: a slow answer on a loaded machine is not a server error,
        # and a hang still fails the run.
        response = case.call(headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=[not_a_server_error], headers=headers)
        except (AssertionError, BaseExceptionGroup):  # collected, reported together below
            found.append(
                ServerError(
                    operation.label,
                    response.status_code,
                    response.text[:300],
                    case.as_curl_command(headers=headers),
                )
            )

    run()


def test_no_operation_answers_a_server_error(live: Any) -> None:
    server, world = live
    schema = schemathesis.openapi.from_url(f"{server.url}/api/openapi.json")
    keys = {"admin": ADMIN, "tenant": world.victim("owner")}
    found: list[ServerError] = []
    statuses: dict[int, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        for headers in keys.values():
            _fuzz(operation, headers, found, statuses)
    distinct = {(e.operation, e.status): e for e in found}
    report = "\n".join([f"statuses: {sorted(statuses.items())}", *map(str, distinct.values())])
    Path(os.environ.get("MODELPORT_TEST_FUZZ_REPORT", os.devnull)).write_text(report)
    assert not distinct, "server errors:\n" + "\n".join(str(e) for e in distinct.values())
