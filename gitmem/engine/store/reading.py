"""What a memory store answers from its index and its blobs: notes, listings and versions
(:class:`~gitmem.engine.store.store.MemoryStore` reads through these; its writes are its own)."""

from __future__ import annotations

import datetime as dt

import pygit2

from gitmem.crypto.codec import ContentCodec
from gitmem.engine.index.store_index import NoteRow, StoreIndex, VersionRow
from gitmem.errors import InvalidRequest, NotFound
from gitmem.git.repository import blob_at, read_tip
from gitmem.model import Actor, ActorType, MemoryPrefix, Note, Operation, Page, Version
from gitmem.rules import paths
from gitmem.rules.paging import check_limit

MAX_NOTES_PAGE = 1000
MAX_VERSIONS_PAGE = 100


def check_listing(path_prefix: str | None, depth: int, limit: int, *, with_content: bool) -> str:
    """The arguments of a notes listing, checked; returns the folder prefix."""
    prefix = paths.validate_prefix(path_prefix or "/")
    if depth not in (0, 1):
        raise InvalidRequest("depth must be 0 or 1")
    check_limit(limit, MAX_NOTES_PAGE, full=with_content)
    return prefix


class StoreReading:
    """The reading half of a store: what it needs is its id, its index and how its content is stored."""

    id: str
    index: StoreIndex
    codec: ContentCodec

    @property
    def repo(self) -> pygit2.Repository:
        """This thread's repository: a store object may be shared by threads, libgit2 objects not."""
        return self.index.repo

    # -- reading ----------------------------------------------------------------------------------

    def _content(self, path: str, blob_id: str) -> str:
        return self.codec.decode(path, blob_at(self.repo, blob_id).data).decode("utf-8")

    def note_from_row(self, row: NoteRow, with_content: bool) -> Note:
        return Note(
            id=row.memory_id,
            store_id=self.id,
            path=row.path,
            content_sha256=row.sha256,
            content_size_bytes=row.size,
            blob_id=row.blob_id,
            version_id=row.version_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            content=self._content(row.path, row.blob_id) if with_content else None,
        )

    def _version(self, row: VersionRow, with_content: bool) -> Version:
        r = row.record
        content = None
        if with_content and row.blob_id is not None and r.path is not None and r.redacted_at is None:
            content = self._content(r.path, row.blob_id)
        return Version(
            id=r.version_id,
            store_id=self.id,
            memory_id=r.memory_id,
            operation=r.operation,
            created_at=r.created_at,
            created_by=r.created_by,
            path=r.path,
            content_sha256=r.content_sha256,
            content_size_bytes=r.content_size,
            commit_id=row.commit_id,
            content=content,
            redacted_at=r.redacted_at,
            redacted_by=r.redacted_by,
        )

    def caught_up(self) -> bool:
        """Whether the index reflects ``main`` now, so that a read may skip :meth:`StoreIndex.catch_up`
        (which can wait for the writer's transaction). A writer records its commits in the index before
        it answers, so a read that follows an answered write still sees it."""
        tip = read_tip(self.repo)
        return (str(tip) if tip is not None else None) == self.index.indexed_tip()

    def get(self, memory_id: str, with_content: bool = True, *, catch_up: bool = True) -> Note:
        """The note; ``catch_up=False`` reads the index as it is (after :meth:`caught_up`)."""
        if catch_up:
            self.index.catch_up()
        row = self.index.note(memory_id)
        if row is None:
            raise NotFound(f"memory {memory_id} not found")
        return self.note_from_row(row, with_content)

    def get_by_path(self, path: str, with_content: bool = True) -> Note:
        self.index.catch_up()
        row = self.index.note_at(path)
        if row is None:
            raise NotFound(f"no memory at {path}")
        return self.note_from_row(row, with_content)

    def list(
        self,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        with_content: bool = False,
    ) -> Page[Note | MemoryPrefix]:
        prefix = check_listing(path_prefix, depth, limit, with_content=with_content)
        self.index.catch_up()
        rows, token = self.index.list_notes(prefix, depth, limit, page)
        items = [r if isinstance(r, MemoryPrefix) else self.note_from_row(r, with_content) for r in rows]
        return Page(items, token)

    def versions(
        self,
        *,
        memory_id: str | None = None,
        operation: Operation | None = None,
        task_id: str | None = None,
        api_key_id: str | None = None,
        user_id: str | None = None,
        created_gte: dt.datetime | None = None,
        created_lte: dt.datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        with_content: bool = False,
    ) -> Page[Version]:
        if operation is not None and operation not in ("created", "modified", "deleted"):
            raise InvalidRequest("operation must be created, modified or deleted")
        filters: tuple[tuple[ActorType, str | None], ...] = (
            ("task_actor", task_id),
            ("api_actor", api_key_id),
            ("user_actor", user_id),
        )
        actors = [Actor(kind, value) for kind, value in filters if value]
        if len(actors) > 1:
            raise InvalidRequest("filter by at most one of task_id, api_key_id and user_id")
        check_limit(limit, MAX_VERSIONS_PAGE, full=with_content)
        self.index.catch_up()
        rows, token = self.index.list_versions(
            memory_id=memory_id,
            operation=operation,
            actor=actors[0] if actors else None,
            created_gte=created_gte,
            created_lte=created_lte,
            limit=limit,
            page=page,
        )
        return Page([self._version(r, with_content) for r in rows], token)

    def version(self, version_id: str, with_content: bool = True) -> Version:
        self.index.catch_up()
        row = self.index.version(version_id)
        if row is None:
            raise NotFound(f"memory version {version_id} not found")
        return self._version(row, with_content)
