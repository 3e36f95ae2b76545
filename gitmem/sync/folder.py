"""The mount's folder: notes as files, atomic writes, read-only modes, and the names it never syncs.

A note ``/a/b.md`` is the file ``<root>/a/b.md``. Writes go to a temp file that is then renamed over the
note's file, so a reader never sees half a note; a write or removal can be made conditional on the file
still being in the state last seen (its :data:`StatKey`): if it is not, the path is reported stale (the
mount syncs it again) and nothing is touched. A read-only mount makes the folder read-only on disk (files
0444, folders 0555) and opens the folders it needs for its own writes only for the time of each write.

This module knows nothing of the store; :mod:`gitmem.sync.syncer` decides what to write.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat as statmod
import tempfile
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gitmem.sync.remote import sha256_hex

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


# -- files ------------------------------------------------------------------------------------------------

StatKey = tuple[int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class LocalFile:
    """A file in the folder as read now."""

    stat: StatKey
    sha256: str
    text: str | None  # None: not UTF-8 (or too large) and so not a note


class MountFolder:
    """The folder at ``root``. ``on_stale(path)`` is called when a conditional write finds the file changed."""

    def __init__(self, root: Path, *, read_only: bool, on_stale: Callable[[str], None]) -> None:
        self.root = root
        self.read_only = read_only
        self._on_stale = on_stale
        self._locked = False  # read-only modes are on

    def note_path(self, file: str) -> str | None:
        try:
            rel = os.path.relpath(file, self.root)
        except ValueError:
            return None
        if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
            return None
        return "/" + rel.replace(os.sep, "/")

    def file(self, path: str) -> Path | None:
        segments = path.split("/")[1:]
        if not path.startswith("/") or not segments or any(s in ("", ".", "..") or os.sep in s for s in segments):
            return None
        return self.root.joinpath(*segments)

    def read(self, path: str) -> LocalFile | None:
        file = self.file(path)
        if file is None:
            return None
        try:
            st = file.stat()
            if not statmod.S_ISREG(st.st_mode):
                return None
            key = stat_key(st)
            if st.st_size > MAX_LOCAL_BYTES:
                return LocalFile(key, f"size:{st.st_size}", None)
            data = file.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return LocalFile(key, sha256_hex(data), text)

    def walk(
        self, known: Container[str] = (), *, include_ignored: bool = False, under: str = "/"
    ) -> Iterator[tuple[str, StatKey]]:
        root = self.file(under.rstrip("/")) if under != "/" else self.root
        if root is None or not root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(root):
            if not include_ignored:
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                file = os.path.join(dirpath, name)
                path = self.note_path(file)
                if path is None or (not include_ignored and is_ignored(path) and path not in known):
                    continue
                try:
                    st = os.stat(file)
                except OSError:
                    continue
                if statmod.S_ISREG(st.st_mode):
                    yield path, stat_key(st)

    def write(self, path: str, text: str, *, expect: StatKey | None = None) -> StatKey | None:
        """Write atomically (temp + rename). With ``expect``, only if the file is still in that state."""
        file = self.file(path)
        if file is None:
            raise OSError(f"{path!r} cannot be a file in the folder")
        if expect is not None:
            try:
                current: StatKey | None = stat_key(file.stat())
            except FileNotFoundError:
                current = None
            if current != expect:
                self._on_stale(path)
                return None
        with self.writable_dirs(file.parent):
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
        return stat_key(file.stat())

    def remove(self, path: str, *, expect: StatKey | None = None) -> bool:
        """Remove a note's file (and emptied folders). With ``expect``, only if the file is still in that
        state: False (and the path synced again) if it changed."""
        file = self.file(path)
        if file is None:
            return True
        with self.writable_dirs(file.parent):
            try:
                if expect is not None and stat_key(file.stat()) != expect:
                    self._on_stale(path)
                    return False
                file.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass
            self.prune_dirs(file)
        return True

    def prune_dirs(self, file: Path | None) -> None:
        """Remove the empty folders that held a note that is gone (folders are only paths)."""
        if file is None:
            return
        parent = file.parent
        with self.writable_dirs(parent.parent if parent != self.root else parent):
            while parent != self.root and self.root in parent.parents:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    @contextlib.contextmanager
    def writable_dirs(self, directory: Path) -> Iterator[None]:
        """In a read-only mount, open the folders from the root down to ``directory`` for one write."""
        if not (self.read_only and self._locked):
            yield
            return
        chain = [d for d in [directory, *directory.parents] if d == self.root or self.root in d.parents]
        for d in reversed(chain):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(d, 0o755)  # noqa: S103  a mount's folder, as its owner's other folders are
        try:
            yield
        finally:
            for d in chain:
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(d, 0o555)  # noqa: S103  a read-only mount's folder: read, never written

    def set_modes(self, *, writable: bool) -> None:
        """Read-only on disk: files 0444, folders 0555 (``writable`` undoes it: 0644 and 0755)."""
        file_mode, dir_mode = (0o644, 0o755) if writable else (0o444, 0o555)
        if not self.root.is_dir():
            return
        os.chmod(self.root, 0o755)  # noqa: S103  a mount's folder, as its owner's other folders are
        for dirpath, dirnames, filenames in os.walk(self.root):
            for d in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, d), 0o755)  # noqa: S103  a mount's folder, as its owner's other folders are
            for f in filenames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, f), file_mode)
        if not writable:
            for dirpath, _dirnames, _filenames in os.walk(self.root, topdown=False):
                with contextlib.suppress(OSError):
                    os.chmod(dirpath, dir_mode)
        self._locked = not writable

    def stat(self, path: str) -> StatKey | None:
        file = self.file(path)
        try:
            return stat_key(file.stat()) if file is not None else None
        except OSError:
            return None

    def move_aside(self, path: str, target_path: str) -> None:
        """Rename the file at ``path`` to ``target_path`` (both in the folder)."""
        file, target = self.file(path), self.file(target_path)
        assert file is not None and target is not None  # noqa: S101  narrows the type for mypy; never a check of input
        with self.writable_dirs(file.parent):
            os.replace(file, target)
