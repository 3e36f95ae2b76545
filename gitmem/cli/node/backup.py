"""``gitmem backup DEST``, ``gitmem backup prune DEST --older-than 30d`` and the backup half of
``gitmem restore`` (``gitmem restore SRC --home NEW``, dispatched from :mod:`gitmem.cli.notes.find`)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import click

from gitmem.cli.base import Context, default_command, main, pass_context, refusals, size_text


def _quiet() -> bool:
    """No progress bar where nobody watches it (a pipe, a log)."""
    return not sys.stderr.isatty()


def parse_age(text: str) -> dt.timedelta:
    from gitmem.engine.audit.log import parse_span  # the spans `gitmem log --since` reads

    span = parse_span(text)
    if span is None:
        raise click.BadParameter(f"{text!r}: a number and a unit, e.g. 30d, 12h, 90m, 2w")
    return span


@main.group("backup", cls=default_command("create"), invoke_without_command=False)
def backup() -> None:
    """Back up the whole home into DEST while it serves; drop old backups (prune)."""


@backup.command("create")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--lock-timeout",
    type=click.FloatRange(0, 3600),
    default=300.0,
    show_default=True,
    help="Seconds to wait for a store's history rewrite (retention, redaction) to finish.",
)
@pass_context
@refusals
def create(ctx: Context, dest: Path, lock_timeout: float) -> None:
    """A new backup under DEST: the catalog at one moment, the key ring as it is (never the master key)
    and a Git bundle a store; a store whose refs did not move since the last backup there is linked,
    not copied."""
    from gitmem.backup.take import take_backup

    bar: Any = None

    def on_total(n: int) -> None:
        nonlocal bar
        bar = click.progressbar(length=n, label="backing up", file=sys.stderr, show_pos=True, hidden=_quiet())
        bar.__enter__()

    try:
        report = take_backup(
            ctx.gm, dest, on_total=on_total, on_store=lambda _id, _copy: bar.update(1), lock_timeout=lock_timeout
        )
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    m = report.manifest
    catalog = (report.folder / "catalog.sqlite3").stat().st_size
    empty = len(m.stores) - len(report.copied) - len(report.unchanged)
    since = report.previous.name if report.previous else "none before"
    click.echo(f"backup {report.folder}")
    click.echo(
        f"  {len(m.stores)} stores: {len(report.copied)} copied ({size_text(m.copied_bytes)}),"
        f" {len(report.unchanged)} unchanged since {since} (linked), {empty} empty"
    )
    keys = "copied as it is (wrapped)" if m.keys else "none (no encrypted store)"
    click.echo(f"  catalog {size_text(catalog)} ({m.database}), key ring {keys}")
    click.echo("  master key: not written (no backup holds it; keep it apart from the backups)")
    if report.gone:
        click.echo(f"  {len(report.gone)} stores deleted while the backup ran: left out")


@backup.command("prune")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option("--older-than", "older_than", required=True, help="Drop backups begun longer ago than this (30d, 12h).")
@pass_context
@refusals
def prune(ctx: Context, dest: Path, older_than: str) -> None:
    """Drop the backups under DEST older than --older-than (never the newest), and the wrapped keys of
    stores deleted since from every backup left."""
    from gitmem.backup.prune import forget_destroyed_keys, prune_backups

    dropped = prune_backups(dest, parse_age(older_than))
    forgotten = forget_destroyed_keys(dest, ctx.gm.catalog.erasures)
    for folder in dropped:
        click.echo(f"dropped {folder.name}")
    click.echo(f"{len(dropped)} backups dropped; {forgotten} destroyed keys removed from the backups kept")


def restore_backup(
    ctx: Context, src: Path, home: Path, master_key_file: Path | None, erasures_from: tuple[str, ...]
) -> None:
    """``gitmem restore SRC --home NEW``."""
    from gitmem.backup.layout import read_manifest, resolve
    from gitmem.backup.restore import restore_home
    from gitmem.config.home import master_key, signing_key

    total = len(read_manifest(resolve(src)).stores)
    with click.progressbar(length=total, label="restoring", file=sys.stderr, show_pos=True, hidden=_quiet()) as bar:
        report = restore_home(
            src,
            home,
            database=ctx.config.storage.database,
            master_key=master_key(ctx.config.keys),
            master_key_file=master_key_file,
            signing_key=signing_key(ctx.config.keys),
            erasures_from=erasures_from,
            fsync=ctx.config.durability.mode,
            on_store=lambda _id: bar.update(1),
        )
    erased = report.erased
    click.echo(f"restored {report.stores} stores from {report.backup.name} into {home} in {report.seconds:.1f} s")
    click.echo(
        f"  erased again since the backup: {len(erased.applied)} erasures ({erased.versions_dropped} versions"
        f" dropped, {erased.versions_redacted} redacted, {erased.conflicts_erased} conflicts,"
        f" {len(erased.stores_deleted)} stores deleted)"
    )
    click.echo(f"  keys and tokens revoked since the backup, revoked again: {len(erased.revoked)}")
    read = ", ".join(erased.sources) or "none later than the backup (see docs/backup.md)"
    click.echo(f"  erasure ledgers read: {read}")
    if report.manifest.database == "postgresql" and not any(s.startswith("postgresql") for s in erasures_from):
        click.echo(
            "  note: the backed-up home's catalog is in PostgreSQL; name it with --erasures-from postgresql://..."
            " to erase again what was erased after the backup"
        )
    for problem in erased.problems:
        click.echo(f"  PROBLEM {problem}")
    for store_id, problems in sorted(report.problems.items()):
        click.echo(f"{store_id}: PROBLEMS")
        for problem in problems:
            click.echo(f"  {problem}")
    if not report.ok:
        click.echo("gitmem: the restored home is not clean; it is marked RESTORING and should not serve", err=True)
        sys.exit(1)
    click.echo("  gitmem fsck: every store ok")
