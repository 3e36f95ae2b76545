"""``gitmem profiles create|list|show|delete``, ``gitmem prompt``, ``gitmem clone``, ``gitmem keys export|rotate``.

The profile commands work on the data home directly (an operator on the server). ``gitmem prompt``
does too, or asks a server with ``--url``/``--token`` (``GITMEM_URL``/``GITMEM_TOKEN``), which is how
the agent hooks use it. ``gitmem clone`` is for anyone with a token and Git.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
import httpx

from gitmem.cli.access import keys_group
from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.cli.mount import sync_timing
from gitmem.clock import iso
from gitmem.errors import InvalidRequest, NotFound

if TYPE_CHECKING:
    from gitmem.banks.profiles import Profiles

DEFAULT_URL = "http://127.0.0.1:8765"
TOKEN_FILE = "gitmem-token"  # inside the clone's .git/, mode 0600
_STORE_URL = re.compile(r"^(?P<base>https?://.+?)/v1/memory_stores/(?P<store>memstore_[A-Za-z0-9]+)\.git/?$")
_STORE_ID = re.compile(r"^memstore_[A-Za-z0-9]+$")
_PROFILE_ID = re.compile(r"^profile_[A-Za-z0-9]+$")

# Git's credential helper for a clone: the token from the 0600 file in the clone's .git/, else from
# $GITMEM_TOKEN. Git runs it only when the server answers 401 for this URL, and only "get" answers.
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; t=; '
    f'd=$(git rev-parse --absolute-git-dir 2>/dev/null) && test -r "$d/{TOKEN_FILE}" && t=$(cat "$d/{TOKEN_FILE}"); '
    'test -n "$t" || t="$GITMEM_TOKEN"; test -n "$t" || exit 0; '
    'echo username=gitmem; echo "password=$t"; }; f'
)


def _profiles(ctx: Context) -> Profiles:
    from gitmem.banks.profiles import profiles_for

    return profiles_for(ctx.gm)


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
        return response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def _get_json(client: httpx.Client, path: str) -> dict:
    try:
        response = client.get(path)
    except httpx.HTTPError as exc:
        raise InvalidRequest(f"cannot reach {client.base_url}: {exc}") from None
    if response.status_code != 200:
        raise InvalidRequest(_http_error(response))
    return response.json()


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
                answers.append(_get_json(client, f"/v1/profiles/{profile_id}{suffix}"))
        profile, listing = answers
        click.echo(
            render_section([m["path"] for m in listing["memories"]], directory=directory, profile_name=profile["name"]),
            nl=False,
        )
        return
    profiles = _profiles(ctx)
    click.echo(bank_section(profiles.bank(profiles.get_any(profile_id)), directory=directory), nl=False)


# -- keys: export and rotate ------------------------------------------------------------------------


@keys_group.command("export")
@click.argument("store_id")
@pass_context
@refusals
def keys_export(ctx: Context, store_id: str) -> None:
    """Print an encrypted store's current data key (for ``gitmem clone --key``). Treat it as a secret."""
    from gitmem.crypto.keys import export_key

    info = ctx.gm.catalog.store(store_id)
    if not info.encrypted:
        raise InvalidRequest(f"memory store {store_id} is not encrypted: it has no data key")
    click.echo(export_key(ctx.gm.keyring.current(store_id)))


@keys_group.command("rotate")
@click.argument("store_id")
@pass_context
@refusals
def keys_rotate(ctx: Context, store_id: str) -> None:
    """New data key for an encrypted store; its whole history is re-encrypted and the old key destroyed."""
    from gitmem.engine.rotation import rotate_store_key

    report = rotate_store_key(ctx.gm, store_id)
    click.echo(
        f"rotated {store_id}: key {', '.join(report.old_key_ids)} -> {report.new_key_id}"
        f" ({report.versions} versions re-encrypted, {report.blobs_purged} old blobs deleted)"
    )
    click.echo("clones made before now see a forced update; give them the new key (gitmem keys export)", err=True)


@keys_group.command("rewrap")
@click.option(
    "--new-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The new master key (hex or base64 of 32 bytes). Default: generate one into"
    " $GITMEM_HOME/master.key (only when that is where the master key lives).",
)
@pass_context
@refusals
def keys_rewrap(ctx: Context, new_key_file: Path | None) -> None:
    """Wrap every data key under a new master key; the old master key then opens nothing. Stop the
    server first (it holds the old master key) and restart it with the new one."""
    from gitmem.engine.rotation import rewrap_master_key

    text = new_key_file.read_text("ascii").strip() if new_key_file is not None else None
    report = rewrap_master_key(ctx.gm, text)
    click.echo(
        f"re-wrapped {report.keys} data keys: master key {report.old_master_key_id} -> {report.new_master_key_id}"
    )
    if report.replaced_file is not None:
        click.echo(f"the new master key is in {report.replaced_file}; back it up now", err=True)
    else:
        click.echo("now point GITMEM_MASTER_KEY or GITMEM_MASTER_KEY_FILE at the new key", err=True)


# -- clone --------------------------------------------------------------------------------------------


def _git(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        command = next(a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c"))
        raise InvalidRequest(f"git {command} failed: {proc.stderr.strip() or proc.stdout.strip()}")


def _resolve_profile(base: str, profile_id: str, token: str | None) -> str:
    if not token:
        raise InvalidRequest("cloning a profile's bank needs the user's --token (or $GITMEM_TOKEN)")
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        return _get_json(client, f"/v1/profiles/{profile_id}")["memory_bank_id"]


def _source(target: str, base_url: str, token: str | None) -> tuple[str, str | None, str | None]:
    """(what to give ``git clone``, the store id if known, the server's base URL for credentials)."""
    match = _STORE_URL.match(target)
    if match:
        return target, match["store"], match["base"]
    if target.startswith(("http://", "https://")):
        return target, None, target.split("/v1/", 1)[0]
    local = Path(target)
    if local.is_dir():
        name = local.resolve().name
        return str(local.resolve()), name[:-4] if name.endswith(".git") else None, None
    base = base_url.rstrip("/")
    if _PROFILE_ID.match(target):
        target = _resolve_profile(base, target, token)
    if not _STORE_ID.match(target):
        raise InvalidRequest(f"{target!r} is neither a store id, a profile id, a store URL nor a local repository")
    return f"{base}/v1/memory_stores/{target}.git", target, base


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def clone_store(
    target: str,
    directory: Path | None = None,
    *,
    base_url: str = DEFAULT_URL,
    token: str | None = None,
    key_text: str | None = None,
    store_id: str | None = None,
    save_token: bool = True,
) -> Path:
    """``git clone`` a store with its credentials kept out of the URL, and (with a key) plaintext views."""
    source, found_id, server = _source(target, base_url, token)
    store_id = store_id or found_id
    if key_text is not None and not store_id:
        raise InvalidRequest("--key needs the store id: clone by id or by a .../v1/memory_stores/<id>.git URL")
    directory = Path(directory or (store_id or Path(source.rstrip("/")).name.removesuffix(".git")))
    if directory.exists() and any(directory.iterdir()):
        raise InvalidRequest(f"{directory} exists and is not empty")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    args: list[str] = []
    if server is not None:
        if token:
            env["GITMEM_TOKEN"] = token
        # Reset helpers from other config files (a global "store" helper would save the token in plain
        # text), then ours, for the clone itself; the same goes into the clone's config below.
        args = ["-c", f"credential.{server}.helper=", "-c", f"credential.{server}.helper={CREDENTIAL_HELPER}"]
    try:
        _git([*args, "clone", "-q", source, str(directory)], env=env)
    except InvalidRequest as exc:
        if server is not None and not token:
            raise InvalidRequest(f"{exc.message} (no token given: pass --token or set $GITMEM_TOKEN)") from None
        raise
    if server is not None:
        git_dir = directory / ".git"
        _git(["config", "--local", "--add", f"credential.{server}.helper", ""], cwd=directory)
        _git(["config", "--local", "--add", f"credential.{server}.helper", CREDENTIAL_HELPER], cwd=directory)
        if token and save_token:
            _write_private(git_dir / TOKEN_FILE, token + "\n")
    if key_text is not None:
        from gitmem.git.crypt_filter import configure_clone

        assert store_id is not None
        configure_clone(directory, key_text.strip(), store_id)
    return directory


@main.command("clone")
@click.argument("store_or_url")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option(
    "--url",
    "base_url",
    envvar="GITMEM_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The server, when STORE_OR_URL is a store or profile id ($GITMEM_URL).",
)
@click.option("--token", envvar="GITMEM_TOKEN", default=None, help="API key or user token ($GITMEM_TOKEN).")
@click.option(
    "--key",
    "key_text",
    default=None,
    help="The store's data key (gitmem keys export), or - to read it from standard input.",
)
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Read the data key from this file.",
)
@click.option("--store-id", default=None, help="The store id, when the URL does not show it.")
@click.option(
    "--no-save-token", is_flag=True, help="Keep the token out of the clone: later fetches read $GITMEM_TOKEN."
)
@refusals
def clone(
    store_or_url: str,
    directory: Path | None,
    base_url: str,
    token: str | None,
    key_text: str | None,
    key_file: Path | None,
    store_id: str | None,
    no_save_token: bool,
) -> None:
    """Clone a store (STORE_ID, PROFILE_ID, .../v1/memory_stores/ID.git or a local repository path).

    The token never goes into the remote URL: Git asks a credential helper configured in the clone,
    which reads it from .git/gitmem-token (mode 0600) or $GITMEM_TOKEN. With --key, checkout and
    ``git log -p`` show plaintext.
    """
    if key_text == "-":
        key_text = sys.stdin.readline().strip()
    if key_file is not None:
        key_text = key_file.read_text().strip()
    directory = clone_store(
        store_or_url,
        directory,
        base_url=base_url,
        token=token,
        key_text=key_text,
        store_id=store_id,
        save_token=not no_save_token,
    )
    click.echo(str(directory))


# -- a bank mounted at a folder -------------------------------------------------------------------------


@main.command("bank-mount")
@click.option("--profile", "profile_id", required=True, envvar="GITMEM_PROFILE", help="The profile ($GITMEM_PROFILE).")
@click.option("--url", required=True, envvar="GITMEM_URL", help="The server ($GITMEM_URL).")
@click.option("--token", required=True, envvar="GITMEM_TOKEN", help="The profile owner's token ($GITMEM_TOKEN).")
@sync_timing("bank")
@click.option(
    "--pid-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the process id here once every entry is on disk; removed on exit.",
)
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@refusals
def bank_mount_command(
    profile_id: str, url: str, token: str, debounce: float, poll_interval: float, pid_file: Path | None, folder: Path
) -> None:
    """Mount a profile's memory bank at FOLDER (e.g. .memory) until interrupted.

    A clean start: files in FOLDER that are not entries are removed. Edits are synced back debounced;
    on Ctrl-C or SIGTERM every pending change is pushed before the command exits.
    """
    from gitmem.sync.bank_remote import bank_mount, run_until_signal

    mount = bank_mount(url, token, profile_id, folder, debounce=debounce, poll_interval=poll_interval)
    click.echo(f"mounted the bank of {profile_id} at {folder}: {mount.status.notes} entries", err=True)
    code = run_until_signal(mount, pid_file=pid_file)
    click.echo(f"unmounted {profile_id}: {mount.status.line()}", err=True)
    sys.exit(code)
