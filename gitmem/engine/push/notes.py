"""What an accepted push leaves behind: its record spooled by pre-receive, then written by post-receive
as Git notes on ``refs/notes/gitmem`` (the record's JSON is :class:`gitmem.git.pushes.PushRecord`'s).

The spool, ``gitmem/pushes/<new>.json``, is written before Git moves ``main``; until post-receive has
turned it into notes (a compare-and-swap of the notes ref, so no concurrent note is lost), the index
reads it (:func:`gitmem.git.pushes.read_push_record`), so attribution never depends on timing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.durable import DURABLE, Durability
from gitmem.errors import GitmemError
from gitmem.git import pushes, repository
from gitmem.git.signing import Signer, write_commit

if TYPE_CHECKING:
    from gitmem.engine.push.check import Verdict  # pre-receive's: post-receive loads no checks

NOTES_CAS_ATTEMPTS = 50
STALE_SPOOL_SECONDS = 600.0
NOTES_AUTHOR = ("gitmem", "gitmem@localhost")


def write_spool(repo: pygit2.Repository, store_id: str, user_id: str, old: str, new: str, verdict: Verdict) -> Path:
    """Spool an accepted push's records (fsynced) before Git moves ``main``."""
    folder = pushes.spool_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    spool = folder / f"{new}.json"
    data = {
        "store_id": store_id,
        "user_id": user_id,
        "ref": repository.MAIN,
        "old": old,
        "new": new,
        "created_at": next(iter(verdict.records.values()))["created_at"] if verdict.records else None,
        "commits": verdict.commits,
        "records": verdict.records,
    }
    tmp = spool.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, spool)
    return spool


def _note_text(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"


def write_notes(
    repo: pygit2.Repository,
    records: Mapping[str, Mapping[str, Any]],
    signer: Signer | None,
    durability: Durability = DURABLE,
) -> pygit2.Oid | None:
    """Add one note per commit on ``refs/notes/gitmem`` in one notes commit, signed by the home's key (a
    pushed commit keeps its own bytes; the record of who pushed it is what gitmem signs), swapped in
    with a CAS."""
    if not records:
        return None
    blobs = {commit_id: repo.create_blob(_note_text(record).encode()) for commit_id, record in records.items()}
    for _attempt in range(NOTES_CAS_ATTEMPTS):
        ref = repo.references.get(repository.NOTES_REF)
        old = repository.direct_target(ref) if ref is not None else None
        base = repo[old].tree if old is not None else None
        tree = repository.tree_with(repo, base, blobs)
        now = int(time.time())
        sig = pygit2.Signature(*NOTES_AUTHOR, now, 0)
        subject = f"Notes added by gitmem for {len(records)} pushed commit{'s' if len(records) > 1 else ''}"
        parents = [old] if old is not None else []
        commit = write_commit(
            repo, signer, author=sig, committer=sig, message=subject + "\n", tree=tree, parents=parents
        )
        if repository.compare_and_swap(repo, old, commit, ref=repository.NOTES_REF, durability=durability):
            return commit
    raise GitmemError("refs/notes/gitmem kept changing; the push notes were not written")


def settle_spool(
    repo: pygit2.Repository,
    signer: Signer | None = None,
    *,
    stale_after: float = STALE_SPOOL_SECONDS,
    durability: Durability = DURABLE,
) -> int:
    """Write the notes of every spooled push that reached main, then drop its spool; drop spools of
    pushes that never landed once they are old. Returns how many spools were settled."""
    folder = pushes.spool_dir(repo)
    if not folder.is_dir():
        return 0
    tip = repository.read_tip(repo)
    settled = 0
    for spool in pushes.spools(Path(repo.path)):
        landed = tip is not None and spool.new and (str(tip) == spool.new or _is_ancestor(repo, spool.new, tip))
        if landed:
            write_notes(repo, {c: r for c, r in spool.records.items() if _note(repo, c) is None}, signer, durability)
        elif time.time() - spool.path.stat().st_mtime < stale_after:
            continue  # a push still under way (or one that failed a moment ago)
        spool.path.unlink(missing_ok=True)
        settled += 1
    for tmp in folder.glob("*.tmp*"):
        if time.time() - tmp.stat().st_mtime > stale_after:
            tmp.unlink(missing_ok=True)
    return settled


def _is_ancestor(repo: pygit2.Repository, commit_id: str, tip: pygit2.Oid) -> bool:
    try:
        return repo.descendant_of(tip, commit_id)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _note(repo: pygit2.Repository, commit_id: str) -> pygit2.Note | None:
    try:
        return repo.lookup_note(commit_id, repository.NOTES_REF)
    except KeyError:
        return None
