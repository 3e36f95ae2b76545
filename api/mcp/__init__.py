"""The MCP server at ``/mcp``: streamable HTTP (the official ``mcp`` package), in the main server process.

Authentication is the REST API's: ``Authorization: Bearer`` (or ``x-api-key``) with an API key, a user's
token or a task's token, checked by the catalog on every HTTP request (401 in the error envelope before
MCP sees it) and again for every tool call from that call's own headers, so a tool always runs as the
credential that sent it (:mod:`gitmem.api.auth`, as REST and Git ask it, with the same rate limit). The
store is :meth:`gitmem.parts.Parts.open_store`'s, as everywhere. The tools are a table
(:mod:`gitmem.api.mcp.table`: name, description, argument model, handler) that
:mod:`gitmem.api.mcp.server` registers; their engine calls live in :mod:`gitmem.api.mcp.tools` and the
JSON they answer in :mod:`gitmem.api.mcp.answers`.

The ``mcp`` package takes about 0.45 s of CPU to import, more than the rest of the app together, so
the tools' module is imported and the session manager started on the first request to ``/mcp`` (in a
task group the app's lifespan keeps): a server process that never answers MCP never pays for it.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from gitmem.api.auth import caller, request_secret
from gitmem.api.errors import error_response, request_id_of
from gitmem.errors import GitmemError, RateLimited

MCP_PATH = "/mcp"


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
            state.mcp_server = await state.mcp_tasks.start(tools.serve, state.parts)
    return state.mcp_server


class MCPEndpoint:
    """The ASGI endpoint at ``/mcp``: refuses a request without a valid credential (401, the error
    envelope), applies the caller's rate limit, then hands it to the MCP session manager."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app_state = scope["app"].state
        request_id = request_id_of(scope)
        try:
            asked = Headers(scope=scope)
            # Whether a tool may write is the tool's to check, store by store (api.mcp.tools).
            await caller(scope, request_secret(asked), asked, write=False)
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
