"""Commits pushed with plain Git: how their changes become versions.

A pushed commit keeps its id and may change several notes; each changed path is one version whose
ids derive from the commit and the path, so ``reindex`` finds them again. A note moved unchanged to a
new path keeps its id (one ``modified`` version, as a rename through the API).

The push hook (:mod:`gitmem.engine.push.receive`) records, for every pushed commit, the pusher, the time the push
was accepted and the versions it derived, as a Git note on ``refs/notes/gitmem`` (JSON)::

    {"user_id": "user_...", "created_at": "2026-01-01T12:00:00.000001Z",
     "versions": [{"memory_id": ..., "version_id": ..., "operation": ..., "path": ...,
                   "content_sha256": ..., "content_size": ...}]}

Until ``post-receive`` has written that note, the same record waits in a spool file,
``<repo>/gitmem/pushes/<new tip>.json`` (``{"commits": [ids], "records": {id: note}}``), which
:func:`read_push_record` reads as a fallback so an index that catches up in between still attributes
the versions. :class:`PushRecord` is the one reader and writer of that JSON. The next history rewrite
writes the versions as trailers like any other version.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pygit2

from gitmem import ids
from gitmem.git.commits import VersionRecord
from gitmem.git.repository import NOTES_REF, blob_at
from gitmem.model import Actor, Operation
from gitmem.rules.paths import api_path

log = logging.getLogger(__name__)

SPOOL_DIR = Path("gitmem") / "pushes"
Decode = Callable[[str, bytes], bytes]  # (api path, blob bytes) -> note bytes


def spool_dir(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / SPOOL_DIR


@dataclass(frozen=True)
class Spool:
    """A push's records waiting for post-receive: ``gitmem/pushes/<new tip>.json``."""

    path: Path
    old: str  # main before the push
    new: str  # main after it
    commits: tuple[str, ...]
    records: dict[str, dict[str, Any]]  # commit id -> its record's JSON (:meth:`PushRecord.to_json`)


def spools(repo_path: Path) -> list[Spool]:
    """The spools of a repository, in name order; files that cannot be read (yet) are skipped."""
    found = []
    for path in sorted((repo_path / SPOOL_DIR).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            records = data.get("records") or {}
            found.append(
                Spool(
                    path,
                    str(data.get("old", "")),
                    str(data.get("new", "")),
                    tuple(str(c) for c in data.get("commits", ())),
                    {str(c): r for c, r in records.items() if isinstance(r, dict)},
                )
            )
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return found


def spooled_record(repo: pygit2.Repository, commit_id: str) -> dict[str, Any]:
    """The record the push hook spooled for a commit whose Git note is not written yet, as JSON, or {}."""
    for spool in spools(Path(repo.path)):
        if commit_id in spool.commits:
            return dict(spool.records.get(commit_id, {}))
    return {}


@dataclass(frozen=True)
class PushRecord:
    """What the push hook records of one pushed commit: the pusher, when the push was accepted and the
    versions the commit makes (``None``: not recorded, derive them from the commit)."""

    user_id: str | None = None
    created_at: dt.datetime | None = None
    store_id: str | None = None
    versions: tuple[VersionRecord, ...] | None = None

    @property
    def actor(self) -> Actor | None:
        return Actor("user_actor", self.user_id) if self.user_id else None

    @classmethod
    def parse(cls, data: object, default_time: dt.datetime, commit_id: str = "?") -> PushRecord | None:
        """The record in a Git note's (or a spool's) JSON; ``None`` if it is not a record at all. Versions
        take the record's time, else ``default_time`` (the commit's); malformed ones are left to derive."""
        if not isinstance(data, dict):
            return None
        user_id = str(data["user_id"]) if data.get("user_id") else None
        try:
            created_at = _time(data["created_at"]) if data.get("created_at") else None
        except ValueError:
            log.warning("the gitmem note of %s has an unreadable time; using the commit's", commit_id)
            created_at = None
        record = cls(user_id, created_at, str(data["store_id"]) if data.get("store_id") else None)
        items = data.get("versions")
        if not isinstance(items, list):
            return record
        try:
            versions = _recorded_versions(items, record.actor, created_at or default_time)
        except (KeyError, TypeError, AttributeError):
            log.warning("the gitmem note of %s is malformed; deriving its versions again", commit_id)
            return record
        return replace(record, versions=tuple(versions))

    def to_json(self) -> dict[str, object]:
        """The record as the push hook writes it (the versions as :func:`version_json`)."""
        data: dict[str, object] = {"user_id": self.user_id}
        if self.created_at is not None:
            data["created_at"] = self.created_at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if self.store_id is not None:
            data["store_id"] = self.store_id
        if self.versions is not None:
            data["versions"] = [version_json(v) for v in self.versions]
        return data


def _commit_time(commit: pygit2.Commit) -> dt.datetime:
    return dt.datetime.fromtimestamp(commit.author.time, dt.UTC)


def read_push_record(repo: pygit2.Repository, commit: pygit2.Commit, notes_ref: str = NOTES_REF) -> PushRecord | None:
    """A pushed commit's record: its Git note on ``notes_ref``, else the push spool; ``None`` if neither
    has one (a clone that did not fetch the notes, or a commit pushed before the hook existed)."""
    commit_id = str(commit.id)
    try:
        data: object = json.loads(repo.lookup_note(commit_id, notes_ref).message)
    except (KeyError, ValueError, pygit2.GitError):
        data = None
    if not isinstance(data, dict) or not data:
        data = spooled_record(repo, commit_id)
    return PushRecord.parse(data, _commit_time(commit), commit_id) if data else None


def changed_paths(repo: pygit2.Repository, commit: pygit2.Commit) -> dict[str, pygit2.Oid | None]:
    """Tree path -> new blob id (None if removed) for every note the commit changes."""
    parent_tree = repo[commit.parent_ids[0]].tree if commit.parent_ids else None
    diff = (
        commit.tree.diff_to_tree(parent_tree, swap=True)
        if parent_tree is not None
        else commit.tree.diff_to_tree(swap=True)
    )
    changes: dict[str, pygit2.Oid | None] = {}
    for delta in diff.deltas:
        if delta.status_char() in "DR":
            changes[delta.old_file.path] = None
        if delta.status_char() in "AMRT":
            changes[delta.new_file.path] = delta.new_file.id
    return changes


def _time(text: object) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _recorded_versions(items: list[Any], actor: Actor | None, when: dt.datetime) -> list[VersionRecord]:
    return [
        VersionRecord(
            memory_id=str(v["memory_id"]),
            version_id=str(v["version_id"]),
            operation=v["operation"],
            path=v.get("path"),
            content_sha256=v.get("content_sha256"),
            content_size=v.get("content_size"),
            created_by=actor,
            created_at=when,
            note_created_at=when,
        )
        for v in items
    ]


def _removed_notes(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    changes: dict[str, pygit2.Oid | None],
    note_id_at: Callable[[str], str | None],
) -> tuple[dict[str, str], dict[pygit2.Oid, str]]:
    """The notes the commit removes (tree path -> the note's id, for paths that held a note), and which
    blob each held (blob -> tree path), to spot moves."""
    parent_tree = repo[commit.parent_ids[0]].tree if commit.parent_ids else None
    removed: dict[str, str] = {}
    removed_by_blob: dict[pygit2.Oid, str] = {}
    for tree_path in sorted(p for p, blob in changes.items() if blob is None):
        memory_id = note_id_at(api_path(tree_path))
        if memory_id is None:
            continue
        removed[tree_path] = memory_id
        if parent_tree is not None:
            removed_by_blob.setdefault(parent_tree[tree_path].id, tree_path)
    return removed, removed_by_blob


def _derived_ids(commit: pygit2.Commit, path: str) -> tuple[str, str]:
    """The note and version ids a pushed commit's change at ``path`` gets: derived, so reindex finds them again."""
    return ids.derived_id(ids.MEMORY, str(commit.id), path), ids.derived_id(ids.VERSION, str(commit.id), path)


def derive_versions(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    note_id_at: Callable[[str], str | None],
    recorded: PushRecord | None = None,
    decode: Decode | None = None,
    notes_ref: str = NOTES_REF,
) -> list[VersionRecord]:
    """The versions a pushed commit makes, in the order they apply.

    ``recorded`` is the commit's record (read with :func:`read_push_record` from ``notes_ref`` if not
    given). ``note_id_at`` answers which note sits at an API path just before this commit (the
    replay's state, :mod:`gitmem.git.replay`). ``decode`` turns blob bytes into note bytes (for
    encrypted stores; a recorded note already holds the plaintext digests).
    """
    if recorded is None:
        recorded = read_push_record(repo, commit, notes_ref) or PushRecord()
    if recorded.versions is not None:
        return list(recorded.versions)
    actor = recorded.actor
    when = recorded.created_at or _commit_time(commit)

    changes = changed_paths(repo, commit)
    removed, removed_by_blob = _removed_notes(repo, commit, changes, note_id_at)
    written: list[VersionRecord] = []
    for tree_path, blob in sorted((p, b) for p, b in changes.items() if b is not None):
        path = api_path(tree_path)
        memory_id, version_id = _derived_ids(commit, path)
        data = blob_at(repo, blob).data
        if decode is not None:
            data = decode(path, data)
        existing = note_id_at(path)
        operation: Operation = "created"
        if existing:
            memory_id, operation = existing, "modified"
        elif blob in removed_by_blob:  # moved unchanged: a rename keeps the note's id
            memory_id = removed.pop(removed_by_blob.pop(blob))
            operation = "modified"
        written.append(
            VersionRecord(
                memory_id, version_id, operation, path, hashlib.sha256(data).hexdigest(), len(data), actor, when, when
            )
        )
    deleted = [
        VersionRecord(
            memory_id,
            _derived_ids(commit, api_path(tree_path))[1],
            "deleted",
            api_path(tree_path),
            None,
            None,
            actor,
            when,
            when,
        )
        for tree_path, memory_id in sorted(removed.items())
    ]
    return deleted + written


def version_json(record: VersionRecord) -> dict[str, object]:
    """How a derived version is recorded in a push's Git note."""
    return {
        "memory_id": record.memory_id,
        "version_id": record.version_id,
        "operation": record.operation,
        "path": record.path,
        "content_sha256": record.content_sha256,
        "content_size": record.content_size,
    }
