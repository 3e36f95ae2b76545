"""Benchmark: the catalog's operations on PostgreSQL against the same on SQLite, side by side.

    python -m bench.catalog_db [--ops 300] [--runs 3] [--database postgresql://...]

Without ``--database`` it starts the tests' throwaway PostgreSQL (tests/postgres.py; fsync off there,
as SQLite's ``synchronous`` is not comparable anyway). Three operations a request makes: authenticate a
key (one indexed read), look a store up (one indexed read), and a catalog write (a key made and revoked:
two transactions holding the catalog lock). Prints operations per second and PostgreSQL's cost as a
ratio of SQLite's; timings on a busy machine are noisy, the ratios less so.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gitmem.engine.gitmem import Gitmem


def _rate(op: Callable[[int], object], ops: int) -> float:
    started = time.perf_counter()
    for i in range(ops):
        op(i)
    return ops / (time.perf_counter() - started)


def _operations(gm: Gitmem) -> dict[str, Callable[[int], object]]:
    ws = gm.catalog.create_workspace("bench")
    _, secret = gm.catalog.create_api_key(ws.id, "reader")
    info = gm.create_store(ws.id, "notes")

    def write(i: int) -> object:
        key, _ = gm.catalog.create_api_key(ws.id, f"k{i}")
        return gm.catalog.revoke(key.id)

    return {
        "authenticate": lambda _i: gm.catalog.authenticate(secret),
        "store lookup": lambda _i: gm.get_store(ws.id, info.id),
        "key made + revoked": write,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catalog_db")
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database", default=None, help="a PostgreSQL URL (default: a throwaway server)")
    args = parser.parse_args(argv)
    url = args.database
    if url is None:
        from tests import postgres

        cluster = postgres.cluster()
        if cluster is None:
            print(postgres.SKIP_REASON)
            return 0
        url = cluster.fresh_database()
    with tempfile.TemporaryDirectory() as tmp:
        engines = {
            "sqlite": Gitmem.open(Path(tmp) / "a", fsync="never", database=""),
            "postgresql": Gitmem.open(Path(tmp) / "b", fsync="never", database=url),
        }
        ops = {name: _operations(gm) for name, gm in engines.items()}
        rates: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):  # interleaved, so load on the machine hits both alike
            for engine, table in ops.items():
                for op_name, op in table.items():
                    rates.setdefault((engine, op_name), []).append(_rate(op, args.ops))
        print(f"{'operation':<22}{'sqlite/s':>12}{'postgresql/s':>15}{'pg cost / sqlite cost':>24}")
        for op_name in ops["sqlite"]:
            lite = statistics.median(rates[("sqlite", op_name)])
            pg = statistics.median(rates[("postgresql", op_name)])
            print(f"{op_name:<22}{lite:>12.0f}{pg:>15.0f}{lite / pg:>24.2f}")
        for gm in engines.values():
            gm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
