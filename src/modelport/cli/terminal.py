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

WIDE = 1_000_000
"""The width tables are laid out in when nothing may be cut: more than any row needs."""


class Terminal:
    def __init__(self, *, as_json: bool = False, wide: bool = False) -> None:
        self.as_json = as_json
        self.wide = wide
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
        if self.wide or not self.out.is_terminal:
            # Piped (or --wide): a cell cut to the screen's width is an id nobody can copy.
            # Each row on one line, as long as it needs (a table is only as wide as its
            # widest row).
            for column in table.columns:
                column.no_wrap = True
            Console(
                file=self.out.file,
                width=WIDE,
                soft_wrap=True,
                force_terminal=self.out.is_terminal,
                no_color=self.out.no_color,
            ).print(table)
            return
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
