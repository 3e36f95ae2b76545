"""A background round is claimed once an interval across every node (gitmem/db/jobs.py): nodes asking at
the same moment get one yes between them, none again within the interval, one after it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gitmem.db import Database, open_database
from gitmem.db.jobs import claim_round

NODES = 3
EVERY = 60.0
T0 = 1_800_000_000.0  # a wall-clock time, handed to every claim


def claims(nodes: list[Database], at: float) -> int:
    """How many of the nodes, asking at once at ``at``, were told to run the round."""
    told: list[bool] = []
    start = threading.Barrier(len(nodes))

    def ask(i: int) -> None:
        start.wait()
        told.append(claim_round(nodes[i], "retention", EVERY, f"node-{i}", at=at))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(nodes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(told)


@pytest.fixture(params=["sqlite", "postgresql"])
def nodes(request: pytest.FixtureRequest, tmp_path: Path) -> list[Database]:
    """Three nodes' connections to one database (SQLite: three processes' view of one file)."""
    if request.param == "sqlite":
        return [open_database(None, tmp_path / "catalog.sqlite3") for _ in range(NODES)]
    url: str = request.getfixturevalue("postgres_url")
    return [open_database(url, tmp_path / "unused.sqlite3") for _ in range(NODES)]


def test_a_round_is_claimed_once_an_interval(nodes: list[Database]) -> None:
    assert claims(nodes, T0) == 1
    assert claims(nodes, T0 + EVERY * 0.5) == 0  # within the interval: nobody
    assert claims(nodes, T0 + EVERY * 0.89) == 0  # timers drift: due after 0.9 of it, not before
    assert claims(nodes, T0 + EVERY * 0.9) == 1
    assert claims(nodes, T0 + EVERY * 5) == 1  # after a long pause, still one round, not the missed ones
