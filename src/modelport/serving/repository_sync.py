"""Telling every process that serves the platform about a repository load or unload.

Call order: ``start(apply)`` once the process can apply others' changes; ``publish``
after a local load or unload succeeded; ``close`` at shutdown. ``apply`` is called on
the subscriber's thread, must not block, and is never called with this process's own
changes.

- ``LocalRepositorySync`` (one process): there is nobody to tell.
- ``RedisRepositorySync`` (several processes sharing one Redis): publishes each change
  on a Redis channel every process subscribes to. Delivery is at most once: a process
  that is not subscribed when a change is published (disconnected, restarting) never
  sees it and keeps the state it has; loading on demand still works there.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import orjson

from modelport.background.subscription import Subscription, redis_client
from modelport.keyspace import Keyspace

_log = logging.getLogger(__name__)

Action = Literal["load", "unload"]
_ACTIONS = ("load", "unload")


@dataclass(frozen=True)
class RepositoryChange:
    """One load or unload of an explicit version, by the process ``origin``."""

    action: Action
    model: str  # owner/name
    version: str | None  # the resolved version string, never an alias; None: every
    # hosted version of the model (an unload only)
    pinned: bool = False
    origin: str = ""


def process_id() -> str:
    """An id for this process's sync, unique even among syncs in one process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RepositorySync(Protocol):
    @property
    def origin(self) -> str:
        """This process's id, to put in the changes it publishes."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes may host versions too (then a version not hosted
        here may still be hosted elsewhere)."""
        ...

    def publish(self, change: RepositoryChange) -> None:
        """Tell the other processes (never raises: the local change already happened)."""
        ...

    def start(self, apply: Callable[[RepositoryChange], None]) -> None:
        """Call ``apply`` with every other process's change from now on."""
        ...

    def close(self) -> None: ...


class LocalRepositorySync:
    shared = False

    def __init__(self) -> None:
        self.origin = process_id()

    def publish(self, change: RepositoryChange) -> None:
        pass

    def start(self, apply: Callable[[RepositoryChange], None]) -> None:
        pass

    def close(self) -> None:
        pass


class RedisRepositorySync:
    """Publishes changes on the installation's channel ``repository``; a daemon thread
    hands the others' to ``apply``."""

    shared = True

    def __init__(self, url: str, keys: Keyspace) -> None:
        self.origin = process_id()
        self.channel = keys.name("repository")
        self.client_name = f"modelport-repository-{uuid.uuid4().hex[:12]}"
        self._client = redis_client(url, self.client_name)
        self._subscription = Subscription(
            self._client, self.channel, self._receive, name="modelport-repository-sync"
        )
        self._apply: Callable[[RepositoryChange], None] | None = None

    def publish(self, change: RepositoryChange) -> None:
        try:
            self._client.publish(self.channel, encode(change))
        except Exception:  # the change happened here; the others keep their state
            _log.exception(
                "could not tell the other processes: %s %s:%s",
                change.action,
                change.model,
                change.version,
            )

    def start(self, apply: Callable[[RepositoryChange], None]) -> None:
        self._apply = apply  # a second start (another app on these services) takes over
        self._subscription.start()

    @property
    def subscribed(self) -> bool:
        return self._subscription.subscribed.is_set()

    def wait_subscribed(self, timeout: float) -> bool:
        return self._subscription.subscribed.wait(timeout)

    def close(self) -> None:
        self._subscription.stop()
        self._client.close()

    def _receive(self, data: bytes) -> None:
        try:
            change = decode(data)
        except ValueError as exc:
            _log.warning("ignoring a malformed repository change: %s", exc)
            return
        if change.origin != self.origin and self._apply is not None:
            self._apply(change)


def encode(change: RepositoryChange) -> bytes:
    return orjson.dumps(
        {
            "action": change.action,
            "model": change.model,
            "version": change.version,
            "pinned": change.pinned,
            "origin": change.origin,
        }
    )


def decode(data: bytes | str) -> RepositoryChange:
    """The change in ``data``; ValueError when it is not one."""
    doc = orjson.loads(data)  # JSONDecodeError is a ValueError
    if not isinstance(doc, dict):
        raise ValueError(f"not an object: {data!r}")
    action, model, version = doc.get("action"), doc.get("model"), doc.get("version")
    pinned, origin = doc.get("pinned", False), doc.get("origin", "")
    if action not in _ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if not isinstance(model, str) or model.count("/") != 1:
        raise ValueError(f"model must be 'owner/name', not {model!r}")
    if not (isinstance(version, str) and version) and not (version is None and action == "unload"):
        raise ValueError(f"version must be a string, not {version!r}")
    if not isinstance(pinned, bool) or not isinstance(origin, str):
        raise ValueError(f"bad 'pinned' or 'origin' in {data!r}")
    return RepositoryChange(action, model, version, pinned, origin)
