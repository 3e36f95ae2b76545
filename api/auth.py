"""Who is calling: the one authentication and the one rate limit of every surface (REST, MCP, Git over
HTTP). Each surface finds the secret where its clients send it (Git sends it as the Basic-auth password)
and answers a refusal in its own terms (the error envelope, or a line Git prints); the rule is here.

In order: a request without a key is 401 and spends nothing; an address that sent too many wrong keys is
429 and its key is not looked at; a wrong key is 401 and spends its address's budget; a key of another
workspace than ``anthropic-workspace-id`` names is 403, as is a read-only key asking to write; then the
key's one token bucket is spent (429 once empty, whichever surface emptied it).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from starlette.concurrency import run_in_threadpool

from gitmem import metrics
from gitmem.api.ratelimit import TokenBucketLimiter, WrongSecrets, client_address
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import AuthenticationFailed, PermissionDenied, RateLimited

Scope = MutableMapping[str, Any]


def request_secret(headers: Mapping[str, str]) -> str | None:
    """The key in ``x-api-key``, else in ``Authorization: Bearer <key>``."""
    api_key = headers.get("x-api-key")
    if api_key:
        return api_key
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    credentials = credentials.strip()
    return credentials if credentials and scheme.lower() == "bearer" else None


def check_workspace(principal: Principal, headers: Mapping[str, str]) -> Principal:
    """The SDK's optional workspace header: a key belongs to one workspace, so it must name that one."""
    wanted = headers.get("anthropic-workspace-id")
    if wanted and wanted != principal.workspace_id:
        raise PermissionDenied("this key does not belong to the workspace named in anthropic-workspace-id")
    return principal


def identify(gm: Gitmem, secret: str | None, headers: Mapping[str, str]) -> Principal:
    """The caller a secret stands for, in a worker thread (the catalog may wait on SQLite): an MCP tool
    call checks its own request's key again with this, the request itself having passed :func:`caller`."""
    return check_workspace(gm.catalog.authenticate(secret), headers)


async def caller(scope: Scope, secret: str | None, headers: Mapping[str, str], *, write: bool) -> Principal:
    """The caller of this request (see the module's docstring for the order of refusals), recorded in
    ``scope["state"]`` for the access log. ``write``: the request may change something.

    Runs on the event loop: the key lookup is one indexed SQLite read that never waits for a lock, so
    it costs less than the hop to a worker thread; only if SQLite is busy does it wait in a thread."""
    if not secret:
        raise AuthenticationFailed("missing API key: send it in x-api-key or Authorization: Bearer")
    state = scope["app"].state
    gm: Gitmem = state.gm
    wrong: WrongSecrets = state.wrong_secrets
    address = client_address(scope)
    wrong.check(address)  # an address that sent too many wrong keys: 429, this key unlooked-at
    try:
        principal = gm.catalog.authenticate_now(secret)
        if principal is None:
            principal = await run_in_threadpool(gm.catalog.authenticate, secret)
    except AuthenticationFailed:
        wrong.failed(address)
        raise
    check_workspace(principal, headers)
    if write and not principal.can_write:
        raise PermissionDenied("this key is read-only")
    scope.setdefault("state", {})["principal"] = principal  # for the access log: who called
    limiter: TokenBucketLimiter = state.limiter
    wait = limiter.acquire(principal.credential_id)
    if wait > 0:
        metrics.RATE_LIMITED.inc()
        raise RateLimited("rate limit exceeded for this key; retry later", retry_after=wait)
    return principal
