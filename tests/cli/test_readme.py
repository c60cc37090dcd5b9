"""The README's "Running it yourself" works as written: its commands, in order, against a
live server (which plays ``modelport serve``), in a folder holding the demo's package."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelport.cli import modelport
from modelport.cli.demo import build_demo_package
from tests.conftest import ADMIN_KEY, LiveServer

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[list[str]]:
    """The shell lines of the section's first ``bash`` block, as argument lists."""
    text = README.read_text()
    section = text[text.index("## Running it yourself") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the section has no bash block"
    return [words for line in block[1].splitlines() if (words := shlex.split(line, comments=True))]


def test_the_block_says_how_modelport_got_on_the_path() -> None:
    assert readme_commands()[0] == ["source", ".venv/bin/activate"]


def test_the_readme_walk_works_as_written(
    live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    demo = tmp_path / ".modelport-demo" / "demo-model"
    build_demo_package(demo)
    env = {"MODELPORT_URL": live_server.url, "MODELPORT_API_KEY": ADMIN_KEY}
    ran: list[str] = []
    for words in readme_commands():
        match words:
            case ["source", ".venv/bin/activate"]:
                continue
            case ["export", admin, *_] if admin.startswith("MODELPORT_ADMIN_KEY="):
                continue  # the live server has its admin key
            case ["cp", "-r", source, dest]:
                (tmp_path / dest).mkdir()
                for file in (tmp_path / source).iterdir():
                    (tmp_path / dest / file.name).write_bytes(file.read_bytes())
            case ["export", *assignments]:
                names = {a.partition("=")[0] for a in assignments}
                assert names == {"MODELPORT_URL", "MODELPORT_API_KEY"}, assignments
            case ["modelport", "serve", *_]:
                continue  # the live server
            case ["modelport", *args]:
                result = CliRunner().invoke(modelport, args, env=env, catch_exceptions=False)
                assert result.exit_code == 0, f"modelport {shlex.join(args)}:\n{result.output}"
                ran.append(" ".join(args[:2]))
            case _:
                pytest.fail(f"the README runs {words!r}, which this test does not know")
    assert "infer fraud-risk" in ran and "endpoints deploy" in ran and "keys create" in ran
    assert (tmp_path / "copy" / "model.onnx").is_file()


def test_the_quickstart_shows_the_console_and_three_ways_to_call_on_its_first_screen() -> None:
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line for line in block[1].splitlines() if line.strip()]
    assert [c.split()[0] for c in commands] == ["./scripts/demo.sh", "./scripts/test.sh"]
    first_screen = "\n".join(section.splitlines()[:40])
    assert "http://127.0.0.1:8080/console" in first_screen
    assert "modelport infer" in first_screen  # the CLI
    assert "/v2" in first_screen and "tritonclient" in first_screen
    assert "/v1" in first_screen and "`openai` SDK" in first_screen


def test_the_console_docs_and_the_demo_script_name_serves_default_address() -> None:
    from modelport.cli.serve import serve

    [port] = [p.default for p in serve.params if p.name == "port"]
    root = README.parents[0]
    assert f"http://127.0.0.1:{port}/console" in (root / "docs" / "console.md").read_text()
    script = (root / "scripts" / "demo.sh").read_text()
    assert f"http://127.0.0.1:{port}" in script and "/console" in script
