"""``gitmem serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import logging
import os
import sys

import click

from gitmem.cli.base import Context, main, pass_context, refusals
from gitmem.setup import ensure_admin_key

log = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@pass_context
@refusals
def serve(ctx: Context, host: str, port: int, workers: int) -> None:
    """Serve the API. On an empty home, create a workspace and an admin key first."""
    import uvicorn

    created = ensure_admin_key(ctx.gm)
    if created is not None:
        click.echo(f"Created workspace 'default' and an admin key; it is in {created}", err=True)
        click.echo(f"  export GITMEM_API_KEY=$(cat {created})", err=True)
    if host not in LOOPBACK:
        click.echo(f"Serving on {host}: every request needs a key (there is no unauthenticated mode).",
                   err=True)
    os.environ["GITMEM_HOME"] = str(ctx.home.resolve())
    click.echo(f"gitmem serving {ctx.home} on http://{host}:{port}", err=True)
    uvicorn.run("api.app:app", host=host, port=port, workers=workers, log_level="info")
    sys.exit(0)
