"""Commits pushed with plain Git: how their changes become versions.

A pushed commit keeps its id and may change several notes; each changed path is one version whose
ids derive from the commit and the path, so ``reindex`` finds them again. The push hook records the
pusher (and any ids it chose) as a Git note on ``refs/notes/gitmem``; the next history rewrite writes
them as trailers like any other version.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Mapping

import pygit2

from gitmem import ids
from gitmem.commits import VersionRecord
from gitmem.model import Actor
from gitmem.paths import api_path


def changed_paths(repo: pygit2.Repository, commit: pygit2.Commit) -> dict[str, pygit2.Oid | None]:
    """Tree path -> new blob id (None if removed) for every note the commit changes."""
    parent_tree = repo[commit.parent_ids[0]].tree if commit.parent_ids else None
    diff = (commit.tree.diff_to_tree(parent_tree, swap=True) if parent_tree is not None
            else commit.tree.diff_to_tree(swap=True))
    changes: dict[str, pygit2.Oid | None] = {}
    for delta in diff.deltas:
        if delta.status_char() in "DR":
            changes[delta.old_file.path] = None
        if delta.status_char() in "AMRT":
            changes[delta.new_file.path] = delta.new_file.id
    return changes


def derive_versions(repo: pygit2.Repository, commit: pygit2.Commit, note_id_at: Callable[[str], str | None],
                    recorded: Mapping[str, object]) -> list[VersionRecord]:
    changes = changed_paths(repo, commit)
    when = dt.datetime.fromtimestamp(commit.author.time, dt.UTC)
    pusher = recorded.get("user_id")
    actor = Actor("user_actor", str(pusher)) if pusher else None
    if recorded.get("created_at"):
        when = dt.datetime.fromisoformat(str(recorded["created_at"]).replace("Z", "+00:00"))
    removed = {p: note_id_at(api_path(p)) for p, blob in changes.items() if blob is None}
    removed_blobs = {}
    parent_tree = repo[commit.parent_ids[0]].tree if commit.parent_ids else None
    for tree_path in removed:
        if parent_tree is not None:
            removed_blobs.setdefault(parent_tree[tree_path].id, tree_path)
    records: list[VersionRecord] = []
    for tree_path, blob in sorted(changes.items(), key=lambda item: (item[1] is None, item[0])):
        path = api_path(tree_path)
        memory_id, version_id = (ids.derived_id(ids.MEMORY, str(commit.id), path),
                                 ids.derived_id(ids.VERSION, str(commit.id), path))
        if blob is None:
            memory_id = removed.get(tree_path) or memory_id
            if memory_id is None or tree_path not in removed or removed[tree_path] is None:
                continue
            records.append(VersionRecord(memory_id, version_id, "deleted", path, None, None, actor, when, when))
            continue
        data = repo[blob].data
        existing = note_id_at(path)
        operation = "modified" if existing else "created"
        if existing:
            memory_id = existing
        elif blob in removed_blobs:  # moved unchanged: a rename keeps the note's id
            old_path = removed_blobs.pop(blob)
            memory_id = removed.pop(old_path) or memory_id
            operation = "modified"
        records.append(VersionRecord(memory_id, version_id, operation, path, hashlib.sha256(data).hexdigest(),
                                     len(data), actor, when, when))
    return records
