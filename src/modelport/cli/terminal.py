"""All CLI output goes through one Terminal (rich-backed)."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table


class Terminal:
    def __init__(self, *, as_json: bool = False) -> None:
        self.as_json = as_json
        self.out = Console(soft_wrap=True)
        self.err = Console(stderr=True, soft_wrap=True)

    def info(self, text: str) -> None:
        if not self.as_json:
            self.out.print(text, highlight=False)

    def success(self, text: str) -> None:
        if not self.as_json:
            self.out.print(f"[green]{text}[/green]", highlight=False)

    def warn(self, text: str) -> None:
        self.err.print(f"[yellow]{text}[/yellow]", highlight=False)

    def json(self, data: Any) -> None:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        sys.stdout.flush()

    def table(self, columns: list[str], rows: list[list[Any]], title: str | None = None) -> None:
        table = Table(title=title)
        for col in columns:
            table.add_column(col)
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        self.out.print(table)

    def progress(self) -> Progress:
        """A byte-transfer progress bar (hidden in --json mode)."""
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self.err,
            disable=self.as_json,
        )

    def steps(self) -> Progress:
        """A progress bar counting steps (a job's stages; hidden in --json mode)."""
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=self.err,
            disable=self.as_json,
        )

    def abort(self, text: str, code: int = 1) -> NoReturn:
        self.err.print(f"[red]error:[/red] {escape(text)}", highlight=False)
        raise SystemExit(code)
