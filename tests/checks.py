"""Checks tests share: the real ``git`` and ``git fsck``, threads and processes started together, and what
a refused operation must leave alone (:func:`store_state`, :func:`index_snapshot`), sockets a block must
not leave open (:func:`no_sockets_left`)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.store_index import NoteRow, VersionRow
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.pack.packing import loose_objects
from gitmem.git.repository import MAIN
from gitmem.model import MemoryPrefix, Note

if TYPE_CHECKING:
    from anthropic.types.beta.memory_stores import BetaManagedAgentsMemory, BetaManagedAgentsMemoryPrefix


def listed_notes(items: Iterable[Note | MemoryPrefix]) -> list[Note]:
    """A listing's items, each a note (a listing without ``depth`` holds no folder prefix)."""
    found = list(items)
    assert all(isinstance(item, Note) for item in found), found
    return [item for item in found if isinstance(item, Note)]


def memory(item: BetaManagedAgentsMemory | BetaManagedAgentsMemoryPrefix) -> BetaManagedAgentsMemory:
    """An SDK listing's item, a memory (not a folder prefix)."""
    assert item.type == "memory", item
    return item


def commit(found: object) -> pygit2.Commit:
    """A Git object that is a commit (pygit2 types ``revparse_single`` and ``repo[oid]`` as any object)."""
    assert isinstance(found, pygit2.Commit), found
    return found


def tree(found: object) -> pygit2.Tree:
    assert isinstance(found, pygit2.Tree), found
    return found


def blob(found: object) -> pygit2.Blob:
    assert isinstance(found, pygit2.Blob), found
    return found


def json_object(answer: object) -> dict[str, Any]:
    """A JSON answer that is an object (``cast_to=object`` leaves the SDK's answer unchecked)."""
    assert isinstance(answer, dict), answer
    return answer


def with_outbox(gm: Gitmem) -> Gitmem:
    """``gm`` with its changes told to the webhooks' outbox, as every program opens a home."""
    from gitmem.webhooks.outbox import webhooks_for

    gm.listen(webhooks_for(gm))
    return gm


def git(repo_path: Path, *args: str) -> str:
    """Run the real ``git`` on a repository; fail the test if it fails."""
    proc = subprocess.run(["git", "-C", str(repo_path), *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def run_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """``work(0)`` ... ``work(count - 1)`` in threads that start together; what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def body(me: int) -> None:
        start.wait()
        try:
            work(me)
        except BaseException as exc:  # collected and asserted on by the test
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(me,)) for me in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def start_together(workers: list[subprocess.Popen[str]]) -> None:
    """Wait until every worker process has printed ``ready``, then tell them all ``go``: their writes
    race from the same moment, not in the order they happened to start."""
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()


def _sockets() -> set[str]:
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own fd is gone by now
            if (target := os.readlink(fd)).startswith("socket:"):
                found.add(target)
    return found


@contextlib.contextmanager
def no_sockets_left() -> Iterator[None]:
    """The block closes every socket it opens (counted in /proc/self/fd). The collector is off in the
    block, so a socket only a forgotten client's collection would free is counted as left open."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = _sockets()
        yield
        left = _sockets() - before
    finally:
        if enabled:
            gc.enable()
    assert not left, f"{len(left)} sockets the block opened are still open: {sorted(left)}"


def assert_fsck_clean(repo_path: Path) -> None:
    """``git fsck --full`` finds nothing wrong (dangling objects from retried writes are allowed, and
    notices such as a repository without a branch). A store's background packer (its process may
    outlive a killed writer) is waited for and held off."""
    held = repository.packers_held_off(repo_path) if (repo_path / "gitmem").is_dir() else contextlib.nullcontext()
    with held:
        proc = subprocess.run(
            ["git", "-C", str(repo_path), "fsck", "--full", "--strict", "--no-progress"], capture_output=True, text=True
        )
    output = proc.stdout + proc.stderr
    problems = [line for line in output.splitlines() if not line.startswith(("dangling ", "notice: "))]
    assert proc.returncode == 0 and not problems, f"git fsck: {output}"


@dataclass(frozen=True)
class StoreState:
    """Everything a refused write must leave as it was."""

    tip: str | None
    indexed_tip: str | None
    notes: tuple[NoteRow, ...]
    versions: tuple[VersionRow, ...]
    loose_objects: int
    refs: str

    def without_conflicts(self) -> StoreState:
        """The state but for the conflicts kept beside main (a stale precondition is kept there)."""
        refs = "".join(line for line in self.refs.splitlines(keepends=True) if "\trefs/conflicts/" not in line)
        return dataclasses.replace(self, refs=refs)


def store_state(store: MemoryStore) -> StoreState:
    ref = store.repo.references.get(MAIN)
    refs = subprocess.run(["git", "-C", str(store.path), "for-each-ref"], capture_output=True, text=True).stdout
    return StoreState(
        str(ref.target) if ref else None,
        store.index.indexed_tip(),
        tuple(store.index.all_notes()),
        tuple(store.index.all_versions()),
        loose_objects(store.path).count,
        refs,
    )


def index_snapshot(store: MemoryStore) -> tuple[tuple[NoteRow, ...], tuple[VersionRow, ...], str | None]:
    return tuple(store.index.all_notes()), tuple(store.index.all_versions()), store.index.indexed_tip()
