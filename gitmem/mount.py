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
  with Git (:mod:`gitmem.merge`). A clean merge is pushed (with the new precondition) and written to the
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

The note service behind a mount is a :class:`gitmem.remote.Remote` (that module describes the protocol).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat as statmod
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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

from gitmem.merge import merge3
from gitmem.remote import (
    Remote,
    RemoteEntry,
    RemoteError,
    RemoteNotFound,
    RemotePathConflict,
    RemotePreconditionFailed,
    RemoteRefused,
    RemoteUnavailable,
    sha256_hex,
)

__all__ = [
    "Mount",
    "MountSpec",
    "MountStatus",
    "conflict_path",
    "is_ignored",
    "safe_folder_name",
    "task_mount_specs",
]

log = logging.getLogger("gitmem.mount")

MAX_LOCAL_BYTES = 16 * 1024 * 1024  # a larger file is not read at all (every store refuses it anyway)
_TEMP_PREFIX = ".gitmem-"
# vim, emacs, and JetBrains' safe write (it writes x.md___jb_tmp___, keeps x.md___jb_old___, renames).
_EDITOR_SUFFIXES = (".swp", ".swo", ".swx", "~", "___jb_tmp___", "___jb_old___", "___jb_bak___")


# -- names ------------------------------------------------------------------------------------------------


def is_ignored(path: str) -> bool:
    """Editor temp files and dot files: never synced unless the store already has a note there."""
    segments = [s for s in path.split("/") if s]
    if not segments:
        return True
    if any(s.startswith(".") for s in segments):
        return True
    name = segments[-1]
    return name.endswith(_EDITOR_SUFFIXES) or name == "4913" or (name.startswith("#") and name.endswith("#"))


def conflict_path(path: str, content_sha256: str) -> str:
    """``/a/b.md`` -> ``/a/b.conflict-1a2b3c4d.md``: where this side's text goes when edits overlap."""
    pure = PurePosixPath(path)
    suffix = pure.suffix if pure.stem else ""
    stem = pure.name[: len(pure.name) - len(suffix)] if suffix else pure.name
    return str(pure.with_name(f"{stem}.conflict-{content_sha256[:8]}{suffix}"))


_UNSAFE_FOLDER_CHARS = re.compile(r"[^A-Za-z0-9._ -]+")


def safe_folder_name(name: str, fallback: str = "store") -> str:
    """A store's name as one folder name: no separators, no leading dot, not empty."""
    cleaned = _UNSAFE_FOLDER_CHARS.sub("_", name).strip(" ").lstrip(".")
    return cleaned[:100] or fallback


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
        nested = item.get("memory_store") if isinstance(item.get("memory_store"), dict) else {}
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

StatKey = tuple[int, int, int, int]


def _stat_key(st: os.stat_result) -> StatKey:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


@dataclass
class _Base:
    """A note as last synced: what a precondition expects and what a merge starts from."""

    memory_id: str
    sha256: str
    content: str
    etag: str | None = None
    stat: StatKey | None = None  # the file as last written or seen equal to this


@dataclass
class _Local:
    stat: StatKey
    sha256: str
    text: str | None  # None: not UTF-8 (or too large) and so not a note


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
        return (f"{self.notes} notes, {self.pending} pending, {self.pushed} pushed, {self.pulled} pulled, "
                f"{self.merged} merged, {self.conflicts} conflicts, {self.rejected} rejected, {self.errors} errors")


@dataclass
class _Counters:
    pushed: int = 0
    pulled: int = 0
    merged: int = 0
    conflicts: int = 0
    rejected: int = 0
    errors: int = 0
    last_error: str | None = None
    reported: dict[str, Any] = field(default_factory=dict)  # path -> the state already logged as refused


class _Handler(FileSystemEventHandler):
    def __init__(self, mount: Mount) -> None:
        self.mount = mount

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self.mount._on_event(event)
        except Exception:  # never kill the observer thread
            log.exception("mount: could not handle %r", event)


_WATCHED_EVENTS = [FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent, FileClosedEvent,
                   DirCreatedEvent, DirDeletedEvent, DirMovedEvent]


class Mount:
    """One store as one folder, synced both ways. ``start()``, then ``stop()`` (or use ``with``)."""

    def __init__(self, remote: Remote, folder: str | os.PathLike[str], *, read_only: bool = False,
                 debounce: float = 0.3, poll_interval: float = 1.0, clean: bool = False,
                 rescan_interval: float = 5.0, name: str | None = None) -> None:
        self.remote = remote
        self.folder = Path(folder).absolute()
        self.read_only = read_only
        self.debounce = debounce
        self.poll_interval = poll_interval
        self.clean = clean
        self.rescan_interval = rescan_interval
        self.name = name or str(self.folder)
        self._base: dict[str, _Base] = {}
        self._sync_lock = threading.RLock()  # every change to _base and to the folder's notes
        self._cv = threading.Condition()  # guards _pending and _moves; cheap, never held over I/O
        self._pending: dict[str, float] = {}  # note path (or folder prefix ending in "/") -> due (monotonic)
        self._since: dict[str, float] = {}  # when a pending path was first touched: bounds the debounce
        self.max_wait = max(5.0, 10 * debounce)  # a file written without pause is still synced this often
        self._moves: dict[str, str] = {}  # dest note path -> src note path, from watchdog moves
        self._counters = _Counters()
        self._stopping = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._started = False
        self._locked = False  # read-only modes are on

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
        with self._sync_lock:
            for path, entry in sorted(listing.items()):
                self._materialise(path, entry)
            for path, _key in list(self._walk(include_ignored=self.clean)):
                if path in self._base:
                    continue
                if self.clean:
                    self._remove_local(path)
                    log.info("mount %s: removed %s (not a note)", self.name, path)
                elif not is_ignored(path):
                    self._touch([path])
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
        log.info("mount %s: %d notes materialised", self.name, len(self._base))

    def stop(self) -> None:
        """Stop watching and polling; push every pending change first. Undo read-only modes."""
        if not self._started:
            return
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()
        if self._worker is not None:
            self._worker.join()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
        try:
            self.flush()
        finally:
            if self.read_only:
                with self._sync_lock:
                    self._set_modes(writable=True)
            self._started = False

    @property
    def status(self) -> MountStatus:
        c = self._counters
        with self._cv:
            pending = len(self._pending)
        return MountStatus(len(self._base), pending, c.pushed, c.pulled, c.merged, c.conflicts, c.rejected,
                           c.errors, self._started and not self._stopping.is_set(), c.last_error)

    def flush(self, *, attempts: int = 10) -> bool:
        """Push every local change now (pending or found by scanning the folder). True if none is left."""
        for attempt in range(attempts):
            with self._sync_lock:
                todo = self._scan_local()
                with self._cv:
                    todo.update(self._take(list(self._pending)))
                if not todo:
                    return True
                self._sync_paths(todo)
            with self._cv:
                if not self._pending:
                    continue
            time.sleep(min(0.05 * (attempt + 1), 0.5))  # something is being retried
        with self._cv:
            left = sorted(self._pending)
        if left:
            log.warning("mount %s: not yet synced after flush: %s", self.name, ", ".join(left[:10]))
        return not left

    def sync_remote_now(self) -> None:
        """Apply the store's changes made elsewhere to the folder now."""
        with self._sync_lock:  # a listing taken before a push of ours would look like a delete elsewhere
            self._apply_remote(self.remote.list_all())

    # -- the worker ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        now = time.monotonic()
        next_poll, next_scan = now + self.poll_interval, now + self.rescan_interval
        while not self._stopping.is_set():
            with self._cv:
                now = time.monotonic()
                wake = min([next_poll, next_scan, *self._pending.values()])
                if wake > now:
                    self._cv.wait(wake - now)
                if self._stopping.is_set():
                    return
                now = time.monotonic()
                due = self._take([p for p, t in self._pending.items() if t <= now])
            if due:
                self._guarded(self._sync_due, due)
            if time.monotonic() >= next_poll:
                self._guarded(self.sync_remote_now)
                next_poll = time.monotonic() + self.poll_interval
            if time.monotonic() >= next_scan:
                self._guarded(self._rescan)
                next_scan = time.monotonic() + self.rescan_interval

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except RemoteUnavailable as exc:
            log.warning("mount %s: store unavailable, will retry: %s", self.name, exc.message)
        except Exception as exc:
            self._error(f"{type(exc).__name__}: {exc}")
            log.exception("mount %s: sync failed", self.name)

    def _sync_due(self, due: list[str]) -> None:
        with self._sync_lock:
            self._sync_paths(set(due))

    def _rescan(self) -> None:
        with self._sync_lock:
            found = self._scan_local()
        self._touch(found)

    def _error(self, message: str) -> None:
        self._counters.errors += 1
        self._counters.last_error = message

    # -- events -------------------------------------------------------------------------------------------

    def _on_event(self, event: FileSystemEvent) -> None:
        src = self._watched(os.fsdecode(event.src_path))
        dest = self._watched(os.fsdecode(event.dest_path)) if event.dest_path else None
        if event.is_directory:
            self._touch([p + "/" for p in (src, dest) if p])
            return
        self._touch([p for p in (src, dest) if p])
        if src and dest:
            with self._cv:
                self._moves[dest] = src

    def _watched(self, file: str) -> str | None:
        """The note path of an event's file, or None for the folder itself and files that are never synced."""
        path = self._note_path(file)
        if path is None or (is_ignored(path) and path not in self._base):
            return None
        return path

    def _touch(self, paths: Iterable[str], delay: float | None = None) -> None:
        paths = list(paths)
        if not paths:
            return
        now = time.monotonic()
        due = now + (self.debounce if delay is None else delay)
        with self._cv:
            for p in paths:
                self._pending[p] = min(due, self._since.setdefault(p, now) + self.max_wait)
            self._cv.notify_all()

    def _take(self, paths: list[str]) -> list[str]:
        """Remove paths from the pending set (the caller holds ``_cv``)."""
        for p in paths:
            self._pending.pop(p, None)
            self._since.pop(p, None)
        return paths

    # -- local -> remote ----------------------------------------------------------------------------------

    def _sync_paths(self, paths: set[str]) -> None:
        """Push the local state of these notes (and folder prefixes), renames first. Holds the sync lock."""
        notes: set[str] = set()
        for p in paths:
            if p.endswith("/"):
                notes.update(b for b in self._base if b.startswith(p))
                notes.update(q for q, _ in self._walk(under=p))
            else:
                notes.add(p)
        local = {p: self._local(p) for p in notes}
        deleted = {p for p in notes if p in self._base and local[p] is None}
        created = {p for p in notes if p not in self._base and local[p] is not None and not is_ignored(p)}
        renames = {} if self.read_only else self._pair_renames(created, deleted, local)
        jobs: list[tuple[str, Any, tuple[Any, ...]]] = []
        for dest, src in renames.items():
            notes.discard(src)
            notes.discard(dest)
            jobs.append((dest, self._push_rename, (src, dest, local[dest])))
        jobs.extend((p, self._sync_one, (p,)) for p in sorted(notes))
        for n, (path, fn, args) in enumerate(jobs):
            if not self._attempt(path, fn, *args):  # the store is unreachable: retry the rest later
                later = [p for p, _, _ in jobs[n:]]
                later += [rest[0] for _, step, rest in jobs[n:] if step == self._push_rename]  # rename sources
                self._touch(later, delay=max(self.debounce, 1.0))
                break

    def _pair_renames(self, created: set[str], deleted: set[str], local: dict[str, _Local | None]) -> dict[str, str]:
        """Creations that are renames of deletions: a watchdog move, or the same content (also pairing with
        paths still waiting out their debounce)."""
        with self._cv:
            hints = {d: self._moves.pop(d) for d in local if d in self._moves}
            waiting = [q for q in self._pending if not q.endswith("/") and q not in local]
        if (created or deleted) and waiting:
            for q in waiting:
                lf = self._local(q)
                if q in self._base and lf is None:
                    deleted.add(q)
                    local[q] = None
                elif q not in self._base and lf is not None and not is_ignored(q):
                    created.add(q)
                    local[q] = lf
        renames: dict[str, str] = {}
        used: set[str] = set()
        for dest in sorted(created):
            src = hints.get(dest)
            if src in deleted and src not in used:
                renames[dest] = src
                used.add(src)
        for dest in sorted(created - set(renames)):
            lf = local[dest]
            assert lf is not None
            src = next((s for s in sorted(deleted - used) if self._base[s].sha256 == lf.sha256), None)
            if src is not None:
                renames[dest] = src
                used.add(src)
        if renames:
            with self._cv:
                self._take([*renames, *renames.values()])
        return renames

    def _attempt(self, path: str, fn: Any, *args: Any) -> bool:
        """Run one sync step; False if the store could not be reached (the caller retries later)."""
        try:
            fn(*args)
        except RemoteUnavailable as exc:
            log.warning("mount %s: %s: store unavailable, will retry: %s", self.name, path, exc.message)
            return False
        except (RemoteError, OSError) as exc:
            self._error(f"{path}: {exc}")
            log.error("mount %s: %s: %s", self.name, path, exc)
        return True

    def _sync_one(self, path: str) -> None:
        base = self._base.get(path)
        if base is None and is_ignored(path):
            return
        lf = self._local(path)
        if self.read_only:
            self._keep_read_only(path, base, lf)
            return
        if lf is None:
            if base is not None:
                self._push_delete(path, base)
            return
        if lf.text is None:
            self._report(path, lf.stat, "not UTF-8 text (or too large); not synced")
            return
        if base is None:
            self._push_create(path, lf)
        elif lf.sha256 == base.sha256:
            base.stat = lf.stat
        else:
            self._push_update(path, base, lf)

    def _push_create(self, path: str, lf: _Local) -> None:
        assert lf.text is not None
        if not self._valid(path, lf.stat):
            return
        try:
            entry = self.remote.create(path, lf.text)
        except RemotePathConflict as exc:
            other = self.remote.list_all().get(path)
            if other is None:
                self._report(path, lf.stat, f"collides with a note elsewhere in the store: {exc.message}")
                return
            self._merge(path, None, lf, self.remote.read(other.memory_id))
            return
        except RemoteRefused as exc:
            self._report(path, lf.stat, exc.message)
            return
        self._pushed(path, entry, lf, "created")

    def _push_update(self, path: str, base: _Base, lf: _Local) -> None:
        assert lf.text is not None
        try:
            entry = self.remote.update(base.memory_id, content=lf.text, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            try:
                other = self.remote.read(base.memory_id)
            except RemoteNotFound:
                self._recreate(path, lf)
                return
            self._merge(path, base, lf, other)
            return
        except RemoteNotFound:
            self._recreate(path, lf)
            return
        except RemoteRefused as exc:
            self._report(path, lf.stat, exc.message)
            return
        # Keyed by the local path even if the note moved elsewhere meanwhile: the next poll moves the file.
        self._pushed(path, entry, lf, "updated")

    def _pushed(self, path: str, entry: RemoteEntry, lf: _Local, verb: str) -> None:
        """Remember what the store now holds at ``path`` as the base of the next three-way merge."""
        assert lf.text is not None
        self._base[path] = _Base(entry.memory_id, lf.sha256, lf.text, entry.etag, lf.stat)
        self._counters.pushed += 1
        self._counters.reported.pop(path, None)
        log.info("mount %s: %s %s", self.name, verb, path)

    def _recreate(self, path: str, lf: _Local) -> None:
        log.warning("mount %s: %s was deleted elsewhere but edited here; creating it again", self.name, path)
        self._base.pop(path, None)
        self._push_create(path, lf)

    def _push_delete(self, path: str, base: _Base) -> None:
        try:
            self.remote.delete(base.memory_id, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            other = self.remote.read(base.memory_id)
            log.warning("mount %s: %s was deleted here but changed elsewhere; keeping the other change",
                        self.name, path)
            self._counters.conflicts += 1
            self._base.pop(path, None)
            self._write_note(other.path, other)
            return
        except RemoteNotFound:
            pass
        self._base.pop(path, None)
        self._prune_dirs(self._file(path))
        self._counters.pushed += 1
        log.info("mount %s: deleted %s", self.name, path)

    def _push_rename(self, src: str, dest: str, lf: _Local | None) -> None:
        base = self._base[src]
        if lf is None or lf.text is None or not self._valid(dest, lf.stat):
            self._sync_one(src)  # the note's file went somewhere we cannot follow: a deletion
            self._sync_one(dest)
            return
        content = lf.text if lf.sha256 != base.sha256 else None
        try:
            entry = self.remote.update(base.memory_id, path=dest, content=content, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            # Changed elsewhere: move it anyway (a path alone overwrites nobody's text), then merge the text.
            entry = self.remote.update(base.memory_id, path=dest)
            del self._base[src]
            self._base[dest] = _Base(entry.memory_id, base.sha256, base.content, None, None)
            self._counters.pushed += 1
            self._sync_one(dest)
            return
        except RemoteNotFound:
            del self._base[src]
            self._push_create(dest, lf)
            return
        except RemotePathConflict:
            self._sync_one(src)
            self._sync_one(dest)
            return
        del self._base[src]
        self._base[dest] = _Base(entry.memory_id, lf.sha256, lf.text, entry.etag, lf.stat)
        self._prune_dirs(self._file(src))
        self._counters.pushed += 1
        log.info("mount %s: renamed %s -> %s", self.name, src, dest)

    def _merge(self, path: str, base: _Base | None, lf: _Local, other: RemoteEntry) -> None:
        """Three-way merge of this side's ``lf`` and the store's ``other`` from ``base``."""
        assert lf.text is not None
        for _ in range(5):
            remote_text = other.content or ""
            result = merge3(base.content if base else "", lf.text, remote_text,
                            labels=("local", "base", "remote"))
            if not result.clean:
                break
            if result.text == remote_text:
                pushed = other
            else:
                try:
                    pushed = self.remote.update(other.memory_id, content=result.text, expected_sha256=other.sha256)
                except RemotePreconditionFailed:
                    other = self.remote.read(other.memory_id)
                    continue
            pushed = RemoteEntry(pushed.memory_id, pushed.path, sha256_hex(result.text), pushed.etag, result.text)
            self._counters.merged += 1
            self._counters.pushed += 1
            log.info("mount %s: merged changes made elsewhere into %s", self.name, path)
            self._land(path, pushed, lf)
            return
        # Overlapping edits: the store's text stays the note; this side's text is kept beside it.
        keep = conflict_path(other.path, lf.sha256)
        self._counters.conflicts += 1
        log.warning("mount %s: %s was changed here and elsewhere in the same place; kept the other change "
                    "in %s and this one in %s", self.name, path, other.path, keep)
        self._write_file(keep, lf.text)
        self._touch([keep], delay=0)
        self._land(path, other, lf)

    def _land(self, path: str, entry: RemoteEntry, lf: _Local) -> None:
        """Make ``entry`` the base and the file of the note whose file at ``path`` held ``lf``.

        If the file changed again meanwhile it is left alone, with ``lf`` as its base: its next sync then
        merges the newer edit onto ``entry``.
        """
        since = _Base(entry.memory_id, lf.sha256, lf.text or "", None, None)
        if entry.path != path:
            if not self._remove_local(path, expect=lf.stat):
                self._base[path] = since
                return
            self._base.pop(path, None)
            self._preserve(entry.path, entry.sha256)
            self._write_note(entry.path, entry)
        else:
            self._write_note(path, entry, expect=lf.stat, otherwise=since)

    def _keep_read_only(self, path: str, base: _Base | None, lf: _Local | None) -> None:
        if base is None:
            if lf is not None:
                self._report(path, lf.stat, "the store is mounted read-only; not pushed")
            return
        if lf is not None and lf.sha256 == base.sha256:
            base.stat = lf.stat
            return
        log.warning("mount %s: %s is read-only; the local change is not pushed and the store's text is back",
                    self.name, path)
        self._counters.rejected += 1
        base.stat = self._write_file(path, base.content)

    def _valid(self, path: str, key: StatKey) -> bool:
        try:
            self.remote.validate_path(path)
        except ValueError as exc:
            self._report(path, key, str(exc))
            return False
        return True

    def _report(self, path: str, key: Any, reason: str) -> None:
        if self._counters.reported.get(path) == key:
            return
        self._counters.reported[path] = key
        self._counters.rejected += 1
        log.warning("mount %s: %s not synced: %s", self.name, path, reason)

    # -- remote -> local ----------------------------------------------------------------------------------

    def _materialise(self, path: str, entry: RemoteEntry) -> None:
        if self._file(path) is None:
            self._report(path, entry.sha256, "the store's path cannot be a file here")
            return
        if entry.content is None:
            entry = self.remote.read(entry.memory_id)
        lf = self._local(path)
        if lf is not None and lf.sha256 == entry.sha256:
            self._base[path] = _Base(entry.memory_id, entry.sha256, entry.content or "", entry.etag, lf.stat)
        elif lf is not None and lf.text is not None and not (self.clean or self.read_only):
            self._merge(path, None, lf, entry)  # a file left from before: keep both sides
        else:
            try:
                if not self.clean:
                    self._preserve(path, entry.sha256)
                self._write_note(path, entry)
            except OSError as exc:
                self._error(f"{path}: {exc}")
                log.error("mount %s: cannot write %s: %s", self.name, path, exc)

    def _apply_remote(self, listing: dict[str, RemoteEntry]) -> None:
        by_id = {e.memory_id: e for e in listing.values()}
        with self._cv:
            pending = set(self._pending)
        prefixes = tuple(p for p in pending if p.endswith("/"))

        def busy(p: str) -> bool:
            if self.read_only:
                return False
            return p in pending or bool(prefixes) and p.startswith(prefixes)

        for path, base in list(self._base.items()):
            entry = by_id.get(base.memory_id)
            if entry is not None and entry.path == path and entry.sha256 == base.sha256:
                continue
            if busy(path):
                continue
            lf = self._local(path)
            if not self.read_only and (lf is None or lf.sha256 != base.sha256):
                self._touch([path])  # changed on both sides: the local sync merges
                continue
            try:
                self._pull(path, base, entry, lf)
            except (OSError, RemoteNotFound) as exc:
                log.warning("mount %s: %s: %s", self.name, path, exc)
        known = {b.memory_id for b in self._base.values()}
        for path, entry in sorted(listing.items()):
            if entry.memory_id in known or busy(path) or self._file(path) is None:
                continue
            lf = self._local(path)
            try:
                if lf is not None and lf.sha256 == entry.sha256 and lf.text is not None:
                    self._base[path] = _Base(entry.memory_id, entry.sha256, lf.text, entry.etag, lf.stat)
                elif lf is not None and lf.text is not None and not self.read_only:
                    self._merge(path, None, lf, self.remote.read(entry.memory_id))
                else:
                    self._preserve(path, entry.sha256)
                    self._write_note(path, self.remote.read(entry.memory_id))
                    self._counters.pulled += 1
            except (OSError, RemoteNotFound) as exc:
                log.warning("mount %s: %s: %s", self.name, path, exc)

    def _pull(self, path: str, base: _Base, entry: RemoteEntry | None, lf: _Local | None) -> None:
        """Bring a note whose file is unchanged here up to the store: deleted, moved, or new text.

        Each step is skipped if the file changes under it; the local sync then merges as usual.
        """
        seen = lf.stat if lf is not None else None
        if entry is None:
            if self._remove_local(path, expect=seen):
                del self._base[path]
                self._counters.pulled += 1
                log.info("mount %s: %s deleted elsewhere", self.name, path)
            return
        if entry.path != path:
            if self._file(entry.path) is None or not self._remove_local(path, expect=seen):
                return
            del self._base[path]
            log.info("mount %s: %s moved elsewhere to %s", self.name, path, entry.path)
            self._preserve(entry.path, entry.sha256)
            self._write_note(entry.path, self.remote.read(entry.memory_id))
            self._counters.pulled += 1
        elif (entry.sha256 != base.sha256 or lf is None) and self._write_note(
                path, self.remote.read(entry.memory_id), expect=seen):
            self._counters.pulled += 1

    def _write_note(self, path: str, entry: RemoteEntry, *, expect: StatKey | None = None,
                    otherwise: _Base | None = None) -> bool:
        """Write the note's file and make ``entry`` its base. With ``expect``, only if the file is still in
        that state; if not, the base becomes ``otherwise`` (or stays) and the path is synced again."""
        text = entry.content or ""
        key = self._write_file(path, text, expect=expect)
        if key is None:
            if otherwise is not None:
                self._base[path] = otherwise
            return False
        self._base[path] = _Base(entry.memory_id, sha256_hex(text), text, entry.etag, key)
        return True

    def _preserve(self, path: str, sha256: str) -> None:
        """A local file that is no note is about to be replaced by the note at its path: move it aside."""
        file = self._file(path)
        lf = self._local(path)
        if file is None or lf is None or lf.sha256 == sha256 or path in self._base:
            return
        keep = conflict_path(path, lf.sha256)
        target = self._file(keep)
        assert target is not None
        with self._writable_dirs(file.parent):
            os.replace(file, target)
        self._counters.conflicts += 1
        log.warning("mount %s: %s arrived from the store where a different local file was; the local file is "
                    "now %s", self.name, path, keep)
        if not self.read_only:
            self._touch([keep])

    # -- the folder ---------------------------------------------------------------------------------------

    def _note_path(self, file: str) -> str | None:
        try:
            rel = os.path.relpath(file, self.folder)
        except ValueError:
            return None
        if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
            return None
        return "/" + rel.replace(os.sep, "/")

    def _file(self, path: str) -> Path | None:
        segments = path.split("/")[1:]
        if not path.startswith("/") or not segments or any(s in ("", ".", "..") or os.sep in s for s in segments):
            return None
        return self.folder.joinpath(*segments)

    def _local(self, path: str) -> _Local | None:
        file = self._file(path)
        if file is None:
            return None
        try:
            st = file.stat()
            if not statmod.S_ISREG(st.st_mode):
                return None
            key = _stat_key(st)
            if st.st_size > MAX_LOCAL_BYTES:
                return _Local(key, f"size:{st.st_size}", None)
            data = file.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return _Local(key, sha256_hex(data), text)

    def _walk(self, *, include_ignored: bool = False, under: str = "/") -> Iterator[tuple[str, StatKey]]:
        root = self._file(under.rstrip("/")) if under != "/" else self.folder
        if root is None or not root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(root):
            if not include_ignored:
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                file = os.path.join(dirpath, name)
                path = self._note_path(file)
                if path is None or (not include_ignored and is_ignored(path) and path not in self._base):
                    continue
                try:
                    st = os.stat(file)
                except OSError:
                    continue
                if statmod.S_ISREG(st.st_mode):
                    yield path, _stat_key(st)

    def _scan_local(self) -> set[str]:
        """Notes whose file differs from what was last synced, and files that are no note yet."""
        found: set[str] = set()
        seen: set[str] = set()
        for path, key in self._walk():
            seen.add(path)
            base = self._base.get(path)
            if base is None:
                if self._counters.reported.get(path) != key:
                    found.add(path)
            elif base.stat != key:
                found.add(path)
        found.update(p for p in self._base if p not in seen)
        return found

    def _write_file(self, path: str, text: str, *, expect: StatKey | None = None) -> StatKey | None:
        """Write atomically (temp + rename). With ``expect``, only if the file is still in that state."""
        file = self._file(path)
        if file is None:
            raise OSError(f"{path!r} cannot be a file in the folder")
        if expect is not None:
            try:
                current: StatKey | None = _stat_key(file.stat())
            except FileNotFoundError:
                current = None
            if current != expect:
                self._touch([path])
                return None
        with self._writable_dirs(file.parent):
            file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=file.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text.encode("utf-8"))
                os.chmod(tmp, 0o444 if self.read_only else 0o644)
                os.replace(tmp, file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        return _stat_key(file.stat())

    def _remove_local(self, path: str, *, expect: StatKey | None = None) -> bool:
        """Remove a note's file (and emptied folders). With ``expect``, only if the file is still in that
        state: False (and the path synced again) if it changed."""
        file = self._file(path)
        if file is None:
            return True
        with self._writable_dirs(file.parent):
            try:
                if expect is not None and _stat_key(file.stat()) != expect:
                    self._touch([path])
                    return False
                file.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass
            self._prune_dirs(file)
        return True

    def _prune_dirs(self, file: Path | None) -> None:
        """Remove the empty folders that held a note that is gone (folders are only paths)."""
        if file is None:
            return
        parent = file.parent
        with self._writable_dirs(parent.parent if parent != self.folder else parent):
            while parent != self.folder and self.folder in parent.parents:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    @contextlib.contextmanager
    def _writable_dirs(self, directory: Path) -> Iterator[None]:
        """In a read-only mount, open the folders from the root down to ``directory`` for one write."""
        if not (self.read_only and self._locked):
            yield
            return
        chain = [d for d in [directory, *directory.parents] if d == self.folder or self.folder in d.parents]
        for d in reversed(chain):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(d, 0o755)
        try:
            yield
        finally:
            for d in chain:
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(d, 0o555)

    def _set_modes(self, *, writable: bool) -> None:
        """Read-only on disk: files 0444, folders 0555 (``writable`` undoes it: 0644 and 0755)."""
        file_mode, dir_mode = (0o644, 0o755) if writable else (0o444, 0o555)
        if not self.folder.is_dir():
            return
        os.chmod(self.folder, 0o755)
        for dirpath, dirnames, filenames in os.walk(self.folder):
            for d in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, d), 0o755)
            for f in filenames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, f), file_mode)
        if not writable:
            for dirpath, _dirnames, _filenames in os.walk(self.folder, topdown=False):
                with contextlib.suppress(OSError):
                    os.chmod(dirpath, dir_mode)
        self._locked = not writable
        with self._sync_lock:
            for path, base in self._base.items():
                file = self._file(path)
                with contextlib.suppress(OSError):
                    if file is not None and base.stat is not None:
                        base.stat = _stat_key(file.stat())

