"""The SQLite ledger builds each row straight from the event's document (``sqlite_row``):
it must give exactly the bind values of the general path (``event_row`` and
SQLAlchemy's bind processors), store timestamps as SQLAlchemy does, and leave any
document it does not recognise to the general path, which accepts or refuses it as
before."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelport.metering.ledger import Ledger, event_row, sqlite_row, sqlite_time
from modelport.metering.outbox import EncodedEvent
from modelport.metering.types import FailureRule, Unit, UsageStatus
from modelport.store import Database, create_database
from modelport.store.tables import UsageEventRow

NOW = datetime(2026, 12, 1, 12, 0, 0, 654_321, tzinfo=UTC)
STORED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}")
"""How SQLAlchemy stores a datetime on SQLite."""

BASE: dict[str, Any] = {
    "event_id": "0123456789abcdef0123456789abcdef:prediction",
    "tenant": "beta",
    "key_id": "k1",
    "model": "acme/adder",
    "version": "1",
    "manifest_digest": "sha256:" + "ab" * 32,
    "unit": "prediction",
    "quantity": 1,
    "status": "succeeded",
    "started_at": "2026-11-30T13:00:00.123456+00:00",
    "finished_at": "2026-11-30T13:00:00.223456+00:00",
    "price_rule_id": 3,
    "price_unit_price_micros": 2_500,
    "price_per_units": 1,
    "price_failure_rule": "none",
    "price_failure_bps": 0,
    "price_revenue_share_bps": 7_000,
    "amount_micros": 2_500,
    "publisher_micros": 1_750,
    "endpoint": None,
    "task": "",
    "compute_ms": 0.5,
    "wall_ms": 1.25,
    "request_id": "r" * 32,
    "prediction_id": "0123456789abcdef0123456789abcdef",
    "source": "inference",
    "reservation_id": None,
}
OPTIONAL = ("endpoint", "task", "compute_ms", "gpu_ms", "wall_ms", "request_id", "prediction_id")

ODD_TIMESTAMPS = [
    "2026-11-30T13:00:00Z",  # another spelling of UTC
    "2026-11-30T14:00:00+01:00",
    "2026-11-30T08:00:00.5-05:00",
    "2026-11-30T13:00:00",  # naive: refused by the bind processor
    "2026-11-30 13:00:00+00:00",
    "2026-11-30T13:00:00.123+00:00",
    "2026-11-30T13:00+00:00",
    "2026-11-30T13:00:00.1234567+00:00",
    "2026-11-30T13:00:00.123456+00:00\n",
    "2026-11-30T13:00:00-00:00",
    "2026-11-30T13:00:00+0000",
    "20261130T130000+00:00",
    "2026-02-29T13:00:00+00:00",  # not a leap year
    "2026-02-31T13:00:00+00:00",
    "2026-04-31T13:00:00+00:00",
    "2026-13-01T13:00:00+00:00",
    "2026-11-00T13:00:00+00:00",
    "0000-01-01T00:00:00+00:00",
    "2026-11-30T24:00:00+00:00",
    "2026-11-30T23:60:00+00:00",
    "2026-11-30T23:59:60+00:00",
    "\uff12\uff10\uff12\uff16-11-30T13:00:00+00:00",  # fullwidth digits
    "2026-11-30T13:00:00.\u0661\u0662\u0663\u0664\u0665\u0666+00:00",  # Arabic-Indic
    "2026-11-2\u0660T13:00:00+00:00",
    "2026-11-30T1\u0663:00:00+00:00",
    "2026-11-30T13:0\u0660:0\u0660+00:00",
    "",
    "garbage",
    None,
    1_764_507_600,
    1_764_507_600.5,
    ["2026-11-30T13:00:00+00:00"],
]


@pytest.fixture(scope="module")
def database() -> Iterator[Database]:
    """Row building only needs the dialect: an empty in-memory SQLite database."""
    db = create_database("sqlite://")
    yield db
    db.dispose()


@pytest.fixture(scope="module")
def ledger(database: Database) -> Ledger:
    return Ledger(database, now=lambda: NOW)


def outcome(build: Callable[[], Any]) -> tuple[Any, ...]:
    """What building a row gives: the row, or the error's type and arguments."""
    try:
        return ("row", build())
    except Exception as exc:
        return (type(exc), exc.args)


def fast(ledger: Ledger, doc: dict[str, Any]) -> tuple[Any, ...]:
    """The row the ledger builds on SQLite for ``doc``, or its error."""
    event = EncodedEvent("the-id", 0, doc)
    return outcome(lambda: ledger._sqlite_rows([event], NOW)["the-id"])


def general(ledger: Ledger, doc: dict[str, Any]) -> tuple[Any, ...]:
    return outcome(lambda: ledger.general_row(doc, NOW))


def timestamps() -> st.SearchStrategy[str]:
    """``isoformat()`` of aware datetimes, mostly UTC (the meter's form)."""
    zones = st.sampled_from(
        [
            UTC,
            UTC,
            UTC,
            timezone(timedelta(0)),
            timezone(timedelta(hours=-5)),
            timezone(timedelta(hours=5, minutes=30)),
        ]
    )
    moments = st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=zones
    )
    whole = moments.map(lambda m: m.replace(microsecond=0))
    return st.one_of(moments, whole).map(datetime.isoformat)


def documents() -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed event documents, optional fields sometimes left out."""
    counts = st.integers(min_value=-(2**63), max_value=2**63 - 1)
    fields = st.fixed_dictionaries(
        {
            "event_id": st.text(min_size=1, max_size=40),
            "tenant": st.text(max_size=20),
            "key_id": st.one_of(st.none(), st.text(max_size=20)),
            "model": st.text(max_size=30),
            "unit": st.sampled_from([u.value for u in Unit]),
            "quantity": counts,
            "status": st.sampled_from([s.value for s in UsageStatus]),
            "started_at": timestamps(),
            "finished_at": timestamps(),
            "price_rule_id": st.one_of(st.none(), st.integers(0, 2**31)),
            "price_unit_price_micros": counts,
            "price_per_units": st.integers(1, 10**6),
            "price_failure_rule": st.sampled_from([r.value for r in FailureRule]),
            "price_failure_bps": st.integers(0, 10_000),
            "amount_micros": counts,
            "publisher_micros": counts,
            "endpoint": st.one_of(st.none(), st.text(max_size=20)),
            "task": st.text(max_size=10),
            "compute_ms": st.floats(allow_nan=False),
            "gpu_ms": st.floats(allow_nan=False),
            "wall_ms": st.one_of(st.floats(allow_nan=False), st.integers(0, 10**6)),
            "reservation_id": st.one_of(st.none(), st.text(max_size=32)),
        }
    )
    dropped = st.sets(st.sampled_from(OPTIONAL))
    return st.tuples(fields, dropped).map(
        lambda pair: {k: v for k, v in {**BASE, **pair[0]}.items() if k not in pair[1]}
    )


@settings(max_examples=300, deadline=None)
@given(doc=documents())
def test_the_fast_row_is_the_general_row(ledger: Ledger, doc: dict[str, Any]) -> None:
    assert fast(ledger, doc) == general(ledger, doc)


@settings(max_examples=300, deadline=None)
@given(doc=documents())
def test_a_utc_timestamp_of_the_meter_takes_the_fast_path(
    ledger: Ledger, doc: dict[str, Any]
) -> None:
    stamp = ledger.general_row({**BASE, "started_at": NOW.isoformat()}, NOW)[-1]
    row = sqlite_row(doc, stamp)
    utc = all(doc[k].endswith("+00:00") for k in ("started_at", "finished_at"))
    assert (row is not None) == utc  # a UTC timestamp in any other spelling is not the form
    if row is not None:
        assert ("row", row) == general(ledger, doc)


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["parsec", "12", "1.5", "", "acme", *[t for t in ODD_TIMESTAMPS if t]]),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=500, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from(sorted(BASE)), st.one_of(st.just(...), JUNK), max_size=3
    )
)
def test_a_malformed_document_fails_or_passes_as_on_the_general_path(
    ledger: Ledger, changes: dict[str, Any]
) -> None:
    """A field left out (``...``) or of a wrong kind: the same row or the same error."""
    doc = {k: v for k, v in {**BASE, **changes}.items() if v is not ...}
    assert fast(ledger, doc) == general(ledger, doc)


@pytest.mark.parametrize("field", ["started_at", "finished_at"])
@pytest.mark.parametrize("value", ODD_TIMESTAMPS, ids=repr)
def test_a_timestamp_in_another_form_takes_the_general_path(
    ledger: Ledger, field: str, value: Any
) -> None:
    assert sqlite_time(value) is None
    doc = {**BASE, field: value}
    assert fast(ledger, doc) == general(ledger, doc)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("2026-11-30T13:00:00.123456+00:00", "2026-11-30 13:00:00.123456"),
        ("2026-11-30T13:00:00+00:00", "2026-11-30 13:00:00.000000"),
        ("2024-02-29T23:59:59.999999+00:00", "2024-02-29 23:59:59.999999"),  # a leap day
        ("2026-12-31T00:00:00.000001+00:00", "2026-12-31 00:00:00.000001"),
        ("0001-01-01T00:00:00+00:00", "0001-01-01 00:00:00.000000"),
        ("9999-12-31T23:59:59.999999+00:00", "9999-12-31 23:59:59.999999"),
    ],
)
def test_a_timestamp_of_the_meter_is_converted_by_slicing(
    ledger: Ledger, value: str, stored: str
) -> None:
    assert sqlite_time(value) == stored
    names = [c.name for c in UsageEventRow.__table__.columns if c.name != "seq"]
    row = ledger.general_row({**BASE, "started_at": value}, NOW)
    assert row[names.index("started_at")] == stored


@pytest.fixture
def migrated(sqlite_template: Path, tmp_path: Path) -> Iterator[Database]:
    path = tmp_path / "modelport.db"
    shutil.copyfile(sqlite_template, path)
    db = create_database(f"sqlite:///{path}")
    yield db
    db.dispose()


def stored_times(db: Database, event_id: str) -> tuple[str, str, str]:
    with db.transaction() as session:
        row = session.connection().exec_driver_sql(
            "SELECT started_at, finished_at, recorded_at FROM usage_events WHERE event_id = ?",
            (event_id,),
        )
        return tuple(row.one())  # type: ignore[return-value]


@pytest.mark.parametrize(
    "started_at",
    [
        "2026-11-30T13:00:00.123456+00:00",
        "2026-11-30T13:00:00+00:00",  # microseconds 0: no fraction in the document
        "2026-11-30T08:00:00.123456-05:00",  # the general path
    ],
)
def test_timestamps_are_stored_as_sqlalchemy_stores_them(
    migrated: Database, started_at: str
) -> None:
    """The text SQLite holds is what a SQLAlchemy insert of the same row holds (billing
    compares it with SQLAlchemy's parameters)."""
    doc = {**BASE, "event_id": "ledger", "started_at": started_at}
    Ledger(migrated, now=lambda: NOW).record([EncodedEvent("ledger", 0, doc)])
    reference = event_row({**doc, "event_id": "core"}, NOW)
    with migrated.transaction() as session:
        session.execute(UsageEventRow.__table__.insert(), [reference])
    assert stored_times(migrated, "ledger") == stored_times(migrated, "core")
    assert all(STORED.fullmatch(t) for t in stored_times(migrated, "ledger"))
    assert stored_times(migrated, "ledger")[2] == "2026-12-01 12:00:00.654321"
