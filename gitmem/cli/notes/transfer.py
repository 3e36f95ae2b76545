"""``gitmem export`` and ``gitmem import``: a store's whole history out to an archive, and in from an
archive, another server (through the ``anthropic`` SDK) or a folder of Markdown files
(docs/import-export.md). A thin shell over :mod:`gitmem.engine.transfer`."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from gitmem.cli.base import Context, main, pass_context, refusals, workspace_option


class _Bars:
    """A progress bar on standard error for each phase the library reports (a count where the total is
    not known yet: listing, reading), when standard error is a terminal (a log gets the summary only)."""

    def __init__(self) -> None:
        self._shows = sys.stderr.isatty()
        self._phase: str | None = None
        self._bar: Any = None
        self._counting = False
        self._shown = 0

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if not self._shows:
            return
        if phase != self._phase:
            self.close()
            self._phase, self._shown = phase, 0
        if total is None:  # not known yet: a count on one line
            click.echo(f"\r{phase} {done}", file=sys.stderr, nl=False)
            self._counting = True
            return
        if self._bar is None:
            self.close()
            self._bar = click.progressbar(length=total, label=phase, file=sys.stderr, show_pos=True)
            self._bar.__enter__()
        self._bar.update(done - self._shown)
        self._shown = done

    def close(self) -> None:
        if self._counting:
            click.echo("", file=sys.stderr)
            self._counting = False
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __enter__(self) -> _Bars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@main.command("export")
@click.argument("store_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the archive (default: STORE_ID.tar.gz here).",
)
@click.option("--decrypted", is_flag=True, help="An encrypted store: write its notes decrypted into the archive.")
@workspace_option
@pass_context
@refusals
def export(ctx: Context, store_id: str, output: Path | None, decrypted: bool, workspace: str | None) -> None:
    """Write STORE_ID's whole history to one archive: a Git bundle and its versions as JSON lines."""
    from gitmem.engine.transfer.archive import export_store

    gm = ctx.gm
    info = gm.get_store(ctx.workspace_id(workspace), store_id)
    with _Bars() as bars:
        report = export_store(
            gm.store(info.workspace_id, info.id, info=info),
            info,
            output or Path(f"{store_id}.tar.gz"),
            bars,
            decrypted=decrypted,
        )
    click.echo(f"exported {report.versions} versions of {report.notes} notes to {report.path}")


@main.command("import")
@click.argument("source")
@click.option(
    "--from-api",
    "base_url",
    default=None,
    metavar="BASE_URL",
    help="Import the store SOURCE of the server at BASE_URL (any the anthropic SDK speaks to).",
)
@click.option(
    "--api-key-env",
    default="ANTHROPIC_API_KEY",
    show_default=True,
    metavar="VAR",
    help="With --from-api: the variable that holds the server's API key.",
)
@click.option("--mtime", is_flag=True, help="A folder: date each file's version by its modification time.")
@click.option("--into", default=None, metavar="STORE_ID", help="Import into this empty store, not a new one.")
@click.option("--name", default=None, help="The new store's name (default: the source's).")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=500,
    show_default=True,
    help="Versions a commit batch (one pack, one move of main).",
)
@workspace_option
@pass_context
@refusals
def import_(
    ctx: Context,
    source: str,
    base_url: str | None,
    api_key_env: str,
    mtime: bool,
    into: str | None,
    name: str | None,
    batch_size: int,
    workspace: str | None,
) -> None:
    """Import SOURCE with its history into a new (or empty) store: a `gitmem export` archive, a folder
    of Markdown files, or with --from-api a store's id on another server. Run it again to resume."""
    from gitmem.engine.transfer.replay import run_import

    gm = ctx.gm
    workspace_id = ctx.workspace_id(workspace, create=True)
    with _Bars() as bars, contextlib.ExitStack() as owned:
        found = _source(source, base_url, api_key_env, mtime, owned)
        report = run_import(gm, workspace_id, found, into=into, name=name, progress=bars, batch=batch_size)
    for refused in report.refused:
        click.echo(f"refused {refused.path}: {refused.reason}", err=True)
    again = f" ({report.skipped} were there from an earlier run)" if report.skipped else ""
    refused_files = f"; {len(report.refused)} files refused" if report.refused else ""
    click.echo(f"imported {report.versions} versions into {report.store_id}{again}{refused_files}")


def _source(source: str, base_url: str | None, api_key_env: str, mtime: bool, owned: contextlib.ExitStack) -> Any:
    """The import's source; one that holds a connection (``--from-api``) is closed when ``owned`` is."""
    if base_url is not None:
        from gitmem.engine.transfer.api_source import ApiSource

        key = os.environ.get(api_key_env)
        if not key:
            raise click.UsageError(f"--api-key-env {api_key_env}: that variable is not set")
        return owned.enter_context(ApiSource.connect(base_url, key, source))
    path = Path(source)
    if path.is_dir():
        from gitmem.engine.transfer.folder import FolderSource

        return FolderSource(path, use_mtime=mtime)
    if not path.is_file():
        raise click.UsageError(f"{source} is neither an archive nor a folder (with --from-api, a store's id)")
    from gitmem.engine.transfer.archive import ArchiveSource

    return ArchiveSource(path)
