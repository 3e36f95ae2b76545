"""The audit log: who changed which note, when, how, as which version (``gitmem log``).

Two sources give the same entries:

- a store on the server (:func:`store_log`), read from its index;
- any repository of a store, a plain ``git clone`` included (:func:`repo_log`), read from the commits
  alone: API writes carry their version in trailers (:func:`gitmem.git.commits.parse_message`); pushed
  commits are replayed with :func:`gitmem.git.pushes.derive_versions` and attributed by their Git note on
  ``refs/notes/gitmem`` if it was fetched (``git fetch origin refs/notes/gitmem:refs/notes/gitmem``).
  Without the notes a pushed change still shows, with the commit author's e-mail and no user id.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitmem import ids
from gitmem.errors import InvalidRequest, NotFound
from gitmem.git import pushes
from gitmem.git.commits import SERVICE, VersionRecord, parse_message
from gitmem.git.replay import Notes
from gitmem.git.repository import MAIN, NOTES_REF
from gitmem.model import Actor
from gitmem.rules.paths import git_path

OPERATIONS = ("created", "modified", "deleted")
SERVICE_NAMES = ("service", "gitmem", "null")
_ACTOR_PREFIXES = {ids.USER: "user_actor", ids.TASK: "task_actor", ids.API_KEY: "api_actor"}
_RELATIVE = re.compile(r"^(\d+)\s*(s|sec|second|m|min|minute|h|hour|d|day|w|week)s?(\s+ago)?$", re.I)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class AuditEntry:
    """One version: one change to one note."""

    created_at: dt.datetime
    created_by: Actor | None
    operation: str
    path: str | None  # None once redacted
    memory_id: str
    version_id: str
    commit_id: str
    previous_path: str | None = None  # set when the change moved the note
    redacted_at: dt.datetime | None = None
    attributed: bool = True  # False: a pushed change whose gitmem note is not in this repository
    git_author: str | None = None  # the pushed commit's author (a person's own Git identity)

    @property
    def is_move(self) -> bool:
        return self.previous_path is not None and self.previous_path != self.path


def time_text(when: dt.datetime) -> str:
    """UTC ISO 8601 with microseconds, so entries order and compare like the API's versions."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_span(text: str) -> dt.timedelta | None:
    """A span of time such as ``30d``, ``12h``, ``90m`` or ``2 weeks ago``; None if ``text`` is not one."""
    match = _RELATIVE.match(text.strip())
    if match is None:
        return None
    amount, unit = int(match.group(1)), match.group(2)[0].lower()
    return dt.timedelta(**{_UNITS[unit]: amount})


def parse_time(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """An ISO 8601 date or time (UTC unless it says otherwise), or a span back from now: ``3d``,
    ``12h``, ``2 weeks ago``."""
    text = text.strip()
    span = parse_span(text)
    if span is not None:
        return (now or dt.datetime.now(dt.UTC)) - span
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            f"cannot read {text!r} as a time: use ISO 8601 (2026-01-31, "
            "2026-01-31T12:00:00Z) or a span such as 3d, 12h, '2 weeks ago'"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def parse_actor(text: str) -> Actor | None:
    """``user_...``, ``task_...``, ``apikey_...`` (or ``service`` for gitmem itself: returns None)."""
    text = text.strip()
    if text.lower() in SERVICE_NAMES:
        return None
    kind, _, value = text.partition(" ")
    if kind in _ACTOR_PREFIXES.values() and value:  # the trailer form, "user_actor user_id=user_..."
        found = Actor.from_trailer(text)
        if found is not None:
            return found
    for prefix, actor_type in _ACTOR_PREFIXES.items():
        if ids.has_prefix(text, prefix):
            return Actor(actor_type, text)  # type: ignore[arg-type]
    raise InvalidRequest(f"unknown actor {text!r}: give a user_..., task_... or apikey_... id, or 'service'")


@dataclass(frozen=True)
class AuditFilter:
    path: str | None = None
    actor: str | None = None
    operation: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.operation is not None and self.operation not in OPERATIONS:
            raise InvalidRequest(f"operation must be one of {', '.join(OPERATIONS)}")
        if self.actor is not None:
            parse_actor(self.actor)  # refuse a malformed actor at once

    def _path_matches(self, path: str | None) -> bool:
        if path is None or self.path is None:
            return False
        want = self.path
        if any(ch in want for ch in "*?["):
            return fnmatch.fnmatchcase(path, want)
        folder = want if want.endswith("/") else want + "/"
        return path == want or path.startswith(folder)

    def matches(self, entry: AuditEntry) -> bool:
        if self.path is not None and not (self._path_matches(entry.path) or self._path_matches(entry.previous_path)):
            return False
        if self.actor is not None and actor_name(entry.created_by) != actor_name(parse_actor(self.actor)):
            return False
        if self.operation is not None and entry.operation != self.operation:
            return False
        if self.since is not None and entry.created_at < self.since:
            return False
        return not (self.until is not None and entry.created_at > self.until)


def select(
    entries: Iterable[AuditEntry], flt: AuditFilter, *, newest_first: bool = True, limit: int | None = None
) -> list[AuditEntry]:
    """Filter chronological entries; newest first unless told otherwise; at most ``limit`` (newest)."""
    chosen = [e for e in entries if flt.matches(e)]
    if limit is not None:
        chosen = chosen[-limit:] if limit > 0 else []
    return list(reversed(chosen)) if newest_first else chosen


def _replayed(notes: Notes, record: VersionRecord, in_tree: bool) -> str | None:
    """Replay one version (:mod:`gitmem.git.replay`); the note's path before it."""
    before = notes.path_of(record.memory_id)
    notes.apply(record, in_tree=in_tree)
    return before


def _entry(record: VersionRecord, commit_id: str, before: str | None, **extra: object) -> AuditEntry:
    moved = before if record.operation == "modified" and before is not None and before != record.path else None
    return AuditEntry(
        created_at=record.created_at,
        created_by=record.created_by,
        operation=record.operation,
        path=record.path,
        memory_id=record.memory_id,
        version_id=record.version_id,
        commit_id=commit_id,
        previous_path=moved,
        redacted_at=record.redacted_at,
        **extra,  # type: ignore[arg-type]
    )


# -- a store on the server ------------------------------------------------------------------------


def store_log(store: object) -> list[AuditEntry]:
    """Every version of a :class:`gitmem.engine.store.store.MemoryStore`, oldest first, from its index."""
    index = store.index  # type: ignore[attr-defined]
    index.catch_up()
    notes = Notes()
    entries = []
    for row in index.all_versions():
        before = _replayed(notes, row.record, in_tree=row.blob_id is not None)
        entries.append(_entry(row.record, row.commit_id, before))
    return entries


# -- any repository of a store: a clone, a mirror, the bare store itself --------------------------


def open_repository(path: Path) -> pygit2.Repository:
    found = pygit2.discover_repository(str(path))
    if found is None:
        raise NotFound(f"no Git repository at {path}")
    return pygit2.Repository(found)


def resolve_tip(repo: pygit2.Repository, rev: str | None = None) -> pygit2.Commit | None:
    """``rev``, else the store's main as last fetched (``origin/main``), else ``main``, else HEAD."""
    candidates = [rev] if rev else ["refs/remotes/origin/main", MAIN, "HEAD"]
    for name in candidates:
        try:
            return repo.revparse_single(name).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            if rev:
                raise NotFound(f"no commit {rev!r} in {repo.path}") from None
    return None


def repo_log(path: Path, rev: str | None = None, notes_ref: str = NOTES_REF) -> tuple[list[AuditEntry], int]:
    """Every version in a repository's history of main, oldest first, and how many pushed commits had
    no gitmem record (their changes are listed without a user)."""
    repo = open_repository(path)
    tip = resolve_tip(repo, rev)
    if tip is None:
        return [], 0
    chain: list[pygit2.Commit] = []
    commit: pygit2.Commit | None = tip
    while commit is not None:
        chain.append(commit)
        commit = commit.parents[0] if commit.parent_ids else None
    notes = Notes()
    entries: list[AuditEntry] = []
    unattributed = 0
    for commit in reversed(chain):
        commit_id = str(commit.id)
        records = parse_message(commit.message)
        extra: dict[str, object] = {}
        if not records:
            records = pushes.derive_versions(repo, commit, notes.note_at, notes_ref=notes_ref)
            extra["git_author"] = f"{commit.author.name} <{commit.author.email}>"
            if records and records[0].created_by is None:  # no record of the push names its pusher
                unattributed += 1
                extra["attributed"] = False
        for record in records:
            in_tree = record.path is None or git_path(record.path) in commit.tree
            before = _replayed(notes, record, in_tree)
            entries.append(_entry(record, commit_id, before, **extra))
    return entries, unattributed


# -- output ---------------------------------------------------------------------------------------


def actor_name(actor: Actor | None) -> str:
    """How every command names an actor: its id, or ``service`` for gitmem itself (``None`` or its
    service account)."""
    if actor is None or actor.type == "service_account_actor":
        return SERVICE
    return actor.id


def actor_text(entry: AuditEntry) -> str:
    if entry.created_by is None and not entry.attributed:
        email = entry.git_author.rsplit("<", 1)[-1].rstrip(">") if entry.git_author else ""
        return f"?{email}" if email else "?"
    return actor_name(entry.created_by)


def path_text(entry: AuditEntry) -> str:
    if entry.redacted_at is not None or entry.path is None:
        return "(redacted)"
    if entry.is_move:
        return f"{entry.previous_path} -> {entry.path}"
    return entry.path


def row(entry: AuditEntry) -> list[str]:
    """An entry as ``gitmem log`` prints it: time, actor, operation, path, version id."""
    return [time_text(entry.created_at), actor_text(entry), entry.operation, path_text(entry), entry.version_id]


def entry_json(entry: AuditEntry) -> dict[str, object]:
    data: dict[str, object] = {
        "created_at": time_text(entry.created_at),
        "created_by": entry.created_by.as_dict() if entry.created_by else None,
        "operation": entry.operation,
        "path": entry.path,
        "previous_path": entry.previous_path if entry.is_move else None,
        "memory_id": entry.memory_id,
        "version_id": entry.version_id,
        "commit_id": entry.commit_id,
        "redacted_at": time_text(entry.redacted_at) if entry.redacted_at else None,
    }
    if entry.git_author is not None:
        data["git_author"] = entry.git_author
    if not entry.attributed:
        data["attributed"] = False
    return data
