"""``gitmem encryption export|rotate|rewrap``: an encrypted store's data key, its rotation, and
re-wrapping every data key under a new master key.

These were ``gitmem keys export|rotate|rewrap`` until ``keys`` came to mean API keys alone
(:mod:`gitmem.cli.access.users`); the old spellings still work for this release, hidden, and say so.
"""

from __future__ import annotations

from pathlib import Path

import click

from gitmem.cli.access.users import keys_group
from gitmem.cli.base import Context, main, old_spelling, pass_context, refusals
from gitmem.errors import InvalidRequest


@main.group("encryption")
def encryption_group() -> None:
    """Encryption at rest: stores' data keys and the master key that wraps them."""


@encryption_group.command("export")
@click.argument("store_id")
@pass_context
@refusals
def keys_export(ctx: Context, store_id: str) -> None:
    """Print an encrypted store's current data key (for ``gitmem clone --key``). Treat it as a secret."""
    from gitmem.crypto.master_key import export_key

    info = ctx.gm.catalog.store(store_id)
    if not info.encrypted:
        raise InvalidRequest(f"memory store {store_id} is not encrypted: it has no data key")
    click.echo(export_key(ctx.gm.keyring.current(store_id)))


@encryption_group.command("rotate")
@click.argument("store_id")
@pass_context
@refusals
def keys_rotate(ctx: Context, store_id: str) -> None:
    """New data key for an encrypted store; its whole history is re-encrypted and the old key destroyed."""
    from gitmem.engine.rewrite.rotation import rotate_store_key

    report = rotate_store_key(ctx.gm, store_id)
    click.echo(
        f"rotated {store_id}: key {', '.join(report.old_key_ids)} -> {report.new_key_id}"
        f" ({report.versions} versions re-encrypted, {report.blobs_purged} old blobs deleted)"
    )
    click.echo("clones made before now see a forced update; give them the new key (gitmem encryption export)", err=True)


@encryption_group.command("rewrap")
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
    from gitmem.engine.rewrite.rotation import rewrap_master_key

    text = new_key_file.read_text("ascii").strip() if new_key_file is not None else None
    report = rewrap_master_key(ctx.gm, text)
    click.echo(
        f"re-wrapped {report.keys} data keys: master key {report.old_master_key_id} -> {report.new_master_key_id}"
    )
    if report.replaced_file is not None:
        click.echo(f"the new master key is in {report.replaced_file}; back it up now", err=True)
    else:
        click.echo("now point GITMEM_MASTER_KEY or GITMEM_MASTER_KEY_FILE at the new key", err=True)


for _command in (keys_export, keys_rotate, keys_rewrap):
    keys_group.add_command(old_spelling(_command, f"keys {_command.name}", f"encryption {_command.name}"))
