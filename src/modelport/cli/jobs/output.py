"""How a job is printed."""

from __future__ import annotations

from modelport.cli.application import Application
from modelport.client.types import Job


def print_job(app: Application, job: Job) -> None:
    target = ", ".join(f"{k} {v}" for k, v in job.target.items())
    app.terminal.info(f"job {job.id}: {job.state} ({target})")
    if job.error:
        app.terminal.info(f"  error: {job.error.get('code')}: {job.error.get('message')}")
    app.terminal.table(
        ["stage", "state", "attempts", "error"],
        [
            [
                s["name"],
                s["state"],
                s["attempts"],
                "" if not s.get("error") else f"{s['error']['code']}: {s['error']['message']}",
            ]
            for s in job.stages
        ],
    )
    for output in job.outputs or []:
        app.terminal.info(f"  {output['name']} {output['shape']}: {output['data']}")
    reference = job.output
    if reference is not None and not reference.get("inline"):
        app.terminal.info(f"  output {reference.get('digest')} ({reference.get('size')} bytes)")
    if reference is not None and reference.get("url"):
        app.terminal.info(f"  url: {reference['url']}")
    result, links = job.raw.get("result"), job.raw.get("links")
    if isinstance(result, dict):  # a validation's: the version's new state
        app.terminal.info(f"  version: {result.get('state')}")
    if isinstance(links, dict) and links.get("validation"):
        app.terminal.info(f"  report: {links['validation']}")
    progress = job.progress
    if progress is not None:
        app.terminal.info(
            f"  rows: {progress.get('rows_done')}/{progress.get('rows_total')} done, "
            f"{progress.get('rows_failed')} failed"
        )
    manifest = job.raw.get("manifest")
    if isinstance(manifest, dict):
        for shard in manifest.get("shards", []):
            app.terminal.info(
                f"  shard {shard.get('index')}: {shard.get('rows')} rows "
                f"{shard.get('digest') or shard.get('output')}"
            )
            url = shard.get("url") or shard.get("output_url")
            if url:
                app.terminal.info(f"    url: {url}")
