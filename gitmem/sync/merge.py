"""Three-way merge of a note's text on the mount's side: Git's own ``git merge-file``, with the pure-Python
diff3 of :mod:`gitmem.rules.merge` when no ``git`` is installed (a mount may run on a machine without Git).

``merge3(base, local, remote)`` answers a :class:`MergeResult`: the merged text and whether any hunk
overlapped. With a conflict, ``text`` holds Git-style markers (``<<<<<<<``/``=======``/``>>>>>>>``); the
mount does not publish markers and keeps both sides itself instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from gitmem.rules.merge import LABELS, MergeResult, merge3_python, trivial_merge

__all__ = ["MergeError", "MergeResult", "merge3", "merge3_git", "merge3_python"]


class MergeError(RuntimeError):
    """``git merge-file`` failed for a reason other than conflicts."""


def merge3(
    base: str,
    local: str,
    remote: str,
    *,
    labels: tuple[str, str, str] = LABELS,
    use_git: bool | None = None,
) -> MergeResult:
    """Merge the changes ``base -> local`` and ``base -> remote``.

    The trivial cases (one side unchanged, or both sides equal) never call Git. ``use_git=None`` uses Git
    when it is on ``PATH``.
    """
    trivial = trivial_merge(base, local, remote)
    if trivial is not None:
        return trivial
    if use_git is None:
        use_git = shutil.which("git") is not None
    if use_git:
        return merge3_git(base, local, remote, labels=labels)
    return merge3_python(base, local, remote, labels=labels)


def merge3_git(base: str, local: str, remote: str, *, labels: tuple[str, str, str] = LABELS) -> MergeResult:
    """``git merge-file -p local base remote`` on temporary files."""
    with tempfile.TemporaryDirectory(prefix="gitmem-merge-") as tmp:
        names = []
        for name, text in (("local", local), ("base", base), ("remote", remote)):
            file = os.path.join(tmp, name)
            with open(file, "wb") as fh:
                fh.write(text.encode("utf-8"))
            names.append(file)
        cmd = ["git", "merge-file", "-p", "-L", labels[0], "-L", labels[1], "-L", labels[2], *names]
        proc = subprocess.run(cmd, capture_output=True, check=False)  # noqa: S603  an argument list (no shell) of our own
    # Exit status: the number of conflicts (at most 127), negative (255) on error.
    if proc.returncode < 0 or proc.returncode > 127:
        raise MergeError(f"git merge-file failed ({proc.returncode}): {proc.stderr.decode('utf-8', 'replace')}")
    return MergeResult(proc.stdout.decode("utf-8", "surrogateescape"), proc.returncode)
