"""One replay of history: which note sits at which path as versions apply, oldest first.

The index, the history rewrite (its reading of the old history and its writing of the new one), the
push hook and the audit all replay a store's versions by this rule (docs/architecture.md):

- a created or modified version puts its note at its path and takes it from its old path; any other
  note at that path, in a folder above it or below it, leaves (a tree cannot hold both, and only a
  redaction, which leaves a note where it was, can make such a clash: the rewrite's new trees drop the
  note that was left behind, so every replay drops it too);
- a deleted version removes its note, redacted or not: the trees show the note gone either way;
- a redacted created or modified version changes no note: its path is gone, so the note stays where
  the version before left it, until its next version moves it;
- a version whose commit's tree lacks its path (a damaged history) changes no note either.

:func:`move` is the rule; :class:`Notes` keeps the state in memory for the replays that walk history
in Python, and the index applies the same :class:`Move` to its SQL table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from gitmem.git.commits import VersionRecord
from gitmem.rules.paths import ancestors


class Placed(NamedTuple):
    """A note at a path."""

    path: str
    memory_id: str


@dataclass(frozen=True)
class Move:
    """What one version does to the notes: ``memory_id`` goes to ``path`` (``None``: it leaves the
    store), and the notes in ``displaced`` leave to make room for it."""

    memory_id: str
    path: str | None
    displaced: tuple[Placed, ...] = ()


Near = Callable[[str], Iterable[Placed]]  # the notes at a path, in a folder above it or below it


def move(record: VersionRecord, near: Near, *, in_tree: bool = True) -> Move | None:
    """What ``record`` does to the notes (``None``: nothing). ``near`` answers which notes sit at a
    path, above it or below it just before the version; ``in_tree`` says whether the version's
    commit holds its content (a deletion needs none)."""
    if record.operation == "deleted":
        return Move(record.memory_id, None)
    if record.redacted_at is not None or record.path is None or not in_tree:
        return None
    others = tuple(sorted(p for p in near(record.path) if p.memory_id != record.memory_id))
    return Move(record.memory_id, record.path, others)


class Notes:
    """Which note is at which path, in memory: the state a replay keeps while it walks history.

    Subclasses that keep more of a note (its size, its spellings) extend :meth:`_add` and
    :meth:`_remove`, through which every change passes."""

    def __init__(self, notes: Iterable[tuple[str, str, int]] = ()) -> None:
        """Start from ``notes``: (path, memory id, size) of each note there is."""
        self._by_path: dict[str, str] = {}
        self._path_of: dict[str, str] = {}
        self._below: Counter[str] = Counter()  # folder -> how many notes sit under it
        for path, memory_id, size in notes:
            self._add(path, memory_id, size)

    def note_at(self, path: str) -> str | None:
        return self._by_path.get(path)

    def path_of(self, memory_id: str) -> str | None:
        return self._path_of.get(memory_id)

    def ids(self) -> frozenset[str]:
        return frozenset(self._path_of)

    def __len__(self) -> int:
        return len(self._by_path)

    def __iter__(self) -> Iterator[Placed]:
        return (Placed(path, memory_id) for path, memory_id in self._by_path.items())

    def near(self, path: str) -> list[Placed]:
        """The notes at ``path``, at a folder above it, or below it."""
        found = [Placed(p, self._by_path[p]) for p in (*ancestors(path), path) if p in self._by_path]
        if self._below.get(path):
            prefix = path + "/"
            found += [Placed(p, m) for p, m in self._by_path.items() if p.startswith(prefix)]
        return found

    def apply(self, record: VersionRecord, *, in_tree: bool = True) -> Move | None:
        """Replay one version; what it did (``None``: nothing)."""
        step = move(record, self.near, in_tree=in_tree)
        if step is None:
            return None
        for other in step.displaced:
            self._remove(other.path)
        old = self._path_of.get(step.memory_id)
        if old is not None:
            self._remove(old)
        if step.path is not None:
            self._add(step.path, step.memory_id, record.content_size or 0)
        return step

    def _add(self, path: str, memory_id: str, size: int) -> None:  # noqa: ARG002  a subclass counts it (engine.push.check)
        self._by_path[path] = memory_id
        self._path_of[memory_id] = path
        self._below.update(ancestors(path))

    def _remove(self, path: str) -> None:
        memory_id = self._by_path.pop(path)
        del self._path_of[memory_id]
        for folder in ancestors(path):
            self._below[folder] -= 1
            if not self._below[folder]:
                del self._below[folder]


__all__ = ["Move", "Near", "Notes", "Placed", "move"]
