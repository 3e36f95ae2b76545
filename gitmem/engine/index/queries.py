"""What a store's index answers: notes and versions by id, path, folder and filters, paged.

The reads of :class:`gitmem.engine.index.store_index.StoreIndex` (a mixin of it), in SQL that runs unchanged on
the SQLite file and on the store's PostgreSQL schema, through whatever ``self.db`` the index has. Also
used on a table of the same shape in memory (:mod:`gitmem.agents.review.approved_view`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitmem.clock import from_micros, to_micros
from gitmem.db.page_tokens import PageTokens
from gitmem.engine.index import stored
from gitmem.git.commits import VersionRecord
from gitmem.model import Actor, MemoryPrefix
from gitmem.rules.paths import ancestors, fold, levels


@dataclass(frozen=True)
class NoteRow:
    memory_id: str
    path: str
    blob_id: str
    sha256: str
    size: int
    version_id: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class VersionRow:
    seq: int
    record: VersionRecord
    blob_id: str | None
    commit_id: str


@dataclass(frozen=True)
class Placement:
    """What :meth:`IndexQueries.placement` found for a path: a note in the way (at it, above it or
    below it), a note it would differ from only in case, and the store's totals (notes, bytes)."""

    clash: NoteRow | None
    twin: NoteRow | None
    totals: tuple[int, int]


_TOTALS = "SELECT notes, bytes FROM totals"
_FIRST_BELOW = "SELECT * FROM notes WHERE path>=? AND path<? AND memory_id IS DISTINCT FROM ? ORDER BY path LIMIT 1"
_LEVEL_TAKEN = "SELECT 1 FROM notes WHERE (path=? OR (path>? AND path<?)) AND memory_id IS DISTINCT FROM ? LIMIT 1"


def _twin_candidates(level: str, other_than: bytes | str | None) -> tuple[str, tuple[Any, ...]]:
    """The statement finding the notes that may be ``level``'s case twins (:func:`_twin_among` decides)."""
    if level.isascii():
        # A path without an upper-case letter is its own lower case (found by the path's index), one
        # with one is in the index of those (a range from the level to past its folder; Python decides).
        lowered = level.lower()
        return (
            "SELECT * FROM notes WHERE (path=? OR (path>? AND path<?)) AND path=lower(path)"
            " AND memory_id IS DISTINCT FROM ?"
            " UNION ALL SELECT * FROM notes WHERE path<>lower(path) AND lower(path)>=? AND lower(path)<?"
            " AND memory_id IS DISTINCT FROM ? ORDER BY path",
            (lowered, lowered + "/", lowered + "0", other_than, lowered, lowered + "0", other_than),
        )
    # lower() folds ASCII only: a non-ASCII letter matches anything, then Python decides. (Both
    # sides lowered: SQLite's LIKE ignores ASCII case, PostgreSQL's does not.)
    pattern = "".join(
        ch.lower() if ch.isascii() and ch not in "%_\\" else ("\\" + ch if ch.isascii() else "_") for ch in level
    )
    return (
        "SELECT * FROM notes WHERE (lower(path) LIKE ? ESCAPE '\\' OR lower(path) LIKE ? ESCAPE '\\')"
        " AND memory_id IS DISTINCT FROM ? ORDER BY path",
        (pattern, pattern + "/%", other_than),
    )


def _twin_among(level: str, rows: Any) -> NoteRow | None:
    folded = fold(level)
    for row in rows:
        other = row["path"]
        head, rest = other[: len(level)], other[len(level) :]
        if head != level and fold(head) == folded and rest[:1] in ("", "/"):
            return note_row(row)
    return None


def upper_bound(prefix: str) -> str:
    """The smallest string greater than every string that starts with ``prefix`` (prefix ends in '/')."""
    return prefix[:-1] + "0"  # '0' is the character after '/'


def note_row(row: Any) -> NoteRow:
    return NoteRow(
        stored.note_id(row["memory_id"]),
        row["path"],
        stored.hash_hex(row["blob_id"]),
        stored.hash_hex(row["sha256"]),
        row["size"],
        stored.version_id(row["version_id"]),
        from_micros(row["created_at"]),
        from_micros(row["updated_at"]),
    )


def _version_row(row: Any) -> VersionRow:
    record = VersionRecord(
        memory_id=stored.note_id(row["memory_id"]),
        version_id=stored.version_id(row["version_id"]),
        operation=row["operation"],
        path=row["path"],
        content_sha256=stored.hash_hex(row["sha256"]),
        content_size=row["size"],
        created_by=stored.actor(row["actor_type"], row["actor_id"]),
        created_at=from_micros(row["created_at"]),
        note_created_at=from_micros(row["created_at"]),
        redacted_at=from_micros(row["redacted_at"]) if row["redacted_at"] is not None else None,
        redacted_by=stored.actor(row["redacted_by_type"], row["redacted_by_id"]),
    )
    return VersionRow(row["seq"], record, stored.hash_hex(row["blob_id"]), stored.hash_hex(row["commit_id"]))


class IndexQueries:
    """The index's reads, over ``self.db`` (an object with ``execute``) and ``self.tokens``."""

    db: Any
    tokens: PageTokens
    dialect: str  # whose values the rows hold (gitmem.engine.index.stored)

    def note(self, memory_id: str) -> NoteRow | None:
        row = self.db.execute(
            "SELECT * FROM notes WHERE memory_id=?", (stored.note_key(memory_id, self.dialect),)
        ).fetchone()
        return note_row(row) if row else None

    def note_at(self, path: str) -> NoteRow | None:
        row = self.db.execute("SELECT * FROM notes WHERE path=?", (path,)).fetchone()
        return note_row(row) if row else None

    def note_id_at(self, path: str) -> str | None:
        row = self.db.execute("SELECT memory_id FROM notes WHERE path=?", (path,)).fetchone()
        return stored.note_id(row[0]) if row else None

    def first_note_below(self, folder: str, *, other_than: str | None = None) -> NoteRow | None:
        """The first note inside ``folder`` in path order (skipping the note ``other_than``)."""
        prefix = folder.rstrip("/") + "/"
        other = stored.note_key(other_than, self.dialect)
        row = self.db.execute(_FIRST_BELOW, (prefix, upper_bound(prefix), other)).fetchone()
        return note_row(row) if row else None

    def case_twin(self, path: str, *, other_than: str | None = None) -> NoteRow | None:
        """A note whose path, or a folder above it, differs from ``path`` or a folder above it only in
        case (``/Dir/a.md`` for ``/dir/b.md``); ``other_than`` (a note being renamed) does not count.
        Folders that already exist as spelled were checked when they were made, so only the first new
        level is compared, through the indexes of paths and of those with capitals (or a LIKE scan for
        non-ASCII names)."""
        other = stored.note_key(other_than, self.dialect)
        for level in levels(path):
            exists = self.db.execute(_LEVEL_TAKEN, (level, level + "/", level + "0", other)).fetchone()
            if exists is None:
                return self._first_twin(level, other)
        return None

    def placement(self, path: str, *, moving: str | None) -> Placement:
        """What stands in the way of a note at ``path`` (``moving``: a note being renamed there): the
        note at it or at a folder above it, else the first note below it other than ``moving``; and,
        unless that one is another note, its :meth:`case_twin`; with the store's :meth:`totals`, which
        a write checks next. On PostgreSQL the lookups go to the server together (one round trip, two
        when the first new level of the path is a folder above it)."""
        read_all = getattr(self.db, "read_all", None)
        if read_all is None:
            clash = self.note_at(path)
            for folder in ancestors(path):
                if clash is not None:
                    break
                clash = self.note_at(folder)
            if clash is None:  # the moving note may itself be below its new path: look past it
                clash = self.first_note_below(path, other_than=moving)
            twin = self.case_twin(path, other_than=moving) if clash is None or clash.memory_id == moving else None
            return Placement(clash, twin, self.totals())
        spots, steps, below = [path, *ancestors(path)], levels(path), path.rstrip("/") + "/"
        other = stored.note_key(moving, self.dialect)
        results = read_all(
            [(_TOTALS, ())]
            + [("SELECT * FROM notes WHERE path=?", (spot,)) for spot in spots]
            + [(_FIRST_BELOW, (below, upper_bound(below), other))]
            + [(_LEVEL_TAKEN, (level, level + "/", level + "0", other)) for level in steps]
            + [_twin_candidates(path, other)]  # most often the level to compare: the note itself
        )
        count, size = results[0].fetchone()
        found = [rows.fetchone() for rows in results[1:-1]]
        row = next((row for row in found[: len(spots) + 1] if row is not None), None)
        clash = note_row(row) if row is not None else None
        if clash is not None and clash.memory_id != moving:
            return Placement(clash, None, (count, size))
        free = next((level for level, taken in zip(steps, found[len(spots) + 1 :], strict=True) if taken is None), None)
        if free is None:
            twin = None
        elif free == path:
            twin = _twin_among(path, results[-1])
        else:
            twin = self._first_twin(free, other)
        return Placement(clash, twin, (count, size))

    def _first_twin(self, level: str, other: bytes | str | None) -> NoteRow | None:
        """``other``: the note not to count, as the index keeps its id (stored.note_key)."""
        return _twin_among(level, self.db.execute(*_twin_candidates(level, other)))

    def totals(self) -> tuple[int, int]:
        """The store's notes and their bytes."""
        count, size = self.db.execute(_TOTALS).fetchone()
        return count, size

    def all_notes(self) -> Iterator[NoteRow]:
        for row in self.db.execute("SELECT * FROM notes ORDER BY path"):
            yield note_row(row)

    def list_notes(
        self, prefix: str, depth: int, limit: int, page: str | None
    ) -> tuple[list[NoteRow | MemoryPrefix], str | None]:
        """Notes under ``prefix`` in path order; with depth 1, deeper notes fold into folders.
        Keyset paging on the last path shown, so pages stay stable while the store changes."""
        lower, upper = prefix, upper_bound(prefix) if prefix != "/" else "0"
        after: str | None = None
        if page is not None:
            (after,) = self.tokens.decode(page, "notes", str)
            lower = upper_bound(after) if after.endswith("/") else after
        items: list[NoteRow | MemoryPrefix] = []
        exhausted = False
        while len(items) < limit + 1 and not exhausted:
            # A batch of rows in path order; a folder (depth 1) skips past its notes with a new query.
            wanted = limit + 1 - len(items)
            batch = wanted if depth == 0 else min(wanted, 16)  # a folder would waste the rest of a batch
            rows = self.db.execute(
                "SELECT * FROM notes WHERE path>=? AND path<? ORDER BY path LIMIT ?", (lower, upper, batch)
            ).fetchall()
            exhausted = len(rows) < batch
            for row in rows:
                note = note_row(row)
                rest = note.path[len(prefix) :]
                if depth == 1 and "/" in rest:
                    folder = prefix + rest.split("/", 1)[0] + "/"
                    items.append(MemoryPrefix(folder))
                    lower = upper_bound(folder)
                    exhausted = False
                    break
                if note.path != after:
                    items.append(note)
                lower = note.path + "\x01"  # just past it: paths hold no control character (and PostgreSQL no NUL)
        if len(items) <= limit:
            return items, None
        items = items[:limit]
        last = items[-1]
        return items, self.tokens.encode("notes", last.path)

    def version(self, version_id: str) -> VersionRow | None:
        key = stored.version_key(version_id, self.dialect)
        row = self.db.execute("SELECT * FROM versions WHERE version_id=?", (key,)).fetchone()
        return _version_row(row) if row else None

    def versions_of(self, memory_id: str) -> list[VersionRow]:
        rows = self.db.execute(
            "SELECT * FROM versions WHERE memory_id=? ORDER BY seq", (stored.note_key(memory_id, self.dialect),)
        )
        return [_version_row(r) for r in rows]

    def version_before(self, version_id: str) -> str | None:
        """The id of the same note's version just before ``version_id``: one lookup on the (memory_id,
        seq) index, not a read of the note's whole history."""
        row = self.db.execute(
            "SELECT p.version_id FROM versions v JOIN versions p ON p.memory_id = v.memory_id AND p.seq < v.seq"
            " WHERE v.version_id = ? ORDER BY p.seq DESC LIMIT 1",
            (stored.version_key(version_id, self.dialect),),
        ).fetchone()
        return stored.version_id(row[0]) if row else None

    def version_ids(self, *, after: int = 0, limit: int = -1) -> list[tuple[str, int]]:
        """(id, seq) of the versions after ``seq`` = ``after``, in order, at most ``limit`` (-1: all)."""
        rows = self.db.execute("SELECT version_id, seq FROM versions WHERE seq>? ORDER BY seq LIMIT ?", (after, limit))
        return [(stored.version_id(row[0]), row[1]) for row in rows]

    def all_versions(self) -> list[VersionRow]:
        return [_version_row(r) for r in self.db.execute("SELECT * FROM versions ORDER BY seq")]

    def list_versions(
        self,
        *,
        memory_id: str | None,
        operation: str | None,
        actor: Actor | None,
        created_gte: dt.datetime | None,
        created_lte: dt.datetime | None,
        limit: int,
        page: str | None,
    ) -> tuple[list[VersionRow], str | None]:
        where: list[str] = []
        args: list[bytes | str | int | None] = []  # SQL parameters: ids as stored, times and seq as integers
        if memory_id is not None:
            where.append("memory_id=?")
            args.append(stored.note_key(memory_id, self.dialect))
        if operation is not None:
            where.append("operation=?")
            args.append(operation)
        if actor is not None:
            where.append("actor_type=? AND actor_id=?")
            args += [actor.type, stored.actor_key(actor, self.dialect)]
        if created_gte is not None:
            where.append("created_at>=?")
            args.append(to_micros(created_gte))
        if created_lte is not None:
            where.append("created_at<=?")
            args.append(to_micros(created_lte))
        if page is not None:
            where.append("seq<?")
            args += self.tokens.decode(page, "versions", int)
        sql = "SELECT * FROM versions" + (" WHERE " + " AND ".join(where) if where else "")  # noqa: S608  conditions are the code's own; values bound
        rows = [_version_row(r) for r in self.db.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit + 1))]
        if len(rows) <= limit:
            return rows, None
        return rows[:limit], self.tokens.encode("versions", rows[limit - 1].seq)


__all__ = ["IndexQueries", "NoteRow", "VersionRow", "note_row", "upper_bound"]
