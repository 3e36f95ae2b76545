"""The memory tool: Claude's six memory commands (view create str_replace insert delete rename) on a store.

``/memories/x.md`` is the note ``/x.md``; folders are implicit path prefixes. Every output and error text
is the one the official SDK's local implementation (``anthropic.tools.BetaLocalFilesystemMemoryTool``)
gives, so a model sees the same tool whichever backend answers it. Where that implementation has no
text (engine refusals, a read-only store, malformed input) the message is our own and says what to do.

Known, deliberate differences from the local implementation:

- Folders exist only while they hold a note, so a folder emptied by delete or rename disappears, and a
  folder's size in a listing is a fixed ``4K`` (what ext4 reports for a directory).
- Paths are confined more strictly: ``..`` and ``.`` segments are refused even when they would stay inside
  ``/memories``, as are empty segments (``//``), percent-encoded, overlong UTF-8 and look-alike Unicode
  traversal forms, backslashes, control characters and ``~``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitmem.agents.memory_tool.paths import MEMORY_ROOT, MemoryPath, Refusal, resolve_memory_path
from gitmem.agents.memory_tool.text import (
    FOLDER_SIZE_BYTES,
    MAX_LINES,
    as_tool_path,
    describe_engine_error,
    format_size,
    lines_without_final_empty,
    listing_entries,
    listing_tree,
    numbered_line,
    optional_view_range,
    path_in_question,
    required_int,
    required_str,
)
from gitmem.errors import (
    GitmemError,
    NotFound,
    PathConflict,
    as_insufficient_storage,
    storage_errors,
)
from gitmem.model import Actor, Note
from gitmem.rules.policy import has_lone_surrogate

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
WRITE_COMMANDS = frozenset(COMMANDS) - {"view"}


# The store pages listings; the largest page the API allows keeps round trips few.
_LIST_PAGE_SIZE = 1000


@dataclass(frozen=True)
class ToolResult:
    """What a memory-tool call answers: the text for the model, and whether it is an error."""

    content: str
    is_error: bool = False


# --- the handler -------------------------------------------------------------------------------------


def printable(text: str) -> str:
    """``text`` with any lone surrogate written as its escape, so it encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class MemoryToolHandler:
    """Runs memory-tool commands against one store, as one actor.

    Every command that changes something is one version (a folder's delete or rename is one version per
    note in it: the engine's unit is a note). Edits carry the SHA-256 of the text they were computed
    from, so an edit racing another writer fails instead of silently undoing it.
    """

    def __init__(self, store: MemoryStore, actor: Actor | None, *, read_only: bool = False) -> None:
        self.store = store
        self.actor = actor
        self.read_only = read_only
        self._commands: dict[str, Callable[[Mapping[str, Any]], str]] = {
            "view": self._view,
            "create": self._create,
            "str_replace": self._str_replace,
            "insert": self._insert,
            "delete": self._delete,
            "rename": self._rename,
        }

    def execute(self, command: Mapping[str, Any]) -> ToolResult:
        """Run one tool input (``{"command": "view", "path": "/memories"}``); never raises for bad input.
        An answer that echoes a lone surrogate from the input shows it escaped (``\\udc80``), so it
        can always be sent as UTF-8 JSON."""
        result = self._execute(command)
        if has_lone_surrogate(result.content):
            return ToolResult(printable(result.content), result.is_error)
        return result

    def _execute(self, command: Mapping[str, Any]) -> ToolResult:
        if not isinstance(command, Mapping):
            return ToolResult("The memory tool input must be an object with a `command` field.", True)
        name = command.get("command")
        run = self._commands.get(name) if isinstance(name, str) else None
        if run is None:
            return ToolResult(f"Unknown command: {name}. Use one of: {', '.join(COMMANDS)}.", True)
        if self.read_only and name in WRITE_COMMANDS:
            return ToolResult(f"The memory store is read-only: `{name}` is not allowed.", True)
        try:
            return ToolResult(run(command))
        except Refusal as refusal:
            return ToolResult(refusal.message, True)
        except GitmemError as error:
            log.info("memory tool %s refused by the store: %s", name, error.message)
            return ToolResult(describe_engine_error(error, path_in_question(command, error)), True)
        except storage_errors() as error:
            full = as_insufficient_storage(error, self.store.path)
            if full is None:
                raise
            log.error("memory tool %s: the disk is full: %s", name, error)
            return ToolResult(full.message, True)

    def clear_all(self) -> ToolResult:
        """Delete every note (one version each), like the local implementation's ``clear_all_memory``."""
        if self.read_only:
            return ToolResult("The memory store is read-only: clearing it is not allowed.", True)
        try:
            for note in self._notes_under("/"):
                self._delete_note_if_present(note.id)
        except GitmemError as error:
            return ToolResult(describe_engine_error(error, MEMORY_ROOT), True)
        return ToolResult("All memory cleared")

    # reading helpers

    def _note_at(self, target: MemoryPath) -> Note | None:
        if target.is_root:
            return None
        try:
            return self.store.get_by_path(target.note_path)
        except NotFound:
            return None

    def _notes_under(self, prefix: str) -> list[Note]:
        notes: list[Note] = []
        page: str | None = None
        while True:
            listing = self.store.list(path_prefix=prefix, depth=0, limit=_LIST_PAGE_SIZE, page=page)
            notes.extend(item for item in listing.items if isinstance(item, Note) and item.path.startswith(prefix))
            page = listing.next_page
            if page is None:
                return notes

    def _is_folder(self, target: MemoryPath) -> bool:
        if target.is_root:
            return True
        listing = self.store.list(path_prefix=target.folder_prefix, depth=0, limit=1)
        return any(isinstance(item, Note) for item in listing.items)

    def _exists(self, target: MemoryPath) -> bool:
        return self._note_at(target) is not None or self._is_folder(target)

    def _file_to_edit(self, target: MemoryPath) -> Note:
        note = self._note_at(target)
        if note is not None:
            return note
        if self._is_folder(target):
            raise Refusal(f"The path {target.tool_path} is not a file.")
        raise Refusal(f"The path {target.tool_path} does not exist. Please provide a valid path.")

    def _rewrite(self, note: Note, new_content: str) -> None:
        # The precondition is the text the edit was computed from: a concurrent write makes it fail.
        self.store.update(note.id, content=new_content, expected_sha256=note.content_sha256, actor=self.actor)

    def _delete_note_if_present(self, memory_id: str) -> bool:
        try:
            self.store.delete(memory_id, actor=self.actor)
        except NotFound:  # deleted by someone else meanwhile: the outcome asked for
            return False
        return True

    # the six commands

    def _view(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(required_str(command, "path"))
        view_range = optional_view_range(command)
        note = self._note_at(target)
        if note is not None:
            return self._view_file(target, note, view_range)
        notes = self._notes_under(target.folder_prefix)
        if not notes and not target.is_root:
            raise Refusal(f"The path {target.tool_path} does not exist. Please provide a valid path.")
        entries = listing_entries(listing_tree(notes, target.folder_prefix))
        path = target.tool_path
        lines = [f"{format_size(FOLDER_SIZE_BYTES)}\t{path}"]
        lines.extend(f"{size}\t{path}/{relative}" for size, relative in entries)
        header = f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
        return header + "\n" + "\n".join(lines)

    def _view_file(self, target: MemoryPath, note: Note, view_range: list[int] | None) -> str:
        content = note.content if note.content is not None else self.store.get(note.id).content or ""
        lines = content.split("\n")
        if len(lines) > MAX_LINES:
            raise Refusal(f"File {target.tool_path} exceeds maximum line limit of 999,999 lines.")
        first_index = 0
        shown = lines
        if view_range and len(view_range) == 2:
            # Python slicing on purpose: the local implementation's answers for odd ranges come from it.
            first_index = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            shown = lines[first_index:end]
        numbered = [numbered_line(first_index + 1 + offset, line) for offset, line in enumerate(shown)]
        return f"Here's the content of {target.tool_path} with line numbers:\n" + "\n".join(numbered)

    def _create(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(required_str(command, "path"))
        file_text = required_str(command, "file_text")
        already_exists = Refusal(f"File {target.tool_path} already exists")
        if target.is_root or self._note_at(target) is not None:
            raise already_exists
        try:
            self.store.create(target.note_path, file_text, actor=self.actor)
        except PathConflict as conflict:
            other = conflict.details.get("conflicting_path", "")
            # A note at this path, or below it (this path is a folder): what O_EXCL reports on a disk.
            if other == target.note_path or other.startswith(target.folder_prefix):
                raise already_exists from None
            raise
        return f"File created successfully at: {target.tool_path}"

    def _str_replace(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(required_str(command, "path"))
        old_str = required_str(command, "old_str")
        new_str = command.get("new_str", "")  # an omitted new_str deletes old_str, as in the text editor tool
        if not isinstance(new_str, str):
            raise Refusal("Invalid `new_str` parameter: it must be a string.")
        note = self._file_to_edit(target)
        content = note.content or ""
        occurrences = content.count(old_str)
        if occurrences == 0:
            raise Refusal(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {target.tool_path}."
            )
        if occurrences > 1:
            line_numbers = self._lines_of_every_match(content, old_str)
            raise Refusal(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` "
                f"in lines: {', '.join(map(str, line_numbers))}. Please ensure it is unique"
            )
        changed_index = content[: content.find(old_str)].count("\n")
        new_content = content.replace(old_str, new_str)
        self._rewrite(note, new_content)
        new_lines = new_content.split("\n")
        first = max(0, changed_index - 2)
        last = min(len(new_lines), changed_index + 3)
        snippet = [numbered_line(number, new_lines[number - 1]) for number in range(first + 1, last + 1)]
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n" + "\n".join(snippet)
        )

    @staticmethod
    def _lines_of_every_match(content: str, needle: str) -> list[int]:
        # Overlapping matches count, one step at a time, as the local implementation reports them.
        line_numbers: list[int] = []
        position = content.find(needle)
        while position != -1:
            line_numbers.append(content[:position].count("\n") + 1)
            position = content.find(needle, position + 1)
        return line_numbers

    def _insert(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(required_str(command, "path"))
        insert_line = required_int(command, "insert_line")
        insert_text = required_str(command, "insert_text")
        note = self._file_to_edit(target)
        lines = lines_without_final_empty(note.content or "")
        if not 0 <= insert_line <= len(lines):
            raise Refusal(
                f"Invalid `insert_line` parameter: {insert_line}. It should be within the range [0, {len(lines)}]."
            )
        lines.insert(insert_line, insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        self._rewrite(note, new_content)
        return f"The file {target.tool_path} has been edited."

    def _delete(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(required_str(command, "path"))
        missing = Refusal(f"The path {target.tool_path} does not exist")
        if target.is_root:
            raise Refusal("Cannot delete the /memories directory itself")
        note = self._note_at(target)
        if note is not None:
            if not self._delete_note_if_present(note.id):
                raise missing
        else:
            notes = self._notes_under(target.folder_prefix)
            if not notes:
                raise missing
            self._for_each_note(notes, "deleted", target.tool_path, lambda each: self._delete_note_if_present(each.id))
        return f"Successfully deleted {target.tool_path}"

    def _rename(self, command: Mapping[str, Any]) -> str:
        source = resolve_memory_path(required_str(command, "old_path"))
        destination = resolve_memory_path(required_str(command, "new_path"))
        if source.is_root:
            raise Refusal("Cannot rename the /memories directory itself")
        if destination.is_root or self._exists(destination):
            raise Refusal(f"The destination {destination.tool_path} already exists")
        note = self._note_at(source)
        if note is not None:
            # An update of the path keeps the note's id: one "modified" version.
            self.store.update(note.id, path=destination.note_path, actor=self.actor)
        else:
            notes = self._notes_under(source.folder_prefix)
            if not notes:
                raise Refusal(f"The path {source.tool_path} does not exist")
            if destination.note_path.startswith(source.folder_prefix):
                raise Refusal(
                    f"Cannot rename {source.tool_path} to {destination.tool_path}: "
                    "a folder cannot be moved inside itself"
                )
            prefix_length = len(source.folder_prefix)

            def move(each: Note) -> None:
                new_path = destination.folder_prefix + each.path[prefix_length:]
                self.store.update(each.id, path=new_path, actor=self.actor)

            self._for_each_note(notes, "moved", source.tool_path, move)
        return f"Successfully renamed {source.tool_path} to {destination.tool_path}"

    @staticmethod
    def _for_each_note(notes: list[Note], verb: str, tool_path: str, change: Callable[[Note], object]) -> None:
        """Apply ``change`` to a folder's notes; a failure part way says how far it got, never hides it."""
        for done, note in enumerate(notes):
            try:
                change(note)
            except GitmemError as error:
                if done == 0:
                    raise
                failed = describe_engine_error(error, as_tool_path(note.path))
                partial = f"Only {done} of {len(notes)} files in {tool_path} were {verb}; then: {failed}"
                raise Refusal(partial) from None


__all__ = ["COMMANDS", "WRITE_COMMANDS", "MemoryToolHandler", "ToolResult", "printable"]
