"""``gitmem note put|get|rm|ls`` and ``gitmem versions``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

import click

from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.engine.audit.log import actor_name
from gitmem.engine.rewrite import redaction
from gitmem.errors import NotFound
from gitmem.model import SERVICE_ACCOUNT, Actor, MemoryPrefix


@main.group("note")
def note_group() -> None:
    """Notes in a store, addressed by path."""


@note_group.command("put")
@click.argument("store_id")
@click.argument("path")
@click.argument("file", type=click.File("r", encoding="utf-8"), default="-")
@click.option("--if-sha256", default=None, help="Only if the note's content still has this SHA-256.")
@workspace_option
@pass_context
@refusals
def note_put(
    ctx: Context, store_id: str, path: str, file: TextIO, if_sha256: str | None, workspace: str | None
) -> None:
    """Create or replace the note at PATH with FILE (default: standard input)."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    note, created = store.upsert(path, file.read(), expected_sha256=if_sha256)
    click.echo(f"{'created' if created else 'updated'} {note.path} {note.id} {note.version_id}")


@note_group.command("get")
@click.argument("store_id")
@click.argument("path")
@workspace_option
@pass_context
@refusals
def note_get(ctx: Context, store_id: str, path: str, workspace: str | None) -> None:
    """Print the note at PATH."""
    note = ctx.gm.store(ctx.workspace_id(workspace), store_id).get_by_path(path)
    sys.stdout.write(note.content or "")


@note_group.command("rm")
@click.argument("store_id")
@click.argument("path")
@click.option("--if-sha256", default=None)
@workspace_option
@pass_context
@refusals
def note_rm(ctx: Context, store_id: str, path: str, if_sha256: str | None, workspace: str | None) -> None:
    """Delete the note at PATH (its versions stay)."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    version = store.delete(store.get_by_path(path, with_content=False).id, expected_sha256=if_sha256)
    click.echo(f"deleted {path} {version.id}")


@note_group.command("ls")
@click.argument("store_id")
@click.argument("prefix", default="/")
@click.option("--depth", type=click.IntRange(0, 1), default=0)
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def note_ls(ctx: Context, store_id: str, prefix: str, depth: int, as_json: bool, workspace: str | None) -> None:
    """List notes under PREFIX (a folder path ending in '/')."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    items, page = [], None
    while True:
        result = store.list(path_prefix=prefix, depth=depth, limit=1000, page=page)
        items += result.items
        if not (page := result.next_page):
            break
    if as_json:
        emit_json(items)
        return
    table(
        [
            [i.path, "", "", ""]
            if isinstance(i, MemoryPrefix)
            else [i.path, str(i.content_size_bytes), i.id, iso(i.updated_at)]
            for i in items
        ],
        ["PATH", "BYTES", "ID", "UPDATED"],
    )


@main.command("versions")
@click.argument("store_id")
@click.option("--memory", "memory_id", default=None, help="Only this note's versions.")
@click.option("--operation", type=click.Choice(["created", "modified", "deleted"]), default=None)
@click.option("--limit", type=click.IntRange(1, 100), default=20)
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def versions(
    ctx: Context,
    store_id: str,
    memory_id: str | None,
    operation: str | None,
    limit: int,
    as_json: bool,
    workspace: str | None,
) -> None:
    """A store's versions, newest first."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    page = store.versions(memory_id=memory_id, operation=operation, limit=limit)  # type: ignore[arg-type]
    if as_json:
        emit_json(page.items)
        return
    table(
        [[iso(v.created_at), actor_name(v.created_by), v.operation, v.path or "(redacted)", v.id] for v in page.items],
        ["WHEN", "WHO", "OPERATION", "PATH", "VERSION"],
    )


@main.command("redact")
@click.argument("store_id")
@click.argument("version_id")
@click.option(
    "--as",
    "as_user",
    default=None,
    metavar="USER_ID",
    help="Name this user (of the workspace) as the redactor; by default, the gitmem service.",
)
@click.option(
    "--receipt",
    "receipt_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the signed erasure receipt to FILE, or - for standard output (gitmem audit receipt FILE checks it).",
)
@workspace_option
@pass_context
@refusals
def redact(
    ctx: Context, store_id: str, version_id: str, as_user: str | None, receipt_file: Path | None, workspace: str | None
) -> None:
    """Erase a version's path and content from every commit (it keeps its id, author and time), and say
    what its signed erasure receipt proves (--receipt saves it). The redaction names who made it: the
    service (``svac_gitmem``), or the user given with --as."""
    workspace_id = ctx.workspace_id(workspace)
    actor = SERVICE_ACCOUNT
    if as_user is not None:
        user = ctx.gm.catalog.credential(as_user)
        if user.kind != "user" or user.workspace_id != workspace_id:
            raise NotFound(f"user {as_user} not found")
        actor = Actor("user_actor", user.id)
    store = ctx.gm.store(workspace_id, store_id)
    version = redaction.redact(store, version_id, actor, ctx.gm.catalog.erasures)
    click.echo(f"redacted {version.id} at {iso(version.redacted_at)}" if version.redacted_at else version.id)
    from gitmem.engine.audit.rewrites import receipt_for

    try:
        document = receipt_for(store, version_id)
    except NotFound:  # a store opened without a signing key writes none
        return
    receipt = json.dumps(document, indent=1, sort_keys=True) + "\n"
    blobs = document["receipt"]["blobs"]
    gone = sum(not b["in_repository"] and b.get("fetch_refused", True) for b in blobs)
    click.echo(f"receipt: {gone} of {len(blobs)} blob(s) gone from the repository and refused to a fetch, signed")
    if receipt_file == Path("-"):
        click.echo(receipt, nl=False)
    elif receipt_file is not None:
        receipt_file.write_text(receipt)
