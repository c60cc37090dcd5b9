"""Deliveries against a real receiver on loopback (allow-listed), on SQLite and
PostgreSQL: signed, retried with backoff until delivered, given up after the retry
window, redelivered with the same id; the URL checked again at every attempt."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import orjson
import pytest

from modelport.clock import ManualClock
from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.store import Database
from modelport.store.secrets import SecretBox
from modelport.webhooks.repository import WebhookRepository
from modelport.webhooks.service import WebhookService
from modelport.webhooks.types import DeliveryStatus, Outcome
from tests.conftest import TEST_SECRET_KEY
from tests.webhooks.conftest import Receiver, make_service, reference, verify

EVENT = {"job": "job_1", "state": "succeeded", "outputs": [{"url": "https://x/y"}]}


def test_a_delivery_is_signed_and_logged(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    secret = webhooks.rotate_secret("acme").secret
    delivery_id = webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    assert webhooks.drain() == 1
    [got] = receiver.requests
    assert got.path == "/hooks/jobs"
    assert got.headers["content-type"] == "application/json"
    envelope = verify(secret, got)
    assert envelope == {
        "type": "job.succeeded",
        "timestamp": clock.now().isoformat(),
        "data": EVENT,
    }
    detail = webhooks.delivery(delivery_id)
    assert detail.delivery.status is DeliveryStatus.DELIVERED
    assert detail.delivery.message_id == got.headers["webhook-id"]
    assert detail.delivery.next_attempt_at is None
    assert [(a.number, a.status_code, a.error) for a in detail.attempts] == [(1, 204, None)]
    assert webhooks.drain() == 0  # nothing is sent twice


def test_a_failing_receiver_is_retried_with_backoff_until_it_answers(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    secret = webhooks.rotate_secret("acme").secret
    receiver.fail_first = 2
    delivery_id = webhooks.enqueue("acme", receiver.url, "job.failed", EVENT, "job_1")
    assert webhooks.drain() == 1
    pending = webhooks.delivery(delivery_id).delivery
    assert pending.status is DeliveryStatus.PENDING
    assert pending.next_attempt_at == clock.now() + timedelta(seconds=5)  # jitter at its ceiling
    assert webhooks.drain() == 0  # not due yet
    clock.advance(5)
    assert webhooks.drain() == 1
    pending = webhooks.delivery(delivery_id).delivery
    assert pending.next_attempt_at == clock.now() + timedelta(seconds=10)
    clock.advance(10)
    assert webhooks.drain() == 1
    detail = webhooks.delivery(delivery_id)
    assert detail.delivery.status is DeliveryStatus.DELIVERED
    assert [(a.status_code, a.error) for a in detail.attempts] == [
        (500, "HTTP 500"),
        (500, "HTTP 500"),
        (204, None),
    ]
    assert detail.delivery.attempts == 3
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1
    for request in receiver.requests:
        verify(secret, request)


def test_a_delivery_is_given_up_after_the_retry_window(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    receiver.fail_first = 1000
    delivery_id = webhooks.enqueue("acme", receiver.url, "job.failed", EVENT, "job_1")
    for _ in range(20):
        webhooks.drain()
        due = webhooks.delivery(delivery_id).delivery.next_attempt_at
        if due is None:
            break
        clock.advance((due - clock.now()).total_seconds())
    detail = webhooks.delivery(delivery_id)
    # attempts at 0, 5, 15, 35 s; the next (75 s) would be past the 60 s window
    assert detail.delivery.status is DeliveryStatus.FAILED
    assert len(detail.attempts) == 4 == len(receiver.requests)
    assert detail.delivery.finished_at is not None
    assert detail.delivery.next_attempt_at is None
    assert detail.delivery.last_status_code == 500


def test_a_redirect_is_not_followed(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    receiver.fail_first, receiver.fail_status = 1, 302
    receiver.fail_headers = {"location": "http://169.254.169.254/latest/meta-data/"}
    delivery_id = webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    webhooks.drain()
    detail = webhooks.delivery(delivery_id)
    assert [a.status_code for a in detail.attempts] == [302]
    assert detail.delivery.status is DeliveryStatus.PENDING
    assert len(receiver.requests) == 1


def test_an_unreachable_receiver_is_an_attempt_with_an_error(
    webhooks: WebhookService, receiver: Receiver, database: Database, clock: ManualClock
) -> None:
    port = receiver.port
    receiver.close()  # nothing listens there now
    delivery_id = webhooks.enqueue(
        "acme", f"http://127.0.0.1:{port}/gone", "job.succeeded", EVENT, "job_1"
    )
    webhooks.drain()
    [attempt] = webhooks.delivery(delivery_id).attempts
    assert attempt.status_code is None and attempt.error


def test_rotation_signs_with_both_secrets_during_the_overlap_then_the_new_one(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    first = webhooks.rotate_secret("acme")
    assert first.created and first.info.signing_secrets == 1
    second = webhooks.rotate_secret("acme")
    assert not second.created
    assert second.info.signing_secrets == 2
    assert second.info.previous_valid_until == clock.now() + timedelta(seconds=120)
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    webhooks.drain()
    during = receiver.requests[-1]
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    verify(first.secret, during)
    verify(second.secret, during)

    clock.advance(121)
    assert webhooks.secret_info("acme").signing_secrets == 1
    assert webhooks.secret_info("acme").previous_valid_until is None
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_2")
    webhooks.drain()
    after = receiver.requests[-1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    verify(second.secret, after)
    standardwebhooks = reference()
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(first.secret).verify(after.body, after.headers)


def test_a_secret_is_made_on_first_enqueue_and_shown_to_nobody(
    webhooks: WebhookService, receiver: Receiver
) -> None:
    with pytest.raises(NotFound) as caught:
        webhooks.secret_info("acme")
    assert caught.value.code == "webhook_secret_not_found"
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    assert webhooks.secret_info("acme").signing_secrets == 1
    webhooks.drain()
    # the tenant rotates to learn a secret; the unseen one overlaps, and either verifies
    issued = webhooks.rotate_secret("acme")
    assert not issued.created
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_2")
    webhooks.drain()
    verify(issued.secret, receiver.requests[-1])


def test_redeliver_sends_the_same_message_again_as_a_new_delivery(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    secret = webhooks.rotate_secret("acme").secret
    receiver.fail_first = 1
    first = webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    webhooks.drain()
    with pytest.raises(Conflict) as caught:
        webhooks.redeliver(first)  # still pending
    assert caught.value.code == "webhook_delivery_pending"
    clock.advance(5)
    webhooks.drain()
    again = webhooks.redeliver(first)
    assert again.id != first and again.redelivery_of == first
    webhooks.drain()
    assert webhooks.delivery(again.id).delivery.status is DeliveryStatus.DELIVERED
    ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert len(ids) == 3 and len(set(ids)) == 1
    assert receiver.requests[-1].body == receiver.requests[0].body
    verify(secret, receiver.requests[-1])
    page = webhooks.deliveries("acme", subject="job_1")
    assert [d.id for d in page.items] == [again.id, first]
    with pytest.raises(NotFound):
        webhooks.redeliver("nope")


def test_an_enqueue_with_the_same_key_makes_one_delivery(
    webhooks: WebhookService, receiver: Receiver
) -> None:
    first = webhooks.enqueue(
        "acme", receiver.url, "job.succeeded", EVENT, "job_1", dedupe_key="job_1:succeeded"
    )
    again = webhooks.enqueue(
        "acme", receiver.url, "job.succeeded", EVENT, "job_1", dedupe_key="job_1:succeeded"
    )
    other_tenant = webhooks.enqueue(
        "globex", receiver.url, "job.succeeded", EVENT, "job_1", dedupe_key="job_1:succeeded"
    )
    assert again == first != other_tenant
    webhooks.drain()
    assert len(receiver.requests) == 2
    assert len(webhooks.deliveries("acme").items) == 1


def test_a_bad_url_is_refused_at_enqueue(webhooks: WebhookService) -> None:
    for url, code in [
        ("http://hooks.example.com/", "webhook_url_not_https"),
        ("https://127.0.0.1/", "webhook_url_forbidden_address"),
        ("https://169.254.169.254/", "webhook_url_forbidden_address"),
        ("https://10.0.0.8/", "webhook_url_forbidden_address"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            webhooks.check_url(url)
        assert caught.value.code == code
        with pytest.raises(InvalidInput):
            webhooks.enqueue("acme", url, "job.succeeded", EVENT, "job_1")
    assert webhooks.deliveries("acme").items == ()
    with pytest.raises(InvalidInput) as caught:
        webhooks.enqueue("acme", "https://1.1.1.1/", "job.succeeded", {"x": "y" * 300_000}, "j")
    assert caught.value.code == "webhook_payload_too_large"


def test_an_address_that_turned_internal_after_enqueue_is_not_posted(
    database: Database, clock: ManualClock
) -> None:
    answers: dict[str, Sequence[str]] = {"hooks.example.com": ["93.184.216.34"]}
    service = make_service(database, clock, resolver=lambda host, port: answers[host])
    try:
        delivery_id = service.enqueue(
            "acme", "https://hooks.example.com/jobs", "job.succeeded", EVENT, "job_1"
        )
        answers["hooks.example.com"] = ["127.0.0.1"]  # DNS rebinding
        service.drain()
        [attempt] = service.delivery(delivery_id).attempts
        assert attempt.status_code is None
        assert attempt.error is not None
        assert attempt.error.startswith("webhook_url_forbidden_address")
        assert service.delivery(delivery_id).delivery.status is DeliveryStatus.PENDING
    finally:
        service.close()


def test_a_claim_is_held_for_its_lease_and_then_taken_again(
    webhooks: WebhookService, receiver: Receiver, database: Database, clock: ManualClock
) -> None:
    repository = WebhookRepository(database, SecretBox([TEST_SECRET_KEY]))
    delivery_id = webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    [taken] = repository.claim(clock.now(), "lease-a", timedelta(seconds=60), 10)
    assert taken.delivery.id == delivery_id
    assert repository.claim(clock.now(), "lease-b", timedelta(seconds=60), 10) == []
    assert webhooks.drain() == 0  # the service's deliverer skips it too
    clock.advance(61)  # the holder died
    [again] = repository.claim(clock.now(), "lease-b", timedelta(seconds=60), 10)
    # the first holder comes back late: its attempt is logged, the state is not its
    late = Outcome(204, None, 3)
    assert not repository.record(taken, late, clock.now(), None, clock.now())
    assert repository.record(again, late, clock.now(), None, clock.now())
    detail = webhooks.delivery(delivery_id)
    assert detail.delivery.status is DeliveryStatus.DELIVERED
    assert [a.number for a in detail.attempts] == [1, 2]


def test_the_log_pages_newest_first_by_subject(
    webhooks: WebhookService, receiver: Receiver, clock: ManualClock
) -> None:
    made = []
    for _ in range(5):
        made.append(webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1"))
        clock.advance(1)
    webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_2")
    webhooks.enqueue("globex", receiver.url, "job.succeeded", EVENT, "job_1")
    seen: list[str] = []
    cursor = None
    while True:
        page = webhooks.deliveries("acme", subject="job_1", limit=2, cursor=cursor)
        seen += [d.id for d in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == made[::-1]
    assert len(webhooks.deliveries("acme").items) == 6
    assert webhooks.deliveries("acme", status=DeliveryStatus.DELIVERED).items == ()
    with pytest.raises(InvalidInput) as caught:
        webhooks.deliveries("acme", cursor="!!")
    assert caught.value.code == "invalid_cursor"
    body = orjson.loads(webhooks.delivery(made[0]).delivery.body)
    assert body["data"] == EVENT


def test_deliverers_claiming_at_once_take_disjoint_deliveries(
    webhooks: WebhookService, receiver: Receiver, database: Database, clock: ManualClock
) -> None:
    made = {
        webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, f"job_{n}")
        for n in range(24)
    }
    repository = WebhookRepository(database, SecretBox([TEST_SECRET_KEY]))
    start = threading.Barrier(4)

    def claim(name: str) -> list[str]:
        start.wait()
        taken: list[str] = []
        while batch := repository.claim(clock.now(), name, timedelta(seconds=60), 3):
            taken += [c.delivery.id for c in batch]
        return taken

    with ThreadPoolExecutor(4) as pool:
        claims = list(pool.map(claim, ["a", "b", "c", "d"]))
    every = [delivery_id for taken in claims for delivery_id in taken]
    assert sorted(every) == sorted(made)  # each delivery taken once
