"""gitmem over HTTP beside a naive server, side by side on loopback, in one run; it prints ratios.

    python -m bench.http [--notes 2000] [--rounds 3] [--quick] [--settle 10] [--workers 1] [--json FILE]

Two real servers on free 127.0.0.1 ports, each with a fresh temporary home: ``gitmem serve`` and the
naive server of ``bench._naive`` (a minimal FastAPI app on the same uvicorn, loop and parser: a note
is a file written, flushed and renamed, plus a SQLite row, under one lock, no versions). The same
clients (one ``httpx.Client`` per thread, keep-alive) drive both, phase by phase, ``--rounds`` times
(each server's median round is shown: one run swings by a third on a busy machine), alternating which
server goes first, and each server idle again before the next phase starts (``settle``: what gitmem
packs in the background after a phase would otherwise slow the naive server's next one):

- writes (create a ~310-byte note in one of 100 folders) with 1, 8 and 32 clients on one store, and 8
  clients each on its own store: writes/s, p50, p99;
- reads (GET a note with its content) with 8 clients;
- a full listing of the store (pages of 1,000);
- disk: the store's folder at least ``--settle`` seconds after its last write, against the notes' raw bytes;
- each server's CPU time per request (Linux), which a busy machine disturbs far less than wall time.

The timings depend on the machine; the ratios (gitmem / naive) are what to compare between runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench._together import run_together
from bench.words import WORDS

NOTE_BYTES = 310
FOLDERS = 100
QUIET_ENV = {
    "GITMEM_RATE_LIMIT_RPS": "0",
    "GITMEM_PRUNE_INTERVAL": "0",
    "GITMEM_DREAM_RUNNER": "off",
    "GITMEM_LOG_LEVEL": "WARNING",
}


@dataclass
class Server:
    name: str
    base_url: str
    key: str
    data: Path
    proc: subprocess.Popen[bytes]
    store_dir: Callable[[str], Path]


@dataclass(frozen=True)
class Run:
    """One phase on one server: requests done, wall time, per-request latencies (seconds)."""

    count: int
    seconds: float
    latencies: list[float]

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def note_text(i: int, rng: random.Random) -> str:
    words = [f"Note {i}."]
    while sum(len(w) + 1 for w in words) < NOTE_BYTES:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:NOTE_BYTES]


# -- servers ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(cmd: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    root = str(Path(__file__).resolve().parent.parent)
    env = {
        **os.environ,
        **QUIET_ENV,
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, *cmd, str(port)], env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT
        )
    return proc, f"http://127.0.0.1:{port}"


def _wait_healthy(proc: subprocess.Popen[bytes], base_url: str, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{base_url} exited:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{base_url} did not become healthy:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def servers(tmp: Path, workers: int = 1) -> Iterator[tuple[Server, Server]]:
    """``gitmem serve`` (it makes its admin key on the empty home) and the naive server, both up."""
    home, naive_dir, naive_key = tmp / "gitmem-home", tmp / "naive", "naive-bench-key"
    g_proc, g_url = _start(
        ["-m", "gitmem.cli", "serve", "--workers", str(workers), "--port"],
        {"GITMEM_HOME": str(home)},
        tmp / "gitmem.log",
    )
    n_proc, n_url = _start(
        ["-m", "bench._naive"], {"NAIVE_DIR": str(naive_dir), "NAIVE_KEY": naive_key}, tmp / "naive.log"
    )
    try:
        _wait_healthy(g_proc, g_url, tmp / "gitmem.log")
        _wait_healthy(n_proc, n_url, tmp / "naive.log")
        gitmem = Server(
            "gitmem",
            g_url,
            (home / "admin.key").read_text().strip(),
            home,
            g_proc,
            lambda store: home / "stores" / f"{store}.git",
        )
        naive = Server("naive", n_url, naive_key, naive_dir, n_proc, lambda store: naive_dir / store)
        yield gitmem, naive
    finally:
        for proc in (g_proc, n_proc):
            proc.terminate()
        for proc in (g_proc, n_proc):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- load ---------------------------------------------------------------------------------------------


Job = Callable[[httpx.Client], httpx.Response]  # one request, on a client of the driver's


def drive(server: Server, clients: int, jobs: list[Job], *, lanes: bool = False) -> Run:
    """Run ``jobs`` (each one request) from ``clients`` threads, each with its own keep-alive client:
    the next job to whichever thread is free, or with ``lanes`` thread ``t`` runs jobs ``t``,
    ``t + clients``, ... (the jobs of :meth:`Writer.jobs` on as many stores as clients: a store each)."""
    lock = threading.Lock()
    shared = iter(jobs)
    latencies: list[float] = []
    failures: list[str] = []

    def worker(t: int, ready: Callable[[], object]) -> None:
        queue = iter(jobs[t::clients]) if lanes else shared
        with httpx.Client(base_url=server.base_url, headers={"x-api-key": server.key}, timeout=120) as client:
            ready()
            while True:
                with lock:
                    job = next(queue, None)
                if job is None:
                    return
                began = time.perf_counter()
                response = job(client)
                took = time.perf_counter() - began
                with lock:
                    latencies.append(took)
                    if response.status_code >= 400:
                        failures.append(f"{response.status_code} {response.text[:200]}")

    elapsed = run_together(clients, worker)
    if failures:
        raise RuntimeError(f"{server.name}: {len(failures)} requests failed, e.g. {failures[0]}")
    return Run(len(latencies), elapsed, latencies)


def create_store(server: Server, name: str) -> str:
    response = httpx.post(f"{server.base_url}/v1/memory_stores", json={"name": name}, headers={"x-api-key": server.key})
    response.raise_for_status()
    store_id: str = response.json()["id"]
    return store_id


class Writer:
    """Write jobs for one server: distinct paths, ~310-byte texts; remembers ids and bytes written."""

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = {}
        self.raw_bytes: dict[str, int] = {}
        self.counter = 0
        self.rng = random.Random(7)
        self.lock = threading.Lock()

    def jobs(self, stores: list[str], count: int) -> list[Callable[[httpx.Client], httpx.Response]]:
        out = []
        for n in range(count):
            self.counter += 1
            i, store = self.counter, stores[n % len(stores)]
            body = {"path": f"/topic-{i % FOLDERS:02d}/note-{i:06d}.md", "content": note_text(i, self.rng)}
            out.append(self._job(store, body))
        return out

    def _job(self, store: str, body: dict[str, str]) -> Callable[[httpx.Client], httpx.Response]:
        def job(client: httpx.Client) -> httpx.Response:
            response = client.post(f"/v1/memory_stores/{store}/memories", json=body)
            if response.status_code == 200:
                with self.lock:
                    self.ids.setdefault(store, []).append(response.json()["id"])
                    self.raw_bytes[store] = self.raw_bytes.get(store, 0) + len(body["content"].encode())
            return response

        return job


def read_jobs(store: str, ids: list[str], count: int) -> list[Callable[[httpx.Client], httpx.Response]]:
    rng = random.Random(11)

    def get(note: str) -> Callable[[httpx.Client], httpx.Response]:
        return lambda client: client.get(f"/v1/memory_stores/{store}/memories/{note}")

    return [get(rng.choice(ids)) for _ in range(count)]


def list_all(server: Server, store: str) -> tuple[float, int]:
    """Seconds to page through the whole store 1,000 at a time, and how many notes came back."""
    with httpx.Client(base_url=server.base_url, headers={"x-api-key": server.key}, timeout=120) as client:
        began, page, seen = time.perf_counter(), None, 0
        while True:
            params = {"limit": 1000, **({"page": page} if page else {})}
            body = client.get(f"/v1/memory_stores/{store}/memories", params=params).raise_for_status().json()
            seen += len(body["data"])
            page = body.get("next_page")
            if not page:
                return time.perf_counter() - began, seen


@dataclass(frozen=True)
class Cpu:
    """CPU seconds (user + system) of a server: its own (its ``--workers`` processes included), and
    that of the ``git`` processes it ran (the packer's), which work in the background."""

    own: float
    git: float

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.own - other.own, self.git - other.git)

    def __truediv__(self, count: int) -> Cpu:
        return Cpu(self.own / count, self.git / count)


def cpu_seconds(pid: int) -> Cpu | None:
    """The CPU a process has used so far (see :class:`Cpu`), or None where /proc is missing. Unlike wall
    time, it hardly moves when other work shares the machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    own, git = (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick
    for task in tasks:
        with contextlib.suppress(OSError):  # a thread or child that has just ended
            for child in (task / "children").read_text().split():
                used = cpu_seconds(int(child))
                is_git = Path(f"/proc/{child}/comm").read_text().strip() == "git"
                if used is not None and is_git:
                    git += used.own + used.git
                elif used is not None:
                    own, git = own + used.own, git + used.git
    return Cpu(own, git)


def median_round(rounds: list[tuple[Run, Cpu | None]]) -> tuple[Run, Cpu | None]:
    """The round of median throughput (the higher of the two middle ones), with its CPU a request."""
    return sorted(rounds, key=lambda round_: round_[0].per_second)[len(rounds) // 2]


def settle(server: Server, at_least: float = 3.0, timeout: float = 30.0) -> None:
    """Wait until ``server`` is idle after a phase: at least ``at_least`` seconds (gitmem packs a store
    quiet for 2 s) and then until a second passes with under 10 ms of its CPU (its git children's
    included). Else what a phase left to do in the background (roll-ups, the quiet repack) would run
    during the other server's next phase and slow that one instead."""
    began = time.monotonic()
    samples: list[float] = []
    while time.monotonic() - began < timeout:
        used = cpu_seconds(server.proc.pid)
        if used is None:
            return
        samples.append(used.own + used.git)
        if time.monotonic() - began >= at_least and len(samples) > 4 and samples[-1] - samples[-5] < 0.01:
            return
        time.sleep(0.25)


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk (what ``du`` counts) below ``path``."""
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*"))


# -- the run ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http", description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=2000, help="notes written to the one store (and listed)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after the last write to measure disk")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few notes, short settle")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--workers", type=int, default=1, help="gitmem serve --workers (default 1, as the CLI's)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each phase; each server's median is shown")
    options = parser.parse_args(argv)
    if options.quick:
        options.notes, options.settle, options.rounds = 40, 0.2, 1
    n = options.notes

    rows: list[tuple[str, float, float, str, tuple[float, bool] | None]] = []
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-http-") as tmp, servers(Path(tmp), options.workers) as pair:
        writers = {s.name: Writer() for s in pair}
        main_store = {s.name: create_store(s, "bench") for s in pair}
        many = {s.name: [create_store(s, f"bench-{k}") for k in range(8)] for s in pair}
        order = 0

        def both(
            label: str,
            clients: int,
            make: Callable[[Server, int], list[Job]],
            count: int,
            goal: dict[str, tuple[float, bool]],
            lanes: bool = False,
        ) -> None:
            """The phase on both servers, ``--rounds`` times (``count`` requests shared among them), each
            round alternating who goes first; each server's median round is reported (its rate, latencies and
            CPU together: the CPU of the phase itself, not of the packing it leaves, which ``settle`` waits out)."""
            nonlocal order
            runs: dict[str, list[tuple[Run, Cpu | None]]] = {s.name: [] for s in pair}
            for round_ in range(options.rounds):
                in_round = count // options.rounds + (round_ < count % options.rounds)  # all count, none left over
                for server in pair if order % 2 == 0 else pair[::-1]:  # alternate who goes first
                    jobs = make(server, max(in_round, clients))
                    before = cpu_seconds(server.proc.pid)
                    run = drive(server, clients, jobs, lanes=lanes)
                    after = cpu_seconds(server.proc.pid)
                    runs[server.name].append((run, (after - before) / len(jobs) if after and before else None))
                    settle(server)
                order += 1
            (g, g_cpu), (nv, n_cpu) = (median_round(runs[name]) for name in ("gitmem", "naive"))
            rows.append((f"{label}: req/s", g.per_second, nv.per_second, "", goal.get("rate")))
            rows.append((f"{label}: p50 ms", g.quantile(0.5) * 1e3, nv.quantile(0.5) * 1e3, "", goal.get("p50")))
            rows.append((f"{label}: p99 ms", g.quantile(0.99) * 1e3, nv.quantile(0.99) * 1e3, "", None))
            if g_cpu and n_cpu and n_cpu.own > 0:
                note = f"+ {g_cpu.git * 1e3:.1f} ms in git's packer"
                rows.append((f"{label}: server CPU ms/req", g_cpu.own * 1e3, n_cpu.own * 1e3, note, None))

        share = {1: n // 5, 8: 2 * n // 5, 32: n - n // 5 - 2 * n // 5}
        # This round's milestones (issue 34); the goal under concurrency stays 0.8x.
        for clients, goal in ((1, {"rate": (0.5, True), "p50": (2.0, False)}), (8, {"rate": (0.6, True)}), (32, {})):
            both(
                f"write, {clients} client{'s' * (clients > 1)}, 1 store",
                clients,
                lambda s, k: writers[s.name].jobs([main_store[s.name]], k),
                share[clients],
                goal,
            )
        last_write = time.monotonic()  # to the store whose disk is measured
        both(
            "write, 8 clients, 8 stores",
            8,
            lambda s, k: writers[s.name].jobs(many[s.name], k),
            2 * n // 5,
            {"rate": (0.6, True)},
            lanes=True,  # each client writes its own store, as an agent writes its own memory
        )
        both(
            "read (GET), 8 clients",
            8,
            lambda s, k: read_jobs(main_store[s.name], writers[s.name].ids[main_store[s.name]], k),
            n * options.rounds,  # each round reads n notes
            {"rate": (0.8, True)},
        )

        listing, list_cpu = {}, {}
        for server in pair:
            before = cpu_seconds(server.proc.pid)
            times = [list_all(server, main_store[server.name]) for _ in range(3)]
            after = cpu_seconds(server.proc.pid)
            list_cpu[server.name] = (after - before).own / 3 if after and before else -1.0
            listing[server.name] = (statistics.median(t for t, _ in times), times[0][1])
        notes = listing["gitmem"][1]
        rows.append(
            (
                f"list {notes} notes (pages of 1,000) ms",
                listing["gitmem"][0] * 1e3,
                listing["naive"][0] * 1e3,
                f"{listing['gitmem'][0] * 1e6 / max(notes, 1):.0f} ms/1,000",
                None,
            )
        )
        if list_cpu["naive"] > 0:
            rows.append(
                (
                    "  the listing's server CPU ms",
                    list_cpu["gitmem"] * 1e3,
                    list_cpu["naive"] * 1e3,
                    f"{list_cpu['gitmem'] * 1e6 / max(notes, 1):.0f} ms/1,000",
                    None,
                )
            )

        time.sleep(max(0.0, last_write + options.settle - time.monotonic()))
        waited = time.monotonic() - last_write  # more than --settle when the phases after took longer
        gitmem, naive = pair
        store = main_store["gitmem"]
        raw = writers["gitmem"].raw_bytes[store]
        g_disk = disk_bytes(gitmem.store_dir(store))
        # the naive store is its folder plus the SQLite database it shares with the other stores
        n_disk = disk_bytes(naive.store_dir(main_store["naive"])) + sum(
            p.lstat().st_blocks * 512 for p in naive.data.glob("index.sqlite3*")
        )
        rows.append(
            (
                "disk of the store after its last write, MB",
                g_disk / 1e6,
                n_disk / 1e6,
                f"{waited:.0f} s after; raw content {raw / 1e6:.2f} MB; gitmem {g_disk / max(raw, 1):.1f}x raw",
                None,
            )
        )

    _print(rows, n)
    if options.json:
        options.json.write_text(
            json.dumps([{"measure": r[0], "gitmem": r[1], "naive": r[2], "note": r[3]} for r in rows], indent=2)
        )
    return 0


def _print(rows: list[tuple[str, float, float, str, tuple[float, bool] | None]], n: int) -> None:
    print(
        f"gitmem serve vs a naive file+SQLite server, same uvicorn, loopback; {n} notes of ~{NOTE_BYTES} B"
        f" in {FOLDERS} folders. Ratio = gitmem / naive (times: > 1 is slower)."
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'gitmem':>10}  {'naive':>10}  {'ratio':>7}  target")
    for label, g, nv, note, goal in rows:
        ratio = g / nv if nv else float("nan")
        target = ""
        if goal is not None:
            bound, higher = goal
            met = ratio >= bound if higher else ratio <= bound
            target = f"{'>=' if higher else '<='} {bound}x {'ok' if met else 'MISSED'}"
        print(f"{label:<{width}}  {g:>10.1f}  {nv:>10.1f}  {ratio:>6.2f}x  {target} {note}".rstrip())


if __name__ == "__main__":
    raise SystemExit(main())
