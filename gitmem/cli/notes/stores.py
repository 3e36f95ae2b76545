"""``gitmem store create|list|show|archive|delete``."""

from __future__ import annotations

import click

from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso


@main.group("store")
def store_group() -> None:
    """Memory stores: each one a bare Git repository."""


@store_group.command("create")
@click.argument("name")
@click.option("--description", "-d", default="")
@click.option("--meta", "metadata", multiple=True, metavar="KEY=VALUE", help="A metadata pair (repeatable).")
@workspace_option
@pass_context
@refusals
def store_create(ctx: Context, name: str, description: str, metadata: tuple[str, ...], workspace: str | None) -> None:
    """Create a store and print its id."""
    pairs = dict(item.split("=", 1) for item in metadata)
    info = ctx.gm.create_store(ctx.workspace_id(workspace, create=True), name, description, pairs)
    click.echo(info.id)


@store_group.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived stores.")
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def store_list(ctx: Context, include_archived: bool, as_json: bool, workspace: str | None) -> None:
    """List stores, newest first."""
    ws = ctx.workspace_id(workspace)
    stores, page = [], None
    while True:
        result = ctx.gm.list_stores(ws, include_archived=include_archived, limit=100, page=page)
        stores += result.items
        if not (page := result.next_page):
            break
    if as_json:
        emit_json(stores)
        return
    table(
        [[s.id, s.name, s.kind, iso(s.created_at), "archived" if s.archived_at else ""] for s in stores],
        ["ID", "NAME", "KIND", "CREATED", "STATE"],
    )


@store_group.command("show")
@click.argument("store_id")
@workspace_option
@pass_context
@refusals
def store_show(ctx: Context, store_id: str, workspace: str | None) -> None:
    """Show a store's metadata and where its repository is."""
    info = ctx.gm.get_store(ctx.workspace_id(workspace), store_id)
    emit_json({**info.__dict__, "repository": str(ctx.gm.repo_path(store_id))})


@store_group.command("archive")
@click.argument("store_id")
@workspace_option
@pass_context
@refusals
def store_archive(ctx: Context, store_id: str, workspace: str | None) -> None:
    """Archive a store (one way: it can then only be read)."""
    info = ctx.gm.archive_store(ctx.workspace_id(workspace), store_id)
    click.echo(f"archived {info.id} at {iso(info.archived_at)}" if info.archived_at else info.id)


@store_group.command("delete")
@click.argument("store_id")
@click.option("--yes", is_flag=True, help="Do not ask.")
@workspace_option
@pass_context
@refusals
def store_delete(ctx: Context, store_id: str, yes: bool, workspace: str | None) -> None:
    """Delete a store, its notes and all their history."""
    ws = ctx.workspace_id(workspace)
    ctx.gm.get_store(ws, store_id)
    if not yes:
        click.confirm(f"Delete {store_id} and all its history?", abort=True)
    ctx.gm.delete_store(ws, store_id)
    click.echo(f"deleted {store_id}")
