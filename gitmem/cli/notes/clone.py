"""``gitmem clone``: a store (or a profile's bank) cloned with Git, the token kept for Git's credential
helper, the user's identity set (so their commits push as theirs), and for an encrypted store the key
and the filter set up. For anyone with a token and Git.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import httpx

from gitmem.cli.agents.profiles import get_json
from gitmem.cli.base import main, refusals
from gitmem.crypto.signing_key import ALLOWED_SIGNERS_FILENAME
from gitmem.errors import InvalidRequest

DEFAULT_URL = "http://127.0.0.1:8765"
TOKEN_FILE = "gitmem-token"  # inside the clone's .git/, mode 0600  # noqa: S105  a file name, not a secret
SIGNERS_FILE = "gitmem-allowed-signers"  # inside the clone's .git/: the home's signing keys
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


def _git(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)  # noqa: S603, S607  git from PATH, an argument list (no shell)
    if proc.returncode != 0:
        command = next(a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c"))
        raise InvalidRequest(f"git {command} failed: {proc.stderr.strip() or proc.stdout.strip()}")


def _resolve_profile(base: str, profile_id: str, token: str | None) -> str:
    if not token:
        raise InvalidRequest("cloning a profile's bank needs the user's --token (or $GITMEM_TOKEN)")
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        bank_id: str = get_json(client, f"/v1/profiles/{profile_id}")["memory_bank_id"]
        return bank_id


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


def _set_identity(directory: Path, server: str, token: str) -> None:
    """The clone commits as the token's user (``GET /v1/users/me``: their first registered address,
    else gitmem's own for them), so their pushes are accepted as theirs. A key or a task's token is no
    person: the clone is left to the machine's identity."""
    try:
        with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            response = client.get("/v1/users/me")
    except httpx.HTTPError:
        return
    if response.status_code != 200:
        return
    identity = response.json().get("git_identity") or {}
    if identity.get("name") and identity.get("email"):
        _git(["config", "--local", "user.name", identity["name"]], cwd=directory)
        _git(["config", "--local", "user.email", identity["email"]], cwd=directory)


def _allowed_signers(source: str, server: str | None) -> str | None:
    """The home's allowed-signers file: from the server (public, ``/v1/signing_key/allowed_signers``), or
    beside a local store's home (``HOME/stores/<id>.git`` -> ``HOME/allowed_signers``)."""
    if server is not None:
        try:
            response = httpx.get(f"{server}/v1/signing_key/allowed_signers", timeout=30)
        except httpx.HTTPError:
            return None
        return response.text if response.status_code == 200 else None
    found = Path(source).parent.parent / ALLOWED_SIGNERS_FILENAME
    return found.read_text() if found.is_file() else None


def _verify_signatures(directory: Path, source: str, server: str | None) -> None:
    """Set the clone up so that ``git verify-commit`` and ``git log --show-signature`` check gitmem's
    signatures: the allowed-signers file in ``.git/``, ``gpg.format=ssh`` and the file named."""
    text = _allowed_signers(source, server)
    if text is None:
        click.echo("warning: the store's signing keys could not be had; signatures will not verify", err=True)
        return
    path = (directory / ".git" / SIGNERS_FILE).resolve()
    path.write_text(text)
    _git(["config", "--local", "gpg.format", "ssh"], cwd=directory)
    _git(["config", "--local", "gpg.ssh.allowedSignersFile", str(path)], cwd=directory)


# What a clone fetches besides main: who pushed (notes, replaced whole by a rewrite: forced) and the
# rewrite log (append-only: never forced, so a rewritten log fails the fetch loudly). Patterns, since
# a ref the store lacks (no push yet, no rewrite yet, notes gone into trailers) must not fail a fetch.
RECORD_REFSPECS = ("+refs/notes/*:refs/notes/*", "refs/gitmem/*:refs/gitmem/*")


def _fetch_records(directory: Path, env: dict[str, str]) -> None:
    for refspec in RECORD_REFSPECS:
        _git(["config", "--local", "--add", "remote.origin.fetch", refspec], cwd=directory)
    _git(["fetch", "-q", "origin"], cwd=directory, env=env)


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
        if token:
            _set_identity(directory, server, token)
    _verify_signatures(directory, source, server)
    _fetch_records(directory, env)
    if key_text is not None:
        from gitmem.git.crypt_filter import configure_clone

        assert store_id is not None  # noqa: S101  narrows the type for mypy; never a check of input
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
    help="The store's data key (gitmem encryption export), or - to read it from standard input.",
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
