"""``gitmem serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import copy
import logging
import os
import sys
from typing import Any

import click

from gitmem.cli.base import Context, main, pass_context, refusals
from gitmem.setup import ensure_admin_key

log = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class QueryStringFilter(logging.Filter):
    """Drops the query string from uvicorn's access-log lines: a query may carry a key (``?api_key=``,
    even one the server refuses), and nothing in one is needed to read the log. Headers are never
    logged by uvicorn; this filter is the one place a request line is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (args[0], args[1], args[2].split("?", 1)[0] + "?…", *args[3:])
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with :class:`QueryStringFilter` on the access log (a dict, so
    every worker process applies it)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["no_query"] = {"()": f"{__name__}.QueryStringFilter"}
    config["handlers"]["access"]["filters"] = ["no_query"]
    return config


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
    uvicorn.run("api.app:app", host=host, port=port, workers=workers, log_level="info", log_config=log_config())
    sys.exit(0)
