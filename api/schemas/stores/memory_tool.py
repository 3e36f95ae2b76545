"""The wire shape of ``POST /v1/memory_stores/{id}/memory_tool``: the tool's answer, as the SDK's local
memory tool gives it to the model."""

from __future__ import annotations

from pydantic import BaseModel


class MemoryToolResult(BaseModel):
    content: str
    is_error: bool
