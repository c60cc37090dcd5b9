"""Access to the wired services from a request: one FastAPI dependency per service.

A handler takes the one or two services it uses (``registry: deps.Registry``), never
the whole ``Services`` bag; a helper that holds the request calls the accessor
(``deps.registry_service(request)``). ``get_services``, the whole bag, is named
nowhere else in ``modelport.api``: the app factories hold the bag they build from, and
the envelope's audit record reads it from the scope's app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends
from starlette.requests import Request

from modelport.assets.search import AssetSearch
from modelport.blobs.service import BlobService
from modelport.blobs.uploads import UploadService
from modelport.clock import Clock as _Clock
from modelport.config import Settings as _Settings
from modelport.datasets.service import DatasetService
from modelport.evaluations.service import EvaluationService
from modelport.files import FileService
from modelport.inference.repository import ModelRepository as _ModelRepository
from modelport.inference.service import InferenceService
from modelport.jobs.batch import BatchService
from modelport.jobs.outputs import JobOutputs as _JobOutputs
from modelport.jobs.service import JobService
from modelport.jobs.validation import ValidationJobs
from modelport.metering.billing.service import BillingService
from modelport.metering.service import MeteringService
from modelport.moderation.service import ModerationService
from modelport.monitoring.service import MonitoringService
from modelport.observability.metrics import RuntimeMetrics
from modelport.observability.predictions import PredictionLog
from modelport.observability.retention import PredictionRetention
from modelport.observability.sampling import PredictionSampling
from modelport.observability.slo_status import SLOStatusService
from modelport.observability.version_traffic import VersionTrafficService
from modelport.registry.service import RegistryService
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.host import ModelHost
from modelport.serving.outcomes import OutcomeService
from modelport.serving.plane import ServingPlane
from modelport.store import Database as _Database
from modelport.templates.service import TemplateService
from modelport.tenancy.authn import Authenticator as _Authenticator
from modelport.tenancy.limits import LimitService
from modelport.tenancy.service import TenancyService
from modelport.webhooks.service import WebhookService

if TYPE_CHECKING:
    from modelport.app import Services
    from modelport.tenancy.oidc import OidcClient  # the oidc extra: not imported to run


def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


def prediction_log_service(request: Request) -> PredictionLog:
    return get_services(request).prediction_log


def version_traffic_service(request: Request) -> VersionTrafficService:
    return get_services(request).version_traffic


def slo_status_service(request: Request) -> SLOStatusService:
    return get_services(request).slo_status


def registry_service(request: Request) -> RegistryService:
    return get_services(request).registry


def tenancy_service(request: Request) -> TenancyService:
    return get_services(request).tenancy


def serving_service(request: Request) -> ServingPlane:
    return get_services(request).serving


def billing_service(request: Request) -> BillingService:
    return get_services(request).billing


def blobs_service(request: Request) -> BlobService:
    return get_services(request).blobs


def datasets_service(request: Request) -> DatasetService:
    return get_services(request).datasets


def evaluations_service(request: Request) -> EvaluationService:
    return get_services(request).evaluations


def templates_service(request: Request) -> TemplateService:
    return get_services(request).templates


def assets_service(request: Request) -> AssetSearch:
    return get_services(request).assets


def monitoring_service(request: Request) -> MonitoringService:
    return get_services(request).monitoring


def retention_service(request: Request) -> PredictionRetention:
    return get_services(request).retention


def sampling_service(request: Request) -> PredictionSampling:
    return get_services(request).sampling


def database_service(request: Request) -> _Database:
    return get_services(request).database


def jobs_service(request: Request) -> JobService:
    return get_services(request).jobs


def job_outputs_service(request: Request) -> _JobOutputs:
    return get_services(request).job_outputs


def clock_service(request: Request) -> _Clock:
    return get_services(request).clock


def limits_service(request: Request) -> LimitService:
    return get_services(request).limits


def authenticator_service(request: Request) -> _Authenticator:
    return get_services(request).authenticator


def settings_service(request: Request) -> _Settings:
    return get_services(request).settings


def metrics_service(request: Request) -> RuntimeMetrics:
    return get_services(request).metrics


def moderation_service(request: Request) -> ModerationService:
    return get_services(request).moderation


def oidc_service(request: Request) -> OidcClient | None:
    return get_services(request).oidc


def inference_service(request: Request) -> InferenceService:
    return get_services(request).inference


def outcomes_service(request: Request) -> OutcomeService:
    return get_services(request).outcomes


def metering_service(request: Request) -> MeteringService:
    return get_services(request).metering


def engines_service(request: Request) -> GenerativeHost | None:
    return get_services(request).engines


def host_service(request: Request) -> ModelHost | None:
    return get_services(request).host


def uploads_service(request: Request) -> UploadService:
    return get_services(request).uploads


def validations_service(request: Request) -> ValidationJobs:
    return get_services(request).validations


def webhooks_service(request: Request) -> WebhookService:
    return get_services(request).webhooks


def batches_service(request: Request) -> BatchService:
    return get_services(request).batches


def files_service(request: Request) -> FileService:
    return get_services(request).files


def model_repository_service(request: Request) -> _ModelRepository:
    return get_services(request).model_repository


VersionTraffic = Annotated[VersionTrafficService, Depends(version_traffic_service)]
SLOStatus = Annotated[SLOStatusService, Depends(slo_status_service)]
Registry = Annotated[RegistryService, Depends(registry_service)]
Tenancy = Annotated[TenancyService, Depends(tenancy_service)]
Serving = Annotated[ServingPlane, Depends(serving_service)]
Billing = Annotated[BillingService, Depends(billing_service)]
Blobs = Annotated[BlobService, Depends(blobs_service)]
Datasets = Annotated[DatasetService, Depends(datasets_service)]
Evaluations = Annotated[EvaluationService, Depends(evaluations_service)]
Templates = Annotated[TemplateService, Depends(templates_service)]
Assets = Annotated[AssetSearch, Depends(assets_service)]
Monitoring = Annotated[MonitoringService, Depends(monitoring_service)]
Retention = Annotated[PredictionRetention, Depends(retention_service)]
Sampling = Annotated[PredictionSampling, Depends(sampling_service)]
Database = Annotated[_Database, Depends(database_service)]
Jobs = Annotated[JobService, Depends(jobs_service)]
JobOutputs = Annotated[_JobOutputs, Depends(job_outputs_service)]
Clock = Annotated[_Clock, Depends(clock_service)]
Limits = Annotated[LimitService, Depends(limits_service)]
Authenticator = Annotated[_Authenticator, Depends(authenticator_service)]
Settings = Annotated[_Settings, Depends(settings_service)]
Metrics = Annotated[RuntimeMetrics, Depends(metrics_service)]
Moderation = Annotated[ModerationService, Depends(moderation_service)]
if TYPE_CHECKING:
    Oidc = Annotated[OidcClient | None, Depends(oidc_service)]
else:  # FastAPI reads the type at run time; authlib and joserfc are the oidc extra's
    Oidc = Annotated[object, Depends(oidc_service)]
Inference = Annotated[InferenceService, Depends(inference_service)]
Outcomes = Annotated[OutcomeService, Depends(outcomes_service)]
Metering = Annotated[MeteringService, Depends(metering_service)]
Engines = Annotated[GenerativeHost | None, Depends(engines_service)]
Host = Annotated[ModelHost | None, Depends(host_service)]
Uploads = Annotated[UploadService, Depends(uploads_service)]
Validations = Annotated[ValidationJobs, Depends(validations_service)]
Webhooks = Annotated[WebhookService, Depends(webhooks_service)]
Batches = Annotated[BatchService, Depends(batches_service)]
Files = Annotated[FileService, Depends(files_service)]
ModelRepository = Annotated[_ModelRepository, Depends(model_repository_service)]
