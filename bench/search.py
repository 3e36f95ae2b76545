"""Search: latency over HTTP on a big store, what keeping the text index costs a write, and what the
costliest query a reader may send costs.

    python -m bench.search [--notes 10000] [--queries 300] [--writes 200] [--fsync always|never] [--quick]
    python -m bench.search --bounds [--notes 3000] [--postgres]

1. A store of N notes of 20 to 80 words drawn with Zipf frequencies (made in one commit, then
   indexed) served by a real uvicorn on 127.0.0.1; ``GET /search`` for a mix of queries (one word,
   two words, a phrase, a prefix, an OR, punctuation, and "the", which is in nearly every note)
   beside ``GET /memories?limit=20`` (a plain listing of the same page size) as the baseline. Target:
   search p50 <= 20 ms.
2. Updates to notes of that store, alternating rounds with the text index kept and with it switched off
   (the index's ``search_index.index`` made a no-op), in the same process. Target: <= 15% more.

3. ``--bounds`` (alone): the costliest queries the bounds allow (64 terms, 8 prefixes of 2 letters,
   in the shapes that cost most: ANDed groups of ORed common words and prefixes) beside a plain
   one-word query, and the red team's queries (one-letter prefixes, 10 x 20 to 64 x 64), which are
   now refused. Each over HTTP, p50 of a few runs, with its status: a 400 past the budget
   (``GITMEM_SEARCH_BUDGET``, 1 s) is the budget at work. ``--postgres``: the home's catalog and
   indexes in a throwaway PostgreSQL (tests/postgres.py).

Timings on a shared machine are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from gitmem import ids
from gitmem.clock import system_clock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index import search_table as search_index
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, author_for, format_message
from gitmem.model import Note
from gitmem.rules import paths
from tests.server import serve

WORDS = [
    "memory",
    "agent",
    "prefers",
    "email",
    "meeting",
    "project",
    "deadline",
    "review",
    "design",
    "deploy",
    "customer",
    "support",
    "invoice",
    "schedule",
    "follow",
    "remember",
    "context",
    "summary",
    "decision",
    "owner",
    "release",
    "bug",
    "feature",
    "budget",
    "quarter",
    "risk",
    "metric",
    "goal",
    "weekly",
    "status",
    "terraform",
    "staging",
    "kubernetes",
    "postgres",
    "latency",
    "oncall",
    "runbook",
    "rollback",
    "canary",
]
QUERIES = [
    "deploy",
    "terraform staging",
    '"weekly status"',
    "kube*",
    "postgres OR oncall",
    "rollback -canary",
    "customer: invoice/budget",
    "note-00042",
    "zzzznothing",
    "the",
]


def _vocabulary() -> tuple[list[str], list[float]]:
    """Words with Zipf frequencies, as in prose: "the" in nearly every note, the topical words from
    more than half of the notes down to a few in a hundred, a long tail of rare words."""
    rng = random.Random(3)
    tail = ["".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(rng.randint(4, 9))) for _ in range(3000)]
    vocab = ["the", *tail]
    for k, word in enumerate(WORDS):
        vocab.insert(5 * (k + 1), word)
    return vocab, [1 / (rank + 1) for rank in range(len(vocab))]


VOCABULARY, FREQUENCIES = _vocabulary()


def _text(rng: random.Random, i: int) -> str:
    words = rng.choices(VOCABULARY, FREQUENCIES, k=rng.randint(20, 80))
    return f"# Note {i}\n" + " ".join(words) + f"\nref note-{i:05d}\n"


def build_store(gm: Gitmem, workspace_id: str, n: int) -> tuple[MemoryStore, float]:
    """N notes in one commit (the fast way to a big store), then the seconds the index takes."""
    info = gm.create_store(workspace_id, "bench")
    store = gm.store(workspace_id, info.id)
    rng = random.Random(7)
    now = system_clock()
    records, changes = [], {}
    for i in range(n):
        path = f"/topic-{i % 100:02d}/note-{i:05d}.md"
        data = _text(rng, i).encode()
        changes[paths.git_path(path)] = store.repo.create_blob(data)
        records.append(
            VersionRecord(
                ids.new_id(ids.MEMORY),
                ids.new_id(ids.VERSION),
                "created",
                path,
                hashlib.sha256(data).hexdigest(),
                len(data),
                None,
                now,
                now,
            )
        )
    tree = repository.tree_with(store.repo, None, changes)
    commit = repository.commit(
        store.repo, tree=tree, parent=None, author=author_for(None, now), message=format_message(records)
    )
    assert repository.compare_and_swap(store.repo, None, commit)
    started = time.perf_counter()
    store.index.catch_up()
    return store, time.perf_counter() - started


def _p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def time_requests(client: httpx.Client, path: str, params: list[dict[str, str]], rounds: int) -> list[float]:
    for p in params[:5]:  # warm up
        client.get(path, params=p).raise_for_status()
    out = []
    for i in range(rounds):
        started = time.perf_counter()
        client.get(path, params=params[i % len(params)]).raise_for_status()
        out.append((time.perf_counter() - started) * 1000)
    return out


def time_writes(store: MemoryStore, n: int, note_ids: list[str], kept: bool, rng: random.Random) -> list[float]:
    original = search_index.index
    if not kept:
        search_index.index = lambda *args, **kwargs: None
    try:
        out = []
        for _ in range(n):
            memory_id = rng.choice(note_ids)
            started = time.perf_counter()
            store.update(memory_id, content=_text(rng, rng.randint(0, 10**6)))
            out.append((time.perf_counter() - started) * 1000)
        return out
    finally:
        search_index.index = original


def _shapes() -> dict[str, str]:
    """The costliest queries within the bounds, made of the vocabulary's commonest words and of the
    2-letter prefixes that stand for the most of its text, and the red team's, past them."""
    common = [w for w in VOCABULARY if len(w) > 2][:64]
    mass: dict[str, float] = {}
    for word, frequency in zip(VOCABULARY, FREQUENCIES, strict=True):
        mass[word[:2]] = mass.get(word[:2], 0.0) + frequency
    prefixes = [p + "*" for p in sorted(mass, key=mass.__getitem__, reverse=True)[:8]]
    letters = "abcdefghijklmnopqrstuvwxyz"

    def red_team(groups: int, per: int) -> str:
        return " ".join(" OR ".join(f"{letters[(g + i) % 26]}*" for i in range(per)) for g in range(groups))

    return {
        "plain: deploy": "deploy",
        "64 common words ORed": " OR ".join(common),
        "16 x 4 of the 8 commonest words": " ".join(
            " OR ".join(common[(4 * g + k) % 8] for k in range(4)) for g in range(16)
        ),
        "32 x 2 of the 8 commonest words": " ".join(
            " OR ".join(common[(2 * g + k) % 8] for k in range(2)) for g in range(32)
        ),
        "8 commonest 2-letter prefixes ORed": " OR ".join(prefixes),
        "8 x (a prefix OR 7 words)": " ".join(" OR ".join([prefixes[g], *common[7 * g : 7 * g + 7]]) for g in range(8)),
        "16 x 4, 8 of them prefixes": " ".join(
            " OR ".join(([prefixes[g]] if g < 8 else []) + [common[(4 * g + k) % 8] for k in range(4 - (g < 8))])
            for g in range(16)
        ),
        "refused: 10 x 20 one-letter prefixes": red_team(10, 20),
        "refused: 30 x 20 one-letter prefixes": red_team(30, 20),
        "refused: 64 x 64 one-letter prefixes": red_team(64, 64),
        # 40,000 words (PostgreSQL's stack overflow) fit an MCP call, not a GET's line: 1,500 do.
        "refused: an OR group of 1,500 words": " OR ".join(f"w{i}" for i in range(1500)),
    }


def run_bounds(home: Path, notes: int, database: str | None) -> None:
    gm = Gitmem.open(home, fsync="never", database=database)
    ws = gm.catalog.create_workspace("bench")
    _, key = gm.catalog.create_api_key(ws.id, "bench")
    store, index_seconds = build_store(gm, ws.id, notes)
    engine = "PostgreSQL" if database else "SQLite"
    print(f"{notes} notes indexed on {engine} in {index_seconds:.2f} s; search budget 1 s (GITMEM_SEARCH_BUDGET)")
    env = {"GITMEM_DATABASE": database} if database else None
    with serve(home, env=env) as base, httpx.Client(base_url=base, headers={"x-api-key": key}, timeout=60) as client:
        route = f"/v1/memory_stores/{store.id}/search"
        rows = []
        for label, query in _shapes().items():
            times, status = [], 0
            for _ in range(5):
                started = time.perf_counter()
                answer = client.get(route, params={"q": query, "limit": 20})
                times.append((time.perf_counter() - started) * 1000)
                status = answer.status_code
            rows.append((label, statistics.median(times), status))
    plain = rows[0][1]
    print(f"\nthe costliest queries a reader may send, over HTTP, {notes} notes (p50 of 5)")
    for label, ms, status in rows:
        print(f"  {label:40} {ms:8.2f} ms  x{ms / plain:7.1f}  {status}")
    allowed = [ms for label, ms, status in rows[1:] if not label.startswith("refused")]
    print(f"  the worst allowed query / the plain one: x{max(allowed) / plain:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--quick", action="store_true", help="1,000 notes, 90 queries, 60 writes")
    parser.add_argument("--bounds", action="store_true", help="only the costliest queries (default 3,000 notes)")
    parser.add_argument("--postgres", action="store_true", help="with --bounds: on a throwaway PostgreSQL")
    args = parser.parse_args()
    if args.quick:
        args.notes, args.queries, args.writes = 1000, 90, 60
    home = Path(tempfile.mkdtemp(prefix="gitmem-bench-search-"))
    try:
        if args.bounds:
            database = None
            if args.postgres:
                from tests import postgres

                cluster = postgres.cluster()
                assert cluster is not None, postgres.SKIP_REASON
                database = cluster.fresh_database()
            run_bounds(home, args.notes if args.notes != 10_000 else 3000, database)
        else:
            run(home, args.notes, args.queries, args.writes, args.fsync == "always")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(home: Path, notes: int, queries: int, writes: int, fsync: bool) -> None:
    gm = Gitmem.open(home, fsync="always" if fsync else "never")
    ws = gm.catalog.create_workspace("bench")
    _, key = gm.catalog.create_api_key(ws.id, "bench")
    store, index_seconds = build_store(gm, ws.id, notes)
    print(f"{notes} notes indexed (notes, versions and text) in {index_seconds:.2f} s")

    with serve(home) as base, httpx.Client(base_url=base, headers={"x-api-key": key}, timeout=30) as client:
        route = f"/v1/memory_stores/{store.id}"
        search_ms = time_requests(client, route + "/search", [{"q": q} for q in QUERIES], queries)
        list_ms = time_requests(client, route + "/memories", [{"limit": "20"}], queries)
        per_query = {q: statistics.median(time_requests(client, route + "/search", [{"q": q}], 15)) for q in QUERIES}
        hits = {q: len(client.get(route + "/search", params={"q": q, "limit": 100}).json()["data"]) for q in QUERIES}
    search_p50, list_p50 = statistics.median(search_ms), statistics.median(list_ms)
    print(f"\nsearch over HTTP, {notes} notes, {queries} requests (one client, keep-alive)")
    print(
        f"  search   p50 {search_p50:6.2f} ms  p99 {_p(search_ms, 0.99):6.2f} ms   target p50 <= 20 ms: "
        f"{'met' if search_p50 <= 20 else 'NOT met'}"
    )
    print(f"  listing  p50 {list_p50:6.2f} ms  p99 {_p(list_ms, 0.99):6.2f} ms   (GET /memories?limit=20)")
    print(f"  ratio search / listing p50: {search_p50 / list_p50:.2f}")
    for q, ms in per_query.items():
        print(f"    {q!r:32} p50 {ms:6.2f} ms  ({hits[q]} hits, at most 100)")

    rng = random.Random(11)
    note_ids = [n.id for n in store.list(limit=1000).items if isinstance(n, Note)]
    kept: list[float] = []
    off: list[float] = []
    rounds = 10
    for _ in range(rounds):  # alternate, so drift on a shared machine falls on both sides
        kept += time_writes(store, writes // rounds, note_ids, True, rng)
        off += time_writes(store, writes // rounds, note_ids, False, rng)
    kept_p50, off_p50 = statistics.median(kept), statistics.median(off)
    ratio = kept_p50 / off_p50
    print(f"\nupdate latency, {writes} updates each way, fsync {'always' if fsync else 'never'}")
    print(f"  with the text index     p50 {kept_p50:6.2f} ms  p99 {_p(kept, 0.99):6.2f} ms")
    print(f"  without the text index  p50 {off_p50:6.2f} ms  p99 {_p(off, 0.99):6.2f} ms")
    print(f"  ratio: {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)   target <= +15%: {'met' if ratio <= 1.15 else 'NOT met'}")
    store.index.rebuild()  # the updates made without the text index leave it behind; not measured


if __name__ == "__main__":
    main()
