"""``gitmem settings``: the ``GITMEM_*`` settings in effect, or (``--markdown``) the table of docs/settings.md."""

from __future__ import annotations

import click

from gitmem.cli.base import main
from gitmem.config.names import PREFIX
from gitmem.config.settings import load_settings
from gitmem.config.table import markdown_table


@main.command("settings", hidden=True)
@click.option("--markdown", is_flag=True, help="Print the table of every setting (docs/settings.md).")
def settings(markdown: bool) -> None:
    """Show the settings in effect (secrets masked)."""
    if markdown:
        click.echo(markdown_table(), nl=False)
        return
    for name, value in load_settings().model_dump().items():
        if value is not None and value != "":
            click.echo(f"{PREFIX}{name}={value}")
