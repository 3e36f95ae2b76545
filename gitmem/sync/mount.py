"""``gitmem mount``: a store's notes as files in a folder, synced both ways over the HTTP API.

A :class:`Mount` materialises every note of a store into a folder (the note ``/a/b.md`` is the file
``<folder>/a/b.md``), watches the folder with watchdog, and sends each change back once the file has been
quiet for ``debounce`` seconds, always with a precondition (the SHA-256 of the content it last synced, the
*base*). It polls the store every ``poll_interval`` seconds for changes made elsewhere and writes them into
the folder (temp file + rename, so a reader never sees half a note; the watcher's echo of that write
matches the base and is ignored). It is a pure HTTP client: it runs on any machine that can reach the
server.

Rules the mount keeps:

- A rename (a watchdog move, or a delete and a create of the same content within the debounce window)
  is an update of the note's ``path``, so the note keeps its id.
- Editor and system files are never synced: any segment starting with ``.`` (``.git``, ``.DS_Store``,
  ``.#x.md``, ``.x.md.swp``, the mount's own ``.gitmem-*.tmp``), names ending in ``.swp``, ``.swo``,
  ``.swx``, ``~`` or JetBrains' ``___jb_tmp___``/``___jb_old___``, ``#x#`` and vim's ``4913`` probe. A
  file whose path the store refuses is logged and counted as *rejected*, and stays on disk untouched.
- A failed precondition (someone changed the note meanwhile) reads the other side and merges three ways
  with Git (:mod:`gitmem.sync.merge`). A clean merge is pushed (with the new precondition) and written to the
  folder. Overlapping edits keep the other side's text in the note and save this side's text next to it
  as ``<name>.conflict-<sha8><ext>``, which is then synced like any new file: nothing is lost silently.
  A local delete of a note changed elsewhere restores the changed note; a local edit of a note deleted
  elsewhere creates it again.
- A read-only mount makes the folder read-only on disk (files 0444, folders 0555, undone by
  :meth:`Mount.stop`), never pushes, and puts the store's text back over any local edit (with a warning).
- ``clean=True`` (profile banks: "files that are not entries are removed when a session starts") removes
  every file that is not a note when the mount starts. Without it, files already in the folder are
  treated as new local files and pushed.
- :meth:`Mount.stop` flushes every pending change (a final scan of the folder catches what the watcher
  has not reported yet) before it returns. :meth:`Mount.flush` and :meth:`Mount.sync_remote_now` do one
  round each way on demand; :attr:`Mount.status` counts progress.

The base of every note (its text as last synced) is held in memory for merging.

A mount is three parts: the folder (:mod:`gitmem.sync.folder`: files, atomic writes, read-only modes,
ignored names), the debouncer (:mod:`gitmem.sync.debounce`: when a changed path is due) and the syncer
(:mod:`gitmem.sync.syncer` and :mod:`gitmem.sync.pull`: push, pull and merge). :class:`Mount` runs them: a
watchdog observer feeds the debouncer, and one worker thread syncs due paths, polls the store and rescans
the folder.

The note service behind a mount is a :class:`gitmem.sync.remote.Remote` (that module describes the protocol).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from gitmem.sync.debounce import Debouncer
from gitmem.sync.folder import MountFolder, conflict_path, is_ignored, safe_folder_name
from gitmem.sync.remote import Remote, RemoteUnavailable
from gitmem.sync.syncer import Syncer

__all__ = [
    "Mount",
    "MountSpec",
    "MountStatus",
    "conflict_path",
    "is_ignored",
    "safe_folder_name",
    "task_mount_specs",
]

log = logging.getLogger("gitmem.sync.mount")


# -- what a task mounts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MountSpec:
    store_id: str
    read_only: bool
    folder: str  # relative folder name under the mount root ("" = the root itself)


def task_mount_specs(payload: Any) -> list[MountSpec]:
    """The stores of ``GET /v1/tasks/{id}/memory`` as mount specs, one folder per store.

    Accepts a list or an object holding the list under ``data``, ``stores``, ``memory_stores``, ``mounts`` or
    ``resources``; each item names its store (``memory_store_id``, ``id`` or ``memory_store.id``), its
    ``access`` (``read_only``/``read_write``, or ``read_only: true``) and its folder (the last segment of
    ``mount_path``/``path``/``folder``, else ``name``/``store_name``, else the id). The tasks API answers
    ``{"stores": [{"memory_store_id", "name", "access", "mount_path", "available", "archived", ...}]}``:
    a store no longer ``available`` is skipped and an ``archived`` one is mounted read-only.
    """
    items: Any = payload
    if isinstance(payload, dict):
        for key in ("data", "stores", "memory_stores", "mounts", "resources"):
            if isinstance(payload.get(key), list):
                items = payload[key]
                break
        else:
            items = []
    specs: list[MountSpec] = []
    used: set[str] = set()
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        nested: dict[str, Any] = item["memory_store"] if isinstance(item.get("memory_store"), dict) else {}
        store_id = item.get("memory_store_id") or nested.get("id") or item.get("id")
        if not isinstance(store_id, str) or not store_id:
            continue
        if item.get("available") is False:
            continue  # the store is gone (deleted since the task was made)
        # An archived store refuses writes: mount it read-only.
        read_only = item.get("access") == "read_only" or item.get("read_only") is True or item.get("archived") is True
        mount_path = item.get("mount_path") or item.get("path") or item.get("folder")
        if isinstance(mount_path, str) and mount_path.strip("/"):
            name = PurePosixPath(mount_path.rstrip("/")).name
        else:
            name = item.get("name") or item.get("store_name") or nested.get("name") or store_id
        folder = safe_folder_name(str(name), store_id)
        if folder in used:
            folder = safe_folder_name(f"{folder}-{store_id}", store_id)
        used.add(folder)
        specs.append(MountSpec(store_id, read_only, folder))
    return specs


# -- the mount --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MountStatus:
    notes: int
    pending: int
    pushed: int
    pulled: int
    merged: int
    conflicts: int
    rejected: int
    errors: int
    running: bool
    last_error: str | None = None

    @property
    def synced(self) -> int:
        return self.pushed + self.pulled

    def line(self) -> str:
        return (
            f"{self.notes} notes, {self.pending} pending, {self.pushed} pushed, {self.pulled} pulled, "
            f"{self.merged} merged, {self.conflicts} conflicts, {self.rejected} rejected, {self.errors} errors"
        )


class _Handler(FileSystemEventHandler):
    def __init__(self, mount: Mount) -> None:
        self.mount = mount

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self.mount._on_event(event)
        except Exception:  # never kill the observer thread
            log.exception("mount: could not handle %r", event)


_WATCHED_EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


class Mount:
    """One store as one folder, synced both ways. ``start()``, then ``stop()`` (or use ``with``)."""

    def __init__(
        self,
        remote: Remote,
        folder: str | os.PathLike[str],
        *,
        read_only: bool = False,
        debounce: float = 0.3,
        poll_interval: float = 1.0,
        clean: bool = False,
        rescan_interval: float = 5.0,
        name: str | None = None,
    ) -> None:
        self.remote = remote
        self.folder = Path(folder).absolute()
        self.read_only = read_only
        self.debounce = debounce
        self.poll_interval = poll_interval
        self.clean = clean
        self.rescan_interval = rescan_interval
        self.name = name or str(self.folder)
        self._pending = Debouncer(debounce)
        self._files = MountFolder(self.folder, read_only=read_only, on_stale=lambda path: self._pending.touch([path]))
        self._sync = Syncer(remote, self._files, self._pending, read_only=read_only, clean=clean, name=self.name)
        self._stopping = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._started = False

    @property
    def max_wait(self) -> float:
        """A file written without pause is still synced this often."""
        return self._pending.max_wait

    # -- life cycle ---------------------------------------------------------------------------------------

    def __enter__(self) -> Mount:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Materialise the store into the folder, then watch it and poll the store."""
        if self._started:
            raise RuntimeError("mount already started")
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.read_only or not os.access(self.folder, os.W_OK) or not self.folder.stat().st_mode & 0o200:
            self._set_modes(writable=True)  # a read-only mount that did not stop may have left it locked
        listing = self.remote.list_all(with_content=True)
        with self._sync.lock:
            self._sync.materialise(listing)
            if self.read_only:
                self._set_modes(writable=False)
        self._stopping.clear()
        observer = Observer()
        observer.schedule(_Handler(self), str(self.folder), recursive=True, event_filter=_WATCHED_EVENTS)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._worker = threading.Thread(target=self._run, name=f"gitmem-mount {self.name}", daemon=True)
        self._worker.start()
        self._started = True
        log.info("mount %s: %d notes materialised", self.name, len(self._sync.bases))

    def stop(self) -> None:
        """Stop watching and polling; push every pending change first. Undo read-only modes."""
        if not self._started:
            return
        self._stopping.set()
        self._pending.wake()
        if self._worker is not None:
            self._worker.join()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
        try:
            self.flush()
        finally:
            if self.read_only:
                with self._sync.lock:
                    self._set_modes(writable=True)
            self._started = False

    @property
    def status(self) -> MountStatus:
        c = self._sync.counters
        return MountStatus(
            len(self._sync.bases),
            len(self._pending),
            c.pushed,
            c.pulled,
            c.merged,
            c.conflicts,
            c.rejected,
            c.errors,
            self._started and not self._stopping.is_set(),
            c.last_error,
        )

    def flush(self, *, attempts: int = 10) -> bool:
        """Push every local change now (pending or found by scanning the folder). True if none is left."""
        for attempt in range(attempts):
            with self._sync.lock:
                todo = self._sync.scan_local()
                todo.update(self._pending.take_all())
                if not todo:
                    return True
                self._sync.sync_paths(todo)
            if not len(self._pending):
                continue
            time.sleep(min(0.05 * (attempt + 1), 0.5))  # something is being retried
        left = sorted(self._pending.paths())
        if left:
            log.warning("mount %s: not yet synced after flush: %s", self.name, ", ".join(left[:10]))
        return not left

    def sync_remote_now(self) -> None:
        """Apply the store's changes made elsewhere to the folder now."""
        with self._sync.lock:  # a listing taken before a push of ours would look like a delete elsewhere
            self._sync.apply_remote(self.remote.list_all())

    # -- the worker ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        now = time.monotonic()
        next_poll, next_scan = now + self.poll_interval, now + self.rescan_interval
        while not self._stopping.is_set():
            due = self._pending.wait_due(min(next_poll, next_scan), self._stopping)
            if self._stopping.is_set():
                return
            if due:
                self._guarded(self._sync_due, due)
            if time.monotonic() >= next_poll:
                self._guarded(self.sync_remote_now)
                next_poll = time.monotonic() + self.poll_interval
            if time.monotonic() >= next_scan:
                self._guarded(self._rescan)
                next_scan = time.monotonic() + self.rescan_interval

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except RemoteUnavailable as exc:
            log.warning("mount %s: store unavailable, will retry: %s", self.name, exc.message)
        except Exception as exc:
            self._sync.error(f"{type(exc).__name__}: {exc}")
            log.exception("mount %s: sync failed", self.name)

    def _sync_due(self, due: list[str]) -> None:
        with self._sync.lock:
            self._sync.sync_paths(set(due))

    def _rescan(self) -> None:
        with self._sync.lock:
            found = self._sync.scan_local()
        self._pending.touch(found)

    def _set_modes(self, *, writable: bool) -> None:
        self._files.set_modes(writable=writable)
        with self._sync.lock:
            self._sync.refresh_stats()

    # -- events -------------------------------------------------------------------------------------------

    def _on_event(self, event: FileSystemEvent) -> None:
        src = self._watched(os.fsdecode(event.src_path))
        dest = self._watched(os.fsdecode(event.dest_path)) if event.dest_path else None
        if event.is_directory:
            self._pending.touch([p + "/" for p in (src, dest) if p])
            return
        self._pending.touch([p for p in (src, dest) if p])
        if src and dest:
            self._pending.record_move(dest, src)

    def _watched(self, file: str) -> str | None:
        """The note path of an event's file, or None for the folder itself and files that are never synced."""
        path = self._files.note_path(file)
        if path is None or (is_ignored(path) and path not in self._sync.bases):
            return None
        return path
