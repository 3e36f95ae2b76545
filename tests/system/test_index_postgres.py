"""A store's index on PostgreSQL answers exactly as the SQLite file does for the same history, catches
up when ``main`` is ahead of it, and holds the store's writer lock across connections (nodes)."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.clock import FrozenClock
from gitmem.engine.fsck import check_store
from gitmem.engine.index import postgres_schema as index_pg
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.rewrite.retention import prune_store
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PreconditionFailed, SearchTooCostly, StoreBusy
from gitmem.git import repository
from tests.checks import assert_fsck_clean, index_snapshot, run_threads
from tests.unit.engine.index.test_index import answers, plumbing_commit, populate
from tests.unit.engine.index.test_search import EXPENSIVE, budget_notes, every_hit

STORE_ID = "memstore_01PGINDEX"


def open_store(path: Path, clock: FrozenClock, url: str | None, search_budget: float = 1.0) -> MemoryStore:
    if not path.exists():
        repository.init_bare(path)
    return MemoryStore(path, STORE_ID, clock=clock, database_url=url, search_budget=search_budget)


@pytest.fixture
def pg_store(tmp_path: Path, clock: FrozenClock, postgres_url: str) -> Iterator[MemoryStore]:
    store = open_store(tmp_path / f"{STORE_ID}.git", clock, postgres_url)
    yield store
    store.close()


def sqlite_twin(store: MemoryStore, tmp_path: Path) -> StoreIndex:
    """An index of the same repository in a SQLite file, built from its history alone."""
    twin = StoreIndex(store.repo, tmp_path / "twin.sqlite3")
    twin.catch_up()
    return twin


def test_the_same_history_answers_the_same_on_both_engines(
    pg_store: MemoryStore, clock: FrozenClock, tmp_path: Path
) -> None:
    assert pg_store.index.dialect == "postgresql"
    marks = populate(pg_store, clock)
    plumbing_commit(pg_store, {"hand/edited.md": "by hand", "many/00": "changed by hand"}, "edited by hand\n")
    on_postgres = answers(pg_store, marks)  # catches up past the plain Git commit first
    before = index_snapshot(pg_store)
    assert len(before[1]) == 29 and before[2] == str(repository.read_tip(pg_store.repo))

    twin = sqlite_twin(pg_store, tmp_path)
    assert (tuple(twin.all_notes()), tuple(twin.all_versions()), twin.indexed_tip()) == before
    assert twin.totals() == pg_store.index.totals()
    twin.close()
    on_sqlite = open_store(pg_store.path, clock, None)  # the SQLite file in the repository, from history
    assert answers(on_sqlite, marks) == on_postgres
    on_sqlite.close()

    pg_store.index.rebuild()  # gitmem reindex
    assert index_snapshot(pg_store) == before
    assert check_store(pg_store).problems == []  # gitmem fsck


def test_search_finds_what_sqlite_finds(pg_store: MemoryStore, clock: FrozenClock) -> None:
    notes = {
        "/projects/acme.md": "Acme runs terraform nightly.",
        "/people/sam.md": "Sam prefers pulumi; e-mail sam@example.com about the infra-structure.",
        "/people/samantha.md": "Samantha writes python and ruby tips for the team.",
        "/terraform/notes.md": "Only the path says it.",
        "/running.md": "The runner runs and ran: stems match.",
    }
    for path, content in notes.items():
        pg_store.create(path, content)
    on_sqlite = open_store(pg_store.path, clock, None)
    queries = [
        "terraform",
        "sam",
        "sam*",
        "samantha",
        "python OR ruby tips",
        '"runs terraform"',
        '"terraform runs"',
        "running",
        "infra",
        "example",
        "nothing-here",
        "the",
    ]
    for query in queries:
        for prefix in (None, "/people/"):
            want = sorted(h.note.path for h in on_sqlite.search(query, path_prefix=prefix).items)
            got = sorted(h.note.path for h in pg_store.search(query, path_prefix=prefix).items)
            assert got == want, (query, prefix)
    best = pg_store.search("terraform").items
    assert best[0].note.path == "/terraform/notes.md"  # the path weighs more than the body
    snippets = {h.note.path: h.snippets for h in best}
    assert snippets["/projects/acme.md"] == ("Acme runs **terraform** nightly.",)  # the matched word marked
    pages, page = [], None
    while True:
        result = pg_store.search("the OR stems OR says OR runs", limit=2, page=page)
        pages += [h.note.path for h in result.items]
        page = result.next_page
        if page is None:
            break
    assert sorted(pages) == sorted(set(pages)) and len(pages) >= 3
    on_sqlite.close()


def test_a_search_past_its_budget_is_stopped_on_postgresql(
    pg_store: MemoryStore, clock: FrozenClock, postgres_url: str
) -> None:
    expected = budget_notes(pg_store, 40)  # PostgreSQL's ranking and snippets cost more a row
    roomy = open_store(pg_store.path, clock, postgres_url, search_budget=60)
    assert sorted(every_hit(roomy, EXPENSIVE, 20)) == sorted(expected)  # the most a query may ask: answered, right
    tiny = open_store(pg_store.path, clock, postgres_url, search_budget=1e-9)  # statement_timeout 1ms
    with pytest.raises(SearchTooCostly) as refused:
        tiny.search(EXPENSIVE)
    assert refused.value.message.startswith("this search was stopped after 1e-09 s, the most one search may take")
    for store in (roomy, pg_store):  # the timeout was the search's transaction's alone
        assert [h.note.path for h in store.search("note 7").items] == ["/budget/007.md"]
    timeout = pg_store.index.db.execute("SELECT current_setting('statement_timeout')").fetchone()[0]
    assert timeout == "0"
    roomy.close()
    tiny.close()


def test_a_huge_or_group_is_refused_as_on_sqlite(pg_store: MemoryStore, clock: FrozenClock) -> None:
    """An OR group of 40,000 words was PostgreSQL's "stack depth limit exceeded" (a 500); it is the
    same bounded refusal as on SQLite, and the most terms a query may have answer as there."""
    pg_store.create("/w.md", "w7 and w63 and w64")
    on_sqlite = open_store(pg_store.path, clock, None)
    huge = " OR ".join(f"w{i}" for i in range(40_000))
    messages = set()
    for store in (pg_store, on_sqlite):
        with pytest.raises(SearchTooCostly) as refused:
            store.search(huge)
        messages.add(refused.value.message)
    assert messages == {
        "this search has more than 64 terms; a search may have at most 64 (words, phrases and prefixes,"
        " OR alternatives included)"
    }
    most = " OR ".join(f"w{i}" for i in range(64))
    for store in (pg_store, on_sqlite):
        assert [h.note.path for h in store.search(most).items] == ["/w.md"]
        with pytest.raises(SearchTooCostly):
            store.search(most + " OR w64")
    on_sqlite.close()


def test_text_of_deleted_and_redacted_notes_leaves_postgres(pg_store: MemoryStore, clock: FrozenClock) -> None:
    launch = pg_store.create("/launch.md", "the code is swordfish")
    pg_store.update(launch.id, content="nothing to see")
    gone = pg_store.create("/gone.md", "pangolin")
    assert [h.note.path for h in pg_store.search("pangolin").items] == ["/gone.md"]
    pg_store.delete(gone.id)
    first = pg_store.versions(memory_id=launch.id).items[-1]
    redact(pg_store, first.id)
    clock.advance(days=40)
    assert prune_store(pg_store, days=30).error is None
    assert pg_store.search("pangolin").items == [] and pg_store.search("swordfish").items == []
    rows = pg_store.index.db.execute("SELECT body FROM search_text").fetchall()
    assert [r["body"] for r in rows] == ["nothing to see"]
    assert pg_store.index.totals() == (1, len("nothing to see"))
    assert_fsck_clean(pg_store.path)


def test_an_index_behind_main_catches_up_from_history(pg_store: MemoryStore) -> None:
    pg_store.create("/a.md", "one")
    # A node that died between moving main and committing its index rows leaves exactly this.
    plumbing_commit(pg_store, {"b.md": "two"}, "by hand\n", when=dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    assert pg_store.index.indexed_tip() != str(repository.read_tip(pg_store.repo))
    assert sorted(n.path for n in pg_store.list().items) == ["/a.md", "/b.md"]
    assert pg_store.index.indexed_tip() == str(repository.read_tip(pg_store.repo))


def test_the_writer_lock_holds_across_connections_and_times_out(
    pg_store: MemoryStore, clock: FrozenClock, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_node = MemoryStore(pg_store.path, STORE_ID, clock=clock, database_url=postgres_url)
    monkeypatch.setattr(index_pg, "STORE_LOCK_TIMEOUT_SECONDS", 0.3)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pg_store.index.cluster_writer_lock():  # as a push or a rewrite holds it
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    started = time.monotonic()
    with pytest.raises(StoreBusy):
        other_node.create("/blocked.md", "x")
    assert 0.25 <= time.monotonic() - started < 5
    release.set()
    holder.join()
    assert other_node.create("/free.md", "y").path == "/free.md"
    assert [n.path for n in pg_store.list().items] == ["/free.md"]
    other_node.close()


def test_writers_on_two_connections_lose_nothing(pg_store: MemoryStore, clock: FrozenClock, postgres_url: str) -> None:
    nodes = [pg_store, MemoryStore(pg_store.path, STORE_ID, clock=clock, database_url=postgres_url)]
    note = pg_store.create("/shared.md", "")

    def writer(n: int) -> None:
        for i in range(5):
            nodes[n % 2].create(f"/w{n}/{i}.md", f"{n} {i}")

    assert run_threads(6, writer) == []
    assert pg_store.index.totals()[0] == 31 and nodes[1].get(note.id).path == "/shared.md"
    assert len(pg_store.versions(limit=100).items) == 31
    assert check_store(pg_store).problems == []
    nodes[1].close()


def test_deleting_a_store_drops_its_schema(pg_store: MemoryStore) -> None:
    pg_store.create("/a.md", "one")
    schema = index_pg.schema_name(STORE_ID)
    count = "SELECT count(*) FROM pg_namespace WHERE nspname=?"
    assert pg_store.index._pg is not None
    assert pg_store.index._pg.database.execute(count, (schema,)).fetchone()[0] == 1
    pg_store.index.drop()
    assert pg_store.index._pg.database.execute(count, (schema,)).fetchone()[0] == 0


def test_fsck_finds_a_damaged_postgres_index_and_reindex_repairs_it(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from gitmem.cli import main
    from gitmem.engine.gitmem import Gitmem

    gm = Gitmem.open(tmp_path, database=postgres_url)
    workspace = gm.catalog.create_workspace("w")
    info = gm.create_store(workspace.id, "s")
    store = gm.store(workspace.id, info.id)
    for i in range(3):
        store.create(f"/n{i}.md", f"note {i}")
    assert store.index.dialect == "postgresql" and not (store.path / "gitmem" / "index.sqlite3").exists()
    store.index.db.execute("DELETE FROM notes WHERE path='/n1.md'")  # damage the index behind Git's back
    gm.close()

    monkeypatch.setenv("GITMEM_DATABASE", postgres_url)
    run = CliRunner()
    checked = run.invoke(main, ["--home", str(tmp_path), "fsck", info.id])
    assert checked.exit_code == 1 and "history has /n1.md" in checked.output
    rebuilt = run.invoke(main, ["--home", str(tmp_path), "reindex", info.id])
    assert rebuilt.exit_code == 0 and f"{info.id}: 3 notes" in rebuilt.output
    assert run.invoke(main, ["--home", str(tmp_path), "fsck", info.id]).exit_code == 0

    again = Gitmem.open(tmp_path, database=postgres_url)
    again.delete_store(workspace.id, info.id)
    assert store.index._pg is not None
    schema = index_pg.schema_name(info.id)
    assert store.index._pg.database.execute("SELECT 1 FROM pg_namespace WHERE nspname=?", (schema,)).fetchone() is None
    again.close()


def test_db_copy_builds_every_stores_index_in_postgres(tmp_path: Path, postgres_url: str) -> None:
    from click.testing import CliRunner

    from gitmem.cli import main
    from gitmem.engine.gitmem import Gitmem

    gm = Gitmem.open(tmp_path, database="")  # a single node's home on SQLite
    workspace = gm.catalog.create_workspace("w")
    info = gm.create_store(workspace.id, "s")
    gm.store(workspace.id, info.id).create("/copied.md", "searchable quokka")
    gm.close()

    copied = CliRunner().invoke(main, ["db", "copy", "--from", str(tmp_path), "--to", postgres_url])
    assert copied.exit_code == 0, copied.output

    moved = Gitmem.open(tmp_path, database=postgres_url)
    store = moved.store(workspace.id, info.id)
    assert store.index.dialect == "postgresql"
    assert store.index.indexed_tip() == str(repository.read_tip(store.repo))  # built by the copy, not a read
    assert [h.note.path for h in store.search("quokka").items] == ["/copied.md"]
    moved.close()


def test_a_deferred_index_row_that_fails_fails_the_write_before_main_moves(pg_store: MemoryStore) -> None:
    """The index rows a write defers (sent with the next statement) reach the server before ``main``
    moves: a row refused there fails the write, and neither Git nor the index keeps any of it."""
    import psycopg

    pg_store.create("/kept.md", "kept")
    tip = repository.read_tip(pg_store.repo)
    schema = index_pg.schema_name(STORE_ID)
    pg_store.index.db.execute(f"ALTER TABLE {schema}.search_text ADD CONSTRAINT refused CHECK (body <> 'refused')")
    with pytest.raises(psycopg.errors.CheckViolation):
        pg_store.create("/refused.md", "refused")
    assert repository.read_tip(pg_store.repo) == tip
    assert [note.path for note in pg_store.index.all_notes()] == ["/kept.md"]
    assert pg_store.create("/after.md", "fine").path == "/after.md"


def test_path_conflicts_and_case_twins_are_found_as_on_sqlite(
    pg_store: MemoryStore, clock: FrozenClock, tmp_path: Path
) -> None:
    """The placement lookups go to PostgreSQL together; they find what SQLite's one-by-one lookups find."""
    from gitmem.errors import PathConflict

    sqlite_store = open_store(tmp_path / "sqlite" / f"{STORE_ID}.git", clock, None)
    attempts = ["/a/b.md", "/a", "/a/b.md/c.md", "/A/x.md", "/a/B.md", "/a/c/d.md", "/a/C/e.md", "/é/f.md", "/É/g.md"]

    def outcomes(store: MemoryStore) -> list[str]:
        seen = []
        for path in attempts:
            try:
                seen.append("ok " + store.create(path, "x").path)
            except PathConflict as conflict:
                seen.append(f"conflict {conflict.details['conflicting_path']}")
        moved = store.create("/m/n.md", "x")
        seen.append(store.update(moved.id, path="/m/n.md/deeper.md").path)  # past itself, below its new path
        return seen

    try:
        on_sqlite = outcomes(sqlite_store)
    finally:
        sqlite_store.close()
    assert on_sqlite.count("ok /a/b.md") == 1 and "conflict /a/b.md" in on_sqlite
    assert outcomes(pg_store) == on_sqlite


def test_lost_writes_are_kept_on_postgresql_and_retention_purges_them(
    pg_store: MemoryStore, clock: FrozenClock
) -> None:
    """Racing writers on a store indexed in PostgreSQL: each text is a version or a conflict (kept under the
    advisory writer lock), and retention drops the conflicts with the versions' rule."""
    note = pg_store.create("/n.md", "0\n")
    sent: list[str] = []

    def work(t: int) -> None:
        for i in range(3):
            current = pg_store.get(note.id)
            text = f"{current.content}{t}.{i}\n"
            sent.append(text)
            with contextlib.suppress(PreconditionFailed):  # kept: counted below
                pg_store.update(note.id, content=text, expected_sha256=current.content_sha256)

    assert run_threads(4, work) == []
    versions = {pg_store.version(v.id).content for v in pg_store.versions(memory_id=note.id, limit=100).items}
    kept = {pg_store.conflicts.text(c) for c in pg_store.conflicts.all()}
    assert set(sent) == (versions | kept) - {"0\n"} and not versions & kept
    clock.advance(days=31)
    assert len(prune_store(pg_store, days=30).conflicts_dropped) == len(kept)
    assert pg_store.conflicts.all() == []
    assert_fsck_clean(pg_store.path)
