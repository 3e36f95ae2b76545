"""The review mark: a line of review commits on ``refs/reviews/main`` in the store's own repository, each
naming the version approved through by its id (ids survive rewrites; commit ids do not), and where that
version stands in today's history (:func:`mark_seq`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pygit2

from gitmem.clock import iso, to_micros
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import StoreBusy
from gitmem.git import repository
from gitmem.git.commits import author_for
from gitmem.model import Actor, Version

REVIEW_REF = "refs/reviews/main"
_CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class ReviewMark:
    """One review record: who moved the mark, when, and to which version (``None``: nothing approved,
    the store was empty when its review began)."""

    action: str  # "enabled" (the mark set when review began) or "approved"
    version_id: str | None
    version_at: dt.datetime | None
    reviewed_by: Actor | None
    reviewed_at: dt.datetime
    record_id: str  # the record's commit on refs/reviews/main
    commit_id: str | None = None  # the marked version's commit when the record was written


def _trailers(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key:
            found[key] = value.strip()
    return found


def _parse_time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def read_record(commit: pygit2.Commit) -> ReviewMark:
    t = _trailers(commit.message)
    version = t.get("Reviewed-Version")
    return ReviewMark(
        action=t.get("Review-Action", "approved"),
        version_id=None if version in (None, "none") else version,
        version_at=_parse_time(t.get("Reviewed-Version-At")),
        reviewed_by=Actor.from_trailer(t.get("Reviewed-By", "")),
        reviewed_at=_parse_time(t.get("Reviewed-At")) or dt.datetime.fromtimestamp(commit.commit_time, dt.UTC),
        record_id=str(commit.id),
        commit_id=t.get("Reviewed-Commit"),
    )


def _tip(repo: pygit2.Repository) -> pygit2.Commit | None:
    ref = repo.references.get(REVIEW_REF)
    return ref.peel(pygit2.Commit) if ref is not None else None


def current_mark(store: MemoryStore) -> ReviewMark | None:
    tip = _tip(store.repo)
    return read_record(tip) if tip is not None else None


def review_history(store: MemoryStore, limit: int | None = None) -> list[ReviewMark]:
    """The review records, newest first."""
    return records(store.repo, limit)


def records(repo: pygit2.Repository, limit: int | None = None) -> list[ReviewMark]:
    out: list[ReviewMark] = []
    commit = _tip(repo)
    while commit is not None and (limit is None or len(out) < limit):
        out.append(read_record(commit))
        commit = commit.parents[0] if commit.parents else None
    return out


def mark_seq(store: MemoryStore, mark: ReviewMark | None) -> int:
    """The index position of the mark in the current history: versions with a greater ``seq`` are
    pending. Found by version id (ids survive rewrites), else by the marked version's time."""
    if mark is None or mark.version_id is None:
        return 0
    store.index.catch_up()
    row = store.index.version(mark.version_id)
    if row is not None:
        return row.seq
    if mark.version_at is None:
        return 0
    (seq,) = store.index.db.execute(
        "SELECT coalesce(max(seq), 0) FROM versions WHERE created_at<=?", (to_micros(mark.version_at),)
    ).fetchone()
    return int(seq)


def write_record(
    store: MemoryStore, action: str, version: Version | None, actor: Actor | None, now: dt.datetime
) -> ReviewMark:
    """Append one review record to refs/reviews/main (a compare-and-swap, retried)."""
    subject = (
        f"review: {action} through {version.id}" if version is not None else f"review: {action} (nothing written yet)"
    )
    lines = [subject, "", f"Review-Action: {action}", f"Reviewed-Version: {version.id if version else 'none'}"]
    if version is not None:
        lines += [f"Reviewed-Version-At: {iso(version.created_at)}", f"Reviewed-Commit: {version.commit_id}"]
    lines += [f"Reviewed-By: {actor.trailer() if actor else 'null'}", f"Reviewed-At: {iso(now)}"]
    repo = store.repo
    empty_tree = repo.TreeBuilder().write()
    for _ in range(_CAS_ATTEMPTS):
        tip = _tip(repo)
        parent = tip.id if tip is not None else None
        oid = repository.commit(
            repo,
            tree=empty_tree,
            parent=parent,
            author=author_for(actor, now),
            message="\n".join(lines) + "\n",
            signer=store.signer,
        )
        if repository.compare_and_swap(repo, parent, oid, ref=REVIEW_REF, durability=store.durability):
            return read_record(repo[oid].peel(pygit2.Commit))
    raise StoreBusy(f"the review of store {store.id} kept changing; the mark was not moved")
