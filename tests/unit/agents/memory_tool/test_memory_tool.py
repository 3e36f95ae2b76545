"""The memory tool against the SDK's own local implementation, string for string, on a real store.

Each scenario runs the same commands through ``anthropic.tools.BetaLocalFilesystemMemoryTool`` (in a
temporary folder) and through gitmem's handler, and the answers must be identical; only a folder's
size in a listing is normalised, since on disk it depends on the filesystem.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anthropic import Anthropic
from anthropic.tools import BetaAbstractMemoryTool, BetaLocalFilesystemMemoryTool, ToolError
from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

from gitmem.agents.memory_tool.sdk import GitmemMemoryTool
from gitmem.agents.memory_tool.text import format_size
from gitmem.agents.memory_tool.tool import MemoryToolHandler, ToolResult, printable
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound
from gitmem.model import Actor, Note

ACTOR = Actor("api_actor", "apikey_memtooltest")
Command = dict[str, Any]


# --- fixtures and helpers ----------------------------------------------------------------------------


@pytest.fixture
def gitmem_home(tmp_path: Path) -> Gitmem:
    return Gitmem.open(tmp_path / "home")


@pytest.fixture
def workspace_id(gitmem_home: Gitmem) -> str:
    return gitmem_home.catalog.create_workspace("memtool").id


@pytest.fixture
def store_id(gitmem_home: Gitmem, workspace_id: str) -> str:
    return gitmem_home.create_store(workspace_id, "notes", description="memory tool tests").id


@pytest.fixture
def store(gitmem_home: Gitmem, workspace_id: str, store_id: str) -> MemoryStore:
    return gitmem_home.store(workspace_id, store_id)


@pytest.fixture
def ours(store: MemoryStore) -> MemoryToolHandler:
    return MemoryToolHandler(store, ACTOR)


@pytest.fixture
def sdk(tmp_path_factory: pytest.TempPathFactory) -> BetaLocalFilesystemMemoryTool:
    # Its own folder, away from the gitmem home, so "nothing written" checks see only gitmem's files.
    return BetaLocalFilesystemMemoryTool(base_path=str(tmp_path_factory.mktemp("sdk")))


def run_sdk(tool: BetaLocalFilesystemMemoryTool, command: Command) -> ToolResult:
    try:
        return ToolResult(str(tool.call(command)), False)
    except ToolError as error:
        return ToolResult(str(error.content), True)


_LISTING_LINE = re.compile(r"^(\S+)\t(.*)$")


def normalised(result: ToolResult) -> ToolResult:
    """A folder's size is the filesystem's business: replace it in listings; everything else stays."""
    lines = result.content.split("\n")
    if result.is_error or not lines[0].startswith("Here're the files and directories"):
        return result
    for index in range(1, len(lines)):
        match = _LISTING_LINE.match(lines[index])
        assert match, lines[index]
        if index == 1 or match.group(2).endswith("/"):
            lines[index] = f"<folder>\t{match.group(2)}"
    return ToolResult("\n".join(lines), result.is_error)


def assert_same_answers(sdk: BetaLocalFilesystemMemoryTool, ours: MemoryToolHandler, commands: list[Command]) -> None:
    for step, command in enumerate(commands):
        expected = normalised(run_sdk(sdk, command))
        actual = normalised(ours.execute(command))
        assert actual == expected, f"step {step}: {command}"


def view(path: str, view_range: list[int] | None = None) -> Command:
    command: Command = {"command": "view", "path": path}
    if view_range is not None:
        command["view_range"] = view_range
    return command


def create(path: str, file_text: str) -> Command:
    return {"command": "create", "path": path, "file_text": file_text}


def str_replace(path: str, old_str: str, new_str: str) -> Command:
    return {"command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str}


def insert(path: str, insert_line: int, insert_text: str) -> Command:
    return {"command": "insert", "path": path, "insert_line": insert_line, "insert_text": insert_text}


def delete(path: str) -> Command:
    return {"command": "delete", "path": path}


def rename(old_path: str, new_path: str) -> Command:
    return {"command": "rename", "old_path": old_path, "new_path": new_path}


def version_count(store: MemoryStore) -> int:
    count, page = 0, None
    while True:
        listing = store.versions(limit=100, page=page)
        count += len(listing.items)
        page = listing.next_page
        if page is None:
            return count


def all_notes(store: MemoryStore) -> dict[str, str]:
    listing = store.list(path_prefix="/", limit=1000)
    return {item.path: item.content_sha256 for item in listing.items if isinstance(item, Note)}


def files_under(root: Path) -> dict[str, int]:
    # SQLite's journal files come and go with reads; they are not data.
    return {
        str(path.relative_to(root)): path.stat().st_size
        for path in root.rglob("*")
        if path.is_file() and not path.name.endswith(("-wal", "-shm", "-journal"))
    }


# --- side by side with the SDK -----------------------------------------------------------------------

FIVE_LINES = "alpha\nbeta\ngamma\ndelta\nepsilon\n"
TEN_LINES = "".join(f"line {n}\n" for n in range(1, 11))

SCENARIOS: dict[str, list[Command]] = {
    "empty store": [
        view("/memories"),
        view("/memories/"),
        view("/memories/missing.md"),
        view("/memories/missing/"),
        delete("/memories/missing.md"),
        str_replace("/memories/missing.md", "a", "b"),
        insert("/memories/missing.md", 0, "x"),
        rename("/memories/missing.md", "/memories/other.md"),
        delete("/memories"),
        delete("/memories/"),
        rename("/memories", "/memories/elsewhere"),
        create("/memories", "x"),
        view("/memories"),
    ],
    "view a file and its ranges": [
        create("/memories/notes.md", FIVE_LINES),
        view("/memories/notes.md"),
        view("/memories/notes.md/"),
        view("/memories/notes.md", [2, 3]),
        view("/memories/notes.md", [1, -1]),
        view("/memories/notes.md", [0, 2]),
        view("/memories/notes.md", [3, 100]),
        view("/memories/notes.md", [4, 2]),
        view("/memories/notes.md", [-5, 2]),
        view("/memories/notes.md", [2, -2]),
        view("/memories/notes.md", [6, -1]),
        view("/memories/notes.md", [7, 9]),
        view("/memories/notes.md", [2, 0]),
        view("/memories/notes.md", [1]),
        view("/memories/notes.md", [1, 2, 3]),
        view("/memories/notes.md", []),
        view("/memories", [1, 2]),
        view("/memories/notes.md/child"),
    ],
    "odd contents": [
        create("/memories/no-newline.md", "one\ntwo"),
        create("/memories/empty.md", ""),
        create("/memories/crlf.md", "a\r\nb\r\n"),
        create("/memories/unicode.md", "café ☕\nnaïve — ✓\n"),
        create("/memories/blank-lines.md", "\n\n\n"),
        view("/memories/no-newline.md"),
        view("/memories/empty.md"),
        view("/memories/crlf.md"),
        view("/memories/unicode.md"),
        view("/memories/blank-lines.md"),
        view("/memories"),
        insert("/memories/no-newline.md", 2, "three"),
        insert("/memories/empty.md", 0, "first\n\n"),
        insert("/memories/crlf.md", 1, "mid\r"),
        view("/memories/no-newline.md"),
        view("/memories/empty.md"),
        view("/memories/crlf.md"),
        str_replace("/memories/unicode.md", "☕", "🍵"),
        view("/memories"),
    ],
    "create conflicts": [
        create("/memories/x.md", "first"),
        create("/memories/x.md", "second"),
        view("/memories/x.md"),
        create("/memories/dir/a.md", "in a folder"),
        create("/memories/dir", "over a folder"),
        create("/memories/dir/", "over a folder, with a slash"),
        create("/memories/deep/er/still/file.md", "deep"),
        view("/memories/dir"),
        view("/memories/dir/"),
        view("/memories"),
    ],
    "str_replace": [
        create("/memories/s.md", "one two\nthree two\nfour\n"),
        str_replace("/memories/s.md", "zzz", "y"),
        str_replace("/memories/s.md", "two", "2"),
        str_replace("/memories/s.md", "three two", "THREE"),
        view("/memories/s.md"),
        str_replace("/memories/s.md", "one two\n", "one\nand a half\n"),
        str_replace("/memories/s.md", "THREE\nfour", "3\n4\n5"),
        view("/memories/s.md"),
        create("/memories/ten.md", TEN_LINES),
        str_replace("/memories/ten.md", "line 1\n", "LINE ONE\n"),
        str_replace("/memories/ten.md", "line 6", "line six"),
        str_replace("/memories/ten.md", "line 10\n", ""),
        str_replace("/memories/ten.md", "line 9", "line 9\nline 9.5"),
        view("/memories/ten.md"),
        create("/memories/aaaa.md", "aaaa\nxaa\n"),
        str_replace("/memories/aaaa.md", "aa", "b"),
        str_replace("/memories/aaaa.md", "", "b"),
        str_replace("/memories/aaaa.md", "xaa", "xaa"),
        create("/memories/dir/f.md", "f"),
        str_replace("/memories/dir", "f", "g"),
        str_replace("/memories", "f", "g"),
        str_replace("/memories/empty-old.md", "", "b"),
        create("/memories/blank.md", ""),
        str_replace("/memories/blank.md", "", "now filled"),
        view("/memories/blank.md"),
    ],
    "insert": [
        create("/memories/i.md", "l1\nl2\nl3\n"),
        insert("/memories/i.md", 0, "top"),
        insert("/memories/i.md", 4, "bottom"),
        insert("/memories/i.md", 2, "middle\n\n"),
        insert("/memories/i.md", -1, "nope"),
        insert("/memories/i.md", 7, "nope"),
        insert("/memories/i.md", 6, "two\nlines"),
        view("/memories/i.md"),
        create("/memories/folder/x.md", "x"),
        insert("/memories/folder", 0, "nope"),
        insert("/memories", 0, "nope"),
    ],
    "delete and rename": [
        create("/memories/a.md", "a"),
        create("/memories/dir/b.md", "b"),
        create("/memories/dir/sub/c.md", "c"),
        create("/memories/other/d.md", "d"),
        rename("/memories/a.md", "/memories/dir/b.md"),
        rename("/memories/a.md", "/memories/dir"),
        rename("/memories/a.md", "/memories"),
        rename("/memories/a.md", "/memories/a.md"),
        rename("/memories/a.md", "/memories/a2.md"),
        view("/memories/a.md"),
        view("/memories/a2.md"),
        rename("/memories/a2.md", "/memories/newdir/a3.md"),
        view("/memories"),
        rename("/memories/dir", "/memories/dir2"),
        view("/memories"),
        rename("/memories/dir2/", "/memories/other/moved"),
        view("/memories"),
        delete("/memories/other/moved/sub"),
        view("/memories/other"),
        delete("/memories/other/"),
        delete("/memories/other"),
        # A whole folder: deleting its only file would leave an empty folder on disk, and none in a store.
        delete("/memories/newdir"),
        delete("/memories/newdir/a3.md"),
        delete("/memories/newdir"),
        view("/memories"),
    ],
    "listing": [
        create("/memories/zero.md", ""),
        create("/memories/five.md", "12345"),
        create("/memories/k1.md", "x" * 1024),
        create("/memories/k1half.md", "x" * 1536),
        create("/memories/k2.md", "x" * 2048),
        create("/memories/odd.md", "x" * 5000),
        create("/memories/max.md", "x" * 102_400),
        create("/memories/.hidden.md", "hidden"),
        create("/memories/.cfg/x.md", "hidden folder"),
        create("/memories/vis/.h.md", "hidden in a folder"),
        create("/memories/vis/a.md", "visible"),
        create("/memories/vis/sub/deeper/e.md", "too deep to list"),
        create("/memories/vis/sub/s.md", "level three"),
        create("/memories/B.md", "upper"),
        create("/memories/_x.md", "underscore"),
        create("/memories/a-b/y.md", "dash"),
        create("/memories/a.b.md", "dots"),
        create("/memories/ab/z.md", "ab"),
        create("/memories/é.md", "accent"),
        create("/memories/only-hidden/.secret.md", "only hidden inside"),
        view("/memories"),
        view("/memories/vis"),
        view("/memories/vis/"),
        view("/memories/vis/sub"),
        view("/memories/.cfg"),
        view("/memories/.hidden.md"),
        view("/memories/only-hidden"),
    ],
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_answers_match_the_sdk_local_implementation(
    scenario: str, sdk: BetaLocalFilesystemMemoryTool, ours: MemoryToolHandler
) -> None:
    assert_same_answers(sdk, ours, SCENARIOS[scenario])


def test_folders_are_listed_with_the_size_ext4_gives_a_directory(ours: MemoryToolHandler) -> None:
    # The side-by-side tests normalise folder sizes; here is what ours actually says.
    ours.execute(create("/memories/dir/a.md", "a"))
    listing = ours.execute(view("/memories")).content.split("\n")
    assert listing[1:] == ["4K\t/memories", "4K\t/memories/dir/", "1B\t/memories/dir/a.md"]


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0B"),
        (1, "1B"),
        (1023, "1023B"),
        (1024, "1K"),
        (1536, "1.5K"),
        (5000, "4.9K"),
        (102_400, "100K"),
        (1_048_576, "1M"),
        (3 * 1024**3, "3G"),
        (5 * 1024**4, "5120G"),
    ],
)
def test_format_size(size: int, shown: str) -> None:
    assert format_size(size) == shown


# --- path confinement --------------------------------------------------------------------------------

TRAVERSALS = [
    "/memories/../etc/passwd",
    "/memories/../../etc/passwd",
    "/memories/a/../../x.md",
    "/memories/a/../x.md",
    "/memories/..",
    "/memories/../",
    "/memories/../memories/x.md",
    "/memories/./x.md",
    "/memories/.",
    "/memories/...",
    "/memories/.../x.md",
    "/memories/ ../x.md",
    "/memories/.. /x.md",
    "/memories/%2e%2e/x.md",
    "/memories/%2e%2e%2fetc%2fpasswd",
    "/memories/%2E%2E/%2E%2E/etc/passwd",
    "/memories/%2E%2E%2F",
    "/memories/..%2fx.md",
    "/memories/..%2Fx.md",
    "/memories/%2e./x.md",
    "/memories/.%2e/x.md",
    "/memories/..%5cx.md",
    "/memories/%5c..%5cx.md",
    "/memories/%252e%252e%252fx.md",
    "/memories/%252E%252E/x.md",
    "/memories/%25252e%25252e%25252fx.md",
    "/memories/%c0%ae%c0%ae/x.md",
    "/memories/%c0%ae%c0%ae%c0%afx.md",
    "/memories/..%c0%afx.md",
    "/memories/..%c1%9cx.md",
    "/memories/%e0%80%ae%e0%80%ae/x.md",
    "/memories/%f0%80%80%ae%f0%80%80%ae/x.md",
    "/memories/%u002e%u002e/x.md",
    "/memories/%u002e%u002e%u2215x.md",
    "/memories/\uff0e\uff0e/x.md",
    "/memories/\uff0e\uff0e\uff0fx.md",
    "/memories/\u2024\u2024/x.md",
    "/memories/\u2025/x.md",
    "/memories/\ufe52\ufe52/x.md",
    "/memories/..\u2215x.md",
    "/memories/..\u2044x.md",
    "/memories/..\uff3cx.md",
    "/memories/%ef%bc%8e%ef%bc%8e/x.md",
    "/memories/..\\x.md",
    "/memories\\..\\x.md",
    "/memories/a\\b.md",
    "/memories/x\x00.md",
    "/memories/x.md\x00.txt",
    "/memories/%00/x.md",
    "/memories/x.md\n",
    "/memories/\u202ex.md",
    "/memories/\ud800.md",
    "/memories/~/x.md",
    "/memories/~root/x.md",
    "~/memories/x.md",
    "~",
    "/etc/passwd",
    "/",
    "",
    "memories/x.md",
    "./memories/x.md",
    "../memories/x.md",
    "//memories/x.md",
    "/Memories/x.md",
    "/MEMORIES/x.md",
    "/memoriesX/x.md",
    "/memories_evil/x.md",
    "/memories..",
    "/memories../x.md",
    "file:///memories/x.md",
    "C:\\memories\\x.md",
    "\\\\server\\memories\\x.md",
    "/memories//x.md",
    "/memories///",
    "/memories/a//b.md",
]

VALID_PATH = "/memories/x.md"


def commands_with(path: str) -> list[Command]:
    return [
        view(path),
        view(path, [1, 2]),
        create(path, "written where it must not be"),
        str_replace(path, "x", "y"),
        insert(path, 0, "written where it must not be"),
        delete(path),
        rename(path, "/memories/renamed.md"),
        rename(VALID_PATH, path),
    ]


@pytest.mark.parametrize("path", TRAVERSALS, ids=[repr(path) for path in TRAVERSALS])
def test_paths_outside_memories_are_refused_and_change_nothing(
    path: str, tmp_path: Path, store: MemoryStore, ours: MemoryToolHandler, sdk: BetaLocalFilesystemMemoryTool
) -> None:
    ours.execute(create(VALID_PATH, "x marks the spot"))
    ours.execute(create("/memories/a/b.md", "b"))
    notes_before, versions_before = all_notes(store), version_count(store)
    files_before = files_under(tmp_path)

    for command in commands_with(path):
        answer = ours.execute(command)
        assert answer.is_error, command
        assert answer.content.startswith("Path ") and printable(path) in answer.content, answer.content
        # Where the SDK refuses the same path, it must be with the same words.
        try:
            sdk_answer = run_sdk(sdk, command)
        except Exception:  # noqa: S112  e.g. ValueError for a NUL byte: the SDK has no words for it
            continue
        if sdk_answer.is_error and sdk_answer.content.startswith("Path "):
            assert answer.content == sdk_answer.content

    assert all_notes(store) == notes_before
    assert version_count(store) == versions_before
    assert files_under(tmp_path) == files_before


def test_the_sdk_wording_for_paths_outside_memories(ours: MemoryToolHandler) -> None:
    assert ours.execute(view("/etc/passwd")) == ToolResult("Path must start with /memories, got: /etc/passwd", True)
    assert ours.execute(view("/memories/../secrets.env")) == ToolResult(
        "Path /memories/../secrets.env would escape /memories directory", True
    )
    assert ours.execute(view("/memories/%2e%2e%2fsecrets.env")) == ToolResult(
        "Path /memories/%2e%2e%2fsecrets.env would escape /memories directory", True
    )


@pytest.mark.parametrize(
    "path",
    [
        "/memories/100%.md",
        "/memories/a%20b.md",
        "/memories/..foo.md",
        "/memories/foo..md",
        "/memories/.config.md",
        "/memories/a~b.md",
        "/memories/notes/2024-01-01.md",
        "/memories/naïve café.md",
    ],
)
def test_ordinary_names_that_look_a_little_odd_are_allowed(
    path: str, ours: MemoryToolHandler, store: MemoryStore
) -> None:
    answer = ours.execute(create(path, "fine"))
    assert answer == ToolResult(f"File created successfully at: {path}")
    assert store.get_by_path(path.removeprefix("/memories")).content == "fine"


# --- versions ----------------------------------------------------------------------------------------


def test_each_write_command_is_exactly_one_version_by_the_actor(store: MemoryStore, ours: MemoryToolHandler) -> None:
    steps: list[tuple[Command, str]] = [
        (create("/memories/v.md", "one\ntwo\n"), "created"),
        (str_replace("/memories/v.md", "two", "2"), "modified"),
        (insert("/memories/v.md", 0, "zero"), "modified"),
        (rename("/memories/v.md", "/memories/w.md"), "modified"),
        (delete("/memories/w.md"), "deleted"),
    ]
    for command, operation in steps:
        before = version_count(store)
        answer = ours.execute(command)
        assert not answer.is_error, answer
        assert version_count(store) == before + 1, command
        newest = store.versions(limit=1).items[0]
        assert newest.operation == operation
        assert newest.created_by == ACTOR


def test_rename_keeps_the_id_and_content(store: MemoryStore, ours: MemoryToolHandler) -> None:
    ours.execute(create("/memories/old.md", "kept"))
    original = store.get_by_path("/old.md")
    assert ours.execute(rename("/memories/old.md", "/memories/archive/new.md")) == ToolResult(
        "Successfully renamed /memories/old.md to /memories/archive/new.md"
    )
    moved = store.get_by_path("/archive/new.md")
    assert moved.id == original.id
    assert moved.content == "kept"
    with pytest.raises(NotFound):
        store.get_by_path("/old.md")
    assert [v.operation for v in store.versions(memory_id=original.id).items] == ["modified", "created"]


def test_folder_rename_and_delete_are_one_version_per_note_and_keep_ids(
    store: MemoryStore, ours: MemoryToolHandler
) -> None:
    for name in ("a", "b", "c"):
        ours.execute(create(f"/memories/proj/{name}.md", name))
    ids = {name: store.get_by_path(f"/proj/{name}.md").id for name in ("a", "b", "c")}
    before = version_count(store)
    assert not ours.execute(rename("/memories/proj", "/memories/done/proj")).is_error
    assert version_count(store) == before + 3
    assert {name: store.get_by_path(f"/done/proj/{name}.md").id for name in ids} == ids
    assert ours.execute(rename("/memories/done", "/memories/done/inside")) == ToolResult(
        "Cannot rename /memories/done to /memories/done/inside: a folder cannot be moved inside itself", True
    )
    assert ours.execute(delete("/memories/done")) == ToolResult("Successfully deleted /memories/done")
    assert version_count(store) == before + 6
    assert all_notes(store) == {}


def test_a_no_op_edit_makes_no_version(store: MemoryStore, ours: MemoryToolHandler) -> None:
    ours.execute(create("/memories/same.md", "same"))
    before = version_count(store)
    assert not ours.execute(str_replace("/memories/same.md", "same", "same")).is_error
    assert version_count(store) == before


# --- concurrency, engine refusals, read-only, bad input ----------------------------------------------


class EditsBehindYourBack:
    """A store whose note changes, by another writer, right after the tool reads it."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get_by_path(self, path: str, with_content: bool = True) -> Note:
        note = self._store.get_by_path(path, with_content)
        self._store.update(note.id, content=(note.content or "") + "their line\n")
        return note


@pytest.mark.parametrize(
    "command", [str_replace("/memories/race.md", "mine", "MINE"), insert("/memories/race.md", 1, "my line")]
)
def test_an_edit_racing_another_writer_is_refused_not_lost(command: Command, store: MemoryStore) -> None:
    store.create("/race.md", "mine\n")
    handler = MemoryToolHandler(EditsBehindYourBack(store), ACTOR)  # type: ignore[arg-type]
    answer = handler.execute(command)
    (kept,) = store.conflicts.list(with_content=True).items  # the tool's edit, kept beside the note
    assert answer == ToolResult(
        "The file /memories/race.md was changed by someone else while this command "
        f"ran, so nothing was written to it. Your edit is kept as conflict {kept.id}. View it again and retry.",
        True,
    )
    assert store.get_by_path("/race.md").content == "mine\ntheir line\n"
    assert kept.content in ("MINE\n", "my line\nmine\n", "mine\nmy line\n") and kept.created_by == ACTOR


def test_engine_refusals_become_error_results(store: MemoryStore, ours: MemoryToolHandler) -> None:
    before = version_count(store)
    secret = ours.execute(create("/memories/db.md", "password: hunter2hunter2\n"))
    assert secret.is_error
    assert secret.content.startswith("Refused to write /memories/db.md: ")
    assert "password" in secret.content and "hunter2" not in secret.content

    ours.execute(create("/memories/file.md", "a file"))
    under_a_file = ours.execute(create("/memories/file.md/child.md", "x"))
    assert under_a_file == ToolResult(
        "Cannot write /memories/file.md/child.md: it conflicts with the existing /memories/file.md "
        "(a file cannot sit at, above or below another file). Nothing was changed.",
        True,
    )
    ours.execute(create("/memories/plain.md", "plain"))
    moved_under_a_file = ours.execute(rename("/memories/plain.md", "/memories/file.md/plain.md"))
    assert moved_under_a_file.is_error
    assert moved_under_a_file.content.startswith("Cannot write /memories/file.md/plain.md: it conflicts")

    reserved = ours.execute(create("/memories/.git/config", "x"))
    assert reserved.is_error and reserved.content.startswith("Cannot use /memories/.git/config: ")
    assert ours.execute(view("/memories/.git")).content.startswith("Cannot use /memories/.git: ")
    too_big = ours.execute(create("/memories/big.md", "x" * 102_401))
    assert too_big.is_error and too_big.content.startswith("Refused to write /memories/big.md: ")
    assert version_count(store) == before + 2  # file.md and plain.md


def test_an_archived_store_refuses_writes_but_still_reads(
    gitmem_home: Gitmem, workspace_id: str, store_id: str, store: MemoryStore
) -> None:
    handler = MemoryToolHandler(store, ACTOR)
    handler.execute(create("/memories/kept.md", "kept"))
    gitmem_home.archive_store(workspace_id, store_id)
    archived = MemoryToolHandler(gitmem_home.store(workspace_id, store_id), ACTOR)
    refused = archived.execute(create("/memories/new.md", "x"))
    assert refused.is_error and "archived" in refused.content
    assert archived.execute(view("/memories/kept.md")).content.endswith("     1\tkept")


def test_read_only_refuses_every_write_and_still_views(store: MemoryStore) -> None:
    store.create("/r.md", "read me\n")
    handler = MemoryToolHandler(store, ACTOR, read_only=True)
    before, notes_before = version_count(store), all_notes(store)
    for command in (
        create("/memories/n.md", "x"),
        str_replace("/memories/r.md", "read", "write"),
        insert("/memories/r.md", 0, "x"),
        delete("/memories/r.md"),
        rename("/memories/r.md", "/memories/s.md"),
        delete("/memories/../../etc"),
    ):
        answer = handler.execute(command)
        expected = f"The memory store is read-only: `{command['command']}` is not allowed."
        assert answer == ToolResult(expected, True)
    assert handler.execute(view("/memories/r.md")) == ToolResult(
        "Here's the content of /memories/r.md with line numbers:\n     1\tread me\n     2\t"
    )
    assert handler.clear_all().is_error
    assert version_count(store) == before and all_notes(store) == notes_before


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ({}, "Unknown command: None. Use one of: view, create, str_replace, insert, delete, rename."),
        (
            {"command": "format_disk"},
            "Unknown command: format_disk. Use one of: view, create, str_replace, insert, delete, rename.",
        ),
        ({"command": "view"}, "Missing required parameter `path` for command `view`."),
        ({"command": "view", "path": 7}, "Invalid `path` parameter: it must be a string."),
        (
            {"command": "view", "path": "/memories", "view_range": "1-2"},
            "Invalid `view_range` parameter: '1-2'. It should be a list of two integers.",
        ),
        (
            {"command": "create", "path": "/memories/a.md"},
            "Missing required parameter `file_text` for command `create`.",
        ),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_line": "1", "insert_text": "x"},
            "Invalid `insert_line` parameter: '1'. It must be an integer.",
        ),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_line": True, "insert_text": "x"},
            "Invalid `insert_line` parameter: True. It must be an integer.",
        ),
        (
            {"command": "rename", "old_path": "/memories/a.md"},
            "Missing required parameter `new_path` for command `rename`.",
        ),
    ],
)
def test_malformed_input_is_an_error_result_not_an_exception(
    command: Command, message: str, ours: MemoryToolHandler, store: MemoryStore
) -> None:
    assert ours.execute(command) == ToolResult(message, True)
    assert version_count(store) == 0


def test_str_replace_without_new_str_removes_the_text(ours: MemoryToolHandler, store: MemoryStore) -> None:
    ours.execute(create("/memories/t.md", "keep drop keep"))
    assert not ours.execute({"command": "str_replace", "path": "/memories/t.md", "old_str": " drop"}).is_error
    assert store.get_by_path("/t.md").content == "keep keep"


# --- the SDK adapter ---------------------------------------------------------------------------------


def test_the_adapter_is_an_sdk_memory_tool(store: MemoryStore) -> None:
    tool = GitmemMemoryTool(store, ACTOR)
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert tool.name == "memory"
    assert tool.call(create("/memories/a.md", "hello\n")) == "File created successfully at: /memories/a.md"
    assert tool.execute(
        BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md", view_range=[1, 1])
    ) == ("Here's the content of /memories/a.md with line numbers:\n     1\thello")
    with pytest.raises(ToolError) as refused:
        tool.call(view("/memories/../etc/passwd"))
    assert refused.value.content == "Path /memories/../etc/passwd would escape /memories directory"
    with pytest.raises(ToolError):
        tool.call("not a command")
    assert tool.clear_all_memory() == "All memory cleared"
    assert all_notes(store) == {}


def test_the_sdk_tool_runner_drives_the_adapter(store: MemoryStore) -> None:
    requests: list[dict[str, Any]] = []

    def messages_api(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        base = {
            "id": f"msg_{len(requests)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if len(requests) == 1:
            return httpx2.Response(
                200,
                json={
                    **base,
                    "stop_reason": "tool_use",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "memory",
                            "input": create("/memories/pref.md", "likes coffee\n"),
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_2",
                            "name": "memory",
                            "input": view("/memories/../../etc/passwd"),
                        },
                    ],
                },
            )
        return httpx2.Response(
            200, json={**base, "stop_reason": "end_turn", "content": [{"type": "text", "text": "Noted."}]}
        )

    client = Anthropic(
        api_key="test-key",
        base_url="http://anthropic.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(messages_api)),
    )
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=64,
        tools=[GitmemMemoryTool(store, ACTOR)],
        messages=[{"role": "user", "content": "I like coffee"}],
    )
    final = runner.until_done()
    assert final.content[0].text == "Noted."  # type: ignore[union-attr]
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = {block["tool_use_id"]: block for block in requests[1]["messages"][-1]["content"]}
    assert results["toolu_1"]["content"] == "File created successfully at: /memories/pref.md"
    assert not results["toolu_1"].get("is_error")
    assert results["toolu_2"]["is_error"] is True
    assert results["toolu_2"]["content"] == "Path /memories/../../etc/passwd would escape /memories directory"
    assert store.get_by_path("/pref.md").content == "likes coffee\n"
