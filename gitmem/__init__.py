"""gitmem: a memory store for AI agents in which every store is a bare Git repository.

The library; it knows nothing of HTTP (``gitmem.api`` puts it on the network). Start here::

    from gitmem import Gitmem

    gm = Gitmem.open("/var/lib/gitmem")
    workspace = gm.catalog.create_workspace("notes")
    info = gm.create_store(workspace.id, "team")
    store = gm.store(workspace.id, info.id)
    note = store.create("/people/sam.md", "Sam prefers async reviews.")

What lives here, top down as the layers import (docs/architecture.md says where each part lives and
why; docs/engine-api.md walks the library):

- :mod:`.cli` (the ``gitmem`` command) and :mod:`.config` (every setting, checked where a program
  starts); ``gitmem.api`` (the HTTP layer, from ``api/``) sits beside them;
- :mod:`.backup` (backups of a whole home, and restores that erase again what was erased since);
- :mod:`.parts` (a home's parts as one typed object, and the store as a caller may read it: what the
  app hands its routes, MCP, Git and the web view);
- :mod:`.access` (who may read and write which store) and :mod:`.home_tables` (every catalog table);
- :mod:`.webhooks`, :mod:`.agents` (tasks, the memory tool, dreams, the review) and :mod:`.banks`
  (profiles' encrypted memory banks);
- :mod:`.engine` (a data home and its stores), :mod:`.db` (the storage interface), :mod:`.git` (Git's
  plumbing), :mod:`.crypto` (encryption at rest) and :mod:`.rules` (what a write may be);
- :mod:`.sync`: the client side (``gitmem mount``, the MCP stdio bridge), which talks HTTP only;
- shared by every layer: :mod:`.errors` (the one exception hierarchy), :mod:`.model` (domain values),
  :mod:`.ids`, :mod:`.clock`, :mod:`.durable` (fsync), :mod:`.recent` (bounded memories of
  stores touched), :mod:`.metrics` and :mod:`.json_log`.

``Gitmem`` and ``MemoryStore`` are imported on first use: Git starts processes of this package per push
and per file (hooks, a clone's filter) that need neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gitmem.errors import (
    ArchivedStore,
    Conflict,
    GitmemError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    SecretRefused,
    TooLarge,
)
from gitmem.model import Actor, MemoryPrefix, Note, Page, StoreInfo, Version

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem
    from gitmem.engine.store.store import MemoryStore


def __getattr__(name: str) -> Any:
    if name == "Gitmem":
        from gitmem.engine.gitmem import Gitmem

        return Gitmem
    if name == "MemoryStore":
        from gitmem.engine.store.store import MemoryStore

        return MemoryStore
    raise AttributeError(f"module 'gitmem' has no attribute {name!r}")


__all__ = [
    "Actor",
    "ArchivedStore",
    "Conflict",
    "Gitmem",
    "GitmemError",
    "InvalidRequest",
    "MemoryPrefix",
    "MemoryStore",
    "NotFound",
    "Note",
    "Page",
    "PermissionDenied",
    "PreconditionFailed",
    "SecretRefused",
    "StoreInfo",
    "TooLarge",
    "Version",
]
