"""Traffic split, sticky assignment and the atomic switch, on real ONNX versions served by
the local backend: the router driven directly for thousands of requests, and HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from tests.serving.conftest import Serving, add_constant

X = {"x": np.array([[1, 2, 3, 4]], dtype=np.float32)}


def within(count: int, n: int, share: float, sigmas: float = 4.5) -> bool:
    """``count`` of ``n`` draws is within ``sigmas`` binomial deviations of ``share``."""
    return abs(count - n * share) <= sigmas * (n * share * (1 - share)) ** 0.5


def two_versions(serving: Serving, weights: tuple[int, int]) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, weights[0]), (v2, weights[1])])


def test_router_split_over_thousands_of_requests(serving: Serving) -> None:
    two_versions(serving, (80, 20))
    router = serving.services.serving.router
    n = 4000

    async def drive() -> Counter[str]:
        seen: Counter[str] = Counter()
        for _ in range(n // 100):
            plans = [router.plan("fraud") for _ in range(100)]
            done = await asyncio.gather(
                *(router.predict(p, X, deadline=serving.clock.monotonic() + 10) for p in plans)
            )
            for prediction in done:
                assert prediction.version == prediction.chosen
                expected = 2.0 if prediction.chosen.version == "1" else 3.0
                assert float(prediction.outputs["y"][0, 0]) == expected  # that version ran
                seen[prediction.chosen.version] += 1
        return seen

    seen = asyncio.run(drive())
    assert seen["1"] + seen["2"] == n
    assert within(seen["2"], n, 0.20), seen


def test_http_split_and_the_version_in_the_answer(serving: Serving) -> None:
    two_versions(serving, (70, 30))
    n = 400
    seen: Counter[str] = Counter()
    for _ in range(n):
        answer = serving.predict("fraud").json()
        plus = answer["outputs"]["y"][0][0] - 1.0
        assert plus == (1.0 if answer["model_version"] == "1" else 2.0)
        seen[answer["model_version"]] += 1
    assert within(seen["2"], n, 0.30), seen


def test_sticky_subjects_see_one_version(serving: Serving) -> None:
    two_versions(serving, (50, 50))
    versions_by_subject = {}
    for i in range(40):
        subject = f"user-{i}"
        by_header = {
            serving.predict("fraud", headers={"X-Subject-Key": subject}).json()["model_version"]
            for _ in range(5)
        }
        body = {"inputs": {"x": [[1, 2, 3, 4]]}, "subject": subject}
        by_body = {serving.predict("fraud", body).json()["model_version"] for _ in range(5)}
        assert len(by_header) == 1 and by_header == by_body, subject
        versions_by_subject[subject] = by_header.pop()
    assert set(versions_by_subject.values()) == {"1", "2"}


def wait_until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_the_switch_is_atomic_and_fails_no_request_under_load(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    stop = threading.Event()
    failures: list[str] = []
    histories: list[list[str]] = [[] for _ in range(4)]

    def hammer(history: list[str]) -> None:
        while not stop.is_set():
            response = serving.predict("fraud")
            if response.status_code != 200:
                failures.append(response.text)
                continue
            history.append(response.json()["model_version"])

    threads = [threading.Thread(target=hammer, args=(h,)) for h in histories]
    for thread in threads:
        thread.start()
    try:
        # Every caller is answered by the old version before the switch, and again by
        # the new one after it, however slowly a loaded machine runs them.
        wait_until(lambda: all(histories))
        serving.deploy("fraud", [(v2, 100)])
        wait_until(lambda: all(h[-1] == "2" for h in histories))
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert failures == []
    for history in histories:
        assert history[0] == "1" and history[-1] == "2"
        switched = history.index("2")
        assert set(history[switched:]) == {"2"}, "a request saw the old version after the new"
