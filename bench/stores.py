"""What thousands of stores cost one server (issue 27), under ``prlimit --nofile=1024:1024``.

    python -m bench.stores                      # 10 workspaces x 1,000 stores
    python -m bench.stores --workspaces 2       # 2,000 stores

Fills a home with the stores (through the library: the API would only be slower), then runs a real
``uvicorn`` on it and prints: the server's open files and resident memory empty, filled, and after every
store was written and read once over HTTP; disk a store once it is at rest; a cold store's first read
against a warm read (medians, ratio); start-up with the stores against an empty home (ratio); 5xx
answers and dropped connections throughout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from gitmem.engine.gitmem import Gitmem
from tests.server import REAL_SERVER_ENV, serve

LIMIT = 1024
PRLIMIT = ["prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"]


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(home: Path, workspaces: int, per: int) -> tuple[str, list[str]]:
    gm = Gitmem.open(home, fsync="never")
    _, key = gm.catalog.create_api_key(gm.catalog.create_workspace("ws0").id, "admin")
    ids = []
    for w in range(workspaces):
        ws = gm.catalog.workspace_by_name(f"ws{w}") or gm.catalog.create_workspace(f"ws{w}")
        ids += [(ws.id, gm.create_store(ws.id, f"s{i:04}").id) for i in range(per)]
    keys = {ws_id: key if w == 0 else gm.catalog.create_api_key(ws_id, "admin")[1] for w, ws_id in _wss(ids)}
    gm.close()
    return "", [f"{keys[w]} {s}" for w, s in ids]


def _wss(ids: list[tuple[str, str]]) -> list[tuple[int, str]]:
    seen: list[str] = []
    for ws, _ in ids:
        if ws not in seen:
            seen.append(ws)
    return list(enumerate(seen))


def start_seconds(home: Path) -> float:
    began = time.perf_counter()
    with serve(home, env=REAL_SERVER_ENV, prefix=PRLIMIT):
        return time.perf_counter() - began


def disk_of(repo: Path) -> tuple[int, int]:
    """(allocated, apparent) bytes of a store's folder, directories included."""
    allocated = apparent = 0
    for root, dirs, files in os.walk(repo):
        for name in [*dirs, *files, "."] if root == str(repo) else [*dirs, *files]:
            st = os.lstat(os.path.join(root, name))
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return allocated, apparent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--per-workspace", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-stores-"))
    try:
        run(tmp, args.workspaces, args.per_workspace, args.threads)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path, workspaces: int, per: int, threads: int) -> None:
    empty_home, home = tmp / "empty", tmp / "full"
    Gitmem.open(empty_home, fsync="never").close()
    began = time.perf_counter()
    _, pairs = fill(home, workspaces, per)
    total = len(pairs)
    print(f"stores: {total} ({workspaces} workspaces x {per}), made in {time.perf_counter() - began:.0f} s")
    empty_start = statistics.median(start_seconds(empty_home) for _ in range(3))
    full_start = statistics.median(start_seconds(home) for _ in range(3))
    print(
        f"start-up: {full_start:.2f} s with {total} stores, {empty_start:.2f} s empty: {full_start / empty_start:.2f}x"
    )
    started: list[subprocess.Popen[bytes]] = []
    errors = {"5xx": 0, "dropped": 0}
    with serve(home, env=REAL_SERVER_ENV, prefix=PRLIMIT, started=started) as base_url:
        pid = started[-1].pid
        time.sleep(1)
        print(f"server empty:  {descriptors(pid)} open files, {rss_mb(pid):.0f} MB resident")

        def call(method: str, pair: str, path: str, **kw: object) -> float:
            key, store = pair.split()
            t = time.perf_counter()
            try:
                r = client.request(method, f"/v1/memory_stores/{store}{path}", headers={"x-api-key": key}, **kw)  # type: ignore[arg-type]
                if r.status_code >= 500:
                    errors["5xx"] += 1
            except httpx.TransportError:
                errors["dropped"] += 1
            return time.perf_counter() - t

        with httpx.Client(base_url=base_url, timeout=120, limits=httpx.Limits(max_connections=threads)) as client:
            t = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(
                    pool.map(lambda p: call("POST", p, "/memories", json={"path": "/a.md", "content": "a note"}), pairs)
                )
            print(
                f"filled (a note written to each) in {time.perf_counter() - t:.0f} s: "
                f"{descriptors(pid)} open files, {rss_mb(pid):.0f} MB resident"
            )
            t = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda p: call("GET", p, "/memories"), pairs))
                list(pool.map(lambda p: call("POST", p, "/memories", json={"path": "/b.md", "content": "b"}), pairs))
            print(
                f"after every store read and written once more ({time.perf_counter() - t:.0f} s): "
                f"{descriptors(pid)} open files, {rss_mb(pid):.0f} MB resident"
            )
            # Cold: stores touched long ago (out of the cache); warm: the same store read again at once.
            cold, warm = [], []
            for pair in pairs[: min(200, total // 2)]:
                cold.append(call("GET", pair, "/memories"))
                warm.append(statistics.median(call("GET", pair, "/memories") for _ in range(3)))
            c, w = statistics.median(cold), statistics.median(warm)
            print(f"read: cold {c * 1000:.1f} ms, warm {w * 1000:.1f} ms (medians of {len(cold)}): {c / w:.2f}x")
        time.sleep(12)  # past the idle close (5 s) and a quiet spell's consolidation
        print(f"idle 12 s later: {descriptors(pid)} open files, {rss_mb(pid):.0f} MB resident")
    sample = [home / "stores" / f"{p.split()[1]}.git" for p in pairs[:: max(1, total // 100)]]
    sizes = [disk_of(repo) for repo in sample]
    alloc = statistics.median(s[0] for s in sizes) / 1024
    apparent = statistics.median(s[1] for s in sizes) / 1024
    wal = sum(1 for repo in sample if (repo / "gitmem" / "index.sqlite3-wal").exists())
    print(
        f"disk a store at rest (two small notes): {alloc:.0f} KiB allocated (st_blocks, what du counts),"
        f" {apparent:.0f} KiB of file sizes (median of {len(sample)}; {wal} with a -wal left)"
    )
    print(f"5xx answers: {errors['5xx']}, dropped connections: {errors['dropped']}")


if __name__ == "__main__":
    main()
