"""``gitmem audit key`` and ``gitmem audit rotate-key``: the key that signs every commit the home writes;
``gitmem audit verify`` and ``gitmem audit receipt``: the proof (docs/audit.md).

The signing key's commands were ``gitmem keys signing|rotate-signing`` until ``keys`` came to mean API
keys alone; the old spellings still work for this release, hidden, and say so."""

from __future__ import annotations

from pathlib import Path

import click
import pygit2

from gitmem.cli.access.users import keys_group
from gitmem.cli.base import Context, emit_json, main, old_spelling, pass_context, refusals
from gitmem.errors import InvalidRequest


@main.group("audit")
def audit_group() -> None:
    """Prove the audit: signatures, the rewrite log, erasure receipts (docs/audit.md)."""


@audit_group.command("key")
@click.option("--allowed-signers", is_flag=True, help="Print Git's allowed-signers file (every key, with validity).")
@pass_context
@refusals
def audit_key(ctx: Context, allowed_signers: bool) -> None:
    """Print the public key that signs every commit (``ssh-ed25519 ...``)."""
    signer = ctx.gm.signer
    if allowed_signers:
        click.echo(signer.allowed_signers(), nl=False)
        return
    click.echo(f"{signer.public.openssh} {signer.public.fingerprint}")


@audit_group.command("rotate-key")
@pass_context
@refusals
def audit_rotate_key(ctx: Context) -> None:
    """Make a new signing key; the old one stays in allowed_signers with valid-before (old commits still
    verify, nothing new does with it)."""
    from gitmem.crypto.signing_key import rotate

    gm = ctx.gm
    old, new = rotate(gm.home, gm.signer.source, gm.clock())
    click.echo(f"closed  {old.fingerprint}")
    click.echo(f"signing {new.fingerprint}")


keys_group.add_command(old_spelling(audit_key, "keys signing", "audit key"))
keys_group.add_command(old_spelling(audit_rotate_key, "keys rotate-signing", "audit rotate-key"))


def _config(repo: pygit2.Repository, name: str) -> str | None:
    try:
        return str(repo.config[name])
    except KeyError:
        return None


def _older(text: str, repo: pygit2.Repository) -> tuple[pygit2.Repository, pygit2.Oid]:
    """An older clone (a folder: its origin/main, else main) or a tip id of ``repo``."""
    from gitmem.engine.audit.log import open_repository, resolve_tip

    if Path(text).is_dir():
        older = open_repository(Path(text))
        tip = resolve_tip(older)
        if tip is None:
            raise InvalidRequest(f"{text} has no history to compare with")
        return older, tip.id
    try:
        return repo, repo.revparse_single(text).peel(pygit2.Commit).id
    except (KeyError, ValueError, pygit2.GitError):
        raise InvalidRequest(f"{text!r} is neither a clone's folder nor a commit of the store") from None


@audit_group.command("verify")
@click.argument("store_id", required=False)
@click.option(
    "--repo",
    "repo_dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Check a clone instead (its gpg.ssh.allowedSignersFile names the keys).",
)
@click.option("--against", default=None, metavar="CLONE|TIP", help="An older clone's folder, or an old tip id.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_context
@refusals
def audit_verify(ctx: Context, store_id: str | None, repo_dir: Path | None, against: str | None, as_json: bool) -> None:
    """Check a store end to end: every commit signed (or pushed by a recorded pusher), trailers and index
    agree, the rewrite log holds, and (with --against) an older clone's versions are all still there but
    what the log dropped or redacted. Exit status 1 on any break, naming the first bad commit."""
    from gitmem.crypto.signing_key import known_keys, parse_allowed_signers
    from gitmem.engine.audit.log import open_repository, resolve_tip
    from gitmem.engine.audit.verify import verify

    if (store_id is None) == (repo_dir is None):
        raise click.UsageError("give a STORE_ID or --repo DIR (one of them)")
    if repo_dir is not None:
        repo = open_repository(repo_dir)
        signers = _config(repo, "gpg.ssh.allowedSignersFile")
        if signers is None:
            raise InvalidRequest("the clone names no gpg.ssh.allowedSignersFile (gitmem clone sets it)")
        keys = parse_allowed_signers(Path(signers).read_text())
        found = resolve_tip(repo)
        older = _older(against, repo) if against else None
        report = verify(repo, keys, store_id=repo_dir.name, older=older, tip=found.id if found else None)
    else:
        assert store_id is not None  # noqa: S101  narrows the type for mypy; never a check of input
        gm = ctx.gm
        info = gm.catalog.store(store_id)
        store = gm.store(info.workspace_id, store_id)
        older = _older(against, store.repo) if against else None
        report = verify(store.repo, known_keys(gm.home), store=store, older=older)
    if as_json:
        emit_json(report.to_json())
    else:
        for check, what in report.checked.items():
            click.echo(f"checked {check}: {what}")
        for problem in report.problems:
            click.echo(f"BROKEN  {problem.text()}")
        click.echo("ok: the audit holds" if report.ok else f"{len(report.problems)} problem(s)")
    if not report.ok:
        first = report.problems[0]
        click.echo(f"gitmem: the audit is broken, first at {first.commit or first.check}: {first.message}", err=True)
        raise SystemExit(1)


@audit_group.command("receipt")
@click.argument("receipt_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--key", "key_text", default=None, help="The home's public key (`gitmem audit key` prints it).")
@click.option(
    "--allowed-signers",
    "signers_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Or an allowed-signers file (GET /v1/signing_key/allowed_signers).",
)
@refusals
def audit_receipt(receipt_file: Path, key_text: str | None, signers_file: Path | None) -> None:
    """Check an erasure receipt offline, with the public key alone: its signature, and that every blob it
    names was gone from the repository and refused to a fetch. Exit status 1 if it does not hold."""
    import json

    from gitmem.crypto.signing_key import parse_allowed_signers
    from gitmem.crypto.sshsig import BadSignature, PublicKey
    from gitmem.engine.rewrite.receipts import verify_receipt

    if (key_text is None) == (signers_file is None):
        raise click.UsageError("give the public key: --key 'ssh-ed25519 ...' or --allowed-signers FILE")
    try:
        keys = [PublicKey.from_openssh(key_text)] if key_text else []
    except BadSignature as exc:
        raise click.UsageError(f"--key: {exc.message}") from None
    if signers_file is not None:
        keys = [k.key for k in parse_allowed_signers(signers_file.read_text())]
    try:
        document = json.loads(receipt_file.read_text())
    except (ValueError, UnicodeDecodeError):
        document = {}
    problems = verify_receipt(document if isinstance(document, dict) else {}, keys)
    if problems:
        for problem in problems:
            click.echo(f"BROKEN  {problem}")
        raise SystemExit(1)
    receipt = document["receipt"]
    click.echo(
        f"good receipt: {len(receipt['version_ids'])} version(s) of {receipt['memory_store_id']} erased by"
        f" {receipt['erased_by']} at {receipt['erased_at']}; {len(receipt['blobs'])} blob(s) gone"
        f" ({receipt['fetch_checked']} refused to a fetch)"
    )
