"""Settings by section: every variable of the flat settings sets what it set, under its
old name; the flat names work as arguments and copies; docs/settings.md is current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from modelport.config import (
    FLAT_NAMES,
    SECTIONS,
    Role,
    SandboxSettings,
    ServingSettings,
    Settings,
)

ROOT = Path(__file__).resolve().parent.parent

# Every MODELPORT_ variable of the flat Settings (before the sections) and those added
# since, a value other than its default as the environment spells it, where the value
# lands now, and the value there.
FLAT_VARIABLES: list[tuple[str, str, str, Any]] = [
    ("HOME", "/srv/modelport", "store.home", Path("/srv/modelport")),
    ("DATABASE_URL", "value-database_url", "store.database_url", "value-database_url"),
    ("BLOB_URL", "value-blob_url", "store.blob_url", "value-blob_url"),
    ("S3_ENDPOINT_URL", "value-s3_endpoint_url", "store.s3_endpoint_url", "value-s3_endpoint_url"),
    ("S3_REGION", "value-s3_region", "store.s3_region", "value-s3_region"),
    ("ADMIN_KEY", "value-admin_key", "security.admin_key", "value-admin_key"),
    ("METRICS_TOKEN", "m" * 30, "security.metrics_token", "m" * 30),
    ("LOG_FORMAT", "json", "logs.format", "json"),
    ("LOG_LEVEL", "DEBUG", "logs.level", "DEBUG"),
    (
        "SIGNING_KEY_PATH",
        "/srv/signing_key_path",
        "security.signing_key_path",
        Path("/srv/signing_key_path"),
    ),
    ("SECRET_KEY", "secret-secret_key", "security.secret_key", "secret-secret_key"),
    (
        "SECRET_KEY_PATH",
        "/srv/secret_key_path",
        "security.secret_key_path",
        Path("/srv/secret_key_path"),
    ),
    (
        "TRUSTED_PUBLISHER_KEYS",
        "value-trusted_publisher_keys",
        "security.trusted_publisher_keys",
        "value-trusted_publisher_keys",
    ),
    ("TLS_CERT_PATH", "/srv/tls_cert_path", "security.tls_cert_path", Path("/srv/tls_cert_path")),
    ("TLS_KEY_PATH", "/srv/tls_key_path", "security.tls_key_path", Path("/srv/tls_key_path")),
    ("GRPC_PORT", "2", "grpc.port", 2),
    ("GRPC_HOST", "value-grpc_host", "grpc.host", "value-grpc_host"),
    ("UPLOAD_TTL_SECONDS", "86401", "uploads.ttl_seconds", 86401),
    ("UPLOAD_SWEEP_INTERVAL_SECONDS", "300.5", "uploads.sweep_interval_seconds", 300.5),
    ("MAX_FILE_BYTES", "536870913", "uploads.max_file_bytes", 536870913),
    ("MAX_CHUNK_BYTES", "1073741825", "uploads.max_chunk_bytes", 1073741825),
    ("VERIFY_BELOW_BYTES", "67108865", "store.verify_below_bytes", 67108865),
    ("VALIDATION_TIMEOUT_SECONDS", "120.5", "validation.timeout_seconds", 120.5),
    ("VALIDATION_MEMORY_BYTES", "4294967297", "validation.memory_bytes", 4294967297),
    ("VALIDATION_CONCURRENCY", "3", "validation.concurrency", 3),
    ("VALIDATION_PROCESS_CONCURRENCY", "2", "validation.process_concurrency", 2),
    ("VALIDATION_QUEUE_SIZE", "65", "validation.queue_size", 65),
    ("VALIDATION_WAIT_SECONDS", "150.5", "validation.wait_seconds", 150.5),
    ("SANDBOX", "bubblewrap", "sandbox.mode", "bubblewrap"),
    ("SANDBOX_BWRAP", "value-sandbox_bwrap", "sandbox.bwrap", "value-sandbox_bwrap"),
    ("SANDBOX_CGROUP", "off", "sandbox.cgroup", "off"),
    (
        "SANDBOX_CGROUP_ROOT",
        "/srv/sandbox_cgroup_root",
        "sandbox.cgroup_root",
        Path("/srv/sandbox_cgroup_root"),
    ),
    ("SANDBOX_TMP_BYTES", "67108865", "sandbox.tmp_bytes", 67108865),
    ("SANDBOX_FILE_BYTES", "1073741825", "sandbox.file_bytes", 1073741825),
    ("SANDBOX_CPU_CORES", "2.5", "sandbox.cpu_cores", 2.5),
    ("SANDBOX_PROCESSES", "513", "sandbox.processes", 513),
    ("PROCESSING_CONCURRENCY", "3", "processing.concurrency", 3),
    ("PROCESSING_TIMEOUT_SECONDS", "5.5", "processing.timeout_seconds", 5.5),
    ("PROCESSING_START_TIMEOUT_SECONDS", "30.5", "processing.start_timeout_seconds", 30.5),
    ("PROCESSING_MEMORY_BYTES", "1073741825", "processing.memory_bytes", 1073741825),
    ("PROCESSING_IDLE_SECONDS", "600.5", "processing.idle_seconds", 600.5),
    ("PROCESSING_IDLE_CPU_SECONDS", "1.5", "processing.idle_cpu_seconds", 1.5),
    ("PROCESSING_REAP_INTERVAL_SECONDS", "5.5", "processing.reap_interval_seconds", 5.5),
    ("AUTO_MIGRATE", "true", "store.auto_migrate", True),
    ("ROLE", "gateway", "role", Role.GATEWAY),
    ("WORKERS", "2", "workers", 2),
    ("RUNTIME_MEMORY_BUDGET_BYTES", "2", "runtime.memory_budget_bytes", 2),
    ("RUNTIME_DEVICE_MEMORY_BUDGET_BYTES", "2", "runtime.device_memory_budget_bytes", 2),
    ("RUNTIME_INTRA_OP_THREADS", "2", "runtime.intra_op_threads", 2),
    ("RUNTIME_INTRA_OP_SPINNING", "true", "runtime.intra_op_spinning", True),
    ("RUNTIME_GRAPH_OPTIMIZATION", "basic", "runtime.graph_optimization", "basic"),
    ("RUNTIME_LOAD_TIMEOUT_SECONDS", "300.5", "runtime.load_timeout_seconds", 300.5),
    ("RUNTIME_INFER_TIMEOUT_SECONDS", "30.5", "runtime.infer_timeout_seconds", 30.5),
    ("GENERATION_TIMEOUT_SECONDS", "300.5", "llm.generation_timeout_seconds", 300.5),
    ("RUNTIME_MAX_BATCH_SIZE", "65", "runtime.max_batch_size", 65),
    ("RUNTIME_MAX_QUEUE_DELAY_US", "2", "runtime.max_queue_delay_us", 2),
    ("RUNTIME_MAX_QUEUE_SIZE", "1025", "runtime.max_queue_size", 1025),
    ("RUNTIME_OFFLINE_QUEUE_SHARE", "1.0", "runtime.offline_queue_share", 1.0),
    ("RUNTIME_INSTANCES", "2", "runtime.instances", 2),
    ("RUNTIME_EXECUTION", "manifest", "runtime.execution", "manifest"),
    ("RUNTIME_PROCESS_CRASH_LIMIT", "4", "runtime.process_crash_limit", 4),
    (
        "RUNTIME_PROCESS_CRASH_WINDOW_SECONDS",
        "300.5",
        "runtime.process_crash_window_seconds",
        300.5,
    ),
    (
        "RUNTIME_PROCESS_START_TIMEOUT_SECONDS",
        "120.5",
        "runtime.process_start_timeout_seconds",
        120.5,
    ),
    ("LLM_DEVICE", "cpu", "llm.device", "cpu"),
    ("LLM_DTYPE", "float32", "llm.dtype", "float32"),
    ("LLM_KV_CACHE_BYTES", "268435457", "llm.kv_cache_bytes", 268435457),
    ("LLM_MAX_RUNNING", "33", "llm.max_running", 33),
    ("LLM_MAX_WAITING", "257", "llm.max_waiting", 257),
    ("LLM_ENGINE", "transformers", "llm.engine", "transformers"),
    ("LLM_THREADS", "2", "llm.threads", 2),
    ("LOAD_ON_DEMAND", "false", "runtime.load_on_demand", False),
    ("RESOLVE_CACHE_TTL_SECONDS", "1.5", "tenancy.resolve_cache_ttl_seconds", 1.5),
    ("MAX_INFERENCE_REQUEST_BYTES", "67108865", "requests.max_inference_request_bytes", 67108865),
    ("RESPONSE_CACHE_ENABLED", "false", "response_cache.enabled", False),
    ("RESPONSE_CACHE_MAX_BYTES", "67108865", "response_cache.max_bytes", 67108865),
    ("RESPONSE_CACHE_MAX_ENTRY_BYTES", "1048577", "response_cache.max_entry_bytes", 1048577),
    ("RESPONSE_CACHE_TTL_SECONDS", "300.5", "response_cache.ttl_seconds", 300.5),
    ("RESPONSE_CACHE_REDIS", "false", "response_cache.redis", False),
    ("REDIS_URL", "value-redis_url", "store.redis_url", "value-redis_url"),
    ("KEY_CACHE_TTL_SECONDS", "60.5", "tenancy.key_cache_ttl_seconds", 60.5),
    ("CONSOLE_SESSION_TTL_SECONDS", "28800.5", "console.session_ttl_seconds", 28800.5),
    ("LIMITS_CACHE_TTL_SECONDS", "5.5", "tenancy.limits_cache_ttl_seconds", 5.5),
    ("LIMITS_LEASE_SECONDS", "30.5", "tenancy.limits_lease_seconds", 30.5),
    ("MAX_API_BODY_BYTES", "4194305", "requests.max_api_body_bytes", 4194305),
    ("BODY_READ_TIMEOUT_SECONDS", "10.5", "requests.body_read_timeout_seconds", 10.5),
    ("MAX_JSON_DEPTH", "65", "requests.max_json_depth", 65),
    ("MAX_TENSOR_ELEMENTS", "67108865", "requests.max_tensor_elements", 67108865),
    ("MAX_DECOMPRESSED_REQUEST_BYTES", "2", "requests.max_decompressed_request_bytes", 2),
    ("METERING_REVENUE_SHARE_BPS", "7001", "metering.revenue_share_bps", 7001),
    ("METERING_RESERVATION_GRACE_SECONDS", "60.5", "metering.reservation_grace_seconds", 60.5),
    ("METERING_SWEEP_INTERVAL_SECONDS", "30.5", "metering.sweep_interval_seconds", 30.5),
    ("JOB_RUNNER_CONCURRENCY", "5", "jobs.runner_concurrency", 5),
    ("JOB_LEASE_SECONDS", "30.5", "jobs.lease_seconds", 30.5),
    ("JOB_POLL_SECONDS", "1.5", "jobs.poll_seconds", 1.5),
    ("JOB_INLINE_OUTPUT_BYTES", "1048577", "jobs.inline_output_bytes", 1048577),
    ("JOB_OUTPUT_URL_SECONDS", "3601", "jobs.output_url_seconds", 3601),
    (
        "JOB_OUTPUT_URL_SECRET",
        "secret-job_output_url_secret",
        "jobs.output_url_secret",
        "secret-job_output_url_secret",
    ),
    ("METERING_DRAIN_INTERVAL_SECONDS", "0.75", "metering.drain_interval_seconds", 0.75),
    ("METERING_OUTBOX_LEASE_SECONDS", "30.5", "metering.outbox_lease_seconds", 30.5),
    ("METERING_STREAM", "value-metering_stream", "metering.stream", "value-metering_stream"),
    ("METERING_DELIVERY", "ledger", "metering.delivery", "ledger"),
    ("METERING_DURABILITY", "journal", "metering.durability", "journal"),
    (
        "METERING_JOURNAL_DIR",
        "/srv/metering_journal_dir",
        "metering.journal_dir",
        Path("/srv/metering_journal_dir"),
    ),
    ("METERING_JOURNAL_INTERVAL_SECONDS", "0.6", "metering.journal_interval_seconds", 0.6),
    ("SERVING_ROLLBACK_WINDOW_SECONDS", "3600.5", "serving.rollback_window_seconds", 3600.5),
    ("SERVING_TENANT_MEMORY_BYTES", "2", "serving.tenant_memory_bytes", 2),
    ("SERVING_SHADOW_MAX_IN_FLIGHT", "5", "serving.shadow_max_in_flight", 5),
    (
        "SERVING_IDEMPOTENCY_WINDOW_SECONDS",
        "86400.5",
        "serving.idempotency_window_seconds",
        86400.5,
    ),
    ("SERVING_REFRESH_SECONDS", "2.5", "serving.refresh_seconds", 2.5),
    (
        "BACKEND_ALLOW_HOSTS",
        "worker-0:8000, worker-1",
        "serving.backend_allow_hosts",
        ("worker-0:8000", "worker-1"),
    ),
    ("SERVING_HEALTH_INTERVAL_SECONDS", "5.5", "serving.health_interval_seconds", 5.5),
    ("SERVING_HEALTH_TIMEOUT_SECONDS", "2.5", "serving.health_timeout_seconds", 2.5),
    ("SERVING_BREAKER_WINDOW_SECONDS", "30.5", "serving.breaker_window_seconds", 30.5),
    ("SERVING_BREAKER_MIN_CALLS", "6", "serving.breaker_min_calls", 6),
    ("SERVING_BREAKER_FAILURE_RATE", "1.0", "serving.breaker_failure_rate", 1.0),
    ("SERVING_BREAKER_OPEN_SECONDS", "10.5", "serving.breaker_open_seconds", 10.5),
    ("SERVING_MAX_ATTEMPTS", "4", "serving.max_attempts", 4),
    ("SERVING_ATTEMPT_TIMEOUT_SECONDS", "1.5", "serving.attempt_timeout_seconds", 1.5),
    ("PREDICTION_LOG_CAPACITY", "100001", "prediction_log.capacity", 100001),
    ("PREDICTION_LOG_DETAIL_CAPACITY", "10001", "prediction_log.detail_capacity", 10001),
    ("PREDICTION_LOG_PRESSURE_SAMPLE_EVERY", "11", "prediction_log.pressure_sample_every", 11),
    ("PREDICTION_LOG_BATCH_SIZE", "501", "prediction_log.batch_size", 501),
    ("PREDICTION_LOG_FLUSH_INTERVAL_SECONDS", "1.5", "prediction_log.flush_interval_seconds", 1.5),
    ("PREDICTION_RETENTION_DAYS", "30", "prediction_log.retention_days", 30),
    (
        "PREDICTION_RETENTION_INTERVAL_SECONDS",
        "600.5",
        "prediction_log.retention_interval_seconds",
        600.5,
    ),
    ("MONITORING_CHECK_SECONDS", "12.5", "prediction_log.monitoring_check_seconds", 12.5),
    ("ROUTE_CACHE_TTL_SECONDS", "7.5", "serving.route_cache_ttl_seconds", 7.5),
    ("DEGRADE_QUEUE_WAIT_SECONDS", "0.25", "serving.degrade_queue_wait_seconds", 0.25),
    (
        "DEGRADE_PRIORITIES",
        "batch, interactive",
        "serving.degrade_priorities",
        ("batch", "interactive"),
    ),
    ("DEGRADE_TIERS", "free,standard", "serving.degrade_tiers", ("free", "standard")),
    (
        "DEGRADE_FALLBACKS",
        '{"acme/big": "acme/small:2"}',
        "serving.degrade_fallbacks",
        {"acme/big": "acme/small:2"},
    ),
    ("COST_PER_CORE_SECOND_MICROS", "12.5", "metering.cost_per_core_second_micros", 12.5),
    ("COST_PER_GPU_SECOND_MICROS", "250.5", "metering.cost_per_gpu_second_micros", 250.5),
    ("WORKER_TOKEN", "w" * 30, "pool.token", "w" * 30),
    ("WORKER_ID", "worker-7", "pool.id", "worker-7"),
    ("WORKER_POOL", "gpu", "pool.name", "gpu"),
    ("WORKER_ADVERTISE_HOST", "10.0.0.7", "pool.advertise_host", "10.0.0.7"),
    ("WORKER_ACCELERATORS", "cpu,cuda", "pool.accelerators", "cpu,cuda"),
    ("WORKER_HEARTBEAT_SECONDS", "2.5", "pool.heartbeat_seconds", 2.5),
    ("WORKER_LEASE_SECONDS", "9.5", "pool.lease_seconds", 9.5),
    ("WORKER_REPLICAS", "3", "pool.replicas", 3),
    ("WORKER_PLACE_TIMEOUT_SECONDS", "60.5", "pool.place_timeout_seconds", 60.5),
    ("WORKER_SCALE_SECONDS", "2.5", "pool.scale_seconds", 2.5),
    ("WORKER_TARGET_WAIT_SECONDS", "0.25", "pool.target_wait_seconds", 0.25),
    ("WORKER_TARGET_RATE_PER_REPLICA", "40", "pool.target_rate_per_replica", 40.0),
    ("WORKER_SCALE_DOWN_AFTER_SECONDS", "30", "pool.scale_down_after_seconds", 30.0),
    ("WORKER_IDLE_SECONDS", "120", "pool.idle_seconds", 120.0),
    ("WORKER_COLD_START_RETRY_AFTER_SECONDS", "3", "pool.cold_start_retry_after_seconds", 3.0),
    ("WORKER_TLS_CERT", "/srv/worker.pem", "pool.tls_cert", Path("/srv/worker.pem")),
    ("WORKER_TLS_KEY", "/srv/worker.key", "pool.tls_key", Path("/srv/worker.key")),
    ("WORKER_TLS_CA", "/srv/pool-ca.pem", "pool.tls_ca", Path("/srv/pool-ca.pem")),
    ("WORKER_TLS_SERVER_NAME", "modelport-worker", "pool.tls_server_name", "modelport-worker"),
    ("OIDC_ISSUER", "value-oidc_issuer", "oidc.issuer", "value-oidc_issuer"),
    ("OIDC_AUDIENCE", "value-oidc_audience", "oidc.audience", "value-oidc_audience"),
    ("OIDC_CLIENT_ID", "value-oidc_client_id", "oidc.client_id", "value-oidc_client_id"),
    (
        "OIDC_CLIENT_SECRET",
        "secret-oidc_client_secret",
        "oidc.client_secret",
        "secret-oidc_client_secret",
    ),
    (
        "OIDC_GROUPS_CLAIM",
        "value-oidc_groups_claim",
        "oidc.groups_claim",
        "value-oidc_groups_claim",
    ),
    ("OIDC_GROUP_ROLES", '{"ml": "acme:publisher"}', "oidc.group_roles", {"ml": "acme:publisher"}),
    ("OIDC_LEEWAY_SECONDS", "31", "oidc.leeway_seconds", 31),
    ("OIDC_JWKS_MIN_REFRESH_SECONDS", "30.5", "oidc.jwks_min_refresh_seconds", 30.5),
    ("OIDC_HTTP_TIMEOUT_SECONDS", "5.5", "oidc.http_timeout_seconds", 5.5),
    (
        "WEBHOOK_ALLOW_HOSTS",
        "127.0.0.1:8123,hooks",
        "webhooks.allow_hosts",
        ("127.0.0.1:8123", "hooks"),
    ),
    ("WEBHOOK_TIMEOUT_SECONDS", "10.5", "webhooks.timeout_seconds", 10.5),
    ("WEBHOOK_RETRY_WINDOW_SECONDS", "86400.5", "webhooks.retry_window_seconds", 86400.5),
    ("WEBHOOK_RETRY_BASE_SECONDS", "5.5", "webhooks.retry_base_seconds", 5.5),
    ("WEBHOOK_RETRY_MAX_SECONDS", "3600.5", "webhooks.retry_max_seconds", 3600.5),
    ("WEBHOOK_SECRET_OVERLAP_SECONDS", "86400.5", "webhooks.secret_overlap_seconds", 86400.5),
    ("WEBHOOK_CONCURRENCY", "9", "webhooks.concurrency", 9),
    ("WEBHOOK_POLL_INTERVAL_SECONDS", "1.5", "webhooks.poll_interval_seconds", 1.5),
    ("WEBHOOK_LEASE_SECONDS", "60.5", "webhooks.lease_seconds", 60.5),
]


def read(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("MODELPORT_"):
            monkeypatch.delenv(name)


def test_the_table_is_the_whole_flat_settings() -> None:
    """Every flat name of today's sections and top-level fields is in the table, each
    once, and no flat name is lost."""
    names = [name.lower() for name, *_ in FLAT_VARIABLES]
    assert len(names) == len(set(names)) == 141 + 29
    top = {name for name in Settings.model_fields if name not in SECTIONS}
    assert set(names) == set(FLAT_NAMES) | top
    # Two sections naming the same variable would leave one of them unreachable.
    assert sum(len(model.flat_names()) for model in SECTIONS.values()) == len(FLAT_NAMES)
    assert not top & set(FLAT_NAMES)


def test_every_flat_variable_sets_what_it_set(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings()
    unchanged = [path for *_, path, value in FLAT_VARIABLES if read(defaults, path) == value]
    assert not unchanged, "the table must differ from the defaults to prove anything"
    for name, raw, _, _ in FLAT_VARIABLES:
        monkeypatch.setenv(f"MODELPORT_{name}", raw)
    settings = Settings()
    wrong = [
        f"MODELPORT_{name} -> {path}: {read(settings, path)!r}, not {expected!r}"
        for name, _, path, expected in FLAT_VARIABLES
        if read(settings, path) != expected
    ]
    assert not wrong


def test_flat_keywords_set_what_the_variables_set() -> None:
    kwargs = {name.lower(): expected for name, _, _, expected in FLAT_VARIABLES}
    settings = Settings(**kwargs)
    assert [read(settings, path) for *_, path, _ in FLAT_VARIABLES] == [
        expected for *_, expected in FLAT_VARIABLES
    ]


def test_unknown_variables_and_keywords_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELPORT_NO_SUCH_SETTING", "1")
    # A section's name is no variable: sections are not read from JSON in one variable.
    monkeypatch.setenv("MODELPORT_SERVING", '{"max_attempts": 9}')
    monkeypatch.setenv("MODELPORT_SERVING__MAX_ATTEMPTS", "9")
    monkeypatch.setenv("MODELPORT_MAX_ATTEMPTS", "9")  # a field's name without its prefix
    settings = Settings(no_such_setting=1)
    assert settings.serving.max_attempts == 3
    assert not hasattr(settings, "no_such_setting")


def test_an_argument_wins_over_the_environment_field_by_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODELPORT_SERVING_MAX_ATTEMPTS", "5")
    monkeypatch.setenv("MODELPORT_SERVING_REFRESH_SECONDS", "7")
    monkeypatch.setenv("MODELPORT_SANDBOX_BWRAP", "/opt/bwrap")
    flat = Settings(serving_max_attempts=2)
    assert (flat.serving.max_attempts, flat.serving.refresh_seconds) == (2, 7.0)
    whole = Settings(serving=ServingSettings(max_attempts=4), sandbox="unisolated")
    assert (whole.serving.max_attempts, whole.serving.refresh_seconds) == (4, 7.0)
    assert (whole.sandbox.mode, whole.sandbox.bwrap) == ("unisolated", "/opt/bwrap")
    # Both at once: the flat name wins over the section's same field.
    both = Settings(serving={"max_attempts": 4, "breaker_min_calls": 6}, serving_max_attempts=8)
    assert (both.serving.max_attempts, both.serving.breaker_min_calls) == (8, 6)


def test_a_section_field_takes_its_name_or_its_flat_name() -> None:
    assert ServingSettings(max_attempts=4).max_attempts == 4
    assert ServingSettings.model_validate({"serving_max_attempts": 4}).max_attempts == 4
    with pytest.raises(ValidationError, match="extra_forbidden"):
        ServingSettings.model_validate({"max_attemps": 4})
    with pytest.raises(ValidationError, match="frozen"):
        ServingSettings().max_attempts = 1  # type: ignore[misc]


def test_model_copy_routes_flat_names_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, sandbox_bwrap="/opt/bwrap", log_format="json")
    copied = settings.model_copy(
        update={"admin_key": "k" * 30, "sandbox": "unisolated", "role": Role.WORKER}
    )
    assert copied.security.admin_key == "k" * 30
    assert (copied.sandbox.mode, copied.sandbox.bwrap) == ("unisolated", "/opt/bwrap")
    assert copied.role is Role.WORKER
    assert copied.store.home == tmp_path
    assert settings.security.admin_key == "" and settings.sandbox.mode == "auto"
    # A section given whole updates the fields it set.
    cgroup = copied.model_copy(update={"sandbox": SandboxSettings(cgroup="off")})
    assert (cgroup.sandbox.mode, cgroup.sandbox.cgroup) == ("unisolated", "off")
    # What was set explicitly stays known, per section (``modelport demo`` reads it).
    assert copied.logs.model_fields_set == {"format"}


def test_validators_still_refuse_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="at least 24 characters"):
        Settings(metrics_token="short")
    with pytest.raises(ValidationError, match="tenant:role"):
        Settings(oidc_group_roles={"g": "acme"})
    with pytest.raises(ValidationError, match="MODELPORT_OIDC_AUDIENCE"):
        Settings(oidc_issuer="https://id.example")
    assert Settings(oidc_issuer="https://id.example", oidc_client_id="c").oidc.resolved_audience
    monkeypatch.setenv("MODELPORT_RUNTIME_MAX_BATCH_SIZE", "0")
    with pytest.raises(ValidationError) as refused:
        Settings()
    # The error names the variable's flat name, so the operator finds it.
    assert refused.value.errors()[0]["loc"] == ("runtime", "runtime_max_batch_size")
    monkeypatch.setenv("MODELPORT_RUNTIME_MAX_BATCH_SIZE", "many")
    with pytest.raises(ValidationError, match="runtime_max_batch_size"):
        Settings()


def test_values_that_combine_sections(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    assert settings.store.resolved_database_url == f"sqlite:///{tmp_path / 'modelport.db'}"
    assert settings.store.should_auto_migrate and settings.uses_usage_journal
    assert settings.resolved_signing_key_path == tmp_path / "keys" / "signing.pem"
    assert settings.resolved_metering_journal_dir == tmp_path / "journal"
    distributed = Settings(
        home=tmp_path, database_url="postgresql+psycopg://db/x", redis_url="redis://r"
    )
    assert distributed.uses_usage_stream and not distributed.uses_usage_journal
    assert not distributed.store.should_auto_migrate


def test_the_settings_document_is_current() -> None:
    spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts/settings_doc.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    document = (ROOT / "docs" / "settings.md").read_text()
    assert document == module.render(), "run: python scripts/settings_doc.py"
    for name, *_ in FLAT_VARIABLES:
        assert f"`MODELPORT_{name}`" in document
