"""``gitmem profiles create|list|show|delete`` and ``gitmem prompt``.

The profile commands work on the data home directly (an operator on the server). ``gitmem prompt``
does too, or asks a server with ``--url``/``--token`` (``GITMEM_URL``/``GITMEM_TOKEN``), which is how
the agent hooks use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import httpx

from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.errors import InvalidRequest, NotFound

if TYPE_CHECKING:
    from gitmem.banks.profiles import Profiles


def _profiles(ctx: Context) -> Profiles:
    return ctx.parts.profiles


# -- profiles ---------------------------------------------------------------------------------------


@main.group("profiles")
def profiles_group() -> None:
    """Users' profiles, each with an encrypted memory bank."""


@profiles_group.command("create")
@click.argument("name")
@click.option("--user", "user_id", required=True, help="The owner: a user id (gitmem users list).")
@pass_context
@refusals
def profiles_create(ctx: Context, name: str, user_id: str) -> None:
    """Create a profile for a user and print its id."""
    try:
        workspace_id = ctx.gm.catalog.credential(user_id).workspace_id
    except NotFound:
        raise NotFound(f"user {user_id} not found") from None
    click.echo(_profiles(ctx).create(workspace_id, user_id, name).id)


@profiles_group.command("list")
@click.option("--user", "user_id", default=None, help="Only this user's profiles.")
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def profiles_list(ctx: Context, user_id: str | None, as_json: bool, workspace: str | None) -> None:
    """List profiles, oldest first."""
    if user_id is not None and workspace is None:
        workspace_id = ctx.gm.catalog.credential(user_id).workspace_id
    else:
        workspace_id = ctx.workspace_id(workspace)
    found = _profiles(ctx).list(workspace_id, user_id)
    if as_json:
        emit_json(found)
        return
    table(
        [[p.id, p.name, p.user_id, p.bank_store_id, iso(p.created_at)] for p in found],
        ["ID", "NAME", "USER", "BANK", "CREATED"],
    )


@profiles_group.command("show")
@click.argument("profile_id")
@pass_context
@refusals
def profiles_show(ctx: Context, profile_id: str) -> None:
    """A profile and its bank's entries (metadata only)."""
    profiles = _profiles(ctx)
    profile = profiles.get_any(profile_id)
    bank = profiles.bank(profile)
    count, size = bank.totals()
    entries = [
        {
            "path": e.path,
            "size": e.size,
            "content_hash": e.content_hash,
            "created_at": e.created_at,
            "updated_at": e.updated_at,
        }
        for e in bank.entries()
    ]
    emit_json(
        {
            **profile.__dict__,
            "repository": str(ctx.gm.repo_path(profile.bank_store_id)),
            "entries": count,
            "bytes": size,
            "memories": entries,
        }
    )


@profiles_group.command("delete")
@click.argument("profile_id")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
@refusals
def profiles_delete(ctx: Context, profile_id: str, yes: bool) -> None:
    """Delete a profile with its bank: every entry, all history, and its key."""
    profiles = _profiles(ctx)
    profile = profiles.get_any(profile_id)
    if not yes:
        click.confirm(f"Delete {profile_id} ({profile.name}) and its memory bank?", abort=True)
    profiles.delete_any(profile_id)
    click.echo(f"deleted {profile_id}")


# -- the system-prompt section ------------------------------------------------------------------------


def _http_error(response: httpx.Response) -> str:
    try:
        message: str = response.json()["error"]["message"]
        return message
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def get_json(client: httpx.Client, path: str) -> dict[str, Any]:
    try:
        response = client.get(path)
    except httpx.HTTPError as exc:
        raise InvalidRequest(f"cannot reach {client.base_url}: {exc}") from None
    if response.status_code != 200:
        raise InvalidRequest(_http_error(response))
    body: dict[str, Any] = response.json()
    return body


@main.command("prompt")
@click.option("--profile", "profile_id", required=True, help="The profile whose bank the section describes.")
@click.option("--url", envvar="GITMEM_URL", default=None, help="Ask this server ($GITMEM_URL) instead of the home.")
@click.option("--token", envvar="GITMEM_TOKEN", default=None, help="The user's token ($GITMEM_TOKEN) for --url.")
@click.option("--dir", "directory", default=".memory/", show_default=True, help="Where the bank is mounted.")
@pass_context
@refusals
def prompt(ctx: Context, profile_id: str, url: str | None, token: str | None, directory: str) -> None:
    """Print the ``## Profile Memory Bank`` system-prompt section of a profile."""
    from gitmem.agents.prompt import bank_section, render_section

    if url:
        if not token:
            raise InvalidRequest("--url needs --token (or $GITMEM_TOKEN): a user's token")
        answers = []
        with httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for suffix in ("", "/memories"):
                answers.append(get_json(client, f"/v1/profiles/{profile_id}{suffix}"))
        profile, listing = answers
        click.echo(
            render_section([m["path"] for m in listing["memories"]], directory=directory, profile_name=profile["name"]),
            nl=False,
        )
        return
    profiles = _profiles(ctx)
    click.echo(bank_section(profiles.bank(profiles.get_any(profile_id)), directory=directory), nl=False)
