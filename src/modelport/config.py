"""One settings object, read from ``MODELPORT_*`` environment variables.

Settings are validated once at start and frozen; each component receives only
the values it needs from ``modelport.app``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
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


class Settings(BaseSettings):
    """Server-wide settings. Every field maps to ``MODELPORT_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MODELPORT_", frozen=True, extra="ignore")

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
        is configured, and reading none of them took as long as reading the environment."""
        return init_settings, env_settings

    home: Path = Field(default_factory=default_home)
    """Folder of the embedded state: SQLite database, blobs, staging, keys."""

    database_url: str | None = None
    """SQLAlchemy URL of the metadata database; default a SQLite file under ``home``."""

    blob_url: str | None = None
    """Where blobs live: ``s3://bucket/prefix`` for S3-compatible storage; default ``home/blobs``."""

    s3_endpoint_url: str | None = None
    """Endpoint of an S3-compatible service (MinIO, Ceph...); default AWS."""

    s3_region: str = "us-east-1"

    admin_key: str = ""
    """The operator's break-glass credential for ``/api`` (at least 24 characters)."""

    metrics_token: str = ""
    """A bearer token that may read ``/metrics`` and nothing else (at least 24
    characters): give it to the Prometheus scraper instead of the admin key. Empty:
    only the operator (the admin key, or a key holding ``platform.manage``) may."""

    log_format: Literal["text", "json"] = "text"
    """How the serving process writes its logs to standard error: readable ``text`` lines,
    or one ``json`` object a line (for a log collector)."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"] = (
        "INFO"
    )
    """The least severe records written (``INFO`` shows every lifecycle event)."""

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

    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    """Port of the Open Inference Protocol over gRPC (``inference.GRPCInferenceService``,
    ``serve --grpc-port``; Triton's is 8001). Unset (the default): no gRPC listener, so a
    process opens no port its operator did not ask for. With ``tls_cert_path`` and
    ``tls_key_path`` it serves TLS too. Roles ``all`` and ``gateway`` only."""

    grpc_host: str | None = None
    """Address the gRPC surface listens on; default ``serve --host`` (else 127.0.0.1)."""

    upload_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    """An upload untouched this long expires and its staged bytes are removed."""

    upload_sweep_interval_seconds: float = Field(default=300.0, gt=0)
    """How often the server removes expired uploads and their staged bytes."""

    max_file_bytes: int = Field(default=512 << 20, gt=0)
    """Largest file ``POST /v1/files`` takes (a batch's requests)."""

    max_chunk_bytes: int = Field(default=1 << 30, gt=0)
    """Largest single chunk accepted by ``PATCH /api/uploads/{id}``."""

    verify_below_bytes: int = Field(default=64 << 20, ge=0)
    """Blobs up to this size are verified against their digest before they are served."""

    validation_timeout_seconds: float = Field(default=120.0, gt=0)
    validation_memory_bytes: int = Field(default=4 << 30, gt=0)
    validation_concurrency: int = Field(default=2, ge=0)
    """Validations running at once across the installation (every process on one
    database together), apart from other jobs; the rest wait queued. Set it alike on
    every process: one with a lower value claims only while fewer than its value run,
    and 0 runs none there (another process's runner does)."""

    validation_process_concurrency: int | None = Field(default=None, ge=0)
    """Validations one serving process runs at once, within ``validation_concurrency``
    (unset: up to that cap; 0: none here). Bounds one machine's sandboxes where several
    processes share the installation's cap."""

    validation_queue_size: int = Field(default=64, ge=1)
    """Validations that may wait queued, across the installation; past it a request is
    refused with 503 ``validation_queue_full`` and a ``Retry-After``."""

    validation_wait_seconds: float = Field(default=150.0, ge=0)
    """How long ``POST .../transitions`` to ``validated`` waits for the validation's end
    before answering 202 with its job (a client sending ``Prefer: respond-async`` gets
    that at once)."""

    sandbox: Literal["auto", "bubblewrap", "unisolated"] = "auto"
    """Isolation of other people's code (validation): ``auto`` and ``bubblewrap`` run it
    in bubblewrap's namespaces and refuse to run it where this machine cannot make them
    (fail closed); ``unisolated`` runs it without namespaces (an empty environment,
    limits, the system-call filter), for a machine that runs only its owner's models."""

    sandbox_bwrap: str = "bwrap"
    """The bubblewrap program, by name (searched on ``PATH``) or path."""

    sandbox_cgroup: Literal["auto", "off"] = "auto"
    """``auto``: each sandboxed child gets a cgroup of its own, capped in resident
    memory, CPU share and processes, where this host lets the server make them (cgroup
    v2, else v1; detected at start-up); elsewhere, and with ``off``, the resource limits
    alone (logged once at start-up, ``sandbox.cgroup_unavailable``)."""

    sandbox_cgroup_root: Path | None = None
    """Where the children's cgroups are made: a cgroup v2 folder delegated to the
    server's user (in which the server itself does not run), or, on a host with v1
    hierarchies only, a path inside each of them (``/modelport``: then
    ``/sys/fs/cgroup/memory/modelport``...). Default: the server's own cgroup."""

    sandbox_tmp_bytes: int = Field(default=64 << 20, gt=0)
    """Size of a sandboxed child's private ``/tmp`` (memory-backed, under bubblewrap;
    counted in its cgroup's memory): a write past it fails (ENOSPC)."""

    sandbox_file_bytes: int = Field(default=1 << 30, gt=0)
    """Largest file a sandboxed child may write (``RLIMIT_FSIZE``): a write past it
    fails (EFBIG)."""

    sandbox_cpu_cores: float = Field(default=2.0, gt=0)
    """CPU share of each sandboxed child's whole group, in cores (cgroup ``cpu.max``)."""

    sandbox_processes: int = Field(default=512, ge=16)
    """Processes and threads of each sandboxed child's whole group (cgroup
    ``pids.max``; else ``RLIMIT_NPROC``, which does not bind root)."""

    processing_concurrency: int = Field(default=2, ge=1, le=64)
    """Warm sandboxed workers of one version's pre- and post-processing code, and so the
    calls of its code at once (more wait, within their deadline)."""

    processing_timeout_seconds: float = Field(default=5.0, gt=0)
    """Longest one pre- or post-processing call may take (less when the request's own
    deadline is nearer); past it the worker is killed and replaced (504
    ``processing_timeout``)."""

    processing_start_timeout_seconds: float = Field(default=30.0, gt=0)
    """Longest a processing worker may take to start and import its code."""

    processing_memory_bytes: int = Field(default=1 << 30, gt=0)
    """Address-space limit of each processing worker (and, under a cgroup, the resident
    memory of its group)."""

    processing_idle_seconds: float = Field(default=600.0, gt=0)
    """A warm processing worker that served no call for this long is stopped (the next
    call starts one)."""

    processing_idle_cpu_seconds: float = Field(default=1.0, gt=0)
    """CPU time a warm processing worker may use while it serves no call (code left
    running after its call returned); past it the worker is killed and replaced."""

    processing_reap_interval_seconds: float = Field(default=5.0, gt=0)
    """How often idle processing workers are checked for both."""

    auto_migrate: bool | None = None
    """Apply migrations at start; default on for SQLite (embedded), off otherwise."""

    role: Role = Role.ALL
    """What this process does: ``all`` (the default), ``gateway`` or ``worker`` (see
    ``Role``)."""

    workers: int = Field(default=1, ge=1)
    """Serving processes on the listening port (``modelport serve --workers``).
    Above one, each process hosts its own copy of a loaded version, so the memory
    budgets below are split evenly between them, and ``redis_url`` is required: limits,
    key revocations and repository load/unload must be shared between processes."""

    # ---- the worker pool (gateways and workers; see docs/workers.md)
    worker_token: str = ""
    """The secret gateways and the pool's workers authenticate each other with (not the
    admin key). Set on a ``gateway`` or ``worker`` with ``redis_url``: the worker pool is
    on (workers register and serve OIP gRPC on ``grpc_port``; gateways place deployed
    versions on them and call them). Empty: off."""

    worker_id: str = ""
    """This worker's id in the pool (default: host name, process id and a random part).
    A restarted worker with the same id keeps its placements."""

    worker_pool: str = "default"
    """The pool a worker joins; on a gateway, the pool its deployments are placed on."""

    worker_advertise_host: str = ""
    """The address gateways reach this worker's gRPC server at (default ``grpc_host``,
    else 127.0.0.1)."""

    worker_accelerators: str = "cpu"
    """Hardware a worker announces, comma-separated (``cpu``, ``cuda``)."""

    worker_heartbeat_seconds: float = Field(default=1.0, gt=0)
    """How often a worker renews its lease."""

    worker_lease_seconds: float = Field(default=5.0, gt=0)
    """How long a worker stays in the pool after its last heartbeat."""

    worker_replicas: int = Field(default=2, ge=1)
    """Replicas of each deployed version a gateway places, on distinct workers."""

    worker_place_timeout_seconds: float = Field(default=120.0, gt=0)
    """A deployment's version with no ready replica this long after it was placed fails."""

    # ---- runtime (model host, batching)
    runtime_memory_budget_bytes: int | None = Field(default=None, gt=0)
    """Host memory all loaded versions may take together (all worker processes
    together); default 70% of physical memory."""

    runtime_device_memory_budget_bytes: int | None = Field(default=None, gt=0)
    """Device (accelerator) memory budget (all worker processes together); default not
    limited."""

    runtime_intra_op_threads: int = Field(default=0, ge=0)
    """Threads one model execution may use (onnxruntime); 0: one fewer than the CPUs the
    process may use, at least one (the event loop keeps a core)."""

    runtime_intra_op_spinning: bool = False
    """Let onnxruntime's idle threads spin between runs: lower latency for small batches
    on a host of its own, at the cost of CPU the event loop may need."""

    runtime_graph_optimization: str = Field(default="all", pattern="^(disable|basic|extended|all)$")
    """onnxruntime graph optimisation level: disable, basic, extended or all."""

    runtime_load_timeout_seconds: float = Field(default=300.0, gt=0)
    """A load (fetch, verify, load, warm-up) still running after this is abandoned as failed."""

    runtime_infer_timeout_seconds: float = Field(default=30.0, gt=0)
    """Deadline of an inference request that sets none itself."""

    generation_timeout_seconds: float = Field(default=300.0, gt=0)
    """Deadline of a generation (``/v1`` chat and completions), streamed or not: a
    longer one is cut (``timeout``, what was delivered settled)."""

    runtime_max_batch_size: int = Field(default=64, ge=1)
    """Most rows merged into one execution (capped by the manifest's max_batch_size); 1 turns
    batching off."""

    runtime_max_queue_delay_us: int = Field(default=0, ge=0)
    """How long a batch may wait for more requests while an executor is free (microseconds)."""

    runtime_max_queue_size: int = Field(default=1024, ge=1)
    """Requests one version may hold queued; more are refused with 429 queue_full."""

    runtime_offline_queue_share: float = Field(default=0.5, gt=0, le=1)
    """Share of ``runtime_max_queue_size`` that ``offline`` requests (jobs, batches) may
    hold queued; more offline requests are refused with 429 queue_full, so an offline
    flood never fills the queue interactive and batch requests need."""

    runtime_instances: int = Field(default=1, ge=1)
    """Batches of one version that may execute at the same time (with process execution:
    worker processes per version)."""

    runtime_execution: Literal["manifest", "process"] = "process"
    """Where versions execute: ``process`` (the default), every version in model-host
    processes started under the sandbox (``sandbox``: where it cannot start them here,
    their loads fail closed), whatever its manifest says, so no publisher's file is
    parsed in the server: a tensor version in its workers, a generative version's engine
    in a host of its own; ``manifest``, tensor versions as each version's
    ``runtime.execution`` says (``thread`` by default: in this process, beside its
    credentials) and generative engines in this process."""

    runtime_process_crash_limit: int = Field(default=3, ge=1)
    """Worker crashes of one version within the crash window that quarantine it (503
    version_quarantined until the window has passed)."""

    runtime_process_crash_window_seconds: float = Field(default=300.0, gt=0)
    """The window in which worker crashes are counted toward quarantine."""

    runtime_process_start_timeout_seconds: float = Field(default=120.0, gt=0)
    """A worker process that has not loaded its model within this is killed and its load
    fails (worker_start_timeout); also the deadline of its warm-up."""

    # ---- transformers format (the ``modelport[llm]`` extra)
    llm_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where ``transformers`` models run: ``auto`` is ``cuda`` when a GPU is visible to
    torch, ``cpu`` otherwise."""

    llm_dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Weights and activations of ``transformers`` models: ``auto`` is ``float32`` on the
    CPU, and on CUDA the model's own half precision (``bfloat16`` where the GPU has it,
    else ``float16``)."""

    llm_kv_cache_bytes: int = Field(default=256 << 20, gt=0)
    """KV cache memory one generative version may use when its manifest declares none
    (``runtime.kv_cache_bytes``)."""

    llm_max_running: int = Field(default=32, ge=1)
    """Sequences one generative version decodes together at most."""

    llm_max_waiting: int = Field(default=256, ge=0)
    """Requests one generative version holds waiting at most; more get 429 queue_full."""

    llm_engine: Literal["auto", "transformers"] = "auto"
    """Which engine runs causal LMs: ``auto``, llama.cpp for a GGUF file where the library
    runs (quantized weights stay quantized) and ``transformers`` for the rest;
    ``transformers``, every one on ``transformers`` (GGUF de-quantized). A manifest's
    ``runtime.engine`` pins one version either way."""

    llm_threads: int = Field(default=0, ge=0)
    """CPU threads each llama.cpp version computes with; 0: every CPU the process may use
    (the event loop's share of a step is small beside the model's)."""

    load_on_demand: bool = True
    """Load a version on its first inference request (a cold start) instead of refusing it."""

    resolve_cache_ttl_seconds: float = Field(default=1.0, gt=0)
    """Longest a process reuses what a model reference resolved to (its version, lifecycle
    state) and a tenant's grants. Changes reach every process at once as change events;
    this only bounds staleness should an event be lost (Redis away)."""

    route_cache_ttl_seconds: float = Field(default=5.0, gt=0)
    """Longest a process reuses a task's weighed candidates (its models, their default
    versions, prices and verified scores) when routing a ``route:<task>`` call."""

    degrade_queue_wait_seconds: float | None = Field(default=None, gt=0)
    """Above this predicted queue wait, a version's low-priority calls (``batch``,
    ``offline``) go to its ``degrade_fallbacks`` model or are shed with 503 ``degraded``
    and ``Retry-After``; None: never degraded."""

    degrade_fallbacks: dict[str, str] = Field(default_factory=dict)
    """JSON: ``{"acme/big": "acme/small"}`` (or ``"acme/small:2"``): the cheaper model
    that serves a loaded model's low-priority calls, as the caller may call it."""

    max_inference_request_bytes: int = Field(default=64 << 20, gt=0)
    """Largest inference request body accepted on ``/v2``."""

    # ---- response cache (answers of versions declared deterministic)
    response_cache_enabled: bool = True
    """Reuse the answers of versions whose manifest declares ``runtime.deterministic``
    (docs/cache.md). Tenants that declared no-cache are never cached either way."""

    response_cache_max_bytes: int = Field(default=64 << 20, ge=0)
    """Bytes of answers each process keeps in memory (least recently used go first)."""

    response_cache_max_entry_bytes: int = Field(default=1 << 20, gt=0)
    """Largest answer cached; a bigger one is answered, not kept."""

    response_cache_ttl_seconds: float = Field(default=300.0, gt=0)
    """How long a cached answer is reused after it was computed, in memory and in Redis."""

    response_cache_redis: bool = True
    """With ``redis_url``, also keep answers in Redis, shared by every process of the
    installation."""

    # ---- tenancy
    redis_url: str | None = None
    """Redis shared by gateway processes (``redis://host:6379/0``); revoked and rotated API
    keys stop working in every process at once. Default none (embedded: one process)."""

    key_cache_ttl_seconds: float = Field(default=60.0, gt=0)
    """Longest a process reuses a cached API key credential before reading it again."""

    console_session_ttl_seconds: float = Field(default=8 * 3600, gt=0)
    """How long a web console sign-in lasts (``/console``); the person signs in again after."""

    # ---- limits and request hygiene
    limits_cache_ttl_seconds: float = Field(default=5.0, ge=0)
    """Longest a process reuses cached limits and budgets rows; a changed limit reaches every
    gateway within this time."""

    limits_lease_seconds: float = Field(default=30.0, gt=0)
    """With Redis, a concurrency slot whose holder stopped renewing it (crashed) frees itself
    after this long."""

    max_api_body_bytes: int = Field(default=4 << 20, gt=0)
    """Largest request body accepted on ``/api`` (uploads have ``max_chunk_bytes``)."""

    body_read_timeout_seconds: float = Field(default=10.0, gt=0)
    """Longest wait for the next part of a request body (between two reads, not for the
    whole body, so a large upload on a slow link is not cut): a client that stops
    sending gets 408 ``body_timeout`` and its connection is closed."""

    max_json_depth: int = Field(default=64, ge=1)
    """Deepest nesting of arrays and objects accepted in a JSON request body."""

    max_tensor_elements: int = Field(default=1 << 26, gt=0)
    """Most elements all input tensors of one inference request may declare together."""

    max_decompressed_request_bytes: int | None = Field(default=None, gt=0)
    """Largest inference body after ``Content-Encoding`` is undone; default
    ``max_inference_request_bytes``."""

    # ---- metering
    metering_revenue_share_bps: int = Field(default=7000, ge=0, le=10_000)
    """The publisher's share of what its models earn (basis points) when a price rule sets
    none."""

    cost_per_core_second_micros: float = Field(default=0.0, ge=0)
    """What one core-second of measured compute costs the operator, in micros of the
    currency (``metering.costs``): each call's cost, each model's margin. 0: unpriced."""

    cost_per_gpu_second_micros: float = Field(default=0.0, ge=0)
    """The same for one GPU-second."""

    metering_reservation_grace_seconds: float = Field(default=60.0, gt=0)
    """A reservation not settled this long after its call's deadline (its process died)
    expires, and the sweeper gives back what it held."""

    metering_sweep_interval_seconds: float = Field(default=30.0, gt=0)
    """How often a serving process looks for expired reservations."""

    job_runner_concurrency: int = Field(default=4, ge=0)
    """Jobs one serving process runs at once (0: it runs none, only accepts them)."""

    job_lease_seconds: float = Field(default=30.0, gt=0)
    """A runner's claim on a job; renewed every third of it while a stage runs. A job
    whose runner died is resumed by another this long after its last renewal."""

    job_poll_seconds: float = Field(default=1.0, gt=0)
    """How often an idle runner looks for jobs submitted through other processes (its
    own process's are started at once)."""

    job_inline_output_bytes: int = Field(default=1 << 20, ge=0)
    """A job's output document up to this size is shown inline by ``GET /api/jobs/{id}``;
    a larger one by its digest, size and a signed, expiring ``url`` only."""

    job_output_url_seconds: int = Field(default=3600, gt=0, le=7 * 24 * 3600)
    """How long a signed output URL stays valid after the job was read."""

    job_output_url_secret: SecretStr = SecretStr("")
    """The key that signs output URLs (any string; every process of the installation
    needs the same). Unset: derived from the installation's secret key (``secret_key``,
    or the embedded key file); a distributed installation with neither makes no URLs."""

    metering_drain_interval_seconds: float = Field(default=0.25, gt=0)
    """How often the usage outbox is delivered (to the ledger, or the Redis stream)."""

    metering_outbox_lease_seconds: float = Field(default=30.0, gt=0)
    """Outbox rows a drainer took and did not acknowledge within this time (it died) are
    delivered again; so are stream entries left pending by a dead consumer."""

    metering_stream: str = "usage"
    """With Redis: the stream usage events travel through to the ledger (consumer group
    ``ledger``), named in the installation's keyspace (``modelport:{installation}:usage``)."""

    metering_delivery: Literal["auto", "ledger", "stream"] = "auto"
    """How usage events reach the ledger: ``ledger``, written by the process that
    settled them (idempotent by ``event_id``, so any number of processes may); ``stream``,
    through ``metering_stream`` in Redis to the consumer group; ``auto``: the stream in
    the distributed shape (Redis and PostgreSQL), the ledger otherwise (a SQLite home,
    also with ``--workers`` sharing Redis on one machine, where the stream would only
    add a hop)."""

    metering_durability: Literal["auto", "journal", "database"] = "auto"
    """Where a call's settlement is made durable before its answer: ``journal``, a file of
    this process's own (one write, applied to the database moments later; survives a
    crash of the process, not a power loss before its next fsync, like SQLite's own
    commits); ``database``, a committed transaction (group commit); ``auto``: the
    journal on SQLite, the database on PostgreSQL (where local disk may not outlive the
    process's machine)."""

    metering_journal_dir: Path | None = None
    """Folder of the usage journals; default ``home/journal``."""

    metering_journal_interval_seconds: float = Field(default=0.1, gt=0)
    """How often the usage journal is applied to the database. Each application costs
    an fsync and a transaction whatever it carries: shorter intervals update the
    ledger sooner and cost more CPU per call at low rates (a call's hold stays on its
    levels until then, so budgets stay safe)."""

    # ---- endpoints and deployments
    serving_rollback_window_seconds: float = Field(default=3600.0, ge=0)
    """How long a replaced deployment stays warm, ready to be restored by a rollback."""

    serving_tenant_memory_bytes: int | None = Field(default=None, gt=0)
    """Host memory one tenant's live deployments may take together (each version's memory
    times ``max_replicas``); default not limited."""

    serving_shadow_max_in_flight: int = Field(default=4, ge=0)
    """Shadow copies running at once in this process; more are dropped (and counted)."""

    serving_idempotency_window_seconds: float = Field(default=86400.0, gt=0)
    """How long a prediction's answer is replayed for a repeat of its ``Idempotency-Key``."""

    serving_refresh_seconds: float = Field(default=2.0, gt=0)
    """How often a process checks the database for endpoint changes made by another one."""

    backend_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Hosts (``host`` or ``host:port``, comma-separated) remote backends may be declared
    at, and reached, at private, loopback or link-local addresses (e.g. a gateway's
    workers, ``worker-0.workers.svc:8000``). Every other backend URL must resolve only
    to public addresses, checked when it is declared and again at every connection."""

    # ---- backends: health, circuit breaking, retries
    serving_health_interval_seconds: float = Field(default=5.0, gt=0)
    """How often every backend's health is probed (in the background)."""

    serving_health_timeout_seconds: float = Field(default=2.0, gt=0)
    """A health probe not answered within this many seconds failed."""

    serving_breaker_window_seconds: float = Field(default=30.0, gt=0)
    """Window over which a backend's failure rate is measured."""

    serving_breaker_min_calls: int = Field(default=5, ge=1)
    """Calls (requests and probes) in the window before the failure rate may open a
    backend's circuit breaker."""

    serving_breaker_failure_rate: float = Field(default=0.5, gt=0, le=1)
    """Failure rate (0-1) at or above which a backend's circuit breaker opens."""

    serving_breaker_open_seconds: float = Field(default=10.0, ge=0)
    """How long an open breaker keeps requests off a backend before a half-open trial."""

    serving_max_attempts: int = Field(default=3, ge=1)
    """Replicas of one version tried for one request (the first try and the retries)."""

    serving_attempt_timeout_seconds: float | None = Field(default=None, gt=0)
    """Longest one attempt may take while other replicas remain; default the deadline."""

    # ---- prediction log
    prediction_retention_days: int = Field(default=90, ge=1, le=3650)
    """How long the prediction log keeps a record (inputs and outputs included), for a
    tenant that set no retention of its own (``PUT /api/tenants/{tenant}/retention``)."""

    prediction_retention_interval_seconds: float = Field(default=3600.0, gt=0)
    """How often a serving process deletes the records past their tenant's retention."""

    prediction_log_capacity: int = Field(default=100_000, ge=1)
    """Records waiting to be written at most; past it new records are dropped (counted)."""

    prediction_log_detail_capacity: int = Field(default=10_000, ge=1)
    """Waiting records past which inputs and outputs are kept only for a sample (the audit
    fields always are); at most ``prediction_log_capacity``."""

    prediction_log_pressure_sample_every: int = Field(default=10, ge=1)
    """Under pressure, inputs and outputs are kept for one record in this many."""

    prediction_log_batch_size: int = Field(default=500, ge=1)
    """Records written per insert."""

    prediction_log_flush_interval_seconds: float = Field(default=1.0, gt=0)
    """Longest a record waits before it is written."""

    monitoring_check_seconds: float = Field(default=30.0, gt=0)
    """How often endpoints' drift and quality monitors are looked at; each runs at its
    own policy's ``interval_seconds`` (``modelport.monitoring``). 0 is refused: a
    monitor with nothing to run costs one small query per look."""

    # ---- OpenID Connect (off while ``oidc_issuer`` is unset)
    oidc_issuer: str | None = None
    """Issuer URL of the OpenID provider (its ``/.well-known/openid-configuration`` is
    read from there). Set: the provider's JWTs are accepted as bearer tokens, and people
    may sign in with it (authorization code with PKCE)."""

    oidc_audience: str | None = None
    """The ``aud`` a bearer JWT must carry; default ``oidc_client_id``."""

    oidc_client_id: str | None = None
    """This platform's client id at the provider (sign-in, and the id token's ``aud``)."""

    oidc_client_secret: SecretStr | None = None
    """The client's secret at the provider, for a confidential client; unset for a
    public one (PKCE alone). Never logged."""

    oidc_groups_claim: str = "groups"
    """The token claim that lists the subject's groups at the provider."""

    oidc_group_roles: dict[str, str] = Field(default_factory=dict)
    """Provider groups to tenant roles, JSON: ``{"ml-team": "acme:publisher"}``. A
    subject's groups must map into exactly one tenant; its roles there are the union of
    its groups' roles. A subject with no mapped group is refused."""

    oidc_leeway_seconds: int = Field(default=30, ge=0, le=300)
    """Clock skew allowed on a token's ``exp``, ``nbf`` and ``iat``."""

    oidc_jwks_min_refresh_seconds: float = Field(default=30.0, ge=0)
    """A token with an unknown key id fetches the provider's JWKS again (key rotation),
    at most once in this many seconds."""

    oidc_http_timeout_seconds: float = Field(default=5.0, gt=0)
    """Longest a request to the provider (discovery, JWKS, token endpoint) may take."""

    # ---- webhooks
    webhook_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Hosts (``host`` or ``host:port``, comma-separated) webhooks may reach over plain
    ``http`` and at private or loopback addresses: for local development only (e.g.
    ``127.0.0.1:8123``). Every other webhook URL must be ``https`` to a public address."""

    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    """Longest one delivery attempt may take (connect, send, the receiver's status)."""

    webhook_retry_window_seconds: float = Field(default=24 * 3600.0, gt=0)
    """How long a delivery is retried before it is marked failed."""

    webhook_retry_base_seconds: float = Field(default=5.0, gt=0)
    """Backoff after the first failed attempt, at most: it doubles with each attempt up
    to ``webhook_retry_max_seconds``, and each wait is drawn at random below it."""

    webhook_retry_max_seconds: float = Field(default=3600.0, gt=0)
    """Longest wait between two attempts, at most."""

    webhook_secret_overlap_seconds: float = Field(default=24 * 3600.0, ge=0)
    """After a signing secret is rotated, how long the old one still signs deliveries
    too (receivers move to the new one meanwhile)."""

    webhook_concurrency: int = Field(default=8, ge=1)
    """Deliveries a process claims, and posts at once, per step."""

    webhook_poll_interval_seconds: float = Field(default=1.0, gt=0)
    """How often a process looks for deliveries that are due."""

    webhook_lease_seconds: float = Field(default=60.0, gt=0)
    """A claimed delivery whose attempt is not recorded this long after (its process
    died) is due again."""

    @field_validator("webhook_allow_hosts", "backend_allow_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, v: object) -> object:
        if isinstance(v, str):
            return tuple(h.strip() for h in v.split(",") if h.strip())
        return v

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

    @field_validator("metrics_token")
    @classmethod
    def _strong_metrics_token(cls, v: str) -> str:
        if v and len(v) < MIN_ADMIN_KEY_LENGTH:
            raise ValueError(f"must be empty or at least {MIN_ADMIN_KEY_LENGTH} characters")
        return v

    @field_validator("oidc_group_roles")
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
    def _worker_token_apart(self) -> Settings:
        if self.worker_token and len(self.worker_token) < MIN_ADMIN_KEY_LENGTH:
            raise ValueError(
                f"MODELPORT_WORKER_TOKEN must be at least {MIN_ADMIN_KEY_LENGTH} characters"
            )
        if self.worker_token and self.worker_token == self.admin_key:
            raise ValueError("MODELPORT_WORKER_TOKEN must differ from the admin key")
        if self.worker_lease_seconds <= self.worker_heartbeat_seconds:
            raise ValueError("MODELPORT_WORKER_LEASE_SECONDS must outlast the heartbeat")
        return self

    @property
    def worker_pool_on(self) -> bool:
        """Whether this process is part of a worker pool (see ``worker_token``)."""
        return bool(self.worker_token and self.redis_url and self.role is not Role.ALL)

    @model_validator(mode="after")
    def _oidc_complete(self) -> Settings:
        if self.oidc_issuer and not (self.oidc_audience or self.oidc_client_id):
            raise ValueError(
                "MODELPORT_OIDC_ISSUER is set: set MODELPORT_OIDC_AUDIENCE or "
                "MODELPORT_OIDC_CLIENT_ID too (the audience tokens must carry)"
            )
        return self

    @property
    def resolved_oidc_audience(self) -> str | None:
        return self.oidc_audience or self.oidc_client_id

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

    @property
    def uses_usage_stream(self) -> bool:
        """Whether usage events travel to the ledger through the Redis stream."""
        if self.metering_delivery == "auto":
            return bool(self.redis_url) and not self.is_embedded_database
        return self.metering_delivery == "stream"

    @property
    def uses_usage_journal(self) -> bool:
        """Whether settlements are made durable in the usage journal."""
        if self.metering_durability == "auto":
            return self.is_embedded_database
        return self.metering_durability == "journal"

    @property
    def resolved_metering_journal_dir(self) -> Path:
        return self.metering_journal_dir or self.home / "journal"

    @property
    def resolved_signing_key_path(self) -> Path:
        return self.signing_key_path or self.home / "keys" / "signing.pem"

    @property
    def secret_keys(self) -> tuple[str, ...]:
        """The configured secret keys, newest first (``secret_key`` split on commas)."""
        key: SecretStr | str = self.secret_key  # a str when set by ``model_copy``
        value = key.get_secret_value() if isinstance(key, SecretStr) else key
        return tuple(key.strip() for key in value.split(",") if key.strip())

    @property
    def resolved_secret_key_path(self) -> Path:
        return self.secret_key_path or self.home / "keys" / "secret.key"
