"""The isolation of parallel workers: each has its own Redis database and its own block
of ports (its own PostgreSQL database is checked by every database test it runs: the
template's copy carries an installation id of its own)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.conftest import PG_ENV, TEMPLATE_MARKER, run_folder, skip_or_fail
from tests.isolation import PORTS_FIRST, PORTS_PER_WORKER, REDIS_ENV, free_port, isolate_redis


@pytest.mark.parametrize(
    ("worker", "url", "isolated"),
    [
        ("gw0", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1"),
        ("gw3", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/4"),
        ("gw1", "redis://:secret@cache:6380/5", "redis://:secret@cache:6380/7"),
        ("gw0", "redis://127.0.0.1:6379", "redis://127.0.0.1:6379/1"),
        ("master", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_each_worker_has_a_redis_database_of_its_own(
    monkeypatch: pytest.MonkeyPatch, worker: str, url: str, isolated: str
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv(REDIS_ENV, url)
    isolate_redis()
    assert os.environ[REDIS_ENV] == isolated


def test_too_many_workers_for_redis_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw15")
    monkeypatch.setenv(REDIS_ENV, "redis://127.0.0.1:6379/0")
    with pytest.raises(RuntimeError, match="at most 15 workers"):
        isolate_redis()


@pytest.mark.parametrize("worker", ["gw0", "gw2"])
def test_ports_come_from_the_workers_own_block(
    monkeypatch: pytest.MonkeyPatch, worker: str
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    first = PORTS_FIRST + int(worker[2:]) * PORTS_PER_WORKER
    ports = {free_port() for _ in range(20)}
    assert all(first <= port < first + PORTS_PER_WORKER for port in ports), ports
    assert max(ports) < 32768  # below the kernel's ephemeral range


def test_this_workers_postgresql_database_is_its_own(
    postgres_url: str | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Copied from the run's template, with an installation id the template lacks (and so
    every other worker's copy)."""
    if postgres_url is None:
        skip_or_fail(f"PostgreSQL tests need {PG_ENV}")
    assert postgres_url is not None
    own = make_url(postgres_url)
    template = (run_folder(tmp_path_factory) / TEMPLATE_MARKER).read_text()
    assert own.database is not None and own.database.startswith("mp_test_")
    ids = {}
    for name in (own.database, template):
        engine = create_engine(own.set(database=name))
        with engine.connect() as conn:
            (ids[name],) = conn.execute(text("SELECT id FROM installation")).scalars().all()
        engine.dispose()
    assert len(set(ids.values())) == 2, ids
