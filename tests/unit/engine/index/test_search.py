"""Search in the engine: always current (writes, another process, a push, a rebuild), nothing redacted or
expired left in the index file's bytes, and no plaintext of an encrypted store on disk."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitmem.clock import FrozenClock
from gitmem.durable import Durability
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.search import _fingerprint as search_fingerprint
from gitmem.engine.index.search_query import MAX_PREFIXES, MAX_TERMS, groups
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.rewrite.retention import prune_store
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest, SearchTooCostly
from gitmem.git import repository
from gitmem.git.commits import author_for
from gitmem.git.pack.format import PackObject, write_pack
from tests.unit.engine.push.test_receive import Pusher


def found(store: MemoryStore, query: str, **kwargs: object) -> list[str]:
    return [hit.note.path for hit in store.search(query, **kwargs).items]  # type: ignore[arg-type]


def index_bytes(store: MemoryStore) -> bytes:
    """Every byte of the index: the database, its WAL and shared memory."""
    folder = store.path / "gitmem"
    return b"".join(p.read_bytes() for p in sorted(folder.glob("index.sqlite3*")))


@pytest.fixture(params=[False, True], ids=["plain", "encrypted"])
def any_store(request: pytest.FixtureRequest, gm: Gitmem, workspace: Workspace) -> MemoryStore:
    return gm.store(workspace.id, gm.create_store(workspace.id, "s", encrypted=request.param).id)


def test_every_write_is_searchable_at_once(any_store: MemoryStore) -> None:
    store = any_store
    sam = store.create("/people/sam.md", "Sam prefers terraform plans.")
    acme = store.create("/projects/acme.md", "Acme runs terraform nightly.")
    assert sorted(found(store, "terraform")) == ["/people/sam.md", "/projects/acme.md"]
    assert found(store, "terraform", path_prefix="/people/") == ["/people/sam.md"]
    store.update(sam.id, content="Prefers pulumi.")
    assert found(store, "terraform") == ["/projects/acme.md"] and found(store, "pulumi") == ["/people/sam.md"]
    store.update(sam.id, path="/people/samantha.md")
    assert found(store, "samantha") == ["/people/samantha.md"] and found(store, "sam") == []
    store.delete(acme.id)
    assert found(store, "terraform") == [] and found(store, "acme") == []
    restore(store, acme.id, acme.version_id)
    assert found(store, "terraform") == ["/projects/acme.md"]
    hit = store.search("nightly").items[0]
    assert hit.note.content is None and hit.snippets == ("Acme runs terraform **nightly**.",)


def test_another_process_writes_and_this_one_finds_it(any_store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    assert found(any_store, "elsewhere") == []  # the encrypted store's memory index is built now
    other = Gitmem.open(gm.home, fsync="never")  # what another process opens
    other.store(workspace.id, any_store.id).create("/x.md", "written elsewhere")
    assert found(any_store, "elsewhere") == ["/x.md"]


def test_a_push_is_searchable_when_it_lands(gm: Gitmem, workspace: Workspace, tmp_path: Path) -> None:
    user, _ = gm.catalog.create_user(workspace.id, "sam")
    store = gm.store(workspace.id, gm.create_store(workspace.id, "pushed").id)
    store.create("/a.md", "before the push")
    pusher = Pusher(gm, workspace.id, store.id, user.id, tmp_path)
    pusher.write("a.md", "after the push\n")
    pusher.write("b/new.md", "a pushed quokka\n")
    pusher.commit()
    assert pusher.push().returncode == 0
    assert found(store, "quokka") == ["/b/new.md"]
    assert found(store, "before") == [] and found(store, "after") == ["/a.md"]


def test_rebuilds_and_old_indexes_are_searchable(store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    store.create("/a.md", "an aardvark")
    store.index.rebuild()
    assert found(store, "aardvark") == ["/a.md"]
    # An index made before search existed fills its text table when first opened.
    with sqlite3.connect(store.index.path) as db:
        db.execute("DROP TABLE note_text")
    again = Gitmem.open(gm.home, fsync="never").store(workspace.id, store.id)
    assert found(again, "aardvark") == ["/a.md"]


def test_redacted_text_leaves_the_index_file(store: MemoryStore) -> None:
    note = store.create("/launch.md", "the launch code is swordfish")
    assert b"swordfish" in index_bytes(store)  # the test can fail
    store.update(note.id, content="the launch code is elsewhere")
    store.update(note.id, content="nothing here")
    redact(store, note.version_id)
    assert found(store, "swordfish") == [] and found(store, "nothing") == ["/launch.md"]
    assert b"swordfish" not in index_bytes(store)


def test_expired_text_leaves_the_index_file(store: MemoryStore, clock: FrozenClock) -> None:
    gone = store.create("/old.md", "a forgotten pangolin")
    store.create("/kept.md", "still here")
    store.delete(gone.id)
    assert b"pangolin" in index_bytes(store)
    clock.advance(days=31)
    report = prune_store(store, days=30)
    assert report.error is None and len(report.dropped) == 2
    assert found(store, "pangolin") == [] and found(store, "still") == ["/kept.md"]
    assert b"pangolin" not in index_bytes(store)


def test_an_encrypted_store_leaves_no_plaintext_on_disk(gm: Gitmem, workspace: Workspace) -> None:
    store = gm.store(workspace.id, gm.create_store(workspace.id, "bank", encrypted=True).id)
    note = store.create("/diary.md", "my secret wombat recipe")
    store.update(note.id, content="my secret wombat recipe, with capybara")
    assert found(store, "wombat capybara") == ["/diary.md"]
    on_disk = b"".join(p.read_bytes() for p in store.path.rglob("*") if p.is_file())
    assert b"wombat" not in on_disk and b"capybara" not in on_disk
    assert b"wombat" not in b"".join(p.read_bytes() for p in gm.home.rglob("*") if p.is_file())


def test_bad_arguments_are_invalid_requests(store: MemoryStore) -> None:
    deep = store.index.tokens.encode("search", 10**30, search_fingerprint("x", "/"))  # signed, but too deep
    refused: tuple[dict[str, Any], ...] = ({"limit": 0}, {"limit": 101}, {"path_prefix": "x"}, {"page": "garbage"})
    for kwargs in (*refused, {"page": deep}):
        with pytest.raises(InvalidRequest):
            store.search("x", **kwargs)


def test_pages_cover_all_hits_once(store: MemoryStore) -> None:
    for i in range(7):
        store.create(f"/n{i}.md", f"shared word number {i}" + " shared" * i)
    seen, page = [], None
    while True:
        result = store.search("shared", limit=3, page=page)
        seen += [h.note.path for h in result.items]
        if (page := result.next_page) is None:
            break
    assert sorted(seen) == sorted(f"/n{i}.md" for i in range(7))
    scores = [h.score for h in store.search("shared", limit=7).items]
    assert scores == sorted(scores, reverse=True)


def test_threads_share_an_encrypted_stores_memory_index(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "bank", encrypted=True)
    errors: list[BaseException] = []

    def write() -> None:
        store = gm.store(workspace.id, info.id)  # one store object a thread, as the server has
        for i in range(8):
            store.create(f"/n{i}.md", f"note {i} about otters")

    def read() -> None:
        store = gm.store(workspace.id, info.id)
        try:
            for _ in range(15):
                paths = found(store, "otters", limit=100)
                assert len(paths) == len(set(paths)) <= 8
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(found(gm.store(workspace.id, info.id), "otters")) == [f"/n{i}.md" for i in range(8)]


# -- what a search may cost -------------------------------------------------------------------------

BUDGET_WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath"]
BUDGET_NOTES = 200
# The most a query may ask for: 64 terms, 8 of them prefixes of 2 letters, in 16 ANDed groups of 4
# alternatives, every one found in most notes. Only the even notes hold "heath" (the last group).
EXPENSIVE = (
    " ".join(
        " OR ".join(
            [f"{BUDGET_WORDS[g][:2]}*" if g < 7 else BUDGET_WORDS[(g + 4) % 7]]
            + [BUDGET_WORDS[(g + k) % 7] for k in range(1, 4)]
        )
        for g in range(15)
    )
    + " heath OR heath OR heath OR he*"
)


def budget_notes(store: MemoryStore, count: int = BUDGET_NOTES) -> set[str]:
    """``count`` notes in one commit of one pack (as a push lands them), each holding every budget
    word but the odd ones "heath"; the paths the expensive query finds."""
    repo = store.repo
    blobs, changes = [], {}
    for i in range(count):
        words = BUDGET_WORDS if i % 2 == 0 else BUDGET_WORDS[:7]
        data = store.codec.encode(f"/budget/{i:03d}.md", (f"note {i}: " + " ".join(words * 3) + "\n").encode())
        blobs.append(
            PackObject(b"blob", data, hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).digest())
        )
        changes[f"budget/{i:03d}.md"] = pygit2.Oid(raw=blobs[-1].oid)
    write_pack(Path(repo.path) / "objects", blobs, durability=Durability("never"))
    tip = repository.read_tip(repo)
    tree = repository.tree_with(repo, repo[tip].tree if tip else None, changes)
    when = dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    commit = repository.commit(repo, tree=tree, parent=tip, message="many notes\n", author=author_for(None, when))
    assert repository.compare_and_swap(repo, tip, commit)
    return {f"/budget/{i:03d}.md" for i in range(0, count, 2)}


def every_hit(store: MemoryStore, query: str, limit: int = 100) -> list[str]:
    seen, page = [], None
    while True:
        result = store.search(query, limit=limit, page=page)
        seen += [h.note.path for h in result.items]
        if (page := result.next_page) is None:
            return seen


def test_a_search_past_its_budget_is_stopped(any_store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    expected = budget_notes(any_store)
    terms = [term for group in groups(EXPENSIVE) for term in group]
    assert len(groups(EXPENSIVE)) == 16 and len(terms) == MAX_TERMS and sum(t.prefix for t in terms) == MAX_PREFIXES
    roomy = Gitmem.open(gm.home, fsync="never", search_budget=60).store(workspace.id, any_store.id)
    found_all = every_hit(roomy, EXPENSIVE)  # within the bounds: answered, and right
    assert sorted(found_all) == sorted(expected)
    tiny = Gitmem.open(gm.home, fsync="never", search_budget=1e-9).store(workspace.id, any_store.id)
    with pytest.raises(SearchTooCostly) as refused:
        tiny.search(EXPENSIVE)
    assert refused.value.message.startswith("this search was stopped after 1e-09 s, the most one search may take")
    assert isinstance(refused.value, InvalidRequest)  # a 400 on every surface
    assert found(tiny, "7") == ["/budget/007.md"]  # a cheap query never looks at the clock
    assert found(roomy, "note 7") == ["/budget/007.md"]  # nothing is left set on the connection
