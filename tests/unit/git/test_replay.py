"""The one replay of history (gitmem.git.replay): which note sits at which path as versions apply.

Two models pin it: a naive one of the rule itself (a list of placed notes, rescanned on every step),
and a store whose operations make the versions, against which a replay with redactions must end in
the same notes."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pygit2
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.engine.audit import log as audit
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.git.commits import VersionRecord
from gitmem.git.pushes import PushRecord
from gitmem.git.replay import Notes, Placed, move
from gitmem.git.repository import NOTES_REF, read_tip
from gitmem.model import Actor
from tests.checks import commit
from tests.unit.engine.push.test_receive import API, Pusher

WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
IDS = [f"mem_{n}" for n in range(5)]
PATHS = ["/a", "/b", "/a/b", "/a/c", "/a/b/c", "/b/a"]


def record(
    memory_id: str, operation: str, path: str | None, *, redacted: bool = False, size: int = 1, n: int = 0
) -> VersionRecord:
    made = VersionRecord(memory_id, f"memver_{n}", operation, path, "0" * 64, size, None, WHEN, WHEN)  # type: ignore[arg-type]
    return made.redacted(WHEN, None) if redacted else made


def _clash(one: str, other: str) -> bool:
    return one == other or one.startswith(other + "/") or other.startswith(one + "/")


def naive(state: list[Placed], version: VersionRecord, in_tree: bool) -> list[Placed]:
    """The rule, spelled out without any bookkeeping."""
    if version.operation == "deleted":
        return [p for p in state if p.memory_id != version.memory_id]
    if version.redacted_at is not None or version.path is None or not in_tree:
        return state
    path = version.path
    kept = [p for p in state if p.memory_id != version.memory_id and not _clash(p.path, path)]
    return [*kept, Placed(path, version.memory_id)]


steps = st.lists(
    st.tuples(
        st.sampled_from(IDS),
        st.sampled_from(["created", "modified", "deleted"]),
        st.sampled_from(PATHS),
        st.booleans(),  # redacted
        st.booleans(),  # in the commit's tree
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_the_replay_follows_the_rule_step_by_step(sequence: list[tuple[str, str, str, bool, bool]]) -> None:
    notes, model = Notes(), list[Placed]()
    for n, (memory_id, operation, path, redacted, in_tree) in enumerate(sequence):
        version = record(memory_id, operation, path, redacted=redacted, n=n)
        before = {p.memory_id for p in model}
        step = notes.apply(version, in_tree=in_tree)
        model = naive(model, version, in_tree)
        assert sorted(notes) == sorted(model)
        assert notes.ids() == {p.memory_id for p in model}
        for placed in model:
            assert notes.note_at(placed.path) == placed.memory_id
            assert notes.path_of(placed.memory_id) == placed.path
        # the move names what left: the displaced notes and nothing else
        if step is not None:
            gone = before - notes.ids() - {memory_id}
            assert {p.memory_id for p in step.displaced} == gone
        # a state a Git tree can hold: no note at or above another one's path
        assert not any(_clash(p.path, q.path) for p in model for q in model if p != q)


# -- a store's operations make the versions ---------------------------------------------------------

operations = st.lists(
    st.tuples(st.sampled_from(["create", "modify", "move", "delete"]), st.integers(0, 20), st.sampled_from(PATHS)),
    max_size=25,
)


def _store_history(ops: list[tuple[str, int, str]]) -> tuple[list[VersionRecord], list[dict[str, str]]]:
    """Versions a store makes for ``ops`` (skipping what the store would refuse), and its notes (path ->
    id) after each version."""
    store: dict[str, str] = {}
    versions: list[VersionRecord] = []
    states: list[dict[str, str]] = []

    def free(path: str) -> bool:
        return not any(_clash(path, other) for other in store)

    for kind, pick, path in ops:
        live = sorted(store.items())
        n = len(versions)
        if kind == "create" and free(path):
            memory_id = f"mem_{n}"
            store[path] = memory_id
            versions.append(record(memory_id, "created", path, n=n))
        elif kind in ("modify", "move", "delete") and live:
            old, memory_id = live[pick % len(live)]
            if kind == "modify":
                versions.append(record(memory_id, "modified", old, size=n, n=n))
            elif kind == "delete":
                del store[old]
                versions.append(record(memory_id, "deleted", old, n=n))
            else:
                del store[old]
                if not free(path):
                    store[old] = memory_id
                    continue
                store[path] = memory_id
                versions.append(record(memory_id, "modified", path, n=n))
        else:
            continue
        states.append(dict(store))
    return versions, states


@settings(max_examples=300, deadline=None)
@given(operations, st.lists(st.integers(0, 40), max_size=8))
def test_a_replay_with_redactions_ends_with_the_store_s_notes(
    ops: list[tuple[str, int, str]], redact: list[int]
) -> None:
    versions, states = _store_history(ops)
    plain = Notes()
    for version, state in zip(versions, states, strict=True):
        plain.apply(version)
        assert {p.path: p.memory_id for p in plain} == state
    # Redact any versions but the newest of a note that still exists (that would change the note).
    final = states[-1] if states else {}
    newest = {v.memory_id: n for n, v in enumerate(versions)}
    allowed = [
        n
        for n in range(len(versions))
        if not (versions[n].memory_id in final.values() and newest[versions[n].memory_id] == n)
    ]
    chosen = {allowed[i % len(allowed)] for i in redact} if allowed else set()
    replayed = Notes()
    for n, version in enumerate(versions):
        replayed.apply(version.redacted(WHEN, None) if n in chosen else version)
    assert {p.path: p.memory_id for p in replayed} == final


def test_a_redacted_deletion_still_removes_its_note() -> None:
    notes = Notes()
    notes.apply(record("mem_1", "created", "/a"))
    step = notes.apply(record("mem_1", "deleted", "/a", redacted=True))
    assert step is not None and step.path is None
    assert notes.note_at("/a") is None and len(notes) == 0


def test_a_redacted_move_leaves_the_note_where_it_was_until_its_next_version() -> None:
    notes = Notes()
    notes.apply(record("mem_1", "created", "/a"))
    assert notes.apply(record("mem_1", "modified", "/b", redacted=True)) is None
    assert notes.path_of("mem_1") == "/a"
    # a note made where the moved one was pushes out the one left behind (the rewritten tree has it so)
    step = notes.apply(record("mem_2", "created", "/a/c"))
    assert step is not None and step.displaced == (Placed("/a", "mem_1"),)
    notes.apply(record("mem_1", "modified", "/b"))
    assert sorted(notes) == [Placed("/a/c", "mem_2"), Placed("/b", "mem_1")]


def test_a_version_its_commit_lacks_changes_nothing_but_a_deletion_still_deletes() -> None:
    near = Notes([("/a", "mem_1", 1)]).near
    assert move(record("mem_1", "modified", "/b"), near, in_tree=False) is None
    assert move(record("mem_1", "deleted", "/a"), near, in_tree=False) is not None


# -- the one reader of refs/notes/gitmem --------------------------------------------------------------


def test_a_push_record_reads_back_what_it_writes_and_shrugs_off_what_is_not_one() -> None:
    version = record("mem_1", "created", "/a.md", size=3)
    written = PushRecord("user_1", WHEN, "memstore_1", (version,)).to_json()
    read = PushRecord.parse(json.loads(json.dumps(written)), WHEN + dt.timedelta(days=1))
    assert read is not None and read.versions is not None
    assert read.user_id == "user_1" and read.created_at == WHEN and read.store_id == "memstore_1"
    assert read.versions[0] == replace(version, created_by=Actor("user_actor", "user_1"))
    assert PushRecord.parse([written], WHEN) is None  # not an object: no record at all
    late = WHEN + dt.timedelta(hours=1)
    unreadable = PushRecord.parse({"user_id": "user_1", "created_at": "soon", "versions": [{"memory_id": "m"}]}, late)
    assert unreadable == PushRecord("user_1", None, None, None)  # its versions are derived again, at the commit's time


def test_a_clone_without_the_push_notes_replays_a_redacted_deletion_as_the_server_does(tmp_path: Path) -> None:
    """A redacted deletion still removes its note: a note pushed later at the same path is a new note,
    for the server's index and for ``gitmem log`` in a clone that never fetched the push notes."""
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    ws = gm.catalog.create_workspace("acme")
    user, _ = gm.catalog.create_user(ws.id, "sam")
    info = gm.create_store(ws.id, "notes")
    store = gm.store(ws.id, info.id)
    old = store.create("/a.md", "old\n", actor=API)
    store.create("/keep.md", "kept\n", actor=API)
    deletion = store.delete(old.id, actor=API)
    redact(store, deletion.id)
    pusher = Pusher(gm, ws.id, info.id, user.id, tmp_path)
    pusher.write("a.md", "new\n")
    pusher.commit("a new a")
    assert pusher.push().returncode == 0

    pushed = store.get_by_path("/a.md")
    assert pushed.id != old.id
    server = [(e.memory_id, e.operation, e.path, e.previous_path) for e in audit.store_log(store)]
    fresh = tmp_path / "fresh"
    pusher.git("clone", "-q", str(gm.repo_path(info.id)), str(fresh), cwd=tmp_path)
    entries, unattributed = audit.repo_log(fresh)
    assert [(e.memory_id, e.operation, e.path, e.previous_path) for e in entries] == server
    assert server[-1] == (pushed.id, "created", "/a.md", None) and unattributed == 1

    # A push note that is not a record (here a JSON list) is no record: the versions are derived again.
    repo = pygit2.Repository(str(gm.repo_path(info.id)))
    commit = str(read_tip(repo))
    sig = pygit2.Signature("gitmem", "gitmem@localhost")
    repo.create_note("[1]\n", sig, sig, commit, NOTES_REF, True)
    before = [v.id for v in store.versions(limit=10).items]
    store.index.rebuild()
    assert [v.id for v in store.versions(limit=10).items] == before
    assert store.version(before[0], with_content=False).created_by is None


def test_every_move_the_audit_shows_is_a_move_in_the_rewritten_trees(tmp_path: Path) -> None:
    """A redacted move leaves its note where it was; a note made below that path pushes it out of the
    rewritten tree, so its next version is no move: the index, the rewrite and the audit agree."""
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    ws = gm.catalog.create_workspace("acme")
    info = gm.create_store(ws.id, "notes")
    store = gm.store(ws.id, info.id)
    moved = store.create("/n.md", "one\n", actor=API)
    store.update(moved.id, path="/m.md", actor=API)
    renamed = store.versions(memory_id=moved.id, limit=1).items[0]
    store.create("/n.md/inside.md", "below\n", actor=API)
    store.update(moved.id, "two\n", actor=API)
    store.create("/z.md", "last\n", actor=API)
    redact(store, renamed.id)

    entries = audit.store_log(store)
    # The redacted version names where its note was (the version before shows it anyway), not where it
    # went; the note's next version is no move: the rewritten tree had already pushed it out of /n.md.
    assert [e.previous_path for e in entries] == [None, "/n.md", None, None, None]
    clone, _ = audit.repo_log(gm.repo_path(info.id))
    assert [(e.memory_id, e.path, e.previous_path) for e in clone] == [
        (e.memory_id, e.path, e.previous_path) for e in entries
    ]
    repo = pygit2.Repository(str(gm.repo_path(info.id)))
    trees = [commit(repo[e.commit_id]).tree for e in entries]
    assert "n.md" in trees[1] and trees[1]["n.md"].type_str == "blob"  # left where it was
    assert trees[2]["n.md"].type_str == "tree"  # pushed out by the note below
    assert sorted(n.path for n in store.index.all_notes()) == ["/m.md", "/n.md/inside.md", "/z.md"]
