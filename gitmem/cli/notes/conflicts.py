"""``gitmem conflicts``: the edits refused because the note changed meanwhile, kept as conflicts.

``gitmem conflicts STORE`` lists them, newest first; ``show`` prints one with its diff against the
winner and the three-way merge; ``resolve`` takes the winner, the loser or a merge; ``redact`` blanks one.
The CLI acts as gitmem itself (actor: the service), as every CLI write does.
"""

from __future__ import annotations

from typing import TextIO

import click

from gitmem.cli.base import Context, default_command, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.cli.notes.find import _styled
from gitmem.clock import iso
from gitmem.engine.rewrite.redaction import redact_conflict
from gitmem.engine.store.conflict_resolution import compare, resolve
from gitmem.engine.store.conflicts import MAX_CONFLICTS_PAGE, Conflict
from gitmem.git.conflict_records import RESOLUTIONS


@main.group("conflicts", cls=default_command("list"))
def conflicts() -> None:
    """Edits kept because they lost a race: STORE (list them), show, resolve, redact."""


def _who(conflict: Conflict) -> str:
    return conflict.created_by.id if conflict.created_by else "service"


@conflicts.command("list")
@click.argument("store_id")
@click.option("--memory", "memory_id", default=None, help="Only this note's conflicts.")
@click.option("--state", type=click.Choice(["open", "resolved"]), default=None)
@click.option("--limit", type=click.IntRange(1, MAX_CONFLICTS_PAGE), default=MAX_CONFLICTS_PAGE)
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def list_conflicts(
    ctx: Context,
    store_id: str,
    memory_id: str | None,
    state: str | None,
    limit: int,
    as_json: bool,
    workspace: str | None,
) -> None:
    """STORE's conflicts, newest first."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    page = store.conflicts.list(memory_id=memory_id, state=state, limit=limit)  # type: ignore[arg-type]
    if as_json:
        emit_json(page.items)
        return
    rows = [
        [c.id, iso(c.created_at), _who(c), c.operation, c.path or "(redacted)", c.resolution or "open"]
        for c in page.items
    ]
    table(rows, ["id", "created_at", "by", "operation", "path", "state"])


@conflicts.command("show")
@click.argument("store_id")
@click.argument("conflict_id")
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def show(ctx: Context, store_id: str, conflict_id: str, as_json: bool, workspace: str | None) -> None:
    """One conflict: its text, the diff from the winner to it, and the three-way merge."""
    seen = compare(ctx.gm.store(ctx.workspace_id(workspace), store_id), conflict_id)
    if as_json:
        emit_json(seen)
        return
    c = seen.conflict
    click.echo(click.style(f"conflict {c.id}", fg="yellow") + f" ({c.resolution or 'open'})")
    click.echo(f"Author: {_who(c)}\nDate:   {iso(c.created_at)}\n\n    {c.operation} {c.path or '(redacted)'}")
    click.echo(f"    lost to {c.winner_version_id}\n")
    for hunk in seen.hunks:
        click.echo(_styled(hunk.header))
        for line in hunk.lines:
            click.echo(_styled({"context": " ", "removed": "-", "added": "+"}[line.kind] + line.text))
    if seen.merge is not None:
        verdict = "clean" if seen.merge.clean else f"{seen.merge.conflicts} overlapping changes"
        click.echo(f"\nthree-way merge ({verdict}):\n{seen.merge.text}", nl=False)


@conflicts.command("resolve")
@click.argument("store_id")
@click.argument("conflict_id")
@click.option("--take", type=click.Choice(RESOLUTIONS), required=True, help="Which text the note keeps.")
@click.option("--file", type=click.File("r"), default=None, help="With --take merged: the merged text ('-': stdin).")
@click.option("--if-sha256", default=None, help="Only if the note holds this (default: the winner's text).")
@workspace_option
@pass_context
@refusals
def resolve_cmd(
    ctx: Context,
    store_id: str,
    conflict_id: str,
    take: str,
    file: TextIO | None,
    if_sha256: str | None,
    workspace: str | None,
) -> None:
    """Take the winner, the loser or a merge (--file, or the clean merge) as a new version, and mark the
    conflict resolved."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    content = file.read() if file is not None else None
    done = resolve(store, conflict_id, take, content=content, expected_sha256=if_sha256)  # type: ignore[arg-type]
    written = f"; wrote {done.version_id}" if done.version_id else "; nothing written"
    click.echo(f"resolved {conflict_id}: took the {take}{written}")


@conflicts.command("redact")
@click.argument("store_id")
@click.argument("conflict_id")
@workspace_option
@pass_context
@refusals
def redact_cmd(ctx: Context, store_id: str, conflict_id: str, workspace: str | None) -> None:
    """Blank CONFLICT_ID: its path and text leave the repository (a history rewrite of its note's line)."""
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    conflict = redact_conflict(store, conflict_id, ledger=ctx.gm.catalog.erasures)
    click.echo(f"redacted {conflict.id} (at {iso(conflict.redacted_at) if conflict.redacted_at else '?'})")
