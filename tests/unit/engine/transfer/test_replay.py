"""The replay under an import: a refused version stops it after the ones before, and the same import
goes on from there once the cause is put right; batches land whole."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.journal import Journal
from gitmem.engine.transfer.replay import ImportStopped, Progress, run_import
from gitmem.engine.transfer.values import Incoming, Refused, StoreFields
from gitmem.git.commits import VersionRecord
from gitmem.model import Actor
from gitmem.rules.filters import load_filters

ANA = Actor("user_actor", "user_01ANAANAANAANAANAANAANAANA")
START = dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)


class Listed:
    """Versions given in a list, as an import's source."""

    key = "listed"

    def __init__(self, versions: list[Incoming]) -> None:
        self.items = versions

    def fields(self) -> StoreFields:
        return StoreFields("listed")

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:  # noqa: ARG002  the Source protocol's signature
        return len(self.items)

    def versions(self) -> Iterator[Incoming]:
        return iter(self.items)

    def refused(self) -> tuple[Refused, ...]:
        return ()


def version(n: int, path: str, content: str, operation: str = "created", memory: int | None = None) -> Incoming:
    when = START + dt.timedelta(minutes=n)
    record = VersionRecord(
        f"mem_{memory if memory is not None else n:026d}", f"memver_{n:026d}", operation,  # type: ignore[arg-type]
        path, None, None, ANA, when, when,
    )  # fmt: skip
    return Incoming(record, content if operation != "deleted" else None)


def history() -> list[Incoming]:
    out = [version(n, f"/notes/{n}.md", f"note {n}") for n in range(12)]
    out.append(version(12, "/notes/leak.md", "password = hunter2!!"))
    out += [
        version(n, f"/notes/{n - 13}.md", f"note {n - 13}, again", "modified", memory=n - 13) for n in range(13, 20)
    ]
    out.append(version(20, "/notes/0.md", "", "deleted", memory=0))
    return out


def test_a_refused_version_stops_the_import_and_the_same_import_goes_on_once_allowed(gm: Gitmem) -> None:
    ws = gm.catalog.create_workspace("listed")
    with pytest.raises(ImportStopped) as stopped:
        run_import(gm, ws.id, Listed(history()), batch=5)
    message = stopped.value.message
    assert message.startswith(f"version 13, memver_{12:026d} (/notes/leak.md), was refused: the content of")
    assert "The 12 versions before it are in memstore_" in message
    store_id = Journal(gm.home, "listed").store_id()
    assert store_id is not None
    assert len(gm.store(ws.id, store_id).versions(limit=100).items) == 12  # the batches before, whole
    allowed = Gitmem.open(gm.home, clock=gm.clock, filters=load_filters("", "password-assignment"))
    report = run_import(allowed, ws.id, Listed(history()), batch=5)
    assert (report.store_id, report.imported, report.skipped, report.resumed) == (store_id, 9, 12, True)
    store = allowed.store(ws.id, store_id)
    versions = list(reversed(store.versions(limit=100).items))
    assert [v.id for v in versions] == [v.record.version_id for v in history()]
    assert [v.created_at for v in versions] == [v.record.created_at for v in history()]
    assert {n.path for n in store.list(path_prefix="/notes/", limit=100).items} == {
        f"/notes/{n}.md" for n in range(1, 12)
    } | {"/notes/leak.md"}


def test_a_version_that_collides_or_repeats_an_id_is_refused(gm: Gitmem) -> None:
    ws = gm.catalog.create_workspace("listed")
    twin = [version(0, "/Notes.md", "a"), version(1, "/notes.md", "b")]
    with pytest.raises(ImportStopped, match=r"differs only in case from the memory at /Notes\.md"):
        run_import(gm, ws.id, Listed(twin), into=gm.create_store(ws.id, "twins").id)
    again = [version(0, "/a.md", "a"), version(0, "/b.md", "b", memory=1)]
    with pytest.raises(ImportStopped, match="comes twice"):
        run_import(gm, ws.id, Listed(again), into=gm.create_store(ws.id, "again").id)
