"""How the CLI prints: ``--json`` before or after the verb on every command, and tables
that cut nothing when piped (or with ``--wide``)."""

from __future__ import annotations

import io
import json

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from modelport.cli import modelport
from modelport.cli.terminal import Terminal
from tests.cli.test_client_cli import cli, ok
from tests.client.platform import MODEL, Platform, platform

__all__ = ["platform"]  # the fixture, imported from the client tests

LONG = "acme/a-classifier-whose-name-is-longer-than-any-terminal-column-would-show"


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
    return found


@pytest.mark.parametrize("path", _commands(modelport), ids=" ".join)
def test_every_command_takes_json_and_wide_after_its_verb(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(modelport, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "--json" in result.output and "--wide" in result.output


def test_json_before_or_after_the_verb_is_the_same_answer(platform: Platform) -> None:
    before = json.loads(ok(platform, "--json", "models", "list"))
    after = json.loads(ok(platform, "models", "list", "--json"))
    between = json.loads(ok(platform, "models", "--json", "list"))
    assert before == after == between
    assert [m["model"] for m in after["items"]] == [MODEL]
    shown = json.loads(ok(platform, "models", "show", MODEL, "--json"))
    assert shown["model"] == MODEL


def test_a_piped_table_cuts_no_name(platform: Platform) -> None:
    platform.admin.models.create(LONG, task="classification", license="MIT")
    out = ok(platform, "models", "list")
    assert LONG in out and "…" not in out
    assert any(len(line) > 80 for line in out.splitlines())  # wider than rich's default


def _table(wide: bool) -> str:
    terminal = Terminal(wide=wide)
    screen = io.StringIO()
    terminal.out = Console(file=screen, force_terminal=True, width=40, soft_wrap=True)
    terminal.table(["model", "id"], [[LONG, "e2ec8670b96d6bbc" * 4]])
    return screen.getvalue()


def test_on_a_terminal_cells_fit_the_screen_unless_wide() -> None:
    fitted = _table(wide=False)
    assert LONG not in fitted and "…" in fitted
    wide = _table(wide=True)
    assert LONG in wide and "e2ec8670b96d6bbc" * 4 in wide and "…" not in wide


def test_wide_after_the_verb_reaches_the_terminal(platform: Platform) -> None:
    result = cli(platform.server.url, "models", "list", "--wide")
    assert result.exit_code == 0 and MODEL in result.output
