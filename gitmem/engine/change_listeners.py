"""What is told of each change that lands in a home's stores (the webhooks' outbox): the
:class:`ChangeListener` protocol and a home's :class:`ChangeListeners`, attached where a program
opens the home (:meth:`gitmem.engine.gitmem.Gitmem.listen`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gitmem.engine.store.conflicts import Conflict
    from gitmem.engine.store.store import MemoryStore
    from gitmem.model import Version


class ChangeListener(Protocol):
    """What is told of each change right after it lands; a failure there never fails the write (the
    store logs it)."""

    def notes_changed(self, store: MemoryStore, workspace_id: str) -> object: ...

    def version_redacted(self, store: MemoryStore, workspace_id: str, version: Version) -> object: ...

    def conflict_kept(self, store: MemoryStore, workspace_id: str, conflict: Conflict) -> object: ...


class ChangeListeners:
    """A home's listeners, each told of every change in turn."""

    def __init__(self) -> None:
        self._listeners: tuple[ChangeListener, ...] = ()
        self._lock = threading.Lock()

    def add(self, listener: ChangeListener) -> None:
        """A listener attached twice is told once."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners = (*self._listeners, listener)

    def notes_changed(self, store: MemoryStore, workspace_id: str) -> None:
        for listener in self._listeners:
            listener.notes_changed(store, workspace_id)

    def version_redacted(self, store: MemoryStore, workspace_id: str, version: Version) -> None:
        for listener in self._listeners:
            listener.version_redacted(store, workspace_id, version)

    def conflict_kept(self, store: MemoryStore, workspace_id: str, conflict: Conflict) -> None:
        for listener in self._listeners:
            listener.conflict_kept(store, workspace_id, conflict)


__all__ = ["ChangeListener", "ChangeListeners"]
