"""Dependencies shared by the routers: the engine, the caller (auth, role, rate limit), the store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, TypeVar

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from gitmem import metrics
from gitmem.access import check_reviewer, require_store
from gitmem.agents.review.review import Reviews
from gitmem.api.ratelimit import client_address
from gitmem.engine.catalog.catalog import CatalogBusy, Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import AuthenticationFailed, PermissionDenied, RateLimited
from gitmem.model import StoreInfo

if TYPE_CHECKING:
    from gitmem.api.ratelimit import TokenBucketLimiter, WrongSecrets

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


def request_secret(headers: Mapping[str, str]) -> str | None:
    """The key in ``x-api-key``, else in ``Authorization: Bearer <key>``."""
    api_key = headers.get("x-api-key")
    if api_key:
        return api_key
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    credentials = credentials.strip()
    return credentials if credentials and scheme.lower() == "bearer" else None


def is_write(request: Request) -> bool:
    """Whether the request may change something. The memory tool's POST may be a plain view: its
    handler decides per command."""
    return request.method not in READ_METHODS and not request.scope["path"].endswith("/memory_tool")


async def get_gm(request: Request) -> Gitmem:
    gm: Gitmem = request.app.state.gm
    return gm


async def get_principal(request: Request) -> Principal:
    """Authenticate with ``x-api-key`` or ``Authorization: Bearer``; a read-only key may only read.

    Runs on the event loop: the key lookup is one indexed SQLite read that never waits for a lock, so
    it costs less than the hop to a worker thread; only if SQLite is busy does it wait in a thread."""
    secret = request_secret(request.headers)
    if not secret:
        raise AuthenticationFailed("missing API key: send it in x-api-key or Authorization: Bearer")
    gm: Gitmem = request.app.state.gm
    wrong: WrongSecrets = request.app.state.wrong_secrets
    address = client_address(request.scope)
    wrong.check(address)  # an address that sent too many wrong keys: 429, this key unlooked-at
    try:
        principal = gm.catalog.authenticate_now(secret)
        if principal is None:
            principal = await run_in_threadpool(gm.catalog.authenticate, secret)
    except AuthenticationFailed:
        wrong.failed(address)
        raise

    # The SDK's optional workspace header: a key belongs to one workspace, so it must name that one.
    wanted = request.headers.get("anthropic-workspace-id")
    if wanted and wanted != principal.workspace_id:
        raise PermissionDenied("this key does not belong to the workspace named in anthropic-workspace-id")
    if not principal.can_write and is_write(request):
        raise PermissionDenied("this key is read-only")

    request.state.principal = principal  # for the access log: who called
    limiter: TokenBucketLimiter = request.app.state.limiter
    wait = limiter.acquire(principal.credential_id)
    if wait > 0:
        metrics.RATE_LIMITED.inc()
        raise RateLimited("rate limit exceeded for this key; retry later", retry_after=wait)
    return principal


Engine = Annotated[Gitmem, Depends(get_gm)]
Caller = Annotated[Principal, Depends(get_principal)]


@dataclass(frozen=True)
class StoreRef:
    """A store the caller may use, opened by the handler in its own thread (:meth:`open`): the engine's
    store objects belong to one thread each."""

    gm: Gitmem
    principal: Principal
    store_id: str
    info: StoreInfo | None = None  # the store's catalog row as the access check read it

    def open(self) -> MemoryStore:
        # A task reads a store under read_approved_only at its review mark; people read everything.
        store = self.gm.store(self.principal.workspace_id, self.store_id, info=self.info)
        return Reviews.of(self.gm).reader(store, self.principal)

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
    gm: Gitmem = request.app.state.gm
    write = is_write(request)
    try:
        with gm.catalog.without_waiting():
            info, _ = require_store(gm, principal, memory_store_id, write=write)
    except CatalogBusy:
        info, _ = await run_in_threadpool(lambda: require_store(gm, principal, memory_store_id, write=write))
    return StoreRef(gm, principal, memory_store_id, info)


OpenStore = Annotated[StoreRef, Depends(get_store_ref)]


def get_store(ref: OpenStore) -> MemoryStore:
    """The store of :func:`get_store_ref`, opened (for handlers that take a ``Store``)."""
    return ref.open()


Store = Annotated[MemoryStore, Depends(get_store)]


def get_reviewer(memory_store_id: str, principal: Caller, gm: Engine) -> tuple[MemoryStore, Principal]:
    """A reviewer: a user with write access to the store, or an admin key (never a task)."""
    check_reviewer(gm, principal, memory_store_id)
    return gm.store(principal.workspace_id, memory_store_id), principal


Reviewer = Annotated[tuple[MemoryStore, Principal], Depends(get_reviewer)]
