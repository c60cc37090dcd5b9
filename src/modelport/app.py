"""The composition root: the one place that builds infrastructure from settings."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

from fastapi import FastAPI

from modelport.assets.search import AssetSearch
from modelport.background.lifecycle import Lifecycle
from modelport.background.loops import BackgroundLoop
from modelport.background.pools import ThreadPools
from modelport.blobs import BlobStore
from modelport.blobs.local import LocalBlobStore
from modelport.blobs.service import BlobService
from modelport.blobs.sweeper import periodic_upload_sweep
from modelport.blobs.uploads import UploadService
from modelport.changes import (
    AliasMoved,
    ChangeBus,
    EndpointChanged,
    GrantChanged,
    LocalChangeBus,
    VersionPublished,
    VersionTransitioned,
)
from modelport.clock import Clock, SystemClock
from modelport.config import Role, Settings
from modelport.console.sessions import ConsoleSessions
from modelport.files import FileService
from modelport.keyspace import Keyspace
from modelport.manifest import Manifest
from modelport.netpolicy import Resolver, UrlPolicy, system_resolver
from modelport.observability.tracing import PresetIds, RootSampler, Tracing
from modelport.registry.service import RegistryService
from modelport.registry.signing import Signer
from modelport.registry.validation import SubprocessValidator
from modelport.sandbox import (
    UNISOLATED_DOES_NOT_PROTECT,
    UNISOLATED_PROTECTS,
    Caps,
    Enforcement,
    Sandbox,
    SandboxMode,
    SandboxUnavailable,
)
from modelport.sandbox.cgroups import Cgroups
from modelport.store import Database, create_database, upgrade
from modelport.store.installation import installation_id
from modelport.store.secrets import SecretBox
from modelport.tenancy.admin import AdminKeyAuthenticator
from modelport.tenancy.authn import Authenticator
from modelport.tenancy.service import TenancyService
from modelport.tenancy.types import Tenant

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.sampling import Sampler
    from opentelemetry.trace import Tracer

    from modelport.api.grpc.pool_tls import PoolTls
    from modelport.api.grpc.server import GrpcSurface
    from modelport.api.grpc.worker import PoolMember
    from modelport.datasets.service import DatasetService
    from modelport.evaluations.service import EvaluationService
    from modelport.inference.access_facts import AccessFacts
    from modelport.inference.cache import ResponseCache
    from modelport.inference.degrade import Degradation
    from modelport.inference.repository import ModelRepository
    from modelport.inference.routed import TaskRouter
    from modelport.inference.service import InferenceService
    from modelport.inference.targets import VersionTargets
    from modelport.jobs.batch import BatchService
    from modelport.jobs.outputs import JobOutputs
    from modelport.jobs.runner import JobNotifier, JobRunner
    from modelport.jobs.service import JobService
    from modelport.jobs.stages import StageRegistry
    from modelport.jobs.validation import ValidationJobs
    from modelport.metering.billing.service import BillingService
    from modelport.metering.service import MeteringService
    from modelport.moderation.service import ModerationService
    from modelport.monitoring.service import MonitoringService
    from modelport.observability.http_metrics import HttpMetrics
    from modelport.observability.metrics import RuntimeMetrics
    from modelport.observability.predictions import PredictionLog
    from modelport.observability.retention import PredictionRetention
    from modelport.observability.sampling import PredictionSampling
    from modelport.observability.serving_metrics import ServingMetrics
    from modelport.observability.slo_metrics import SLIMetrics
    from modelport.observability.slo_status import SLOStatusService
    from modelport.observability.version_traffic import VersionTrafficService
    from modelport.runtime.engines import GenerativeHost
    from modelport.runtime.formats.base import GenerativeFormat
    from modelport.runtime.generative.metrics import GenerationMetrics
    from modelport.runtime.host import LoadCheck, ModelHost
    from modelport.runtime.types import VersionKey
    from modelport.serving.backends.base import Backend
    from modelport.serving.health import HealthBoard, HealthProber
    from modelport.serving.outcomes import OutcomeService
    from modelport.serving.placement import Placement
    from modelport.serving.plane import ServingPlane
    from modelport.serving.pool.gateway import GatewayPool
    from modelport.serving.pool.view import PoolView
    from modelport.serving.processing import ProcessingPools
    from modelport.serving.repository_sync import RepositorySync
    from modelport.serving.routing.shadow import ShadowResult
    from modelport.serving.types import VersionRef
    from modelport.templates.service import TemplateService
    from modelport.tenancy.limits import LimitService
    from modelport.tenancy.oidc import OidcBearer, OidcClient
    from modelport.webhooks.service import WebhookService


@dataclass
class Services:
    """Everything a surface (HTTP, CLI) may call, built once per process."""

    settings: Settings
    database: Database
    blob_store: BlobStore
    blobs: BlobService
    uploads: UploadService
    registry: RegistryService
    authenticator: Authenticator
    metrics: RuntimeMetrics
    host: ModelHost | None
    """None in the ``gateway`` role: versions run on remote backends."""
    processing: ProcessingPools | None
    """Publishers' pre- and post-processing workers; None where ``host`` is."""
    tenancy: TenancyService
    limits: LimitService
    metering: MeteringService
    serving: ServingPlane
    health: HealthProber
    prediction_log: PredictionLog
    retention: PredictionRetention
    sampling: PredictionSampling
    """How long the prediction log keeps records, per tenant; its sweep; deletion."""
    outcomes: OutcomeService
    version_traffic: VersionTrafficService
    """Error rate and latency per version of an endpoint, from the prediction log."""
    slo_status: SLOStatusService
    """An endpoint's SLOs now (budget left, burn rates), from the prediction log."""
    billing: BillingService
    repository_sync: RepositorySync
    changes: ChangeBus
    clock: Clock
    """The one clock of everything that waits on time (TTL caches, limiters, key
    expiry, the serving controller): a test hands ``build_services`` a ``ManualClock``."""
    inference: InferenceService
    """The inference use case every surface calls."""
    model_repository: ModelRepository
    """Which versions this process hosts; loads and unloads (the ``/v2`` repository)."""
    http_metrics: HttpMetrics
    """Requests by route, method and status, on ``metrics.registry``."""
    files: FileService
    """Tenants' uploaded files (``/v1/files``: batch inputs)."""
    webhooks: WebhookService
    """Signed webhooks: secrets, the delivery log, and the deliverer (a background loop
    started with the application)."""
    moderation: ModerationService
    """Tenants' content policies and the audit of moderation decisions."""
    secret_box: SecretBox
    """Seals and opens the secrets services store (``store.secrets``): hand it to a
    service that stores one."""
    jobs: JobService
    """Durable jobs: submit, get, list, cancel."""
    job_runner: JobRunner
    """This process's job runner (started by the API's lifespan)."""
    validations: ValidationJobs
    """Versions' validations as jobs, capped across the installation (``jobs.validation``)."""
    batches: BatchService
    """Batches over files of requests (``/v1/batches``): jobs of the batch pipeline."""
    job_outputs: JobOutputs
    """A job's outputs inline or by signed, expiring URL, and the blobs behind them."""
    console_sessions: ConsoleSessions
    """The web console's signed-in sessions (``/console``), their credentials sealed."""
    datasets: DatasetService
    """Datasets as assets: versioned split files with visibility and grants."""
    evaluations: EvaluationService
    """Evaluations run as jobs, publishers' claims, and the leaderboards."""
    templates: TemplateService
    """Prompt templates as assets: versioned chat prompts with variables."""
    assets: AssetSearch
    """Datasets and templates in one catalog, searched as the caller may read them."""
    monitoring: MonitoringService
    """Endpoints' drift and quality monitors over the prediction log (checked on a
    schedule: the ``monitors`` loop)."""
    engines: GenerativeHost | None = None
    """This process's generative engines; None in the ``gateway`` role, or when no
    generative format is installed (the ``modelport[llm]`` extra)."""
    oidc: OidcClient | None = None
    """Signing people in with the OpenID provider; None unless ``MODELPORT_OIDC_ISSUER``
    is set (then the authenticator accepts the provider's JWTs too)."""
    pools: ThreadPools = field(default_factory=ThreadPools)
    """The process's thread pools (webhook attempts, processing calls), closed after the
    services that submit to them."""
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    """Who starts and stops what, in which order: the API's lifespan runs
    ``lifecycle.running()``, ``close`` closes its resources."""
    worker_pool: GatewayPool | None = None
    """A gateway's side of the worker pool (view, placer, autoscaler), where it is on."""
    grpc: GrpcSurface | None = None
    """The Open Inference Protocol over gRPC, where ``GRPC_PORT`` is set: it listens
    while the lifecycle runs (``build_grpc``)."""
    tracing: Tracing = field(default_factory=Tracing)
    """The process's tracer (off unless the ``OTEL_*`` variables turn it on)."""

    def close(self) -> None:
        """Close every resource the process holds, in the reverse of their building."""
        self.lifecycle.close()


@dataclass
class WorkerServices:
    """What a ``worker`` process needs: the model host, and the registry and blobs to
    load versions from. No metering, billing, limits or tenancy: it answers only the
    operator's key (its gateway's), which meters the calls it makes."""

    settings: Settings
    database: Database
    blob_store: BlobStore
    registry: RegistryService
    metrics: RuntimeMetrics
    host: ModelHost
    clock: Clock
    processing: ProcessingPools | None = None
    """Publishers' pre- and post-processing workers, for the versions this worker runs."""
    pools: ThreadPools = field(default_factory=ThreadPools)
    """The process's thread pools, closed after the services that submit to them."""
    tracing: Tracing = field(default_factory=Tracing)
    """The process's tracer (off unless the ``OTEL_*`` variables turn it on): a gateway's
    call continues its trace here."""
    engines: GenerativeHost | None = None
    """Its generative engines (None without a generative format installed): the
    generative versions placed on it stream from them."""
    pool: PoolMember | None = None
    """Its part in the worker pool (``WORKER_TOKEN`` with ``REDIS_URL``): the gRPC server
    and the agent that announces it and loads what is placed on it."""
    closers: list[Callable[[], object]] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WorkerServices]:
        """What works while the worker serves (its pool membership)."""
        if self.pool is None:
            yield self
            return
        async with self.pool.running():
            yield self

    def close(self) -> None:
        for close in self.closers:
            close()
        if self.processing is not None:
            self.processing.close()
        if self.engines is not None:
            self.engines.close()
        self.host.close()
        self.pools.close()
        self.database.dispose()
        self.tracing.shutdown()


_SAMPLERS = {
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
}


def build_tracing(environ: Mapping[str, str] | None = None) -> Tracing:
    """The process's tracer, as the standard OpenTelemetry variables say (``environ``:
    the process's by default); off (no tracer, no SDK imported) unless they ask for it.

    ``OTEL_TRACES_EXPORTER``: ``otlp`` (OTLP over HTTP, ``OTEL_EXPORTER_OTLP_ENDPOINT``
    or ``…_TRACES_ENDPOINT``), ``console``, or ``none``; unset, it is ``otlp`` when an
    OTLP endpoint is set, else ``none``. ``OTEL_SDK_DISABLED=true`` turns it off.
    ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG`` choose the sampler
    (``parentbased_always_on`` by default), ``OTEL_SERVICE_NAME`` the service
    (``modelport`` by default). Needs the ``otel`` extra (the SDK and the exporter)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Tracing()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    named = env.get("OTEL_TRACES_EXPORTER") or ("otlp" if endpoint else "none")
    exporters = [name.strip().lower() for name in named.split(",") if name.strip()]
    exporters = [name for name in exporters if name != "none"]
    if not exporters:
        return Tracing()
    unknown = [name for name in exporters if name not in ("otlp", "console")]
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER: unsupported exporter {unknown[0]!r}")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if "otlp" in exporters and protocol != "http/protobuf":
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is built in, not {protocol!r}"
        )
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        from opentelemetry.sdk.trace.id_generator import IdGenerator
    except ImportError as exc:  # the base install has the API only
        raise ValueError(
            "tracing is on (OTEL_TRACES_EXPORTER) but the OpenTelemetry SDK is not installed: "
            "install modelport[otel]"
        ) from exc
    resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or "modelport"})
    sampler, ratio = build_sampler(env), root_ratio(env)
    ids = PresetIds()
    # PresetIds is an IdGenerator by shape (``observability`` does not import the SDK).
    provider = TracerProvider(
        resource=resource, sampler=sampler, id_generator=cast("IdGenerator", ids)
    )
    processors: list[SpanProcessor] = []
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if not traces and endpoint:
            traces = endpoint.rstrip("/") + "/v1/traces"  # the signal's path, as the spec says
        # Its headers, timeout and compression come from the process's OTEL_* variables.
        processors.append(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces or None)))
    if "console" in exporters:
        processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
    for processor in processors:
        provider.add_span_processor(processor)
    roots = RootSampler(ratio, ids) if ratio is not None else None
    return Tracing(provider.get_tracer("modelport"), shutdown=provider.shutdown, roots=roots)


def root_ratio(env: Mapping[str, str]) -> float | None:
    """The ratio a root request is sampled at, where the sampler is one the surfaces may
    decide for themselves at the root (``RootSampler``): the ``traceidratio`` ones and
    ``always_off``; None for the others (``always_on``: every root is recorded anyway)."""
    name = (env.get("OTEL_TRACES_SAMPLER") or "parentbased_always_on").strip().lower()
    if name.endswith("always_off"):
        return 0.0
    if name.endswith("traceidratio"):
        argument = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
        return float(argument) if argument else 1.0
    return None


def build_sampler(env: Mapping[str, str]) -> Sampler:
    """``OTEL_TRACES_SAMPLER`` (with ``OTEL_TRACES_SAMPLER_ARG``, a ratio) as a sampler;
    a caller's sampled flag is followed by the ``parentbased_*`` ones."""
    from opentelemetry.sdk.trace import sampling

    name = (env.get("OTEL_TRACES_SAMPLER") or "parentbased_always_on").strip().lower()
    if name not in _SAMPLERS:
        raise ValueError(f"OTEL_TRACES_SAMPLER: unsupported sampler {name!r}")
    argument = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        ratio = float(argument) if argument else 1.0
    except ValueError:
        raise ValueError(f"OTEL_TRACES_SAMPLER_ARG: not a ratio: {argument!r}") from None
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"OTEL_TRACES_SAMPLER_ARG: {ratio} is not between 0 and 1")
    root: Sampler
    if name.endswith("always_on"):
        root = sampling.ALWAYS_ON
    elif name.endswith("always_off"):
        root = sampling.ALWAYS_OFF
    else:
        root = sampling.TraceIdRatioBased(ratio)
    return sampling.ParentBased(root) if name.startswith("parentbased_") else root


def build_metrics() -> RuntimeMetrics:
    """The process's metrics registry: the runtime's series, and the process, Python
    platform and garbage collector series (with several workers, a scrape shows every
    worker's process series instead: ``observability.process_metrics``)."""
    from modelport.observability import process_metrics
    from modelport.observability.metrics import RuntimeMetrics

    metrics = RuntimeMetrics()
    process_metrics.install(metrics.registry)
    return metrics


def build_blob_store(settings: Settings) -> BlobStore:
    if settings.store.blob_url and settings.store.blob_url.startswith("s3://"):
        from modelport.blobs.s3 import S3BlobStore

        parsed = urlparse(settings.store.blob_url)
        return S3BlobStore(
            bucket=parsed.netloc,
            prefix=parsed.path.strip("/"),
            endpoint_url=settings.store.s3_endpoint_url,
            region=settings.store.s3_region,
            staging_dir=settings.store.home / "staging",
        )
    root = settings.store.home / "blobs"
    if settings.store.blob_url:
        parsed = urlparse(settings.store.blob_url)
        if parsed.scheme not in ("", "file"):
            raise ValueError(f"unsupported MODELPORT_BLOB_URL scheme: {parsed.scheme}")
        from pathlib import Path

        root = Path(parsed.path)
    return LocalBlobStore(root)


def build_host(
    settings: Settings,
    metrics: RuntimeMetrics,
    check_load: LoadCheck | None = None,
    clock: Clock | None = None,
    tracer: Tracer | None = None,
) -> ModelHost:
    """The in-process model host, configured from the ``runtime_*`` settings;
    ``check_load`` (``signature_check``) runs before every load; worker crashes are
    counted on ``clock`` (``runtime_process_*``); ``tracer``: its batchers' spans."""
    import psutil

    from modelport.runtime.admission import MemoryBudget
    from modelport.runtime.cache import ModelCache
    from modelport.runtime.formats import FormatRegistry
    from modelport.runtime.host import ModelHost
    from modelport.runtime.process.crashes import CrashLedger
    from modelport.runtime.process.executor import ProcessExecutors
    from modelport.runtime.process.launching import SandboxLauncher
    from modelport.runtime.types import BatchingConfig, Execution

    host_budget = settings.runtime.memory_budget_bytes or int(psutil.virtual_memory().total * 0.7)
    device_budget = settings.runtime.device_memory_budget_bytes
    # Every worker process hosts its own copies: each gets its share of the budgets.
    host_budget //= settings.workers
    if device_budget is not None:
        device_budget //= settings.workers
    onnx = {
        "intra_op_threads": settings.runtime.intra_op_threads,
        "intra_op_spinning": settings.runtime.intra_op_spinning,
        "graph_optimization": settings.runtime.graph_optimization,
    }
    formats = FormatRegistry({"onnx": onnx, "transformers": transformers_options(settings)})
    ledger = CrashLedger(
        limit=settings.runtime.process_crash_limit,
        window=settings.runtime.process_crash_window_seconds,
        clock=clock or SystemClock(),
    )
    sandbox = build_sandbox(settings)
    report_execution(settings, sandbox)
    return ModelHost(
        cache=ModelCache(settings.store.home / "cache"),
        formats=formats,
        budget=MemoryBudget(host_budget, device_budget),
        batching=BatchingConfig(
            max_batch_size=settings.runtime.max_batch_size,
            max_queue_delay_us=settings.runtime.max_queue_delay_us,
            max_queue_size=settings.runtime.max_queue_size,
            offline_queue_share=settings.runtime.offline_queue_share,
            instances=settings.runtime.instances,
        ),
        load_timeout=settings.runtime.load_timeout_seconds,
        observer=metrics,
        check_load=check_load,
        tracer=tracer,
        clock=clock,
        process_executors=ProcessExecutors(
            formats.spec,
            ledger=ledger,
            start_timeout=settings.runtime.process_start_timeout_seconds,
            observer=metrics,
            # Model hosts run publishers' files: started as validation's children are,
            # with nothing of this installation's (environment, home, network).
            launcher=SandboxLauncher(sandbox, scratch_root=settings.store.home / "model-hosts"),
        ),
        crash_ledger=ledger,
        execution=Execution.PROCESS if settings.runtime.execution == "process" else None,
    )


def report_execution(settings: Settings, sandbox: Sandbox) -> None:
    """Say at start-up where publishers' models will be parsed and run: in model hosts
    under ``sandbox`` (``runtime.model_hosts``), nowhere where the sandbox cannot start
    them here (``runtime.model_hosts_unavailable``: every version's load then fails
    closed with ``sandbox_unavailable``), or in this process, beside its
    credentials, where the operator chose ``manifest`` (``runtime.execution_in_server``).
    Never a silent fall-back to threads."""
    import logging

    from modelport.logs import log_event

    logger = logging.getLogger("modelport.runtime")
    if settings.runtime.execution == "manifest":
        log_event(
            logger,
            "runtime.execution_in_server",
            level=logging.WARNING,
            setting="MODELPORT_RUNTIME_EXECUTION=manifest",
            consequence="publishers' ONNX, transformers and GGUF files are parsed and run "
            "in this server process, beside its credentials, unless a tensor version's "
            "manifest asks for process execution",
            remedy="unset MODELPORT_RUNTIME_EXECUTION (default: process)",
        )
        return
    try:
        confinement = sandbox.confinement()
    except SandboxUnavailable as exc:
        log_event(
            logger,
            "runtime.model_hosts_unavailable",
            level=logging.ERROR,
            setting="MODELPORT_RUNTIME_EXECUTION=process",
            sandbox=f"MODELPORT_SANDBOX={settings.sandbox.mode}",
            consequence="no version can load here: each fails closed with "
            "sandbox_unavailable; nothing is run in the server process instead",
            reason=exc.message,
            remedy="install bubblewrap; or MODELPORT_SANDBOX=unisolated (model hosts "
            "without namespaces); or MODELPORT_RUNTIME_EXECUTION=manifest (threads of "
            "the server, beside its credentials)",
        )
        return
    log_event(
        logger,
        "runtime.model_hosts",
        setting="MODELPORT_RUNTIME_EXECUTION=process",
        isolation=confinement.isolation.value,
        seccomp=confinement.seccomp,
    )


def transformers_options(settings: Settings) -> dict[str, object]:
    """Options of the ``transformers`` tensor plugin (embedding models)."""
    return {"device": settings.llm.device, "dtype": settings.llm.dtype}


def build_generative_host(
    settings: Settings,
    host: ModelHost,
    metrics: RuntimeMetrics | None = None,
    check_load: LoadCheck | None = None,
) -> GenerativeHost | None:
    """The generative engines of this process, sharing ``host``'s model cache and
    ``metrics``' registry; None when no generative format is installed (without
    ``modelport[llm]``, a generative version is refused as ``unsupported_format``,
    naming the extra)."""
    from modelport.runtime.engines import GenerativeHost
    from modelport.runtime.formats.registry import generative_formats
    from modelport.runtime.formats.transformers.availability import llm_installed

    generation_metrics = None
    if metrics is not None and llm_installed():
        from modelport.runtime.generative.metrics import GenerationMetrics

        generation_metrics = GenerationMetrics(registry=metrics.registry)

    options: dict[str, object] = {
        **transformers_options(settings),
        "kv_cache_bytes": settings.llm.kv_cache_bytes,
        "max_running": settings.llm.max_running,
        "max_waiting": settings.llm.max_waiting,
        "offline_waiting_share": settings.runtime.offline_queue_share,
        "engine": settings.llm.engine,
        "threads": settings.llm.threads,
    }
    formats = generative_formats({"transformers": {**options, "metrics": generation_metrics}})
    if not formats:
        return None
    if settings.llm.engine == "auto":
        report_llama()
    if settings.runtime.execution == "process":
        formats = hosted_generative_formats(settings, formats, options, generation_metrics)
    return GenerativeHost(cache=host.cache, formats=formats, check_load=check_load)


def report_llama() -> None:
    """Say at start-up when llama.cpp cannot run here (``runtime.llama_unavailable``):
    GGUF versions then run de-quantized on ``transformers``."""
    import logging

    from modelport.logs import log_event
    from modelport.runtime.generative.llama.library import llama_problem

    problem = llama_problem()
    if problem is None:
        return
    log_event(
        logging.getLogger("modelport.runtime"),
        "runtime.llama_unavailable",
        level=logging.WARNING,
        consequence="GGUF versions run de-quantized on the transformers engine; a version "
        "pinned to llama.cpp (runtime.engine) fails to load with engine_unavailable",
        reason=problem,
        remedy="./scripts/bootstrap.sh builds llama-cpp-python for this CPU",
    )


def hosted_generative_formats(
    settings: Settings,
    formats: Mapping[str, GenerativeFormat],
    options: Mapping[str, object],
    metrics: GenerationMetrics | None,
) -> dict[str, GenerativeFormat]:
    """The generative plugins with their engines in sandboxed model hosts (``process``
    execution): a publisher's GGUF, weights and tokenizer are parsed there, never in
    this process."""
    from modelport.runtime.process.hosted_format import HostedGenerativeFormat
    from modelport.runtime.process.launching import SandboxLauncher

    launcher = SandboxLauncher(
        build_sandbox(settings), scratch_root=settings.store.home / "model-hosts"
    )
    return {
        name: HostedGenerativeFormat(
            plugin,
            entry=f"{type(plugin).__module__}:{type(plugin).__qualname__}",
            options=options,
            launcher=launcher,
            start_timeout=settings.runtime.process_start_timeout_seconds,
            metrics=metrics,
        )
        for name, plugin in formats.items()
    }


def build_keyspace(database: Database) -> Keyspace:
    """This installation's names in Redis, under the id its database keeps: processes
    of another installation sharing the Redis never meet them."""
    return Keyspace(installation_id(database))


def build_change_bus(settings: Settings, keys: Keyspace) -> ChangeBus:
    """How change events reach the caches: in this process, and through Redis to every
    process of the installation when it is set."""
    if settings.store.redis_url:
        from modelport.changes.redis import RedisChangeBus

        return RedisChangeBus(settings.store.redis_url, keys)
    return LocalChangeBus()


def subscribe_caches(
    changes: ChangeBus, *, resolutions: VersionTargets, access: AccessFacts
) -> Callable[[], None]:
    """Subscribe the inference path's caches to the change events they depend on; answers
    the callable that unsubscribes them all.

    A resolution of ``owner/name`` depends on its versions, their lifecycle states and
    its aliases; a tenant's grants on the grants given or withdrawn. When events may
    have been lost, everything is dropped. ``resolutions`` is None where no model is
    hosted (a gateway)."""

    def forget_model(change: VersionPublished | VersionTransitioned | AliasMoved) -> None:
        if resolutions is not None:
            resolutions.forget(change.owner, change.name)

    def forget_grants(change: GrantChanged) -> None:
        access.forget_grants(change.grantee)

    def forget_everything() -> None:
        if resolutions is not None:
            resolutions.forget_all()
        access.forget_all_grants()

    undo = [
        changes.subscribe(VersionPublished, forget_model),
        changes.subscribe(VersionTransitioned, forget_model),
        changes.subscribe(AliasMoved, forget_model),
        changes.subscribe(GrantChanged, forget_grants),
        changes.on_reset(forget_everything),
    ]

    def unsubscribe() -> None:
        for step in undo:
            step()

    return unsubscribe


def build_tenancy(
    settings: Settings,
    database: Database,
    changes: ChangeBus,
    clock: Clock | None = None,
    *,
    oidc: OidcBearer | None = None,
) -> tuple[TenancyService, Authenticator]:
    """Tenancy and the authenticator, sharing one key cache and its invalidation;
    ``oidc``: the authenticator accepts the identity provider's JWTs too."""
    from modelport.tenancy.invalidation import KeyInvalidation
    from modelport.tenancy.keycache import KeyCache

    clock = clock or SystemClock()
    cache = KeyCache(ttl=settings.tenancy.key_cache_ttl_seconds, clock=clock.monotonic)
    invalidation = KeyInvalidation(cache, changes)
    admin = AdminKeyAuthenticator(settings.security.admin_key)
    return TenancyService(database, invalidation, changes=changes, clock=clock.now), (
        Authenticator(admin, database, cache, invalidation, clock=clock.now, oidc=oidc)
    )


def build_oidc(
    settings: Settings, database: Database, clock: Clock, box: SecretBox, changes: ChangeBus
) -> OidcClient | None:
    """The OpenID Connect relying party and bearer verifier, or None when no issuer is
    set. Settings are checked here, at start (an unknown role in the group mapping
    refuses to start); the provider is first reached by the first token or sign-in.
    Sign-ins under way are sealed under a key derived from ``box``'s (none without one:
    then the sign-in routes answer 503). A tenant's suspension (``changes``) reaches the
    bearer's cache of active tenants."""
    if not settings.oidc.issuer:
        return None
    import httpx

    from modelport.changes import TenantSuspensionChanged
    from modelport.errors import InvalidInput
    from modelport.tenancy import repository as tenancy_repo

    try:
        from modelport.tenancy.oidc import (
            GroupRoles,
            KeyStore,
            OidcBearer,
            OidcClient,
            PendingSignIns,
            Provider,
            TokenVerifier,
        )
    except ImportError as exc:
        raise InvalidInput(
            f"MODELPORT_OIDC_ISSUER is set, but OpenID Connect needs the oidc extra "
            f"(pip install 'modelport[oidc]'): {exc}",
            code="oidc_extra_missing",
        ) from exc

    group_roles = GroupRoles.parse(settings.oidc.group_roles)
    audience = settings.oidc.resolved_audience
    assert audience is not None  # Settings require the audience or the client id with an issuer
    provider = Provider(
        settings.oidc.issuer, httpx.Client(timeout=settings.oidc.http_timeout_seconds)
    )
    keys = KeyStore(
        lambda: provider.get_json(provider.metadata().jwks_uri, "JWKS"),
        min_refresh_seconds=settings.oidc.jwks_min_refresh_seconds,
        clock=clock.monotonic,
    )

    def verifier(audience: str) -> TokenVerifier:
        return TokenVerifier(
            provider.issuer,
            audience,
            keys,
            leeway_seconds=settings.oidc.leeway_seconds,
            now=lambda: clock.now().timestamp(),
        )

    def find_tenant(slug: str) -> Tenant | None:
        with database.transaction() as session:
            return next(iter(tenancy_repo.list_tenants(session, only=slug)), None)

    bearer = OidcBearer(
        verifier(audience),
        group_roles,
        settings.oidc.groups_claim,
        find_tenant,
        can_remember=changes.live,
    )
    changes.subscribe(TenantSuspensionChanged, lambda change: bearer.forget(change.tenant))
    changes.on_reset(bearer.clear)
    secret = settings.oidc.client_secret
    sealing_key = box.derive("modelport oidc sign-in")
    return OidcClient(
        provider,
        verifier(settings.oidc.client_id or audience),
        bearer,
        client_id=settings.oidc.client_id or audience,
        client_secret=secret.get_secret_value() if secret is not None else None,
        pending=PendingSignIns(sealing_key, ttl_seconds=600) if sealing_key else None,
    )


def build_repository_sync(settings: Settings, keys: Keyspace) -> RepositorySync:
    """How repository loads and unloads reach the other processes sharing the Redis."""
    from modelport.serving.repository_sync import LocalRepositorySync, RedisRepositorySync

    if settings.store.redis_url:
        return RedisRepositorySync(settings.store.redis_url, keys)
    return LocalRepositorySync()


def build_limits(
    settings: Settings, database: Database, keys: Keyspace, clock: Clock | None = None
) -> LimitService:
    """Limits counted in this process, or in Redis shared by every gateway when set."""
    from modelport.tenancy.limits import (
        BudgetRepository,
        InProcessConcurrencyLimiter,
        InProcessRateLimiter,
        LimitRepository,
        LimitService,
    )

    limits, budgets = LimitRepository(database), BudgetRepository(database)
    ttl = settings.tenancy.limits_cache_ttl_seconds
    monotonic = (clock or SystemClock()).monotonic
    if not settings.store.redis_url:
        return LimitService(
            limits=limits,
            budgets=budgets,
            rates=InProcessRateLimiter(monotonic),
            slots=InProcessConcurrencyLimiter(),
            cache_ttl_seconds=ttl,
            clock=monotonic,
        )
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    from modelport.tenancy.limits.admitter import GroupAdmitter
    from modelport.tenancy.limits.redis import (
        RedisConcurrencyLimiter,
        RedisGate,
        RedisRateLimiter,
    )

    # Fail fast when Redis is away: a caller waits at most a few seconds for its 503.
    client = redis.Redis.from_url(
        settings.store.redis_url,
        socket_timeout=2,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.1, base=0.01), 1),
    )
    rates = RedisRateLimiter(client, keys)
    slots = RedisConcurrencyLimiter(
        client, keys, lease_seconds=settings.tenancy.limits_lease_seconds
    )
    gate = RedisGate(rates, slots)
    return LimitService(
        limits=limits,
        budgets=budgets,
        rates=rates,
        slots=slots,
        gate=gate,
        admitter=GroupAdmitter(gate),
        cache_ttl_seconds=ttl,
        blocking=True,
        closers=[client.close],
        clock=monotonic,
    )


def build_metering(
    settings: Settings,
    database: Database,
    registry: RegistryService,
    keys: Keyspace,
    clock: Clock | None = None,
) -> MeteringService:
    """Metering, its outbox delivered in process, or through a Redis stream
    (``uses_usage_stream``); settlements made durable in the usage journal or the
    database (``uses_usage_journal``)."""
    import socket
    import uuid

    from modelport.errors import NotFound
    from modelport.metering.authorizations import UsageAuthorizations
    from modelport.metering.balances import BalanceRepository
    from modelport.metering.costs import ComputePrices, CostReport
    from modelport.metering.ledger import Ledger
    from modelport.metering.meter import InferenceMeter
    from modelport.metering.outbox import LedgerSink, Outbox, UsageSink
    from modelport.metering.prices import PriceBook
    from modelport.metering.reservations import Reservations
    from modelport.metering.reserve_group import GroupReserver
    from modelport.metering.service import MeteringService

    def digest_of(model: str, version: str) -> str | None:
        owner, _, name = model.partition("/")
        try:
            return registry.get_version(owner, name, version).manifest_digest
        except NotFound:
            return None

    lease = settings.metering.outbox_lease_seconds
    clock = clock or SystemClock()
    now = clock.now  # every time metering stores or expires by: reservations, leases, mandates
    prices = PriceBook(
        database,
        default_revenue_share_bps=settings.metering.revenue_share_bps,
        cache_ttl_seconds=settings.tenancy.limits_cache_ttl_seconds,
        now=now,
        clock=clock.monotonic,
    )
    ledger = Ledger(database, now=now)
    outbox = Outbox(database, lease_seconds=lease, now=now)
    reservations = Reservations(database, outbox, now=now)
    sink: UsageSink = LedgerSink(ledger)
    consumer = None
    closers = []
    if settings.uses_usage_stream:
        import redis

        from modelport.errors import InvalidInput
        from modelport.metering.stream import (
            LEGACY_STREAM,
            STREAM,
            RedisLedgerConsumer,
            RedisStreamSink,
        )

        if not settings.store.redis_url:
            raise InvalidInput(
                "MODELPORT_METERING_DELIVERY=stream needs MODELPORT_REDIS_URL",
                code="redis_required",
            )

        # Blocking stream reads wait 1 s; the socket must outlast them.
        client = redis.Redis.from_url(
            settings.store.redis_url, socket_timeout=5, socket_connect_timeout=2
        )
        sink = RedisStreamSink(client, keys, stream=settings.metering.stream)
        consumer = RedisLedgerConsumer(
            client,
            ledger,
            keys,
            consumer=f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}",
            stream=settings.metering.stream,
            claim_idle_ms=int(lease * 1000),
            # Before installation ids the setting named the stream itself.
            legacy_stream=LEGACY_STREAM
            if settings.metering.stream == STREAM
            else settings.metering.stream,
        )
        closers.append(client.close)
    journal = None
    if settings.uses_usage_journal:
        from modelport.metering.journal import UsageJournal

        journal = UsageJournal(
            settings.resolved_metering_journal_dir,
            reservations,
            sink=sink,  # the journal is the events' outbox: no outbox table in between
            interval_seconds=settings.metering.journal_interval_seconds,
        )
    return MeteringService(
        prices=prices,
        ledger=ledger,
        outbox=outbox,
        balances=BalanceRepository(database, now=now),
        reservations=reservations,
        authorizations=UsageAuthorizations(database, now=now),
        meter=InferenceMeter(
            prices,
            reservations,
            grace_seconds=settings.metering.reservation_grace_seconds,
            now=now,
            reserver=GroupReserver(reservations),  # one transaction for concurrent holds
            journal=journal,
        ),
        sink=sink,
        consumer=consumer,
        journal=journal,
        digest_of=digest_of,
        drain_interval_seconds=settings.metering.drain_interval_seconds,
        sweep_interval_seconds=settings.metering.sweep_interval_seconds,
        now=now,
        closers=closers,
        costs=CostReport(
            database,
            ComputePrices(
                settings.metering.cost_per_core_second_micros,
                settings.metering.cost_per_gpu_second_micros,
            ),
        ),
    )


def build_backend_policy(settings: Settings, resolver: Resolver | None = None) -> UrlPolicy:
    """Where remote backends may be declared and reached: public addresses over
    http(s), and the hosts of ``backend_allow_hosts``."""
    return UrlPolicy(
        settings.serving.backend_allow_hosts,
        resolver or system_resolver,
        require_https=False,
        subject="backend",
        setting="backend_allow_hosts",
    )


def pool_client(settings: Settings, name: str) -> Any:
    """A Redis client for the worker pool's registry and placer lock."""
    import redis

    assert settings.store.redis_url is not None
    return redis.Redis.from_url(
        settings.store.redis_url, socket_timeout=2, socket_connect_timeout=2, client_name=name
    )


def pool_tls(settings: Settings) -> PoolTls | None:
    """The PEM material of this process's side of the pool's gRPC hop, read from the
    files the settings name; None when TLS is off there."""
    from modelport.api.grpc.pool_tls import PoolTls

    pool = settings.pool
    if not pool.tls_on:
        return None

    def read(path: Path | None) -> bytes | None:
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError as exc:
            from modelport.errors import InvalidInput

            raise InvalidInput(
                f"cannot read the pool's TLS file {path}: {exc.strerror}",
                code="worker_tls_unreadable",
            ) from None

    return PoolTls(
        cert=read(pool.tls_cert),
        key=read(pool.tls_key),
        ca=read(pool.tls_ca),
        server_name=pool.tls_server_name,
    )


def estimate_memory(manifest: Manifest) -> int:
    """Host memory one copy of a version takes, as its format plugin estimates it (a
    gateway has no model host to ask)."""
    from modelport.errors import ModelportError
    from modelport.runtime.formats.registry import FormatRegistry

    if manifest.resources.host_memory_bytes:
        return manifest.resources.host_memory_bytes
    try:
        return FormatRegistry()(manifest.format).estimate_memory(manifest)
    except ModelportError:
        return 2 * sum(f.size for f in manifest.files)


def live_bounds(database: Database) -> dict[str, tuple[int, int]]:
    """Each version the live deployments hold, with its ``(min_replicas, max_replicas)``."""
    from modelport.serving.endpoints import repository
    from modelport.serving.endpoints.service import LIVE, replica_bounds

    with database.transaction() as session:
        return replica_bounds(repository.deployments_in(session, LIVE))


def build_gateway_pool(
    settings: Settings,
    database: Database,
    keys: Keyspace,
    clock: Clock | None = None,
    bounds: Callable[[], Mapping[str, tuple[int, int]]] | None = None,
) -> GatewayPool | None:
    """A gateway's side of the worker pool (``WORKER_TOKEN`` with ``REDIS_URL``): the
    registry's view, the placer, the autoscaler and the gRPC channels to the workers;
    None when off. ``bounds``: each live deployment version's ``(min_replicas,
    max_replicas)`` (default: none known)."""
    if not settings.worker_pool_on:
        return None
    import logging

    from modelport.api.grpc.worker_backend import WorkerChannels
    from modelport.serving.pool.gateway import GatewayPool
    from modelport.serving.pool.placement import PlacerLock, PoolPlacement
    from modelport.serving.pool.placements import PlacementRepository
    from modelport.serving.pool.registry import RedisWorkerRegistry
    from modelport.serving.pool.replicas import ColdStart, PoolReplicas
    from modelport.serving.pool.scaler import CallCounter, PoolScaler, RedisScaleStore
    from modelport.serving.pool.scaling import Bounds, ScalePolicy
    from modelport.serving.pool.view import PoolView
    from modelport.serving.repository_sync import process_id

    clock = clock or SystemClock()
    client = pool_client(settings, "modelport-pool")
    view = PoolView(
        RedisWorkerRegistry(client, keys),
        refresh_seconds=min(1.0, settings.pool.heartbeat_seconds),
        clock=clock,
    )

    def replica_bounds() -> dict[str, Bounds]:
        found = {} if bounds is None else bounds()
        return {ref: Bounds(low, high) for ref, (low, high) in found.items()}

    store = RedisScaleStore(client, keys)
    placement = PoolPlacement(
        view,
        PlacementRepository(database),
        PlacerLock(client, keys, process_id(), ttl_seconds=10.0),
        estimate=estimate_memory,
        replicas=settings.pool.replicas,
        pool=settings.pool.name,
        clock=clock,
        place_timeout_seconds=settings.pool.place_timeout_seconds,
        scale=store,
        bounds=replica_bounds,
    )
    counter = CallCounter(clock)
    pool = settings.pool
    scaler = PoolScaler(
        view,
        store,
        PlacerLock(client, keys, process_id(), ttl_seconds=10.0, name="scaler"),
        counter,
        wanted=placement.wanted_refs,
        bounds=replica_bounds,
        kick=placement.loop.kick,
        policy=ScalePolicy(
            target_wait_seconds=pool.target_wait_seconds,
            target_rate_per_replica=pool.target_rate_per_replica,
            scale_down_after_seconds=pool.scale_down_after_seconds,
            idle_seconds=pool.idle_seconds,
        ),
        clock=clock,
        interval_seconds=pool.scale_seconds,
    )

    def wake(ref: str) -> bool:
        if not placement.wants(ref):
            return False
        try:
            scaler.wake(ref)
        except Exception:
            # Redis unreachable: nothing can place it now; refused as not ready.
            logging.getLogger(__name__).warning("waking %s failed", ref, exc_info=True)
            return False
        return True

    channels = WorkerChannels(
        settings.pool.token,
        settings.requests.max_inference_request_bytes,
        clock=clock,
        tls=pool_tls(settings),
    )
    view.on_change(lambda: channels.forget(lambda worker: worker in view.workers))

    async def close() -> None:
        await channels.close()
        client.close()

    replicas = PoolReplicas(
        view,
        channels.backend,
        record=counter.record,
        cold=ColdStart(
            view, wake, clock, pool.cold_start_retry_after_seconds, counted=counter.cold_start
        ),
    )
    return GatewayPool(view, placement, replicas, close, scaler)


def build_serving(
    settings: Settings,
    database: Database,
    registry: RegistryService,
    blob_store: BlobStore,
    host: ModelHost | None,
    tenancy: TenancyService,
    serving_metrics: ServingMetrics,
    board: HealthBoard,
    changes: ChangeBus,
    clock: Clock | None = None,
    record_shadow: Callable[[ShadowResult], object] | None = None,
    engines: GenerativeHost | None = None,
    box: SecretBox | None = None,
    processing: ProcessingPools | None = None,
    resolver: Resolver | None = None,
    tracer: Tracer | None = None,
    pool: GatewayPool | None = None,
) -> ServingPlane:
    """Endpoints, deployments and their router, over this process's model host (and
    its generative ``engines``), or (``host`` None: a gateway) over remote backends
    and, with ``pool``, the worker pool's replicas; ``tracer``: spans of replica
    attempts and shadow copies."""
    from modelport.serving.backends.absent import AbsentBackend
    from modelport.serving.backends.catalog import BackendCatalog
    from modelport.serving.backends.local import LocalBackend
    from modelport.serving.dispatch import DispatchConfig, Dispatcher
    from modelport.serving.endpoints.controller import Controller
    from modelport.serving.endpoints.service import EndpointService, ServingLimits
    from modelport.serving.idempotency import IdempotencyStore
    from modelport.serving.placement import LocalPlacement, RemotePlacement
    from modelport.serving.plane import ServingPlane
    from modelport.serving.routing.interface import ReplicaProvider
    from modelport.serving.routing.replicas import PerVersionReplicas
    from modelport.serving.routing.router import Router

    clock = clock or SystemClock()
    replica: Callable[[str], Backend]
    placement: Placement
    if host is None:
        replica = partial(AbsentBackend, role=settings.role.value)
        placement = RemotePlacement(settings.role.value)
    else:

        def replica(name: str) -> Backend:
            return LocalBackend(
                host,
                blob_store,
                name=name,
                load_on_demand=settings.runtime.load_on_demand,
                engines=engines,
                processing=processing,
            )

        placement = LocalPlacement(host, blob_store, engines)
    board.register(replica("local"))
    remotes = BackendCatalog(
        database,
        board,
        box or build_secret_box(settings),
        build_backend_policy(settings, resolver),
        clock,
    )
    replicas: ReplicaProvider = PerVersionReplicas(replica)
    if pool is not None:
        placement, replicas = pool.placement, pool.replicas
    router = Router(
        Dispatcher(
            board,
            config=DispatchConfig(
                max_attempts=settings.serving.max_attempts,
                attempt_timeout_seconds=settings.serving.attempt_timeout_seconds,
            ),
            metrics=serving_metrics,
            tracer=tracer,
            clock=clock,
        ),
        # One backend per version: a failing version opens its own breaker, not the host's.
        # On the pool: one per worker, read live from the pool's view.
        replicas,
        shadow_max_in_flight=settings.serving.shadow_max_in_flight,
        remotes=remotes.backend,
        record_shadow=record_shadow,
        tracer=tracer,
    )
    endpoints = EndpointService(
        database,
        registry,
        blob_store,
        placement,
        grants_to=tenancy.grants_to,
        clock=clock,
        limits=ServingLimits(
            rollback_window_seconds=settings.serving.rollback_window_seconds,
            tenant_memory_bytes=settings.serving.tenant_memory_bytes,
        ),
        backend_tenant=remotes.tenant_of,
        changes=changes,
    )
    controller = Controller(
        endpoints,
        router,
        placement,
        clock=clock,
        refresh_seconds=settings.serving.refresh_seconds,
    )
    # Another process's endpoint changes: followed at once, not at the next tick.
    changes.subscribe(EndpointChanged, lambda change: controller.nudge())
    changes.on_reset(controller.nudge)
    idempotency = IdempotencyStore(
        database, clock, window_seconds=settings.serving.idempotency_window_seconds
    )
    return ServingPlane(
        endpoints, router, controller, idempotency, metrics=serving_metrics, backends=remotes
    )


def build_jobs(
    settings: Settings,
    database: Database,
    blobs: BlobService,
    inference: InferenceService,
    clock: Clock,
    notifier: JobNotifier | None = None,
    moderation: ModerationService | None = None,
    files: FileService | None = None,
    tracer: Tracer | None = None,
    slis: SLIMetrics | None = None,
    templates: TemplateService | None = None,
) -> tuple[JobService, JobRunner]:
    """The job service and this process's runner over the built-in stages; a job
    submitted here wakes the runner at once. ``notifier``: checks a job's webhook URL at
    submission and is told when a job ends (``WebhookNotifier``; none by default).
    ``moderation``: the ``moderate`` stage's, in the default pipeline of a tenant with an
    active policy."""
    from modelport.jobs.billing import JobBilling
    from modelport.jobs.queue import JobQueue
    from modelport.jobs.runner import JobRunner
    from modelport.jobs.service import JobService
    from modelport.jobs.stages import StageRegistry, StageServices

    stages = StageRegistry.builtin()
    moderated = None
    if moderation is not None:
        from modelport.jobs.moderate import ModerateStage

        stages.register("moderate", ModerateStage(moderation))
        moderated = moderation.has_policy
    from modelport.jobs.tensor_batch import TensorPublishStage, TensorShardStage

    stages.register("tensor_shards", TensorShardStage(database, now=clock.now))
    stages.register("tensor_publish", TensorPublishStage(database))
    if files is not None:
        assert templates is not None, "batch lines render templates"
        register_batch_stages(stages, database, files, inference, templates, clock)
    queue = JobQueue(database, now=clock.now, lease_seconds=settings.jobs.lease_seconds)
    billing = JobBilling(inference)
    runner = JobRunner(
        queue,
        stages,
        StageServices(blobs=blobs, inference=inference),
        concurrency=settings.jobs.runner_concurrency,
        poll_seconds=settings.jobs.poll_seconds,
        clock=clock,
        notifier=notifier,
        holds=billing,
        tracer=tracer,
        observer=slis,
    )
    service = JobService(
        database,
        blobs,
        stages,
        queue,
        now=clock.now,
        notifier=notifier,
        submitted=runner.kick,
        moderated=moderated,
        release_hold=billing.release,
        cancelled=runner.cancel_requested,
        inference=inference,
    )
    return service, runner


def build_validations(
    settings: Settings,
    database: Database,
    blobs: BlobService,
    registry: RegistryService,
    jobs: JobService,
    runner: JobRunner,
    clock: Clock,
) -> ValidationJobs:
    """Validations as jobs: the ``validate_version`` stage registered with the runner's
    stages, validations claimed apart (at most ``VALIDATION_CONCURRENCY`` running across
    the installation, ``VALIDATION_PROCESS_CONCURRENCY`` in this process), and waiters
    told of the ends this process's runner records."""
    from modelport.jobs.validation import (
        KIND,
        MARGIN_SECONDS,
        STAGE,
        ValidationJobs,
        ValidationStage,
    )

    jobs.stages.register(STAGE, ValidationStage(registry))
    total = settings.validation.concurrency
    here = settings.validation.process_concurrency
    runner.kind_concurrency[KIND] = total if here is None else min(here, total)
    runner.installation_concurrency[KIND] = total
    validations = ValidationJobs(
        database,
        blobs,
        registry,
        jobs.queue,
        now=clock.now,
        queue_size=settings.validation.queue_size,
        stage_timeout_seconds=settings.validation.timeout_seconds + MARGIN_SECONDS,
        poll_seconds=settings.jobs.poll_seconds,
        submitted=runner.kick,
    )
    runner.ended.append(validations.ended)
    return validations


def build_job_outputs(
    settings: Settings, jobs: JobService, blobs: BlobService, box: SecretBox, clock: Clock
) -> JobOutputs:
    """Job outputs, inline up to ``JOB_INLINE_OUTPUT_BYTES``, with URLs signed by
    ``JOB_OUTPUT_URL_SECRET`` or else a key derived from the installation's secret key
    (so every process of the installation signs alike)."""
    from modelport.jobs.outputs import JobOutputs
    from modelport.jobs.signing import OutputSigner

    secret = settings.jobs.output_url_secret.get_secret_value()
    key = secret.encode() if secret else box.derive("modelport job output urls")
    signer = OutputSigner(key, seconds=settings.jobs.output_url_seconds, now=clock.now)
    return JobOutputs(jobs, blobs, signer, inline_bytes=settings.jobs.inline_output_bytes)


def register_batch_stages(
    stages: StageRegistry,
    database: Database,
    files: FileService,
    inference: InferenceService,
    templates: TemplateService,
    clock: Clock,
) -> None:
    """The batch pipeline's stages (``jobs.batch``): shards whose lines are OpenAI's
    requests, called and encoded by the ``/v1`` surface, and the publish of their
    files."""
    from modelport.api.openai.batch_lines import OpenAILineRunner
    from modelport.jobs.batch import PublishStage, ShardStage

    publish = PublishStage(database, files)
    lines = OpenAILineRunner(inference, templates)
    stages.register("batch_shards", ShardStage(database, lines, now=clock.now, publisher=publish))
    stages.register("batch_publish", publish)


def build_billing(database: Database) -> BillingService:
    """Invoices, credit notes, statements, recompute and reconciliation over the ledger."""
    from modelport.metering.balances import BalanceRepository
    from modelport.metering.billing.service import BillingService

    return BillingService(database, BalanceRepository(database))


def open_billing(settings: Settings) -> BillingService:
    """Billing straight on the database, for operator commands that need no server
    (``modelport billing recompute``, ``reconcile``); dispose its ``database`` after."""
    return build_billing(create_database(settings.store.resolved_database_url))


def build_health(
    settings: Settings, serving_metrics: ServingMetrics, clock: Clock | None = None
) -> HealthProber:
    """Circuit breakers of every backend (their windows and cool-downs on ``clock``)
    and the background prober that feeds them."""
    from modelport.serving.breaker import BreakerConfig
    from modelport.serving.health import HealthBoard, HealthProber

    breakers = BreakerConfig(
        window_seconds=settings.serving.breaker_window_seconds,
        min_calls=settings.serving.breaker_min_calls,
        failure_rate=settings.serving.breaker_failure_rate,
        open_seconds=settings.serving.breaker_open_seconds,
    )
    return HealthProber(
        HealthBoard(breakers, metrics=serving_metrics, clock=(clock or SystemClock()).monotonic),
        interval=settings.serving.health_interval_seconds,
        timeout=settings.serving.health_timeout_seconds,
    )


def build_prediction_log(
    settings: Settings, database: Database, serving_metrics: ServingMetrics
) -> tuple[PredictionLog, OutcomeService]:
    """The prediction log (bounded buffer, background writer) and outcomes joined to it."""
    from modelport.observability.prediction_store import PredictionRepository
    from modelport.observability.predictions import PredictionLog
    from modelport.serving.outcomes import OutcomeService

    repository = PredictionRepository(database)
    log = PredictionLog(
        repository,
        capacity=settings.prediction_log.capacity,
        detail_capacity=settings.prediction_log.detail_capacity,
        pressure_sample_every=settings.prediction_log.pressure_sample_every,
        batch_size=settings.prediction_log.batch_size,
        flush_interval=settings.prediction_log.flush_interval_seconds,
        metrics=serving_metrics,
    )
    return log, OutcomeService(database, repository, log)


def build_webhooks(
    settings: Settings,
    database: Database,
    clock: Clock,
    box: SecretBox,
    pools: ThreadPools | None = None,
) -> WebhookService:
    """Webhooks: the URL policy from the allow-list, deliveries posted over httpx, signing
    secrets sealed by ``box``."""
    from datetime import timedelta

    from modelport.webhooks.repository import WebhookRepository
    from modelport.webhooks.sender import HttpSender
    from modelport.webhooks.service import DeliveryConfig, WebhookService
    from modelport.webhooks.urls import UrlPolicy

    if settings.webhooks.lease_seconds <= settings.webhooks.timeout_seconds:
        # A claim must outlive its attempt, or another process posts it meanwhile.
        raise ValueError("MODELPORT_WEBHOOK_LEASE_SECONDS must exceed WEBHOOK_TIMEOUT_SECONDS")
    return WebhookService(
        WebhookRepository(database, box),
        UrlPolicy(settings.webhooks.allow_hosts),
        HttpSender(settings.webhooks.timeout_seconds),
        clock,
        DeliveryConfig(
            retry_window=timedelta(seconds=settings.webhooks.retry_window_seconds),
            retry_base_seconds=settings.webhooks.retry_base_seconds,
            retry_max_seconds=settings.webhooks.retry_max_seconds,
            secret_overlap=timedelta(seconds=settings.webhooks.secret_overlap_seconds),
            lease=timedelta(seconds=settings.webhooks.lease_seconds),
            batch=settings.webhooks.concurrency,
            poll_interval_seconds=settings.webhooks.poll_interval_seconds,
        ),
        pools=pools,
    )


def open_database(settings: Settings) -> Database:
    """The process's database, migrated first when the settings say so."""
    settings.store.home.mkdir(parents=True, exist_ok=True)
    url = settings.store.resolved_database_url
    if settings.store.should_auto_migrate:
        upgrade(url)
    return create_database(url)


def build_sandbox(settings: Settings, metrics: RuntimeMetrics | None = None) -> Sandbox:
    """The sandbox of other people's code; no child of it sees this installation's home
    (its database, blobs and keys), the signing key's or the secret key's folder. Its runs are counted on
    ``metrics`` when given."""
    import logging

    from modelport.logs import log_event
    from modelport.observability.sandbox_metrics import SandboxMetrics

    protect = [
        settings.store.home,
        settings.resolved_signing_key_path.parent,
        settings.resolved_secret_key_path.parent,
    ]
    url = settings.store.resolved_database_url
    if url.startswith("sqlite:///"):
        protect.append(Path(url.removeprefix("sqlite:///")).parent)
    cgroups = build_cgroups(settings.sandbox.cgroup, settings.sandbox.cgroup_root)
    observe = None
    if metrics is not None:
        observe = SandboxMetrics(
            metrics.registry, settings.sandbox.mode, cgroups.enforcement.value
        ).observe
    if SandboxMode(settings.sandbox.mode) is SandboxMode.UNISOLATED:
        log_event(
            logging.getLogger("modelport.sandbox"),
            "sandbox.unisolated",
            level=logging.WARNING,
            protected=UNISOLATED_PROTECTS,
            unprotected=UNISOLATED_DOES_NOT_PROTECT,
        )
    return Sandbox(
        SandboxMode(settings.sandbox.mode),
        protect=protect,
        bwrap=settings.sandbox.bwrap,
        observe=observe,
        cgroups=cgroups,
        caps=Caps(
            tmp_bytes=settings.sandbox.tmp_bytes,
            file_bytes=settings.sandbox.file_bytes,
            cpu_cores=settings.sandbox.cpu_cores,
            processes=settings.sandbox.processes,
        ),
    )


@functools.cache
def build_cgroups(setting: str, root: Path | None) -> Cgroups:
    """Where this process's sandboxed children get their cgroups: detected once per
    process (every sandbox of it shares them), removed at exit; where there are none,
    said once (``sandbox.cgroup_unavailable``)."""
    import atexit
    import logging

    from modelport.logs import log_event
    from modelport.sandbox.cgroups import detect

    cgroups = detect(setting, root)
    if cgroups.enforcement is Enforcement.RLIMITS:
        log_event(
            logging.getLogger("modelport.sandbox"),
            "sandbox.cgroup_unavailable",
            level=logging.INFO if setting == "off" else logging.WARNING,
            reason=cgroups.reason,
            fallback="resource limits only (address space, CPU time, file size, open "
            "files, RLIMIT_NPROC): no cap on a child's resident memory, CPU share or "
            "processes as a group",
        )
    else:
        atexit.register(cgroups.close)
    return cgroups


def build_processing(
    settings: Settings,
    blob_store: BlobStore,
    metrics: RuntimeMetrics,
    clock: Clock | None = None,
    pools: ThreadPools | None = None,
) -> ProcessingPools:
    """Publishers' pre- and post-processing, in warm workers of the sandbox (the one
    validation uses), under ``HOME/processing``."""
    from modelport.observability.processing_metrics import ProcessingMetrics
    from modelport.serving.processing import ProcessingPools

    return ProcessingPools(
        build_sandbox(settings),
        blob_store,
        work_dir=settings.store.home / "processing",
        concurrency=settings.processing.concurrency,
        timeout_seconds=settings.processing.timeout_seconds,
        start_timeout_seconds=settings.processing.start_timeout_seconds,
        memory_bytes=settings.processing.memory_bytes,
        metrics=ProcessingMetrics(metrics.registry),
        idle_seconds=settings.processing.idle_seconds,
        idle_cpu_seconds=settings.processing.idle_cpu_seconds,
        reap_interval_seconds=settings.processing.reap_interval_seconds,
        clock=clock,
        pools=pools,
    )


def build_secret_box(settings: Settings) -> SecretBox:
    """The box that seals stored secrets, with the keys of ``MODELPORT_SECRET_KEY``
    (newest first). Without them, an embedded installation makes its own key file
    (``HOME/keys/secret.key``, mode 0600) on first start and says so in the log; a
    distributed one (PostgreSQL) gets a box that refuses to seal
    (``secret_key_required``): each process's home would hold a different key. A key
    file, where one exists, is always kept as the oldest key (to open, not to seal), so
    secrets it sealed stay readable after MODELPORT_SECRET_KEY is set, until
    ``modelport secrets rotate`` re-seals them."""
    import logging

    from modelport.logs import log_event
    from modelport.store.secrets import load_or_create_key_file

    keys: list[str] = list(settings.security.secret_keys)
    path = settings.resolved_secret_key_path
    if not keys and settings.store.is_embedded_database:
        key, created = load_or_create_key_file(path)
        if created:
            log_event(logging.getLogger("modelport.secrets"), "secrets.key_created", path=path)
        keys.append(key)
    elif path.exists():
        key = path.read_text().strip()
        if key not in keys:
            keys.append(key)
    return SecretBox(
        keys,
        missing_key_reason="a distributed installation (PostgreSQL) has no secret key",
    )


def open_secrets(settings: Settings) -> tuple[Database, SecretBox]:
    """The database and the secret box, for operator commands that need no server
    (``modelport secrets rotate``); dispose the database after."""
    return create_database(settings.store.resolved_database_url), build_secret_box(settings)


def build_registry(
    settings: Settings,
    database: Database,
    blob_store: BlobStore,
    changes: ChangeBus,
    metrics: RuntimeMetrics | None = None,
) -> RegistryService:
    """The registry, signing with this installation's key and validating in a subprocess."""
    from modelport.registry.search_index import search_index_for
    from modelport.registry.trust import TrustPolicy, parse_trusted_keys

    signer = Signer.load_or_create(settings.resolved_signing_key_path)
    trust = TrustPolicy(parse_trusted_keys(settings.security.trusted_publisher_keys))
    validator = SubprocessValidator(
        blob_store,
        work_dir=settings.store.home / "validation",
        timeout_seconds=settings.validation.timeout_seconds,
        memory_bytes=settings.validation.memory_bytes,
        sandbox=build_sandbox(settings, metrics),
    )
    return RegistryService(
        database,
        blob_store,
        signer=signer,
        validator=validator,
        changes=changes,
        trust=trust,
        search=search_index_for(database.dialect),
    )


def build_engines(
    host: ModelHost,
    formats: Mapping[str, GenerativeFormat] | None,
    check_load: LoadCheck | None = None,
) -> GenerativeHost:
    """The host of this process's generative engines, sharing the model host's file
    cache, with the generative format plugins ``formats`` (by format name)."""
    from modelport.runtime.engines import GenerativeHost

    return GenerativeHost(cache=host.cache, formats=dict(formats or {}), check_load=check_load)


def signature_check(registry: RegistryService) -> LoadCheck:
    """What the model hosts run before loading a version: its signatures, checked now
    against the manifest being loaded and the trusted publisher keys (422
    ``signature_*``, ``RegistryService.verify_signed``)."""

    def check(key: VersionKey, manifest: Manifest) -> None:
        owner, _, name = key.model.partition("/")
        registry.verify_signed(owner, name, key.version, manifest=manifest)

    return check


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    generative_formats: Mapping[str, GenerativeFormat] | None = None,
    resolver: Resolver | None = None,
    tracing: Tracing | None = None,
) -> Services:
    """Every service of a process of role ``all`` or ``gateway`` (which gets no model
    host: no executor threads, no model cache); ``clock`` (the system's by default) is
    the one all of them wait on; ``generative_formats``: the generative format plugins
    this process's engines load (by format name); ``resolver``: the name resolution the
    outgoing-connection policy of remote backends checks (the system's by default);
    ``tracing``: the tracer (``build_tracing``'s, from the ``OTEL_*`` variables, by
    default; tests hand one with an in-memory exporter). The ``worker`` role builds
    ``WorkerServices``."""
    if settings.role is Role.WORKER:
        raise ValueError("the worker role builds WorkerServices (build_worker_services)")
    clock = clock or SystemClock()
    tracing = tracing or build_tracing()
    tracer = tracing.tracer
    pools = ThreadPools()
    database = open_database(settings)
    keys = build_keyspace(database)
    blob_store = build_blob_store(settings)
    metrics = build_metrics()
    changes = build_change_bus(settings, keys)
    secret_box = build_secret_box(settings)
    oidc = build_oidc(settings, database, clock, secret_box, changes)
    tenancy, authenticator = build_tenancy(
        settings, database, changes, clock, oidc=oidc.bearer if oidc is not None else None
    )
    registry = build_registry(settings, database, blob_store, changes, metrics)
    check = signature_check(registry)
    host = (
        build_host(settings, metrics, check, clock, tracer) if settings.role is Role.ALL else None
    )
    processing = (
        build_processing(settings, blob_store, metrics, clock, pools) if host is not None else None
    )
    engines = None
    if host is not None:
        # Formats given by the caller (tests' toy engines), else the installed ones.
        if generative_formats is not None:
            engines = build_engines(host, generative_formats, check)
        else:
            engines = build_generative_host(settings, host, metrics, check)
    from modelport.observability.http_metrics import HttpMetrics
    from modelport.observability.serving_metrics import ServingMetrics
    from modelport.observability.slo_metrics import SLIMetrics
    from modelport.observability.slo_status import SLOStatusService
    from modelport.observability.version_traffic import VersionTrafficService
    from modelport.serving.routing.shadow_log import shadow_recorder

    serving_metrics = ServingMetrics(metrics.registry)
    slis = SLIMetrics(metrics.registry)  # the SLOs' events: endpoint calls, ended jobs
    health = build_health(settings, serving_metrics, clock)
    prediction_log, outcomes = build_prediction_log(settings, database, serving_metrics)
    pool = (
        build_gateway_pool(settings, database, keys, clock, partial(live_bounds, database))
        if host is None
        else None
    )
    if pool is not None:
        from modelport.serving.pool.metrics import PoolCollector

        calls = None if pool.scaler is None else pool.scaler.counter
        target = settings.pool.target_wait_seconds
        # The autoscaler's signal, and its target for dashboards and alerts.
        metrics.registry.register(PoolCollector(pool.view, calls, target))
    serving = build_serving(
        settings,
        database,
        registry,
        blob_store,
        host,
        tenancy,
        serving_metrics,
        health.board,
        changes,
        clock,
        record_shadow=shadow_recorder(prediction_log.record),
        engines=engines,
        box=secret_box,
        processing=processing,
        resolver=resolver,
        tracer=tracer,
        pool=pool,
    )
    limits = build_limits(settings, database, keys, clock)
    metering = build_metering(settings, database, registry, keys, clock)
    repository_sync = build_repository_sync(settings, keys)
    # The moderation's classifier models run through the inference service that the
    # moderation checks: it reaches the service once built, when it first classifies.
    moderation = build_moderation(database, changes, clock, lambda: inference)
    from modelport.observability.sampling import PredictionSampling

    sampling = PredictionSampling(database, now=clock.now)
    inference, model_repository = build_inference(
        settings,
        registry,
        tenancy,
        host,
        blob_store,
        metrics,
        limits,
        metering,
        serving,
        prediction_log,
        repository_sync,
        changes,
        clock,
        cache=build_response_cache(settings, tenancy, metrics, changes, keys, clock),
        moderation=moderation,
        # Routing weighs the leaderboards' scores, and evaluations run through the
        # inference service: the routes reach the evaluations once built, when first asked.
        routes=build_task_routes(settings, registry, metering, lambda: evaluations, clock),
        degradation=build_degradation(
            settings, host, engines, tenancy, changes, clock, None if pool is None else pool.view
        ),
        tracer=tracer,
        slis=slis,
        sampling=sampling,
    )
    blobs = BlobService(database, blob_store, verify_below_bytes=settings.store.verify_below_bytes)
    webhooks = build_webhooks(settings, database, clock, secret_box, pools)
    from modelport.jobs.batch import BatchService
    from modelport.jobs.notify import WebhookNotifier

    notifier = WebhookNotifier(webhooks)
    files = build_files(settings, database, blobs, clock)
    from modelport.templates.service import TemplateService

    templates = TemplateService(database, grants=tenancy.grants_to)
    jobs, job_runner = build_jobs(
        settings,
        database,
        blobs,
        inference,
        clock,
        notifier,
        moderation,
        files,
        tracer,
        slis,
        templates=templates,
    )
    validations = build_validations(settings, database, blobs, registry, jobs, job_runner, clock)
    datasets, evaluations = build_evaluations(
        database, blobs, registry, tenancy, metering, inference, jobs, clock
    )
    uploads = UploadService(
        database,
        blob_store,
        ttl_seconds=settings.uploads.ttl_seconds,
        max_chunk_bytes=settings.uploads.max_chunk_bytes,
    )
    lifecycle = Lifecycle()
    # Resources, each closed after those registered after it (which may use it).
    lifecycle.own("tracing", tracing.shutdown)  # last: flushes what the others traced
    lifecycle.own("database", database.dispose)
    lifecycle.own("change bus", changes.close)
    lifecycle.own("key invalidation", tenancy.invalidation.close)
    lifecycle.own("thread pools", pools.close)
    if host is not None:
        lifecycle.own("model host", host.close)
    if processing is not None:
        lifecycle.own("processing pools", processing.close)
    if engines is not None:
        lifecycle.own("generative engines", engines.close)
    if inference.cache is not None:
        lifecycle.own("response cache", inference.cache.close)
    lifecycle.own("limits", limits.close)
    lifecycle.own("metering", metering.close)
    lifecycle.own("repository sync", repository_sync.close)
    lifecycle.own("webhooks", webhooks.close)
    if oidc is not None:
        lifecycle.own("openid client", oidc.provider.http.close)
    # What works while the application serves, started in this order, stopped in reverse.
    lifecycle.serve(
        "upload sweeper",
        lambda: periodic_upload_sweep(uploads, settings.uploads.sweep_interval_seconds),
    )
    lifecycle.serve_threads("metering loops", metering.start, metering.stop)  # outbox, sweeps
    lifecycle.serve_threads("webhook deliveries", webhooks.start, webhooks.stop)
    lifecycle.serve("prediction log", prediction_log.running)  # flushes after serving stops
    from modelport.jobs.erasure import JobErasure
    from modelport.observability.retention import PredictionRetention, audit_sweeps
    from modelport.observability.sampling import REFRESH_SECONDS

    retention = PredictionRetention(
        database,
        default_days=settings.prediction_log.retention_days,
        now=clock.now,
        also=[JobErasure(database, blob_store, now=clock.now)],
        audit=audit_sweeps(database),
    )
    # Waits on the system clock: an hourly sweep is nothing a test drives (an injected
    # clock's sleepers are what tests of the controllers count).
    sweep = BackgroundLoop(
        "prediction-retention", retention.sweep, settings.prediction_log.retention_interval_seconds
    )
    lifecycle.serve_threads("prediction retention", sweep.start, sweep.stop)
    # Direct calls' sampling policies set in other processes reach this one.
    sampling_refresh = BackgroundLoop("prediction-sampling", sampling.refresh, REFRESH_SECONDS)
    lifecycle.serve_threads("prediction sampling", sampling_refresh.start, sampling_refresh.stop)
    lifecycle.serve("health probes", health.running)
    if pool is not None:  # the view and placer run before the controller places
        lifecycle.serve("worker pool", pool.running)
    lifecycle.serve("serving plane", serving.running)  # deployment controller, routes
    lifecycle.serve("model repository sync", model_repository.syncing)
    lifecycle.serve("job runner", job_runner.running)  # claims and runs jobs; stops first
    monitoring = build_monitoring(settings, database, registry, serving, metrics, clock, lifecycle)
    services = Services(
        settings=settings,
        database=database,
        pools=pools,
        lifecycle=lifecycle,
        blob_store=blob_store,
        blobs=blobs,
        uploads=uploads,
        registry=registry,
        authenticator=authenticator,
        metrics=metrics,
        host=host,
        processing=processing,
        tenancy=tenancy,
        limits=limits,
        metering=metering,
        serving=serving,
        health=health,
        prediction_log=prediction_log,
        retention=retention,
        sampling=sampling,
        outcomes=outcomes,
        version_traffic=VersionTrafficService(database),
        slo_status=SLOStatusService(database),
        billing=build_billing(database),
        repository_sync=repository_sync,
        changes=changes,
        clock=clock,
        inference=inference,
        model_repository=model_repository,
        engines=engines,
        http_metrics=HttpMetrics(metrics.registry),
        webhooks=webhooks,
        moderation=moderation,
        files=files,
        secret_box=secret_box,
        jobs=jobs,
        job_runner=job_runner,
        worker_pool=pool,
        validations=validations,
        batches=BatchService(database, jobs, files, now=clock.now),
        job_outputs=build_job_outputs(settings, jobs, blobs, secret_box, clock),
        oidc=oidc,
        tracing=tracing,
        console_sessions=ConsoleSessions(
            database,
            secret_box,
            ttl_seconds=settings.console.session_ttl_seconds,
            now=clock.now,
        ),
        datasets=datasets,
        evaluations=evaluations,
        templates=templates,
        assets=AssetSearch([datasets, templates]),
        monitoring=monitoring,
    )
    services.grpc = build_grpc(settings, services)
    return services


def build_monitoring(
    settings: Settings,
    database: Database,
    registry: RegistryService,
    serving: ServingPlane,
    metrics: RuntimeMetrics,
    clock: Clock,
    lifecycle: Lifecycle,
) -> MonitoringService:
    """Endpoints' monitors, their series on ``/metrics``, and the loop that checks them
    (registered with ``lifecycle``)."""
    from modelport.background.loops import BackgroundLoop
    from modelport.monitoring.metrics import MonitoringMetrics
    from modelport.monitoring.repository import MonitorRepository
    from modelport.monitoring.service import MonitoringService

    def examples(model: str, version: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        owner, name = model.split("/", 1)
        manifest = registry.get_version(owner, name, version).manifest
        inputs = [t.model_dump() for example in manifest.examples for t in example.inputs]
        outputs = [t.model_dump() for example in manifest.examples for t in example.outputs]
        return inputs, outputs

    monitoring = MonitoringService(
        MonitorRepository(database),
        clock=clock,
        examples=examples,
        endpoint_exists=serving.endpoints.get_endpoint,
        canaries=serving.endpoints,
        metrics=MonitoringMetrics(metrics.registry),
    )
    # Its schedule is real time, as the other background loops' (a test's manual clock
    # counts its sleepers); the reports read the injected clock.
    loop = BackgroundLoop(
        "monitors", monitoring.check, settings.prediction_log.monitoring_check_seconds
    )
    lifecycle.serve_threads("monitors", loop.start, loop.stop)
    return monitoring


def build_grpc(settings: Settings, services: Services) -> GrpcSurface | None:
    """The OIP gRPC surface over ``services`` where ``GRPC_PORT`` is set, registered with
    the lifecycle last: it starts taking calls once everything it calls runs, and stops
    first."""
    if settings.grpc.port is None:
        return None
    from modelport.api.grpc.server import GrpcOptions, GrpcSurface
    from modelport.api.grpc.service import InferenceServicer

    surface = GrpcSurface(
        InferenceServicer(services),
        GrpcOptions(
            host=settings.grpc.host or "127.0.0.1",
            port=settings.grpc.port,
            max_message_bytes=settings.requests.max_inference_request_bytes,
            tls_cert_path=settings.security.tls_cert_path,
            tls_key_path=settings.security.tls_key_path,
            shared_port=settings.workers > 1,
        ),
    )
    services.lifecycle.serve("grpc surface", surface.running)
    return surface


def build_evaluations(
    database: Database,
    blobs: BlobService,
    registry: RegistryService,
    tenancy: TenancyService,
    metering: MeteringService,
    inference: InferenceService,
    jobs: JobService,
    clock: Clock,
) -> tuple[DatasetService, EvaluationService]:
    """Datasets, and evaluations as jobs: the ``evaluate`` stage registered with the
    runner's stages; prices and grants read through their services."""
    from modelport.datasets.service import DatasetService
    from modelport.evaluations.service import EvaluationService
    from modelport.evaluations.stage import EvaluateStage
    from modelport.jobs.tensor_batch import TensorShardStage
    from modelport.jobs.types import EVALUATE

    datasets = DatasetService(database, blobs, grants=tenancy.grants_to, now=clock.now)
    # A tensor batch may read a dataset split instead of an uploaded file.
    jobs.datasets = datasets
    shards = jobs.stages.get("tensor_shards")
    if isinstance(shards, TensorShardStage):
        shards.datasets = datasets
    jobs.stages.register(
        EVALUATE,
        EvaluateStage(database, datasets, blobs, now=clock.now, timer=clock.monotonic),
    )
    evaluations = EvaluationService(
        database,
        datasets,
        registry,
        inference,
        jobs,
        prices=metering.prices.prices,
        grants=tenancy.grants_to,
        now=clock.now,
    )
    return datasets, evaluations


def build_task_routes(
    settings: Settings,
    registry: RegistryService,
    metering: MeteringService,
    evaluations: Callable[[], EvaluationService],
    clock: Clock,
) -> TaskRouter:
    """Routing by need: a task's models weighed by the price book, the leaderboards'
    verified scores and live latency."""
    from modelport.inference.route_facts import CatalogRouteFacts, Score
    from modelport.inference.routed import TaskRouter

    def scores(task: str) -> dict[tuple[str, str], Score]:
        return {
            key: Score(s.value, s.higher_is_better, s.latency_ms)
            for key, s in evaluations().best_scores(task).items()
        }

    facts = CatalogRouteFacts(
        registry,
        metering.prices.prices,
        scores,
        now=clock.now,
        monotonic=clock.monotonic,
        ttl=settings.serving.route_cache_ttl_seconds,
    )
    return TaskRouter(facts)


def build_degradation(
    settings: Settings,
    host: ModelHost | None,
    engines: GenerativeHost | None,
    tenancy: TenancyService,
    changes: ChangeBus,
    clock: Clock,
    pool: PoolView | None = None,
) -> Degradation:
    """Calls that give way under load (``inference.degrade``): the predicted waits of
    this process's generative schedulers and tensor batchers, or, on a pool gateway
    (hosting nothing), its workers' as their heartbeats report them (the mean over a
    version's ready replicas); the installation's defaults (an endpoint's policy
    overrides them), tenants' tiers refreshed by ``TenantTierChanged`` events."""
    from modelport.changes import TenantTierChanged
    from modelport.errors import NotFound
    from modelport.inference.degrade import Degradation
    from modelport.inference.tiers import TenantTiers
    from modelport.runtime.types import Priority, VersionKey
    from modelport.tenancy.types import Tier

    class Waits:
        def predicted_wait(self, version: VersionRef) -> float | None:
            key = VersionKey(version.model, version.version, version.manifest_digest)
            wait = None if engines is None else engines.predicted_wait(key)
            if wait is None and host is not None:
                wait = host.predicted_wait(key)
            if wait is None and pool is not None:
                wait = pool.predicted_wait(version.ref)
            return wait

    def load(slug: str) -> Tier | None:
        try:
            return tenancy.get_tenant(slug).tier
        except NotFound:
            return None

    tiers = TenantTiers(load, ttl=settings.tenancy.resolve_cache_ttl_seconds, clock=clock.monotonic)
    changes.subscribe(TenantTierChanged, lambda change: tiers.forget(change.tenant))
    changes.on_reset(tiers.forget_all)
    serving = settings.serving
    return Degradation(
        Waits(),
        serving.degrade_queue_wait_seconds,
        serving.degrade_fallbacks,
        priorities=frozenset(Priority(p) for p in serving.degrade_priorities),
        tiers=frozenset(Tier(t) for t in serving.degrade_tiers),
        tier_source=tiers,
    )


def build_files(
    settings: Settings, database: Database, blobs: BlobService, clock: Clock
) -> FileService:
    """Tenants' files over the blob store."""

    def put_chunks(chunks: Iterable[bytes], tenant: str) -> tuple[str, int]:
        blob = blobs.put_chunks(chunks, tenant=tenant)
        return blob.digest, blob.size

    return FileService(
        database,
        put_blob=lambda data, tenant: blobs.put(data, tenant=tenant),
        read_blob=lambda digest: blobs.read(blobs.stat(digest)),
        put_chunks=put_chunks,
        now=clock.now,
        max_bytes=settings.uploads.max_file_bytes,
    )


def build_moderation(
    database: Database,
    changes: ChangeBus,
    clock: Clock,
    inference: Callable[[], InferenceService],
) -> ModerationService:
    """Content moderation: policies cached per tenant (dropped on every process by the
    change event), classifier models run through ``inference()`` (the service, once
    built), which moderates the synchronous calls of tenants whose policy says so."""
    from modelport.changes import ModerationPolicyChanged
    from modelport.inference.moderation import classifier_of
    from modelport.moderation import ModelModerator, ModerationService

    service = ModerationService(
        database,
        changes=changes,
        clock=clock,
        classifier=ModelModerator(classifier_of(inference)),
    )
    changes.subscribe(ModerationPolicyChanged, lambda change: service.forget(change.tenant))
    changes.on_reset(service.forget_all)
    return service


def build_inference(
    settings: Settings,
    registry: RegistryService,
    tenancy: TenancyService,
    host: ModelHost | None,
    blob_store: BlobStore,
    metrics: RuntimeMetrics,
    limits: LimitService,
    metering: MeteringService,
    serving: ServingPlane,
    prediction_log: PredictionLog,
    repository_sync: RepositorySync,
    changes: ChangeBus,
    clock: Clock,
    *,
    cache: ResponseCache | None = None,
    moderation: ModerationService | None = None,
    routes: TaskRouter | None = None,
    degradation: Degradation | None = None,
    tracer: Tracer | None = None,
    slis: SLIMetrics | None = None,
    sampling: PredictionSampling | None = None,
) -> tuple[InferenceService, ModelRepository]:
    """The inference service over the serving layer, its caches (resolved versions,
    access facts) subscribed to the change events, and the model repository sharing
    the resolutions; ``cache``: the response cache, where enabled; ``moderation``: the
    tenants' content policies its synchronous calls are checked against."""
    from modelport.inference.access_facts import AccessFacts
    from modelport.inference.moderation import SyncModeration
    from modelport.inference.repository import ModelRepository
    from modelport.inference.service import InferenceService
    from modelport.inference.targets import VersionTargets
    from modelport.observability.cost_metrics import CostMetrics

    ttl = settings.tenancy.resolve_cache_ttl_seconds
    targets = VersionTargets(registry, metrics, resolve_ttl=ttl, clock=clock.monotonic)
    facts = AccessFacts(registry, tenancy, ttl=ttl, clock=clock.monotonic)
    # Changes made anywhere (a route, the CLI, another process) reach these caches.
    subscribe_caches(changes, resolutions=targets, access=facts)
    router = serving.router
    service = InferenceService(
        targets=targets,
        facts=facts,
        limits=limits,
        meter=metering.meter,
        serving=serving,
        dispatcher=router.dispatcher,
        replicas_for=router.replicas_for,  # the endpoints' replicas: one breaker per version
        prediction_log=prediction_log,
        default_timeout_seconds=settings.runtime.infer_timeout_seconds,
        cache=cache,
        moderation=SyncModeration(moderation) if moderation is not None else None,
        routes=routes,
        degradation=degradation,
        tracer=tracer,
        clock=clock,
        calls=slis,
        costs=CostMetrics(
            metrics.registry,
            core_second_micros=settings.metering.cost_per_core_second_micros,
            gpu_second_micros=settings.metering.cost_per_gpu_second_micros,
        ),
        sampling=sampling,
    )
    repository = ModelRepository(
        targets,
        host,
        blob_store,
        load_on_demand=settings.runtime.load_on_demand,
        sync=repository_sync,
        role=settings.role.value,
        statistics=metrics,
    )
    return service, repository


def build_response_cache(
    settings: Settings,
    tenancy: TenancyService,
    metrics: RuntimeMetrics,
    changes: ChangeBus,
    keys: Keyspace,
    clock: Clock,
) -> ResponseCache | None:
    """The response cache (None where disabled): a memory tier bounded by bytes, a Redis
    tier where Redis is set, tenants' flags refreshed by ``TenantCacheChanged`` events."""
    if not settings.response_cache.enabled:
        return None
    from modelport.changes import TenantCacheChanged
    from modelport.errors import NotFound
    from modelport.inference.cache import (
        CacheFlags,
        MemoryTier,
        RedisTier,
        ResponseCache,
        TenantCacheFlags,
    )
    from modelport.observability.cache_metrics import ResponseCacheMetrics

    def load(slug: str) -> CacheFlags | None:
        try:
            tenant = tenancy.get_tenant(slug)
        except NotFound:
            return None
        return CacheFlags(no_cache=tenant.no_cache, shared_cache=tenant.shared_cache)

    flags = TenantCacheFlags(
        load, ttl=settings.tenancy.resolve_cache_ttl_seconds, clock=clock.monotonic
    )
    changes.subscribe(TenantCacheChanged, lambda change: flags.forget(change.tenant))
    changes.on_reset(flags.forget_all)
    ttl = settings.response_cache.ttl_seconds
    redis_tier = None
    if settings.store.redis_url and settings.response_cache.redis:
        import redis

        client = redis.Redis.from_url(
            settings.store.redis_url, socket_timeout=1, socket_connect_timeout=1
        )
        redis_tier = RedisTier(client, keys, ttl_seconds=ttl)
    return ResponseCache(
        MemoryTier(max_bytes=settings.response_cache.max_bytes, ttl_seconds=ttl),
        flags,
        redis=redis_tier,
        counter=ResponseCacheMetrics(metrics.registry),
        max_entry_bytes=settings.response_cache.max_entry_bytes,
    )


def build_worker_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    tracing: Tracing | None = None,
    generative_formats: Mapping[str, GenerativeFormat] | None = None,
) -> WorkerServices:
    """The services of a ``worker`` process (see ``WorkerServices``); ``tracing`` and
    ``generative_formats`` as for ``build_services``."""
    tracing = tracing or build_tracing()
    database = open_database(settings)
    blob_store = build_blob_store(settings)
    metrics = build_metrics()
    # A worker publishes no change: versions it reads are immutable.
    registry = build_registry(settings, database, blob_store, LocalChangeBus(), metrics)
    pools = ThreadPools()
    check = signature_check(registry)
    host = build_host(settings, metrics, check, clock, tracing.tracer)
    services = WorkerServices(
        settings=settings,
        database=database,
        blob_store=blob_store,
        registry=registry,
        metrics=metrics,
        host=host,
        clock=clock or SystemClock(),
        processing=build_processing(settings, blob_store, metrics, clock, pools),
        pools=pools,
        tracing=tracing,
        engines=build_engines(host, generative_formats, check)
        if generative_formats is not None
        else build_generative_host(settings, host, metrics, check),
    )
    services.pool = build_pool_member(settings, services, clock)
    return services


def build_pool_member(
    settings: Settings, services: WorkerServices, clock: Clock | None = None
) -> PoolMember | None:
    """A worker's part in the pool (``WORKER_TOKEN`` with ``REDIS_URL``; its gRPC server
    on ``GRPC_HOST``:``GRPC_PORT``), or None when the pool is off."""
    if not settings.worker_pool_on:
        return None
    import socket
    import uuid

    from modelport.api.grpc.worker import PoolMember, WorkerGrpcServer, WorkerServicer
    from modelport.errors import InvalidInput
    from modelport.runtime.formats.registry import known_formats
    from modelport.serving.pool.agent import WorkerAgent, WorkerIdentity
    from modelport.serving.pool.generative import GenerativeHolds
    from modelport.serving.pool.placements import PlacementRepository
    from modelport.serving.pool.registry import RedisWorkerRegistry
    from modelport.serving.types import VersionRef

    if settings.grpc.port is None:
        raise InvalidInput(
            "a worker of the pool serves gRPC: set MODELPORT_GRPC_PORT",
            code="worker_grpc_port_required",
        )
    tls = pool_tls(settings)
    if tls is not None and tls.cert is None:
        raise InvalidInput(
            "a worker serving TLS needs MODELPORT_WORKER_TLS_CERT and MODELPORT_WORKER_TLS_KEY",
            code="worker_tls_incomplete",
        )
    keys = build_keyspace(services.database)
    client = pool_client(settings, "modelport-worker")
    services.closers.append(client.close)
    registry = services.registry

    def resolve(ref: str) -> VersionRef:
        model, _, version = ref.rpartition(":")
        owner, _, name = model.partition("/")
        stored = registry.get_version(owner, name, version)
        return VersionRef(model, stored.version, stored.manifest_digest, stored.manifest)

    identity = WorkerIdentity(
        id=settings.pool.id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
        pool=settings.pool.name,
        accelerators=frozenset(
            a.strip() for a in settings.pool.accelerators.split(",") if a.strip()
        ),
    )
    listen = settings.grpc.host or "127.0.0.1"
    server = WorkerGrpcServer(
        WorkerServicer(services, settings.pool.token),
        listen,
        settings.grpc.port,
        settings.requests.max_inference_request_bytes,
        tls=tls,
    )
    engines = services.engines
    generative = None if engines is None else GenerativeHolds(engines, services.blob_store)

    def agent(address: Callable[[], str]) -> WorkerAgent:
        return WorkerAgent(
            identity,
            address,
            services.host,
            services.blob_store,
            RedisWorkerRegistry(client, keys),
            PlacementRepository(services.database),
            resolve,
            formats=known_formats() | frozenset(engines.formats if engines else ()),
            heartbeat_seconds=settings.pool.heartbeat_seconds,
            lease_seconds=settings.pool.lease_seconds,
            clock=clock,
            generative=generative,
        )

    advertise = settings.pool.advertise_host or (
        listen if listen not in ("0.0.0.0", "::") else socket.gethostname()
    )
    return PoolMember(server, agent, advertise, generative)


def configure_logging(settings: Settings) -> None:
    """The process's logging, as the settings say (``MODELPORT_LOG_FORMAT``,
    ``MODELPORT_LOG_LEVEL``): once, as a serving process starts."""
    from modelport import logs

    logs.configure(settings.logs.format, settings.logs.level)


def build_app(settings: Settings) -> FastAPI:
    """The application of a serving process (``modelport serve``, the demo), for the
    role its settings name; the process's logging configured first."""
    configure_logging(settings)
    if settings.role is Role.WORKER:
        from modelport.api.worker import create_worker_app

        app = create_worker_app(build_worker_services(settings))
    else:
        from modelport.api import create_app

        app = create_app(build_services(settings))
    # What is alive now (modules, tables, schemas, services) lives as long as the
    # process: keep it out of the collector's full passes, whose pauses would otherwise
    # show in the tail latency of every call. A call allocates hundreds of objects and
    # frees nearly all of them by reference counting: collect the youngest generation
    # every 20,000 allocations rather than every 700.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    return app


def serve_app() -> FastAPI:
    """The application of one worker process of ``modelport serve --workers N``
    (uvicorn's factory, called in each worker): settings from the environment, which
    the serve command prepared before starting the workers."""
    from modelport.observability.multiprocess import prepare_worker

    prepare_worker()
    return build_app(Settings())
