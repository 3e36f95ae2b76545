"""The dreamers: what turns a store's notes (and the tasks a dream learns from) into tidier notes.

- :class:`OfflineTidier`, the embedded default: deterministic and offline, and it never loses a line.
  It normalises line endings and whitespace, drops empty notes, merges notes whose contents are
  identical into the one at the first path (and says so in ``merged``), and writes an index listing
  every note with its first heading or line: at ``/INDEX.md``, or beside it when a user's note is there.
  A dream over its own output changes nothing.
- :class:`ModelDreamer`: asks a model through the official SDK (``client.messages.create``) for a
  JSON answer ``{"notes": [{"path", "content"}]}``; the usage comes from the model's response.
- :class:`HoldingTidier` (``GITMEM_DREAMER=offline-hold``), for tests of a dream while it runs: the
  offline tidier, but once the dream has written its first note it holds the dream open until the
  dream is stopped (canceled, out of time, an input gone) or ``GITMEM_DREAM_HOLD`` seconds (default
  30) pass. So a test sees a half-written dream without racing a clock.

``GITMEM_DREAMER=offline|anthropic|offline-hold`` picks one where a program starts (default ``offline``:
:func:`gitmem.config.home.dreamer`). A dreamer only proposes notes; ``gitmem.agents.dreams.dreams``
writes them, as the dream's task, under the output store's rules. A dreamer calls
``request.checkpoint()`` between steps: it raises once the dream must stop."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gitmem.errors import GitmemError, InvalidRequest
from gitmem.rules.paths import fold

INDEX_PATH = "/INDEX.md"
_INDEX_PATHS = re.compile(r"/INDEX(\.dream(-[0-9]+)?)?\.md")  # where the tidier may put its index
MAX_NOTE_BYTES = 102_400
MAX_SUMMARY_CHARS = 120
MAX_EVENTS_IN_PROMPT = 2_000


class DreamerError(GitmemError):
    """The dreamer could not produce notes (a model's unusable answer, a failed call)."""

    api_type = "internal_error"


@dataclass(frozen=True)
class InputNote:
    path: str
    content: str


@dataclass(frozen=True)
class TaskLog:
    """One task a dream learns from: its events, oldest first, as ``{"type", "payload"}``."""

    task_id: str
    events: tuple[Mapping[str, Any], ...]


def _keep_going() -> None:
    return None


@dataclass(frozen=True)
class DreamRequest:
    notes: tuple[InputNote, ...]
    instructions: str | None = None
    tasks: tuple[TaskLog, ...] = ()
    model: str = ""
    max_note_bytes: int = MAX_NOTE_BYTES  # the output store's limit for one note
    # Raises once the dream must stop (canceled, out of time, an input gone); a no-op by default.
    checkpoint: Callable[[], None] = field(default=_keep_going, compare=False, repr=False)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass(frozen=True)
class DreamResult:
    notes: tuple[InputNote, ...]
    usage: Usage = field(default_factory=Usage)
    merged: tuple[tuple[str, str], ...] = ()  # (path, the path whose note holds its lines now)


class Dreamer(Protocol):
    def dream(self, request: DreamRequest) -> DreamResult: ...


def after_write(dreamer: Dreamer, written: int, checkpoint: Callable[[], None]) -> None:
    """Called by the dream after each note it writes: a dreamer may pace the writing with an
    ``after_write(written, checkpoint)`` method (only :class:`HoldingTidier` does)."""
    hook = getattr(dreamer, "after_write", None)
    if callable(hook):
        hook(written, checkpoint)


# -- the offline tidier ----------------------------------------------------------------------------


def normalise(content: str) -> str:
    """LF line endings, no trailing spaces, at most one blank line in a row, no blank lines at either
    end, and one final newline (an all-blank note becomes empty)."""
    text = content.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def summary(content: str) -> str:
    """The first heading of a note, else its first non-blank line (shortened)."""
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    heading = next((line for line in lines if line.startswith("#")), None)
    text = (heading.lstrip("#").strip() if heading else (lines[0] if lines else "")) or "(untitled)"
    text = text.replace("`", "'")
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"


def render_index(notes: Sequence[InputNote], limit_bytes: int = MAX_NOTE_BYTES) -> str:
    head = ["# Index", "", f"{len(notes)} note{'s' if len(notes) != 1 else ''} in this store.", ""]
    lines = list(head)
    size = sum(len(line.encode()) + 1 for line in lines)
    for n, note in enumerate(notes):
        line = f"- `{note.path}`: {summary(note.content)}"
        if size + len(line.encode()) + 1 > limit_bytes - 64:
            lines.append(f"- ... and {len(notes) - n} more")
            break
        lines.append(line)
        size += len(line.encode()) + 1
    if not notes:
        lines.append("(no notes)")
    return "\n".join(lines) + "\n"


class OfflineTidier:
    """Deterministic, offline: the same notes always give the same result, in path order. Every
    non-blank line of every note is kept (trailing spaces aside), and a note never grows past
    ``request.max_note_bytes``."""

    def dream(self, request: DreamRequest) -> DreamResult:
        kept: list[InputNote] = []
        first_at: dict[str, str] = {}  # normalised content -> the path that keeps it
        merged: list[tuple[str, str]] = []
        for note in sorted(request.notes, key=lambda n: n.path):
            request.checkpoint()
            content = normalise(note.content)
            if not content:
                continue  # nothing but whitespace
            if content in first_at:
                merged.append((note.path, first_at[content]))
                continue
            first_at[content] = note.path
            if len(content.encode("utf-8")) > request.max_note_bytes:
                content = note.content  # e.g. the final newline would pass the limit: leave it as it was
            kept.append(InputNote(note.path, content))
        kept = _without_own_index(kept, request.max_note_bytes)
        target = _free_index_path(kept)
        if target is not None:
            kept.append(InputNote(target, render_index(kept, request.max_note_bytes)))
            kept.sort(key=lambda n: n.path)
        return DreamResult(tuple(kept), Usage(), tuple(merged))


def _without_own_index(notes: list[InputNote], limit_bytes: int) -> list[InputNote]:
    """Drop an index this tidier wrote before (it is written again): a note at an index path that is
    exactly the index of the other notes. Anything else there is a user's note and stays."""
    for note in notes:
        if _INDEX_PATHS.fullmatch(note.path):
            others = [n for n in notes if n is not note]
            if note.content == render_index(others, limit_bytes):
                return others
    return notes


def _free_index_path(notes: Sequence[InputNote]) -> str | None:
    """``/INDEX.md``, else ``/INDEX.dream.md``, ``/INDEX.dream-2.md``, ...: the first path no note takes
    (as a note or as a folder), in any case: a case-only twin is a path conflict."""
    taken = {fold(n.path) for n in notes}
    for candidate in (INDEX_PATH, "/INDEX.dream.md", *(f"/INDEX.dream-{n}.md" for n in range(2, 100))):
        folded = fold(candidate)
        if folded not in taken and not any(path.startswith(folded + "/") for path in taken):
            return candidate
    return None


class HoldingTidier(OfflineTidier):
    """The offline tidier that, after the dream's first written note, holds the dream open (checking every
    ``pause`` seconds) until the dream is stopped or ``hold_seconds`` pass. For tests of what happens to
    a dream while it runs."""

    def __init__(self, hold_seconds: float = 30.0, pause: float = 0.02) -> None:
        self.hold_seconds = hold_seconds
        self.pause = pause

    def after_write(self, written: int, checkpoint: Callable[[], None]) -> None:
        if written != 1:
            return
        deadline = time.monotonic() + self.hold_seconds
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(self.pause)


# -- the model-backed dreamer ----------------------------------------------------------------------

SYSTEM_PROMPT = """You tidy a memory store: a small folder of markdown notes that an AI worker reads at \
the start of every task and writes as it works. Rewrite the notes so the next task finds what it needs \
quickly: merge duplicates and near-duplicates, fix contradictions in favour of the newest information \
(the task logs show what happened recently), drop notes that hold nothing useful, keep every fact that \
still matters, and give each note a path that says what it holds (paths start with '/', e.g. \
/people/sam.md). Never invent facts and never write passwords, keys or tokens.

Answer with JSON only, no prose and no code fence: {"notes": [{"path": "/...", "content": "..."}]}, \
the complete set of notes the store should hold afterwards."""


def _prompt(request: DreamRequest) -> str:
    events = []
    for log in request.tasks:
        for event in log.events[:MAX_EVENTS_IN_PROMPT]:
            events.append({"task_id": log.task_id, **event})
    body: dict[str, Any] = {"notes": [{"path": n.path, "content": n.content} for n in request.notes]}
    if events:
        body["task_events"] = events
    parts = []
    if request.instructions:
        parts.append(f"Instructions for this dream:\n{request.instructions}\n")
    parts.append("The store and the task logs, as JSON:\n" + json.dumps(body, ensure_ascii=False))
    return "\n".join(parts)


def _json_answer(text: str) -> Any:
    text = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    if fenced:
        text = fenced.group(1)
    try:
        return json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start >= 0 and end > start:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                pass
    raise DreamerError('the model\'s answer is not JSON of the form {"notes": [{"path", "content"}]}')


def parse_notes(text: str) -> tuple[InputNote, ...]:
    answer = _json_answer(text)
    notes = answer.get("notes") if isinstance(answer, dict) else None
    if not isinstance(notes, list):
        raise DreamerError('the model\'s answer has no "notes" list')
    out: dict[str, InputNote] = {}
    for item in notes:
        if not (isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("content"), str)):
            raise DreamerError("each note in the model's answer needs a string path and content")
        out[item["path"]] = InputNote(item["path"], item["content"])  # a repeated path: the last wins
    return tuple(sorted(out.values(), key=lambda n: n.path))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class ModelDreamer:
    """Asks a model through the official SDK. ``client`` is an ``anthropic.Anthropic`` (or anything
    with ``messages.create``), or what makes one on the first dream (a server starts whatever the SDK's
    own settings, and a dream it cannot run fails alone); ``model`` overrides the dream's model id."""

    def __init__(self, client: Any, model: str | None = None, *, max_tokens: int = 16_000) -> None:
        self._client = client
        self.model = model
        self.max_tokens = max_tokens

    @property
    def client(self) -> Any:
        if callable(self._client) and not hasattr(self._client, "messages"):
            self._client = self._client()
        return self._client

    def dream(self, request: DreamRequest) -> DreamResult:
        model = self.model or request.model
        if not model:
            raise InvalidRequest("a model dreamer needs a model id")
        try:
            response = self.client.messages.create(
                model=model,
                max_tokens=self.max_tokens,
                system=SYSTEM_PROMPT,
                messages=[{"role": "user", "content": _prompt(request)}],
            )
        except GitmemError:
            raise
        except Exception as exc:  # the SDK's APIError family, transport failures
            raise DreamerError(f"the model call failed: {type(exc).__name__}: {exc}") from exc
        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if getattr(block, "type", None) == "text"
        )
        u = getattr(response, "usage", None)
        usage = Usage(
            input_tokens=_count(getattr(u, "input_tokens", 0)),
            output_tokens=_count(getattr(u, "output_tokens", 0)),
            cache_creation_input_tokens=_count(getattr(u, "cache_creation_input_tokens", 0)),
            cache_read_input_tokens=_count(getattr(u, "cache_read_input_tokens", 0)),
        )
        try:
            notes = parse_notes(text)
        except DreamerError as exc:
            exc.details["usage"] = usage
            raise
        return DreamResult(notes, usage)


__all__ = [
    "INDEX_PATH",
    "DreamRequest",
    "DreamResult",
    "Dreamer",
    "DreamerError",
    "HoldingTidier",
    "InputNote",
    "ModelDreamer",
    "OfflineTidier",
    "TaskLog",
    "Usage",
    "after_write",
    "normalise",
    "parse_notes",
    "render_index",
    "summary",
]
