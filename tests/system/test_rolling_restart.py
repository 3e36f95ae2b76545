"""A rolling restart under write load (issue 32): three nodes on one home, each in turn sent SIGTERM,
waited for and started again (never all down at once), while 8 writers use the official SDK through a load balancer that
spreads requests over the nodes (and, as nginx does, tries the next node when one refuses to connect).

Every write the SDK returned is in the store afterwards (none lost), no answer was a 5xx but the 503
of a draining node (with ``Retry-After``), some requests were drained, and every call the SDK made
succeeded in the end: the drained ones were retried, and no retry found its write already made.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import anthropic
import httpx2

from tests import REPO_ROOT
from tests.apps import make_test_home
from tests.checks import memory
from tests.server import free_port, wait_healthy

WRITERS = 8
STOP_BOUND = 0.5 + 3 + 3  # GITMEM_DRAIN_SECONDS + GITMEM_STOP_TIMEOUT + the process's own exit, generously
NODE_ENV = {
    "GITMEM_DRAIN_SECONDS": "0.5",
    "GITMEM_STOP_TIMEOUT": "3",
    "GITMEM_RATE_LIMIT_RPS": "0",
    "GITMEM_PRUNE_INTERVAL": "0",
    "GITMEM_DREAM_RUNNER": "off",
    "GITMEM_WEBHOOKS": "off",
    "GITMEM_LOG_LEVEL": "WARNING",
}


class Node:
    def __init__(self, home: Path, log: Path) -> None:
        self.home, self.log, self.port = home, log, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **NODE_ENV, "GITMEM_HOME": str(self.home)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "uvicorn", "--factory", "gitmem.api.app:create_app_from_env"]
        command += ["--port", str(self.port), "--no-access-log", "--timeout-graceful-shutdown", "3"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_up(self) -> None:
        assert self.proc is not None
        wait_healthy(self.proc, f"http://127.0.0.1:{self.port}", log=lambda: self.log.read_text()[-3000:])

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


class Balancer(httpx2.BaseTransport):
    """Round robin over the nodes, one keep-alive pool each; a node that refuses the connection (it is
    down) is passed over for the next, since nothing reached it. Records every answer's status."""

    def __init__(self, ports: list[int], statuses: Counter[tuple[int, bool]], lock: threading.Lock) -> None:
        self.ports = ports
        self.pools = {port: httpx2.HTTPTransport() for port in ports}
        self.turn = itertools.cycle(range(len(ports)))
        self.statuses, self.lock = statuses, lock

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        first = next(self.turn)
        for step in range(len(self.ports)):
            port = self.ports[(first + step) % len(self.ports)]
            request.url = request.url.copy_with(port=port)
            try:
                response = self.pools[port].handle_request(request)
            except httpx2.ConnectError:
                continue
            with self.lock:
                self.statuses[(response.status_code, "retry-after" in response.headers)] += 1
            return response
        raise httpx2.ConnectError("every node refused the connection", request=request)

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()


def test_a_rolling_restart_loses_no_write_and_answers_no_5xx_but_draining_503s(tmp_path: Path) -> None:
    home = make_test_home(tmp_path / "home")
    nodes = [Node(home.path, tmp_path / f"node{n}.log") for n in range(3)]
    for node in nodes:
        node.start()
    for node in nodes:
        node.wait_up()
    statuses: Counter[tuple[int, bool]] = Counter()
    lock, stop = threading.Lock(), threading.Event()
    written: list[tuple[str, str]] = []  # (memory id, path) the SDK returned
    failures: list[BaseException] = []
    ports = [node.port for node in nodes]
    admin = anthropic.Anthropic(api_key=home.admin, base_url=f"http://127.0.0.1:{ports[0]}", max_retries=5)
    store_id = admin.beta.memory_stores.create(name="rolling").id

    def writer(number: int) -> None:
        transport = Balancer(ports, statuses, lock)
        client = anthropic.Anthropic(
            api_key=home.admin,
            base_url=f"http://127.0.0.1:{ports[0]}",
            max_retries=6,
            http_client=httpx2.Client(transport=transport, timeout=30),
        )
        with client:
            for n in itertools.count():
                if stop.is_set():
                    return
                path = f"/writer-{number}/{n}.md"
                try:
                    memory = client.beta.memory_stores.memories.create(store_id, path=path, content=f"note {n}")
                except BaseException as exc:  # any failure fails the test, below
                    failures.append(exc)
                    return
                with lock:
                    written.append((memory.id, path))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(written) < WRITERS and not failures:  # every writer under way before the first stop
            assert time.monotonic() < deadline, "the writers did not get going"
            time.sleep(0.02)
        # The rolling restart: each node SIGTERM, wait for its exit, start. One node at least serves
        # throughout: the last one stops only once the first is back (their starts overlap: a start
        # costs a second or two of CPU, and this keeps the test short).
        before = len(written)
        for number, node in enumerate(nodes):
            if number == len(nodes) - 1:
                nodes[0].wait_up()
            began = time.monotonic()
            assert node.stop() in (0, -signal.SIGTERM)
            assert time.monotonic() - began < STOP_BOUND  # the drain, the wait for writes in flight, a second
            node.start()
        for node in nodes:
            node.wait_up()
        assert len(written) > before, "no write was acknowledged during the restart"
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    try:
        assert not failures, failures[:3]
        assert not [s for s, _ in statuses if s >= 500 and s != 503], statuses
        assert statuses[(503, False)] == 0 and statuses[(503, True)] > 0, statuses  # drained, with Retry-After
        listed = {memory(m).id: m.path for m in admin.beta.memory_stores.memories.list(store_id, limit=100)}
        assert len(written) == len(set(written))
        assert {memory_id: path for memory_id, path in written}.items() <= listed.items()
    finally:
        admin.close()
        for node in nodes:
            node.stop()
