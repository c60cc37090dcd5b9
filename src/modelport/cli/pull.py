"""``modelport pull owner/name:V DIR``: download a version's files, verified."""

from __future__ import annotations

import functools
from pathlib import Path

import click
import orjson

from modelport.cli.application import Application
from modelport.cli.models.refs import version_path
from modelport.cli.package import MANIFEST_NAME
from modelport.client.transfer import TransferError, digest_file, download


@click.command()
@click.argument("ref")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print what was fetched as JSON.")
@click.pass_obj
def pull(app: Application, ref: str, folder: Path, as_json: bool) -> None:
    """Download version REF (owner/name:V) into FOLDER, each file verified against its
    digest; files already there and intact are kept, partial downloads resumed."""
    if as_json:
        app.terminal.as_json = True
    body = app.check(app.http.get(version_path(app, ref)))
    manifest = body["manifest"]
    entries = manifest["files"]
    root = folder.resolve()
    fetched = kept = 0
    try:
        with app.terminal.progress() as progress:
            for entry in entries:
                dest = _inside(root, entry["path"])
                task = progress.add_task(entry["path"], total=entry["size"])
                advance = functools.partial(progress.advance, task)
                if _intact(dest, entry["digest"], entry["size"]):
                    advance(entry["size"])
                    kept += 1
                    continue
                download(app.http, entry["digest"], entry["size"], dest, advance)
                fetched += 1
    except TransferError as exc:
        app.terminal.abort(str(exc))
    if any(e["path"] == MANIFEST_NAME for e in entries):
        app.terminal.warn(f"the version has a file named {MANIFEST_NAME}; not writing the manifest")
    else:
        (root / MANIFEST_NAME).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    if app.terminal.as_json:
        app.terminal.json(
            {
                "model": body["model"],
                "version": body["version"],
                "manifest_digest": body["manifest_digest"],
                "folder": str(root),
                "fetched": fetched,
                "kept": kept,
            }
        )
        return
    app.terminal.success(
        f"pulled {body['model']}:{body['version']} into {root} "
        f"({fetched} fetched, {kept} already there)"
    )


def _inside(root: Path, relative: str) -> Path:
    dest = (root / relative).resolve()
    if not dest.is_relative_to(root):
        raise TransferError(f"refusing file path {relative!r}: it leads outside {root}")
    return dest


def _intact(dest: Path, digest: str, size: int) -> bool:
    return dest.is_file() and dest.stat().st_size == size and digest_file(dest, _ignore) == digest


def _ignore(_: int) -> None:
    pass
