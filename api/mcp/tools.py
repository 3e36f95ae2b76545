"""What the MCP tools do, as small engine calls: the one adapter between the MCP server and the engine.

Every function takes the home's parts, the caller (a :class:`~gitmem.engine.catalog.catalog.Principal`) and a
store id and opens the store with :meth:`gitmem.parts.Parts.open_store` exactly as the REST routes do, so
MCP has the REST API's access rules: another
workspace's store is not found, a read-only key only reads, a task sees only its own stores (and, when
it names none, its worker's own store). Writes are versions attributed to ``principal.actor``.

"""

from __future__ import annotations

from typing import Any

from gitmem.agents.memory_tool.paths import resolve_memory_path
from gitmem.agents.memory_tool.tool import MemoryToolHandler, ToolResult
from gitmem.engine.catalog.catalog import Principal, principal_task_id
from gitmem.engine.index.search import SearchHit
from gitmem.engine.store.conflict_resolution import ConflictComparison, Resolved, compare, resolve
from gitmem.engine.store.conflicts import Conflict, State
from gitmem.engine.store.diff import VersionDiff
from gitmem.engine.store.restore import restore as restore_version
from gitmem.engine.store.store import MAX_VERSIONS_PAGE, MemoryStore
from gitmem.errors import InvalidRequest, NotFound
from gitmem.git.conflict_records import Resolution
from gitmem.model import Note, Page, Version
from gitmem.parts import Parts


def resolve_store_id(parts: Parts, principal: Principal, store_id: str | None) -> str:
    """The store a tool call means: the one named, or for a task's token its worker's own store."""
    if store_id:
        return store_id
    task_id = principal_task_id(principal)
    if task_id is None:
        raise InvalidRequest("memory_store_id is required (only a task's token has a default store)")
    own = [s.store_id for s in parts.tasks.get_task(principal.workspace_id, task_id).stores if s.own]
    if not own:
        raise NotFound(f"task {task_id} has no store of its own")
    return own[0]


def open_store(parts: Parts, principal: Principal, store_id: str | None, *, write: bool) -> MemoryStore:
    """The store the call names (or the task's own), as this caller may read it: ``NotFound`` if they may
    not see it and, for a write, 403 if they may not change it."""
    return parts.open_store(principal, resolve_store_id(parts, principal, store_id), write=write)


def memory_command(parts: Parts, principal: Principal, store_id: str | None, command: dict[str, Any]) -> ToolResult:
    """One memory-tool command, answered string for string as ``POST .../memory_tool`` answers it."""
    grant = parts.grant(principal, resolve_store_id(parts, principal, store_id), write=False)
    read_only = grant.access == "read_only"  # a read-only caller's writes are the tool's refusals
    return MemoryToolHandler(grant.open(), principal.actor, read_only=read_only).execute(command)


def history(
    parts: Parts,
    principal: Principal,
    store_id: str | None,
    *,
    memory_id: str | None = None,
    path: str | None = None,
    limit: int = 20,
    page: str | None = None,
) -> Page[Version]:
    """A note's versions, newest first, by id or by its current memory-tool path (``/memories/...``)."""
    store = open_store(parts, principal, store_id, write=False)
    if not memory_id:
        if not path:
            raise InvalidRequest("name the note by memory_id or path")
        try:
            note_path = resolve_memory_path(path).note_path
        except Exception as refusal:  # the memory tool's refusal of a bad path: its text says why
            raise InvalidRequest(str(refusal)) from None
        memory_id = store.get_by_path(note_path, with_content=False).id
    return store.versions(memory_id=memory_id, limit=min(limit, MAX_VERSIONS_PAGE), page=page or None)


def search(
    parts: Parts,
    principal: Principal,
    store_id: str | None,
    query: str,
    *,
    path_prefix: str | None = None,
    limit: int = 20,
    page: str | None = None,
) -> Page[SearchHit]:
    store = open_store(parts, principal, store_id, write=False)
    return store.search(query, path_prefix=path_prefix, limit=limit, page=page)


def diff(
    parts: Parts, principal: Principal, store_id: str | None, version_id: str, against: str | None = None
) -> VersionDiff:
    store = open_store(parts, principal, store_id, write=False)
    return store.diff(version_id, against=against)


def restore(
    parts: Parts,
    principal: Principal,
    store_id: str | None,
    memory_id: str,
    version_id: str,
    expected_sha256: str | None = None,
) -> Note:
    store = open_store(parts, principal, store_id, write=True)
    return restore_version(store, memory_id, version_id, actor=principal.actor, expected_sha256=expected_sha256)


def conflicts(
    parts: Parts,
    principal: Principal,
    store_id: str | None,
    *,
    memory_id: str | None = None,
    conflict_id: str | None = None,
    state: State | None = None,
    limit: int = 20,
    page: str | None = None,
) -> Page[Conflict] | ConflictComparison:
    """A store's (or a note's) conflicts, newest first; with ``conflict_id``, that one against its winner."""
    store = open_store(parts, principal, store_id, write=False)
    if conflict_id:
        return compare(store, conflict_id)
    return store.conflicts.list(memory_id=memory_id or None, state=state, limit=min(limit, 100), page=page or None)


def resolve_conflict(
    parts: Parts,
    principal: Principal,
    store_id: str | None,
    conflict_id: str,
    take: Resolution,
    *,
    content: str | None = None,
    expected_sha256: str | None = None,
) -> Resolved:
    store = open_store(parts, principal, store_id, write=True)
    return resolve(store, conflict_id, take, content=content, expected_sha256=expected_sha256, actor=principal.actor)
