"""What makes bench.http's ratios comparable between runs: the median round, and waiting for a server to
go idle before the other server's phase (gitmem packs in the background after a phase)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bench.http import Cpu, Job, Run, Server, cpu_seconds, drive, median_round, settle


def test_the_median_round_is_reported_with_its_own_cpu() -> None:
    slow, middle, fast = (Run(100, seconds, [0.01]) for seconds in (4.0, 2.0, 1.0))
    rounds: list[tuple[Run, Cpu | None]] = [(fast, Cpu(0.001, 0)), (slow, Cpu(0.003, 0)), (middle, Cpu(0.002, 0))]
    assert median_round(rounds) == (middle, Cpu(0.002, 0))


def test_settle_waits_until_a_server_has_stopped_working(tmp_path: Path) -> None:
    # A stand-in for a server still packing after a phase: it burns CPU for 1.5 s, then idles.
    busy = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", busy])
    try:
        server = Server("busy", "http://127.0.0.1:1", "", tmp_path, proc, lambda store: tmp_path / store)
        began = time.monotonic()
        settle(server, at_least=0.2, timeout=20)
        assert time.monotonic() - began >= 1.0  # it did not return while the CPU was still in use
        before = cpu_seconds(proc.pid)
        time.sleep(0.5)
        after = cpu_seconds(proc.pid)
        assert before is not None and after is not None
        assert (after - before).own < 0.05  # and once it returned, the process was idle
    finally:
        proc.kill()
        proc.wait()


def test_with_lanes_each_client_runs_its_own_jobs_in_order(tmp_path: Path) -> None:
    # "8 clients, 8 stores": job n goes to store n % 8, so client t must run jobs t, t + 8, ... (its store's).
    ran: dict[int, list[int]] = {}
    lock = threading.Lock()

    def job(n: int) -> Job:
        def run(_client: httpx.Client) -> httpx.Response:
            time.sleep(0.001)  # long enough that a shared queue would hand a lane's jobs to other threads
            with lock:
                ran.setdefault(threading.get_ident(), []).append(n)
            return httpx.Response(200)

        return run

    server = Server("none", "http://127.0.0.1:1", "", tmp_path, None, lambda store: tmp_path / store)  # type: ignore[arg-type]
    run = drive(server, 4, [job(n) for n in range(40)], lanes=True)
    assert run.count == 40
    assert sorted(ran.values()) == [list(range(t, 40, 4)) for t in range(4)]
    ran.clear()
    drive(server, 4, [job(n) for n in range(40)])  # the shared queue: every job still runs once
    assert sorted(n for jobs in ran.values() for n in jobs) == list(range(40))
