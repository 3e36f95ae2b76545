"""Commits pushed with plain Git: how their changes become versions.

A pushed commit keeps its id and may change several notes; each changed path is one version whose
ids derive from the commit and the path, so ``reindex`` finds them again. A note moved unchanged to a
new path keeps its id (one ``modified`` version, as a rename through the API).

The push hook (:mod:`gitmem.engine.receive`) records, for every pushed commit, the pusher, the time the push
was accepted and the versions it derived, as a Git note on ``refs/notes/gitmem`` (JSON)::

    {"user_id": "user_...", "created_at": "2026-01-01T12:00:00.000001Z",
     "versions": [{"memory_id": ..., "version_id": ..., "operation": ..., "path": ...,
                   "content_sha256": ..., "content_size": ...}]}

Until ``post-receive`` has written that note, the same record waits in a spool file,
``<repo>/gitmem/pushes/<new tip>.json`` (``{"commits": [ids], "records": {id: note}}``), which
:func:`derive_versions` reads as a fallback so an index that catches up in between still attributes
the versions. The next history rewrite writes them as trailers like any other version.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pygit2

from gitmem import ids
from gitmem.git.commits import VersionRecord
from gitmem.git.repository import blob_at
from gitmem.model import Actor, Operation
from gitmem.rules.paths import api_path

log = logging.getLogger(__name__)

SPOOL_DIR = Path("gitmem") / "pushes"
Decode = Callable[[str, bytes], bytes]  # (api path, blob bytes) -> note bytes


def spool_dir(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / SPOOL_DIR


def spooled_record(repo: pygit2.Repository, commit_id: str) -> dict[str, Any]:
    """The record the push hook spooled for a commit whose Git note is not written yet, or {}."""
    folder = spool_dir(repo)
    if not folder.is_dir():
        return {}
    for spool in sorted(folder.glob("*.json")):
        try:
            data = json.loads(spool.read_text())
        except (OSError, ValueError):
            continue
        if commit_id in data.get("commits", ()):
            record = data.get("records", {}).get(commit_id)
            return dict(record) if isinstance(record, dict) else {}
    return {}


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


def derive_versions(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    note_id_at: Callable[[str], str | None],
    recorded: Mapping[str, object],
    decode: Decode | None = None,
) -> list[VersionRecord]:
    """The versions a pushed commit makes, in the order they apply.

    ``recorded`` is the commit's Git note (``{}`` if there is none; then the push spool is read).
    ``note_id_at`` answers which note sits at an API path just before this commit. ``decode`` turns
    blob bytes into note bytes (for encrypted stores; a recorded note already holds the plaintext
    digests).
    """
    if not recorded:
        recorded = spooled_record(repo, str(commit.id))
    pusher = recorded.get("user_id")
    actor = Actor("user_actor", str(pusher)) if pusher else None
    when = (
        _time(recorded["created_at"])
        if recorded.get("created_at")
        else dt.datetime.fromtimestamp(commit.author.time, dt.UTC)
    )
    if isinstance(recorded.get("versions"), list):
        try:
            return _recorded_versions(recorded["versions"], actor, when)  # type: ignore[arg-type]
        except (KeyError, TypeError):
            log.warning("the gitmem note of %s is malformed; deriving its versions again", commit.id)

    changes = changed_paths(repo, commit)
    parent_tree = repo[commit.parent_ids[0]].tree if commit.parent_ids else None
    # Notes the commit removes (paths that held a note), and which blob each held, to spot moves.
    removed: dict[str, str] = {}
    removed_by_blob: dict[pygit2.Oid, str] = {}
    for tree_path in sorted(p for p, blob in changes.items() if blob is None):
        memory_id = note_id_at(api_path(tree_path))
        if memory_id is None:
            continue
        removed[tree_path] = memory_id
        if parent_tree is not None:
            removed_by_blob.setdefault(parent_tree[tree_path].id, tree_path)

    def new_ids(path: str) -> tuple[str, str]:
        return ids.derived_id(ids.MEMORY, str(commit.id), path), ids.derived_id(ids.VERSION, str(commit.id), path)

    written: list[VersionRecord] = []
    for tree_path, blob in sorted((p, b) for p, b in changes.items() if b is not None):
        path = api_path(tree_path)
        memory_id, version_id = new_ids(path)
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
            memory_id, new_ids(api_path(tree_path))[1], "deleted", api_path(tree_path), None, None, actor, when, when
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
