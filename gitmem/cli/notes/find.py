"""``gitmem search``, ``gitmem diff`` and ``gitmem restore`` (a version; a whole backup is
:mod:`gitmem.cli.node.backup`'s)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, workspace_option
from gitmem.clock import iso
from gitmem.engine.audit.log import actor_name
from gitmem.engine.index.search import MARK, MAX_SEARCH_PAGE
from gitmem.engine.store.diff import diff_versions, unified_lines
from gitmem.engine.store.restore import restore as restore_version
from gitmem.model import Version

_MARKED = re.compile(re.escape(MARK) + "(.+?)" + re.escape(MARK))


@main.command("search")
@click.argument("store_id")
@click.argument("query")
@click.option("--prefix", "path_prefix", default=None, help="Only notes below this folder (ends with '/').")
@click.option("--limit", type=click.IntRange(1, MAX_SEARCH_PAGE), default=20)
@click.option("--json", "as_json", is_flag=True)
@workspace_option
@pass_context
@refusals
def search(
    ctx: Context, store_id: str, query: str, path_prefix: str | None, limit: int, as_json: bool, workspace: str | None
) -> None:
    """Notes that match QUERY, best first: words (all must match), "a phrase", prefix*, OR."""
    page = ctx.gm.store(ctx.workspace_id(workspace), store_id).search(query, path_prefix, limit)
    if as_json:
        emit_json(page.items)
        return
    for hit in page.items:
        click.echo(f"{click.style(hit.note.path, bold=True)}  {hit.note.id}  score {hit.score:.3g}")
        for snippet in hit.snippets:
            snippet = _MARKED.sub(lambda m: click.style(m.group(0), fg="red", bold=True), snippet)
            click.echo("    " + " ".join(snippet.split()))


_STYLES = [
    ("diff --git", {"bold": True}),
    ("new file", {"bold": True}),
    ("deleted file", {"bold": True}),
    ("rename ", {"bold": True}),
    ("--- ", {"bold": True}),
    ("+++ ", {"bold": True}),
    ("@@", {"fg": "cyan"}),
    ("-", {"fg": "red"}),
    ("+", {"fg": "green"}),
]


def _styled(line: str) -> str:
    for start, style in _STYLES:
        if line.startswith(start):
            return click.style(line, **style)  # type: ignore[arg-type]
    return line


def _about(version: Version) -> str:
    return f"{version.id} ({version.operation} by {actor_name(version.created_by)} at {iso(version.created_at)})"


@main.command("diff")
@click.argument("store_id")
@click.argument("version_id")
@click.argument("other", required=False)
@workspace_option
@pass_context
@refusals
def diff(ctx: Context, store_id: str, version_id: str, other: str | None, workspace: str | None) -> None:
    """What VERSION changed, against OTHER (default: the note's version before it), as git diff shows it.
    Coloured on a terminal."""
    result = diff_versions(ctx.gm.store(ctx.workspace_id(workspace), store_id), version_id, other)
    click.echo(click.style(f"version {_about(result.new)}", fg="yellow"))
    if result.old is not None:
        click.echo(f"against {_about(result.old)}")
    click.echo()
    for line in unified_lines(result):
        click.echo(_styled(line))


@main.command("restore")
@click.argument("store_id", metavar="STORE|SRC")
@click.argument("memory_id", metavar="[MEMORY", required=False)
@click.argument("version_id", metavar="VERSION]", required=False)
@click.option("--if-sha256", default=None, help="Only if the note's content still has this SHA-256.")
@click.option(
    "--home",
    "new_home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With SRC: the new, empty home to restore the backup into.",
)
@click.option(
    "--master-key-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="With SRC: the home's master key, copied into the new home (no backup holds it).",
)
@click.option(
    "--erasures-from",
    multiple=True,
    help="With SRC: another catalog whose erasure ledger to apply (a home's folder or a postgresql:// URL).",
)
@workspace_option
@pass_context
@refusals
def restore(
    ctx: Context,
    store_id: str,
    memory_id: str | None,
    version_id: str | None,
    if_sha256: str | None,
    new_home: Path | None,
    master_key_file: Path | None,
    erasures_from: tuple[str, ...],
    workspace: str | None,
) -> None:
    """Bring back VERSION's content and path as a new version of MEMORY (a deleted note comes back);
    or, as ``gitmem restore SRC --home NEW``, rebuild a whole home from the backup SRC (docs/backup.md)."""
    if memory_id is None and version_id is None:
        if new_home is None:
            raise click.UsageError("restoring a backup: name the new home with --home NEW")
        from gitmem.cli.node.backup import restore_backup

        restore_backup(ctx, Path(store_id), new_home, master_key_file, erasures_from)
        return
    if memory_id is None or version_id is None:
        raise click.UsageError("restoring a version: STORE MEMORY VERSION")
    store = ctx.gm.store(ctx.workspace_id(workspace), store_id)
    note = restore_version(store, memory_id, version_id, expected_sha256=if_sha256)
    click.echo(f"restored {note.path} {note.id} {note.version_id}")
