"""Dependencies shared by the routers: the engine, the caller (auth, role, rate limit), the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from gitmem.access import require_access
from gitmem.catalog import Principal
from gitmem.errors import AuthenticationFailed, PermissionDenied, RateLimited
from gitmem.home import Gitmem
from gitmem.review import Reviews, check_reviewer
from gitmem.store import MemoryStore

if TYPE_CHECKING:
    from api.ratelimit import TokenBucketLimiter

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Declared as security schemes so /openapi.json tells clients (and schemathesis) how to authenticate.
_api_key = APIKeyHeader(name="x-api-key", auto_error=False, scheme_name="ApiKeyAuth")
_bearer = HTTPBearer(auto_error=False, scheme_name="BearerAuth")


def is_write(request: Request) -> bool:
    """Whether the request may change something. The memory tool's POST may be a plain view: its
    handler decides per command."""
    return request.method not in READ_METHODS and not request.url.path.endswith("/memory_tool")


def get_gm(request: Request) -> Gitmem:
    return request.app.state.gm


def get_principal(
    request: Request,
    api_key: str | None = Security(_api_key),
    bearer: HTTPAuthorizationCredentials | None = Security(_bearer),
) -> Principal:
    """Authenticate with ``x-api-key`` or ``Authorization: Bearer``; a read-only key may only read."""
    secret = api_key or (bearer.credentials if bearer else None)
    if not secret:
        raise AuthenticationFailed("missing API key: send it in x-api-key or Authorization: Bearer")
    gm: Gitmem = request.app.state.gm
    principal = gm.catalog.authenticate(secret)

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


def get_store(memory_store_id: str, request: Request, principal: Caller, gm: Engine) -> MemoryStore:
    """The store named in the path, if the caller may see it (another workspace's id, someone else's
    bank or a store outside a task's list is 404); a write needs write access (403)."""
    require_access(gm, principal, memory_store_id, write=is_write(request))
    # A task reads a store under read_approved_only at its review mark; people read everything.
    return Reviews.of(gm).reader(gm.store(principal.workspace_id, memory_store_id), principal)


Store = Annotated[MemoryStore, Depends(get_store)]


def get_reviewer(memory_store_id: str, principal: Caller, gm: Engine) -> tuple[MemoryStore, Principal]:
    """A reviewer: a user with write access to the store, or an admin key (never a task)."""
    check_reviewer(gm, principal, memory_store_id)
    return gm.store(principal.workspace_id, memory_store_id), principal


Reviewer = Annotated[tuple[MemoryStore, Principal], Depends(get_reviewer)]
