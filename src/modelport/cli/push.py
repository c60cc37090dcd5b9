"""``modelport push DIR --model owner/name --version V``: upload a package and publish it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from modelport.cli.application import Application
from modelport.cli.example_input import add_example
from modelport.cli.local_check import check_locally
from modelport.cli.package import complete_manifest, package_files
from modelport.client.transfer import (
    LocalFile,
    TransferError,
    Uploader,
    UploadState,
    digest_file,
    parse_size,
)
from modelport.errors import ModelportError
from modelport.registry.names import check_version, split_model_ref


def _chunk_size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if size < 1:
        raise click.BadParameter("must be at least one byte")
    return size


@click.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", "model_ref", required=True, help="owner/name to publish under.")
@click.option("--version", required=True, help="The new version, e.g. 1 or 2024-06-01.")
@click.option(
    "--format",
    "fmt",
    help="Model format (inferred for a single .onnx file, and for a transformers model "
    "folder: config.json with *.safetensors, or a *.gguf file).",
)
@click.option("--license", "license_id", help="SPDX license identifier or expression.")
@click.option("--task", default="", help="Task of the model, if it must be created.")
@click.option("--description", help="Description of the model and the version.")
@click.option(
    "--chunk-size",
    default="16MiB",
    show_default=True,
    callback=_chunk_size,
    help="Bytes per upload request.",
)
@click.option(
    "--example-input",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON {input: nested list} or .npy (one input): run the model here on it and "
    "add it, with the outputs it gives, as the manifest's first example.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List the files, check everything that can be checked here (manifest, file "
    "contents, examples run by the model) and stop: nothing is uploaded or published.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the published version as JSON.")
@click.pass_obj
def push(
    app: Application,
    folder: Path,
    model_ref: str,
    version: str,
    fmt: str | None,
    license_id: str | None,
    task: str,
    description: str | None,
    chunk_size: int,
    example_input: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Upload the files of FOLDER the server lacks (resuming an interrupted push) and
    publish them as a version. FOLDER/manifest.json is used if present. The files are
    listed first; hidden ones and those FOLDER/.modelportignore names (patterns as in
    .gitignore) are left out."""
    if as_json:
        app.terminal.as_json = True
    try:
        owner, name = split_model_ref(model_ref)
        check_version(version)
        files = _digest(app, package_files(folder))
        _list_files(app, files)
        manifest = complete_manifest(
            folder, files, fmt=fmt, license=license_id, description=description
        )
        if example_input is not None:
            manifest = add_example(manifest, {f.path: f.source for f in files}, example_input)
        if dry_run:
            _dry_run(app, manifest, files, f"{owner}/{name}:{version}")
            return
        uploaded = _upload(app, files, chunk_size)
    except ModelportError as exc:
        app.terminal.abort(f"{exc.message} ({exc.code})")
    except TransferError as exc:
        app.terminal.abort(str(exc))
    # A model described from its files (transformers) says its task.
    task = task or str((manifest.get("runtime") or {}).get("task") or "")
    _ensure_model(app, owner, name, task, description or "", manifest["license"])
    response = app.http.post(
        f"/api/models/{owner}/{name}/versions", json={"version": version, "manifest": manifest}
    )
    body = app.check(response)
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    sent = sum(f.size for f in uploaded)
    app.terminal.info(
        f"{len(files)} files: {len(uploaded)} uploaded ({sent} bytes), "
        f"{len(files) - len(uploaded)} already on the server"
    )
    verb = "published" if response.status_code == 201 else "already published, identical:"
    app.terminal.success(f"{verb} {body['model']}:{body['version']}")
    app.terminal.info(body["manifest_digest"])


def _dry_run(app: Application, manifest: dict[str, Any], files: list[LocalFile], ref: str) -> None:
    checks = check_locally(manifest, files)
    if app.terminal.as_json:
        app.terminal.json(
            {
                "dry_run": True,
                "version": ref,
                "files": [{"path": f.path, "size": f.size, "digest": f.digest} for f in files],
                "checks": checks,
                "manifest": manifest,
            }
        )
        return
    for line in checks:
        app.terminal.success(line)
    app.terminal.info(f"dry run: nothing was uploaded or published; {ref} is not spent")


def _list_files(app: Application, files: list[LocalFile]) -> None:
    """What the version will hold, before anything is sent: a stray file shows here."""
    total = sum(f.size for f in files)
    app.terminal.info(f"{len(files)} files in the version ({total} bytes):")
    for file in files:
        app.terminal.info(f"  {escape(file.path)}  ({file.size} bytes)")


def _digest(app: Application, sources: list[tuple[str, Path]]) -> list[LocalFile]:
    sizes = [path.stat().st_size for _, path in sources]
    files = []
    with app.terminal.progress() as progress:
        task = progress.add_task("digesting", total=sum(sizes))
        for (relative, path), size in zip(sources, sizes, strict=True):
            digest = digest_file(path, lambda n: progress.advance(task, n))
            files.append(LocalFile(relative, path, size, digest))
    return files


def _upload(app: Application, files: list[LocalFile], chunk_size: int) -> list[LocalFile]:
    """Upload the distinct blobs the server lacks; the files that were sent."""
    uploader = Uploader(app.http, app.url, UploadState(), chunk_size)
    distinct = list({f.digest: f for f in files}.values())
    missing = [f for f in distinct if not uploader.has(f.digest)]
    with app.terminal.progress() as progress:
        for file in missing:
            task = progress.add_task(file.path, total=file.size)
            uploader.upload(file, functools.partial(progress.advance, task))
    return missing


def _ensure_model(
    app: Application, owner: str, name: str, task: str, description: str, license: str
) -> None:
    if app.http.get(f"/api/models/{owner}/{name}").status_code != 404:
        return
    body: dict[str, Any] = {
        "owner": owner,
        "name": name,
        "task": task,
        "description": description,
        "tags": [],
        "license": license,
        "visibility": "private",
    }
    response = app.http.post("/api/models", json=body)
    if response.status_code != 409:  # 409: created meanwhile by someone else, fine
        app.check(response)
