"""Three ``gitmem serve`` processes on one home and one PostgreSQL, driven by the official SDK spread
over all three: no update lost across nodes, a node SIGKILLed mid-write or mid-push loses no
acknowledged write and leaves no store locked, a revocation holds on every node at once, and a
retention round runs once across the cluster."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anthropic
import httpx
import pytest

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.postgres_schema import STORE_LOCK_TIMEOUT_SECONDS
from tests import REPO_ROOT, postgres
from tests.checks import git
from tests.server import _start, _stop, _wait_healthy, free_port

pytestmark = pytest.mark.slow

NODES = 3
WRITERS = 8


@dataclass
class Node:
    port: int
    proc: subprocess.Popen[bytes]
    log: IO[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    home: Path
    database_url: str
    admin: str
    workspace_id: str
    user_id: str
    user_token: str
    env: dict[str, str]
    nodes: list[Node] = field(default_factory=list)
    # Every client handed out, closed with the cluster: a killed node's errors put a client in a
    # reference cycle, and its sockets stayed open until some later test's gc.collect().
    clients: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def start(self, count: int = NODES) -> None:
        started = [self._launch() for _ in range(count)]
        for node in started:
            _wait_healthy(node.proc, node.url, 60.0, node.log)
        self.nodes += started

    def _launch(self) -> Node:
        port = free_port()
        log = tempfile.TemporaryFile()  # noqa: SIM115 - the server writes it until it stops
        return Node(port, _start(self.home, port, "gitmem.api.app:create_app_from_env", self.env, log), log)

    def kill(self, node: Node) -> None:
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(10)
        node.log.close()
        self.nodes.remove(node)

    def client(self, node: Node, secret: str | None = None) -> anthropic.Anthropic:
        client = anthropic.Anthropic(base_url=node.url, api_key=secret or self.admin, max_retries=0, timeout=60.0)
        return self.clients.enter_context(client)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env, "GITMEM_HOME": str(self.home)}
        return subprocess.run(
            [sys.executable, "-m", "gitmem.cli", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server = postgres.cluster()
    if server is None:
        pytest.skip(postgres.SKIP_REASON)
    url = server.fresh_database()
    home = tmp_path_factory.mktemp("cluster")
    gm = Gitmem.open(home, database=url)
    workspace = gm.catalog.create_workspace("cluster")
    _, admin = gm.catalog.create_api_key(workspace.id, "admin", role="admin")
    user, user_token = gm.catalog.create_user(workspace.id, "sam")
    gm.close()
    env = {"GITMEM_DATABASE": url, "GITMEM_PRUNE_INTERVAL": "1", "GITMEM_LOG_LEVEL": "WARNING"}
    found = Cluster(home, url, admin, workspace.id, user.id, user_token, env)
    found.start()
    yield found
    found.clients.close()
    for node in found.nodes:
        _stop(node.proc)
        node.log.close()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def append_line(
    clients: list[anthropic.Anthropic], store_id: str, memory_id: str, line: str, turn: int
) -> tuple[bool, int]:
    """Append ``line`` to the note with a precondition, through ``clients[turn]`` and the next ones if a
    node is gone; (whether it was acknowledged, the next turn). A write whose answer was lost (its node
    died) counts as unacknowledged, though it may have landed: then the line is there once."""
    while True:
        client = clients[turn % len(clients)]
        memories = client.beta.memory_stores.memories
        try:
            note = memories.retrieve(memory_id, memory_store_id=store_id, view="full")
            content = note.content or ""
            if line in content.splitlines():
                return False, turn  # an earlier attempt landed though its answer was lost
            memories.update(
                memory_id,
                memory_store_id=store_id,
                content=content + line + "\n",
                precondition={"type": "content_sha256", "content_sha256": sha(content)},
            )
            return True, turn
        except anthropic.ConflictError:
            continue  # another writer was first: read again
        except (anthropic.APIConnectionError, anthropic.InternalServerError):
            turn += 1  # that node is gone (or busy): the next one


def run_writers(
    cluster: Cluster, store_id: str, memory_id: str, rounds: int, between: Callable[[int, int], None] | None = None
) -> tuple[dict[int, list[str]], list[BaseException]]:
    acknowledged: dict[int, list[str]] = {w: [] for w in range(WRITERS)}
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        clients = [cluster.client(node) for node in list(cluster.nodes)]
        turn = w
        try:
            for i in range(rounds):
                line = f"writer {w} line {i}"
                done, turn = append_line(clients, store_id, memory_id, line, turn)
                if done:
                    acknowledged[w].append(line)
                if between is not None:
                    between(w, i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return acknowledged, errors


def make_store(cluster: Cluster, name: str) -> tuple[str, str]:
    client = cluster.client(cluster.nodes[0])
    store = client.beta.memory_stores.create(name=name)
    note = client.beta.memory_stores.memories.create(store.id, path="/log.md", content="")
    return store.id, note.id


def versions_of(cluster: Cluster, store_id: str, memory_id: str) -> int:
    client = cluster.client(cluster.nodes[-1])
    return sum(1 for _ in client.beta.memory_stores.memory_versions.list(store_id, memory_id=memory_id, limit=100))


def test_eight_writers_through_three_nodes_lose_no_update(cluster: Cluster) -> None:
    store_id, memory_id = make_store(cluster, "contended")
    acknowledged, errors = run_writers(cluster, store_id, memory_id, rounds=3)
    assert errors == []
    lines = [line for own in acknowledged.values() for line in own]
    assert len(lines) == WRITERS * 3  # no node died: every write was acknowledged
    for node in cluster.nodes:  # every node reads the same note
        content = cluster.client(node).beta.memory_stores.memories.retrieve(memory_id, memory_store_id=store_id)
        assert sorted(content.content.splitlines()) == sorted(lines)  # type: ignore[union-attr]
    assert versions_of(cluster, store_id, memory_id) == 1 + len(lines)  # one version per acknowledged write


def test_a_key_revoked_on_one_node_is_refused_by_another_within_a_second(cluster: Cluster) -> None:
    gm = Gitmem.open(cluster.home, database=cluster.database_url)  # node 1's catalog: the same database
    try:
        key, secret = gm.catalog.create_api_key(cluster.workspace_id, "short-lived", role="admin")
        third = cluster.nodes[2]
        assert httpx.get(f"{third.url}/v1/memory_stores", headers={"x-api-key": secret}).status_code == 200
        gm.catalog.revoke(key.id)
        revoked = time.monotonic()
        while httpx.get(f"{third.url}/v1/memory_stores", headers={"x-api-key": secret}).status_code != 401:
            assert time.monotonic() - revoked < 1.0
            time.sleep(0.02)
    finally:
        gm.close()


def _last_rounds(cluster: Cluster) -> list[tuple[dt.datetime, float] | None]:
    """When each node last started a retention round, by its own clock (its report's end less the time
    its stores took), and how long that took: a round is reported where it ran."""
    seen: list[tuple[dt.datetime, float] | None] = []
    for node in cluster.nodes:
        answer = httpx.get(f"{node.url}/v1/maintenance/retention", headers={"x-api-key": cluster.admin})
        assert answer.status_code == 200, answer.text
        report = answer.json()
        if report["last_round_at"] is None:
            seen.append(None)
            continue
        took = sum(store["seconds"] for store in report["stores"])
        ended = dt.datetime.fromisoformat(report["last_round_at"])
        seen.append((ended - dt.timedelta(seconds=took), took))
    return seen


def test_a_retention_round_runs_once_across_the_cluster(cluster: Cluster) -> None:
    """Every node schedules a round a second (GITMEM_PRUNE_INTERVAL=1); the rounds of the three nodes
    together start one at a time, about an interval apart. Rounds of their own would start three an
    interval, a third of one apart on average. The times are the nodes' own, not when this test's
    polling saw a round (on a busy machine a poll can come half a second late)."""
    starts: set[dt.datetime] = set()
    deadline = time.monotonic() + 20
    while len(starts) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
        starts |= {seen[0] for seen in _last_rounds(cluster) if seen is not None}
    assert len(starts) >= 5, f"{len(starts)} rounds seen in 20 s"
    ordered = sorted(starts)[-4:]  # the first seen may have started before the test
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(ordered)]
    # Claimed rounds start at least 0.9 interval apart; three nodes' own rounds of a second each would
    # put three starts in every second: among four, some two at most a third of a second apart.
    assert min(gaps) > 0.45, gaps


def test_a_node_killed_mid_write_and_mid_push_loses_nothing_and_locks_nothing(cluster: Cluster, tmp_path: Path) -> None:
    store_id, memory_id = make_store(cluster, "killed")
    victim = cluster.nodes[0]
    killed = threading.Event()

    def kill_once(w: int, i: int) -> None:
        if w == 0 and i == 1 and not killed.is_set():
            killed.set()
            cluster.kill(victim)

    acknowledged, errors = run_writers(cluster, store_id, memory_id, rounds=3, between=kill_once)
    assert errors == [] and killed.is_set()
    survivor = cluster.client(cluster.nodes[0])
    content = survivor.beta.memory_stores.memories.retrieve(memory_id, memory_store_id=store_id).content or ""
    present = content.splitlines()
    for own in acknowledged.values():
        for line in own:
            assert present.count(line) == 1  # no acknowledged write lost, none doubled

    # A push through a node that dies while Git runs: the store is not left locked. (Last in this
    # file: nodes take seconds to start on a busy machine, so the killed ones are not restarted.)
    pusher = cluster.nodes[-1]
    clone = tmp_path / "clone"
    remote = f"http://x:{cluster.user_token}@127.0.0.1:{pusher.port}/v1/memory_stores/{store_id}.git"
    subprocess.run(["git", "clone", "-q", remote, str(clone)], check=True, capture_output=True)
    git(clone, "config", "user.name", "sam")
    git(clone, "config", "user.email", f"{cluster.user_id}@user.gitmem")
    for i in range(20):
        (clone / f"pushed-{i}.md").write_text(f"pushed {i}\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "pushed notes")
    with subprocess.Popen(["git", "-C", str(clone), "push", "-q", "origin", "main"], stderr=subprocess.PIPE) as push:
        time.sleep(0.3)
        cluster.kill(pusher)
        push_status = push.wait(60)

    started = time.monotonic()
    survivor.beta.memory_stores.memories.create(store_id, path="/after-the-kill.md", content="written")
    assert time.monotonic() - started < STORE_LOCK_TIMEOUT_SECONDS
    listed = {m.path for m in survivor.beta.memory_stores.memories.list(store_id, limit=100) if m.type == "memory"}
    if push_status == 0:  # acknowledged: its notes are there
        assert {f"/pushed-{i}.md" for i in range(20)} <= listed
    checked = cluster.cli("fsck", store_id)
    assert checked.returncode == 0, checked.stdout + checked.stderr
