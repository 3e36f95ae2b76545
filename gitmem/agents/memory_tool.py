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
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anthropic.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from typing_extensions import override

from gitmem.errors import (
    STORAGE_ERRORS,
    ArchivedStore,
    GitmemError,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    SecretRefused,
    StoreBusy,
    TooLarge,
    as_insufficient_storage,
)
from gitmem.model import Actor, Note
from gitmem.rules.paths import SEPARATOR_LOOKALIKES
from gitmem.rules.policy import has_lone_surrogate

if TYPE_CHECKING:
    from gitmem.engine.store import MemoryStore

log = logging.getLogger(__name__)

MEMORY_ROOT = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
WRITE_COMMANDS = frozenset(COMMANDS) - {"view"}

# The local implementation's limits and layout.
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
LISTING_DEPTH = 2
# Folders are implicit, so there is no directory inode to measure; ext4 reports 4096 for one.
FOLDER_SIZE_BYTES = 4096

# The store pages listings; the largest page the API allows keeps round trips few.
_LIST_PAGE_SIZE = 1000
# Enough rounds to unwrap any encoding a path could plausibly be smuggled through (%252e is two).
_MAX_DECODE_ROUNDS = 4
_IIS_UNICODE_ESCAPE = re.compile(r"%u([0-9a-fA-F]{4})")


@dataclass(frozen=True)
class ToolResult:
    """What a memory-tool call answers: the text for the model, and whether it is an error."""

    content: str
    is_error: bool = False


class _Refusal(Exception):
    """A command refused before (or instead of) reaching the store; ``message`` goes to the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- paths -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPath:
    """A tool path (``/memories/a/b.md``) confined to the memory root, and the note path it names."""

    tool_path: str
    note_path: str  # "/a/b.md"; "/" for the root itself

    @property
    def is_root(self) -> bool:
        return self.note_path == "/"

    @property
    def folder_prefix(self) -> str:
        """The ``path_prefix`` of everything below this path, as a folder."""
        return "/" if self.is_root else self.note_path + "/"


def _must_start_with_root(path: str) -> _Refusal:
    return _Refusal(f"Path must start with /memories, got: {path}")


def _would_escape(path: str) -> _Refusal:
    return _Refusal(f"Path {path} would escape /memories directory")


def _decoded_forms(path: str) -> list[str] | None:
    """``path`` and every form a lenient layer could decode it to (percent, %uXXXX, Unicode compatibility).

    ``None`` when a decoding yields invalid UTF-8: that is how overlong forms such as ``%c0%ae`` (a
    disguised ``.``) arrive, and no honest path needs them.
    """
    forms = [path]
    current = path
    for _ in range(_MAX_DECODE_ROUNDS):
        unwrapped = _IIS_UNICODE_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), current)
        try:
            decoded = urllib.parse.unquote_to_bytes(unwrapped).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if decoded == current:
            break
        forms.append(decoded)
        current = decoded
    return forms + [unicodedata.normalize("NFKC", form) for form in forms]


def _is_traversal_segment(segment: str) -> bool:
    stripped = segment.strip()
    # ".", "..", "...", " .." (Windows trims trailing dots and spaces), "~" and "~user" (home expansion).
    return (bool(stripped) and set(stripped) == {"."}) or stripped.startswith("~")


def _looks_like_traversal(path: str) -> bool:
    if any(unicodedata.category(ch) == "Cs" for ch in path):  # a lone surrogate is not text at all
        return True
    forms = _decoded_forms(path)
    if forms is None:
        return True
    for form in forms:
        if any(ch in SEPARATOR_LOOKALIKES for ch in form):  # the store's own rule, per decoded form
            return True
        if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in form):  # NUL and its kin
            return True
        if any(_is_traversal_segment(segment) for segment in form.split("/")):
            return True
    return False


def resolve_memory_path(path: str) -> MemoryPath:
    """Confine a tool path to ``/memories`` and map it to a note path, or raise the refusal to send back."""
    if not path.startswith(MEMORY_ROOT):
        raise _must_start_with_root(path)
    rest = path[len(MEMORY_ROOT) :]
    # Checked on what follows the root, so "/memories.." and "/memories../x" count as the escapes they are.
    if _looks_like_traversal(rest):
        raise _would_escape(path)
    if rest in ("", "/"):
        return MemoryPath(path, "/")
    if not rest.startswith("/"):  # "/memoriesX/..." names a sibling of the root, not something in it
        raise _must_start_with_root(path)
    # A trailing slash names the same thing, as it does on a filesystem.
    body = rest[1:].removesuffix("/")
    if "" in body.split("/"):
        raise _Refusal(f"Path {path} is not a valid memory path: it has an empty segment")
    return MemoryPath(path, "/" + body)


# --- formatting (the local implementation's layout) --------------------------------------------------


def format_size(size_bytes: int) -> str:
    """``0B``, ``512B``, ``1.5K``, ``2K``, ``1.2M``: binary units, one decimal unless whole."""
    if size_bytes == 0:
        return "0B"
    units = ("B", "K", "M", "G")
    exponent = min((size_bytes.bit_length() - 1) // 10, len(units) - 1)
    scaled = size_bytes / 1024**exponent
    return f"{int(scaled)}{units[exponent]}" if scaled == int(scaled) else f"{scaled:.1f}{units[exponent]}"


def _numbered(line_number: int, line: str) -> str:
    return f"{str(line_number).rjust(LINE_NUMBER_WIDTH)}\t{line}"


def _lines_without_final_empty(content: str) -> list[str]:
    """Split on LF only (a CR stays part of its line), without the empty tail of a trailing newline."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class _Folder:
    """One folder of a listing tree; ``files`` maps a name to its size in bytes."""

    files: dict[str, int] = field(default_factory=dict)
    folders: dict[str, _Folder] = field(default_factory=dict)


def _listing_tree(notes: list[Note], prefix: str) -> _Folder:
    """The folders and files below ``prefix`` to the listing depth, hidden (dot) names left out."""
    root = _Folder()
    for note in notes:
        segments = note.path[len(prefix) :].split("/")
        folder = root
        for depth, segment in enumerate(segments[:LISTING_DEPTH]):
            if segment.startswith("."):
                break
            if depth == len(segments) - 1:
                folder.files[segment] = note.content_size_bytes
            else:
                folder = folder.folders.setdefault(segment, _Folder())
    return root


def _listing_entries(folder: _Folder, relative: str = "", depth: int = 1) -> list[tuple[str, str]]:
    """``(size, relative path)`` pairs, depth first, names in code-point order, folders ending in ``/``."""
    entries: list[tuple[str, str]] = []
    for name in sorted({*folder.files, *folder.folders}):
        child = f"{relative}/{name}" if relative else name
        if name in folder.folders:
            entries.append((format_size(FOLDER_SIZE_BYTES), f"{child}/"))
            if depth < LISTING_DEPTH:
                entries.extend(_listing_entries(folder.folders[name], child, depth + 1))
        else:
            entries.append((format_size(folder.files[name]), child))
    return entries


# --- input checking ----------------------------------------------------------------------------------


def _required_str(command: Mapping[str, Any], name: str) -> str:
    value = command.get(name)
    if value is None:
        raise _Refusal(f"Missing required parameter `{name}` for command `{command['command']}`.")
    if not isinstance(value, str):
        raise _Refusal(f"Invalid `{name}` parameter: it must be a string.")
    return value


def _required_int(command: Mapping[str, Any], name: str) -> int:
    value = command.get(name)
    if value is None:
        raise _Refusal(f"Missing required parameter `{name}` for command `{command['command']}`.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refusal(f"Invalid `{name}` parameter: {value!r}. It must be an integer.")
    return value


def _optional_view_range(command: Mapping[str, Any]) -> list[int] | None:
    value = command.get("view_range")
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(type(bound) is int for bound in value):
        raise _Refusal(f"Invalid `view_range` parameter: {value!r}. It should be a list of two integers.")
    return list(value)


# --- engine errors -----------------------------------------------------------------------------------


def _as_tool_path(note_path: str) -> str:
    return MEMORY_ROOT + note_path


def _describe_engine_error(error: GitmemError, tool_path: str) -> str:
    """A refusal from the store, worded for the model: what happened, and that nothing was written."""
    if isinstance(error, PathConflict):
        other = error.details.get("conflicting_path")
        where = f"the existing {_as_tool_path(other)}" if other else "an existing file"
        return (
            f"Cannot write {tool_path}: it conflicts with {where} "
            "(a file cannot sit at, above or below another file). Nothing was changed."
        )
    if isinstance(error, PreconditionFailed):
        return (
            f"The file {tool_path} was changed by someone else while this command ran, so nothing was "
            "written. View it again and retry."
        )
    if isinstance(error, NotFound):
        return f"The file {tool_path} no longer exists (may have been deleted or renamed concurrently)."
    if isinstance(error, SecretRefused):
        return f"Refused to write {tool_path}: {error.message}"
    if isinstance(error, TooLarge | LimitExceeded):
        return f"Refused to write {tool_path}: {error.message}"
    if isinstance(error, ArchivedStore):
        return f"The memory store is archived, so {tool_path} cannot be written: {error.message}"
    if isinstance(error, PermissionDenied):
        return f"Permission denied for {tool_path}: {error.message}"
    if isinstance(error, StoreBusy):
        return f"The memory store is busy, so nothing was done to {tool_path}; retry shortly: {error.message}"
    if isinstance(error, InvalidRequest):  # e.g. a name Git reserves, or a path too long for a note
        return f"Cannot use {tool_path}: {error.message}"
    return f"Error for {tool_path}: {error.message}"


def _path_in_question(command: Mapping[str, Any], error: GitmemError) -> str:
    if command.get("command") == "rename":
        # A collision is the destination's problem; anything else (gone, busy, refused) the source's.
        return str(command.get("new_path") if isinstance(error, PathConflict) else command.get("old_path"))
    return str(command.get("path"))


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
        except _Refusal as refusal:
            return ToolResult(refusal.message, True)
        except GitmemError as error:
            log.info("memory tool %s refused by the store: %s", name, error.message)
            return ToolResult(_describe_engine_error(error, _path_in_question(command, error)), True)
        except STORAGE_ERRORS as error:
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
            return ToolResult(_describe_engine_error(error, MEMORY_ROOT), True)
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
            raise _Refusal(f"The path {target.tool_path} is not a file.")
        raise _Refusal(f"The path {target.tool_path} does not exist. Please provide a valid path.")

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
        target = resolve_memory_path(_required_str(command, "path"))
        view_range = _optional_view_range(command)
        note = self._note_at(target)
        if note is not None:
            return self._view_file(target, note, view_range)
        notes = self._notes_under(target.folder_prefix)
        if not notes and not target.is_root:
            raise _Refusal(f"The path {target.tool_path} does not exist. Please provide a valid path.")
        entries = _listing_entries(_listing_tree(notes, target.folder_prefix))
        path = target.tool_path
        lines = [f"{format_size(FOLDER_SIZE_BYTES)}\t{path}"]
        lines.extend(f"{size}\t{path}/{relative}" for size, relative in entries)
        header = f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
        return header + "\n" + "\n".join(lines)

    def _view_file(self, target: MemoryPath, note: Note, view_range: list[int] | None) -> str:
        content = note.content if note.content is not None else self.store.get(note.id).content or ""
        lines = content.split("\n")
        if len(lines) > MAX_LINES:
            raise _Refusal(f"File {target.tool_path} exceeds maximum line limit of 999,999 lines.")
        first_index = 0
        shown = lines
        if view_range and len(view_range) == 2:
            # Python slicing on purpose: the local implementation's answers for odd ranges come from it.
            first_index = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            shown = lines[first_index:end]
        numbered = [_numbered(first_index + 1 + offset, line) for offset, line in enumerate(shown)]
        return f"Here's the content of {target.tool_path} with line numbers:\n" + "\n".join(numbered)

    def _create(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(_required_str(command, "path"))
        file_text = _required_str(command, "file_text")
        already_exists = _Refusal(f"File {target.tool_path} already exists")
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
        target = resolve_memory_path(_required_str(command, "path"))
        old_str = _required_str(command, "old_str")
        new_str = command.get("new_str", "")  # an omitted new_str deletes old_str, as in the text editor tool
        if not isinstance(new_str, str):
            raise _Refusal("Invalid `new_str` parameter: it must be a string.")
        note = self._file_to_edit(target)
        content = note.content or ""
        occurrences = content.count(old_str)
        if occurrences == 0:
            raise _Refusal(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {target.tool_path}."
            )
        if occurrences > 1:
            line_numbers = self._lines_of_every_match(content, old_str)
            raise _Refusal(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` "
                f"in lines: {', '.join(map(str, line_numbers))}. Please ensure it is unique"
            )
        changed_index = content[: content.find(old_str)].count("\n")
        new_content = content.replace(old_str, new_str)
        self._rewrite(note, new_content)
        new_lines = new_content.split("\n")
        first = max(0, changed_index - 2)
        last = min(len(new_lines), changed_index + 3)
        snippet = [_numbered(number, new_lines[number - 1]) for number in range(first + 1, last + 1)]
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
        target = resolve_memory_path(_required_str(command, "path"))
        insert_line = _required_int(command, "insert_line")
        insert_text = _required_str(command, "insert_text")
        note = self._file_to_edit(target)
        lines = _lines_without_final_empty(note.content or "")
        if not 0 <= insert_line <= len(lines):
            raise _Refusal(
                f"Invalid `insert_line` parameter: {insert_line}. It should be within the range [0, {len(lines)}]."
            )
        lines.insert(insert_line, insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        self._rewrite(note, new_content)
        return f"The file {target.tool_path} has been edited."

    def _delete(self, command: Mapping[str, Any]) -> str:
        target = resolve_memory_path(_required_str(command, "path"))
        missing = _Refusal(f"The path {target.tool_path} does not exist")
        if target.is_root:
            raise _Refusal("Cannot delete the /memories directory itself")
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
        source = resolve_memory_path(_required_str(command, "old_path"))
        destination = resolve_memory_path(_required_str(command, "new_path"))
        if source.is_root:
            raise _Refusal("Cannot rename the /memories directory itself")
        if destination.is_root or self._exists(destination):
            raise _Refusal(f"The destination {destination.tool_path} already exists")
        note = self._note_at(source)
        if note is not None:
            # An update of the path keeps the note's id: one "modified" version.
            self.store.update(note.id, path=destination.note_path, actor=self.actor)
        else:
            notes = self._notes_under(source.folder_prefix)
            if not notes:
                raise _Refusal(f"The path {source.tool_path} does not exist")
            if destination.note_path.startswith(source.folder_prefix):
                raise _Refusal(
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
                failed = _describe_engine_error(error, _as_tool_path(note.path))
                partial = f"Only {done} of {len(notes)} files in {tool_path} were {verb}; then: {failed}"
                raise _Refusal(partial) from None


# --- the SDK adapter ---------------------------------------------------------------------------------

CommandModel = (
    BetaMemoryTool20250818ViewCommand
    | BetaMemoryTool20250818CreateCommand
    | BetaMemoryTool20250818StrReplaceCommand
    | BetaMemoryTool20250818InsertCommand
    | BetaMemoryTool20250818DeleteCommand
    | BetaMemoryTool20250818RenameCommand
)


class GitmemMemoryTool(BetaAbstractMemoryTool):
    """The memory tool for the SDK's tool runner, backed by a gitmem store.

    ``client.beta.messages.tool_runner(..., tools=[GitmemMemoryTool(store, actor)])``: results come back
    as text; refusals raise the SDK's ``ToolError`` so the runner marks them ``is_error``.
    """

    def __init__(
        self,
        store: MemoryStore,
        actor: Actor | None = None,
        *,
        read_only: bool = False,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.handler = MemoryToolHandler(store, actor, read_only=read_only)

    @override
    def call(self, input: object) -> str:
        # The raw input goes straight to the handler, which checks it; the base class would build the
        # command model unchecked and fail on a malformed one with an exception instead of an answer.
        if not isinstance(input, Mapping):
            raise ToolError("The memory tool input must be an object with a `command` field.")
        return self._answer(self.handler.execute(input))

    def _run_model(self, command: CommandModel) -> str:
        return self._answer(self.handler.execute(command.model_dump(exclude_none=True)))

    @staticmethod
    def _answer(result: ToolResult) -> str:
        if result.is_error:
            raise ToolError(result.content)
        return result.content

    @override
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run_model(command)

    @override
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run_model(command)

    @override
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run_model(command)

    @override
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run_model(command)

    @override
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run_model(command)

    @override
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run_model(command)

    @override
    def clear_all_memory(self) -> str:
        return self._answer(self.handler.clear_all())


__all__ = [
    "MEMORY_ROOT",
    "GitmemMemoryTool",
    "MemoryPath",
    "MemoryToolHandler",
    "ToolResult",
    "format_size",
    "resolve_memory_path",
]
