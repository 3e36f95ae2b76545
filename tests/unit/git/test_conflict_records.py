"""The conflict record format (gitmem.git.conflict_records): what a commit on refs/conflicts/ says."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.git.conflict_records import (
    ConflictRecord,
    Resolution,
    ResolutionRecord,
    conflict_ref,
    format_message,
    memory_id_of,
    parse_message,
)
from gitmem.model import Actor

SHA = st.text("0123456789abcdef", min_size=64, max_size=64)
IDS = st.from_regex(r"[0-9A-Z]{26}", fullmatch=True)
TIMES = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1), timezones=st.just(dt.UTC))
ACTORS = st.one_of(
    st.none(),
    st.builds(Actor, st.sampled_from(["api_actor", "task_actor", "user_actor"]), IDS.map(lambda s: "x_" + s)),
)
PATHS = st.from_regex(r"/[a-z0-9 ._-]{1,20}(/[a-z0-9._-]{1,12}){0,3}", fullmatch=True).filter(
    lambda p: not p.endswith(" ")
)


@st.composite
def conflicts(draw: st.DrawFn) -> ConflictRecord:
    deleted = draw(st.booleans())
    by_blob = draw(st.booleans())
    return ConflictRecord(
        conflict_id="cnf_" + draw(IDS),
        memory_id="mem_" + draw(IDS),
        operation="deleted" if deleted else "modified",
        path=draw(PATHS),
        content_sha256=None if deleted else draw(SHA),
        content_size=None if deleted else draw(st.integers(0, 10**9)),
        base_sha256=None if by_blob else draw(SHA),
        base_blob=draw(SHA)[:40] if by_blob else None,
        winner_version="memver_" + draw(IDS),
        winner_sha256=draw(SHA),
        created_by=draw(ACTORS),
        created_at=draw(TIMES),
    )


@settings(max_examples=30)
@given(conflicts(), TIMES, ACTORS, st.booleans())
def test_a_conflict_record_reads_back_as_written(
    record: ConflictRecord, when: dt.datetime, by: Actor | None, redact: bool
) -> None:
    if redact:
        record = record.redacted(when, by)
    assert parse_message(format_message(record)) == record
    if redact:
        message = format_message(record)
        assert "Memory-Path" not in message and "SHA256" not in message and "Base-" not in message


@settings(max_examples=20)
@given(
    IDS, st.sampled_from(["winner", "loser", "merged"]), st.one_of(st.none(), IDS.map("memver_".__add__)), ACTORS, TIMES
)
def test_a_resolution_record_reads_back_as_written(
    cid: str, take: Resolution, version: str | None, by: Actor | None, when: dt.datetime
) -> None:
    record = ResolutionRecord("cnf_" + cid, take, version, by, when)
    assert parse_message(format_message(record)) == record


def test_messages_that_are_no_record_read_as_none() -> None:
    assert parse_message("modified /a.md\n\nMemory-Id: mem_1\nMemory-Version: memver_1\n") is None
    assert parse_message("conflict\n\nConflict-Id: cnf_1\nConflict-Operation: created\n") is None
    assert parse_message("conflict\n\nConflict-Id: cnf_1\nConflict-Operation: modified\n") is None  # no note
    assert parse_message("resolve\n\nConflict-Resolved: cnf_1\nConflict-Resolution: both\n") is None
    assert parse_message("") is None


def test_one_ref_per_note() -> None:
    assert conflict_ref("mem_01") == "refs/conflicts/mem_01"
    assert memory_id_of("refs/conflicts/mem_01") == "mem_01"
    for other in ("refs/heads/main", "refs/conflicts/", "refs/conflicts/a/b", "refs/reviews/main"):
        assert memory_id_of(other) is None


def test_a_retry_is_the_same_writer_text_path_and_base() -> None:
    base = ConflictRecord(
        "cnf_1", "mem_1", "modified", "/a.md", "1" * 64, 3, "2" * 64, None, "memver_1", "3" * 64,
        Actor("api_actor", "apikey_1"), dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )  # fmt: skip
    later = ConflictRecord(
        "cnf_2", "mem_1", "modified", "/a.md", "1" * 64, 3, "2" * 64, None, "memver_9", "9" * 64,
        Actor("api_actor", "apikey_1"), dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
    )  # fmt: skip
    assert base.retry_key() == later.retry_key()  # a later winner does not make it a new edit
    other_writer = ConflictRecord(**{**later.__dict__, "created_by": Actor("api_actor", "apikey_2")})
    other_base = ConflictRecord(**{**later.__dict__, "base_sha256": "4" * 64})
    assert base.retry_key() not in (other_writer.retry_key(), other_base.retry_key())
