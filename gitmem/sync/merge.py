"""Three-way merge of a note's text: Git's own ``git merge-file``, with a small pure-Python diff3 when no
``git`` is installed (a mount may run on a machine without Git).

``merge3(base, local, remote)`` answers a :class:`MergeResult`: the merged text and whether any hunk
overlapped. With a conflict, ``text`` holds Git-style markers (``<<<<<<<``/``=======``/``>>>>>>>``); a
caller that must not publish markers (the mount does not) keeps both sides itself instead.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

__all__ = ["MergeError", "MergeResult", "merge3", "merge3_git", "merge3_python"]


class MergeError(RuntimeError):
    """``git merge-file`` failed for a reason other than conflicts."""


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: int  # overlapping hunks; 0 is a clean merge

    @property
    def clean(self) -> bool:
        return self.conflicts == 0


def merge3(
    base: str,
    local: str,
    remote: str,
    *,
    labels: tuple[str, str, str] = ("local", "base", "remote"),
    use_git: bool | None = None,
) -> MergeResult:
    """Merge the changes ``base -> local`` and ``base -> remote``.

    The trivial cases (one side unchanged, or both sides equal) never call Git. ``use_git=None`` uses Git
    when it is on ``PATH``.
    """
    if local == remote or remote == base:
        return MergeResult(local, 0)
    if local == base:
        return MergeResult(remote, 0)
    if use_git is None:
        use_git = shutil.which("git") is not None
    if use_git:
        return merge3_git(base, local, remote, labels=labels)
    return merge3_python(base, local, remote, labels=labels)


def merge3_git(
    base: str, local: str, remote: str, *, labels: tuple[str, str, str] = ("local", "base", "remote")
) -> MergeResult:
    """``git merge-file -p local base remote`` on temporary files."""
    with tempfile.TemporaryDirectory(prefix="gitmem-merge-") as tmp:
        names = []
        for name, text in (("local", local), ("base", base), ("remote", remote)):
            file = os.path.join(tmp, name)
            with open(file, "wb") as fh:
                fh.write(text.encode("utf-8"))
            names.append(file)
        cmd = ["git", "merge-file", "-p", "-L", labels[0], "-L", labels[1], "-L", labels[2], *names]
        proc = subprocess.run(cmd, capture_output=True, check=False)
    # Exit status: the number of conflicts (at most 127), negative (255) on error.
    if proc.returncode < 0 or proc.returncode > 127:
        raise MergeError(f"git merge-file failed ({proc.returncode}): {proc.stderr.decode('utf-8', 'replace')}")
    return MergeResult(proc.stdout.decode("utf-8", "surrogateescape"), proc.returncode)


def merge3_python(
    base: str, local: str, remote: str, *, labels: tuple[str, str, str] = ("local", "base", "remote")
) -> MergeResult:
    """A line-based diff3: regions where both sides kept the base's lines are stable; between them, a side
    that changed wins over one that did not, equal changes merge, and different changes conflict."""
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
