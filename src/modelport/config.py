"""One settings object, read from ``MODELPORT_*`` environment variables.

Settings are validated once at start and frozen; each component receives only
the values it needs from ``modelport.app``.

The fields are grouped by concern into sections (``settings.runtime``,
``settings.serving``, ``settings.metering``...: frozen models, one per concern),
each listed in one table of docs/settings.md. The environment stays flat: every
field is set by ``MODELPORT_<FLAT NAME>``, where its flat name is its
``validation_alias`` or, without one, its own name (``runtime.max_batch_size`` is
``MODELPORT_RUNTIME_MAX_BATCH_SIZE``; ``store.database_url`` is
``MODELPORT_DATABASE_URL``). The same flat names, lower-cased, are accepted as
keywords by ``Settings(...)`` and as keys by ``Settings.model_copy(update=...)``,
beside whole sections (``Settings(serving=ServingSettings(...))``). The one map
from flat names to sections is ``FLAT_NAMES``, derived from the sections' fields.

Only ``role`` and ``workers`` stay at the top: they say what this process is and how
many of it share a port, which is no one concern (the surfaces, the model host, limits
and metering all read them). Values that combine sections (paths under
``store.home``, how usage travels given the database and Redis) are properties of
``Settings``.

A new setting goes into its section, with ``validation_alias`` set to its flat name
where the field's own name differs; ``python scripts/settings_doc.py`` then rewrites
docs/settings.md.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

MIN_ADMIN_KEY_LENGTH = 24
_MODEL_REF = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")
_FALLBACK_REF = re.compile(
    r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*(:[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$"
)


class Role(StrEnum):
    """What one process of the platform does (``MODELPORT_ROLE``, ``serve --role``)."""

    ALL = "all"
    """Everything in one process: the HTTP surfaces and the model host."""
    GATEWAY = "gateway"
    """The HTTP surfaces, auth, limits, metering and routing; no model host: versions
    are served by remote backends (e.g. workers)."""
    WORKER = "worker"
    """The model host only, on the ``/v2`` data plane for the operator's key: a gateway
    reaches it as a ``remote_v2`` backend. No metering, billing or tenancy."""


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("modelport", appauthor=False))


def split_hosts(v: object) -> object:
    """A comma-separated list of hosts (as the environment gives it) to a tuple."""
    if isinstance(v, str):
        return tuple(h.strip() for h in v.split(",") if h.strip())
    return v


class Section(BaseModel):
    """The settings of one concern. A field's flat name (``MODELPORT_<FLAT NAME>``) is
    its ``validation_alias`` where it has one, else its own name; both are accepted."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        use_attribute_docstrings=True,  # each field's docstring is its description
    )

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """Each field's flat name, to the field's name."""
        return {
            info.validation_alias if isinstance(info.validation_alias, str) else name: name
            for name, info in cls.model_fields.items()
        }


class StoreSettings(Section):
    """Where the installation's state lives: its home, the metadata database, blobs and Redis."""

    home: Path = Field(default_factory=default_home)
    """Folder of the embedded state: SQLite database, blobs, staging, keys."""

    database_url: str | None = None
    """SQLAlchemy URL of the metadata database; default a SQLite file under ``home``."""

    auto_migrate: bool | None = None
    """Apply migrations at start; default on for SQLite (embedded), off otherwise."""

    blob_url: str | None = None
    """Where blobs live: ``s3://bucket/prefix`` for S3-compatible storage; default ``home/blobs``."""

    s3_endpoint_url: str | None = None
    """Endpoint of an S3-compatible service (MinIO, Ceph...); default AWS."""

    s3_region: str = "us-east-1"
    """Region of the S3-compatible service."""

    verify_below_bytes: int = Field(default=64 << 20, ge=0)
    """Blobs up to this size are verified against their digest before they are served."""

    redis_url: str | None = None
    """Redis shared by gateway processes (``redis://host:6379/0``); revoked and rotated API
    keys stop working in every process at once. Default none (embedded: one process)."""

    @field_validator("home")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'modelport.db'}"

    @property
    def is_embedded_database(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")

    @property
    def should_auto_migrate(self) -> bool:
        return self.is_embedded_database if self.auto_migrate is None else self.auto_migrate


class SecuritySettings(Section):
    """The operator's credentials, signing and sealing keys, trusted publishers and TLS."""

    admin_key: str = ""
    """The operator's break-glass credential for ``/api`` (at least 24 characters)."""

    metrics_token: str = ""
    """A bearer token that may read ``/metrics`` and nothing else (at least 24
    characters): give it to the Prometheus scraper instead of the admin key. Empty:
    only the operator (the admin key, or a key holding ``platform.manage``) may."""

    signing_key_path: Path | None = None
    """Ed25519 private key (PEM) that signs manifests; default ``home/keys/signing.pem``."""

    secret_key: SecretStr = SecretStr("")
    """Fernet keys that seal stored secrets (remote backends' API keys, webhook signing
    secrets), comma-separated, newest first: the newest seals, any opens (``secret_keys``).
    Unset: an embedded installation (SQLite) makes one in ``secret_key_path`` on first
    start; a distributed one (PostgreSQL) refuses to store a secret
    (``secret_key_required``). See docs/operations.md, "Secrets"."""

    secret_key_path: Path | None = None
    """The embedded installation's generated secret key; default ``home/keys/secret.key``.
    Read (as the oldest key, to open only) also when ``secret_key`` is set."""

    trusted_publisher_keys: str = ""
    """Publisher keys a version must be signed by to be deployed or loaded: comma-separated
    entries, each a key id (``sha256:<hex>``), a raw Ed25519 public key in base64 or hex,
    or the path of a file of such entries (one a line; PEM public keys too). Empty: any
    signature that verifies is enough (every version carries the platform's)."""

    tls_cert_path: Path | None = None
    """PEM certificate (chain) ``modelport serve`` presents: it terminates TLS itself
    (``serve --tls-cert``); with ``tls_key_path``."""

    tls_key_path: Path | None = None
    """PEM private key of ``tls_cert_path`` (``serve --tls-key``)."""

    @field_validator("metrics_token")
    @classmethod
    def _strong_metrics_token(cls, v: str) -> str:
        if v and len(v) < MIN_ADMIN_KEY_LENGTH:
            raise ValueError(f"must be empty or at least {MIN_ADMIN_KEY_LENGTH} characters")
        return v

    @property
    def secret_keys(self) -> tuple[str, ...]:
        """The configured secret keys, newest first (``secret_key`` split on commas)."""
        key: SecretStr | str = self.secret_key  # a str when set by ``model_copy``
        value = key.get_secret_value() if isinstance(key, SecretStr) else key
        return tuple(key.strip() for key in value.split(",") if key.strip())


class LogSettings(Section):
    """What the serving process writes to standard error."""

    format: Literal["text", "json"] = Field(default="text", validation_alias="log_format")
    """How the serving process writes its logs to standard error: readable ``text`` lines,
    or one ``json`` object a line (for a log collector)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"] = (
        Field(default="INFO", validation_alias="log_level")
    )
    """The least severe records written (``INFO`` shows every lifecycle event)."""


class GrpcSettings(Section):
    """The Open Inference Protocol over gRPC."""

    port: int | None = Field(default=None, ge=1, le=65535, validation_alias="grpc_port")
    """Port of the Open Inference Protocol over gRPC (``inference.GRPCInferenceService``,
    ``serve --grpc-port``; Triton's is 8001). Unset (the default): no gRPC listener, so a
    process opens no port its operator did not ask for. With ``tls_cert_path`` and
    ``tls_key_path`` it serves TLS too. Roles ``all`` and ``gateway`` only."""

    host: str | None = Field(default=None, validation_alias="grpc_host")
    """Address the gRPC surface listens on; default ``serve --host`` (else 127.0.0.1)."""


class UploadSettings(Section):
    """Resumable uploads and files."""

    ttl_seconds: int = Field(default=24 * 3600, gt=0, validation_alias="upload_ttl_seconds")
    """An upload untouched this long expires and its staged bytes are removed."""

    sweep_interval_seconds: float = Field(
        default=300.0, gt=0, validation_alias="upload_sweep_interval_seconds"
    )
    """How often the server removes expired uploads and their staged bytes."""

    max_file_bytes: int = Field(default=512 << 20, gt=0)
    """Largest file ``POST /v1/files`` takes (a batch's requests)."""

    max_chunk_bytes: int = Field(default=1 << 30, gt=0)
    """Largest single chunk accepted by ``PATCH /api/uploads/{id}``."""


class ValidationSettings(Section):
    """Validation of published versions, in the sandbox."""

    timeout_seconds: float = Field(
        default=120.0, gt=0, validation_alias="validation_timeout_seconds"
    )
    """Wall-clock limit of one validation: past it its whole process group is killed."""

    memory_bytes: int = Field(default=4 << 30, gt=0, validation_alias="validation_memory_bytes")
    """Address-space limit of a validation's sandboxed process (and, under a cgroup, the
    resident memory of its group)."""

    concurrency: int = Field(default=2, ge=0, validation_alias="validation_concurrency")
    """Validations running at once across the installation (every process on one
    database together), apart from other jobs; the rest wait queued. Set it alike on
    every process: one with a lower value claims only while fewer than its value run,
    and 0 runs none there (another process's runner does)."""

    process_concurrency: int | None = Field(
        default=None, ge=0, validation_alias="validation_process_concurrency"
    )
    """Validations one serving process runs at once, within ``concurrency``
    (unset: up to that cap; 0: none here). Bounds one machine's sandboxes where several
    processes share the installation's cap."""

    queue_size: int = Field(default=64, ge=1, validation_alias="validation_queue_size")
    """Validations that may wait queued, across the installation; past it a request is
    refused with 503 ``validation_queue_full`` and a ``Retry-After``."""

    wait_seconds: float = Field(default=150.0, ge=0, validation_alias="validation_wait_seconds")
    """How long ``POST .../transitions`` to ``validated`` waits for the validation's end
    before answering 202 with its job (a client sending ``Prefer: respond-async`` gets
    that at once)."""


class SandboxSettings(Section):
    """Isolation of other people's code and files."""

    mode: Literal["auto", "bubblewrap", "unisolated"] = Field(
        default="auto", validation_alias="sandbox"
    )
    """Isolation of other people's code (validation): ``auto`` and ``bubblewrap`` run it
    in bubblewrap's namespaces and refuse to run it where this machine cannot make them
    (fail closed); ``unisolated`` runs it without namespaces (an empty environment,
    limits, the system-call filter), for a machine that runs only its owner's models."""

    bwrap: str = Field(default="bwrap", validation_alias="sandbox_bwrap")
    """The bubblewrap program, by name (searched on ``PATH``) or path."""

    cgroup: Literal["auto", "off"] = Field(default="auto", validation_alias="sandbox_cgroup")
    """``auto``: each sandboxed child gets a cgroup of its own, capped in resident
    memory, CPU share and processes, where this host lets the server make them (cgroup
    v2, else v1; detected at start-up); elsewhere, and with ``off``, the resource limits
    alone (logged once at start-up, ``sandbox.cgroup_unavailable``)."""

    cgroup_root: Path | None = Field(default=None, validation_alias="sandbox_cgroup_root")
    """Where the children's cgroups are made: a cgroup v2 folder delegated to the
    server's user (in which the server itself does not run), or, on a host with v1
    hierarchies only, a path inside each of them (``/modelport``: then
    ``/sys/fs/cgroup/memory/modelport``...). Default: the server's own cgroup."""

    tmp_bytes: int = Field(default=64 << 20, gt=0, validation_alias="sandbox_tmp_bytes")
    """Size of a sandboxed child's private ``/tmp`` (memory-backed, under bubblewrap;
    counted in its cgroup's memory): a write past it fails (ENOSPC)."""

    file_bytes: int = Field(default=1 << 30, gt=0, validation_alias="sandbox_file_bytes")
    """Largest file a sandboxed child may write (``RLIMIT_FSIZE``): a write past it
    fails (EFBIG)."""

    cpu_cores: float = Field(default=2.0, gt=0, validation_alias="sandbox_cpu_cores")
    """CPU share of each sandboxed child's whole group, in cores (cgroup ``cpu.max``)."""

    processes: int = Field(default=512, ge=16, validation_alias="sandbox_processes")
    """Processes and threads of each sandboxed child's whole group (cgroup
    ``pids.max``; else ``RLIMIT_NPROC``, which does not bind root)."""


class ProcessingSettings(Section):
    """Sandboxed workers of versions' pre- and post-processing code."""

    concurrency: int = Field(default=2, ge=1, le=64, validation_alias="processing_concurrency")
    """Warm sandboxed workers of one version's pre- and post-processing code, and so the
    calls of its code at once (more wait, within their deadline)."""

    timeout_seconds: float = Field(default=5.0, gt=0, validation_alias="processing_timeout_seconds")
    """Longest one pre- or post-processing call may take (less when the request's own
    deadline is nearer); past it the worker is killed and replaced (504
    ``processing_timeout``)."""

    start_timeout_seconds: float = Field(
        default=30.0, gt=0, validation_alias="processing_start_timeout_seconds"
    )
    """Longest a processing worker may take to start and import its code."""

    memory_bytes: int = Field(default=1 << 30, gt=0, validation_alias="processing_memory_bytes")
    """Address-space limit of each processing worker (and, under a cgroup, the resident
    memory of its group)."""

    idle_seconds: float = Field(default=600.0, gt=0, validation_alias="processing_idle_seconds")
    """A warm processing worker that served no call for this long is stopped (the next
    call starts one)."""

    idle_cpu_seconds: float = Field(
        default=1.0, gt=0, validation_alias="processing_idle_cpu_seconds"
    )
    """CPU time a warm processing worker may use while it serves no call (code left
    running after its call returned); past it the worker is killed and replaced."""

    reap_interval_seconds: float = Field(
        default=5.0, gt=0, validation_alias="processing_reap_interval_seconds"
    )
    """How often idle processing workers are checked for both."""


class RuntimeSettings(Section):
    """The model host: memory, execution, batching and queues."""

    memory_budget_bytes: int | None = Field(
        default=None, gt=0, validation_alias="runtime_memory_budget_bytes"
    )
    """Host memory all loaded versions may take together (all worker processes
    together); default 70% of physical memory."""

    device_memory_budget_bytes: int | None = Field(
        default=None, gt=0, validation_alias="runtime_device_memory_budget_bytes"
    )
    """Device (accelerator) memory budget (all worker processes together); default not
    limited."""

    intra_op_threads: int = Field(default=0, ge=0, validation_alias="runtime_intra_op_threads")
    """Threads one model execution may use (onnxruntime); 0: one fewer than the CPUs the
    process may use, at least one (the event loop keeps a core)."""

    intra_op_spinning: bool = Field(default=False, validation_alias="runtime_intra_op_spinning")
    """Let onnxruntime's idle threads spin between runs: lower latency for small batches
    on a host of its own, at the cost of CPU the event loop may need."""

    graph_optimization: str = Field(
        default="all",
        pattern="^(disable|basic|extended|all)$",
        validation_alias="runtime_graph_optimization",
    )
    """onnxruntime graph optimisation level: disable, basic, extended or all."""

    load_timeout_seconds: float = Field(
        default=300.0, gt=0, validation_alias="runtime_load_timeout_seconds"
    )
    """A load (fetch, verify, load, warm-up) still running after this is abandoned as failed."""

    infer_timeout_seconds: float = Field(
        default=30.0, gt=0, validation_alias="runtime_infer_timeout_seconds"
    )
    """Deadline of an inference request that sets none itself."""

    max_batch_size: int = Field(default=64, ge=1, validation_alias="runtime_max_batch_size")
    """Most rows merged into one execution (capped by the manifest's max_batch_size); 1 turns
    batching off."""

    max_queue_delay_us: int = Field(default=0, ge=0, validation_alias="runtime_max_queue_delay_us")
    """How long a batch may wait for more requests while an executor is free (microseconds)."""

    max_queue_size: int = Field(default=1024, ge=1, validation_alias="runtime_max_queue_size")
    """Requests one version may hold queued; more are refused with 429 queue_full."""

    offline_queue_share: float = Field(
        default=0.5, gt=0, le=1, validation_alias="runtime_offline_queue_share"
    )
    """Share of ``max_queue_size`` that ``offline`` requests (jobs, batches) may
    hold queued; more offline requests are refused with 429 queue_full, so an offline
    flood never fills the queue interactive and batch requests need."""

    instances: int = Field(default=1, ge=1, validation_alias="runtime_instances")
    """Batches of one version that may execute at the same time (with process execution:
    worker processes per version)."""

    execution: Literal["manifest", "process"] = Field(
        default="process", validation_alias="runtime_execution"
    )
    """Where versions execute: ``process`` (the default), every version in model-host
    processes started under the sandbox (``sandbox.mode``: where it cannot start them here,
    their loads fail closed), whatever its manifest says, so no publisher's file is
    parsed in the server: a tensor version in its workers, a generative version's engine
    in a host of its own; ``manifest``, tensor versions as each version's
    ``runtime.execution`` says (``thread`` by default: in this process, beside its
    credentials) and generative engines in this process."""

    process_crash_limit: int = Field(
        default=3, ge=1, validation_alias="runtime_process_crash_limit"
    )
    """Worker crashes of one version within the crash window that quarantine it (503
    version_quarantined until the window has passed)."""

    process_crash_window_seconds: float = Field(
        default=300.0, gt=0, validation_alias="runtime_process_crash_window_seconds"
    )
    """The window in which worker crashes are counted toward quarantine."""

    process_start_timeout_seconds: float = Field(
        default=120.0, gt=0, validation_alias="runtime_process_start_timeout_seconds"
    )
    """A worker process that has not loaded its model within this is killed and its load
    fails (worker_start_timeout); also the deadline of its warm-up."""

    load_on_demand: bool = True
    """Load a version on its first inference request (a cold start) instead of refusing it."""


class LlmSettings(Section):
    """Generative versions: engines, devices and their scheduler."""

    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", validation_alias="llm_device")
    """Where ``transformers`` models run: ``auto`` is ``cuda`` when a GPU is visible to
    torch, ``cpu`` otherwise."""

    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto", validation_alias="llm_dtype"
    )
    """Weights and activations of ``transformers`` models: ``auto`` is ``float32`` on the
    CPU, and on CUDA the model's own half precision (``bfloat16`` where the GPU has it,
    else ``float16``)."""

    kv_cache_bytes: int = Field(default=256 << 20, gt=0, validation_alias="llm_kv_cache_bytes")
    """KV cache memory one generative version may use when its manifest declares none
    (``runtime.kv_cache_bytes``)."""

    max_running: int = Field(default=32, ge=1, validation_alias="llm_max_running")
    """Sequences one generative version decodes together at most."""

    max_waiting: int = Field(default=256, ge=0, validation_alias="llm_max_waiting")
    """Requests one generative version holds waiting at most; more get 429 queue_full."""

    engine: Literal["auto", "transformers"] = Field(default="auto", validation_alias="llm_engine")
    """Which engine runs causal LMs: ``auto``, llama.cpp for a GGUF file where the library
    runs (quantized weights stay quantized) and ``transformers`` for the rest;
    ``transformers``, every one on ``transformers`` (GGUF de-quantized). A manifest's
    ``runtime.engine`` pins one version either way."""

    threads: int = Field(default=0, ge=0, validation_alias="llm_threads")
    """CPU threads each llama.cpp version computes with; 0: every CPU the process may use
    (the event loop's share of a step is small beside the model's)."""

    generation_timeout_seconds: float = Field(default=300.0, gt=0)
    """Deadline of a generation (``/v1`` chat and completions), streamed or not: a
    longer one is cut (``timeout``, what was delivered settled)."""


class ResponseCacheSettings(Section):
    """Answers of versions declared deterministic (docs/cache.md)."""

    enabled: bool = Field(default=True, validation_alias="response_cache_enabled")
    """Reuse the answers of versions whose manifest declares ``runtime.deterministic``
    (docs/cache.md). Tenants that declared no-cache are never cached either way."""

    max_bytes: int = Field(default=64 << 20, ge=0, validation_alias="response_cache_max_bytes")
    """Bytes of answers each process keeps in memory (least recently used go first)."""

    max_entry_bytes: int = Field(
        default=1 << 20, gt=0, validation_alias="response_cache_max_entry_bytes"
    )
    """Largest answer cached; a bigger one is answered, not kept."""

    ttl_seconds: float = Field(default=300.0, gt=0, validation_alias="response_cache_ttl_seconds")
    """How long a cached answer is reused after it was computed, in memory and in Redis."""

    redis: bool = Field(default=True, validation_alias="response_cache_redis")
    """With ``store.redis_url``, also keep answers in Redis, shared by every process of the
    installation."""


class RequestSettings(Section):
    """Request hygiene: bodies, JSON and tensors a request may carry."""

    max_api_body_bytes: int = Field(default=4 << 20, gt=0)
    """Largest request body accepted on ``/api`` (uploads have ``uploads.max_chunk_bytes``)."""

    body_read_timeout_seconds: float = Field(default=10.0, gt=0)
    """Longest wait for the next part of a request body (between two reads, not for the
    whole body, so a large upload on a slow link is not cut): a client that stops
    sending gets 408 ``body_timeout`` and its connection is closed."""

    max_json_depth: int = Field(default=64, ge=1)
    """Deepest nesting of arrays and objects accepted in a JSON request body."""

    max_inference_request_bytes: int = Field(default=64 << 20, gt=0)
    """Largest inference request body accepted on ``/v2``."""

    max_decompressed_request_bytes: int | None = Field(default=None, gt=0)
    """Largest inference body after ``Content-Encoding`` is undone; default
    ``max_inference_request_bytes``."""

    max_tensor_elements: int = Field(default=1 << 26, gt=0)
    """Most elements all input tensors of one inference request may declare together."""


class TenancySettings(Section):
    """Credentials, grants and limits cached by each process."""

    key_cache_ttl_seconds: float = Field(default=60.0, gt=0)
    """Longest a process reuses a cached API key credential before reading it again."""

    resolve_cache_ttl_seconds: float = Field(default=1.0, gt=0)
    """Longest a process reuses what a model reference resolved to (its version, lifecycle
    state) and a tenant's grants. Changes reach every process at once as change events;
    this only bounds staleness should an event be lost (Redis away)."""

    limits_cache_ttl_seconds: float = Field(default=5.0, ge=0)
    """Longest a process reuses cached limits and budgets rows; a changed limit reaches every
    gateway within this time."""

    limits_lease_seconds: float = Field(default=30.0, gt=0)
    """With Redis, a concurrency slot whose holder stopped renewing it (crashed) frees itself
    after this long."""


class ConsoleSettings(Section):
    """The web console."""

    session_ttl_seconds: float = Field(
        default=8 * 3600, gt=0, validation_alias="console_session_ttl_seconds"
    )
    """How long a web console sign-in lasts (``/console``); the person signs in again after."""


class MeteringSettings(Section):
    """Reservations, settlement and the delivery of usage to the ledger."""

    revenue_share_bps: int = Field(
        default=7000, ge=0, le=10_000, validation_alias="metering_revenue_share_bps"
    )
    """The publisher's share of what its models earn (basis points) when a price rule sets
    none."""

    cost_per_core_second_micros: float = Field(default=0.0, ge=0)
    """What one core-second of measured compute costs the operator, in micros of the
    currency (``metering.costs``): each call's cost, each model's margin. 0: unpriced."""

    cost_per_gpu_second_micros: float = Field(default=0.0, ge=0)
    """The same for one GPU-second."""

    reservation_grace_seconds: float = Field(
        default=60.0, gt=0, validation_alias="metering_reservation_grace_seconds"
    )
    """A reservation not settled this long after its call's deadline (its process died)
    expires, and the sweeper gives back what it held."""

    sweep_interval_seconds: float = Field(
        default=30.0, gt=0, validation_alias="metering_sweep_interval_seconds"
    )
    """How often a serving process looks for expired reservations."""

    drain_interval_seconds: float = Field(
        default=0.25, gt=0, validation_alias="metering_drain_interval_seconds"
    )
    """How often the usage outbox is delivered (to the ledger, or the Redis stream)."""

    outbox_lease_seconds: float = Field(
        default=30.0, gt=0, validation_alias="metering_outbox_lease_seconds"
    )
    """Outbox rows a drainer took and did not acknowledge within this time (it died) are
    delivered again; so are stream entries left pending by a dead consumer."""

    stream: str = Field(default="usage", validation_alias="metering_stream")
    """With Redis: the stream usage events travel through to the ledger (consumer group
    ``ledger``), named in the installation's keyspace (``modelport:{installation}:usage``)."""

    delivery: Literal["auto", "ledger", "stream"] = Field(
        default="auto", validation_alias="metering_delivery"
    )
    """How usage events reach the ledger: ``ledger``, written by the process that
    settled them (idempotent by ``event_id``, so any number of processes may); ``stream``,
    through ``stream`` in Redis to the consumer group; ``auto``: the stream in
    the distributed shape (Redis and PostgreSQL), the ledger otherwise (a SQLite home,
    also with ``--workers`` sharing Redis on one machine, where the stream would only
    add a hop)."""

    durability: Literal["auto", "journal", "database"] = Field(
        default="auto", validation_alias="metering_durability"
    )
    """Where a call's settlement is made durable before its answer: ``journal``, a file of
    this process's own (one write, applied to the database moments later; survives a
    crash of the process, not a power loss before its next fsync, like SQLite's own
    commits); ``database``, a committed transaction (group commit); ``auto``: the
    journal on SQLite, the database on PostgreSQL (where local disk may not outlive the
    process's machine)."""

    journal_dir: Path | None = Field(default=None, validation_alias="metering_journal_dir")
    """Folder of the usage journals; default ``home/journal``."""

    journal_interval_seconds: float = Field(
        default=0.1, gt=0, validation_alias="metering_journal_interval_seconds"
    )
    """How often the usage journal is applied to the database. Each application costs
    an fsync and a transaction whatever it carries: shorter intervals update the
    ledger sooner and cost more CPU per call at low rates (a call's hold stays on its
    levels until then, so budgets stay safe)."""


class JobSettings(Section):
    """Long-running work: runners, leases and outputs."""

    runner_concurrency: int = Field(default=4, ge=0, validation_alias="job_runner_concurrency")
    """Jobs one serving process runs at once (0: it runs none, only accepts them)."""

    lease_seconds: float = Field(default=30.0, gt=0, validation_alias="job_lease_seconds")
    """A runner's claim on a job; renewed every third of it while a stage runs. A job
    whose runner died is resumed by another this long after its last renewal."""

    poll_seconds: float = Field(default=1.0, gt=0, validation_alias="job_poll_seconds")
    """How often an idle runner looks for jobs submitted through other processes (its
    own process's are started at once)."""

    inline_output_bytes: int = Field(
        default=1 << 20, ge=0, validation_alias="job_inline_output_bytes"
    )
    """A job's output document up to this size is shown inline by ``GET /api/jobs/{id}``;
    a larger one by its digest, size and a signed, expiring ``url`` only."""

    output_url_seconds: int = Field(
        default=3600, gt=0, le=7 * 24 * 3600, validation_alias="job_output_url_seconds"
    )
    """How long a signed output URL stays valid after the job was read."""

    output_url_secret: SecretStr = Field(
        default=SecretStr(""), validation_alias="job_output_url_secret"
    )
    """The key that signs output URLs (any string; every process of the installation
    needs the same). Unset: derived from the installation's secret key (``security.secret_key``,
    or the embedded key file); a distributed installation with neither makes no URLs."""


class ServingSettings(Section):
    """Endpoints, deployments and backends: health, circuit breaking, retries."""

    rollback_window_seconds: float = Field(
        default=3600.0, ge=0, validation_alias="serving_rollback_window_seconds"
    )
    """How long a replaced deployment stays warm, ready to be restored by a rollback."""

    tenant_memory_bytes: int | None = Field(
        default=None, gt=0, validation_alias="serving_tenant_memory_bytes"
    )
    """Host memory one tenant's live deployments may take together (each version's memory
    times ``max_replicas``); default not limited."""

    shadow_max_in_flight: int = Field(
        default=4, ge=0, validation_alias="serving_shadow_max_in_flight"
    )
    """Shadow copies running at once in this process; more are dropped (and counted)."""

    idempotency_window_seconds: float = Field(
        default=86400.0, gt=0, validation_alias="serving_idempotency_window_seconds"
    )
    """How long a prediction's answer is replayed for a repeat of its ``Idempotency-Key``."""

    refresh_seconds: float = Field(default=2.0, gt=0, validation_alias="serving_refresh_seconds")
    """How often a process checks the database for endpoint changes made by another one."""

    health_interval_seconds: float = Field(
        default=5.0, gt=0, validation_alias="serving_health_interval_seconds"
    )
    """How often every backend's health is probed (in the background)."""

    health_timeout_seconds: float = Field(
        default=2.0, gt=0, validation_alias="serving_health_timeout_seconds"
    )
    """A health probe not answered within this many seconds failed."""

    breaker_window_seconds: float = Field(
        default=30.0, gt=0, validation_alias="serving_breaker_window_seconds"
    )
    """Window over which a backend's failure rate is measured."""

    breaker_min_calls: int = Field(default=5, ge=1, validation_alias="serving_breaker_min_calls")
    """Calls (requests and probes) in the window before the failure rate may open a
    backend's circuit breaker."""

    breaker_failure_rate: float = Field(
        default=0.5, gt=0, le=1, validation_alias="serving_breaker_failure_rate"
    )
    """Failure rate (0-1) at or above which a backend's circuit breaker opens."""

    breaker_open_seconds: float = Field(
        default=10.0, ge=0, validation_alias="serving_breaker_open_seconds"
    )
    """How long an open breaker keeps requests off a backend before a half-open trial."""

    max_attempts: int = Field(default=3, ge=1, validation_alias="serving_max_attempts")
    """Replicas of one version tried for one request (the first try and the retries)."""

    attempt_timeout_seconds: float | None = Field(
        default=None, gt=0, validation_alias="serving_attempt_timeout_seconds"
    )
    """Longest one attempt may take while other replicas remain; default the deadline."""

    backend_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Hosts (``host`` or ``host:port``, comma-separated) remote backends may be declared
    at, and reached, at private, loopback or link-local addresses (e.g. a gateway's
    workers, ``worker-0.workers.svc:8000``). Every other backend URL must resolve only
    to public addresses, checked when it is declared and again at every connection."""

    route_cache_ttl_seconds: float = Field(default=5.0, gt=0)
    """Longest a process reuses a task's weighed candidates (its models, their default
    versions, prices and verified scores) when routing a ``route:<task>`` call."""

    degrade_queue_wait_seconds: float | None = Field(default=None, gt=0)
    """Above this predicted queue wait, a version's calls that give way (those of the
    ``degrade_priorities``, and of tenants on the ``degrade_tiers``) go to its
    ``degrade_fallbacks`` model or are shed with 503 ``degraded`` and ``Retry-After``;
    None: never degraded, but for endpoints with a threshold of their own."""

    degrade_priorities: Annotated[
        tuple[Literal["interactive", "batch", "offline"], ...], NoDecode
    ] = ("batch", "offline")
    """Priorities (comma-separated) whose calls give way under load, unless an endpoint
    says otherwise."""

    degrade_tiers: Annotated[tuple[Literal["free", "standard", "premium"], ...], NoDecode] = (
        "free",
    )
    """Tenant tiers (comma-separated; ``free``, ``standard``, ``premium``) whose calls,
    of any priority, give way under load, unless an endpoint says otherwise."""

    degrade_fallbacks: dict[str, str] = Field(default_factory=dict)
    """JSON: ``{"acme/big": "acme/small"}`` (or ``"acme/small:2"``): the cheaper model
    that serves a loaded model's low-priority calls, as the caller may call it."""

    @field_validator("backend_allow_hosts", "degrade_priorities", "degrade_tiers", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return split_hosts(v)

    @field_validator("degrade_fallbacks")
    @classmethod
    def _degrade_fallbacks(cls, v: dict[str, str]) -> dict[str, str]:
        for model, fallback in v.items():
            if not _MODEL_REF.match(model) or not _FALLBACK_REF.match(fallback):
                raise ValueError(
                    f"{model!r}: {fallback!r}: a model is owner/name, its fallback "
                    "owner/name or owner/name:version"
                )
        return v


class PoolSettings(Section):
    """The worker pool: gateways and the workers they place versions on
    (docs/workers.md). On for a ``gateway`` or ``worker`` with ``token`` and
    ``store.redis_url`` set (``Settings.worker_pool_on``)."""

    token: str = Field(default="", validation_alias="worker_token")
    """The secret gateways and the pool's workers authenticate each other with (not the
    admin key; at least 24 characters). Empty: the pool is off."""

    id: str = Field(default="", validation_alias="worker_id")
    """This worker's id in the pool (default: host name, process id and a random part).
    A restarted worker with the same id keeps its placements."""

    name: str = Field(default="default", validation_alias="worker_pool")
    """The pool a worker joins; on a gateway, the pool its deployments are placed on."""

    advertise_host: str = Field(default="", validation_alias="worker_advertise_host")
    """The address gateways reach this worker's gRPC server at (default ``grpc.host``,
    else 127.0.0.1)."""

    accelerators: str = Field(default="cpu", validation_alias="worker_accelerators")
    """Hardware a worker announces, comma-separated (``cpu``, ``cuda``)."""

    heartbeat_seconds: float = Field(default=1.0, gt=0, validation_alias="worker_heartbeat_seconds")
    """How often a worker renews its lease."""

    lease_seconds: float = Field(default=5.0, gt=0, validation_alias="worker_lease_seconds")
    """How long a worker stays in the pool after its last heartbeat."""

    replicas: int = Field(default=2, ge=1, validation_alias="worker_replicas")
    """Replicas of each deployed version a gateway places, on distinct workers."""

    place_timeout_seconds: float = Field(
        default=120.0, gt=0, validation_alias="worker_place_timeout_seconds"
    )
    """A deployment's version with no ready replica this long after it was placed fails."""

    scale_seconds: float = Field(default=5.0, gt=0, validation_alias="worker_scale_seconds")
    """How often the autoscaler decides each version's replicas (one gateway at a time)."""

    target_wait_seconds: float = Field(
        default=0.5, gt=0, validation_alias="worker_target_wait_seconds"
    )
    """A version whose predicted queue wait (mean over its ready replicas) passes this
    gets one more replica, up to its deployment's ``max_replicas``."""

    target_rate_per_replica: float | None = Field(
        default=None, gt=0, validation_alias="worker_target_rate_per_replica"
    )
    """Calls per second one replica should carry: a higher rate adds replicas (default:
    the rate alone does not scale)."""

    scale_down_after_seconds: float = Field(
        default=60.0, ge=0, validation_alias="worker_scale_down_after_seconds"
    )
    """How long a version's wait must stay under half the target before it loses one
    replica (never below ``min_replicas``, nor below one while it is called)."""

    idle_seconds: float = Field(default=900.0, gt=0, validation_alias="worker_idle_seconds")
    """A version nobody calls this long shrinks to its deployment's ``min_replicas``
    (zero allowed: its next call loads it, within the call's deadline)."""

    cold_start_retry_after_seconds: float = Field(
        default=5.0, gt=0, validation_alias="worker_cold_start_retry_after_seconds"
    )
    """``Retry-After`` of a call refused (503 ``cold_start``) because its version was not
    ready on the pool within the call's deadline."""

    tls_cert: Path | None = Field(default=None, validation_alias="worker_tls_cert")
    """PEM certificate chain of this process on the pool's gRPC hop: a worker's server
    certificate (TLS on for its server, with ``tls_key``), a gateway's client certificate
    (mutual TLS, with ``tls_key``)."""

    tls_key: Path | None = Field(default=None, validation_alias="worker_tls_key")
    """PEM private key of ``tls_cert``."""

    tls_ca: Path | None = Field(default=None, validation_alias="worker_tls_ca")
    """PEM certificate authority of the pool's hop: on a gateway, what a worker's server
    certificate must be signed by (TLS on for its channels); on a worker, what a gateway's
    client certificate must be signed by (mutual TLS: a gateway without one is refused)."""

    tls_server_name: str = Field(default="", validation_alias="worker_tls_server_name")
    """On a gateway: the name workers' certificates are checked for (one name for every
    worker, e.g. where pods' addresses change); empty: the address each one advertises."""

    @property
    def tls_on(self) -> bool:
        """Whether this process speaks TLS on the pool's hop (a worker: it has a
        certificate; a gateway: it has the authority to check workers' by)."""
        return self.tls_ca is not None or self.tls_cert is not None

    @model_validator(mode="after")
    def _token_and_lease(self) -> PoolSettings:
        if self.token and len(self.token) < MIN_ADMIN_KEY_LENGTH:
            raise ValueError(
                f"MODELPORT_WORKER_TOKEN must be at least {MIN_ADMIN_KEY_LENGTH} characters"
            )
        if self.lease_seconds <= self.heartbeat_seconds:
            raise ValueError("MODELPORT_WORKER_LEASE_SECONDS must outlast the heartbeat")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("MODELPORT_WORKER_TLS_CERT and MODELPORT_WORKER_TLS_KEY go together")
        return self


class PredictionLogSettings(Section):
    """The prediction log's buffer and writer."""

    capacity: int = Field(default=100_000, ge=1, validation_alias="prediction_log_capacity")
    """Records waiting to be written at most; past it new records are dropped (counted)."""

    detail_capacity: int = Field(
        default=10_000, ge=1, validation_alias="prediction_log_detail_capacity"
    )
    """Waiting records past which inputs and outputs are kept only for a sample (the audit
    fields always are); at most ``capacity``."""

    pressure_sample_every: int = Field(
        default=10, ge=1, validation_alias="prediction_log_pressure_sample_every"
    )
    """Under pressure, inputs and outputs are kept for one record in this many."""

    batch_size: int = Field(default=500, ge=1, validation_alias="prediction_log_batch_size")
    """Records written per insert."""

    flush_interval_seconds: float = Field(
        default=1.0, gt=0, validation_alias="prediction_log_flush_interval_seconds"
    )
    """Longest a record waits before it is written."""

    retention_days: int = Field(
        default=90, ge=1, le=3650, validation_alias="prediction_retention_days"
    )
    """How long the prediction log keeps a record (inputs and outputs included), for a
    tenant that set no retention of its own (``PUT /api/tenants/{tenant}/retention``)."""

    retention_interval_seconds: float = Field(
        default=3600.0, gt=0, validation_alias="prediction_retention_interval_seconds"
    )
    """How often a serving process deletes the records past their tenant's retention."""

    monitoring_check_seconds: float = Field(default=30.0, gt=0)
    """How often endpoints' drift and quality monitors are looked at; each runs at its
    own policy's ``interval_seconds`` (``modelport.monitoring``). 0 is refused: a
    monitor with nothing to run costs one small query per look."""


class OidcSettings(Section):
    """OpenID Connect: off while ``issuer`` (``MODELPORT_OIDC_ISSUER``) is unset."""

    issuer: str | None = Field(default=None, validation_alias="oidc_issuer")
    """Issuer URL of the OpenID provider (its ``/.well-known/openid-configuration`` is
    read from there). Set: the provider's JWTs are accepted as bearer tokens, and people
    may sign in with it (authorization code with PKCE)."""

    audience: str | None = Field(default=None, validation_alias="oidc_audience")
    """The ``aud`` a bearer JWT must carry; default ``client_id``."""

    client_id: str | None = Field(default=None, validation_alias="oidc_client_id")
    """This platform's client id at the provider (sign-in, and the id token's ``aud``)."""

    client_secret: SecretStr | None = Field(default=None, validation_alias="oidc_client_secret")
    """The client's secret at the provider, for a confidential client; unset for a
    public one (PKCE alone). Never logged."""

    groups_claim: str = Field(default="groups", validation_alias="oidc_groups_claim")
    """The token claim that lists the subject's groups at the provider."""

    group_roles: dict[str, str] = Field(default_factory=dict, validation_alias="oidc_group_roles")
    """Provider groups to tenant roles, JSON: ``{"ml-team": "acme:publisher"}``. A
    subject's groups must map into exactly one tenant; its roles there are the union of
    its groups' roles. A subject with no mapped group is refused."""

    leeway_seconds: int = Field(default=30, ge=0, le=300, validation_alias="oidc_leeway_seconds")
    """Clock skew allowed on a token's ``exp``, ``nbf`` and ``iat``."""

    jwks_min_refresh_seconds: float = Field(
        default=30.0, ge=0, validation_alias="oidc_jwks_min_refresh_seconds"
    )
    """A token with an unknown key id fetches the provider's JWKS again (key rotation),
    at most once in this many seconds."""

    http_timeout_seconds: float = Field(
        default=5.0, gt=0, validation_alias="oidc_http_timeout_seconds"
    )
    """Longest a request to the provider (discovery, JWKS, token endpoint) may take."""

    @field_validator("group_roles")
    @classmethod
    def _tenant_roles(cls, v: dict[str, str]) -> dict[str, str]:
        for group, target in v.items():
            tenant, sep, role = target.partition(":")
            if not group or not sep or not tenant or not role:
                raise ValueError(
                    f"group {group!r} maps to {target!r}: each value must be 'tenant:role'"
                )
        return v

    @model_validator(mode="after")
    def _complete(self) -> OidcSettings:
        if self.issuer and not (self.audience or self.client_id):
            raise ValueError(
                "MODELPORT_OIDC_ISSUER is set: set MODELPORT_OIDC_AUDIENCE or "
                "MODELPORT_OIDC_CLIENT_ID too (the audience tokens must carry)"
            )
        return self

    @property
    def resolved_audience(self) -> str | None:
        return self.audience or self.client_id


class WebhookSettings(Section):
    """Signed deliveries of events to tenants' URLs."""

    allow_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), validation_alias="webhook_allow_hosts"
    )
    """Hosts (``host`` or ``host:port``, comma-separated) webhooks may reach over plain
    ``http`` and at private or loopback addresses: for local development only (e.g.
    ``127.0.0.1:8123``). Every other webhook URL must be ``https`` to a public address."""

    timeout_seconds: float = Field(default=10.0, gt=0, validation_alias="webhook_timeout_seconds")
    """Longest one delivery attempt may take (connect, send, the receiver's status)."""

    retry_window_seconds: float = Field(
        default=24 * 3600.0, gt=0, validation_alias="webhook_retry_window_seconds"
    )
    """How long a delivery is retried before it is marked failed."""

    retry_base_seconds: float = Field(
        default=5.0, gt=0, validation_alias="webhook_retry_base_seconds"
    )
    """Backoff after the first failed attempt, at most: it doubles with each attempt up
    to ``retry_max_seconds``, and each wait is drawn at random below it."""

    retry_max_seconds: float = Field(
        default=3600.0, gt=0, validation_alias="webhook_retry_max_seconds"
    )
    """Longest wait between two attempts, at most."""

    secret_overlap_seconds: float = Field(
        default=24 * 3600.0, ge=0, validation_alias="webhook_secret_overlap_seconds"
    )
    """After a signing secret is rotated, how long the old one still signs deliveries
    too (receivers move to the new one meanwhile)."""

    concurrency: int = Field(default=8, ge=1, validation_alias="webhook_concurrency")
    """Deliveries a process claims, and posts at once, per step."""

    poll_interval_seconds: float = Field(
        default=1.0, gt=0, validation_alias="webhook_poll_interval_seconds"
    )
    """How often a process looks for deliveries that are due."""

    lease_seconds: float = Field(default=60.0, gt=0, validation_alias="webhook_lease_seconds")
    """A claimed delivery whose attempt is not recorded this long after (its process
    died) is due again."""

    @field_validator("allow_hosts", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return split_hosts(v)


class Settings(BaseSettings):
    """Server-wide settings, by section; every field maps to ``MODELPORT_<FLAT NAME>``
    (see the module's docstring)."""

    model_config = SettingsConfigDict(
        env_prefix="MODELPORT_", frozen=True, extra="ignore", use_attribute_docstrings=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The arguments, then the environment: no ``.env`` file and no secrets folder
        is configured, and reading none of them took as long as reading the environment.
        Both are routed to sections before they are merged, so an argument wins over the
        environment field by field."""
        return (
            _Routed(settings_cls, init_settings),
            _Routed(settings_cls, EnvSettingsSource(_FlatEnvironment)),
        )

    role: Role = Role.ALL
    """What this process does: ``all`` (the default), ``gateway`` or ``worker`` (see
    ``Role``)."""

    workers: int = Field(default=1, ge=1)
    """Serving processes on the listening port (``modelport serve --workers``).
    Above one, each process hosts its own copy of a loaded version, so the memory
    budgets (``runtime``) are split evenly between them, and ``store.redis_url`` is
    required: limits, key revocations and repository load/unload must be shared
    between processes."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    grpc: GrpcSettings = Field(default_factory=GrpcSettings)
    uploads: UploadSettings = Field(default_factory=UploadSettings)
    requests: RequestSettings = Field(default_factory=RequestSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    processing: ProcessingSettings = Field(default_factory=ProcessingSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    response_cache: ResponseCacheSettings = Field(default_factory=ResponseCacheSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    tenancy: TenancySettings = Field(default_factory=TenancySettings)
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    metering: MeteringSettings = Field(default_factory=MeteringSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    prediction_log: PredictionLogSettings = Field(default_factory=PredictionLogSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)

    def __init__(self, **values: Any) -> None:
        """Sections, or flat names (``Settings(home=..., admin_key=...)``), or both."""
        super().__init__(**values)

    @model_validator(mode="before")
    @classmethod
    def _route_flat_names(cls, data: Any) -> Any:
        """``Settings.model_validate`` takes flat names too."""
        return route_flat_names(data) if isinstance(data, Mapping) else data

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Pydantic's copy (not validated), with flat names routed to their sections:
        ``settings.model_copy(update={"admin_key": key})``."""
        if not update:
            return super().model_copy(deep=deep)
        changes: dict[str, Any] = {}
        for key, value in route_flat_names(update).items():
            if key in SECTIONS:
                names = SECTIONS[key].flat_names()
                fields = {names.get(flat, flat): field for flat, field in value.items()}
                changes[key] = getattr(self, key).model_copy(update=fields)
            else:
                changes[key] = value
        return super().model_copy(update=changes, deep=deep)

    @property
    def uses_usage_stream(self) -> bool:
        """Whether usage events travel to the ledger through the Redis stream."""
        if self.metering.delivery == "auto":
            return bool(self.store.redis_url) and not self.store.is_embedded_database
        return self.metering.delivery == "stream"

    @property
    def uses_usage_journal(self) -> bool:
        """Whether settlements are made durable in the usage journal."""
        if self.metering.durability == "auto":
            return self.store.is_embedded_database
        return self.metering.durability == "journal"

    @property
    def resolved_metering_journal_dir(self) -> Path:
        return self.metering.journal_dir or self.store.home / "journal"

    @property
    def resolved_signing_key_path(self) -> Path:
        return self.security.signing_key_path or self.store.home / "keys" / "signing.pem"

    @property
    def resolved_secret_key_path(self) -> Path:
        return self.security.secret_key_path or self.store.home / "keys" / "secret.key"

    @property
    def worker_pool_on(self) -> bool:
        """Whether this process is part of a worker pool (see ``PoolSettings``)."""
        return bool(self.pool.token and self.store.redis_url and self.role is not Role.ALL)

    @model_validator(mode="after")
    def _worker_token_apart(self) -> Settings:
        if self.pool.token and self.pool.token == self.security.admin_key:
            raise ValueError("MODELPORT_WORKER_TOKEN must differ from the admin key")
        return self


SECTIONS: dict[str, type[Section]] = {
    name: info.annotation
    for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
}
"""Each section's field in ``Settings``, to its model."""

FLAT_NAMES: dict[str, tuple[str, str]] = {
    flat: (section, name)
    for section, model in SECTIONS.items()
    for flat, name in model.flat_names().items()
}
"""Every flat name (``MODELPORT_<FLAT NAME>``, lower-cased), to its section and field."""

_TO_FLAT = {
    section: {name: flat for flat, name in model.flat_names().items()}
    for section, model in SECTIONS.items()
}


def route_flat_names(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flat names to their sections (``{"admin_key": k}`` to ``{"security":
    {"admin_key": k}}``), merged with the fields a section given whole set (a model, or
    a mapping; the flat names win); top-level fields and unknown names (ignored by
    ``Settings``, as an unknown ``MODELPORT_*`` variable is) as they are. So sources
    merge, and ``model_copy`` updates, field by field. Within a section every field is
    keyed by its flat name, so a validation error names the variable to fix.

    ``sandbox`` is both a section and the flat name of ``sandbox.mode``: a mapping or a
    ``SandboxSettings`` is the section, anything else the mode."""
    routed: dict[str, Any] = {}
    for key, value in values.items():
        target = FLAT_NAMES.get(key.lower())
        if key in SECTIONS and isinstance(value, Mapping | BaseModel):
            if isinstance(value, BaseModel):
                value = {name: getattr(value, name) for name in value.model_fields_set}
            to_flat = _TO_FLAT[key]
            whole = {to_flat.get(name, name): field for name, field in value.items()}
            routed[key] = {**whole, **routed.get(key, {})}
        elif target is not None:
            routed.setdefault(target[0], {})[key.lower()] = value
        else:
            routed[key] = value
    return routed


def _flat_field(info: Any) -> Any:
    """A section's field as a flat environment variable reads it: same type and
    decoding (``NoDecode``, JSON for a mapping), no alias (that would name the variable
    without its prefix)."""
    flat = copy.copy(info)
    flat.validation_alias = None
    flat.alias_priority = None
    return (info.annotation, flat)


class _FlatEnvironmentBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MODELPORT_", extra="ignore")


_FlatEnvironment: type[BaseSettings] = create_model(
    "_FlatEnvironment",
    __base__=_FlatEnvironmentBase,
    **{
        name: _flat_field(info)
        for name, info in Settings.model_fields.items()
        if name not in SECTIONS
    },
    **{
        flat: _flat_field(SECTIONS[section].model_fields[name])
        for flat, (section, name) in FLAT_NAMES.items()
    },
)
"""The flat settings the environment is read against, as before the sections:
``EnvSettingsSource`` finds and decodes ``MODELPORT_<FLAT NAME>`` by these fields."""


class _Routed(PydanticBaseSettingsSource):
    """Another source's values, flat names routed to their sections."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self.source = source

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: ``__call__`` reads the whole source

    def __call__(self) -> dict[str, Any]:
        return route_flat_names(self.source())
