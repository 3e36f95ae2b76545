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

import logging
from dataclasses import dataclass

import pygit2

from gitmem.agents.review.approved_view import ApprovedView
from gitmem.agents.review.mark import (
    REVIEW_REF,
    ReviewMark,
    current_mark,
    mark_seq,
    records,
    review_history,
    write_record,
)
from gitmem.clock import iso
from gitmem.db.migrations import Migration
from gitmem.engine.audit.log import AuditEntry
from gitmem.engine.catalog.catalog import Principal, principal_task_id
from gitmem.engine.gitmem import HomeTables
from gitmem.engine.rewrite import locked_git
from gitmem.engine.store.diff import VersionDiff
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest, NotFound, PermissionDenied
from gitmem.model import Actor, Page, Version
from gitmem.rules.paging import check_limit

log = logging.getLogger(__name__)

MAX_PENDING_PAGE = 100


@dataclass(frozen=True)
class ReviewSettings:
    store_id: str
    enabled: bool = False
    read_approved_only: bool = False


def require_reviewer(principal: Principal) -> None:
    """The right to review, and to change a store's review settings: a user or an admin key; a
    read-write key (what agents and scripts are given) and a task never review. Access to the store
    itself is :func:`gitmem.access.check_reviewer`'s."""
    person = principal.actor.type == "user_actor" or (principal.actor.type == "api_actor" and principal.role == "admin")
    if not person or principal_task_id(principal) is not None:
        raise PermissionDenied("only a user with write access or an admin key may review a store or change its review")


@dataclass(frozen=True)
class PendingChange:
    """A version written since the mark, with what it changed."""

    version: Version
    diff: VersionDiff


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
        by: Principal | None = None,
    ) -> ReviewSettings:
        """Turn review (and reading only the approved state) on or off. Turning review on for the
        first time sets the mark at the current tip: what was there before is taken as approved.

        ``by`` is the caller over the API, the MCP server or the web view: changing a setting takes the
        right to review (:func:`require_reviewer`), so a key that may not review cannot switch the
        review off. ``None`` is the operator at the CLI, who holds the home itself."""
        info = self.gm.get_store(workspace_id, store_id)
        if info.kind == "bank":
            raise InvalidRequest("a profile's bank cannot be put under review")
        old = self.settings(store_id)
        new = self.planned(old, enabled=enabled, read_approved_only=read_approved_only, by=by)
        if actor is None and by is not None:
            actor = by.actor
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
                write_record(store, "enabled", self._newest(store), actor, self.gm.clock())
        return new

    @staticmethod
    def planned(
        old: ReviewSettings, *, enabled: bool | None, read_approved_only: bool | None, by: Principal | None
    ) -> ReviewSettings:
        """The settings ``old`` becomes, refused (and nothing changed) if they are not coherent or
        ``by`` may not change them. Asking for what is already set changes nothing and needs no right.
        A store about to be created asks this of the default settings before it exists."""
        if enabled is False and read_approved_only is None:
            read_approved_only = False  # no review, so no approved state to read
        new = ReviewSettings(
            old.store_id,
            old.enabled if enabled is None else bool(enabled),
            old.read_approved_only if read_approved_only is None else bool(read_approved_only),
        )
        if new.read_approved_only and not new.enabled:
            raise InvalidRequest('read_approved_only needs review: set "review": true as well')
        if new != old and by is not None:
            require_reviewer(by)
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
        rows = store.index.version_ids(after=after, limit=limit + 1)
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
            assert row is not None  # noqa: S101  narrows the type for mypy; never a check of input
            if mark is not None and row.seq <= mark_seq(store, mark):
                return mark
            return write_record(store, "approved", version, actor, self.gm.clock())

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
        note = restore(store, memory_id, before.id, actor=actor)
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
        for mark in reversed(records(repo))
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
    "PendingChange",
    "ReviewMark",
    "ReviewSettings",
    "Reviews",
    "current_mark",
    "describe_mark",
    "mark_seq",
    "require_reviewer",
    "review_history",
    "with_reviews",
]
