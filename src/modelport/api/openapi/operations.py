"""The name and summary of every operation of ``/api/openapi.json``, keyed by method and
path: what a client generator names its methods after and what the docs list. A route
missing here keeps FastAPI's generated name, and ``tests/api_docs`` fails."""

from __future__ import annotations

from typing import NamedTuple


class Operation(NamedTuple):
    id: str
    summary: str


OPERATIONS: dict[tuple[str, str], Operation] = {
    # operations
    ("get", "/healthz"): Operation("getHealth", "Is the process up"),
    ("get", "/readyz"): Operation("getReadiness", "Can the process serve (its database answers)"),
    ("get", "/metrics"): Operation("getMetrics", "Prometheus metrics (operator)"),
    # uploads and blobs
    ("post", "/api/uploads"): Operation("startUpload", "Start a resumable upload"),
    ("get", "/api/uploads/{upload_id}"): Operation("getUpload", "Get an upload's offset"),
    ("patch", "/api/uploads/{upload_id}"): Operation("appendUploadChunk", "Append a chunk"),
    ("put", "/api/uploads/{upload_id}"): Operation("commitUpload", "Commit an upload as a blob"),
    ("delete", "/api/uploads/{upload_id}"): Operation("abortUpload", "Abort an upload"),
    ("head", "/api/blobs/{digest}"): Operation("headBlob", "Check a blob exists"),
    ("get", "/api/blobs/{digest}"): Operation("getBlob", "Download a blob"),
    # models, versions
    ("get", "/api/models"): Operation("listModels", "List the models you can see"),
    ("post", "/api/models"): Operation("createModel", "Create a model"),
    ("get", "/api/models/{owner}/{name}"): Operation("getModel", "Get a model"),
    ("get", "/api/models/{owner}/{name}/versions"): Operation(
        "listVersions", "List a model's versions"
    ),
    ("post", "/api/models/{owner}/{name}/versions"): Operation(
        "publishVersion", "Publish a version"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}"): Operation(
        "getVersion", "Get a version"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}/events"): Operation(
        "listVersionEvents", "List a version's lifecycle events"
    ),
    ("post", "/api/models/{owner}/{name}/versions/{version}/transitions"): Operation(
        "transitionVersion", "Move a version to another lifecycle state"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}/validation"): Operation(
        "getValidationReport", "Get a version's validation report"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}/signatures"): Operation(
        "listSignatures", "List a version's signatures"
    ),
    ("post", "/api/models/{owner}/{name}/versions/{version}/signatures"): Operation(
        "addSignature", "Add a signature to a version"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}/lineage"): Operation(
        "getLineage", "Get a version's lineage"
    ),
    # formats
    ("get", "/api/formats"): Operation("listFormats", "List model formats"),
    ("put", "/api/formats/{fmt}"): Operation("acceptFormat", "Accept a model format"),
    ("delete", "/api/formats/{fmt}"): Operation("withdrawFormat", "Withdraw a model format"),
    # aliases
    ("get", "/api/models/{owner}/{name}/aliases"): Operation(
        "listAliases", "List a model's aliases"
    ),
    ("get", "/api/models/{owner}/{name}/aliases/{alias}"): Operation("getAlias", "Get an alias"),
    ("put", "/api/models/{owner}/{name}/aliases/{alias}"): Operation(
        "setAlias", "Point an alias at a version"
    ),
    ("delete", "/api/models/{owner}/{name}/aliases/{alias}"): Operation(
        "deleteAlias", "Delete an alias"
    ),
    ("get", "/api/models/{owner}/{name}/aliases/{alias}/history"): Operation(
        "getAliasHistory", "Get an alias's history"
    ),
    # limits, budgets
    ("get", "/api/limits"): Operation("listLimits", "List rate and concurrency limits"),
    ("get", "/api/limits/{scope_type}/{scope_id}"): Operation("getLimits", "Get a scope's limits"),
    ("put", "/api/limits/{scope_type}/{scope_id}"): Operation("setLimits", "Set a scope's limits"),
    ("delete", "/api/limits/{scope_type}/{scope_id}"): Operation(
        "deleteLimits", "Remove a scope's limits"
    ),
    ("get", "/api/budgets/{tenant}"): Operation("getBudget", "Get a tenant's budget"),
    ("put", "/api/budgets/{tenant}"): Operation("setBudget", "Set a tenant's budget"),
    ("delete", "/api/budgets/{tenant}"): Operation("deleteBudget", "Remove a tenant's budget"),
    ("get", "/api/budgets/{tenant}/alerts"): Operation(
        "listBudgetAlerts", "List a tenant's budget alerts"
    ),
    # prices, usage
    ("get", "/api/prices"): Operation("listPrices", "List prices"),
    ("post", "/api/prices"): Operation("addPrice", "Set a price for a version and unit"),
    ("post", "/api/usage/events"): Operation("reportUsage", "Report usage events"),
    ("post", "/api/usage/authorizations"): Operation(
        "createUsageAuthorization", "Reserve an amount for usage to report"
    ),
    ("get", "/api/usage/authorizations"): Operation(
        "listUsageAuthorizations", "List usage authorizations"
    ),
    ("get", "/api/usage/authorizations/{authorization_id}"): Operation(
        "getUsageAuthorization", "Get a usage authorization"
    ),
    ("delete", "/api/usage/authorizations/{authorization_id}"): Operation(
        "withdrawUsageAuthorization", "Withdraw a usage authorization"
    ),
    # jobs
    ("post", "/api/jobs"): Operation("submitJob", "Submit a job"),
    ("get", "/api/jobs"): Operation("listJobs", "List your tenant's jobs"),
    ("get", "/api/jobs/{job_id}"): Operation("getJob", "Get a job, its stages and outputs"),
    ("post", "/api/jobs/{job_id}:cancel"): Operation("cancelJob", "Cancel a job"),
    ("get", "/api/jobs/{job_id}/outputs/{digest}"): Operation(
        "getJobOutput", "Download one of a job's outputs (signed URL or key)"
    ),
    # datasets, evaluations, leaderboards
    ("post", "/api/datasets"): Operation("createDataset", "Create a dataset"),
    ("get", "/api/datasets"): Operation("listDatasets", "List the datasets you can see"),
    ("get", "/api/assets"): Operation(
        "searchAssets", "Search the datasets and templates you can read"
    ),
    ("get", "/api/datasets/{owner}/{name}"): Operation(
        "getDataset", "Get a dataset and its versions"
    ),
    ("post", "/api/datasets/{owner}/{name}/versions"): Operation(
        "publishDatasetVersion", "Publish an immutable dataset version"
    ),
    ("get", "/api/datasets/{owner}/{name}/versions/{version}"): Operation(
        "getDatasetVersion", "Get a dataset version"
    ),
    ("post", "/api/templates"): Operation("createTemplate", "Create a prompt template"),
    ("get", "/api/templates"): Operation("listTemplates", "List prompt templates"),
    ("get", "/api/templates/{owner}/{name}"): Operation("getTemplate", "Get a prompt template"),
    ("post", "/api/templates/{owner}/{name}/versions"): Operation(
        "publishTemplateVersion", "Publish a prompt template version"
    ),
    ("get", "/api/templates/{owner}/{name}/versions/{version}"): Operation(
        "getTemplateVersion", "Get a prompt template version"
    ),
    ("post", "/api/templates/{owner}/{name}/versions/{version}/render"): Operation(
        "renderTemplate", "Render a prompt template version's messages"
    ),
    ("post", "/api/evaluations"): Operation(
        "submitEvaluation", "Evaluate a model on a dataset split"
    ),
    ("get", "/api/evaluations/{evaluation_id}"): Operation("getEvaluation", "Get an evaluation"),
    ("get", "/api/models/{owner}/{name}/evaluations"): Operation(
        "listModelEvaluations", "List a model's evaluations, verified and claimed"
    ),
    ("post", "/api/models/{owner}/{name}/versions/{version}/claims"): Operation(
        "claimScores", "Claim your own scores for a version (shown as claimed)"
    ),
    ("get", "/api/leaderboards"): Operation("listLeaderboards", "List the leaderboards"),
    ("get", "/api/leaderboards/{task}/{owner}/{name}"): Operation(
        "getLeaderboard", "Get a leaderboard: verified scores ranked, claims apart"
    ),
    # endpoints, deployments, backends
    ("post", "/api/endpoints"): Operation("createEndpoint", "Create an endpoint"),
    ("get", "/api/endpoints"): Operation("listEndpoints", "List endpoints"),
    ("get", "/api/endpoints/{name}"): Operation("getEndpoint", "Get an endpoint"),
    ("post", "/api/endpoints/{name}/deployments"): Operation(
        "createDeployment", "Deploy versions to an endpoint"
    ),
    ("get", "/api/endpoints/{name}/deployments"): Operation(
        "listDeployments", "List an endpoint's deployments"
    ),
    ("get", "/api/endpoints/{name}/deployments/{deployment}"): Operation(
        "getDeployment", "Get a deployment's status"
    ),
    ("post", "/api/endpoints/{name}/deployments/{deployment}:rollback"): Operation(
        "rollbackDeployment", "Roll a deployment back"
    ),
    ("post", "/api/endpoints/{name}:predict"): Operation("predict", "Predict through an endpoint"),
    ("get", "/api/endpoints/{name}/slos"): Operation("getEndpointSLOs", "Get an endpoint's SLOs"),
    ("get", "/api/endpoints/{name}/slos/status"): Operation(
        "getEndpointSLOStatus", "Get an endpoint's error budgets and burn rates"
    ),
    ("put", "/api/endpoints/{name}/slos"): Operation(
        "setEndpointSLOs", "Replace an endpoint's SLOs"
    ),
    ("get", "/api/endpoints/{name}/degradation"): Operation(
        "getEndpointDegradation", "Get how an endpoint's calls give way under load"
    ),
    ("put", "/api/endpoints/{name}/degradation"): Operation(
        "setEndpointDegradation", "Replace how an endpoint's calls give way under load"
    ),
    ("delete", "/api/endpoints/{name}/degradation"): Operation(
        "removeEndpointDegradation", "Give an endpoint the installation's degradation back"
    ),
    ("get", "/api/retention"): Operation(
        "listRetention", "List the default retention and every tenant's own"
    ),
    ("get", "/api/tenants/{tenant}/retention"): Operation(
        "getRetention", "Get how long a tenant's prediction log and job data are kept"
    ),
    ("put", "/api/tenants/{tenant}/retention"): Operation(
        "setRetention", "Set how long a tenant's prediction log and job data are kept"
    ),
    ("get", "/api/tenants/{tenant}/prediction-log"): Operation(
        "getTenantPredictionSampling", "Get the share of a tenant's direct calls logged"
    ),
    ("put", "/api/tenants/{tenant}/prediction-log"): Operation(
        "setTenantPredictionSampling", "Set the share of a tenant's direct calls logged"
    ),
    ("get", "/api/models/{owner}/{name}/versions/{version}/prediction-log"): Operation(
        "getVersionPredictionSampling", "Get the share of a version's direct calls logged"
    ),
    ("put", "/api/models/{owner}/{name}/versions/{version}/prediction-log"): Operation(
        "setVersionPredictionSampling", "Set the share of a version's direct calls logged"
    ),
    ("delete", "/api/tenants/{tenant}/predictions"): Operation(
        "forgetPredictions", "Delete every prediction record of a tenant's calls"
    ),
    ("delete", "/api/tenants/{tenant}/data"): Operation(
        "forgetTenantData",
        "Erase a tenant's prediction records and its finished jobs' inputs and outputs",
    ),
    ("get", "/api/slos/rules"): Operation(
        "getSLORules", "Get the Prometheus rules of every endpoint's SLOs (operator)"
    ),
    ("post", "/api/backends"): Operation("createBackend", "Register a remote backend"),
    ("get", "/api/backends"): Operation("listBackends", "List remote backends"),
    ("get", "/api/backends/{name}"): Operation("getBackend", "Get a remote backend"),
    ("delete", "/api/backends/{name}"): Operation("deleteBackend", "Remove a remote backend"),
    ("get", "/api/runtime/models"): Operation(
        "listRuntimeModels", "List the versions this process hosts, with their health"
    ),
    # predictions
    ("get", "/api/predictions/{prediction_id}"): Operation(
        "getPrediction", "Get a logged prediction"
    ),
    ("post", "/api/predictions/{prediction_id}/outcome"): Operation(
        "recordOutcome", "Record a prediction's true outcome"
    ),
    ("get", "/api/endpoints/{name}/outcomes"): Operation(
        "getOutcomeReport", "Get an endpoint's accuracy report"
    ),
    ("get", "/api/endpoints/{name}/monitor"): Operation(
        "getMonitor", "Get an endpoint's drift and quality monitor"
    ),
    ("put", "/api/endpoints/{name}/monitor"): Operation(
        "setMonitor", "Set an endpoint's drift and quality monitor"
    ),
    ("delete", "/api/endpoints/{name}/monitor"): Operation(
        "deleteMonitor", "Stop monitoring an endpoint"
    ),
    ("get", "/api/endpoints/{name}/monitoring"): Operation(
        "getMonitoringReport", "Get an endpoint's drift and quality report"
    ),
    ("get", "/api/endpoints/{name}/traffic"): Operation(
        "getTrafficReport", "Get an endpoint's errors and latency per version"
    ),
    # webhooks
    ("get", "/api/webhooks/secret"): Operation(
        "getWebhookSecret", "Get the webhook signing secret's metadata"
    ),
    ("post", "/api/webhooks/secret"): Operation(
        "rotateWebhookSecret", "Create or rotate the webhook signing secret"
    ),
    ("get", "/api/webhooks/deliveries"): Operation(
        "listWebhookDeliveries", "List webhook deliveries"
    ),
    ("get", "/api/webhooks/deliveries/{delivery_id}"): Operation(
        "getWebhookDelivery", "Get a webhook delivery and its attempts"
    ),
    ("post", "/api/webhooks/deliveries/{delivery_id}:redeliver"): Operation(
        "redeliverWebhook", "Send a webhook delivery's message again"
    ),
    # tenants, members, keys, grants, audit
    ("get", "/api/tenants"): Operation("listTenants", "List tenants"),
    ("post", "/api/tenants"): Operation("createTenant", "Create a tenant"),
    ("get", "/api/tenants/{tenant}"): Operation("getTenant", "Get a tenant"),
    ("patch", "/api/tenants/{tenant}"): Operation("updateTenant", "Update a tenant"),
    ("post", "/api/tenants/{tenant}/suspend"): Operation(
        "suspendTenant", "Suspend a tenant (operator)"
    ),
    ("put", "/api/tenants/{tenant}/tier"): Operation(
        "setTenantTier", "Move a tenant to another tier (operator)"
    ),
    ("post", "/api/tenants/{tenant}/reactivate"): Operation(
        "reactivateTenant", "Reactivate a suspended tenant (operator)"
    ),
    ("get", "/api/tenants/{tenant}/members"): Operation("listMembers", "List a tenant's members"),
    ("post", "/api/tenants/{tenant}/members"): Operation("addMember", "Add a member"),
    ("get", "/api/tenants/{tenant}/members/{member}"): Operation("getMember", "Get a member"),
    ("patch", "/api/tenants/{tenant}/members/{member}"): Operation(
        "setMemberRoles", "Set a member's roles"
    ),
    ("delete", "/api/tenants/{tenant}/members/{member}"): Operation(
        "removeMember", "Remove a member"
    ),
    ("post", "/api/keys"): Operation("createKey", "Create an API key"),
    ("get", "/api/keys"): Operation("listKeys", "List API keys"),
    ("get", "/api/keys/{key_id}"): Operation("getKey", "Get an API key"),
    ("delete", "/api/keys/{key_id}"): Operation("revokeKey", "Revoke an API key"),
    ("post", "/api/keys/{key_id}/rotate"): Operation("rotateKey", "Rotate an API key"),
    ("post", "/api/grants"): Operation("createGrant", "Grant access to another tenant"),
    ("get", "/api/grants"): Operation("listGrants", "List grants"),
    ("get", "/api/grants/{grant_id}"): Operation("getGrant", "Get a grant"),
    ("delete", "/api/grants/{grant_id}"): Operation("deleteGrant", "Withdraw a grant"),
    ("get", "/api/audit"): Operation("listAuditEvents", "Read the audit log"),
    # billing
    ("get", "/api/usage"): Operation("getUsage", "Summarize usage"),
    ("get", "/api/costs"): Operation(
        "getCosts", "Get serving costs, revenue and margins per tenant and model (operator)"
    ),
    ("get", "/api/tenants/{tenant}/costs"): Operation(
        "getTenantCosts", "Get a tenant's share of the compute"
    ),
    ("get", "/api/invoices"): Operation("listInvoices", "List invoices"),
    ("get", "/api/invoices/{invoice_id}"): Operation("getInvoice", "Get an invoice"),
    ("post", "/api/invoices/{invoice_id}/finalize"): Operation(
        "finalizeInvoice", "Finalize an invoice"
    ),
    ("get", "/api/invoices/{invoice_id}/credit-notes"): Operation(
        "listCreditNotes", "List an invoice's credit notes"
    ),
    ("post", "/api/invoices/{invoice_id}/credit-notes"): Operation(
        "addCreditNote", "Credit part of an invoice"
    ),
    ("get", "/api/statements"): Operation("listStatements", "List publisher statements"),
    ("get", "/api/revenue"): Operation(
        "getPublisherRevenue", "A publisher's calls and revenue by day, model and version"
    ),
    ("get", "/api/statements/{statement_id}"): Operation(
        "getStatement", "Get a publisher statement"
    ),
    ("post", "/api/statements/{statement_id}/finalize"): Operation(
        "finalizeStatement", "Finalize a publisher statement"
    ),
    ("get", "/api/balances/{tenant}"): Operation("getBalances", "Get a tenant's balances"),
    ("post", "/api/balances/{tenant}/credits"): Operation(
        "creditBalance", "Credit a tenant's balance"
    ),
    ("post", "/api/billing/generate"): Operation(
        "generateBilling", "Generate invoices and statements for a period"
    ),
    ("get", "/api/billing/recompute"): Operation(
        "recomputeBilling", "Recompute a period's charges from usage events"
    ),
    ("get", "/api/billing/reconciliation"): Operation(
        "getReconciliation", "Compare the ledger with the usage events"
    ),
    # content moderation
    ("get", "/api/tenants/{tenant}/moderation-policy"): Operation(
        "getModerationPolicy", "Get a tenant's content moderation policy"
    ),
    ("put", "/api/tenants/{tenant}/moderation-policy"): Operation(
        "setModerationPolicy", "Set a tenant's content moderation policy (a new version)"
    ),
    ("get", "/api/moderation/decisions"): Operation(
        "listModerationDecisions", "List a tenant's moderation decisions"
    ),
}

TAGS = [
    {"name": "operations", "description": "Probes and metrics for the operator."},
    {"name": "uploads", "description": "Resumable blob uploads (OCI distribution semantics)."},
    {"name": "blobs", "description": "Content-addressed files, by `sha256:` digest."},
    {"name": "models", "description": "Models: a named family of versions under an owner."},
    {"name": "versions", "description": "Immutable versions, their lifecycle and validation."},
    {"name": "formats", "description": "Which model formats the platform accepts."},
    {"name": "aliases", "description": "Movable names for versions (`production`, ...)."},
    {"name": "limits", "description": "Rate, concurrency limits and budgets."},
    {"name": "prices", "description": "The price book: per version and unit."},
    {"name": "usage", "description": "Usage reported by remote backends, and reservations."},
    {"name": "endpoints", "description": "Endpoints, deployments and `:predict`."},
    {"name": "backends", "description": "Remote backends (Open Inference Protocol, OpenAI)."},
    {"name": "runtime", "description": "The versions this process hosts (platform admin)."},
    {"name": "predictions", "description": "The prediction log and true outcomes."},
    {"name": "monitoring", "description": "Endpoints' drift and quality monitors."},
    {"name": "webhooks", "description": "Signed webhooks: the signing secret, deliveries."},
    {"name": "jobs", "description": "Durable background jobs, run stage by stage."},
    {"name": "datasets", "description": "Datasets: versioned split files, like models."},
    {"name": "assets", "description": "Datasets and templates in one searchable catalog."},
    {"name": "evaluations", "description": "Evaluations, claims and leaderboards."},
    {"name": "templates", "description": "Prompt templates: versioned chat prompts."},
    {"name": "tenants", "description": "Tenants and their members."},
    {"name": "keys", "description": "API keys: create, rotate, revoke."},
    {"name": "grants", "description": "Access given to other tenants."},
    {"name": "audit", "description": "The audit log."},
    {"name": "billing", "description": "Usage, invoices, statements and balances."},
    {"name": "moderation", "description": "Content policies and moderation decisions."},
]
