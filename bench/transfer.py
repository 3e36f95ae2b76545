"""An import of a store's whole history through the API, against writing its notes one by one.

    python -m bench.transfer [--notes 2000] [--versions 10000] [--sample 500]
    python -m bench.transfer --notes 10000 --versions 50000      # the issue's size

A real uvicorn serves a source home holding one store of ``--notes`` notes and ``--versions`` versions
(made here through the batched replay, so that making it is quick; every note is created, then edited
in turns). Then, against that server:

  import      ``gitmem import --from-api`` as the library runs it: the versions listed through the
              official SDK (20 a page with their content), spooled, and replayed oldest first into a
              store of another home, a batch of 500 one pack and one move of ``main``;
  one by one  the simplest equivalent: the SDK writing the same versions one call each (``create``,
              then ``update``) into a new store on the server. Timed on ``--sample`` calls and
              projected to all the versions (it keeps no original times or actors; it is only the
              speed to beat).

Printed: seconds and versions a second for each, and the ratio (one by one / import).
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.api_source import ApiSource
from gitmem.engine.transfer.journal import Journal
from gitmem.engine.transfer.replay import Progress, run_import
from gitmem.engine.transfer.values import Incoming, Refused, StoreFields
from gitmem.git.commits import VersionRecord
from gitmem.model import Actor
from tests.server import REAL_SERVER_ENV, serve

ANA = Actor("user_actor", "user_01ANAANAANAANAANAANAANAANA")


def history(notes: int, versions: int) -> Iterator[Incoming]:
    """``notes`` notes created, then edited in turns up to ``versions`` versions, a second apart."""
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    for n in range(versions):
        note, edit = n % notes, n // notes
        when = start + dt.timedelta(seconds=n)
        content = f"# Note {note}\n\nEdit {edit}: what was learned, in a sentence or two of plain text.\n"
        record = VersionRecord(
            f"mem_{note:026d}", f"memver_{n:026d}", "created" if edit == 0 else "modified",
            f"/notes/{note // 100:03d}/{note:05d}.md", None, None, ANA, when, start + dt.timedelta(seconds=note),
        )  # fmt: skip
        yield Incoming(record, content)


class _Listed:
    """The synthetic history as an import's source (to make the source store quickly)."""

    def __init__(self, notes: int, versions: int) -> None:
        self.notes, self.count = notes, versions

    key = "bench"

    def fields(self) -> StoreFields:
        return StoreFields("bench-source")

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:  # noqa: ARG002  the Source protocol's signature
        return self.count

    def versions(self) -> Iterator[Incoming]:
        return history(self.notes, self.count)

    def refused(self) -> tuple[Refused, ...]:
        return ()


def one_by_one(client: anthropic.Anthropic, notes: int, sample: int) -> float:
    """Seconds for ``sample`` SDK writes of the same history, one call each, into a new store."""
    store = client.beta.memory_stores.create(name="one-by-one")
    ids: dict[int, str] = {}
    began = time.perf_counter()
    for incoming in history(notes, sample):
        note = int(incoming.record.memory_id[4:])
        assert incoming.content is not None and incoming.record.path is not None
        if note in ids:
            client.beta.memory_stores.memories.update(ids[note], memory_store_id=store.id, content=incoming.content)
        else:
            made = client.beta.memory_stores.memories.create(
                store.id, path=incoming.record.path, content=incoming.content
            )
            ids[note] = made.id
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=500, help="SDK writes timed for the one-by-one baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-transfer-") as scratch:
        home = Path(scratch) / "source"
        gm = Gitmem.open(home, fsync="never")
        ws = gm.catalog.create_workspace("bench")
        _, key = gm.catalog.create_api_key(ws.id, "bench", role="admin")
        began = time.perf_counter()
        source = run_import(gm, ws.id, _Listed(args.notes, args.versions))
        made = time.perf_counter() - began
        print(f"source: {args.notes} notes, {source.versions} versions (made in {made:.1f} s by the batched replay)")
        with serve(home, env={**REAL_SERVER_ENV, "GITMEM_FSYNC": "always"}) as base_url:
            target = Gitmem.open(Path(scratch) / "target", fsync="always")
            target_ws = target.catalog.create_workspace("bench")
            began = time.perf_counter()
            with ApiSource.connect(base_url, key, source.store_id) as api_source:
                report = run_import(target, target_ws.id, api_source)
            imported = time.perf_counter() - began
            assert report.versions == args.versions
            sample = min(args.sample, args.versions)
            with anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=2) as client:
                sampled = one_by_one(client, args.notes, sample)
        projected = sampled / sample * args.versions
        print(
            f"import      {imported:8.1f} s  {args.versions / imported:8.0f} versions/s  (listing and replay, fsync on)"
        )
        print(
            f"one by one  {projected:8.1f} s  {sample / sampled:8.0f} versions/s  (projected from {sample} SDK writes)"
        )
        print(f"ratio (one by one / import): {projected / imported:.1f}x")


if __name__ == "__main__":
    main()
