"""Two nodes on one PostgreSQL: what one node changes in the catalog holds on the other at once, and
background rounds run once across both.

A "node" here is a :class:`Gitmem` with its own connection pool on the same database and the same home
folder (the shared volume), in this process: what a second server process would hold.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from gitmem.access import require_access
from gitmem.agents.dreams.dreams import Dreams
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.pruner import PruneScheduler
from gitmem.engine.rewrite.retention import retention_days
from gitmem.errors import ArchivedStore, AuthenticationFailed, NotFound
from gitmem.webhooks.delivery import Dispatcher
from gitmem.webhooks.outbox import webhooks_for
from tests.checks import with_outbox
from tests.system.test_webhooks import LOOPBACK, POLICY


@pytest.fixture
def nodes(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Gitmem, Gitmem]]:
    one = with_outbox(Gitmem.open(tmp_path / "home", fsync="never", database=postgres_url))
    two = with_outbox(Gitmem.open(tmp_path / "home", fsync="never", database=postgres_url))
    yield one, two
    one.close()
    two.close()


def test_a_key_revoked_on_one_node_is_refused_by_the_other_at_once(nodes: tuple[Gitmem, Gitmem]) -> None:
    one, two = nodes
    ws = one.catalog.create_workspace("w")
    key, secret = one.catalog.create_api_key(ws.id, "agent")
    assert two.catalog.authenticate(secret).credential_id == key.id
    heard = threading.Event()
    two.catalog.on_change(lambda kind, cred: heard.set() if (kind, cred) == ("credential", key.id) else None)
    time.sleep(0.2)  # the listener's LISTEN is in place
    one.catalog.revoke(key.id)
    with pytest.raises(AuthenticationFailed):
        two.catalog.authenticate(secret)
    assert heard.wait(1.0), "node two was not told within a second"


def test_archive_delete_task_end_and_retention_hold_on_the_other_node(nodes: tuple[Gitmem, Gitmem]) -> None:
    one, two = nodes
    heard: list[tuple[str, str]] = []
    two.catalog.on_change(lambda kind, key: heard.append((kind, key)))
    ws = one.catalog.create_workspace("w")
    info = one.create_store(ws.id, "notes")
    doomed = one.create_store(ws.id, "doomed")
    store_on_two = two.store(ws.id, info.id)  # node two has it open (and cached for its thread)
    store_on_two.create("/a.md", "one")

    one.archive_store(ws.id, info.id)
    refused_within(1.0, lambda: two.store(ws.id, info.id).create("/b.md", "two"), ArchivedStore)

    one.delete_store(ws.id, doomed.id)
    with pytest.raises(NotFound):
        two.store(ws.id, doomed.id)

    tasks = tasks_for(one)
    worker = tasks.create_worker(ws.id, "agent")
    task, token = tasks.create_task(ws.id, worker.id)
    principal = two.catalog.authenticate(token)
    require_access(two, principal, worker.own_store_id, write=True)
    tasks.end_task(ws.id, task.id)
    with pytest.raises(AuthenticationFailed):
        two.catalog.authenticate(token)

    one.catalog.update_workspace_settings(ws.id, retention_days="keep-all")
    assert retention_days(two.catalog.workspace(ws.id).settings) is None

    # And node two was told of each change, for whatever it may cache.
    wanted = {("store", info.id), ("store", doomed.id), ("credential", task.id), ("workspace", ws.id)}
    deadline = time.monotonic() + 1.0
    while not wanted <= set(heard) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert wanted <= set(heard)


def refused_within(seconds: float, write: Callable[[], object], error: type[Exception]) -> None:
    """``write`` raises ``error`` within ``seconds`` (a node keeps some answers until told of a change)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            write()
        except error:
            return
        assert time.monotonic() < deadline, f"still no {error.__name__} after {seconds} s"
        time.sleep(0.01)


def raw_sql(url: str, sql: str, params: tuple[object, ...]) -> None:
    """A change made behind gitmem's back: no notification goes out."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql, params)


def test_a_node_keeps_what_every_write_asks_until_it_is_told_of_a_change(
    nodes: tuple[Gitmem, Gitmem], postgres_url: str
) -> None:
    """Whether a store is archived, and whether its workspace listens to note events, are asked on
    every write: node two keeps the answers while it hears every catalog change, so a change no one
    announces goes unseen, and an announced one (from either node) holds within a second."""
    one, two = nodes
    ws = one.catalog.create_workspace("w")
    info = one.create_store(ws.id, "notes")
    store_on_two = two.store(ws.id, info.id)
    store_on_two.create("/a.md", "one")
    store_on_two.create("/b.md", "two")  # the answers are kept now
    raw_sql(postgres_url, "UPDATE stores SET archived_at=1 WHERE id=%s", (info.id,))
    store_on_two.create("/c.md", "unannounced archive: still writable here")
    raw_sql(postgres_url, "UPDATE stores SET archived_at=NULL WHERE id=%s", (info.id,))

    hooks = webhooks_for(one)
    hooks.create(ws.id, "https://example.com/hook", ["memory.created"])
    outbox = "SELECT count(*) FROM webhook_outbox WHERE store_id=?"
    store_on_two.create("/d.md", "told within a second")
    deadline = time.monotonic() + 1.0
    while two.catalog.db.execute(outbox, (info.id,)).fetchone()[0] == 0 and time.monotonic() < deadline:
        store_on_two.create(f"/e-{time.monotonic_ns()}.md", "again")
    assert two.catalog.db.execute(outbox, (info.id,)).fetchone()[0] > 0

    one.archive_store(ws.id, info.id)
    refused_within(1.0, lambda: store_on_two.create("/f.md", "archived"), ArchivedStore)
    two.catalog.update_store(info.id, name="renamed")  # a change made here is heard here at once
    raw_sql(postgres_url, "UPDATE stores SET archived_at=NULL WHERE id=%s", (info.id,))
    store_on_two.create("/g.md", "the row was read again after the rename")


def test_without_notifications_nothing_is_kept(tmp_path: Path) -> None:
    """On SQLite another process announces nothing here: every write reads the catalog."""
    gm = with_outbox(Gitmem.open(tmp_path / "home", fsync="never"))
    ws = gm.catalog.create_workspace("w")
    info = gm.create_store(ws.id, "notes")
    store = gm.store(ws.id, info.id)
    store.create("/a.md", "one")
    store.create("/b.md", "two")
    gm.catalog.db.execute("UPDATE stores SET archived_at=1 WHERE id=?", (info.id,))  # as another process
    with pytest.raises(ArchivedStore):
        store.create("/c.md", "three")
    gm.close()


def test_a_retention_round_runs_once_across_the_nodes(nodes: tuple[Gitmem, Gitmem]) -> None:
    one, _two = nodes
    ws = one.catalog.create_workspace("w")
    one.create_store(ws.id, "notes")
    schedulers = [PruneScheduler(node, interval=3600) for node in nodes]
    results: list[object] = []
    barrier = threading.Barrier(len(schedulers))

    def run(scheduler: PruneScheduler) -> None:
        barrier.wait()
        results.append(scheduler.run_once())

    threads = [threading.Thread(target=run, args=(s,)) for s in schedulers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = [r for r in results if r is not None]
    assert len(ran) == 1 and len(results) == 2  # the other node skipped the round
    assert all(s.run_once() is None for s in schedulers)  # and nobody runs it again within the interval
    assert sum(s.rounds for s in schedulers) == 1


def test_each_dream_is_claimed_by_one_node(nodes: tuple[Gitmem, Gitmem]) -> None:
    one, _two = nodes
    ws = one.catalog.create_workspace("w")
    info = one.create_store(ws.id, "notes")
    one.store(ws.id, info.id).create("/a.md", "x")
    dreams = [
        Dreams.of(one).create(ws.id, [{"type": "memory_store", "memory_store_id": info.id}], "m") for _ in range(6)
    ]
    claimed: dict[str, list[str]] = {"one": [], "two": []}

    def claim(name: str, node: Gitmem) -> None:
        while (dream_id := Dreams.of(node).claim_next(name)) is not None:
            claimed[name].append(dream_id)

    threads = [threading.Thread(target=claim, args=(name, node)) for name, node in zip(claimed, nodes, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed["one"] + claimed["two"]) == sorted(d.id for d in dreams)


def test_one_node_delivers_webhooks(nodes: tuple[Gitmem, Gitmem]) -> None:
    one, two = nodes
    ws = one.catalog.create_workspace("w")
    webhooks_for(one).create(ws.id, "http://127.0.0.1:9/unused", ["memory_store.created"], allow_networks=LOOPBACK)
    first, second = Dispatcher(one, POLICY), Dispatcher(two, POLICY)
    try:
        assert first.claim() and not second.claim()
        first.release()
        assert second.claim()
    finally:
        first.stop()
        second.stop()
