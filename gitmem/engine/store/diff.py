"""What a version changed: a unified diff (as ``git diff`` prints it) and the same as structured hunks.

One engine for the API, the CLI and any later view. A version is compared with another version of the
same store, by default the version of its note just before it; a first version is compared with
nothing (a new file), a deletion with what it deleted. A redacted side shows no content at all.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal, Protocol

from gitmem.model import Version

CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file"

LineKind = Literal["context", "removed", "added"]
_SIGN: dict[LineKind, str] = {"context": " ", "removed": "-", "added": "+"}


@dataclass(frozen=True)
class DiffLine:
    kind: LineKind
    text: str  # without its line break
    newline: bool = True  # False for a last line with no line break


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: tuple[DiffLine, ...]

    @property
    def header(self) -> str:
        return f"@@ -{_range(self.old_start, self.old_lines)} +{_range(self.new_start, self.new_lines)} @@"


@dataclass(frozen=True)
class VersionDiff:
    old: Version | None  # None: the note did not exist before ``new``
    new: Version
    hunks: tuple[Hunk, ...]
    redacted: bool  # a side is redacted: no content is compared or shown

    @property
    def old_path(self) -> str | None:
        """The path before, or None where there was no note (or it is redacted)."""
        return None if self.old is None or self.old.operation == "deleted" else self.old.path

    @property
    def new_path(self) -> str | None:
        return None if self.new.operation == "deleted" else self.new.path

    @property
    def renamed(self) -> bool:
        return self.old_path is not None and self.new_path is not None and self.old_path != self.new_path

    @property
    def unified(self) -> str:
        """The diff as ``git diff`` prints it (no colour)."""
        return "".join(line + "\n" for line in unified_lines(self))


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _diff_line(kind: LineKind, raw: str) -> DiffLine:
    body = raw[:-1] if raw.endswith("\n") else raw
    return DiffLine(kind, body.rstrip("\r") if raw.endswith("\r\n") else body, raw.endswith("\n"))


def hunks(old_text: str, new_text: str, context: int = CONTEXT_LINES) -> tuple[Hunk, ...]:
    old, new = _lines(old_text), _lines(new_text)
    out = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(context):
        lines: list[DiffLine] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [_diff_line("context", line) for line in old[i1:i2]]
                continue
            lines += [_diff_line("removed", line) for line in old[i1:i2]]
            lines += [_diff_line("added", line) for line in new[j1:j2]]
        first, last = group[0], group[-1]
        old_count, new_count = last[2] - first[1], last[4] - first[3]
        out.append(
            Hunk(
                first[1] + 1 if old_count else first[1],
                old_count,
                first[3] + 1 if new_count else first[3],
                new_count,
                tuple(lines),
            )
        )
    return tuple(out)


def unified_lines(diff: VersionDiff) -> list[str]:
    """The lines of ``git diff`` for this pair, without line breaks."""
    old_path, new_path = diff.old_path, diff.new_path
    name = old_path or new_path or diff.new.path or "(redacted)"
    out = [f"diff --git a{old_path or name} b{new_path or name}"]
    if diff.redacted:
        return [*out, "(a redacted version: its content is not shown)"]
    if old_path is None and new_path is not None:
        out.append("new file")
    elif new_path is None:
        out.append("deleted file")
    elif diff.renamed:
        out += [f"rename from {old_path}", f"rename to {new_path}"]
    if not diff.hunks:
        return out
    out += [f"--- a{old_path}" if old_path else "--- /dev/null", f"+++ b{new_path}" if new_path else "+++ /dev/null"]
    for hunk in diff.hunks:
        out.append(hunk.header)
        for line in hunk.lines:
            out.append(_SIGN[line.kind] + line.text)
            if not line.newline:
                out.append(NO_NEWLINE)
    return out


def _text(version: Version | None) -> str:
    if version is None or version.operation == "deleted":
        return ""
    return version.content or ""


class Versions(Protocol):
    """Where a diff reads versions from: a store, or a store as it stood at its review mark."""

    def version(self, version_id: str, with_content: bool = True) -> Version: ...

    def previous_version(self, version: Version) -> Version | None: ...


def diff_versions(store: Versions, version_id: str, against: str | None = None) -> VersionDiff:
    """``version_id`` compared with ``against`` (another version of the store; default: the version of
    the same note just before it)."""
    new = store.version(version_id)
    old = store.previous_version(new) if against is None else store.version(against)
    redacted = new.redacted_at is not None or (old is not None and old.redacted_at is not None)
    changes = () if redacted else hunks(_text(old), _text(new))
    return VersionDiff(old, new, changes, redacted)


__all__ = ["CONTEXT_LINES", "DiffLine", "Hunk", "VersionDiff", "diff_versions", "hunks", "unified_lines"]
