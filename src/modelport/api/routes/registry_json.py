"""JSON shapes of registry records on ``/api`` (plain dicts; the routes stay thin)."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from modelport.registry.types import (
    Alias,
    AliasEvent,
    LifecycleEvent,
    Lineage,
    LineageNode,
    Model,
    ModelVersion,
    Signature,
    ValidationReport,
)


def _time(value: datetime) -> str:
    return value.isoformat()


def model_json(model: Model) -> dict[str, Any]:
    return {
        "owner": model.owner,
        "name": model.name,
        "model": model.ref,
        "task": model.task,
        "description": model.description,
        "license": model.license or None,
        "visibility": model.visibility.value,
        "tags": list(model.tags),
        "created_at": _time(model.created_at),
        "created_by": model.created_by,
    }


def version_json(
    version: ModelVersion,
    *,
    manifest: bool = True,
    signatures: list[Signature] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": version.model_ref,
        "version": version.version,
        "manifest_digest": version.manifest_digest,
        "format": version.format,
        "license": version.manifest.license,
        "state": version.state.value,
        "created_at": _time(version.created_at),
        "created_by": version.created_by,
    }
    if manifest:
        body["manifest"] = version.manifest.model_dump(mode="json")
    if signatures is not None:
        body["signatures"] = [signature_json(s) for s in signatures]
    return body


def signature_json(signature: Signature) -> dict[str, Any]:
    return {
        "key_id": signature.key_id,
        "public_key": base64.b64encode(signature.public_key).decode(),
        "signature": base64.b64encode(signature.signature).decode(),
        "signer": signature.signer,
        "verified": signature.verified,
        "created_at": _time(signature.created_at),
    }


def event_json(event: LifecycleEvent) -> dict[str, Any]:
    return {
        "from": event.from_state.value if event.from_state else None,
        "to": event.to_state.value,
        "actor": event.actor,
        "reason": event.reason,
        "created_at": _time(event.created_at),
    }


def report_json(report: ValidationReport) -> dict[str, Any]:
    return {
        "passed": report.passed,
        "created_at": _time(report.created_at),
        "report": report.report,
    }


def alias_json(alias: Alias) -> dict[str, Any]:
    return {"alias": alias.alias, "version": alias.version, "updated_at": _time(alias.updated_at)}


def alias_event_json(event: AliasEvent) -> dict[str, Any]:
    return {
        "alias": event.alias,
        "version": event.version,
        "previous_version": event.previous_version,
        "actor": event.actor,
        "created_at": _time(event.created_at),
    }


def _node_json(node: LineageNode) -> dict[str, Any]:
    return {
        "model": f"{node.owner}/{node.name}",
        "version": node.version,
        "relation": node.relation,
        "license": node.license,
        "depth": node.depth,
    }


def lineage_json(lineage: Lineage) -> dict[str, Any]:
    return {
        "version": version_json(lineage.version, manifest=False),
        "ancestors": [_node_json(n) for n in lineage.ancestors],
        "descendants": [_node_json(n) for n in lineage.descendants],
        "ancestor_licenses": list(lineage.ancestor_licenses),
    }
