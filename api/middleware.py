"""Pure ASGI middleware: a request id on every response, the body-size limit, and the last-resort 500."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitmem.api.errors import (
    REQUEST_ID_HEADER,
    envelope,
    error_headers,
    internal_error_body,
    new_request_id,
)

log = logging.getLogger("gitmem.api")
_REQUEST_ID = REQUEST_ID_HEADER.encode()


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
    - turns an unhandled exception into a 500 ``api_error`` with no detail, and logs it.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, unlimited_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        patterns = list(unlimited_paths)
        self.unlimited = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        started = False
        id_header = (_REQUEST_ID, request_id.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = message.setdefault("headers", [])
                if not any(name.lower() == _REQUEST_ID for name, _ in headers):
                    message["headers"] = [*headers, id_header]
            await send(message)

        # Raw header and path checks: this runs on every request, so no Headers objects or regex loop.
        limited = self.unlimited is None or not self.unlimited.match(scope.get("path", ""))
        declared = (
            next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-length"), None)
            if limited
            else None
        )
        if declared is not None:
            try:
                too_large = int(declared) > self.max_body_bytes
            except ValueError:
                await _send_error(send, 400, "invalid_request_error", "bad content-length", request_id)
                return
            if too_large:
                await _send_error(send, 413, "request_too_large", _too_large(self.max_body_bytes), request_id)
                return

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
            if started:
                raise
            await _send_error(send, 413, "request_too_large", _too_large(self.max_body_bytes), request_id)
        except Exception:
            # The traceback goes to the log only; the client sees the request id to quote.
            log.exception("unhandled error on %s %s [%s]", scope.get("method"), scope.get("path"), request_id)
            if started:
                raise
            body = json.dumps(internal_error_body(request_id)).encode()
            await _send(send, 500, body, error_headers(request_id, retryable=None))


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
