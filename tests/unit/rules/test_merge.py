"""The pure three-way merge (gitmem.rules.merge), against a model: edits to different lines both land."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gitmem.rules.merge import merge3
from gitmem.sync.merge import merge3_git

LINES = st.lists(
    st.text("abcxyz ", min_size=1, max_size=6).map(lambda s: s + "\n"), min_size=4, max_size=12, unique=True
)


@st.composite
def two_edits(draw: st.DrawFn) -> tuple[list[str], dict[int, str], dict[int, str]]:
    """A base and two sets of line replacements that never touch the same or neighbouring lines."""
    base = draw(LINES)
    picked = draw(st.lists(st.integers(0, len(base) - 1), unique=True, max_size=len(base)))
    ours: dict[int, str] = {}
    theirs: dict[int, str] = {}
    taken: set[int] = set()
    for n, i in enumerate(picked):
        if taken & {i - 1, i, i + 1}:
            continue
        taken.add(i)
        (ours if n % 2 else theirs)[i] = f"edit {n}\n"
    return base, ours, theirs


def _apply(base: list[str], edits: dict[int, str]) -> str:
    return "".join(edits.get(i, line) for i, line in enumerate(base))


@given(two_edits())
def test_edits_to_separate_lines_both_land(case: tuple[list[str], dict[int, str], dict[int, str]]) -> None:
    base, ours, theirs = case
    result = merge3("".join(base), _apply(base, ours), _apply(base, theirs))
    assert result.clean
    assert result.text == _apply(base, {**ours, **theirs})


@given(LINES, LINES)
def test_one_side_unchanged_takes_the_other(base: list[str], other: list[str]) -> None:
    b, o = "".join(base), "".join(other)
    assert merge3(b, b, o).text == o
    assert merge3(b, o, b).text == o
    assert merge3(b, o, o).text == o


def test_overlapping_edits_conflict_with_markers_and_agree_with_git() -> None:
    base = "one\ntwo\nthree\n"
    ours, theirs = "one\nTWO\nthree\n", "one\n2\nthree\n"
    for merged in (merge3(base, ours, theirs), merge3_git(base, ours, theirs)):
        assert merged.conflicts == 1
        assert "<<<<<<< local\nTWO\n=======\n2\n>>>>>>> remote\n" in merged.text
