"""Retention ("How long versions are kept"): 30 days, the two newest versions of a live note
always kept, deleted notes' and redacted versions by age alone; the purge really deletes.

Real Git and SQLite, time injected with FrozenClock. Helpers come from test_rewrite.py.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.pruner import PruneScheduler
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.rewrite.retention import (
    KEEP_ALL,
    PruneReport,
    prune_all,
    prune_store,
    retention_days,
)
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest
from gitmem.git import repository
from gitmem.git.pack import packing
from gitmem.model import Actor, Version
from tests.checks import assert_fsck_clean
from tests.unit.engine.rewrite.test_rewrite import (
    API,
    TASK,
    USER,
    _isolated_git,  # noqa: F401  (autouse fixture)
    all_versions,
    assert_index_consistent,
    clock,  # noqa: F401  (fixture)
    comparable,
    gm,  # noqa: F401  (fixture)
    new_store,
    notes_state,
    readable,
    repository_bytes,
    token,
)

ACTORS = [API, TASK, USER, None]


def _ninety_days(store: MemoryStore, clock: FrozenClock, seed: int = 7) -> None:  # noqa: F811
    """Creates, modifies, renames and deletes, a few a day for 90 simulated days."""
    rng = random.Random(seed)
    live: dict[str, str] = {}  # memory id -> path
    serial = 0
    for day in range(90):
        for _ in range(rng.randint(1, 4)):
            actor = rng.choice(ACTORS)
            roll = rng.random()
            if not live or (roll < 0.25 and len(live) < 14):
                serial += 1
                path = f"/{rng.choice(['people', 'projects', 'misc'])}/n{serial}.md"
                live[store.create(path, f"day {day} new {token()}", actor=actor).id] = path
            elif roll < 0.75:
                memory_id = rng.choice(sorted(live))
                store.update(memory_id, f"day {day} edit {token()}", actor=actor)
            elif roll < 0.9:
                memory_id = rng.choice(sorted(live))
                serial += 1
                live[memory_id] = f"/renamed/r{serial}.md"
                store.update(memory_id, path=live[memory_id], actor=actor)
            else:
                memory_id = rng.choice(sorted(live))
                store.delete(memory_id, actor=actor)
                del live[memory_id]
            clock.advance(minutes=rng.randint(1, 300))
        clock.advance(days=1)


def commit_signatures(repo_path: Path) -> dict[str, str]:
    """Version id -> the author and committer (names, emails, times) of the commit that holds it."""
    out = subprocess.run(
        ["git", "-C", str(repo_path), "log", "--date=raw", "--format=%an <%ae> %ad | %cn <%ce> %cd%x01%B%x00"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for entry in out.split("\x00"):
        signatures, _, message = entry.strip().partition("\x01")
        for line in message.splitlines():
            if line.startswith("Memory-Version: "):
                found[line.split(": ", 1)[1]] = signatures
    return found


def expected_survivors(versions: list[Version], live_ids: set[str], now: dt.datetime, days: int) -> set[str]:
    """The rule, computed from the list of versions alone."""
    cutoff = now - dt.timedelta(days=days)
    keep = {v.id for v in versions if v.created_at > cutoff}
    by_note = defaultdict(list)
    for v in versions:
        by_note[v.memory_id].append(v)
    for memory_id, history in by_note.items():
        if memory_id in live_ids:
            unredacted = sorted((v for v in history if v.redacted_at is None), key=lambda v: v.created_at)
            keep |= {v.id for v in unredacted[-2:]}
    return keep


def test_ninety_days_then_prune_keeps_exactly_what_the_rule_keeps(gm: Gitmem, clock: FrozenClock) -> None:  # noqa: F811
    store = new_store(gm)
    _ninety_days(store, clock)
    # a redacted version still young enough to stay, and one old enough to go
    versions = all_versions(store)
    newest = {n.version_id for n in notes_state(store)}
    old_one = next(v for v in versions if v.id not in newest and v.operation != "deleted")
    young_one = next(v for v in reversed(versions) if v.id not in newest and v.operation != "deleted")
    redact(store, old_one.id, USER)
    redact(store, young_one.id, USER)

    before = all_versions(store)
    notes_before = notes_state(store)
    live_ids = {n.id for n in notes_before}
    now = clock.now
    keep = expected_survivors(before, live_ids, now, 30)
    assert 0 < len(keep) < len(before) and young_one.id in keep and old_one.id not in keep
    dropped = [v for v in before if v.id not in keep]
    assert any(v.operation == "created" for v in dropped)  # notes whose first version went
    assert any(v.memory_id not in live_ids for v in dropped)  # deleted notes' versions
    kept_content = {v.content for v in before if v.id in keep and v.content}
    gone_content = {v.content for v in dropped if v.content} - kept_content
    data = repository_bytes(store.path)
    assert all(c.encode() in data for c in gone_content | kept_content)  # the grep sees them while kept

    signatures_before = commit_signatures(store.path)

    [report] = prune_all(gm)

    assert report.ok and report.retention == "30 days" and not report.skipped
    signatures_after = commit_signatures(store.path)
    assert set(signatures_after) == keep
    assert signatures_after == {v: signatures_before[v] for v in keep}  # authors, committers, times
    assert set(report.dropped) == {v.id for v in dropped}
    after = all_versions(store)
    assert {v.id for v in after} == keep
    by_id = {v.id: v for v in before}
    assert [comparable(v) for v in after] == [comparable(by_id[v.id]) for v in after]
    assert notes_state(store) == notes_before  # content, path, ids, created_at, updated_at
    data = repository_bytes(store.path)
    assert [c for c in gone_content if c.encode() in data] == []
    assert all(c.encode() in data for c in kept_content)
    assert report.blobs_purged and report.blobs_unpurged == []
    assert not [b for b in report.blobs_purged if readable(store.path, b)]
    assert all(readable(store.path, b) for b in report.blobs_shared)
    assert_fsck_clean(store.path)
    assert_index_consistent(store)
    # the notes whose created version went keep their created_at, and their next write is normal
    for note in notes_before:
        assert store.get(note.id).created_at == note.created_at
    survivor = notes_before[0]
    store.update(survivor.id, "after the prune")
    assert store.get(survivor.id).created_at == survivor.created_at

    [again] = prune_all(gm)  # nothing more to drop
    assert again.ok and again.dropped == []


def test_dry_run_reports_and_changes_nothing(gm: Gitmem, clock: FrozenClock) -> None:  # noqa: F811
    store = new_store(gm)
    _ninety_days(store, clock, seed=3)
    while not packing.pack(store.path, "full"):
        time.sleep(0.05)
    before = all_versions(store)
    keep = expected_survivors(before, {n.id for n in notes_state(store)}, clock.now, 30)
    tip = repository.read_tip(store.repo)
    files = {p: p.stat().st_mtime_ns for p in (store.path / "objects").rglob("*") if p.is_file()}

    [report] = prune_all(gm, dry_run=True)

    assert report.dry_run and report.ok
    assert set(report.dropped) == {v.id for v in before} - keep
    assert report.blobs_purged  # what would be purged
    assert repository.read_tip(store.repo) == tip
    assert {p: p.stat().st_mtime_ns for p in (store.path / "objects").rglob("*") if p.is_file()} == files
    assert [comparable(v) for v in all_versions(store)] == [comparable(v) for v in before]


def test_keep_all_and_a_longer_period(gm: Gitmem, clock: FrozenClock) -> None:  # noqa: F811
    store = new_store(gm)
    _ninety_days(store, clock, seed=11)
    ws = gm.catalog.store(store.id).workspace_id
    before = all_versions(store)
    tip = repository.read_tip(store.repo)

    gm.catalog.update_workspace_settings(ws, retention_days=KEEP_ALL)
    [report] = prune_all(gm)
    assert report.skipped == KEEP_ALL and report.dropped == [] and report.retention == KEEP_ALL
    assert repository.read_tip(store.repo) == tip and len(all_versions(store)) == len(before)

    gm.catalog.update_workspace_settings(ws, retention_days=60)
    keep = expected_survivors(before, {n.id for n in notes_state(store)}, clock.now, 60)
    [report] = prune_all(gm)
    assert report.retention == "60 days" and {v.id for v in all_versions(store)} == keep


def test_the_two_newest_versions_of_a_live_note_outlive_the_period(gm: Gitmem, clock: FrozenClock) -> None:  # noqa: F811
    store = new_store(gm)
    note = store.create("/rarely.md", "v1")
    store.update(note.id, "v2")
    store.update(note.id, "v3")
    gone = store.create("/gone.md", "will be deleted")
    store.update(gone.id, "edited")
    store.delete(gone.id)
    clock.advance(days=400)
    report = prune_store(store, days=30)
    assert report.ok
    survivors = all_versions(store)
    assert [v.content for v in survivors] == ["v2", "v3"]  # the deleted note left nothing behind
    assert store.get(note.id).content == "v3" and store.get(note.id).created_at == note.created_at
    assert_index_consistent(store)

    store.delete(note.id)  # now every version is old and belongs to a deleted note... except the delete
    clock.advance(days=31)
    assert prune_store(store, days=30).ok
    assert all_versions(store) == [] and notes_state(store) == []
    assert_fsck_clean(store.path)
    fresh = store.create("/rarely.md", "a new life")  # the store goes on after an empty history
    assert store.get(fresh.id).content == "a new life"
    assert_index_consistent(store)


def test_retention_setting_values() -> None:
    assert retention_days({}) == 30
    assert retention_days({"retention_days": 7}) == 7
    assert retention_days({"retention_days": "90"}) == 90
    assert retention_days({"retention_days": KEEP_ALL}) is None
    for bad in (-1, "forever", True, [3]):
        with pytest.raises(InvalidRequest):
            retention_days({"retention_days": bad})


def test_the_scheduler_prunes_on_its_own(gm: Gitmem, clock: FrozenClock) -> None:  # noqa: F811
    store = new_store(gm)
    note = store.create("/a.md", "one")
    for i in range(4):
        store.update(note.id, f"edit {i}")
    clock.advance(days=45)
    rounds: list[list[PruneReport]] = []
    scheduler = PruneScheduler(gm, interval=0.05, first_delay=0, on_reports=rounds.append).start()
    deadline = time.monotonic() + 20
    while not rounds and time.monotonic() < deadline:
        time.sleep(0.02)
    scheduler.stop(timeout=20)
    assert rounds and rounds[0][0].ok
    assert [v.content for v in all_versions(store)] == ["edit 2", "edit 3"]


def test_gitmem_prune_command(tmp_path: Path) -> None:
    from gitmem.cli import main

    real_now = dt.datetime.now(dt.UTC)
    home = tmp_path / "home"
    cli_gm = Gitmem(home, clock=FrozenClock(real_now - dt.timedelta(days=60)), fsync="never")
    store = new_store(cli_gm)
    note = store.create("/a.md", f"first {token()}", actor=Actor("api_actor", "apikey_cli"))
    for i in range(3):
        store.update(note.id, f"edit {i} {token()}")
    runner = CliRunner()

    dry = runner.invoke(main, ["--home", str(home), "prune", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert store.id in dry.stdout and "WOULD DROP" in dry.stdout and "dry run" in dry.stdout
    assert len(all_versions(store)) == 4

    done = runner.invoke(main, ["--home", str(home), "prune", store.id, "--workspace", "test"])
    assert done.exit_code == 0, done.output
    line = next(line for line in done.stdout.splitlines() if line.startswith(store.id))
    assert "pruned" in line and " 2 " in line
    assert len(all_versions(store)) == 2

    missing = runner.invoke(main, ["--home", str(home), "prune", "memstore_01NOSUCHSTORE00000000000000"])
    assert missing.exit_code == 1 and "not found" in missing.stderr
    assert runner.invoke(main, ["--home", str(home), "prune", "--workspace", "nope"]).exit_code == 1
    assert runner.invoke(main, ["--home", str(home), "prune", "--no-such-flag"]).exit_code == 2
