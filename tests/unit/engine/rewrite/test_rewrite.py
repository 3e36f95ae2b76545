"""History rewriting (docs/architecture.md): redaction, the purge that really deletes, pushed commits split
into one commit per version, crash safety under SIGKILL and writers landing while it runs.

Real Git, real SQLite, an injected clock. The helpers here are shared with test_retention.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zlib
from pathlib import Path

import pygit2
import pytest

from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.fast_import import REWRITE_REF
from gitmem.engine.rewrite.locked_git import CRASH_ENV
from gitmem.engine.rewrite.redaction import redact, redact_version
from gitmem.engine.rewrite.report import RewriteReport
from gitmem.engine.rewrite.retention import PruneReport, prune_all, prune_store
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import Conflict, NotFound
from gitmem.git import repository
from gitmem.git.pack import packing, policy
from gitmem.model import Actor, Note, Version
from tests import REPO_ROOT
from tests.checks import assert_fsck_clean, listed_notes
from tests.checks import commit as commit_of

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
API = Actor("api_actor", "apikey_01TEST")
TASK = Actor("task_actor", "task_01TEST")
USER = Actor("user_actor", "user_01TEST")


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", CRASH_ENV):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture
def gm(tmp_path: Path, clock: FrozenClock) -> Gitmem:
    return Gitmem(tmp_path / "home", clock=clock, fsync="never")


def new_store(gm: Gitmem, name: str = "notes") -> MemoryStore:
    ws = gm.catalog.workspace_by_name("test") or gm.catalog.create_workspace("test")
    info = gm.create_store(ws.id, name)
    return gm.store(ws.id, info.id)


def token() -> str:
    return uuid.uuid4().hex


# -- looking at a repository from the outside -----------------------------------------------------


def _zlib_streams(data: bytes) -> list[bytes]:
    """Every zlib stream in a file (loose objects, pack entries): inflate from every plausible header."""
    out = []
    i = data.find(b"\x78")
    while 0 <= i < len(data) - 1:
        if ((data[i] << 8) | data[i + 1]) % 31 == 0:
            with contextlib.suppress(zlib.error):
                out.append(zlib.decompressobj().decompress(data[i:], 1 << 22))
        i = data.find(b"\x78", i + 1)
    return out


def repository_bytes(repo_path: Path) -> bytes:
    """Everything the repository directory holds, raw and inflated: every file's bytes, every zlib
    stream in them, and every object Git can read (packed ones with their deltas resolved)."""
    chunks: list[bytes] = []
    for file in sorted(repo_path.rglob("*")):
        if file.is_file():
            data = file.read_bytes()
            chunks.append(data)
            chunks += _zlib_streams(data)
    for pack in (repo_path / "objects" / "pack").glob("*.idx"):
        listing = subprocess.run(["git", "verify-pack", "-v", str(pack)], capture_output=True, check=True).stdout
        ids = [line.split()[0] for line in listing.decode().splitlines() if len(line.split()) > 2]
        chunks.append(
            subprocess.run(
                ["git", "-C", str(repo_path), "cat-file", "--batch"],
                capture_output=True,
                input="\n".join(ids).encode() + b"\n",
                check=True,
            ).stdout
        )
    chunks.append(
        subprocess.run(
            ["git", "-C", str(repo_path), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
        ).stdout
    )
    return b"\n\x00\n".join(chunks)


def readable(repo_path: Path, oid: str) -> bool:
    return subprocess.run(["git", "-C", str(repo_path), "cat-file", "-e", oid], capture_output=True).returncode == 0


def all_versions(store: MemoryStore) -> list[Version]:
    """Every version, oldest first, with content."""
    out: list[Version] = []
    page = None
    while True:
        got = store.versions(limit=20, page=page, with_content=True)
        out += got.items
        page = got.next_page
        if page is None:
            return list(reversed(out))


def notes_state(store: MemoryStore) -> list[Note]:
    out: list[Note] = []
    page = None
    while True:
        got = store.list(limit=20, page=page, with_content=True)
        out += listed_notes(got.items)
        page = got.next_page
        if page is None:
            return out


def comparable(version: Version) -> tuple[object, ...]:
    """A version as the API shows it, without the commit it lives in (rewrites change commit ids)."""
    return (
        version.id,
        version.memory_id,
        version.operation,
        version.created_at,
        version.created_by,
        version.path,
        version.content_sha256,
        version.content_size_bytes,
        version.content,
        version.redacted_at,
        version.redacted_by,
    )


def assert_index_consistent(store: MemoryStore) -> None:
    """What catch_up built equals what a rebuild from the history alone gives."""
    store.index.catch_up()
    notes, versions = notes_state(store), [comparable(v) for v in all_versions(store)]
    store.index.rebuild()
    assert notes_state(store) == notes
    assert [comparable(v) for v in all_versions(store)] == versions


# -- redaction ------------------------------------------------------------------------------------


def _three_versions(store: MemoryStore, clock: FrozenClock) -> tuple[str, list[Version], str, str]:
    secret_path = f"/people/{token()}-private.md"
    secret = f"salary is {token()}"
    note = store.create("/people/sam.md", f"sam v1 {token()}", actor=API)
    clock.advance(hours=1)
    store.update(note.id, secret, path=secret_path, actor=TASK)
    clock.advance(hours=1)
    store.update(note.id, f"sam v3 {token()}", path="/people/sam.md", actor=USER)
    return note.id, all_versions(store), secret_path, secret


def test_redacting_a_middle_version_removes_its_path_and_content_for_good(gm: Gitmem, clock: FrozenClock) -> None:
    store = new_store(gm)
    other_text = f"unrelated {token()}"
    other = store.create("/other.md", other_text)
    memory_id, before, secret_path, secret = _three_versions(store, clock)
    middle = before[2]
    assert middle.path == secret_path and middle.content == secret
    assert secret.encode() in repository_bytes(store.path)  # the grep below can see it

    clock.advance(hours=1)
    redacted = redact(store, middle.id, USER)

    assert redacted.id == middle.id and redacted.memory_id == memory_id
    assert redacted.created_by == TASK and redacted.created_at == middle.created_at
    assert redacted.operation == "modified"
    assert redacted.path is None and redacted.content is None and redacted.content_sha256 is None
    assert redacted.redacted_by == USER and redacted.redacted_at is not None
    after = all_versions(store)
    assert [comparable(v) for i, v in enumerate(after) if i != 2] == [
        comparable(v) for i, v in enumerate(before) if i != 2
    ]
    assert store.get(memory_id).content == before[3].content
    assert store.get(other.id).content == other_text

    blob = repository_bytes(store.path)
    assert secret.encode() not in blob
    assert secret_path.encode() not in blob
    assert secret_path[1:].split("/")[1].encode() not in blob
    kept = (before[3].content, before[1].content)
    assert all(text is not None and text.encode() in blob for text in kept)

    log = subprocess.run(
        ["git", "-C", str(store.path), "log", "--format=%an|%s|%b%x00"], capture_output=True, text=True, check=True
    ).stdout
    entry = next(e for e in log.split("\x00") if middle.id in e)
    assert entry.strip().startswith(f"{TASK.id}|modified (redacted)|")
    assert "Redacted-By: user_actor user_id=user_01TEST" in entry and "Memory-Path" not in entry
    assert_fsck_clean(store.path)
    assert_index_consistent(store)
    assert not (store.path / "gitmem" / "purge-pending.json").exists()
    assert repository.git(store.path, "rev-parse", "--verify", "-q", REWRITE_REF).returncode != 0


def test_redaction_refusals_and_idempotence(gm: Gitmem, clock: FrozenClock) -> None:
    store = new_store(gm)
    _memory_id, before, _path, _secret = _three_versions(store, clock)
    newest = before[-1]
    tip = repository.read_tip(store.repo)
    with pytest.raises(Conflict) as refused:
        redact(store, newest.id, USER)
    assert refused.value.status == 409
    with pytest.raises(NotFound):
        redact(store, "memver_01UNKNOWNUNKNOWNUNKNOWN0000", USER)
    assert repository.read_tip(store.repo) == tip

    first = redact(store, before[0].id, USER)
    tip = repository.read_tip(store.repo)
    again = redact(store, before[0].id, API)  # idempotent: nothing changes, not even who redacted it
    assert again == first and repository.read_tip(store.repo) == tip
    assert again.redacted_by == USER

    # a deleted note's newest version (the delete itself) may be redacted; so may anything on an archived store
    gone = store.create("/gone.md", f"gone {token()}")
    store.update(gone.id, f"gone v2 {token()}")
    deleted = store.delete(gone.id)
    ws_id = gm.catalog.store(store.id).workspace_id
    gm.archive_store(ws_id, store.id)
    created = store.versions(memory_id=gone.id).items[-1]
    redacted = redact(store, created.id, USER)
    assert redacted.redacted_at is not None
    assert store.version(deleted.id).operation == "deleted"
    assert_fsck_clean(store.path)
    assert_index_consistent(store)


def test_redacting_the_delete_of_a_deleted_note_keeps_it_deleted(gm: Gitmem) -> None:
    store = new_store(gm)
    note = store.create("/x.md", "x")
    deleted = store.delete(note.id)
    redact(store, deleted.id, USER)
    assert store.version(deleted.id).redacted_at is not None
    with pytest.raises(NotFound):
        store.get(note.id)
    assert notes_state(store) == []


def test_a_blob_shared_with_a_kept_version_stays(gm: Gitmem) -> None:
    store = new_store(gm)
    same = f"same bytes {token()}"
    note = store.create("/a.md", same)
    store.update(note.id, f"changed {token()}")
    store.update(note.id, same)  # back to the first content: the same blob
    first = all_versions(store)[0]
    report = redact_version(store, first.id, USER)
    blob_id = store.get(note.id).blob_id
    assert blob_id in report.blobs_shared and blob_id not in report.blobs_purged
    assert readable(store.path, blob_id) and store.get(note.id).content == same
    assert report.blobs_unpurged == []


# -- pushed commits -------------------------------------------------------------------------------


def _push(store: MemoryStore, files: dict[str, bytes | None], user_id: str, when: dt.datetime) -> str:
    """A commit as a plain `git push` makes it: no trailers, several notes, the pusher on refs/notes/gitmem."""
    repo = pygit2.Repository(str(store.path))
    tip = repository.read_tip(repo)
    assert tip is not None
    changes = {path: (repo.create_blob(data) if data is not None else None) for path, data in files.items()}
    tree = repository.tree_with(repo, commit_of(repo[tip]).tree, changes)
    sig = pygit2.Signature("Sam Example", "sam@example.com", int(when.timestamp()), 60)
    commit = repo.create_commit(None, sig, sig, "edit notes in my editor\n", tree, [tip])
    repo.create_note(json.dumps({"user_id": user_id}), sig, sig, str(commit), repository.NOTES_REF)
    assert repository.compare_and_swap(repo, tip, commit)
    # as if post-receive had not settled the push's spool yet (it names the pushed paths)
    spool = store.path / "gitmem" / "pushes" / f"{commit}.json"
    spool.parent.mkdir(exist_ok=True)
    spool.write_text(
        json.dumps(
            {
                "old": str(tip),
                "new": str(commit),
                "commits": [str(commit)],
                "records": {str(commit): {"user_id": user_id, "paths": sorted(files)}},
            }
        )
    )
    return str(commit)


def test_a_pushed_commit_becomes_one_commit_per_version_with_its_ids_as_trailers(
    gm: Gitmem, clock: FrozenClock
) -> None:
    store = new_store(gm)
    old = store.create("/old.md", f"old {token()}")
    store.update(old.id, f"old v2 {token()}")
    existing = store.create("/pushed/b.md", "b v1")
    clock.advance(days=1)
    pushed = _push(store, {"pushed/a.md": b"a from a push", "pushed/b.md": b"b from a push"}, "user_sam", clock.now)
    before = all_versions(store)
    from_push = [v for v in before if v.commit_id == pushed]
    assert len(from_push) == 2 and {v.created_by for v in from_push} == {Actor("user_actor", "user_sam")}
    notes_before = notes_state(store)

    redact_version(store, before[0].id, USER)

    after = all_versions(store)
    assert [comparable(v) for v in after[1:]] == [comparable(v) for v in before[1:]]
    assert notes_state(store) == notes_before
    assert store.get(existing.id).created_at == existing.created_at
    split = {v.commit_id for v in after if v.id in {p.id for p in from_push}}
    assert len(split) == 2  # one commit per version now
    repo = pygit2.Repository(str(store.path))
    for commit_id in split:
        commit = commit_of(repo[commit_id])
        assert commit.message.count("Memory-Version:") == 1
        assert commit.author.name == "Sam Example" and commit.author.offset == 60
        assert "Created-By: user_actor user_id=user_sam" in commit.message
    assert repo.references.get(repository.NOTES_REF) is None  # its notes are trailers now
    assert list((store.path / "gitmem" / "pushes").glob("*.json")) == []  # and so is its spool
    assert_fsck_clean(store.path)
    assert_index_consistent(store)


# -- crashes --------------------------------------------------------------------------------------

PRUNER = """
import datetime as dt, sys
from pathlib import Path
from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.retention import prune_all
gm = Gitmem(Path(sys.argv[1]), clock=FrozenClock(dt.datetime.fromisoformat(sys.argv[2])), fsync="always")
print("start", flush=True)
reports = prune_all(gm)
assert all(r.ok for r in reports), reports
print("done", flush=True)
"""


def _build_big_store(gm: Gitmem, clock: FrozenClock, notes: int = 40, rounds: int = 8) -> MemoryStore:
    store = new_store(gm)
    ids = []
    for i in range(notes):
        ids.append(store.create(f"/topic-{i % 5}/note-{i}.md", f"note {i} round 0 {token()}", actor=API).id)
    for r in range(1, rounds):
        clock.advance(days=6)
        for i, memory_id in enumerate(ids):
            if i % 7 == r % 7:
                store.update(memory_id, path=f"/moved/r{r}/note-{i}.md", actor=TASK)
            else:
                store.update(memory_id, f"note {i} round {r} {token()}", actor=TASK)
    for memory_id in ids[:3]:
        store.delete(memory_id)
    clock.advance(days=10)
    while not packing.pack(store.path, "full"):  # wait for the engine's background packer
        time.sleep(0.05)
    return store


def _run_pruner(home: Path, now: dt.datetime, *, crash_at: str | None = None, kill_after: float | None = None) -> int:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    if crash_at:
        env[CRASH_ENV] = crash_at
    # Its own process group, so a kill takes its git children (a repack, a fast-import) down with it.
    proc = subprocess.Popen(
        [sys.executable, "-c", PRUNER, str(home), now.isoformat()],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if kill_after is not None:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "start"
        time.sleep(kill_after)
        os.killpg(proc.pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    if proc.returncode not in (0, -9):
        raise AssertionError(err)
    return proc.returncode


@pytest.mark.slow
def test_sigkill_at_any_point_leaves_the_old_or_the_new_history(
    tmp_path: Path, gm: Gitmem, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store is copied for each trial: no consolidation (a repack, the index's checkpoint) of this
    # process may run in it meanwhile, or a copy takes its lock files and half its work.
    monkeypatch.setattr(policy, "QUIET_SECONDS", 3600.0)
    store = _build_big_store(gm, clock)
    now = clock.now
    before = all_versions(store)
    notes_before = notes_state(store)
    store_id, ws_id = store.id, gm.catalog.store(store.id).workspace_id
    store.close()

    # The history a finished prune leaves, computed once on a copy.
    reference = tmp_path / "reference"
    shutil.copytree(gm.home, reference)
    ref_gm = Gitmem(reference, clock=FrozenClock(now), fsync="never")
    assert all(r.ok for r in prune_all(ref_gm))
    expected = [comparable(v) for v in all_versions(ref_gm.store(ws_id, store_id))]
    assert 0 < len(expected) < len(before)
    kept_ids = {v[0] for v in expected}
    dropped_text = {v.content for v in before if v.id not in kept_ids and v.content} - {v[8] for v in expected if v[8]}

    rng = random.Random(4)
    trials: list[tuple[str | None, float | None]] = [
        (point, None) for point in ("built", "before-swap", "after-swap", "after-repack", "after-prune")
    ]
    trials += [(None, rng.uniform(0.0, 0.5)) for _ in range(3)]
    outcomes = set()
    for n, (point, delay) in enumerate(trials):
        home = tmp_path / f"trial-{n}"
        shutil.copytree(gm.home, home)
        _run_pruner(home, now, crash_at=point, kill_after=delay)
        repo_path = home / "stores" / f"{store_id}.git"
        assert_fsck_clean(repo_path)
        trial_gm = Gitmem(home, clock=FrozenClock(now), fsync="never")
        trial = trial_gm.store(ws_id, store_id)
        assert notes_state(trial) == notes_before, (point, delay)
        versions = [comparable(v) for v in all_versions(trial)]
        assert versions in ([comparable(v) for v in before], expected), (point, delay)
        outcomes.add("old" if len(versions) == len(before) else "new")
        assert_index_consistent(trial)
        trial.create(f"/after-crash-{n}.md", "the store still takes writes")  # not wedged
        # The next run finishes the job: the dropped content is gone for good.
        assert all(r.ok for r in prune_all(trial_gm))
        assert {v.id for v in all_versions(trial)} == kept_ids | {trial.get_by_path(f"/after-crash-{n}.md").version_id}
        data = repository_bytes(repo_path)
        assert not [t for t in dropped_text if t.encode() in data], (point, delay)
        assert_fsck_clean(repo_path)
        trial.close()
    assert outcomes == {"old", "new"}


# -- writers while the rewrite runs ---------------------------------------------------------------

# Writes until its standard input closes (at least 20 notes), a line a note: the test stops it once
# rewrites have run under it, so however slow the machine, the rewrites meet writes.
WRITER = """
import sys, threading, time
from pathlib import Path
from gitmem.engine.gitmem import Gitmem
gm = Gitmem(Path(sys.argv[1]), fsync="never")
store = gm.store(sys.argv[2], sys.argv[3])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
i = 0
while i < 20 or not stop.is_set():
    store.create(f"/written/note-{i}.md", f"written while pruning {i}")
    print(i, flush=True)
    i += 1
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_writes_that_land_during_rewrites_are_kept(tmp_path: Path) -> None:
    real_now = dt.datetime.now(dt.UTC)
    clock = FrozenClock(real_now - dt.timedelta(days=100))
    gm = Gitmem(tmp_path / "home", clock=clock, fsync="never")
    store = new_store(gm)
    ids = [store.create(f"/old/note-{i}.md", f"old {i} v0 {token()}").id for i in range(30)]
    for r in range(1, 4):
        clock.advance(hours=1)
        for i, memory_id in enumerate(ids):
            store.update(memory_id, f"old {i} v{r} {token()}")
    ws_id = gm.catalog.store(store.id).workspace_id

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(gm.home), ws_id, store.id],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    writer.stdout.readline()  # it is writing
    reports: list[PruneReport | RewriteReport] = [prune_store(store, days=30, now=real_now)]
    redactable = [row for row in all_versions(store) if row.path and row.path.startswith("/old/")]
    redactable = [v for v in redactable if store.get(v.memory_id).version_id != v.id]

    def replayed() -> int:
        return sum(getattr(r, "replayed", 0) for r in reports)

    while redactable and (len(reports) < 3 or not replayed()):
        reports.append(redact_version(store, redactable.pop().id, None))
    out, err = writer.communicate("", timeout=120)
    assert writer.returncode == 0, err
    count = 1 + len(out.splitlines())  # the line read above, and the rest

    assert all(not r.blobs_unpurged for r in reports if hasattr(r, "blobs_unpurged"))
    written = {n.path: n.content for n in notes_state(store) if n.path.startswith("/written/")}
    assert written == {f"/written/note-{i}.md": f"written while pruning {i}" for i in range(count)}
    assert len(notes_state(store)) == 30 + count
    assert_fsck_clean(store.path)
    assert_index_consistent(store)
    assert replayed() > 0, (len(reports), count)
