"""The CLI on the client: polite failures, validation reports, and the verbs for
endpoints, infer, prices, limits, grants, aliases, load and unload; against a live
server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from modelport.cli import modelport
from modelport.testing import add_one, save
from tests.client.platform import MODEL, ROW, Platform, platform
from tests.conftest import ADMIN_KEY, free_port

__all__ = ["platform"]  # the fixture, imported from the client tests


def cli(url: str, *args: str, key: str = ADMIN_KEY) -> Result:
    return CliRunner().invoke(modelport, ["--url", url, "--api-key", key, *args])


def ok(platform: Platform, *args: str, key: str = ADMIN_KEY) -> str:
    result = cli(platform.server.url, *args, key=key)
    assert result.exit_code == 0, result.output
    return result.output


def as_json(platform: Platform, *args: str) -> Any:
    return json.loads(ok(platform, "--json", *args))


def failure_lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.strip()]


# ---- failing politely


@pytest.mark.parametrize(
    "args",
    [
        ["models", "list"],
        ["versions", "show", "acme/x:1"],
        ["endpoints", "list"],
        ["infer", "acme/x", '{"x": [[1]]}'],
    ],
)
def test_a_server_that_does_not_answer_is_one_line(args: list[str]) -> None:
    port = free_port()
    result = cli(f"http://127.0.0.1:{port}", *args)
    assert result.exit_code == 3
    (line,) = failure_lines(result)
    assert line.startswith("error: cannot reach the server at http://127.0.0.1:")
    assert "check the URL" in line and "server runs" in line
    assert "Traceback" not in result.output


def test_push_to_a_server_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    save(add_one(), tmp_path / "model.onnx")
    args = ["push", str(tmp_path), "--model", "a/b", "--version", "1", "--license", "MIT"]
    result = cli(f"127.0.0.1:{free_port()}", *args)
    assert result.exit_code == 3
    assert failure_lines(result)[-1].startswith("error: cannot reach the server")
    assert "Traceback" not in result.output


def test_a_url_without_a_scheme_means_http(platform: Platform) -> None:
    bare = platform.server.url.removeprefix("http://")
    result = cli(bare, "--json", "models", "list")
    assert result.exit_code == 0, result.output
    assert [m["model"] for m in json.loads(result.output)["items"]] == [MODEL]


def test_a_url_that_cannot_work_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELPORT_URL", "ftp://127.0.0.1:8080")
    result = CliRunner().invoke(modelport, ["models", "list"])
    assert result.exit_code == 3
    (line,) = failure_lines(result)
    assert "must start with http:// or https://" in line


def test_debug_shows_the_traceback() -> None:
    result = CliRunner().invoke(
        modelport, ["--debug", "--url", f"http://127.0.0.1:{free_port()}", "models", "list"]
    )
    assert result.exit_code != 0
    # the exception itself escapes (click prints its traceback), not a one-line SystemExit
    assert result.exception is not None and not isinstance(result.exception, SystemExit)


def test_a_refusal_prints_its_code_and_detail(platform: Platform) -> None:
    result = cli(platform.server.url, "models", "show", "acme/none")
    assert result.exit_code == 1
    (line,) = failure_lines(result)
    assert line.startswith("error: model_not_found: ")
    malformed = cli(platform.server.url, "infer", "a/b/c", '{"x": [[1.0]]}')
    assert malformed.exit_code == 2 and "expected owner/name" in malformed.output
    assert "Traceback" not in malformed.output
    bad_key = cli(platform.server.url, "models", "list", key="mp_wrong_" + "x" * 30)
    assert bad_key.exit_code == 1
    assert failure_lines(bad_key) == ["error: invalid_credentials: invalid API key"]


# ---- validation


def test_a_failed_validation_prints_the_reports_problems(platform: Platform) -> None:
    ref = platform.publish("1", expected=[[9.0, 9.0, 9.0, 9.0]])
    result = cli(platform.server.url, "versions", "transition", ref, "--to", "validated")
    assert result.exit_code == 1
    lines = failure_lines(result)
    assert lines[0].startswith("error: validation_failed: ")
    assert any(line.startswith("  - example 0: ") for line in lines[1:]), lines
    report = ok(platform, "versions", "validation", ref)
    assert "failed" in report and "example 0: " in report
    shown = ok(platform, "versions", "show", ref)
    assert "validation: failed" in shown and "example 0: " in shown
    assert as_json(platform, "versions", "show", ref)["validation"]["passed"] is False


def test_versions_show_before_and_after_validation(platform: Platform) -> None:
    ref = platform.publish("1")
    assert "validation: not run yet" in ok(platform, "versions", "show", ref)
    assert as_json(platform, "versions", "validation", ref) is None
    ok(platform, "versions", "transition", ref, "--to", "validated")
    assert "validation: passed" in ok(platform, "versions", "show", ref)
    assert as_json(platform, "versions", "validation", ref)["passed"] is True


# ---- verbs


def test_alias_list_and_delete(platform: Platform) -> None:
    platform.publish("1")
    ok(platform, "alias", "set", MODEL, "prod", "1")
    assert "prod" in ok(platform, "alias", "list", MODEL)
    assert as_json(platform, "alias", "list", MODEL)["items"][0]["version"] == "1"
    assert "deleted" in ok(platform, "alias", "delete", MODEL, "prod")
    assert as_json(platform, "alias", "list", MODEL)["items"] == []
    again = cli(platform.server.url, "alias", "delete", MODEL, "prod")
    assert again.exit_code == 1 and "alias_not_found" in again.output


def test_load_infer_unload(platform: Platform, tmp_path: Path) -> None:
    ref = platform.approved("1")
    assert "ready" in ok(platform, "versions", "load", ref)
    text = ok(platform, "infer", ref, json.dumps({"x": ROW}))
    assert "y (FP32 [1, 4])" in text and "[[2., 3., 4., 5.]]" in text
    npy = tmp_path / "x.npy"
    np.save(npy, np.asarray(ROW, dtype=np.float32))
    body = as_json(platform, "infer", ref, str(npy))
    assert body["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
    body = as_json(platform, "infer", ref, "--input", f"x={npy}")
    assert body["model_version"] == "1"
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW}]})
    )
    assert as_json(platform, "infer", ref, str(request))["outputs"][0]["shape"] == [1, 4]
    wrong = cli(platform.server.url, "infer", ref, '{"x": [[1, 2, 3]]}')
    assert wrong.exit_code == 1 and failure_lines(wrong)[0].startswith("error: ")
    not_json = cli(platform.server.url, "infer", ref, "{nope")
    assert not_json.exit_code == 2 and "not JSON" in not_json.output
    assert "unloaded acme/adder:1" in ok(platform, "versions", "unload", MODEL)
    gone = cli(platform.server.url, "versions", "unload", ref)
    assert gone.exit_code == 1 and "model_not_loaded" in gone.output


def test_endpoints_create_deploy_show_rollback(platform: Platform) -> None:
    one, two = platform.approved("1"), platform.approved("2")
    assert "created endpoint adder in acme" in ok(
        platform, "endpoints", "create", "adder", "--tenant", "acme"
    )
    first = as_json(platform, "endpoints", "deploy", "adder", one)
    assert first["state"] == "active"
    assert "adder" in ok(platform, "endpoints", "list")
    answer = as_json(platform, "infer", "adder", json.dumps({"x": ROW}))
    assert answer["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
    split = ok(platform, "endpoints", "deploy", "adder", f"{one}=80", f"{two}=20")
    assert "active" in split and "80" in split
    shown = ok(platform, "endpoints", "show", "adder")
    assert "80% -> acme/adder:1" in shown and "20% -> acme/adder:2" in shown
    history = as_json(platform, "endpoints", "deployments", "adder")["items"]
    assert [d["state"] for d in history] == ["active", "superseded"]
    assert "rolled back" in ok(platform, "endpoints", "rollback", "adder")
    restored = as_json(platform, "endpoints", "show", "adder")
    assert restored["active_deployment"] == first["id"]
    mixed = cli(platform.server.url, "endpoints", "deploy", "adder", f"{one}=80", two)
    assert mixed.exit_code == 2 and "every version a weight" in mixed.output
    bad = cli(platform.server.url, "endpoints", "deploy", "adder", f"{one}=80", f"{two}=10")
    assert bad.exit_code == 1 and "invalid_deployment" in bad.output
    canary = cli(platform.server.url, "endpoints", "deploy", "adder", one, "--canary")
    assert canary.exit_code == 1 and "invalid_deployment" in canary.output
    missing = cli(platform.server.url, "endpoints", "show", "nothing")
    assert missing.exit_code == 1 and "endpoint_not_found" in missing.output


def test_prices(platform: Platform) -> None:
    platform.publish("1")
    assert "0.002500 per prediction" in ok(platform, "prices", "set", MODEL, "--price", "0.0025")
    assert "0.002500" in ok(platform, "prices", "list", MODEL)
    rule = as_json(platform, "prices", "list", MODEL)["items"][0]
    assert (rule["unit_price_micros"], rule["version"]) == (2500, None)
    hit = ok(platform, "prices", "set", MODEL, "--unit", "cache_hit", "--price", "0.0001")
    assert "0.000100 per cache_hit" in hit
    per_row = ok(platform, "prices", "set", MODEL, "--unit", "row", "--price", "0.00002")
    assert "0.000020 per row" in per_row
    listed = as_json(platform, "prices", "list", MODEL)["items"]
    assert ("row", 20) in [(r["unit"], r["unit_price_micros"]) for r in listed]
    bad = cli(platform.server.url, "prices", "set", MODEL, "--price", "0.0000001")
    assert bad.exit_code == 2 and "six decimals" in bad.output


def test_limits(platform: Platform) -> None:
    assert "rpm 100" in ok(platform, "limits", "set", "tenant", "acme", "--rpm", "100")
    assert as_json(platform, "limits", "show", "tenant", "acme")["rpm"] == 100
    assert "acme" in ok(platform, "limits", "list", "--tenant", "acme")
    assert "rpm unlimited" in ok(platform, "limits", "set", "tenant", "acme", "--concurrency", "2")
    shown = ok(platform, "limits", "set", "tenant", "acme", "--jobs", "9", "--job-concurrency", "3")
    assert "jobs 9, job concurrency 3" in shown
    assert as_json(platform, "limits", "show", "tenant", "acme")["job_concurrency"] == 3
    assert "job concurrency" in ok(platform, "limits", "list", "--tenant", "acme")
    missing = cli(platform.server.url, "limits", "show", "tenant", "nobody")
    assert missing.exit_code == 1 and "tenant_not_found" in missing.output


def test_grants(platform: Platform) -> None:
    owner = platform.owner_key
    added = ok(platform, "grants", "add", "globex", "--model", "adder", key=owner)
    assert "acme/adder shared with globex" in added
    (grant,) = as_json(platform, "grants", "list", "--tenant", "acme")["items"]
    assert "globex" in ok(platform, "grants", "list", key=owner)
    assert "removed" in ok(platform, "grants", "remove", str(grant["id"]), key=owner)
    again = cli(platform.server.url, "grants", "remove", str(grant["id"]), key=owner)
    assert again.exit_code == 1 and "grant_not_found" in again.output


def test_endpoints_slo_rules_prints_or_writes_the_rule_file(
    platform: Platform, tmp_path: Path
) -> None:
    import httpx

    ok(platform, "endpoints", "create", "ruled", "--tenant", "acme")
    slos = {"slos": [{"name": "availability", "kind": "availability", "objective": 0.999}]}
    put = httpx.put(
        f"{platform.server.url}/api/endpoints/ruled/slos",
        json=slos,
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert put.status_code == 200, put.text
    printed = ok(platform, "endpoints", "slo-rules")
    assert printed.startswith("groups:") and 'name: "modelport-slo-ruled-availability"' in printed
    out = tmp_path / "slos.yml"
    assert "wrote" in ok(platform, "endpoints", "slo-rules", "-o", str(out))
    assert out.read_text() == printed
    refused = cli(platform.server.url, "endpoints", "slo-rules", key="mp_wrong_" + "x" * 30)
    assert refused.exit_code == 1
    assert failure_lines(refused) == ["error: invalid_credentials: invalid API key"]
