"""``gitmem review``: what agents wrote since the last review, and the steward's actions on it.

``gitmem review STORE`` shows the pending versions like ``git log -p`` (oldest first, the order to
review them in); ``approve``, ``revert``, ``enable`` and ``disable`` act on a store.
"""

from __future__ import annotations

import click

from gitmem.agents.review.review import MAX_PENDING_PAGE, Reviews, current_mark, describe_mark
from gitmem.cli.base import Context, default_command, emit_json, main, pass_context, refusals, workspace_option
from gitmem.cli.notes.find import _styled
from gitmem.clock import iso
from gitmem.engine.store.diff import unified_lines
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound
from gitmem.model import Actor


@main.group("review", cls=default_command("show"))
def review() -> None:
    """A steward's review of what was written: STORE (show what is pending), approve, revert, enable,
    disable."""


def _reviewer(ctx: Context, workspace_id: str, as_user: str | None) -> Actor | None:
    """The user named with --as, else the service itself (as every write from the CLI)."""
    if as_user is None:
        return None
    user = ctx.gm.catalog.credential(as_user)
    if user.kind != "user" or user.workspace_id != workspace_id or user.revoked_at is not None:
        raise NotFound(f"user {as_user} not found")
    return Actor("user_actor", user.id)


def _acting(
    ctx: Context, workspace: str | None, store_id: str, as_user: str | None
) -> tuple[Reviews, MemoryStore, Actor | None]:
    workspace_id = ctx.workspace_id(workspace)
    return ctx.parts.reviews, ctx.gm.store(workspace_id, store_id), _reviewer(ctx, workspace_id, as_user)


as_option = click.option(
    "--as",
    "as_user",
    default=None,
    metavar="USER_ID",
    help="Name this user (of the workspace) as the reviewer; by default, gitmem itself.",
)


@review.command("show")
@click.argument("store_id")
@click.option(
    "--limit", type=click.IntRange(1, MAX_PENDING_PAGE), default=MAX_PENDING_PAGE, help="At most this many versions."
)
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def show(ctx: Context, store_id: str, limit: int, as_json: bool, workspace: str | None) -> None:
    """The versions written since the last review, each with its diff."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    reviews = ctx.parts.reviews
    page = reviews.pending(store, limit=limit)
    if as_json:
        emit_json({"mark": current_mark(store), "pending": [c.version for c in page.items]})
        return
    count = reviews.pending_count(store)
    click.echo(f"{store_id}: {describe_mark(current_mark(store))}; {count} pending")
    for change in page.items:
        v = change.version
        who = v.created_by.id if v.created_by else "service"
        click.echo()
        click.echo(click.style(f"version {v.id}", fg="yellow"))
        click.echo(f"Author: {who}\nDate:   {iso(v.created_at)}\n\n    {v.operation} {v.path or '(redacted)'}\n")
        for line in unified_lines(change.diff):
            click.echo(_styled(line))
    if count > len(page.items):
        click.echo(f"\n... and {count - len(page.items)} more; approve these to see the rest")


@review.command("approve")
@click.argument("store_id")
@click.argument("through_version_id")
@as_option
@workspace_option
@pass_context
@refusals
def approve(ctx: Context, store_id: str, through_version_id: str, as_user: str | None, workspace: str | None) -> None:
    """Approve THROUGH_VERSION_ID and every version before it."""
    reviews, store, actor = _acting(ctx, workspace, store_id, as_user)
    click.echo(describe_mark(reviews.approve(store, through_version_id, actor)))


@review.command("revert")
@click.argument("store_id")
@click.argument("version_id")
@as_option
@workspace_option
@pass_context
@refusals
def revert(ctx: Context, store_id: str, version_id: str, as_user: str | None, workspace: str | None) -> None:
    """Undo VERSION_ID's change with a new version (the change stays in history)."""
    reviews, store, actor = _acting(ctx, workspace, store_id, as_user)
    version = reviews.revert(store, version_id, actor)
    click.echo(f"reverted {version_id}: {version.operation} {version.path} {version.id}")


@review.command("enable")
@click.argument("store_id")
@click.option("--read-approved-only", is_flag=True, help="Tasks read only the approved state of the store.")
@as_option
@workspace_option
@pass_context
@refusals
def enable(ctx: Context, store_id: str, read_approved_only: bool, as_user: str | None, workspace: str | None) -> None:
    """Put STORE under review: what is there now counts as approved, later versions are pending."""
    workspace_id = ctx.workspace_id(workspace)
    settings = ctx.parts.reviews.configure(
        workspace_id,
        store_id,
        enabled=True,
        read_approved_only=True if read_approved_only else None,
        actor=_reviewer(ctx, workspace_id, as_user),
    )
    extra = "; tasks read only approved versions" if settings.read_approved_only else ""
    click.echo(f"{store_id} is under review{extra}")


@review.command("disable")
@click.argument("store_id")
@workspace_option
@pass_context
@refusals
def disable(ctx: Context, store_id: str, workspace: str | None) -> None:
    """Take STORE out of review (its review records stay in history)."""
    ctx.parts.reviews.configure(ctx.workspace_id(workspace), store_id, enabled=False)
    click.echo(f"{store_id} is no longer under review")
