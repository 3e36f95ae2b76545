"""The steward's review: which versions of a store a person has approved, and the tools to approve,
revert and read only what was approved.

A store under review has a **mark**: the newest version a reviewer approved. Every version after it is
pending. The mark is history, kept in Git beside the notes: ``refs/reviews/main`` is a line of review
records, one commit per review, authored by the reviewer at the time of the review, each naming the
version approved through in its trailers (``Reviewed-Version``, ``Reviewed-Version-At``,
``Reviewed-Commit``). A clone fetches it with ``git fetch origin refs/reviews/main:refs/reviews/main``
(``refs/gitmem`` is hidden from clones; ``refs/reviews`` is not, and pushes to it are refused because
only ``main`` may be pushed).

The records name versions, never commit objects: retention, redaction and key rotation rewrite
``main`` and change every commit id, and a record that pointed at an old commit would keep the
dropped content reachable. A version id survives every rewrite, so the mark is found again in the new
history through the index; if retention dropped the marked version itself, the mark falls back to its
recorded time (every version at or before it counts as approved).

Whether a store is under review, and whether its tasks read only the approved state
(``read_approved_only``), are settings in the catalog (``store_reviews``).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import pygit2

from gitmem.clock import iso, to_micros
from gitmem.db.migrations import Migration
from gitmem.engine.audit.log import AuditEntry
from gitmem.engine.catalog.catalog import Principal, principal_task_id
from gitmem.engine.gitmem import Gitmem, HomeTables
from gitmem.engine.rewrite import locked_git
from gitmem.engine.store.diff import VersionDiff
from gitmem.engine.store.store import MemoryStore, check_limit
from gitmem.errors import InvalidRequest, NotFound, PermissionDenied, StoreBusy
from gitmem.git import repository
from gitmem.git.commits import author_for
from gitmem.model import Actor, Page, Version

log = logging.getLogger(__name__)

REVIEW_REF = "refs/reviews/main"
MAX_PENDING_PAGE = 100
_CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class ReviewSettings:
    store_id: str
    enabled: bool = False
    read_approved_only: bool = False


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


@dataclass(frozen=True)
class PendingChange:
    """A version written since the mark, with what it changed."""

    version: Version
    diff: VersionDiff


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
    return _records(store.repo, limit)


def _records(repo: pygit2.Repository, limit: int | None = None) -> list[ReviewMark]:
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


def _write_record(
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
            repo, tree=empty_tree, parent=parent, author=author_for(actor, now), message="\n".join(lines) + "\n"
        )
        if repository.compare_and_swap(repo, parent, oid, ref=REVIEW_REF):
            return read_record(repo[oid].peel(pygit2.Commit))
    raise StoreBusy(f"the review of store {store.id} kept changing; the mark was not moved")


def check_reviewer(gm: Gitmem, principal: Principal, store_id: str) -> None:
    """A reviewer is a user with write access to the store, or an admin key; a read-write key (what
    agents and scripts are given) and a task never review. The API and the web view both ask this."""
    from gitmem.access import require_access  # access builds on tasks and profiles

    person = principal.actor.type == "user_actor" or (principal.actor.type == "api_actor" and principal.role == "admin")
    if not person or principal_task_id(principal) is not None:
        raise PermissionDenied("only a user with write access or an admin key may review a store")
    require_access(gm, principal, store_id, write=True)


class Reviews(HomeTables):
    """Review settings (catalog table ``store_reviews``) and the review operations of a data home."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS store_reviews (
        store_id TEXT PRIMARY KEY, enabled INTEGER NOT NULL DEFAULT 0,
        read_approved_only INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL);
    """
    MIGRATIONS = (Migration("reviews", 1, SCHEMA),)

    def settings(self, store_id: str) -> ReviewSettings:
        row = self.db.execute("SELECT * FROM store_reviews WHERE store_id=?", (store_id,)).fetchone()
        if row is None:
            return ReviewSettings(store_id)
        return ReviewSettings(store_id, bool(row["enabled"]), bool(row["read_approved_only"]))

    def configure(
        self,
        workspace_id: str,
        store_id: str,
        *,
        enabled: bool | None = None,
        read_approved_only: bool | None = None,
        actor: Actor | None = None,
    ) -> ReviewSettings:
        """Turn review (and reading only the approved state) on or off. Turning review on for the
        first time sets the mark at the current tip: what was there before is taken as approved."""
        info = self.gm.get_store(workspace_id, store_id)
        if info.kind == "bank":
            raise InvalidRequest("a profile's bank cannot be put under review")
        old = self.settings(store_id)
        if enabled is False and read_approved_only is None:
            read_approved_only = False  # no review, so no approved state to read
        new = ReviewSettings(
            store_id,
            old.enabled if enabled is None else bool(enabled),
            old.read_approved_only if read_approved_only is None else bool(read_approved_only),
        )
        if new.read_approved_only and not new.enabled:
            raise InvalidRequest('read_approved_only needs review: set "review": true as well')
        with self.catalog.transaction() as db:
            db.execute(
                "INSERT INTO store_reviews VALUES (?,?,?,?) ON CONFLICT(store_id) DO UPDATE SET"
                " enabled=excluded.enabled, read_approved_only=excluded.read_approved_only,"
                " updated_at=excluded.updated_at",
                (store_id, int(new.enabled), int(new.read_approved_only), self._now()),
            )
        if new.enabled:
            store = self.gm.store(workspace_id, store_id)
            if current_mark(store) is None:
                _write_record(store, "enabled", self._newest(store), actor, self.gm.clock())
        return new

    @staticmethod
    def _newest(store: MemoryStore) -> Version | None:
        page = store.versions(limit=1)
        return page.items[0] if page.items else None

    def _require_enabled(self, store: MemoryStore) -> None:
        if not self.settings(store.id).enabled:
            raise InvalidRequest(
                f'memory store {store.id} is not under review; enable it with "review": true or `gitmem review enable`'
            )

    # -- what is pending ------------------------------------------------------------------------------

    def pending(self, store: MemoryStore, limit: int = 20, page: str | None = None) -> Page[PendingChange]:
        """Versions written since the mark, oldest first, each with its diff against the note's
        version before it."""
        self._require_enabled(store)
        check_limit(limit, MAX_PENDING_PAGE, full=False)
        after = mark_seq(store, current_mark(store))
        tokens = store.index.tokens  # the store's signed page tokens
        if page is not None:
            (seq,) = tokens.decode(page, "review", int)
            after = max(after, seq)
        rows = store.index.db.execute(
            "SELECT version_id, seq FROM versions WHERE seq>? ORDER BY seq LIMIT ?", (after, limit + 1)
        ).fetchall()
        diffs = [store.diff(r[0]) for r in rows[:limit]]
        items = [PendingChange(d.new, d) for d in diffs]
        return Page(items, tokens.encode("review", rows[limit - 1][1]) if len(rows) > limit else None)

    def pending_count(self, store: MemoryStore) -> int:
        after = mark_seq(store, current_mark(store))
        (count,) = store.index.db.execute("SELECT count(*) FROM versions WHERE seq>?", (after,)).fetchone()
        return int(count)

    # -- the reviewer's actions ---------------------------------------------------------------------

    def approve(self, store: MemoryStore, through_version_id: str, actor: Actor | None) -> ReviewMark:
        """Move the mark to ``through_version_id`` (it and every version before it are approved).
        Approving what is already approved changes nothing."""
        self._require_enabled(store)
        with locked_git.writer_lock(store):  # no rewrite renumbers the history meanwhile, on any node
            version = store.version(through_version_id, with_content=False)
            mark = current_mark(store)
            row = store.index.version(through_version_id)
            assert row is not None
            if mark is not None and row.seq <= mark_seq(store, mark):
                return mark
            return _write_record(store, "approved", version, actor, self.gm.clock())

    def revert(self, store: MemoryStore, version_id: str, actor: Actor | None) -> Version:
        """A new version that puts back what the note held before ``version_id`` (deleting a note
        that version created). The reverted change stays in history. Uses the store's own restore
        and delete, so every rule of a write applies."""
        before = store.diff(version_id).old
        target = store.version(version_id, with_content=False)
        if target.redacted_at is not None:
            raise InvalidRequest(f"memory version {version_id} is redacted; there is nothing to revert")
        memory_id = target.memory_id
        if before is None or before.operation == "deleted":
            try:
                store.get(memory_id, with_content=False)
            except NotFound:
                raise InvalidRequest(f"memory {memory_id} is already absent, as it was before {version_id}") from None
            return store.delete(memory_id, actor=actor)
        if before.redacted_at is not None:
            raise InvalidRequest(f"the version before {version_id} is redacted: its content cannot be put back")
        note = store.restore(memory_id, before.id, actor=actor)
        return store.version(note.version_id, with_content=False)

    # -- reading -------------------------------------------------------------------------------------

    def reads_approved_only(self, principal: Principal | None, store_id: str) -> bool:
        """Tasks read the approved state of a store set to ``read_approved_only``; people see all."""
        if principal is None or principal_task_id(principal) is None:
            return False
        return self.settings(store_id).read_approved_only

    def reader(self, store: MemoryStore, principal: Principal | None) -> MemoryStore:
        """What ``principal`` reads of ``store``: the store itself, or its approved view."""
        if not self.reads_approved_only(principal, store.id):
            return store
        return self.task_reader(store)

    def task_reader(self, store: MemoryStore) -> MemoryStore:
        """What a task reads of ``store`` (the memory section asks this too)."""
        if not self.settings(store.id).read_approved_only:
            return store
        from gitmem.agents.review.approved_view import ApprovedView  # the view keeps its own module

        return ApprovedView.of(store, current_mark(store))  # type: ignore[return-value]

    @staticmethod
    def note_count(reader: MemoryStore) -> int:
        """Notes in a store or in its approved view (what :meth:`task_reader` gave)."""
        counter = getattr(reader, "totals", None) or reader.index.totals
        return int(counter()[0])

    def section_note(self, store: MemoryStore) -> str | None:
        """A line for a task's memory section: that people review this store, and when they last did."""
        settings = self.settings(store.id)
        if not settings.enabled:
            return None
        mark = current_mark(store)
        when = f"last reviewed {iso(mark.reviewed_at)}" if mark is not None else "not reviewed yet"
        if settings.read_approved_only:
            return (
                f"reviewed by people ({when}); you read only what a reviewer approved, and your own"
                " changes appear once they are approved"
            )
        return f"reviewed by people ({when}); your changes are checked by a reviewer"


def with_reviews(entries: list[AuditEntry], repo: pygit2.Repository) -> list[AuditEntry]:
    """The audit's entries (history order) with the review records (operation ``reviewed``) placed
    among them by time; the versions keep their order. A clone has the records once it fetched
    refs/reviews/main."""
    reviews = [
        AuditEntry(
            created_at=mark.reviewed_at,
            created_by=mark.reviewed_by,
            operation="reviewed",
            path=f"{mark.action} through",
            memory_id="",
            version_id=mark.version_id or "(nothing yet)",
            commit_id=mark.record_id,
        )
        for mark in reversed(_records(repo))
    ]
    merged: list[AuditEntry] = []
    for entry in entries:
        while reviews and reviews[0].created_at < entry.created_at:
            merged.append(reviews.pop(0))
        merged.append(entry)
    return merged + reviews


def describe_mark(mark: ReviewMark | None) -> str:
    if mark is None:
        return "never reviewed"
    who = mark.reviewed_by.id if mark.reviewed_by else "gitmem"
    what = mark.version_id or "nothing"
    return f"reviewed through {what} by {who} at {iso(mark.reviewed_at)}"


__all__ = [
    "REVIEW_REF",
    "check_reviewer",
    "PendingChange",
    "ReviewMark",
    "ReviewSettings",
    "Reviews",
    "current_mark",
    "with_reviews",
    "describe_mark",
    "mark_seq",
    "review_history",
]
