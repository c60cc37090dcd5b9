"""``modelport datasets push MANIFEST --dataset owner/name --version V``: upload a
dataset's split files with the models' resumable transfer and publish the version.

MANIFEST is the dataset manifest (``docs/evaluations.md``) with each split's ``file``
given as a ``path`` relative to the manifest's folder; the command hashes each file,
uploads the ones the server lacks, and fills in ``file`` (path, digest, size) and, when
absent, ``rows`` (counted from the Parquet footer).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import click

from modelport.cli.application import Application
from modelport.client.transfer import (
    LocalFile,
    TransferError,
    Uploader,
    UploadState,
    digest_file,
)
from modelport.errors import ModelportError
from modelport.registry.names import check_version, split_model_ref


def _rows(path: Path) -> int:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise click.UsageError(
            f"give 'rows' for {path.name} in the manifest, or install modelport[eval]"
        ) from None
    return int(pq.ParquetFile(path).metadata.num_rows)


def _local_splits(folder: Path, manifest: dict[str, Any]) -> list[tuple[dict[str, Any], Path]]:
    splits = manifest.get("splits")
    if not isinstance(splits, list) or not splits:
        raise click.UsageError("the manifest names no 'splits'")
    found = []
    for split in splits:
        relative = split.get("path") if isinstance(split, dict) else None
        if not isinstance(relative, str):
            raise click.UsageError("each split gives the 'path' of its Parquet file")
        source = (folder / relative).resolve()
        if not source.is_file():
            raise click.UsageError(f"split file {relative} not found next to the manifest")
        found.append((split, source))
    return found


@click.command()
@click.argument("manifest_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dataset", "dataset_ref", required=True, help="owner/name to publish under.")
@click.option("--version", required=True, help="The new version, e.g. 1 or 2026-12.")
@click.option("--public", is_flag=True, help="Create the dataset public (if it is new).")
@click.option("--description", default="", help="Description, if the dataset is new.")
@click.pass_obj
def push(
    app: Application,
    manifest_path: Path,
    dataset_ref: str,
    version: str,
    public: bool,
    description: str,
) -> None:
    """Upload the split files MANIFEST names (resuming an interrupted push) and publish
    them as a dataset version."""
    try:
        owner, name = split_model_ref(dataset_ref)
        check_version(version)
        manifest = json.loads(manifest_path.read_text())
        splits = _local_splits(manifest_path.parent, manifest)
        uploader = Uploader(app.http, app.url, UploadState(), 16 * 1024 * 1024)
        entries = []
        with app.terminal.progress() as progress:
            for split, source in splits:
                size = source.stat().st_size
                hashing = progress.add_task(f"digesting {source.name}", total=size)
                digest = digest_file(source, functools.partial(progress.advance, hashing))
                file = LocalFile(source.name, source, size, digest)
                if not uploader.has(digest):
                    sending = progress.add_task(source.name, total=size)
                    uploader.upload(file, functools.partial(progress.advance, sending))
                entry = {k: v for k, v in split.items() if k != "path"}
                entry["file"] = {"path": source.name, "digest": digest, "size": size}
                entry.setdefault("rows", _rows(source))
                entries.append(entry)
    except ModelportError as exc:
        app.terminal.abort(f"{exc.message} ({exc.code})")
    except (TransferError, json.JSONDecodeError) as exc:
        app.terminal.abort(str(exc))
    created = app.http.post(
        "/api/datasets",
        json={
            "owner": owner,
            "name": name,
            "visibility": "public" if public else "private",
            "description": description,
        },
    )
    if created.status_code != 409:
        app.check(created)
    response = app.http.post(
        f"/api/datasets/{owner}/{name}/versions",
        json={"version": version, "manifest": {**manifest, "splits": entries}},
    )
    body = app.check(response)
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    verb = "published" if response.status_code == 201 else "already published, identical:"
    app.terminal.success(f"{verb} {body['dataset']}:{body['version']}")
    app.terminal.info(body["digest"])
