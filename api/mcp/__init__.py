"""The MCP server at ``/mcp``: streamable HTTP (the official ``mcp`` package), in the main server process.

Authentication is the REST API's: ``Authorization: Bearer`` (or ``x-api-key``) with an API key, a user's
token or a task's token, checked by the catalog on every HTTP request (401 in the error envelope before
MCP sees it) and again for every tool call from that call's own headers, so a tool always runs as the
credential that sent it. Access rules and the engine calls live in :mod:`gitmem.api.mcp.tools`, the tools
in :mod:`gitmem.api.mcp.server`.

The ``mcp`` package takes about 0.45 s of CPU to import, more than the rest of the app together, so
the tools' module is imported and the session manager started on the first request to ``/mcp`` (in a
task group the app's lifespan keeps): a server process that never answers MCP never pays for it.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from gitmem import metrics
from gitmem.api.deps import request_secret
from gitmem.api.errors import error_response, request_id_of
from gitmem.api.ratelimit import WrongSecrets, client_address
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import AuthenticationFailed, GitmemError, PermissionDenied, RateLimited

MCP_PATH = "/mcp"


def authenticate(gm: Gitmem, headers: Mapping[str, str]) -> Principal:
    """The caller named by the request's headers, exactly as ``api.deps.get_principal`` checks it."""
    principal = gm.catalog.authenticate(request_secret(headers))
    wanted = headers.get("anthropic-workspace-id")
    if wanted and wanted != principal.workspace_id:
        raise PermissionDenied("this key does not belong to the workspace named in anthropic-workspace-id")
    return principal


@asynccontextmanager
async def running(state: Any) -> AsyncIterator[None]:
    """Run by the app's lifespan: the task group the MCP server will run in once it is first asked for
    (a fresh server each time the app starts)."""
    state.mcp_server = None
    state.mcp_starting = anyio.Lock()
    async with anyio.create_task_group() as tasks:
        state.mcp_tasks = tasks
        try:
            yield
        finally:
            tasks.cancel_scope.cancel()
            state.mcp_server = state.mcp_tasks = None


async def _server(state: Any) -> Any:
    """The running MCP server, started on first use; None if the app was not started through its lifespan."""
    server = getattr(state, "mcp_server", None)
    if server is not None or getattr(state, "mcp_tasks", None) is None:
        return server
    async with state.mcp_starting:
        if state.mcp_server is None:
            tools = await anyio.to_thread.run_sync(importlib.import_module, "gitmem.api.mcp.server")
            state.mcp_server = await state.mcp_tasks.start(tools.serve, state.gm)
    return state.mcp_server


class MCPEndpoint:
    """The ASGI endpoint at ``/mcp``: refuses a request without a valid credential (401, the error
    envelope), applies the caller's rate limit, then hands it to the MCP session manager."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app_state = scope["app"].state
        request_id = request_id_of(scope)
        try:
            # The catalog is SQLite: ask it from a worker thread, as FastAPI runs the REST routes' auth.
            asked = Headers(scope=scope)
            wrong: WrongSecrets = app_state.wrong_secrets
            address = client_address(scope)
            wrong.check(address)  # as the REST routes: too many wrong keys from here, and none is looked at
            try:
                principal = await anyio.to_thread.run_sync(authenticate, app_state.gm, asked)
            except AuthenticationFailed:
                if request_secret(asked):  # a wrong key, not a missing one
                    wrong.failed(address)
                raise
            scope.setdefault("state", {})["principal"] = principal  # for the access log: who called
            wait = app_state.limiter.acquire(principal.credential_id)
            if wait > 0:
                metrics.RATE_LIMITED.inc()
                raise RateLimited("rate limit exceeded for this key; retry later", retry_after=wait)
        except GitmemError as error:
            headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
            response = error_response(
                error.status,
                error.api_type,
                error.message,
                request_id,
                retryable=bool(error.retryable),
                headers=headers,
                retry_after=error.retry_after if isinstance(error, RateLimited) else None,
            )
            await response(scope, receive, send)
            return
        server = await _server(app_state)
        if server is None:  # the app was not started through its lifespan
            response = error_response(503, "api_error", "the MCP server is not running", request_id, retryable=True)
            await response(scope, receive, send)
            return
        await server.session_manager.handle_request(scope, receive, send)
