"""``gitmem log``: the audit of a store (who, when, what, which version), from the server or a clone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
import pygit2
from click.decorators import FC

from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.engine.audit import log as audit
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest, NotFound


def _operator_store(ctx: Context, store_id: str, workspace: str | None) -> MemoryStore:
    gm = ctx.gm
    info = gm.catalog.store(store_id)  # the operator's view: any workspace of this home
    if workspace is not None:
        ws = gm.catalog.workspace_by_name(workspace)
        if ws is None or ws.id != info.workspace_id:
            raise NotFound(f"memory store {store_id} not found in workspace {workspace}")
    return gm.store(info.workspace_id, store_id)


def _print_rewrites(repo: pygit2.Repository, limit: int | None, oldest_first: bool, as_json: bool) -> None:
    """The rewrite log (``refs/gitmem/rewrites``): newest first unless ``oldest_first``."""
    from gitmem.git import rewrite_log

    entries = rewrite_log.read(repo)
    if not oldest_first:
        entries.reverse()
    entries = entries[:limit] if limit is not None else entries
    if as_json:
        emit_json([{**e.to_json(), "commit_id": e.commit_id} for e in entries])
        return
    table(
        [
            [
                iso(e.at),
                e.kind,
                e.by,
                f"{len(e.dropped)} dropped",
                f"{len(e.redacted)} redacted",
                f"{(e.old_tip or 'none')[:12]} -> {(e.new_tip or 'none')[:12]}",
                e.reason,
            ]
            for e in entries
        ]
    )


def _audit_filter(
    path: str | None, actor: str | None, operation: str | None, since: str | None, until: str | None
) -> audit.AuditFilter:
    """The options as the audit's filter; a time that does not parse is a usage error."""
    try:
        return audit.AuditFilter(
            path=path,
            actor=actor,
            operation=operation,
            since=audit.parse_time(since) if since else None,
            until=audit.parse_time(until) if until else None,
        )
    except InvalidRequest as exc:
        raise click.UsageError(exc.message) from None


def _warn_unattributed(count: int) -> None:
    click.echo(
        f"gitmem: {count} pushed commit(s) have no gitmem note here, so their pusher is unknown"
        " (shown as ?<author e-mail>); fetch the notes with: git fetch origin"
        " refs/notes/gitmem:refs/notes/gitmem",
        err=True,
    )


def _time_option(name: str, help_text: str) -> Callable[[FC], FC]:
    return click.option(name, default=None, metavar="TIME", help=help_text)


@main.command("log")
@click.argument("store_id", required=False)
@click.option(
    "--repo",
    "repo_dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Read a repository of a store instead (a plain clone, or the store's own bare repository).",
)
@click.option("--rev", default=None, help="With --repo: the history to read (default: origin/main, main, HEAD).")
@click.option("--path", default=None, help="Only changes to this note or folder (or a glob such as '/people/*').")
@click.option("--actor", default=None, help="Only changes by this user_..., task_... or apikey_... id, or 'service'.")
@click.option("--operation", type=click.Choice(audit.OPERATIONS), default=None, help="Only this kind of change.")
@_time_option("--since", "Only changes at or after TIME (ISO 8601, or a span back such as 3d, 12h).")
@_time_option("--until", "Only changes at or before TIME.")
@click.option("-n", "--max-count", type=click.IntRange(min=0), default=None, help="At most this many (the newest).")
@click.option("--reverse", is_flag=True, help="Oldest first.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.option("--rewrites", is_flag=True, help="Print the rewrite log instead: every retention, redaction, rotation.")
@workspace_option
@pass_context
@refusals
def log_command(  # type: ignore[no-untyped-def]
    ctx,
    store_id: str | None,
    repo_dir: Path | None,
    rev: str | None,
    path: str | None,
    actor: str | None,
    operation: str | None,
    since: str | None,
    until: str | None,
    max_count: int | None,
    reverse: bool,
    as_json: bool,
    rewrites: bool,
    workspace: str | None,
) -> None:
    """Print who changed which note, when, how, and the version id.

    STORE_ID reads a store of this data home; --repo DIR reads a plain clone (fetch
    refs/notes/gitmem too, to see who pushed: git fetch origin refs/notes/gitmem:refs/notes/gitmem).
    """
    if (store_id is None) == (repo_dir is None):
        raise click.UsageError("give a STORE_ID or --repo DIR (one of them)")
    if rev is not None and repo_dir is None:
        raise click.UsageError("--rev goes with --repo")
    flt = _audit_filter(path, actor, operation, since, until)
    from gitmem.agents.review.review import with_reviews  # review records join the log as `reviewed` entries

    unattributed = 0
    if repo_dir is not None:
        repo = audit.open_repository(repo_dir)
        if rewrites:
            _print_rewrites(repo, max_count, reverse, as_json)
            return
        entries, unattributed = audit.repo_log(repo_dir, rev)
        entries = with_reviews(entries, repo)
    else:
        assert store_id is not None  # noqa: S101  narrows the type for mypy; never a check of input
        store = _operator_store(ctx, store_id, workspace)
        if rewrites:
            _print_rewrites(store.repo, max_count, reverse, as_json)
            return
        entries = with_reviews(audit.store_log(store), store.repo)
    chosen = audit.select(entries, flt, newest_first=not reverse, limit=max_count)
    if as_json:
        emit_json([audit.entry_json(e) for e in chosen])
    else:
        table([audit.row(e) for e in chosen])
    if unattributed:
        _warn_unattributed(unattributed)
