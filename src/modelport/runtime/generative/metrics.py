"""Prometheus metrics of generative engines, held by an instance (never module globals).

Register them on the runtime's registry (``RuntimeMetrics.registry``) so one
``/metrics`` page shows them beside the tensor metrics; in multiprocess mode (see
``observability.multiprocess``) the gauges add up over live workers (``livesum``).

Series (``model`` is ``owner/name``):

- ``modelport_generation_time_to_first_token_seconds{model,version}``: from submission
  to a sequence's first token
- ``modelport_generation_time_per_output_token_seconds{model,version}``: a finished
  sequence's mean time between its tokens
- ``modelport_generation_prompt_tokens_total{model,version}``
- ``modelport_generation_tokens_total{model,version}``: generated tokens
- ``modelport_generation_preemptions_total{model,version}``
- ``modelport_generation_running_sequences{model,version}``
- ``modelport_generation_waiting_sequences{model,version}``
- ``modelport_generation_kv_cache_bytes{model,version}``: KV memory reserved by
  admitted sequences
- ``modelport_generation_prefix_cache_queried_tokens_total{model,version}`` and
  ``modelport_generation_prefix_cache_hit_tokens_total{model,version}``: prompt tokens
  admitted, and those of them found already computed (the hit rate is their ratio)
- ``modelport_generation_engine_info{model,version,engine}``: 1 for the engine that
  runs the version (``llama.cpp`` or ``transformers``)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LABELS = ("model", "version")


@dataclass(frozen=True)
class EngineMetrics:
    """The labelled children of one engine (resolved once)."""

    time_to_first_token: Any
    time_per_output_token: Any
    prompt_tokens: Any
    generated_tokens: Any
    preemptions: Any
    running: Any
    waiting: Any
    kv_cache_bytes: Any
    prefix_queried_tokens: Any
    prefix_hit_tokens: Any


class GenerationMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.ttft = Histogram(
            "modelport_generation_time_to_first_token_seconds",
            "Time from a request's submission to a sequence's first token.",
            LABELS,
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "modelport_generation_time_per_output_token_seconds",
            "Mean time between the output tokens of a finished sequence.",
            LABELS,
            buckets=TPOT_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = Counter(
            "modelport_generation_prompt_tokens", "Prompt tokens submitted.", LABELS, registry=r
        )
        self.tokens = Counter(
            "modelport_generation_tokens", "Output tokens generated.", LABELS, registry=r
        )
        self.preemptions = Counter(
            "modelport_generation_preemptions",
            "Running sequences preempted (to be recomputed) for higher-priority ones.",
            LABELS,
            registry=r,
        )
        self.running = Gauge(
            "modelport_generation_running_sequences",
            "Sequences decoded together.",
            LABELS,
            registry=r,
            multiprocess_mode="livesum",
        )
        self.waiting = Gauge(
            "modelport_generation_waiting_sequences",
            "Sequences waiting for admission.",
            LABELS,
            registry=r,
            multiprocess_mode="livesum",
        )
        self.kv_bytes = Gauge(
            "modelport_generation_kv_cache_bytes",
            "KV cache memory reserved by admitted sequences.",
            LABELS,
            registry=r,
            multiprocess_mode="livesum",
        )
        self.prefix_queried = Counter(
            "modelport_generation_prefix_cache_queried_tokens",
            "Prompt tokens of admitted sequences (the prefix cache was asked for them).",
            LABELS,
            registry=r,
        )
        self.prefix_hits = Counter(
            "modelport_generation_prefix_cache_hit_tokens",
            "Prompt tokens found already computed in the KV cache (not prefilled again).",
            LABELS,
            registry=r,
        )
        self.engine_info = Gauge(
            "modelport_generation_engine_info",
            "1 for the engine that runs a version (llama.cpp or transformers).",
            (*LABELS, "engine"),
            registry=r,
            multiprocess_mode="livemax",
        )

    def engine(self, model: str, version: str, kind: str = "transformers") -> EngineMetrics:
        labels = (model, version)
        self.engine_info.labels(model, version, kind).set(1)
        return EngineMetrics(
            self.ttft.labels(*labels),
            self.tpot.labels(*labels),
            self.prompt_tokens.labels(*labels),
            self.tokens.labels(*labels),
            self.preemptions.labels(*labels),
            self.running.labels(*labels),
            self.waiting.labels(*labels),
            self.kv_bytes.labels(*labels),
            self.prefix_queried.labels(*labels),
            self.prefix_hits.labels(*labels),
        )
