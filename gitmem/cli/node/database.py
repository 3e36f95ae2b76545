"""``gitmem migrate`` and ``gitmem db copy``: the catalog's schema, and moving a home's catalog to PostgreSQL."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitmem.cli.base import Context, connect, main, pass_context, refusals
from gitmem.db import SQLiteDatabase
from gitmem.db.migrations import Migration
from gitmem.engine.gitmem import Gitmem
from gitmem.home_tables import catch_up_index, copy_catalog, count_rows, migrate_home, pending_steps


@main.command("migrate")
@click.option("--check", is_flag=True, help="Only tell whether the schema is behind (exit 1 if it is).")
@pass_context
@refusals
def migrate(ctx: Context, check: bool) -> None:
    """Create or upgrade the catalog's schema (GITMEM_DATABASE, else the home's SQLite file)."""
    db = ctx.gm.database
    if check:
        missing = pending_steps(db)
        for step in missing:
            click.echo(f"pending: {step.component} {step.version}")
        click.echo(f"{db.display_name}: {'behind by ' + str(len(missing)) + ' steps' if missing else 'up to date'}")
        sys.exit(1 if missing else 0)

    def applied(step: Migration) -> None:
        click.echo(f"applied {step.component} {step.version}", err=True)

    done = migrate_home(db, applied)
    click.echo(f"{db.display_name}: up to date ({len(done)} steps applied)")


@main.group("db")
def db_group() -> None:
    """The catalog's database."""


@db_group.command("copy")
@click.option(
    "--from",
    "source_text",
    required=True,
    metavar="sqlite|HOME",
    help="`sqlite`: this home's SQLite catalog (--home, else GITMEM_HOME); or the folder of another home.",
)
@click.option("--to", "target", required=True, help="postgresql://user:password@host:5432/gitmem")
@pass_context
@refusals
def copy(ctx: Context, source_text: str, target: str) -> None:
    """Copy a home's catalog (SQLite) into an empty PostgreSQL database; repositories stay where they are."""
    source = ctx.home if source_text.strip().lower() == "sqlite" else Path(source_text)
    if not source.is_dir():
        raise click.UsageError(f"--from: {source} is not a folder (name a home, or `sqlite` for this one)")
    if not (source / "catalog.sqlite3").is_file():
        raise click.UsageError(f"{source} holds no catalog.sqlite3")
    from_db = SQLiteDatabase(source / "catalog.sqlite3")
    to_db = connect(target, source, "--to")
    try:
        migrate_home(from_db)  # an older home may lack tables that are empty anyway
        total = count_rows(from_db)
        with click.progressbar(length=total, label="copying the catalog", file=sys.stderr, show_pos=True) as bar:
            report = copy_catalog(from_db, to_db, lambda _table, rows: bar.update(rows))
        for table, rows in report.rows.items():
            if rows:
                click.echo(f"{table}: {rows} rows")
    finally:
        from_db.close()
        to_db.close()
    # The indexes are a cache of Git: each store's is built where the copied catalog says indexes live.
    node = Gitmem.open(source, database=target)
    try:
        with click.progressbar(report.stores, label="indexing", file=sys.stderr, show_pos=True) as stores:
            for info in stores:
                catch_up_index(node, info)
    finally:
        node.close()
    click.echo(f"{len(report.stores)} stores indexed")
