"""The one place where failures become the wire's error envelope.

``{"type": "error", "error": {"type": T, "message": M, ...details}, "request_id": "req_..."}``, a
``request-id`` header, ``x-should-retry`` (``false`` when a retry cannot help, ``true`` when it may)
and ``retry-after`` on 429. Engine errors carry their own type, status and retryability.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gitmem import ids
from gitmem.db import connection_errors, database_unreachable
from gitmem.db.descriptors import out_of_descriptors
from gitmem.errors import GitmemError, RateLimited, Unavailable, as_insufficient_storage, storage_errors

log = logging.getLogger("gitmem.api")

REQUEST_ID_HEADER = "request-id"
SHOULD_RETRY_HEADER = "x-should-retry"

# Error types for statuses that do not come from the engine (routing, parsing, the body limit).
_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "api_error",
    507: "api_error",
}
_RESERVED = frozenset({"type", "message"})


def new_request_id() -> str:
    return ids.new_id(ids.REQUEST)


def request_id_of(scope: Mapping[str, Any]) -> str:
    """The id the middleware gave this request (a fresh one if the request never passed it)."""
    state = scope.get("state") or {}
    return state.get("request_id") or new_request_id()


def envelope(api_type: str, message: str, request_id: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": api_type, "message": message}
    for key, value in (details or {}).items():
        if key not in _RESERVED:
            error[key] = _json_safe(value)
    return {"type": "error", "error": error, "request_id": request_id}


def error_headers(request_id: str, *, retryable: bool | None, retry_after: float | None = None) -> dict[str, str]:
    headers = {REQUEST_ID_HEADER: request_id}
    if retryable is not None:
        headers[SHOULD_RETRY_HEADER] = "true" if retryable else "false"
    if retry_after is not None:
        headers["retry-after"] = str(max(1, math.ceil(retry_after)))
    return headers


def error_response(
    status: int,
    api_type: str,
    message: str,
    request_id: str,
    *,
    details: Mapping[str, Any] | None = None,
    retryable: bool | None = False,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    all_headers = dict(headers or {})
    all_headers.update(error_headers(request_id, retryable=retryable, retry_after=retry_after))
    return JSONResponse(envelope(api_type, message, request_id, details), status_code=status, headers=all_headers)


def internal_error_body(request_id: str) -> dict[str, Any]:
    """The body of a 500: nothing about the failure itself leaves the server."""
    return envelope("api_error", "internal server error", request_id)


def type_for_status(status: int) -> str:
    return _TYPE_BY_STATUS.get(status, "api_error" if status >= 500 else "invalid_request_error")


# -- handlers --------------------------------------------------------------------------------------


async def _gitmem_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GitmemError)  # noqa: S101  narrows the type for mypy; never a check of input
    request_id = request_id_of(request.scope)
    if exc.status >= 500:
        log.error("engine error %s on %s %s [%s]", exc.api_type, request.method, request.url.path, request_id)
    headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
    return error_response(
        exc.status,
        exc.api_type,
        exc.message,
        request_id,
        details=exc.details,
        retryable=bool(exc.retryable),
        retry_after=exc.retry_after if isinstance(exc, RateLimited | Unavailable) else None,
        headers=headers,
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # noqa: S101  narrows the type for mypy; never a check of input
    message = describe_validation_errors(exc.errors())
    return error_response(400, "invalid_request_error", message, request_id_of(request.scope))


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)  # noqa: S101  narrows the type for mypy; never a check of input
    status = exc.status_code
    if status == 404:
        message = f"not found: {request.method} {request.url.path}"
    elif status == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif status == 413:
        message = "request body is too large"
    else:
        message = str(exc.detail)
    return error_response(
        status,
        type_for_status(status),
        message,
        request_id_of(request.scope),
        retryable=status >= 500 or status == 429,
        headers=exc.headers,
    )


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    """A full disk is a retryable 507 naming the cause; any other storage failure stays a 500."""
    gm = getattr(request.app.state, "gm", None)
    if out_of_descriptors(exc):
        # The engine makes room and retries where it opens a store; this is what is left (a file
        # opened mid-request): idle stores are closed and the client told to retry, never a 500.
        if gm is not None:
            gm.open_store_cache.shrink(max(1, gm.open_stores().open_stores // 2))
        log.warning("out of file descriptors on %s %s: %s", request.method, request.url.path, exc)
        return await _gitmem_error(request, Unavailable("the server has too many files open just now; retry"))
    refusal = as_insufficient_storage(exc, gm.home if gm is not None else None)
    if refusal is None:
        raise exc
    log.error("disk full on %s %s: %s", request.method, request.url.path, exc)
    return await _gitmem_error(request, refusal)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL out of reach (down, restarting, cut off) is a retryable 503 with ``Retry-After``, in
    the seconds the pool and connection timeouts allow; any other database error stays a 500."""
    if not database_unreachable(exc):
        raise exc
    log.warning("database unreachable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    return await _gitmem_error(request, Unavailable("the database cannot be reached just now; retry shortly"))


def install(app: FastAPI) -> None:
    """Register the handlers. Unhandled exceptions become a 500 in the request middleware."""
    app.add_exception_handler(GitmemError, _gitmem_error)
    for storage_error in storage_errors():
        app.add_exception_handler(storage_error, _storage_error)
    gm = getattr(app.state, "gm", None)
    if gm is not None and gm.catalog.db.dialect == "postgresql":  # SQLite's app never imports psycopg
        for database_error in connection_errors():
            app.add_exception_handler(database_error, _database_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)


# -- helpers ---------------------------------------------------------------------------------------


def describe_validation_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    """One readable line from pydantic's errors; never echoes the input (it may hold a secret)."""
    parts = []
    for error in errors[:5]:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "")
            parts.append(f"request body is not valid JSON{': ' + reason if reason else ''}")
            continue
        parts.append(f"{_where(error.get('loc', ()))}: {error.get('msg', 'invalid')}")
    if len(errors) > 5:
        parts.append(f"and {len(errors) - 5} more")
    return "; ".join(parts) or "invalid request"


_LOCATIONS = {"query": "query parameter ", "path": "path parameter ", "header": "header ", "cookie": "cookie "}


def _where(loc: Sequence[Any]) -> str:
    """``("body", "precondition", "type")`` -> ``precondition.type``; ``("query", "limit")`` -> ``query
    parameter limit``."""
    parts = [str(p) for p in loc]
    if not parts:
        return "request"
    head, rest = parts[0], ".".join(parts[1:])
    if head == "body":
        return rest or "request body"
    return f"{_LOCATIONS.get(head, head + ' ')}{rest}".strip()


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return str(value)
