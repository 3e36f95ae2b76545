"""A folder of Markdown files as an import's source: an Obsidian or basic-memory vault, an agent's
memory folder. Every file is a note at its path under the folder (``people/sam.md`` is
``/people/sam.md``), one version and one commit each, by the service.

A file the store's rules refuse is listed with the reason and left out, and the rest go in: a secret
in its text or name, more bytes than a note may hold, a path no note may have (``..`` or a look-alike
of it, a backslash, a name Git reserves), a path that differs only in case from another file's, text
that is not UTF-8, a symbolic link, or one file more than a store holds. Hidden files and folders
(``.obsidian/``, ``.git/``, ``.trash/``) are a tool's own, not notes, and are passed over.

By default every version is dated when the import runs, in path order; with ``use_mtime`` each is
dated by its file's modification time, oldest first. Ids derive from the folder and the path, so the
same import run again into the same store goes on where it stopped.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

from gitmem import ids
from gitmem.clock import system_clock
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.journal import Journal
from gitmem.engine.transfer.replay import Progress
from gitmem.engine.transfer.values import Incoming, Refused, StoreFields
from gitmem.errors import GitmemError, SecretRefused
from gitmem.git.commits import VersionRecord
from gitmem.rules.paths import fold

log = logging.getLogger(__name__)


class FolderSource:
    """The files under ``root`` (see the module's docstring)."""

    def __init__(self, root: Path, *, use_mtime: bool = False) -> None:
        self.root = root.resolve()
        self.use_mtime = use_mtime
        self._notes: list[tuple[dt.datetime, str, str]] = []  # (time, path, text)
        self._refused: list[Refused] = []

    @property
    def key(self) -> str:
        return f"folder {self.root}{' mtime' if self.use_mtime else ''}"

    def fields(self) -> StoreFields:
        return StoreFields(self.root.name or "imported", f"Imported from the folder {self.root.name}")

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:  # noqa: ARG002  the Source protocol's signature
        """Read every file, keep what the store's rules take, and list the rest with the reason."""
        now = system_clock()
        twins: dict[str, str] = {}
        self._notes, self._refused = [], []
        for count, (file, relative) in enumerate(self._files(), start=1):
            if count % 200 == 0:
                progress("reading", count, None)
            reason, text = _read(store, file, relative, twins)
            if reason is not None:
                self._refused.append(Refused(relative, reason))
                continue
            assert text is not None  # noqa: S101  narrows the type for mypy; never a check of input
            if len(self._notes) >= store.policy.max_notes:
                self._refused.append(Refused(relative, f"a store holds at most {store.policy.max_notes} notes"))
                continue
            when = dt.datetime.fromtimestamp(file.lstat().st_mtime, dt.UTC) if self.use_mtime else now
            self._notes.append((when, "/" + relative, text))
        progress("reading", len(self._notes) + len(self._refused), None)
        self._notes.sort(key=lambda note: (note[0], note[1]) if self.use_mtime else (now, note[1]))
        return len(self._notes)

    def versions(self) -> Iterator[Incoming]:
        for when, path, text in self._notes:
            data = text.encode("utf-8")
            record = VersionRecord(
                ids.derived_id(ids.MEMORY, self.key, path),
                ids.derived_id(ids.VERSION, self.key, path),
                "created",
                path,
                hashlib.sha256(data).hexdigest(),
                len(data),
                None,
                when,
                when,
            )
            yield Incoming(record, text)

    def refused(self) -> tuple[Refused, ...]:
        return tuple(self._refused)

    def _files(self) -> Iterator[tuple[Path, str]]:
        """Every file under the folder that is not hidden, in path order: (file, path relative to it)."""
        stack = [self.root]
        found: list[tuple[Path, str]] = []
        while stack:
            folder = stack.pop()
            for entry in folder.iterdir():
                if entry.name.startswith(".") and not entry.name.startswith(".."):
                    continue  # hidden: a tool's own (a name that starts with '..' goes to the path rule)
                if entry.is_dir() and not entry.is_symlink():
                    stack.append(entry)
                else:
                    found.append((entry, entry.relative_to(self.root).as_posix()))
        return iter(sorted(found, key=lambda item: item[1]))


def _read(store: MemoryStore, file: Path, relative: str, twins: dict[str, str]) -> tuple[str | None, str | None]:
    """(why the file is refused, None) or (None, its text)."""
    path = "/" + relative
    if file.is_symlink():
        return "a symbolic link, not a file", None
    if not file.is_file():
        return "not a regular file", None
    try:
        store.policy.check_path(path)
    except SecretRefused as exc:
        return f"its path holds a secret: {exc.message}", None
    except GitmemError as exc:
        return exc.message, None
    size = file.stat().st_size
    if size > store.policy.max_content_bytes:
        return f"{size} bytes; a note holds at most {store.policy.max_content_bytes}", None
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text", None
    except OSError as exc:
        return f"cannot be read: {exc.strerror}", None
    try:
        store.policy.check_content(path, text)
    except GitmemError as exc:
        return exc.message, None
    twin = twins.setdefault(fold(path), path)
    if twin != path:
        return f"differs only in case from {twin[1:]}; on a case-insensitive file system they would be one file", None
    return None, text


__all__ = ["FolderSource"]
