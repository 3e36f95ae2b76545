"""Durability is a home's (``GITMEM_FSYNC``), never the process's: two homes in one process, one that
flushes and one that does not, each write as their own says, libgit2's loose objects included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gitmem.agents.review.mark import write_record
from gitmem.durable import DURABLE, Durability
from gitmem.engine.gitmem import Gitmem
from gitmem.git import repository

PYTHON = (sys.executable, "-c")


def test_two_homes_in_one_process_each_flush_as_their_own_setting_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[Path, str]] = []
    real_open = repository.open_repository

    def open_repository(path: Path | str, durability: Durability = DURABLE) -> object:
        opened.append((Path(path).resolve(), durability.mode))
        return real_open(path, durability)

    flushed: list[Path] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        flushed.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(repository, "open_repository", open_repository)
    monkeypatch.setattr(os, "fsync", fsync)
    homes = {
        "files": Gitmem.open(tmp_path / "files", fsync="files"),
        "never": Gitmem.open(tmp_path / "never", fsync="never"),
    }
    for mode, gm in homes.items():
        workspace = gm.catalog.create_workspace("default")
        info = gm.create_store(workspace.id, "notes")
        store = gm.store(workspace.id, info.id)
        flushed.clear()
        store.create("/notes/a.md", "a note")  # the write path: gitmem's own pack and ref
        write_record(store, "enabled", None, None, gm.clock())  # libgit2's objects, gitmem's ref
        in_home = [p for p in flushed if p.is_relative_to(gm.home.resolve())]
        if mode == "files":
            assert in_home, "a home that flushes flushed nothing"
        else:
            assert in_home == [], f"a home that does not flush flushed {in_home}"
        store_repos = {m for p, m in opened if p.is_relative_to(gm.home.resolve())}
        assert store_repos == {mode}  # every repository this home's store wrote with: its own durability
        gm.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="counts libgit2's fsync calls with strace")
def test_libgit2_loose_objects_are_flushed_as_the_repository_was_opened(tmp_path: Path) -> None:
    """libgit2's own fsync switch is the process's and stays off: a repository opened for a home that
    flushes fsyncs each loose object (the file and its folder), one opened for a home that does not,
    in the same process, none."""
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from gitmem.durable import Durability
        from gitmem.git import repository

        root = Path({str(tmp_path)!r})
        repos = {{mode: repository.init_bare(root / mode, Durability(mode)) for mode in ("files", "never")}}
        for mode, repo in repos.items():
            os.access("/gitmem-mark-" + mode, os.F_OK)
            repo.create_blob(b"a blob of the " + mode.encode() + b" home")
        os.access("/gitmem-mark-end", os.F_OK)
        """
    )
    trace = tmp_path / "trace"
    subprocess.run(
        ["strace", "-f", "-e", "trace=fsync,fdatasync,access,faccessat,faccessat2", "-o", str(trace), *PYTHON, script],
        check=True,
        timeout=60,
    )
    counts: dict[str, int] = {}
    phase = None
    for line in trace.read_text().splitlines():
        if "/gitmem-mark-" in line:
            phase = line.split("/gitmem-mark-", 1)[1].split('"', 1)[0]
            counts[phase] = 0
        elif phase is not None and ("fsync(" in line or "fdatasync(" in line):
            counts[phase] += 1
    assert counts["files"] >= 2  # the object's file and its folder
    assert counts["never"] == 0
