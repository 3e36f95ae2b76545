"""``gitmem keys create|list|revoke``, ``gitmem users create|list|revoke`` and ``gitmem users emails add|list|remove``.

A new secret is printed alone on standard output (and never again); it is stored hashed.
"""

from __future__ import annotations

import click

from gitmem.cli.base import Context, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.engine.catalog.catalog import ROLES
from gitmem.engine.catalog.user_emails import UserEmails


@main.group("keys")
def keys_group() -> None:
    """API keys (api_actor)."""


@keys_group.command("create")
@click.option("--name", required=True)
@click.option("--role", type=click.Choice(ROLES), default="admin", show_default=True)
@workspace_option
@pass_context
@refusals
def keys_create(ctx: Context, name: str, role: str, workspace: str | None) -> None:
    """Create a key; print its secret alone (a new workspace name creates that workspace)."""
    _key, secret = ctx.gm.catalog.create_api_key(ctx.workspace_id(workspace, create=True), name, role)  # type: ignore[arg-type]
    click.echo(secret)


def _list(ctx: Context, kind: str, workspace: str | None) -> None:
    creds = ctx.gm.catalog.list_credentials(ctx.workspace_id(workspace), kind)
    table(
        [[c.id, c.name, c.role, iso(c.created_at), "revoked" if c.revoked_at else "active"] for c in creds],
        ["ID", "NAME", "ROLE", "CREATED", "STATE"],
    )


@keys_group.command("list")
@workspace_option
@pass_context
@refusals
def keys_list(ctx: Context, workspace: str | None) -> None:
    """List keys (never their secrets)."""
    _list(ctx, "api_key", workspace)


@keys_group.command("revoke")
@click.argument("key_id")
@pass_context
@refusals
def keys_revoke(ctx: Context, key_id: str) -> None:
    """Revoke a key at once."""
    click.echo(f"revoked {ctx.gm.catalog.revoke(key_id).id}")


@main.group("users")
def users_group() -> None:
    """People (user_actor): they clone, push and edit."""


@users_group.command("create")
@click.option("--name", required=True)
@click.option("--role", type=click.Choice(ROLES), default="read-write", show_default=True)
@workspace_option
@pass_context
@refusals
def users_create(ctx: Context, name: str, role: str, workspace: str | None) -> None:
    """Create a user; print their token alone."""
    _user, token = ctx.gm.catalog.create_user(ctx.workspace_id(workspace, create=True), name, role)  # type: ignore[arg-type]
    click.echo(token)


@users_group.command("list")
@workspace_option
@pass_context
@refusals
def users_list(ctx: Context, workspace: str | None) -> None:
    """List users."""
    _list(ctx, "user", workspace)


@users_group.command("revoke")
@click.argument("user_id")
@pass_context
@refusals
def users_revoke(ctx: Context, user_id: str) -> None:
    """Revoke a user's token at once."""
    click.echo(f"revoked {ctx.gm.catalog.revoke(user_id).id}")


@users_group.group("emails")
def emails_group() -> None:
    """The Git addresses a user commits with: a push whose author and committer carry one is theirs."""


@emails_group.command("add")
@click.argument("user_id")
@click.argument("email")
@pass_context
@refusals
def emails_add(ctx: Context, user_id: str, email: str) -> None:
    """Register EMAIL as USER_ID's (refused if another user of the workspace has it)."""
    added = UserEmails(ctx.gm.catalog).add(user_id, email)
    click.echo(f"{added.email} is {added.user_id}'s")


@emails_group.command("list")
@click.argument("user_id")
@pass_context
@refusals
def emails_list(ctx: Context, user_id: str) -> None:
    """USER_ID's addresses, oldest first (the first is the one gitmem clone configures)."""
    for email in UserEmails(ctx.gm.catalog).of_user(user_id):
        click.echo(email)


@emails_group.command("remove")
@click.argument("user_id")
@click.argument("email")
@pass_context
@refusals
def emails_remove(ctx: Context, user_id: str, email: str) -> None:
    """Unregister one of USER_ID's addresses."""
    UserEmails(ctx.gm.catalog).remove(user_id, email)
    click.echo(f"removed {email.strip().lower()}")
