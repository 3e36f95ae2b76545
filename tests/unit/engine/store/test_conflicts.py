"""Conflicts in the engine (gitmem.engine.store.conflicts): every write refused for a stale precondition is kept
off main, once, only if nothing else refused it; resolved as a new version; purged by retention and redaction."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import threading

import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.clock import FrozenClock
from gitmem.engine.rewrite.redaction import redact_conflict
from gitmem.engine.rewrite.retention import prune_store
from gitmem.engine.store.conflict_resolution import compare, resolve
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import (
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    PreconditionFailed,
    SecretRefused,
    TooLarge,
)
from gitmem.model import Actor
from tests.checks import assert_fsck_clean, git, run_threads, store_state

LOSER = Actor("api_actor", "apikey_loser")
TEXT = "one\ntwo\nthree\nfour\nfive\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def every_object(store: MemoryStore) -> bytes:
    """Every object's bytes, reachable or not, loose or packed."""
    return subprocess.run(
        ["git", "-C", str(store.path), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout


def lose(store: MemoryStore, memory_id: str, content: str, base: str, actor: Actor = LOSER) -> str:
    """An update on a stale base; the id of the conflict its refusal names."""
    with pytest.raises(PreconditionFailed) as refused:
        store.update(memory_id, content=content, expected_sha256=sha(base), actor=actor)
    return str(refused.value.details["conflict_id"])


def test_racing_writers_lose_no_text(store: MemoryStore) -> None:
    """8 threads read, modify and write one note with preconditions: every text sent is a version or a
    conflict of the note, and none is both."""
    note = store.create("/counter.md", "start\n")
    sent: list[str] = []
    guard = threading.Lock()

    def work(t: int) -> None:
        for i in range(4):
            current = store.get(note.id)
            text = f"{current.content}thread {t} edit {i}\n"
            with guard:
                sent.append(text)
            try:
                store.update(
                    note.id,
                    content=text,
                    expected_sha256=current.content_sha256,
                    actor=Actor("task_actor", f"task_{t}"),
                )
            except PreconditionFailed as refused:
                assert str(refused.details["conflict_id"]).startswith("cnf_")  # noqa: PT017  a write may land or lose its race; a loss keeps a conflict

    assert run_threads(8, work) == []
    versions = {store.version(v.id).content for v in store.versions(memory_id=note.id, limit=100).items}
    kept = store.conflicts.of_note(note.id)
    texts = {store.conflicts.text(c) for c in kept}
    assert len(sent) == 32 and len(set(sent)) == 32 and len(kept) > 0, len(kept)
    assert set(sent) <= versions | texts and not (versions & texts)
    assert len(kept) == len(texts) == 32 - (len(versions) - 1)  # each lost text kept once; "start" is no send
    assert {c.created_by for c in kept} <= {Actor("task_actor", f"task_{t}") for t in range(8)}
    assert all(c.winner_sha256 != c.base_sha256 for c in kept)
    assert_fsck_clean(store.path)


def test_a_kept_conflict_says_who_what_on_which_base_and_to_what(store: MemoryStore) -> None:
    note = store.create("/a.md", TEXT)
    won = store.update(note.id, content=TEXT.replace("one", "ONE"), expected_sha256=sha(TEXT))
    before = store_state(store)
    cid = lose(store, note.id, TEXT.replace("five", "FIVE"), TEXT)
    assert lose(store, note.id, TEXT.replace("five", "FIVE"), TEXT) == cid  # an identical retry: kept once
    assert store_state(store).without_conflicts() == before  # main, the index, the versions: untouched
    (conflict,) = store.conflicts.list(with_content=True).items
    assert (conflict.id, conflict.memory_id, conflict.operation, conflict.path) == (cid, note.id, "modified", "/a.md")
    assert conflict.content == TEXT.replace("five", "FIVE") and conflict.content_sha256 == sha(conflict.content)
    assert (conflict.base_sha256, conflict.winner_version_id, conflict.winner_sha256) == (
        sha(TEXT),
        won.version_id,
        won.content_sha256,
    )
    assert conflict.created_by == LOSER and conflict.state == "open"
    # In Git: one commit off main, authored by the loser, the text at the note's path.
    ref = f"refs/conflicts/{note.id}"
    assert git(store.path, "log", "--format=%an", ref).split() == ["apikey_loser"]
    assert git(store.path, "show", f"{ref}:a.md") == conflict.content
    assert (
        subprocess.run(["git", "-C", str(store.path), "merge-base", "main", ref], capture_output=True).returncode == 1
    )


def test_a_write_refused_for_anything_else_is_kept_nowhere(store: MemoryStore) -> None:
    policy = dataclasses.replace(store.policy, max_content_bytes=64, max_total_bytes=24)
    small = MemoryStore(store.path, store.id, policy=policy)
    note = small.create("/a.md", "one\n")
    small.create("/b.md", "bee\n")
    small.update(note.id, content="two\n")
    before = store_state(small)
    with pytest.raises(SecretRefused):
        small.update(note.id, content="password: hunter22", expected_sha256=sha("one\n"))
    with pytest.raises(TooLarge):
        small.update(note.id, content="x" * 65, expected_sha256=sha("one\n"))
    # Refused in the plan, against the tip: the precondition is named first, as before, and nothing is kept.
    for change in ({"content": "three\n", "path": "/b.md/c.md"}, {"content": "y" * 21}):
        with pytest.raises(PreconditionFailed) as refused:
            small.update(note.id, expected_sha256=sha("one\n"), **change)  # type: ignore[arg-type]
        assert "conflict_id" not in refused.value.details
    with pytest.raises(PathConflict):  # without the stale precondition, the collision
        small.update(note.id, path="/b.md/c.md")
    with pytest.raises(LimitExceeded):
        small.update(note.id, content="y" * 21)
    assert store_state(small) == before  # no ref, no object
    assert b"hunter22" not in every_object(small)


def test_a_lost_delete_and_a_lost_move_are_kept_and_resolvable(store: MemoryStore) -> None:
    note = store.create("/a.md", "one\n")
    store.update(note.id, content="two\n")
    with pytest.raises(PreconditionFailed):
        store.delete(note.id, expected_sha256=sha("one\n"), actor=LOSER)
    with pytest.raises(PreconditionFailed):
        store.update(note.id, path="/moved.md", expected_sha256=sha("one\n"), actor=LOSER)
    moved, deleted = store.conflicts.of_note(note.id)
    assert (deleted.operation, deleted.content, moved.operation, moved.path) == ("deleted", None, "moved", "/moved.md")
    assert resolve(store, moved.id, "loser").conflict.state == "resolved"
    assert store.get(note.id).path == "/moved.md" and store.get(note.id).content == "two\n"
    done = resolve(store, deleted.id, "loser", expected_sha256=sha("two\n"))
    assert done.version_id is not None and store.version(done.version_id).operation == "deleted"
    with pytest.raises(NotFound):
        store.get(note.id)


def test_compare_and_resolve(store: MemoryStore) -> None:
    note = store.create("/a.md", TEXT)
    store.update(note.id, content=TEXT.replace("one", "ONE"))
    clean = lose(store, note.id, TEXT.replace("five", "FIVE"), TEXT)
    overlapping = lose(store, note.id, TEXT.replace("one", "uno"), TEXT)
    seen = compare(store, clean)
    assert seen.base == TEXT and seen.winner_text == TEXT.replace("one", "ONE")
    assert seen.merge is not None and seen.merge.clean and seen.merge.text == "ONE\ntwo\nthree\nfour\nFIVE\n"
    changed = [("-" if line.kind == "removed" else "+") + line.text for h in seen.hunks for line in h.lines]
    assert [c for c in changed if c[1:] not in ("two", "three", "four")] == ["-ONE", "+one", "-five", "+FIVE"]
    rough = compare(store, overlapping).merge
    assert rough is not None and not rough.clean and "<<<<<<< conflict\nuno\n=======\nONE\n>>>>>>> note\n" in rough.text
    with pytest.raises(InvalidRequest, match="overlap"):
        resolve(store, overlapping, "merged")
    merged = resolve(store, clean, "merged", actor=Actor("user_actor", "user_1"))  # the clean merge, by default
    assert store.get(note.id).content == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert merged.conflict.resolution == "merged" and merged.conflict.resolved_by == Actor("user_actor", "user_1")
    assert resolve(store, clean, "merged").version_id == merged.version_id  # a retry writes nothing more
    # The note moved on since `overlapping` lost: taking it against the winner is refused, and kept.
    with pytest.raises(PreconditionFailed) as again:
        resolve(store, overlapping, "loser")
    assert again.value.details["conflict_id"] not in (clean, overlapping)
    taken = resolve(store, overlapping, "loser", expected_sha256=store.get(note.id).content_sha256)
    assert store.get(note.id).content == TEXT.replace("one", "uno") and taken.conflict.resolution == "loser"
    assert [c.state for c in store.conflicts.list(state="open").items] == ["open"]
    assert len(store.conflicts.list(state="resolved").items) == 2


def test_merge_on_write_only_when_asked_and_clean(store: MemoryStore) -> None:
    note = store.create("/a.md", TEXT)
    store.update(note.id, content=TEXT.replace("one", "ONE"))
    merged = store.update(note.id, content=TEXT.replace("five", "FIVE"), expected_sha256=sha(TEXT), merge=True)
    assert store.get(merged.id).content == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert store.conflicts.all() == []
    with pytest.raises(PreconditionFailed) as refused:
        store.update(note.id, content=TEXT.replace("one", "uno"), expected_sha256=sha(TEXT), merge=True)
    (kept,) = store.conflicts.all()
    assert kept.id == refused.value.details["conflict_id"] and store.conflicts.text(kept) == TEXT.replace("one", "uno")


def test_retention_and_redaction_purge_conflicts_from_the_objects(store: MemoryStore, clock: FrozenClock) -> None:
    note = store.create("/a.md", "first\n")
    store.update(note.id, content="second\n")
    old = lose(store, note.id, "an old lost edit (marker-0ld)\n", "first\n")
    resolve(store, old, "winner")  # resolved: kept until retention all the same
    clock.advance(days=31)
    young = lose(store, note.id, "a young lost edit (marker-y0ung)\n", "first\n")
    secret_ish = lose(store, note.id, "a lost edit to redact (marker-r3d)\n", "first\n", actor=Actor("task_actor", "t"))
    assert all(m in every_object(store) for m in (b"marker-0ld", b"marker-y0ung", b"marker-r3d"))
    report = prune_store(store, days=30)
    assert report.ok and report.conflicts_dropped == [old]
    assert [c.id for c in store.conflicts.all()] == [secret_ish, young]
    redacted = redact_conflict(store, secret_ish, Actor("user_actor", "user_1"))
    assert redacted.redacted_at is not None and redacted.path is None and store.conflicts.text(redacted) is None
    assert redacted.created_by == Actor("task_actor", "t")
    objects = every_object(store)
    assert b"marker-0ld" not in objects and b"marker-r3d" not in objects and b"marker-y0ung" in objects
    assert b"marker" not in (store.path / "gitmem" / "index.sqlite3").read_bytes()
    assert store.get(note.id).content == "second\n" and len(store.versions().items) == 2
    assert_fsck_clean(store.path)
    clock.advance(days=31)
    assert sorted(prune_store(store, days=30).conflicts_dropped) == sorted([secret_ish, young])
    assert store.conflicts.all() == [] and git(store.path, "for-each-ref", "refs/conflicts/") == ""
    assert b"marker-y0ung" not in every_object(store)


def test_another_note_and_dates_page_newest_first(store: MemoryStore, clock: FrozenClock) -> None:
    a, b = store.create("/a.md", "a\n"), store.create("/b.md", "b\n")
    store.update(a.id, content="a2\n")
    store.update(b.id, content="b2\n")
    made = []
    for i in range(5):
        made.append(lose(store, (a, b)[i % 2].id, f"lost {i}\n", ("a\n", "b\n")[i % 2]))
        clock.advance(seconds=1)
    first = store.conflicts.list(limit=2)
    assert [c.id for c in first.items] == made[::-1][:2] and first.next_page
    rest = store.conflicts.list(limit=10, page=first.next_page)
    assert [c.id for c in rest.items] == made[::-1][2:] and rest.next_page is None
    assert [c.id for c in store.conflicts.list(memory_id=b.id).items] == [made[3], made[1]]
    with pytest.raises(NotFound):
        store.conflicts.get("cnf_nope")


def test_the_cli_lists_shows_resolves_and_redacts(store: MemoryStore) -> None:
    note = store.create("/a.md", TEXT)
    store.update(note.id, content=TEXT.replace("one", "ONE"))
    cid = lose(store, note.id, TEXT.replace("five", "FIVE"), TEXT)
    other = lose(store, note.id, "to redact\n", TEXT)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(main, ["--home", str(store.path.parent.parent), *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    listed = run("conflicts", store.id)
    assert cid in listed and other in listed and "apikey_loser" in listed and "open" in listed
    shown = run("conflicts", "show", store.id, cid)
    assert "+FIVE" in shown and "-five" in shown and "three-way merge (clean)" in shown
    assert "ONE\ntwo\nthree\nfour\nFIVE\n" in shown
    assert "took the merged" in run("conflicts", "resolve", store.id, cid, "--take", "merged")
    assert store.get(note.id).content == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert "was resolved already" in run("conflicts", "resolve", store.id, cid, "--take", "loser", code=1)
    assert "redacted" in run("conflicts", "redact", store.id, other)
    assert b"to redact" not in every_object(store)
    assert run("conflicts", store.id, "--state", "open").count("cnf_") == 1  # the redacted one stays open
