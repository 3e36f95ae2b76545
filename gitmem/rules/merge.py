"""Three-way merge of a note's text, in pure Python: the rule both sides of gitmem merge by.

``merge3(base, ours, theirs)`` answers a :class:`MergeResult`: the merged text and how many hunks
overlapped. Regions where both sides kept the base's lines are stable; between them, a side that changed
wins over one that did not, equal changes merge, and different changes conflict. With a conflict,
``text`` holds Git-style markers (``<<<<<<<``/``=======``/``>>>>>>>``); a caller that must not publish
markers keeps both sides itself instead.

The server merges with it (a conflict's proposed merge, the opt-in merge of a stale write) and the
mount falls back to it where no ``git`` is installed (:mod:`gitmem.sync.merge` prefers Git's own
``git merge-file``; the two agree on what the tests give them).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["MergeResult", "merge3", "merge3_python", "trivial_merge"]

LABELS = ("local", "base", "remote")


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: int  # overlapping hunks; 0 is a clean merge

    @property
    def clean(self) -> bool:
        return self.conflicts == 0


def trivial_merge(base: str, ours: str, theirs: str) -> MergeResult | None:
    """The merge when one side left the base alone or both made the same text; None otherwise."""
    if ours == theirs or theirs == base:
        return MergeResult(ours, 0)
    if ours == base:
        return MergeResult(theirs, 0)
    return None


def merge3(base: str, ours: str, theirs: str, *, labels: tuple[str, str, str] = LABELS) -> MergeResult:
    """Merge the changes ``base -> ours`` and ``base -> theirs`` (the markers name ``labels``)."""
    return trivial_merge(base, ours, theirs) or merge3_python(base, ours, theirs, labels=labels)


def merge3_python(base: str, local: str, remote: str, *, labels: tuple[str, str, str] = LABELS) -> MergeResult:
    """A line-based diff3 (see the module's docstring)."""
    o, a, b = (t.splitlines(keepends=True) for t in (base, local, remote))
    ma, mb = _matches(o, a), _matches(o, b)
    out: list[str] = []
    conflicts = 0
    i = j = k = 0
    while i < len(o) or j < len(a) or k < len(b):
        if i < len(o) and ma.get(i) == j and mb.get(i) == k:
            out.append(o[i])
            i, j, k = i + 1, j + 1, k + 1
            continue
        i2 = next((t for t in range(i + 1, len(o)) if t in ma and t in mb and ma[t] >= j and mb[t] >= k), None)
        if i2 is None:
            i2, j2, k2 = len(o), len(a), len(b)
        else:
            j2, k2 = ma[i2], mb[i2]
        chunk_o, chunk_a, chunk_b = o[i:i2], a[j:j2], b[k:k2]
        if chunk_a in (chunk_o, chunk_b):
            out.extend(chunk_b)
        elif chunk_b == chunk_o:
            out.extend(chunk_a)
        else:
            conflicts += 1
            out.append(f"<<<<<<< {labels[0]}\n")
            out.extend(_terminated(chunk_a))
            out.append("=======\n")
            out.extend(_terminated(chunk_b))
            out.append(f">>>>>>> {labels[2]}\n")
        i, j, k = i2, j2, k2
    return MergeResult("".join(out), conflicts)


def _matches(base: list[str], other: list[str]) -> dict[int, int]:
    """Base line index -> the index of the same line in ``other``, along a longest matching."""
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    pairs: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for n in range(block.size):
            pairs[block.a + n] = block.b + n
    return pairs


def _terminated(lines: list[str]) -> list[str]:
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return lines
