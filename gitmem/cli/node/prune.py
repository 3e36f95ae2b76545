"""``gitmem prune [STORE] [--dry-run] [--workspace W]``: apply retention now (the server also runs it on a
schedule) and physically delete what the rewritten history no longer holds."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gitmem.cli.base import Context, main, pass_context, refusals, size_text, table, workspace_option
from gitmem.engine.rewrite.retention import KEEP_ALL, SETTING, PruneReport, prune_info, retention_days
from gitmem.errors import NotFound
from gitmem.model import StoreInfo

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem


def _status(report: PruneReport) -> str:
    if report.error:
        return f"failed: {report.error}"
    if report.blobs_unpurged:
        return f"{len(report.blobs_unpurged)} blobs still readable"
    if report.skipped:
        return report.skipped
    if report.dry_run:
        return "dry run"
    return "pruned" if report.dropped else "nothing to drop"


def _stores_to_prune(gm: Gitmem, store_id: str | None, workspace: str | None) -> list[StoreInfo]:
    """STORE, or every store (of the workspace named, if one is)."""
    workspace_id = None
    if workspace is not None:
        ws = gm.catalog.workspace_by_name(workspace)
        if ws is None:
            raise NotFound(f"no workspace named {workspace!r}")
        workspace_id = ws.id
    if store_id is not None:
        info = gm.catalog.store(store_id)  # NotFound if there is no such store
        if workspace_id is not None and info.workspace_id != workspace_id:
            raise NotFound(f"memory store {store_id} not found")
        return [info]
    return [s for s in gm.all_stores() if workspace_id is None or s.workspace_id == workspace_id]


def _print_reports(reports: list[PruneReport], stores: list[StoreInfo], *, dry_run: bool) -> None:
    """One row a store: what retention dropped and purged, the size before and after, and how it went."""
    names = {s.id: s.name for s in stores}
    rows = [
        [
            r.store_id,
            names.get(r.store_id, ""),
            r.retention,
            str(r.versions_before),
            str(len(r.dropped)),
            str(r.versions_kept if r.versions_before else ""),
            str(len(r.blobs_purged)),
            size_text(r.bytes_before),
            size_text(r.bytes_after),
            f"{r.seconds:.2f}",
            _status(r),
        ]
        for r in reports
    ]
    dropped = "WOULD DROP" if dry_run else "DROPPED"
    purged = "BLOBS TO PURGE" if dry_run else "BLOBS PURGED"
    table(
        rows,
        [
            "STORE",
            "NAME",
            "RETENTION",
            "VERSIONS",
            dropped,
            "KEPT",
            purged,
            "SIZE BEFORE",
            "SIZE AFTER",
            "SECONDS",
            "STATUS",
        ],
    )


@main.command("prune")
@click.argument("store_id", metavar="[STORE]", required=False)
@click.option("--dry-run", is_flag=True, help="Report what would go; change nothing.")
@workspace_option
@pass_context
@refusals
def prune(ctx: Context, store_id: str | None, dry_run: bool, workspace: str | None) -> None:
    """Drop expired versions (retention_days, 30 by default; keep-all keeps every one), always keeping the
    two newest versions of each note, then delete the dropped content from the repository for good.

    Without STORE, every store (of the workspace, with --workspace). Clones taken before see a forced
    update of main."""
    gm = ctx.gm
    stores = _stores_to_prune(gm, store_id, workspace)
    reports: list[PruneReport] = []
    with click.progressbar(
        stores,
        label="dry run" if dry_run else "pruning",
        file=sys.stderr,
        item_show_func=lambda s: s.id if s is not None else None,
    ) as bar:
        for info in bar:
            reports.append(prune_info(gm, info, dry_run=dry_run))

    _print_reports(reports, stores, dry_run=dry_run)
    total = sum(len(r.dropped) for r in reports)
    click.echo(f"{len(reports)} stores, {total} versions {'would be ' if dry_run else ''}dropped", err=True)
    if any(not r.ok for r in reports):
        sys.exit(1)


@main.command("retention")
@click.argument("period", required=False)
@workspace_option
@pass_context
@refusals
def retention(ctx: Context, period: str | None, workspace: str | None) -> None:
    """Show or set how long versions live: a number of days, or keep-all."""
    ws = ctx.workspace_id(workspace)
    if period is not None:
        value: int | str = KEEP_ALL if period == KEEP_ALL else _days(period)
        ctx.gm.catalog.update_workspace_settings(ws, **{SETTING: value})
    days = retention_days(ctx.gm.catalog.workspace(ws).settings)
    click.echo("keep-all" if days is None else f"{days} days")


def _days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise click.BadParameter("a whole number of days (at least 1), or keep-all", param_hint="PERIOD")
    return int(text)
