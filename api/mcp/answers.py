"""What an MCP tool answers: engine values as JSON, in the shapes the REST API shows them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from gitmem.api.schemas.stores.conflicts import MemoryConflict, MemoryConflictComparison, MemoryConflictResolution
from gitmem.api.schemas.stores.memories import Memory
from gitmem.api.schemas.stores.memory_stores import MemoryStore as StoreOut
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.api.schemas.stores.search import MemoryVersionDiff, SearchResult, SearchResults
from gitmem.engine.index.search import SearchHit
from gitmem.engine.store.conflict_resolution import ConflictComparison, Resolved
from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.diff import VersionDiff
from gitmem.model import Note, Page, StoreInfo, Version


def text(answer: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=answer)], is_error=error)


def as_json(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False)


def plain(value: Any) -> Any:
    """Engine values as JSON, as the REST API shows them; other dataclasses field by field."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, VersionDiff):
        return plain(MemoryVersionDiff.of(value))
    if isinstance(value, Conflict):
        return plain(MemoryConflict.of(value, "basic"))
    if isinstance(value, ConflictComparison):
        return plain(MemoryConflictComparison.of(value))
    if isinstance(value, Resolved):
        return plain(MemoryConflictResolution.of(value, None))
    if isinstance(value, Page) and value.items and isinstance(value.items[0], SearchHit):
        return plain(SearchResults(data=[SearchResult.of(hit) for hit in value.items], next_page=value.next_page))
    if isinstance(value, Note):
        return plain(Memory.of(value, "basic"))
    if isinstance(value, Version):
        return plain(MemoryVersion.of(value, "basic"))
    if isinstance(value, StoreInfo):
        return plain(StoreOut.of(value))
    if isinstance(value, Page):
        return {"data": plain(value.items), "next_page": value.next_page}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
