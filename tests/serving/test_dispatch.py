"""Dispatch over scripted backends: capability filter, retries onto other replicas,
breakers, health ordering, output checks, and every kind of fallback with its provenance."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from modelport.clock import ManualClock
from modelport.errors import (
    DeadlineExceeded,
    InvalidInput,
    Overloaded,
    Unavailable,
    Unprocessable,
)
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.answer_cache import AnswerCache, AnswerCaches
from modelport.serving.backends.fake import FakeBackend
from modelport.serving.breaker import BreakerConfig, BreakerState
from modelport.serving.dispatch import DispatchConfig, Dispatcher
from modelport.serving.fallback import (
    CacheOption,
    StaticOption,
    UnavailableOption,
    VersionOption,
    build_fallback,
    schema_problems,
)
from modelport.serving.health import HealthBoard, HealthProber
from modelport.serving.types import (
    Capabilities,
    FallbackChain,
    FallbackKind,
    VersionRef,
)
from tests.serving.backend_support import request_for, version_ref

T = TypeVar("T")
X = np.array([[1, 2, 3, 4]], dtype=np.float32)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(
    *, min_calls: int = 2, open_seconds: float = 5.0, **config: Any
) -> tuple[Dispatcher, HealthBoard, ServingMetrics, Clock]:
    clock = Clock()
    metrics = ServingMetrics(CollectorRegistry())
    board = HealthBoard(
        BreakerConfig(min_calls=min_calls, open_seconds=open_seconds, window_seconds=60),
        clock=clock,
        metrics=metrics,
    )
    return (
        Dispatcher(board, config=DispatchConfig(**config), metrics=metrics),
        board,
        metrics,
        clock,
    )


def sample(metrics: ServingMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


# ---- the primary path and retries -------------------------------------------------


def test_the_first_replica_answers_with_provenance() -> None:
    dispatcher, _, metrics, _ = make()
    version = version_ref()
    a, b = FakeBackend("a"), FakeBackend("b")
    served = run(dispatcher.dispatch(request_for(version, X), [a, b]))
    np.testing.assert_array_equal(served.outputs["y"], X + 1)
    assert served.provenance.version == version
    assert served.provenance.backend == "a"
    assert served.provenance.fallback is None
    assert [(t.backend, t.outcome) for t in served.provenance.attempts] == [("a", "ok")]
    assert len(b.calls) == 0
    assert sample(metrics, "modelport_serving_attempts_total", backend="a", outcome="ok") == 1


def test_a_failed_attempt_is_retried_on_another_replica_and_counted_on_its_breaker() -> None:
    dispatcher, board, metrics, _ = make(min_calls=10)
    a, b = FakeBackend("a"), FakeBackend("b", offset=1.0)
    a.failure = Unavailable("connection refused", code="backend_unreachable")
    served = run(dispatcher.dispatch(request_for(version_ref(), X), [a, b]))
    assert served.provenance.backend == "b"
    assert [(t.backend, t.outcome) for t in served.provenance.attempts] == [
        ("a", "backend_unreachable"),
        ("b", "ok"),
    ]
    assert board.breaker("a").snapshot().failures == 1
    assert sample(metrics, "modelport_serving_attempts_total", backend="a", outcome="failed") == 1


def test_an_invalid_request_is_not_retried_not_counted_and_not_answered_by_fallback() -> None:
    dispatcher, board, _, _ = make()
    a, b = FakeBackend("a"), FakeBackend("b")
    a.failure = InvalidInput("input 'x': wrong shape", code="invalid_tensor_shape")
    static = StaticOption({"y": np.zeros((1, 4), np.float32)})
    with pytest.raises(InvalidInput) as caught:
        run(dispatcher.dispatch(request_for(version_ref(), X), [a, b], fallback=[static]))
    assert caught.value.code == "invalid_tensor_shape"
    assert len(b.calls) == 0
    assert board.breaker("a").snapshot().calls == 0


def test_overloaded_and_version_scoped_failures_move_on_without_counting() -> None:
    dispatcher, board, _, _ = make()
    a, b, c = FakeBackend("a"), FakeBackend("b"), FakeBackend("c")
    a.failure = Overloaded("queue full", code="queue_full")
    b.failure = Unavailable("failed to load", code="model_load_failed", scope="version")
    served = run(dispatcher.dispatch(request_for(version_ref(), X), [a, b, c]))
    assert served.provenance.backend == "c"
    assert board.breaker("a").snapshot().calls == 0
    assert board.breaker("b").snapshot().calls == 0


def test_a_slow_replica_gets_the_attempt_timeout_and_the_next_one_answers() -> None:
    dispatcher, board, metrics, _ = make(attempt_timeout_seconds=0.1)
    slow, fast = FakeBackend("slow", delay=5.0), FakeBackend("fast")
    started = time.monotonic()
    served = run(dispatcher.dispatch(request_for(version_ref(), X, timeout=3.0), [slow, fast]))
    assert time.monotonic() - started < 2.5  # not the slow replica's 5 s, nor the deadline
    assert served.provenance.backend == "fast"
    assert served.provenance.attempts[0].outcome == "deadline_exceeded"
    assert board.breaker("slow").snapshot().failures == 1
    assert sample(metrics, "modelport_serving_attempts_total", backend="slow", outcome="timeout")


def test_the_deadline_bounds_the_whole_dispatch() -> None:
    dispatcher, _, _, _ = make()
    slow = FakeBackend("slow", delay=5.0)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        run(dispatcher.dispatch(request_for(version_ref(), X, timeout=0.2), [slow]))
    assert time.monotonic() - started < 2.5  # not the slow replica's 5 s


def test_at_most_max_attempts_replicas_are_tried() -> None:
    dispatcher, _, _, _ = make(max_attempts=2, min_calls=100)
    replicas = [FakeBackend(n) for n in "abc"]
    for replica in replicas:
        replica.failure = Unavailable("down", code="backend_unreachable")
    with pytest.raises(Unavailable) as caught:
        run(dispatcher.dispatch(request_for(version_ref(), X), replicas))
    assert [len(r.calls) for r in replicas] == [1, 1, 0]
    assert [a["backend"] for a in caught.value.extra["attempts"]] == ["a", "b"]


def test_an_open_breaker_keeps_requests_off_a_backend_until_it_recovers() -> None:
    dispatcher, board, _, clock = make(min_calls=2, open_seconds=5.0)
    a = FakeBackend("a")
    a.failure = Unavailable("down", code="backend_unreachable")
    version = version_ref()
    for _ in range(2):
        with pytest.raises(Unavailable):
            run(dispatcher.dispatch(request_for(version, X), [a]))
    assert board.breaker("a").state is BreakerState.OPEN
    with pytest.raises(Unavailable) as caught:
        run(dispatcher.dispatch(request_for(version, X), [a]))
    assert caught.value.code == "no_available_backend"
    assert caught.value.extra["retry_after"] == pytest.approx(5.0)
    assert len(a.calls) == 2, "an open breaker sends nothing to the backend"
    # After the cool-down one trial request goes through; its success closes the breaker.
    a.failure = None
    clock.now += 5.0
    served = run(dispatcher.dispatch(request_for(version, X), [a]))
    assert served.provenance.backend == "a"
    assert board.breaker("a").state is BreakerState.CLOSED


def test_replicas_last_probed_unhealthy_are_tried_last() -> None:
    dispatcher, board, _, _ = make()
    a, b = FakeBackend("a"), FakeBackend("b")
    a.healthy = False
    board.register(a)
    board.register(b)
    run(HealthProber(board, interval=1, timeout=1).probe_once())
    served = run(dispatcher.dispatch(request_for(version_ref(), X), [a, b]))
    assert served.provenance.backend == "b"
    assert len(a.calls) == 0


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"y": np.zeros((1, 4), np.float64)}, "backend_bad_output"),
        ({"y": np.zeros((4,), np.float32)}, "backend_bad_output"),
        ({"z": np.zeros((1, 4), np.float32)}, "backend_bad_output"),
    ],
)
def test_an_answer_that_does_not_match_the_declared_outputs_is_never_returned(
    bad: dict[str, np.ndarray], code: str
) -> None:
    dispatcher, _, _, _ = make()
    wrong = FakeBackend("wrong", answer=lambda _: bad)
    right = FakeBackend("right")
    served = run(dispatcher.dispatch(request_for(version_ref(), X), [wrong, right]))
    assert served.provenance.backend == "right"
    assert served.provenance.attempts[0].outcome == code


# ---- capability filtering ------------------------------------------------------


def onnx_only(name: str, **caps: Any) -> FakeBackend:
    return FakeBackend(
        name,
        capabilities=Capabilities(formats=frozenset({"onnx"}), **({"max_batch_size": 64} | caps)),
    )


def test_a_format_a_backend_cannot_run_is_never_sent_there() -> None:
    dispatcher, _, _, _ = make()
    onnx = onnx_only("onnx-runtime")
    tflite = FakeBackend("tflite", capabilities=Capabilities(formats=frozenset({"tflite"})))
    version = version_ref(fmt="tflite")
    served = run(dispatcher.dispatch(request_for(version, X), [onnx, tflite]))
    assert served.provenance.backend == "tflite"
    assert len(onnx.calls) == 0
    with pytest.raises(Unavailable) as caught:
        run(dispatcher.dispatch(request_for(version, X), [onnx]))
    assert caught.value.code == "no_capable_backend"
    assert "format 'tflite'" in caught.value.message
    assert len(onnx.calls) == 0


def test_batch_rows_hardware_and_protocol_filter_backends() -> None:
    dispatcher, _, _, _ = make()
    small = onnx_only("small", max_batch_size=2)
    big = onnx_only("big", max_batch_size=64)
    rows = np.ones((8, 4), np.float32)
    assert (
        run(dispatcher.dispatch(request_for(version_ref(), rows), [small, big])).provenance.backend
        == "big"
    )
    assert len(small.calls) == 0

    cpu = onnx_only("cpu")
    gpu = onnx_only("gpu", hardware=frozenset({"cpu", "cuda"}))
    needs_gpu = version_ref(resources={"hardware": ["cuda"]})
    assert (
        run(dispatcher.dispatch(request_for(needs_gpu, X), [cpu, gpu])).provenance.backend == "gpu"
    )
    assert len(cpu.calls) == 0

    v2 = onnx_only("v2")
    with pytest.raises(Unavailable) as caught:
        run(
            dispatcher.dispatch(
                request_for(version_ref(runtime={"protocol": "openai", "task": "chat"}), X), [v2]
            )
        )
    assert "protocol 'openai'" in caught.value.message
    assert len(v2.calls) == 0


def test_context_length_and_openai_tasks_filter_backends() -> None:
    dispatcher, _, _, _ = make()
    text = [{"name": "prompt", "datatype": "BYTES", "shape": [-1]}]
    chat = version_ref(
        "acme/llm",
        fmt="safetensors",
        inputs=text,
        outputs=[{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        runtime={"protocol": "openai", "task": "chat"},
    )

    def llm(name: str, tasks: set[str], context: int) -> FakeBackend:
        caps = Capabilities(
            formats=frozenset({"safetensors"}),
            max_batch_size=8,
            context_length=context,
            protocols=frozenset({"openai"}),
            tasks=frozenset(tasks),
        )
        return FakeBackend(name, capabilities=caps, answer=lambda r: {"text": r.inputs["prompt"]})

    embed_only = llm("embed-only", {"embeddings"}, 8192)
    short = llm("short", {"chat"}, 100)
    long = llm("long", {"chat", "completions"}, 8192)
    prompt = np.array(["x" * 300], dtype=object)  # about 75 tokens
    request = request_for(chat, prompt, name="prompt", parameters={"max_tokens": 50})
    served = run(dispatcher.dispatch(request, [embed_only, short, long]))
    assert served.provenance.backend == "long"
    assert len(embed_only.calls) == len(short.calls) == 0
    counted = request_for(chat, prompt, name="prompt", parameters={"prompt_tokens": 20})
    assert (
        run(dispatcher.dispatch(counted, [embed_only, short, long])).provenance.backend == "short"
    )


# ---- fallbacks -----------------------------------------------------------------


def failing(name: str = "primary") -> FakeBackend:
    backend = FakeBackend(name)
    backend.failure = Unavailable("down", code="backend_unreachable")
    return backend


def test_fallback_to_another_version_says_so_in_provenance_and_metrics() -> None:
    dispatcher, _, metrics, _ = make()
    primary, small = version_ref(), version_ref("acme/adder-small", "3")
    small_backend = FakeBackend("small-replica", offset=10.0)
    option = VersionOption(small, (small_backend,))
    served = run(
        dispatcher.dispatch(
            request_for(primary, X), [failing()], fallback=[option], endpoint="fraud"
        )
    )
    np.testing.assert_array_equal(served.outputs["y"], X + 10)
    assert served.provenance.fallback is FallbackKind.VERSION
    assert served.provenance.version == small
    assert served.provenance.backend == "small-replica"
    assert served.provenance.reason == "backend_unreachable"
    assert [a.backend for a in served.provenance.attempts] == ["primary", "small-replica"]
    assert small_backend.calls[0].version == small
    assert (
        sample(metrics, "modelport_serving_fallbacks_total", endpoint="fraud", kind="version") == 1
    )


def test_a_version_with_different_outputs_is_never_used_as_fallback() -> None:
    dispatcher, _, _, _ = make()
    primary = version_ref()
    other = version_ref(
        "acme/other", outputs=[{"name": "y", "datatype": "INT64", "shape": [-1, 4]}]
    )
    other_backend = FakeBackend("other-replica")
    static = StaticOption({"y": np.zeros((1, 4), np.float32)})
    served = run(
        dispatcher.dispatch(
            request_for(primary, X),
            [failing()],
            fallback=[VersionOption(other, (other_backend,)), static],
        )
    )
    assert len(other_backend.calls) == 0
    assert served.provenance.fallback is FallbackKind.STATIC


def test_cached_recent_answer_is_used_when_the_endpoint_allows_it() -> None:
    dispatcher, _, metrics, _ = make()
    clock = Clock()
    cache = AnswerCache(max_entries=8, ttl_seconds=60, clock=clock)
    primary = version_ref()
    replica = FakeBackend("replica", offset=5.0)
    option = CacheOption(cache)
    first = run(dispatcher.dispatch(request_for(primary, X), [replica], fallback=[option]))
    assert first.provenance.fallback is None
    assert len(cache) == 1
    replica.failure = Unavailable("down", code="backend_unreachable")
    clock.now += 30.0
    served = run(
        dispatcher.dispatch(request_for(primary, X), [replica], fallback=[option], endpoint="e")
    )
    np.testing.assert_array_equal(served.outputs["y"], X + 5)
    assert served.provenance.fallback is FallbackKind.CACHE
    assert served.provenance.version == primary
    assert served.provenance.backend is None
    assert served.provenance.age_seconds == pytest.approx(30.0)
    assert sample(metrics, "modelport_serving_fallbacks_total", endpoint="e", kind="cache") == 1
    # Other inputs were never answered: no cached answer; expired answers are not used.
    other = np.array([[9, 9, 9, 9]], np.float32)
    with pytest.raises(Unavailable):
        run(dispatcher.dispatch(request_for(primary, other), [replica], fallback=[option]))
    clock.now += 31.0
    with pytest.raises(Unavailable):
        run(dispatcher.dispatch(request_for(primary, X), [replica], fallback=[option]))


def test_cache_is_an_lru() -> None:
    cache = AnswerCache(max_entries=2, ttl_seconds=60)
    version = version_ref()
    for key in ("a", "b"):
        cache.put(key, {"y": X}, version, "r")
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", {"y": X}, version, "r")
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None


def test_static_answer_is_repeated_per_row_and_says_static() -> None:
    dispatcher, _, _, _ = make()
    static = StaticOption({"y": np.array([[0, 0, 0, 1]], np.float32)})
    rows = np.ones((3, 4), np.float32)
    served = run(
        dispatcher.dispatch(request_for(version_ref(), rows), [failing()], fallback=[static])
    )
    assert served.outputs["y"].shape == (3, 4)
    assert served.provenance.fallback is FallbackKind.STATIC
    assert served.provenance.version is None and served.provenance.backend is None
    assert served.provenance.reason == "backend_unreachable"


def test_explicit_unavailable_step_and_the_end_of_the_chain() -> None:
    dispatcher, _, metrics, _ = make()
    version = version_ref()
    with pytest.raises(Unavailable) as caught:
        run(
            dispatcher.dispatch(
                request_for(version, X),
                [failing()],
                fallback=[UnavailableOption("fraud scoring is down")],
                endpoint="e",
            )
        )
    assert caught.value.code == "endpoint_unavailable"
    assert caught.value.extra["fallback"] == "unavailable"
    assert caught.value.extra["reason"] == "backend_unreachable"
    assert caught.value.extra["attempts"][0]["backend"] == "primary"
    assert (
        sample(metrics, "modelport_serving_fallbacks_total", endpoint="e", kind="unavailable") == 1
    )
    # No chain: the primary's own error, with its attempts.
    with pytest.raises(Unavailable) as plain:
        run(dispatcher.dispatch(request_for(version, X), [failing()]))
    assert plain.value.code == "backend_unreachable"
    assert plain.value.extra["attempts"] == [
        {"backend": "primary", "version": "acme/adder:1", "outcome": "backend_unreachable"}
    ]


def test_no_capable_backend_goes_to_the_fallback_chain() -> None:
    dispatcher, _, _, _ = make()
    version = version_ref(fmt="tflite")
    onnx = onnx_only("onnx")
    static = StaticOption({"y": np.zeros((1, 4), np.float32)})
    served = run(dispatcher.dispatch(request_for(version, X), [onnx], fallback=[static]))
    assert served.provenance.reason == "no_capable_backend"
    assert len(onnx.calls) == 0


# ---- configuration ---------------------------------------------------------------


def resolver(*versions: VersionRef) -> Any:
    known = {(v.model, v.version): v for v in versions}
    return lambda model, version: known[(model, version)]


def test_build_fallback_turns_a_chain_into_options() -> None:
    primary, small = version_ref(), version_ref("acme/small", "2")
    replica = FakeBackend("small-1")
    chain = FallbackChain.model_validate(
        {
            "steps": [
                {"kind": "version", "model": "acme/small", "version": "2"},
                {"kind": "cache", "ttl_seconds": 10, "max_entries": 5},
                {
                    "kind": "static",
                    "outputs": [
                        {"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 1]}
                    ],
                },
                {"kind": "unavailable", "message": "down"},
            ]
        }
    )
    caches = AnswerCaches()
    options = build_fallback(
        chain,
        primary,
        endpoint="e",
        resolve=resolver(small),
        replicas_for=lambda v: [replica],
        caches=caches,
    )
    assert isinstance(options[0], VersionOption) and options[0].replicas == (replica,)
    assert isinstance(options[1], CacheOption)
    assert options[1].cache is caches.for_endpoint("e", max_entries=5, ttl_seconds=10)
    assert isinstance(options[2], StaticOption)
    np.testing.assert_array_equal(options[2].outputs["y"], [[0, 0, 0, 1]])
    assert isinstance(options[3], UnavailableOption)


@pytest.mark.parametrize(
    ("other", "problem"),
    [
        ({"outputs": [{"name": "y", "datatype": "FP64", "shape": [-1, 4]}]}, "output 'y' is FP64"),
        (
            {"outputs": [{"name": "z", "datatype": "FP32", "shape": [-1, 4]}]},
            "output 'y' is missing",
        ),
        ({"outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 3]}]}, "has shape"),
        (
            {
                "inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
                    {"name": "w", "datatype": "FP32", "shape": [1]},
                ]
            },
            "input 'w' is not one of the primary's",
        ),
        ({"postprocessing": {"labels": ["dog", "cat"]}}, "labels differ"),
    ],
)
def test_incompatible_fallback_versions_are_refused_at_configuration(
    other: dict[str, Any], problem: str
) -> None:
    primary = version_ref(postprocessing={"labels": ["cat", "dog"]})
    fields = {"postprocessing": {"labels": ["cat", "dog"]}} | other
    candidate = version_ref("acme/other", "1", **fields)
    assert any(problem in p for p in schema_problems(primary.manifest, candidate.manifest))
    chain = FallbackChain(steps=[{"kind": "version", "model": "acme/other", "version": "1"}])  # type: ignore[list-item]
    with pytest.raises(Unprocessable) as caught:
        build_fallback(
            chain,
            primary,
            endpoint="e",
            resolve=resolver(candidate),
            replicas_for=lambda v: [],
            caches=AnswerCaches(),
        )
    assert caught.value.code == "incompatible_fallback"


def test_a_static_answer_must_match_the_primary_outputs() -> None:
    chain = FallbackChain.model_validate(
        {
            "steps": [
                {
                    "kind": "static",
                    "outputs": [{"name": "y", "datatype": "INT64", "shape": [1], "data": [0]}],
                }
            ]
        }
    )
    with pytest.raises(Unprocessable) as caught:
        build_fallback(
            chain,
            version_ref(),
            endpoint="e",
            resolve=resolver(),
            replicas_for=lambda v: [],
            caches=AnswerCaches(),
        )
    assert caught.value.code == "incompatible_fallback"


@pytest.mark.parametrize(
    "steps",
    [
        [{"kind": "unavailable"}, {"kind": "cache"}],
        [{"kind": "cache"}, {"kind": "cache"}],
        [{"kind": "version", "model": "a/b"}],
        [{"kind": "telepathy"}],
    ],
)
def test_malformed_chains_are_refused(steps: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError):
        FallbackChain.model_validate({"steps": steps})


# ---- the prober ------------------------------------------------------------------


def test_the_prober_opens_a_dead_backends_breaker_and_its_trial_probe_closes_it() -> None:
    _, board, metrics, clock = make(min_calls=2, open_seconds=5.0)
    backend = FakeBackend("b")
    board.register(backend)
    prober = HealthProber(board, interval=1, timeout=1)
    backend.healthy = False
    run(prober.probe_once())
    run(prober.probe_once())
    assert board.status("b").breaker is BreakerState.OPEN
    assert sample(metrics, "modelport_serving_breaker_state", backend="b") == 2
    assert sample(metrics, "modelport_serving_backend_up", backend="b") == 0
    run(prober.probe_once())
    assert backend.probes == 2, "no probes while open"
    backend.healthy = True
    clock.now += 5.0
    run(prober.probe_once())
    assert board.status("b").breaker is BreakerState.CLOSED
    assert (
        sample(metrics, "modelport_serving_breaker_transitions_total", backend="b", to="half_open")
        == 1
    )
    assert sample(metrics, "modelport_serving_backend_up", backend="b") == 1


def test_a_probe_that_hangs_is_a_failed_probe() -> None:
    class Hanging(FakeBackend):
        async def health(self) -> Any:
            await asyncio.sleep(10)

    _, board, _, _ = make()
    board.register(Hanging("h"))
    started = time.monotonic()
    run(HealthProber(board, interval=1, timeout=0.05).probe_once())
    assert time.monotonic() - started < 5.0  # not the probe's 10 s
    assert board.health("h").value == "unhealthy"


def test_the_prober_runs_in_the_background() -> None:
    _, board, _, _ = make()
    backend = FakeBackend("b")
    board.register(backend)

    async def scenario() -> int:
        prober = HealthProber(board, interval=0.01, timeout=1)
        async with prober.running():
            while prober.rounds < 3:
                await asyncio.sleep(0.01)
        return backend.probes

    assert run(scenario()) >= 3
    assert board.unregister("b") is backend
    assert board.backends() == []


def test_the_prober_probes_on_the_clock_it_is_given() -> None:
    _, board, _, _ = make()
    backend = FakeBackend("b")
    board.register(backend)
    clock = ManualClock()
    prober = HealthProber(board, interval=30, timeout=1, clock=clock)

    async def settle(rounds: int) -> None:
        for _ in range(10_000):  # yield until the prober has probed and parked again
            if prober.rounds == rounds and clock.waits == [30.0]:
                return
            await asyncio.sleep(0)
        raise AssertionError(f"{prober.rounds} rounds")

    async def scenario() -> None:
        async with prober.running():
            await settle(1)  # the first round at once, then a wait of the interval
            clock.advance(29.0)
            await asyncio.sleep(0)
            assert prober.rounds == 1 and clock.waits == [1.0]
            clock.advance(1.0)
            await settle(2)

    run(scenario())
    assert backend.probes == 2 and clock.sleepers == 0
