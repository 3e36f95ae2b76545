"""``gitmem mount`` against a real server: real files, real watchdog, the official SDK as the client."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner

from gitmem.cli import main as cli_main
from gitmem.engine.gitmem import Gitmem
from gitmem.sync.merge import merge3, merge3_git, merge3_python
from gitmem.sync.mount import Mount, MountSpec, conflict_path, is_ignored, task_mount_specs
from gitmem.sync.remote import MemoryStoreRemote, RemoteEntry
from tests.checks import memory, no_sockets_left
from tests.server import RealServer

WAIT = 10.0
Mounted = Callable[..., Mount]  # the fixture: mounted(store_id, folder=None, **options)

# watchdog's inotify emitter warns when a new folder is filled faster than it adds the watch; harmless here
# Mounts sync with a real uvicorn over the network, as they would from another machine.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")]


@dataclass(frozen=True)
class Live:
    base_url: str
    admin: str

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=self.admin, base_url=self.base_url, max_retries=2)


@pytest.fixture(scope="module")
def live(real_server: RealServer) -> Live:
    gm = Gitmem.open(real_server.home, fsync="never")
    ws = gm.catalog.create_workspace("mount")
    _, admin = gm.catalog.create_api_key(ws.id, "admin", role="admin")
    return Live(real_server.base_url, admin)


@pytest.fixture
def client(live: Live) -> Iterator[anthropic.Anthropic]:
    with live.client() as client:  # its connections closed with the test, not left for the collector
        yield client


@pytest.fixture
def store_id(client: anthropic.Anthropic, request: pytest.FixtureRequest) -> str:
    return client.beta.memory_stores.create(name=f"mount {request.node.name}"[:255]).id


@pytest.fixture
def mounted(client: anthropic.Anthropic, tmp_path: Path) -> Iterator[Mounted]:
    """Start a mount of a store on a folder; every mount is stopped at the end."""
    mounts: list[Mount] = []

    def make(store: str, folder: Path | None = None, **kwargs: object) -> Mount:
        options: dict[str, Any] = {"debounce": 0.1, "poll_interval": 0.2, **kwargs}
        mount = Mount(MemoryStoreRemote(client, store), folder or tmp_path / "mnt", **options)
        mount.start()
        mounts.append(mount)
        return mount

    yield make
    for mount in mounts:
        mount.stop()
        assert mount.status.errors == 0, mount.status.last_error


def wait_until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting until {what}")


def notes(client: anthropic.Anthropic, store: str) -> dict[str, tuple[str, str]]:
    """path -> (id, content) of every note in the store."""
    out = {}
    for item in client.beta.memory_stores.memories.list(store, view="full", limit=20):
        note = memory(item)
        assert note.content is not None, note  # view=full carries every note's content
        out[note.path] = (note.id, note.content)
    return out


def content_of(client: anthropic.Anthropic, store: str, path: str) -> str | None:
    found = notes(client, store).get(path)
    return found[1] if found else None


def read(file: Path) -> str | None:
    try:
        return file.read_text()
    except FileNotFoundError:
        return None


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write(file: Path, text: str) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


# -- materialise ------------------------------------------------------------------------------------------


def test_materialises_nested_notes(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    memories = client.beta.memory_stores.memories
    memories.create(store_id, path="/top.md", content="top\n")
    memories.create(store_id, path="/people/sam.md", content="Sam likes tea\n")
    memories.create(store_id, path="/projects/acme/plan.md", content="1. ship\n")
    memories.create(store_id, path="/empty.md", content="")

    mount = mounted(store_id)
    folder = tmp_path / "mnt"
    assert read(folder / "top.md") == "top\n"
    assert read(folder / "people" / "sam.md") == "Sam likes tea\n"
    assert read(folder / "projects" / "acme" / "plan.md") == "1. ship\n"
    assert read(folder / "empty.md") == ""
    assert mount.status.notes == 4
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == ["empty.md", "people/sam.md", "projects/acme/plan.md", "top.md"]  # no temp files left


def test_clean_removes_files_that_are_not_notes(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/keep.md", content="keep\n")
    folder = tmp_path / "bank"
    write(folder / "stray.md", "left over\n")
    write(folder / ".hidden" / "x", "x")
    mounted(store_id, folder, clean=True)
    assert sorted(p.name for p in folder.rglob("*")) == ["keep.md"]
    assert set(notes(client, store_id)) == {"/keep.md"}


def test_files_already_in_the_folder_are_kept(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/same.md", content="same\n")
    client.beta.memory_stores.memories.create(store_id, path="/differs.md", content="the store's\n")
    folder = tmp_path / "mnt"
    write(folder / "same.md", "same\n")
    write(folder / "differs.md", "the folder's\n")
    write(folder / "extra.md", "only here\n")
    mount = mounted(store_id)
    assert mount.flush()
    kept = conflict_path("/differs.md", sha("the folder's\n"))
    assert read(folder / "differs.md") == "the store's\n"
    assert read(folder / kept[1:]) == "the folder's\n"
    assert {p: c for p, (_, c) in notes(client, store_id).items()} == {
        "/same.md": "same\n",
        "/differs.md": "the store's\n",
        kept: "the folder's\n",
        "/extra.md": "only here\n",
    }


def test_read_only_mount_moves_a_differing_local_file_aside(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/x.md", content="store\n")
    folder = tmp_path / "ro"
    write(folder / "x.md", "local\n")
    mount = mounted(store_id, folder, read_only=True)
    assert read(folder / "x.md") == "store\n"
    assert read(folder / conflict_path("/x.md", sha("local\n"))[1:]) == "local\n"
    assert mount.flush()
    assert set(notes(client, store_id)) == {"/x.md"}


# -- local -> store ---------------------------------------------------------------------------------------


def test_local_create_edit_rename_delete_reach_the_store(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    mounted(store_id)
    folder = tmp_path / "mnt"

    write(folder / "ideas" / "one.md", "first\n")
    wait_until(lambda: content_of(client, store_id, "/ideas/one.md") == "first\n", "the new file is a note")
    note_id = notes(client, store_id)["/ideas/one.md"][0]

    write(folder / "ideas" / "one.md", "first\nsecond\n")
    wait_until(lambda: content_of(client, store_id, "/ideas/one.md") == "first\nsecond\n", "the edit lands")

    os.rename(folder / "ideas" / "one.md", folder / "ideas" / "renamed.md")
    wait_until(lambda: "/ideas/renamed.md" in notes(client, store_id), "the rename lands")
    assert notes(client, store_id) == {"/ideas/renamed.md": (note_id, "first\nsecond\n")}  # same id

    # A move by "write the new file, delete the old" (no watchdog move event) is a rename too.
    write(folder / "archive" / "old.md", "first\nsecond\n")
    (folder / "ideas" / "renamed.md").unlink()
    wait_until(lambda: "/archive/old.md" in notes(client, store_id), "the copy-and-delete lands")
    assert notes(client, store_id) == {"/archive/old.md": (note_id, "first\nsecond\n")}

    # A folder renamed with its notes: each keeps its id.
    write(folder / "archive" / "two.md", "two\n")
    wait_until(lambda: "/archive/two.md" in notes(client, store_id), "a second note in the folder")
    ids = {p: i for p, (i, _) in notes(client, store_id).items()}
    os.rename(folder / "archive", folder / "attic")
    wait_until(lambda: set(notes(client, store_id)) == {"/attic/old.md", "/attic/two.md"}, "the folder moves")
    assert {p: i for p, (i, _) in notes(client, store_id).items()} == {
        "/attic/old.md": ids["/archive/old.md"],
        "/attic/two.md": ids["/archive/two.md"],
    }

    (folder / "attic" / "old.md").unlink()
    wait_until(lambda: set(notes(client, store_id)) == {"/attic/two.md"}, "the delete lands")
    versions = client.beta.memory_stores.memory_versions.list(store_id, memory_id=note_id)
    assert [v.operation for v in versions][::-1] == [
        "created",
        "modified",
        "modified",
        "modified",
        "modified",
        "deleted",
    ]


def test_editor_temp_files_and_refused_paths_are_not_synced(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    mount = mounted(store_id)
    folder = tmp_path / "mnt"
    for name in [
        ".note.md.swp",
        ".note.md.swx",
        "note.md~",
        ".#note.md",
        "4913",
        ".DS_Store",
        ".git/config",
        "sub/.hidden/deep.md",
        "#note.md#",
        "sub/note.md.swp",
        "note.md___jb_tmp___",
        "note.md___jb_old___",
        "sub/x.md___jb_tmp___",
    ]:
        write(folder / name, "temp\n")
    write(folder / "bad\x01name.md", "refused\n")  # a control character: the store refuses the path
    write(folder / "real.md", "real\n")
    wait_until(lambda: "/real.md" in notes(client, store_id), "the real file is synced")
    assert mount.flush()
    assert set(notes(client, store_id)) == {"/real.md"}
    assert mount.status.rejected >= 1
    assert read(folder / "bad\x01name.md") == "refused\n"  # left alone


# -- store -> local ---------------------------------------------------------------------------------------


def test_changes_made_elsewhere_arrive(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    memories = client.beta.memory_stores.memories
    kept = memories.create(store_id, path="/a.md", content="a\n")
    mount = mounted(store_id)
    folder = tmp_path / "mnt"

    created = memories.create(store_id, path="/deep/new.md", content="new\n")
    wait_until(lambda: read(folder / "deep" / "new.md") == "new\n", "a new note arrives")

    memories.update(kept.id, memory_store_id=store_id, content="a, changed\n")
    wait_until(lambda: read(folder / "a.md") == "a, changed\n", "an edit arrives")

    memories.update(created.id, memory_store_id=store_id, path="/moved/new.md")
    wait_until(lambda: read(folder / "moved" / "new.md") == "new\n", "a rename arrives")
    assert not (folder / "deep").exists()  # an emptied folder goes with its last note

    memories.delete(kept.id, memory_store_id=store_id)
    wait_until(lambda: not (folder / "a.md").exists(), "a delete arrives")
    assert set(notes(client, store_id)) == {"/moved/new.md"}
    assert mount.flush()
    assert mount.status.pushed == 0  # the watcher's echoes of these writes were recognised
    assert mount.status.pulled == 4


# -- read-only --------------------------------------------------------------------------------------------


def test_read_only_store_is_read_only_on_disk_and_never_pushed(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/docs/guide.md", content="the guide\n")
    folder = tmp_path / "ro"
    mount = mounted(store_id, folder, read_only=True)
    file = folder / "docs" / "guide.md"
    assert stat.S_IMODE(file.stat().st_mode) == 0o444
    assert stat.S_IMODE((folder / "docs").stat().st_mode) == 0o555
    assert stat.S_IMODE(folder.stat().st_mode) == 0o555

    caplog.set_level(logging.WARNING, logger="gitmem.sync.mount")
    os.chmod(folder / "docs", 0o755)  # noqa: S103  made writable again, as before the read-only mount
    os.chmod(file, 0o644)
    file.write_text("vandalised\n")
    wait_until(lambda: read(file) == "the guide\n", "the store's text is put back")
    assert content_of(client, store_id, "/docs/guide.md") == "the guide\n"
    assert any("read-only" in r.getMessage() for r in caplog.records)

    # Changes made elsewhere still arrive, and stay read-only.
    note_id = notes(client, store_id)["/docs/guide.md"][0]
    client.beta.memory_stores.memories.update(note_id, memory_store_id=store_id, content="guide v2\n")
    wait_until(lambda: read(file) == "guide v2\n", "the new text arrives")
    assert stat.S_IMODE(file.stat().st_mode) == 0o444
    extra = client.beta.memory_stores.memories.create(store_id, path="/more/deeper/x.md", content="x\n")
    # The mount opens the folders above a new note to make it and closes them again, deepest first: a
    # look between the note's arrival and the last close saw the top folder still open.
    wait_until(
        lambda: read(folder / "more" / "deeper" / "x.md") == "x\n" and stat.S_IMODE(folder.stat().st_mode) == 0o555,
        "a new note arrives and its folders are closed again",
    )
    assert stat.S_IMODE((folder / "more" / "deeper").stat().st_mode) == 0o555
    assert stat.S_IMODE((folder / "more").stat().st_mode) == 0o555
    client.beta.memory_stores.memories.delete(extra.id, memory_store_id=store_id)
    wait_until(lambda: not (folder / "more").exists(), "the delete arrives, with its folders")
    assert mount.status.pushed == 0

    mount.stop()
    assert stat.S_IMODE(file.stat().st_mode) == 0o644  # undone on stop
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert content_of(client, store_id, "/docs/guide.md") == "guide v2\n"


# -- concurrent edits -------------------------------------------------------------------------------------

LINES = "".join(f"line {i}\n" for i in range(1, 11))


def test_concurrent_non_overlapping_edits_merge(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/shared.md", content=LINES)
    mount = mounted(store_id, poll_interval=3600)  # only the precondition can notice the other edit
    file = tmp_path / "mnt" / "shared.md"

    theirs = LINES.replace("line 2\n", "line 2, edited elsewhere\n")
    client.beta.memory_stores.memories.update(note.id, memory_store_id=store_id, content=theirs)
    file.write_text(LINES.replace("line 9\n", "line 9, edited here\n"))
    assert mount.flush()

    merged = LINES.replace("line 2\n", "line 2, edited elsewhere\n").replace("line 9\n", "line 9, edited here\n")
    assert content_of(client, store_id, "/shared.md") == merged
    assert read(file) == merged
    assert mount.status.merged == 1 and mount.status.conflicts == 0
    assert list((tmp_path / "mnt").iterdir()) == [file]


def test_overlapping_edits_keep_both_sides(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/notes/shared.md", content=LINES)
    mount = mounted(store_id, poll_interval=3600)
    file = tmp_path / "mnt" / "notes" / "shared.md"

    theirs = LINES.replace("line 5\n", "line 5 by them\n")
    mine = LINES.replace("line 5\n", "line 5 by me\n")
    client.beta.memory_stores.memories.update(note.id, memory_store_id=store_id, content=theirs)
    file.write_text(mine)
    assert mount.flush()

    kept = conflict_path("/notes/shared.md", sha(mine))
    assert kept == f"/notes/shared.conflict-{sha(mine)[:8]}.md"
    assert read(file) == theirs  # the note keeps the other side
    assert read(tmp_path / "mnt" / kept[1:]) == mine  # this side sits next to it
    assert notes(client, store_id) == {
        "/notes/shared.md": (note.id, theirs),
        kept: (notes(client, store_id)[kept][0], mine),
    }
    assert mount.status.conflicts == 1


def test_local_delete_of_a_note_changed_elsewhere_keeps_the_change(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/x.md", content="x\n")
    mount = mounted(store_id, poll_interval=3600)
    client.beta.memory_stores.memories.update(note.id, memory_store_id=store_id, content="x, newer\n")
    (tmp_path / "mnt" / "x.md").unlink()
    assert mount.flush()
    assert content_of(client, store_id, "/x.md") == "x, newer\n"
    assert read(tmp_path / "mnt" / "x.md") == "x, newer\n"


# -- stop -------------------------------------------------------------------------------------------------


def test_stop_mid_burst_loses_nothing(
    client: anthropic.Anthropic, store_id: str, mounted: Mounted, tmp_path: Path
) -> None:
    mount = mounted(store_id, debounce=0.3)
    folder = tmp_path / "mnt"
    for i in range(50):
        write(folder / f"burst/{i // 10}/n{i:02d}.md", f"note {i}\n")
    mount.stop()
    assert mount.status.pending == 0
    found = notes(client, store_id)
    assert {p: c for p, (_, c) in found.items()} == {f"/burst/{i // 10}/n{i:02d}.md": f"note {i}\n" for i in range(50)}


# -- the CLI and the pieces -------------------------------------------------------------------------------


def test_cli_mount_once(client: anthropic.Anthropic, store_id: str, live: Live, tmp_path: Path) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/cli/a.md", content="from the store\n")
    write(tmp_path / "cli-mnt" / "local.md", "from the folder\n")
    with no_sockets_left():  # the command closes the client its mounts shared
        result = CliRunner().invoke(
            cli_main,
            ["mount", "--url", live.base_url, "--store", store_id, "--once", str(tmp_path / "cli-mnt")],
            env={"GITMEM_API_KEY": live.admin},
        )
    assert result.exit_code == 0, result.output
    assert read(tmp_path / "cli-mnt" / "cli" / "a.md") == "from the store\n"
    assert content_of(client, store_id, "/local.md") == "from the folder\n"
    usage = CliRunner().invoke(cli_main, ["mount", "--url", live.base_url, "--key", "k", str(tmp_path / "x")])
    assert usage.exit_code == 2


def test_task_mount_specs() -> None:
    payload = {
        "type": "task_memory",
        "task_id": "task_1",
        "root": "/r/",
        "stores": [
            {
                "memory_store_id": "memstore_a",
                "name": "Own",
                "access": "read_write",
                "mount_path": "/.little-worker/tasks/task_1/memory/own/",
                "available": True,
                "archived": False,
            },
            {
                "memory_store_id": "memstore_b",
                "name": "Docs",
                "access": "read_only",
                "mount_path": "/.little-worker/tasks/task_1/memory/docs/",
                "available": True,
                "archived": False,
            },
            {
                "memory_store_id": "memstore_c",
                "name": "Old",
                "access": "read_write",
                "mount_path": "/.little-worker/tasks/task_1/memory/old/",
                "available": True,
                "archived": True,
            },
            {
                "memory_store_id": "memstore_d",
                "name": "Gone",
                "access": "read_write",
                "mount_path": "/.little-worker/tasks/task_1/memory/gone/",
                "available": False,
                "archived": False,
            },
        ],
    }
    assert task_mount_specs(payload) == [
        MountSpec("memstore_a", False, "own"),
        MountSpec("memstore_b", True, "docs"),
        MountSpec("memstore_c", True, "old"),
    ]
    assert task_mount_specs([{"id": "memstore_x", "name": "a/b"}]) == [MountSpec("memstore_x", False, "a_b")]


def test_ignored_names_and_conflict_names() -> None:
    for path in [
        "/.x.md.swp",
        "/x.md.swp",
        "/x.swx",
        "/x.md~",
        "/.#x.md",
        "/4913",
        "/.git/HEAD",
        "/a/.DS_Store",
        "/#x.md#",
        "/.gitmem-abc.tmp",
        "/x.md___jb_tmp___",
        "/a/x.md___jb_old___",
    ]:
        assert is_ignored(path), path
    for path in ["/x.md", "/a/b/c.md", "/4913.md", "/x.conflict-12345678.md"]:
        assert not is_ignored(path), path
    assert conflict_path("/a/b.md", "0123456789") == "/a/b.conflict-01234567.md"
    assert conflict_path("/a/README", "0123456789") == "/a/README.conflict-01234567"


def test_merge_git_and_python_agree() -> None:
    base = LINES
    ours, theirs = base.replace("line 1\n", "one\n"), base.replace("line 10\n", "ten\n")
    for fn in (merge3_git, merge3_python):
        assert fn(base, ours, theirs).text == base.replace("line 1\n", "one\n").replace("line 10\n", "ten\n")
        clash = fn(base, ours, base.replace("line 1\n", "uno\n"))
        assert not clash.clean and "<<<<<<< local\none\n=======\nuno\n>>>>>>> remote\n" in clash.text
    assert merge3("a\n", "a\n", "b\n", use_git=False).text == "b\n"
    assert merge3("a", "a\nb", "a\nb", use_git=True).text == "a\nb"


def test_remote_entry_contract(client: anthropic.Anthropic, store_id: str) -> None:
    """The SDK-backed Remote: ids stable over renames, sha256 preconditions, typed failures."""
    from gitmem.sync.remote import RemoteNotFound, RemotePathConflict, RemotePreconditionFailed

    remote = MemoryStoreRemote(client, store_id)
    made = remote.create("/r/a.md", "a\n")
    assert made.sha256 == sha("a\n") and made.etag and made.content == "a\n"
    assert remote.list_all() == {"/r/a.md": RemoteEntry(made.memory_id, "/r/a.md", sha("a\n"))}
    with pytest.raises(RemotePreconditionFailed):
        remote.update(made.memory_id, content="b\n", expected_sha256=sha("nope"))
    moved = remote.update(made.memory_id, path="/r/b.md", expected_sha256=sha("a\n"))
    assert (moved.memory_id, moved.path, moved.content) == (made.memory_id, "/r/b.md", "a\n")
    with pytest.raises(RemotePathConflict):
        remote.create("/r/b.md/c.md", "x")
    with pytest.raises(ValueError, match=r"a segment is empty, '\.' or '\.\.'"):
        remote.validate_path("/a/../b")
    remote.delete(made.memory_id, expected_sha256=sha("a\n"))
    with pytest.raises(RemoteNotFound):
        remote.read(made.memory_id)


def test_the_mount_is_client_side() -> None:
    """The mount runs on machines without the server: importing it loads no server-side module."""
    import subprocess
    import sys

    code = (
        "import sys, gitmem.sync.mount, gitmem.sync.bank_remote; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('gitmem', 'api')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert loaded >= {f"gitmem.sync.{m}" for m in ("mount", "folder", "debounce", "syncer", "pull")}
    # the client side, and the rules and values it shares with the server: nothing else
    allowed = {
        "gitmem",
        "gitmem.sync",
        "gitmem.errors",
        "gitmem.model",
        "gitmem.config.settings",
        "gitmem.rules",
        "gitmem.rules.paths",
        "gitmem.rules.policy",
        "gitmem.rules.merge",
    }
    loaded = {m for m in loaded if not m.startswith("gitmem.sync.")}
    assert loaded - allowed == set()
