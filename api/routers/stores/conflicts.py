"""``/v1/memory_stores/{id}/conflicts``: the losing sides of writes refused for a stale precondition
(a gitmem extension; docs/conflicts.md). Listed, read, compared with the winner, resolved, redacted.

Readable by whoever may read the store (a task under ``read_approved_only`` sees none); resolving and
redacting need write access, as any write does."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from gitmem.api.deps import Caller, OpenStore
from gitmem.api.schemas.common import ERROR_RESPONSES, View
from gitmem.api.schemas.stores.conflicts import (
    ConflictResolve,
    MemoryConflict,
    MemoryConflictComparison,
    MemoryConflictList,
    MemoryConflictResolution,
)
from gitmem.engine.rewrite.redaction import redact_conflict
from gitmem.engine.store.conflict_resolution import compare, resolve
from gitmem.engine.store.conflicts import MAX_CONFLICTS_PAGE, MAX_FULL_CONFLICTS_PAGE
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound
from gitmem.model import Note

router = APIRouter(prefix="/v1/memory_stores/{memory_store_id}", tags=["conflicts"], responses=ERROR_RESPONSES)

State = Literal["open", "resolved"]
LIMIT_HELP = f"At most {MAX_CONFLICTS_PAGE}; with view=full, at most {MAX_FULL_CONFLICTS_PAGE}"


def _page(
    store: MemoryStore, memory_id: str | None, state: State | None, view: View, limit: int, page: str | None
) -> MemoryConflictList:
    if view == "full":
        limit = min(limit, MAX_FULL_CONFLICTS_PAGE)
    found = store.conflicts.list(
        memory_id=memory_id, state=state, limit=limit, page=page or None, with_content=view == "full"
    )
    return MemoryConflictList(data=[MemoryConflict.of(c, view) for c in found.items], next_page=found.next_page)


@router.get("/conflicts", response_model=MemoryConflictList, summary="List conflicts, newest first")
def list_conflicts(
    ref: OpenStore,
    memory_id: str | None = Query(None, description="Only this note's"),
    state: State | None = Query(None),
    view: View = Query("basic"),
    limit: int = Query(20, ge=1, le=MAX_CONFLICTS_PAGE, description=LIMIT_HELP),
    page: str | None = Query(None),
) -> MemoryConflictList:
    return _page(ref.open(), memory_id or None, state, view, limit, page)


@router.get("/memories/{memory_id}/conflicts", response_model=MemoryConflictList, summary="A memory's conflicts")
def list_memory_conflicts(
    memory_id: str,
    ref: OpenStore,
    state: State | None = Query(None),
    view: View = Query("basic"),
    limit: int = Query(20, ge=1, le=MAX_CONFLICTS_PAGE, description=LIMIT_HELP),
    page: str | None = Query(None),
) -> MemoryConflictList:
    store = ref.open()
    answer = _page(store, memory_id, state, view, limit, page)
    if not answer.data and page is None and not store.versions(memory_id=memory_id, limit=1).items:
        raise NotFound(f"memory {memory_id} not found")  # a note never written, or one the caller may not read
    return answer


@router.get("/conflicts/{conflict_id}", response_model=MemoryConflict, summary="Retrieve a conflict")
def retrieve_conflict(conflict_id: str, ref: OpenStore, view: View = Query("full")) -> MemoryConflict:
    return MemoryConflict.of(ref.open().conflicts.get(conflict_id, with_content=view == "full"), view)


@router.get(
    "/conflicts/{conflict_id}/compare",
    response_model=MemoryConflictComparison,
    summary="A conflict against the winner: a diff, and a three-way merge",
)
def compare_conflict(conflict_id: str, ref: OpenStore) -> MemoryConflictComparison:
    return MemoryConflictComparison.of(compare(ref.open(), conflict_id))


@router.post(
    "/conflicts/{conflict_id}/resolve",
    response_model=MemoryConflictResolution,
    summary="Take the winner, the loser or a merge, as a new version, and mark the conflict resolved",
)
def resolve_conflict(conflict_id: str, body: ConflictResolve, ref: OpenStore) -> MemoryConflictResolution:
    store = ref.open()
    done = resolve(
        store,
        conflict_id,
        body.take,
        content=body.content,
        expected_sha256=body.precondition.content_sha256 if body.precondition else None,
        actor=ref.principal.actor,
    )
    return MemoryConflictResolution.of(done, _note(store, done.conflict.memory_id))


@router.post("/conflicts/{conflict_id}/redact", response_model=MemoryConflict, summary="Redact a conflict")
def redact(conflict_id: str, ref: OpenStore, principal: Caller) -> MemoryConflict:
    store = ref.open()
    store.conflicts.get(conflict_id, with_content=False)  # 404 for one the caller may not read
    return MemoryConflict.of(redact_conflict(store, conflict_id, principal.actor, ref.gm.catalog.erasures), "basic")


def _note(store: MemoryStore, memory_id: str) -> Note | None:
    try:
        return store.get(memory_id, with_content=False)
    except NotFound:
        return None
