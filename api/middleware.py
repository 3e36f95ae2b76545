"""Pure ASGI middleware: a request id on every response, the body-size limit, the last-resort 500, the
503 of a draining process, and each request counted (``/metrics``) and logged (``GITMEM_LOG_FORMAT=json``)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitmem import metrics
from gitmem.api.draining import PROBE_PATHS, RETRY_AFTER_SECONDS, Drain
from gitmem.api.errors import (
    REQUEST_ID_HEADER,
    envelope,
    error_headers,
    internal_error_body,
    new_request_id,
)
from gitmem.engine.open_stores import leases
from gitmem.json_log import ACCESS_LOGGER

log = logging.getLogger("gitmem.api")
access_log = logging.getLogger(ACCESS_LOGGER)
_REQUEST_ID = REQUEST_ID_HEADER.encode()
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # the route of a request no route matched: any path, one series
DRAINED = "drained"  # the route of a request a draining process answered 503 without routing it


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` once a streamed body passes the limit. FastAPI re-raises HTTPExceptions
    met while reading the body, so this reaches the 413 handler instead of becoming a parse error."""

    def __init__(self) -> None:
        super().__init__(status_code=413, detail="request body is too large")


class RequestContextMiddleware:
    """Outermost layer of the app.

    - gives the request an id (``scope["state"]["request_id"]``) and sends it as ``request-id``;
    - refuses a body over ``max_body_bytes`` with 413 before anything parses it (by
      ``content-length``, or while a chunked body streams in), except on ``unlimited_paths``;
    - turns an unhandled exception into a 500 ``api_error`` with no detail, and logs it;
    - while the process drains (:mod:`gitmem.api.draining`), answers 503 before the app sees the request;
    - counts every request by method, route template and status, with its duration (``/metrics``), and
      with ``access_log`` writes one line a request (:mod:`gitmem.json_log`'s fields);
    - opens the request's lease scope: the stores it opens are returned to the home's bounded cache
      when it ends (:mod:`gitmem.engine.open_stores`).
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        unlimited_paths: Iterable[str] = (),
        *,
        drain: Drain | None = None,
        access_log: bool = False,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        patterns = list(unlimited_paths)
        self.unlimited = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        self.drain = drain or Drain()
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        request_id = new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 0
        try:
            # Every store the request opens is lent to it and returned once the answer is sent
            # (gitmem.engine.open_stores): a streamed answer (a clone) keeps its store until the end.
            with leases():
                status = await self._handle(scope, receive, send, request_id)
        finally:
            self._observe(scope, state, request_id, status or 500, time.perf_counter() - began)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> int:
        """Answer the request; the status sent."""
        status = 0
        id_header = (_REQUEST_ID, request_id.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.setdefault("headers", [])
                if not any(name.lower() == _REQUEST_ID for name, _ in headers):
                    message["headers"] = [*headers, id_header]
            await send(message)

        # Raw header and path checks: this runs on every request, so no Headers objects or regex loop.
        limited = self.unlimited is None or not self.unlimited.match(scope.get("path", ""))
        refused = await self._refuse_early(scope, send, request_id, limited=limited)
        if refused:
            return refused

        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            message = await receive()
            if limited and message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge()
            return message

        try:
            await self.app(scope, receive_limited, send_with_id)
        except BodyTooLarge:
            if status:
                raise
            await _send_error(send, 413, "request_too_large", _too_large(self.max_body_bytes), request_id)
            return 413
        except Exception:
            # The traceback goes to the log only; the client sees the request id to quote.
            log.exception("unhandled error on %s %s [%s]", scope.get("method"), scope.get("path"), request_id)
            if status:
                raise
            body = json.dumps(internal_error_body(request_id)).encode()
            await _send(send, 500, body, error_headers(request_id, retryable=None))
            return 500
        return status

    async def _refuse_early(self, scope: Scope, send: Send, request_id: str, *, limited: bool) -> int:
        """Answer before the app sees the request, if it must be (the status sent, else 0): 503 while the
        process drains (but for the probes), 400 for a bad ``content-length``, 413 for one over the limit."""
        if self.drain.draining and scope.get("path", "") not in PROBE_PATHS:
            body = json.dumps(envelope("api_error", "this server is stopping; retry the request", request_id)).encode()
            headers = error_headers(request_id, retryable=True, retry_after=RETRY_AFTER_SECONDS)
            await _send(send, 503, body, headers | {"connection": "close"})
            scope["state"]["drained"] = True
            return 503
        if not limited:
            return 0
        declared = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is None:
            return 0
        try:
            too_large = int(declared) > self.max_body_bytes
        except ValueError:
            await _send_error(send, 400, "invalid_request_error", "bad content-length", request_id)
            return 400
        if too_large:
            await _send_error(send, 413, "request_too_large", _too_large(self.max_body_bytes), request_id)
            return 413
        return 0

    def _observe(self, scope: Scope, state: dict[str, Any], request_id: str, status: int, seconds: float) -> None:
        method = scope.get("method", "")
        method = method if method in _METHODS else "other"
        route = DRAINED if state.get("drained") else route_template(scope)
        if metrics.enabled():
            metrics.REQUESTS.labels(method, route, str(status)).inc()
            metrics.REQUEST_SECONDS.labels(method, route).observe(seconds)
        if self.access_log:
            principal = state.get("principal")
            actor = getattr(principal, "actor", None)
            access_log.info(
                "%s %s %d",
                method,
                route,
                status,
                extra={
                    "request_id": request_id,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 3),
                    "workspace_id": getattr(principal, "workspace_id", None),
                    "actor_type": getattr(actor, "type", None),
                    "actor_id": getattr(actor, "id", None),
                },
            )


def route_template(scope: Scope) -> str:
    """The template of the route that answered (``/v1/memory_stores/{memory_store_id}``): never the path
    itself, which holds ids and, for Git, a store's name in a clone's URL."""
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    return template if isinstance(template, str) and template else UNMATCHED


def _too_large(limit: int) -> str:
    return f"request body is larger than {limit} bytes"


async def _send_error(send: Send, status: int, api_type: str, message: str, request_id: str) -> None:
    body = json.dumps(envelope(api_type, message, request_id)).encode()
    await _send(send, status, body, error_headers(request_id, retryable=False))


async def _send(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
