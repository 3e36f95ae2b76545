"""The offline dreamer never loses a fact, as a property: whatever notes go in, every non-blank line of
every input note is a line of some note in the output (trailing spaces aside; notes merged as copies
are named in ``merged``), no note passes the size limit, and a dream over its own output changes
nothing. Checked on the tidier alone (many examples) and through the engine with real Git stores
(fewer examples: each makes stores and commits)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.agents.dreams.dreamers import DreamRequest, InputNote, OfflineTidier
from gitmem.agents.dreams.dreams import dreams_for
from gitmem.agents.dreams.runner import DreamRunner
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.model import Note

MODEL = "claude-opus-4-7"

_SEGMENT = st.text(alphabet="abcxyz-_", min_size=1, max_size=4)
_PATHS = st.one_of(
    st.lists(_SEGMENT, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts) + ".md"),
    st.sampled_from(["/INDEX.md", "/INDEX.dream.md", "/index.md", "/INDEX.md.md"]),
)
_LINE = st.one_of(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(" \t"), max_size=12
    ),
    st.sampled_from(["", "   ", "# Index", "# Heading", "- item", "2 notes in this store.", "(no notes)"]),
)
_CONTENT = st.lists(_LINE, max_size=6).flatmap(
    lambda lines: st.sampled_from(["\n", "\r\n", "\r"]).map(lambda sep: sep.join(lines))
)
NOTES = st.dictionaries(_PATHS, _CONTENT, max_size=8).filter(
    # a path that is also another's folder cannot be written to one store
    lambda notes: not any(other.startswith(path + "/") for path in notes for other in notes)
)


def _no_case_twins(notes: dict[str, str]) -> bool:
    """A store refuses a path (or folder) that differs from another only in case."""
    seen: dict[str, str] = {}
    for path in notes:
        parts = path.split("/")
        for end in range(2, len(parts) + 1):
            level = "/".join(parts[:end])
            if seen.setdefault(level.casefold(), level) != level:
                return False
    return True


STORE_NOTES = NOTES.filter(_no_case_twins)


def lines(text: str) -> set[str]:
    """The non-blank lines of a note, as the tidier splits them, without trailing whitespace."""
    return {line.rstrip() for line in re.split(r"\r\n|\r|\n", text) if line.strip()}


def all_lines(notes: dict[str, str]) -> set[str]:
    return set().union(*(lines(c) for c in notes.values())) if notes else set()


def tidy(notes: dict[str, str], limit: int = 102_400) -> dict[str, str]:
    result = OfflineTidier().dream(DreamRequest(tuple(InputNote(p, c) for p, c in notes.items()), max_note_bytes=limit))
    kept = {n.path for n in result.notes}
    for path, into in result.merged:  # a merged note's lines are in the note it was merged into
        assert into in kept and lines(notes[path]) <= lines(dict((n.path, n.content) for n in result.notes)[into])
    return {n.path: n.content for n in result.notes}


@settings(max_examples=150, deadline=None)
@given(NOTES)
def test_the_tidier_keeps_every_line_and_is_a_fixed_point(notes: dict[str, str]) -> None:
    out = tidy(notes)
    assert all_lines(notes) <= all_lines(out)
    for path, content in notes.items():
        if content.strip():  # every note with something in it is still there, or merged
            assert path in out or any(lines(content) <= lines(c) for c in out.values())
    assert tidy(out) == out


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=3), st.sampled_from(["", "\r\n", "  "]))
def test_a_note_at_the_limit_stays_within_it(slack: int, tail: str) -> None:
    limit = 200
    body = "x" * (limit - slack - len(tail)) + tail
    out = tidy({"/big.md": body, "/small.md": "a\n"}, limit)
    assert all(len(c.encode()) <= limit for c in out.values())
    assert lines(body) <= lines(out["/big.md"])


def store_notes(store: MemoryStore) -> dict[str, str]:
    items = store.list(limit=1000).items
    return {n.path: store.get(n.id).content or "" for n in items if isinstance(n, Note)}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STORE_NOTES)
def test_a_dream_through_the_engine_loses_nothing(notes: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gm = Gitmem.open(Path(tmp) / "home", fsync="never")
        ws = gm.catalog.create_workspace("prop")
        info = gm.create_store(ws.id, "input")
        store = gm.store(ws.id, info.id)
        for path, content in notes.items():
            store.create(path, content)
        before = store_notes(store)
        dreams = dreams_for(gm)
        made = dreams.create(ws.id, [{"type": "memory_store", "memory_store_id": info.id}], MODEL)

        DreamRunner(gm).run_pending()
        done = dreams.get(ws.id, made.id)
        assert done.status == "completed", done.error_message
        assert done.output_store_id is not None
        output = gm.store(ws.id, done.output_store_id)
        after = store_notes(output)
        assert all_lines(before) <= all_lines(after)
        assert store_notes(store) == before  # create_new leaves the input alone

        # Over its own output (in place), a dream writes nothing.
        versions = len(output.versions(limit=100).items)
        again = dreams.create(
            ws.id,
            [{"type": "memory_store", "memory_store_id": output.id}],
            MODEL,
            output_behavior={"type": "update_existing", "memory_store_id": output.id},
        )
        DreamRunner(gm).run_pending()
        assert dreams.get(ws.id, again.id).status == "completed"
        assert len(output.versions(limit=100).items) == versions
        assert store_notes(output) == after
