"""A store as plain data, to compare two stores version for version (ids, actors, times, content)."""

from __future__ import annotations

from typing import Any

from gitmem.clock import iso
from gitmem.engine.store.store import MemoryStore


def snapshot(store: MemoryStore) -> dict[str, Any]:
    """Every version oldest first and every note, without what differs between stores (store and commit ids)."""
    versions = []
    page = None
    while True:
        got = store.versions(limit=20, page=page, with_content=True)
        versions += got.items
        page = got.next_page
        if page is None:
            break
    notes = []
    page = None
    while True:
        listed = store.list(limit=100, page=page)
        notes += listed.items
        page = listed.next_page
        if page is None:
            break
    return {
        "versions": [
            {
                "id": v.id,
                "memory_id": v.memory_id,
                "operation": v.operation,
                "path": v.path,
                "content": v.content,
                "sha256": v.content_sha256,
                "size": v.content_size_bytes,
                "created_at": iso(v.created_at),
                "created_by": v.created_by,
                "redacted_at": iso(v.redacted_at) if v.redacted_at else None,
                "redacted_by": v.redacted_by,
            }
            for v in reversed(versions)
        ],
        "notes": sorted(
            (n.id, n.path, store.get(n.id).content, iso(n.created_at), iso(n.updated_at), n.version_id)  # type: ignore[union-attr]
            for n in notes
        ),
    }
