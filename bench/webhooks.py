"""Benchmark: what the webhook outbox adds to a note write, beside the same writes without it.

    python -m bench.webhooks [--writes 300] [--runs 3]

Three stores, same run, fsync as configured: a store object with no change listener (the baseline),
a store of a workspace with no webhooks (the listener asks one query), and one whose workspace
subscribes to note events (each write also writes its outbox row and delivery in the catalog).
Prints writes per second and the ratios to the baseline; timings on a busy machine are noisy, the
ratios less so.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.rules.policy import policy_for
from gitmem.webhooks.outbox import EVENT_TYPES, webhooks_for


def _rate(write: Callable[[int], object], writes: int) -> float:
    started = time.perf_counter()
    for i in range(writes):
        write(i)
    return writes / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        gm = Gitmem.open(Path(tmp) / "home")
        quiet = gm.catalog.create_workspace("quiet")
        loud = gm.catalog.create_workspace("loud")
        webhooks_for(gm).create(loud.id, "https://example.com/unused", list(EVENT_TYPES))
        bare_info = gm.create_store(quiet.id, "bare")
        bare = MemoryStore(
            gm.repo_path(bare_info.id),
            bare_info.id,
            clock=gm.clock,  # no listener at all
            policy=policy_for(bare_info.kind, gm.filters),
            codec=gm.codec_for(bare_info),
        )
        quiet_store = gm.store(quiet.id, gm.create_store(quiet.id, "quiet").id)
        loud_store = gm.store(loud.id, gm.create_store(loud.id, "loud").id)
        rates: dict[str, list[float]] = {"no listener": [], "no webhooks": [], "subscribed": []}
        for run in range(args.runs):  # interleaved, so load on the machine hits all three alike
            for name, store in (("no listener", bare), ("no webhooks", quiet_store), ("subscribed", loud_store)):

                def write(i: int, s: MemoryStore = store, r: int = run) -> object:
                    return s.create(f"/r{r}/n{i}.md", f"note {i}")

                rates[name].append(_rate(write, args.writes))
        base = statistics.median(rates["no listener"])
        for name, values in rates.items():
            rate = statistics.median(values)
            print(f"{name:12}  {rate:8.1f} writes/s  ratio to no listener {rate / base:5.2f}")
        bare.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
