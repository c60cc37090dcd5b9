"""A real HTTP receiver on loopback, and the webhooks service over a real database with
a manual clock (the jitter fixed at its ceiling, so retry times are known)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from modelport.clock import ManualClock
from modelport.store import Database, create_database
from modelport.store.secrets import SecretBox
from modelport.webhooks.repository import WebhookRepository
from modelport.webhooks.sender import HttpSender
from modelport.webhooks.service import DeliveryConfig, WebhookService
from modelport.webhooks.urls import Resolver, UrlPolicy, system_resolver
from tests.conftest import TEST_SECRET_KEY, skip_or_fail


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Answers ``fail_first`` requests with ``fail_status``, then 204; keeps them all."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.fail_first = 0
        self.fail_status = 500
        self.fail_headers: dict[str, str] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    failing = len(receiver.requests) <= receiver.fail_first
                if failing:
                    self.send_response(receiver.fail_status)
                    for name, value in receiver.fail_headers.items():
                        self.send_header(name, value)
                else:
                    self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}/hooks/jobs"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = create_database(database_url)
    yield db
    db.dispose()


CONFIG = DeliveryConfig(
    retry_window=timedelta(seconds=60),
    retry_base_seconds=5.0,
    retry_max_seconds=40.0,
    secret_overlap=timedelta(seconds=120),  # within the verifier's 5 min tolerance
    uniform=lambda low, high: high,
)


def make_service(
    database: Database,
    clock: ManualClock,
    allow_hosts: tuple[str, ...] = (),
    resolver: Resolver = system_resolver,
    config: DeliveryConfig = CONFIG,
) -> WebhookService:
    return WebhookService(
        WebhookRepository(database, SecretBox([TEST_SECRET_KEY])),
        UrlPolicy(allow_hosts, resolver),
        HttpSender(timeout_seconds=5.0),
        clock,
        config,
    )


@pytest.fixture
def webhooks(
    database: Database, clock: ManualClock, receiver: Receiver
) -> Iterator[WebhookService]:
    service = make_service(database, clock, (receiver.host,))
    yield service
    service.close()


def reference() -> Any:
    """The Standard Webhooks reference library (the ``standardwebhooks`` package)."""
    try:
        import standardwebhooks
    except ImportError:
        skip_or_fail("the standardwebhooks reference library is not installed")
    return standardwebhooks


def verify(secret: str, received: Received) -> Any:
    """The body, as the Standard Webhooks reference library verifies it."""
    return reference().Webhook(secret).verify(received.body, received.headers)
