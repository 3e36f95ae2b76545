"""What ``/metrics`` and JSON logs cost a request: ``gitmem serve`` with them off and on, side by side.

    python -m bench.metrics [--requests 1500] [--rounds 3] [--workers 1]

Three real servers on free 127.0.0.1 ports, each with a fresh temporary home: metrics off and text logs
(the default), metrics on (``GITMEM_METRICS_TOKEN``, prometheus_client's multi-process files), and
metrics on with ``GITMEM_LOG_FORMAT=json`` (one access line a request, to a file). The same phases
drive each in turn, the order rotating every round: writes (8 clients, one store each) and reads of a
note (8 clients). What is compared is each server's CPU time per request (its workers included),
which a busy machine disturbs far less than wall time, as a ratio to the server with metrics off;
then the CPU of one scrape of ``/metrics`` after the run, and what the request counter and latency
histogram alone cost a request (in the benchmark's process), against a read's CPU.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.http import Server, Writer, _start, _wait_healthy, cpu_seconds, create_store, drive, read_jobs

TOKEN = "bench-metrics-token"
VARIANTS: dict[str, dict[str, str]] = {
    "off": {},
    "metrics": {"GITMEM_METRICS_TOKEN": TOKEN},
    "metrics+json": {"GITMEM_METRICS_TOKEN": TOKEN, "GITMEM_LOG_FORMAT": "json"},
}


def _server(tmp: Path, name: str, env: dict[str, str], workers: int) -> Server:
    home = tmp / name
    proc, url = _start(
        ["-m", "gitmem.cli", "serve", "--workers", str(workers), "--port"],
        {"GITMEM_HOME": str(home), "GITMEM_LOG_LEVEL": "INFO", **env},
        tmp / f"{name}.log",
    )
    _wait_healthy(proc, url, tmp / f"{name}.log")
    return Server(name, url, (home / "admin.key").read_text().strip(), home, proc, lambda s: home / "stores" / s)


def _cpu_per_request(server: Server, clients: int, jobs: list[Callable[[httpx.Client], httpx.Response]]) -> float:
    before = cpu_seconds(server.proc.pid)
    drive(server, clients, jobs)
    time.sleep(0.2)  # let the last requests' bookkeeping (the access log) finish
    after = cpu_seconds(server.proc.pid)
    if before is None or after is None:
        raise SystemExit("this benchmark reads /proc (Linux)")
    return (after - before).own / len(jobs)


def _instruments_per_request(folder: Path, count: int = 50_000) -> float:
    """Seconds of CPU the request counter and latency histogram cost a request, in this process."""
    from gitmem import metrics

    folder.mkdir()
    metrics.enable(folder)
    route = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}"
    began = time.process_time()
    for _ in range(count):
        metrics.REQUESTS.labels("GET", route, "200").inc()
        metrics.REQUEST_SECONDS.labels("GET", route).observe(0.0004)
    return (time.process_time() - began) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1500, help="requests a phase and a server")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the order of servers rotates")
    parser.add_argument("--workers", type=int, default=1, help="gitmem serve --workers")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gitmem-bench-metrics-") as tmp_name:
        tmp = Path(tmp_name)
        servers = [_server(tmp, name, env, args.workers) for name, env in VARIANTS.items()]
        try:
            stores = {s.name: [create_store(s, f"bench-{n}") for n in range(8)] for s in servers}
            writers = {s.name: Writer() for s in servers}
            for s in servers:  # warm up: every store opened, every route's first request made
                drive(s, 8, writers[s.name].jobs(stores[s.name], 64))
            costs: dict[tuple[str, str], list[float]] = {}
            for round_no in range(args.rounds):
                order = servers[round_no % len(servers) :] + servers[: round_no % len(servers)]
                for s in order:
                    jobs = writers[s.name].jobs(stores[s.name], args.requests)
                    costs.setdefault(("writes", s.name), []).append(_cpu_per_request(s, 8, jobs))
                for s in order:
                    first = stores[s.name][0]
                    jobs = read_jobs(first, writers[s.name].ids[first], args.requests)
                    costs.setdefault(("reads", s.name), []).append(_cpu_per_request(s, 8, jobs))
            print(f"server CPU ms a request, median of {args.rounds} rounds, {args.requests} requests a phase")
            print(f"{'phase':8} {'off':>8} {'metrics':>16} {'metrics+json':>18}")
            for phase in ("writes", "reads"):
                base = statistics.median(costs[(phase, "off")])
                cells = [f"{base * 1e3:8.3f}"]
                for name in ("metrics", "metrics+json"):
                    value = statistics.median(costs[(phase, name)])
                    cells.append(f"{value * 1e3:8.3f} ({value / base:.3f}x)")
                print(f"{phase:8} " + " ".join(cells))
            scraped = servers[1]
            before = cpu_seconds(scraped.proc.pid)
            for _ in range(20):
                httpx.get(
                    f"{scraped.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}
                ).raise_for_status()
            after = cpu_seconds(scraped.proc.pid)
            if before is not None and after is not None:
                print(f"one scrape of /metrics: {(after - before).own / 20 * 1e3:.2f} ms of server CPU")
            per_request = _instruments_per_request(tmp / "instruments")
            read_cpu = statistics.median(costs[("reads", "off")])
            print(
                f"the middleware's two instruments alone (multi-process mode): {per_request * 1e6:.1f} us a request,"
                f" {per_request / read_cpu:.1%} of a read's server CPU"
            )
        finally:
            for s in servers:
                s.proc.terminate()
            for s in servers:
                s.proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
