"""``POST /v1/memory_stores/{id}/memory_tool``: one memory-tool call, so an agent loop in any language
can hand its ``memory_20250818`` tool calls to gitmem (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from gitmem.agents.memory_tool.tool import MemoryToolHandler
from gitmem.api.deps import OpenStore
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.stores.memory_tool import MemoryToolResult

router = APIRouter(prefix="/v1/memory_stores/{memory_store_id}", tags=["memory tool"], responses=ERROR_RESPONSES)


@router.post("/memory_tool", response_model=MemoryToolResult, summary="Run one memory-tool command")
def run_memory_tool(
    ref: OpenStore,
    command: dict[str, Any] = Body(..., examples=[{"command": "view", "path": "/memories"}]),
) -> MemoryToolResult:
    # A tool's refusal is an answer for the model (is_error), not an HTTP error.
    # The access the dependency checked: a read-only caller's writes are the tool's refusals.
    read_only = ref.grant.access == "read_only"
    result = MemoryToolHandler(ref.open(), ref.principal.actor, read_only=read_only).execute(command)
    return MemoryToolResult(content=result.content, is_error=result.is_error)
