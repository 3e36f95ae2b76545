"""Dependencies shared by the routers: the engine, the caller (auth, role, rate limit), the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from gitmem.access import require_access
from gitmem.agents.review import Reviews, check_reviewer
from gitmem.engine.catalog import CatalogBusy, Principal
from gitmem.engine.home import Gitmem
from gitmem.engine.store import MemoryStore
from gitmem.errors import AuthenticationFailed, PermissionDenied, RateLimited

if TYPE_CHECKING:
    from gitmem.api.ratelimit import TokenBucketLimiter

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Declared as security schemes so /openapi.json tells clients (and schemathesis) how to authenticate.
_api_key = APIKeyHeader(name="x-api-key", auto_error=False, scheme_name="ApiKeyAuth")
_bearer = HTTPBearer(auto_error=False, scheme_name="BearerAuth")


def is_write(request: Request) -> bool:
    """Whether the request may change something. The memory tool's POST may be a plain view: its
    handler decides per command."""
    return request.method not in READ_METHODS and not request.url.path.endswith("/memory_tool")


async def get_gm(request: Request) -> Gitmem:
    return request.app.state.gm


async def get_principal(
    request: Request,
    api_key: str | None = Security(_api_key),
    bearer: HTTPAuthorizationCredentials | None = Security(_bearer),
) -> Principal:
    """Authenticate with ``x-api-key`` or ``Authorization: Bearer``; a read-only key may only read.

    Runs on the event loop: the key lookup is one indexed SQLite read that never waits for a lock, so
    it costs less than the hop to a worker thread; only if SQLite is busy does it wait in a thread."""
    secret = api_key or (bearer.credentials if bearer else None)
    if not secret:
        raise AuthenticationFailed("missing API key: send it in x-api-key or Authorization: Bearer")
    gm: Gitmem = request.app.state.gm
    principal = gm.catalog.authenticate_now(secret)
    if principal is None:
        principal = await run_in_threadpool(gm.catalog.authenticate, secret)

    # The SDK's optional workspace header: a key belongs to one workspace, so it must name that one.
    wanted = request.headers.get("anthropic-workspace-id")
    if wanted and wanted != principal.workspace_id:
        raise PermissionDenied("this key does not belong to the workspace named in anthropic-workspace-id")
    if not principal.can_write and is_write(request):
        raise PermissionDenied("this key is read-only")

    limiter: TokenBucketLimiter = request.app.state.limiter
    wait = limiter.acquire(principal.credential_id)
    if wait > 0:
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

    def open(self) -> MemoryStore:
        # A task reads a store under read_approved_only at its review mark; people read everything.
        return Reviews.of(self.gm).reader(self.gm.store(self.principal.workspace_id, self.store_id), self.principal)


async def get_store_ref(memory_store_id: str, request: Request, principal: Caller, gm: Engine) -> StoreRef:
    """The store named in the path, if the caller may see it (another workspace's id, someone else's
    bank or a store outside a task's list is 404); a write needs write access (403).

    Checked on the event loop with catalog reads that never wait (in a worker thread only if SQLite is
    busy): a handler that opens the store itself makes one thread hop, its own."""
    write = is_write(request)
    try:
        with gm.catalog.without_waiting():
            require_access(gm, principal, memory_store_id, write=write)
    except CatalogBusy:
        await run_in_threadpool(require_access, gm, principal, memory_store_id, write=write)
    return StoreRef(gm, principal, memory_store_id)


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
