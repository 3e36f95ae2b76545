"""``gitmem serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from gitmem import json_log
from gitmem.cli.base import Context, connect, main, pass_context, refusals
from gitmem.config.values import Serving
from gitmem.engine.first_run import ensure_admin_key
from gitmem.home_tables import migrate_home
from gitmem.json_log import LogFormat

log = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class DropQueryString(logging.Filter):
    """Keeps query strings out of uvicorn's access log: a client may put a secret there (``?api_key=``),
    and uvicorn logs the path with its query. Headers (``x-api-key``, ``Authorization``) are never in
    the access line."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def uvicorn_options(log_format: LogFormat = "text", log_level: str = "INFO") -> dict[str, Any]:
    """How ``gitmem serve`` runs uvicorn (the HTTP benchmark runs its naive server the same way).

    The fast HTTP parser (httptools) and event loop (uvloop) when installed, uvicorn's pure-Python
    ones otherwise; an access log without query strings, or in JSON the app's own (:mod:`gitmem.json_log`);
    uvicorn's own loggers at ``log_level``, as the app's are (uvicorn sets their levels after
    ``log_config``: given ``info`` whatever the setting, it wrote a line a request at WARNING)."""
    from uvicorn.config import LOGGING_CONFIG

    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config.setdefault("filters", {})["drop_query"] = {"()": f"{__name__}.DropQueryString"}
    log_config["handlers"]["access"]["filters"] = ["drop_query"]
    return {
        "loop": "uvloop" if _installed("uvloop") else "asyncio",
        "http": "httptools" if _installed("httptools") else "h11",
        "log_config": json_log.uvicorn_config(log_config, log_format, log_level),
        "access_log": log_format != "json",
        "log_level": log_level.lower(),
    }


@contextlib.contextmanager
def metrics_folder(serving: Serving) -> Iterator[None]:
    """With metrics on, the folder every worker keeps its values in (``GITMEM_METRICS_DIR``, emptied
    now: values of an earlier run would be counted again; else a fresh one in the temp dir, removed
    at the end), handed to the workers in their environment."""
    if not serving.metrics_token:
        yield
        return
    given = serving.metrics_dir
    folder = given if given is not None else Path(tempfile.mkdtemp(prefix="gitmem-metrics-"))
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink()
    os.environ["GITMEM_METRICS_DIR"] = str(folder)
    try:
        yield
    finally:
        if given is None:
            shutil.rmtree(folder, ignore_errors=True)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _raise_open_files() -> None:
    """Raise the soft limit on open files to the hard one (the workers inherit it) and say so: the
    bounded cache of open stores is sized from it (gitmem/engine/open_stores.py)."""
    from gitmem.db.descriptors import raise_descriptor_limit

    limits = raise_descriptor_limit()
    if limits is None:
        return
    before, after = limits
    if after > before:
        click.echo(f"Open files: soft limit raised from {before} to {after} (the hard limit)", err=True)
    else:
        click.echo(f"Open files: limit {after} (the hard limit; open stores are sized to fit it)", err=True)


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option(
    "--database",
    default=None,
    metavar="URL",
    help="PostgreSQL for the catalog, shared by every node (default: $GITMEM_DATABASE, else SQLite in the home).",
)
@pass_context
@refusals
def serve(ctx: Context, host: str, port: int, workers: int, database: str | None) -> None:
    """Serve the API. On an empty home, create a workspace and an admin key first."""
    import uvicorn

    if (ctx.home / "RESTORING").exists():  # gitmem.backup.restore.MARKER: erasures may not be applied yet
        click.echo(f"gitmem: {ctx.home} holds a restore that has not finished; remove it and restore again", err=True)
        sys.exit(1)
    _raise_open_files()
    if database is not None:
        connect(database, ctx.home, "--database").close()  # one line and exit 2 if it is unusable
        os.environ["GITMEM_DATABASE"] = database  # for the workers and the push hooks they run
    if ctx.gm.database.dialect == "postgresql":
        # Under the migration lock: nodes started together apply each step once (gitmem/db/migrations.py).
        migrate_home(ctx.gm.database)

    created = ensure_admin_key(ctx.gm)
    if created is not None:
        click.echo(f"Created workspace 'default' and an admin key; it is in {created}", err=True)
        click.echo(f"  export GITMEM_API_KEY=$(cat {created})", err=True)
    if host not in LOOPBACK:
        click.echo(f"Serving on {host}: every request needs a key (there is no unauthenticated mode).", err=True)
    os.environ["GITMEM_HOME"] = str(ctx.home.resolve())
    serving = ctx.config.serving
    click.echo(f"gitmem serving {ctx.home} on http://{host}:{port}", err=True)
    with metrics_folder(serving):
        uvicorn.run(
            "gitmem.api.app:create_app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            # The requests in flight get this long after SIGTERM (and its drain: api/draining.py).
            timeout_graceful_shutdown=math.ceil(serving.stop_timeout),
            **uvicorn_options(serving.log_format, serving.log_level or "INFO"),
        )
    sys.exit(0)
