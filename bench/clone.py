"""Benchmark: clone a 10,000-note store over gitmem's smart HTTP, beside `git clone` of the same
repository from disk.

    python -m bench.clone [--notes 10000] [--runs 3]

The store is built with ``bench.prune.build`` (git fast-import writing exactly the engine's commits),
packed as the background packer would, and served by a real uvicorn on 127.0.0.1. Baselines, same
repository, same run: ``git clone --no-local file://…`` (the pack protocol, no HTTP) and a local
``git clone --no-hardlinks`` (a plain copy of the pack). Clones are ``--bare``: the checkout of
10,000 files costs the same whichever way the objects came, and would hide the transfer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.prune import build
from gitmem.engine.gitmem import Gitmem
from gitmem.git.pack import packing
from tests.server import serve


def _timed_clone(args: list[str], dest: Path, env: dict[str, str] | None = None) -> float:
    shutil.rmtree(dest, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run(["git", "clone", "-q", "--bare", *args, str(dest)], check=True, env=env, capture_output=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clone")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        gm = Gitmem.open(home, fsync="never")
        ws = gm.catalog.create_workspace("bench")
        _, secret = gm.catalog.create_api_key(ws.id, "bench", "read-only")
        store = gm.create_store(ws.id, "bench")
        repo = gm.repo_path(store.id)
        shutil.rmtree(repo)
        build(repo, options.notes, options.notes)
        packing.pack(repo, "full")
        pack_bytes = sum(p.stat().st_size for p in (repo / "objects" / "pack").glob("*.pack"))

        with serve(home, env={"GITMEM_PRUNE_INTERVAL": "0"}) as base:
            git_env = {
                **os.environ,
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {secret}",
                "GIT_TERMINAL_PROMPT": "0",
            }
            dest = Path(tmp) / "clone"
            rows = {
                "gitmem smart HTTP": [
                    _timed_clone([f"{base}/v1/memory_stores/{store.id}.git"], dest, git_env)
                    for _ in range(options.runs)
                ],
                "git, file:// (pack protocol)": [
                    _timed_clone(["--no-local", f"file://{repo}"], dest) for _ in range(options.runs)
                ],
                "git, local copy": [_timed_clone(["--no-hardlinks", str(repo)], dest) for _ in range(options.runs)],
            }

    baseline = statistics.median(rows["git, file:// (pack protocol)"])
    print(f"clone of a {options.notes}-note store (pack {pack_bytes / 2**20:.1f} MiB), median of {options.runs}:")
    print(f"{'how':32} {'seconds':>8} {'ratio':>7}")
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"{name:32} {median:8.2f} {median / baseline:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
