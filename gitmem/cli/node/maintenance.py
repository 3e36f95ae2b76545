"""``gitmem reindex``, ``gitmem fsck`` and ``gitmem pack``."""

from __future__ import annotations

import sys

import click

from gitmem.cli.base import Context, main, pass_context, refusals, workspace_option
from gitmem.engine.fsck import check_home_store, orphan_folders
from gitmem.git.pack import packing
from gitmem.git.pack.packing import loose_objects
from gitmem.model import StoreInfo


def _stores(ctx: Context, store_id: str | None, workspace: str | None) -> list[StoreInfo]:
    if store_id is not None:
        return [ctx.gm.get_store(ctx.workspace_id(workspace), store_id)]
    return ctx.gm.all_stores()


@main.command("reindex")
@click.argument("store_id", required=False)
@workspace_option
@pass_context
@refusals
def reindex(ctx: Context, store_id: str | None, workspace: str | None) -> None:
    """Rebuild a store's index (or every store's) from its history alone."""
    stores = _stores(ctx, store_id, workspace)
    with click.progressbar(stores, label="reindexing", file=sys.stderr, show_pos=True) as bar:
        for info in bar:
            with ctx.gm.leases():  # one store open at a time, however many there are
                ctx.gm.store(info.workspace_id, info.id).index.rebuild()
    for info in stores:
        with ctx.gm.leases():
            count, size = ctx.gm.store(info.workspace_id, info.id).index.totals()
        click.echo(f"{info.id}: {count} notes, {size} bytes")


@main.command("fsck")
@click.argument("store_id", required=False)
@workspace_option
@pass_context
@refusals
def fsck(ctx: Context, store_id: str | None, workspace: str | None) -> None:
    """Git's fsck plus index-versus-history consistency; exit 1 if anything is wrong."""
    bad = 0
    for info in _stores(ctx, store_id, workspace):
        report = check_home_store(ctx.gm, info)
        click.echo(f"{info.id}: {'ok' if report.ok else 'PROBLEMS'}")
        for problem in report.problems:
            click.echo(f"  {problem}")
        bad += not report.ok
    if store_id is None:
        for orphan in orphan_folders(ctx.gm):
            click.echo(
                f"{orphan.name}: PROBLEMS\n  no store in the catalog owns this folder (left by a failed"
                f" create?); remove it: rm -rf {orphan}"
            )
            bad += 1
    if bad:
        sys.exit(1)


@main.command("pack")
@click.argument("store_id", required=False)
@workspace_option
@pass_context
@refusals
def pack(ctx: Context, store_id: str | None, workspace: str | None) -> None:
    """Pack loose objects into one pack per store."""
    for info in _stores(ctx, store_id, workspace):
        path = ctx.gm.repo_path(info.id)
        before = loose_objects(path).count
        packing.pack(path, "full")
        click.echo(f"{info.id}: packed {before} loose objects")
