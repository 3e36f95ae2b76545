"""Dependencies shared by the routers: the engine and its parts, the caller (auth, role, rate limit:
:mod:`gitmem.api.auth`), what a caller may not do at all (a task's token, a key that is not a user's),
the store as the caller may read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from gitmem.access import check_reviewer
from gitmem.agents.tasks.scope import refuse_task
from gitmem.api.auth import caller, request_secret
from gitmem.banks.profiles import require_user
from gitmem.engine.catalog.catalog import CatalogBusy, Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.parts import Parts, StoreGrant

T = TypeVar("T")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# The two ways to send a key, as /openapi.json declares them (for clients and schemathesis): the app
# adds them to every operation but those of PUBLIC_PATHS. They are read from the headers here rather
# than declared as FastAPI security dependencies, which cost every request two more resolutions.
SECURITY_SCHEMES = {
    "ApiKeyAuth": {"type": "apiKey", "in": "header", "name": "x-api-key"},
    "BearerAuth": {"type": "http", "scheme": "bearer"},
}
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/v1/signing_key", "/v1/signing_key/allowed_signers"})


def is_write(request: Request) -> bool:
    """Whether the request may change something. The memory tool's POST may be a plain view: its
    handler decides per command."""
    return request.method not in READ_METHODS and not request.scope["path"].endswith("/memory_tool")


async def get_gm(request: Request) -> Gitmem:
    gm: Gitmem = request.app.state.gm
    return gm


async def get_parts(request: Request) -> Parts:
    """The home's parts, made once where the app is made (``api.app.create_app``)."""
    parts: Parts = request.app.state.parts
    return parts


async def get_principal(request: Request) -> Principal:
    """Authenticate with ``x-api-key`` or ``Authorization: Bearer``; a read-only key may only read
    (:func:`gitmem.api.auth.caller`, which MCP and Git over HTTP ask too)."""
    return await caller(request.scope, request_secret(request.headers), request.headers, write=is_write(request))


Engine = Annotated[Gitmem, Depends(get_gm)]
HomeParts = Annotated[Parts, Depends(get_parts)]
Caller = Annotated[Principal, Depends(get_principal)]


def not_a_task(action: str) -> Any:
    """A route's dependency (``dependencies=[not_a_task("create tasks")]``): what a task's token may not
    do at all is 403 ``a task's token cannot <action>``, before the handler runs."""

    async def refuse(principal: Caller) -> None:
        refuse_task(principal, action)

    return Depends(refuse)


async def get_user_id(principal: Caller) -> str:
    """The user a user's token stands for; an API key or a task's token is 403 (profiles and a person's
    Git addresses are users' alone)."""
    return require_user(principal)


UserId = Annotated[str, Depends(get_user_id)]
USER_ONLY = Depends(get_user_id)  # for a router all of whose routes are users' alone


@dataclass(frozen=True)
class StoreRef:
    """A store the caller may use (:meth:`gitmem.parts.Parts.grant`, checked on the event loop), opened by
    the handler in its own thread (:meth:`open`): the engine's store objects belong to one thread each."""

    grant: StoreGrant

    @property
    def gm(self) -> Gitmem:
        return self.grant.parts.gm

    @property
    def principal(self) -> Principal:
        return self.grant.principal

    @property
    def store_id(self) -> str:
        return self.grant.store_id

    def open(self) -> MemoryStore:
        """The store as this caller may read it: a task under read_approved_only reads it at its review
        mark; people read everything."""
        return self.grant.open()

    async def read(self, answer: Callable[[MemoryStore, bool], T]) -> T:
        """``answer(store, caught_up)`` for a quick read: on the event loop when nothing in it can wait
        (the catalog is not busy, the store was opened before in this process and its index is caught
        up: then ``caught_up`` is True and the read must not catch up), else in a worker thread. A
        thread hop costs a GET more CPU than the read itself."""
        store = self._open_now()
        if store is not None:
            return answer(store, True)
        return await run_in_threadpool(lambda: answer(self.open(), False))

    def _open_now(self) -> MemoryStore | None:
        if not self.gm.opened_before(self.store_id):
            return None  # a first open may create the index's tables
        try:
            with self.gm.catalog.without_waiting():
                store = self.open()
        except CatalogBusy:
            return None
        # An approved view (a task under review) catches up on its own: it reads in a thread.
        return store if type(store) is MemoryStore and store.caught_up() else None


async def get_store_ref(memory_store_id: str, request: Request, principal: Caller) -> StoreRef:
    """The store named in the path, if the caller may see it (another workspace's id, someone else's
    bank or a store outside a task's list is 404); a write needs write access (403).

    Checked on the event loop with catalog reads that never wait (in a worker thread only if SQLite is
    busy): a handler that opens the store itself makes one thread hop, its own."""
    parts: Parts = request.app.state.parts
    write = is_write(request)
    try:
        with parts.gm.catalog.without_waiting():
            grant = parts.grant(principal, memory_store_id, write=write)
    except CatalogBusy:
        grant = await run_in_threadpool(lambda: parts.grant(principal, memory_store_id, write=write))
    return StoreRef(grant)


OpenStore = Annotated[StoreRef, Depends(get_store_ref)]


def get_store(ref: OpenStore) -> MemoryStore:
    """The store of :func:`get_store_ref`, opened (for handlers that take a ``Store``)."""
    return ref.open()


Store = Annotated[MemoryStore, Depends(get_store)]


def get_reviewer(memory_store_id: str, principal: Caller, parts: HomeParts) -> tuple[MemoryStore, Principal]:
    """A reviewer: a user with write access to the store, or an admin key (never a task)."""
    check_reviewer(parts.gm, principal, memory_store_id)
    return parts.open_store(principal, memory_store_id, write=True), principal


Reviewer = Annotated[tuple[MemoryStore, Principal], Depends(get_reviewer)]
