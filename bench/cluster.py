"""Several nodes on PostgreSQL: what a second and third node buy, and what PostgreSQL costs a write.

    python -m bench.cluster [--writes 600] [--engine-writes 200] [--turns 5] [--database postgresql://...]

1. **One write, PostgreSQL against SQLite**, in one process with one thread: notes created one after
   another in a store whose index is a SQLite file and in a store whose index (and catalog) is in
   PostgreSQL, a write to each in turn. ``--turns`` runs, each with two new stores; printed: the
   median ms a write and the median of the runs' ratios (target: PostgreSQL at most 1.5x SQLite).
2. **Writes/s on 8 stores through three nodes against one node**: ``gitmem serve`` processes on one
   home and one PostgreSQL; 8 client threads (one a store) and then 32 (four a store), thread t
   writing into store t % 8, ``--writes`` notes in all. One node, then three, ``--turns`` times. Three
   nodes are driven twice, the way two load balancers would route: **round robin** (each request of
   a thread to the next node in turn, so a store's writes arrive at every node) and **by store** (every
   request for store s through node s % 3, as a load balancer hashing the store id in the path does;
   see docs/deploy.md). Printed: the median writes/s and the median of the turns' ratios for each number
   of clients and routing (target: three nodes at least 1.3x one node).

A run of a few hundred writes lasts a second or two, and on a shared two-core machine one such ratio
ranged from 0.96x to 1.77x between runs; a median of turns, each side beside the other, is what to read.

Without ``--database`` a throwaway PostgreSQL is started (tests/postgres.py). Timings on a shared
machine are noisy: read the ratios, side by side in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import statistics
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

from bench._together import run_together
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Actor
from tests import postgres
from tests.server import _start, _stop, _wait_healthy, free_port

ACTOR = Actor("api_actor", "apikey_bench")
TEXT = "The user prefers short answers and a summary at the end of each reply. " * 4  # ~300 bytes
STORES = 8
# One client a store waits on every write's round trip, so a node is rarely busy; four a store keep
# every node's CPU busy (and let group commit batch): what the nodes can take in aggregate.
CLIENTS = (STORES, 4 * STORES)


class _EngineStore:
    """A store in a home of its own (``database``: PostgreSQL, else SQLite), warmed by one write."""

    def __init__(self, home: Path, database: str | None) -> None:
        self.gm = Gitmem.open(home, database=database or "")
        # One PostgreSQL serves every run: each home's workspace takes a name of its own.
        workspace = self.gm.catalog.create_workspace(f"bench-{home.parent.name}-{home.name}")
        self.store = self.gm.store(workspace.id, self.gm.create_store(workspace.id, "s").id)
        self.store.create("/warm.md", TEXT, actor=ACTOR)  # connections, schema, caches

    def write(self, i: int) -> float:
        """Seconds one write took."""
        began = time.perf_counter()
        self.store.create(f"/topic-{i % 20:02d}/note-{i:05d}.md", TEXT, actor=ACTOR)
        return time.perf_counter() - began


def engine_ms_per_write(root: Path, writes: int, database: str) -> tuple[float, float]:
    """Milliseconds a write on SQLite and on PostgreSQL. The two stores are written in alternation, one
    write each in turn and the order swapped every write, so that both meet the same moments of a
    shared machine (with 200 writes to one and then 200 to the other, the ratios of five such turns
    ranged from 1.2x to 2.0x in one run)."""
    sides = [_EngineStore(root / "sqlite", None), _EngineStore(root / "pg", database)]
    try:
        seconds = [0.0, 0.0]
        for i in range(writes):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                seconds[side] += sides[side].write(i)
        return seconds[0] * 1000 / writes, seconds[1] * 1000 / writes
    finally:
        for engine_store in sides:
            engine_store.gm.close()


@contextlib.contextmanager
def nodes(home: Path, database: str, count: int) -> Iterator[list[str]]:
    env = {"GITMEM_DATABASE": database, "GITMEM_LOG_LEVEL": "WARNING", "GITMEM_RATE_LIMIT_RPS": "0"}
    started = []
    for _ in range(count):
        port = free_port()
        log = tempfile.TemporaryFile()  # noqa: SIM115 - the server writes it until it stops
        started.append(
            (f"http://127.0.0.1:{port}", _start(home, port, "gitmem.api.app:create_app_from_env", env, log), log)
        )
    try:
        for url, proc, log in started:
            _wait_healthy(proc, url, 60.0, log)
        yield [url for url, _, _ in started]
    finally:
        for _, proc, _ in started:
            _stop(proc)


ROUTINGS = ("round robin", "by store")


def node_of(thread: int, request: int, nodes: int, routing: str) -> int:
    """The node that request number ``request`` of thread ``thread`` (writing into store
    ``thread % STORES``) goes to: the next node in turn (a round-robin load balancer), or always the
    store's node (one that hashes the store id in the path)."""
    return (thread % STORES if routing == "by store" else thread + request) % nodes


def writes_per_second(
    urls: list[str],
    secret: str,
    store_ids: list[str],
    writes: int,
    run: str,
    clients: int = STORES,
    routing: str = "round robin",
) -> float:
    """Aggregate writes/s of ``clients`` threads, thread t writing into store t % 8 through the nodes
    ``routing`` picks (:func:`node_of`). The client is the standard library's ``http.client``, one
    kept-alive connection a thread and node: ``httpx`` spends ~1.4 ms of CPU a request, so on two cores
    the client itself, not the nodes, would decide how much a second and third node can add."""
    failures: list[str] = []
    headers = {"x-api-key": secret, "content-type": "application/json"}

    def body(t: int, ready: Callable[[], object]) -> None:
        connections = []
        for url in map(urllib.parse.urlsplit, urls):
            connections.append(http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60))
        try:
            ready()
            for request, i in enumerate(range(t, writes, clients)):
                note = {"path": f"/{run}/topic-{i % 20:02d}/note-{i:05d}.md", "content": TEXT}
                connection = connections[node_of(t, request, len(urls), routing)]
                connection.request(
                    "POST", f"/v1/memory_stores/{store_ids[t % STORES]}/memories", json.dumps(note), headers
                )
                answer = connection.getresponse()
                text = answer.read()
                if answer.status != 200:
                    failures.append(text[:200].decode(errors="replace"))
        finally:
            for connection in connections:
                connection.close()

    elapsed = run_together(clients, body)
    if failures:
        raise SystemExit(f"{len(failures)} writes failed, e.g. {failures[0]}")
    return writes / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=600, help="notes written through the nodes, per run")
    parser.add_argument("--engine-writes", type=int, default=200, help="notes written in process, per run")
    parser.add_argument("--turns", type=int, default=5, help="runs of each side, taking turns")
    parser.add_argument("--database", default=None, help="a PostgreSQL URL (default: a throwaway server)")
    args = parser.parse_args()
    database = args.database
    if database is None:
        server = postgres.cluster()
        if server is None:
            raise SystemExit(postgres.SKIP_REASON)
        database = server.fresh_database()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:  # packers may still run
        root = Path(tmp)
        sqlite_ms, pg_ms = [], []
        for turn in range(args.turns):
            lite, pg = engine_ms_per_write(root / f"engine{turn}", args.engine_writes, database)
            sqlite_ms.append(lite)
            pg_ms.append(pg)
        ratios = [pg / lite for pg, lite in zip(pg_ms, sqlite_ms, strict=True)]
        print(f"one write, one thread ({args.engine_writes} writes a run, median of {args.turns} turns):")
        print(f"  SQLite index      {statistics.median(sqlite_ms):7.2f} ms")
        print(f"  PostgreSQL index  {statistics.median(pg_ms):7.2f} ms")
        print(
            f"  PostgreSQL / SQLite: {statistics.median(ratios):.2f}x  (target <= 1.5x;"
            f" turns {min(ratios):.2f}-{max(ratios):.2f}x)"
        )

        home = root / "cluster"
        gm = Gitmem.open(home, database=database)
        workspace = gm.catalog.create_workspace("cluster")
        _, secret = gm.catalog.create_api_key(workspace.id, "bench", role="admin")
        store_ids = [gm.create_store(workspace.id, f"s{s}").id for s in range(STORES)]
        gm.close()
        rates: dict[tuple[int, int, str], list[float]] = {}
        for turn in range(args.turns):
            for count in (1, 3):
                with nodes(home, database, count) as urls:
                    # warm every store on every node (connections, caches)
                    writes_per_second(urls, secret, store_ids, STORES * len(urls), f"warm{turn}-{count}")
                    for clients in CLIENTS:
                        for routing in ROUTINGS if count > 1 else ROUTINGS[:1]:
                            run = f"r{turn}-{count}-{clients}-{routing.replace(' ', '-')}"
                            rate = writes_per_second(urls, secret, store_ids, args.writes, run, clients, routing)
                            rates.setdefault((count, clients, routing), []).append(rate)
        print(f"\n{STORES} stores, {args.writes} writes a run (median of {args.turns} turns), writes/s:")
        print(
            f"  {'client threads':<16}{'routing':<12}{'one node':>10}{'three nodes':>13}   three / one (target >= 1.3x)"
        )
        for clients in CLIENTS:
            one = rates[(1, clients, ROUTINGS[0])]
            for routing in ROUTINGS:
                three = rates[(3, clients, routing)]
                gains = [b / a for a, b in zip(one, three, strict=True)]
                print(
                    f"  {clients:<16}{routing:<12}{statistics.median(one):10.1f}{statistics.median(three):13.1f}"
                    f"   {statistics.median(gains):.2f}x  (turns {min(gains):.2f}-{max(gains):.2f}x)"
                )
        print("\n(timings on a shared machine are noisy: compare the ratios)")


if __name__ == "__main__":
    main()
