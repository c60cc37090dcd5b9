"""``modelport datasets``: publish datasets, list and search them."""

from __future__ import annotations

import click

from modelport.cli.datasets.list import list_datasets
from modelport.cli.datasets.push import push
from modelport.cli.datasets.search import search_datasets


@click.group()
def datasets() -> None:
    """Datasets: versioned split files with a task, columns and a license."""


datasets.add_command(push)
datasets.add_command(list_datasets)
datasets.add_command(search_datasets)
