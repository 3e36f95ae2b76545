"""One run of one dream: read the input store and tasks, ask the dreamer, write the output store as
the dream's task, and stop (``failed`` or canceled) at the first step or write that must not happen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gitmem.agents.dreams.dreamers import (
    Dreamer,
    DreamerError,
    DreamRequest,
    DreamResult,
    InputNote,
    OfflineTidier,
    TaskLog,
    Usage,
    after_write,
)
from gitmem.agents.dreams.ledger import DreamRuns
from gitmem.agents.dreams.values import MAX_EVENTS_A_TASK, MAX_PAGE, MAX_STORE_NAME, Dream
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.errors import (
    ArchivedStore,
    GitmemError,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    PreconditionFailed,
    TooLarge,
)
from gitmem.model import Actor, Note, StoreInfo

log = logging.getLogger(__name__)


class StopDream(Exception):
    """Ends a running dream as ``failed`` with this error type."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type
        self.message = message


class DreamCanceled(Exception):
    """The dream was canceled while it ran: stop writing, leave its status alone."""


class DreamJob:
    """One run of one dream."""

    def __init__(self, dreams: DreamRuns, dream: Dream, dreamer: Dreamer | None, deadline: float) -> None:
        self.dreams = dreams
        self.gm = dreams.gm
        self.dream = dream
        self.dreamer = dreamer
        self.deadline = deadline
        self.task_id: str | None = None
        self.written = 0

    def event(self, type: str, payload: Mapping[str, Any]) -> None:
        if self.task_id is None:
            return
        try:
            tasks_for(self.gm).append_event(self.task_id, type, payload, actor=Actor("task_actor", self.task_id))
        except GitmemError:
            log.warning("dream %s: could not log %s", self.dream.id, type)

    def check(self) -> None:
        """Raise if the dream must stop: canceled, out of time, or an input gone."""
        d = self.dream
        if self.dreams.status_of(d.id) != "running":
            raise DreamCanceled()
        if time.monotonic() > self.deadline:
            raise StopDream("timeout", "the dream ran past its time limit")
        try:
            info = self.gm.get_store(d.workspace_id, d.input_store_id)
        except NotFound:
            raise StopDream("input_memory_store_unavailable", f"memory store {d.input_store_id} was deleted") from None
        if info.archived_at is not None:
            raise StopDream("input_memory_store_unavailable", f"memory store {d.input_store_id} was archived")
        tasks = tasks_for(self.gm)
        for task_id in d.task_ids:
            try:
                tasks.get_task(d.workspace_id, task_id)
            except NotFound:
                raise StopDream("input_session_unavailable", f"task {task_id} was deleted") from None

    def execute(self) -> None:
        d, gm = self.dream, self.gm
        self.check()
        dreamer = self.dreamer = self.dreamer or OfflineTidier()
        info = gm.get_store(d.workspace_id, d.input_store_id)
        create_new = d.output_behavior == "create_new"
        output_id = self.make_output(info) if create_new else info.id
        self.start_task(info, output_id, create_new)

        current = self.read_notes()
        logs = self.read_tasks()
        self.event(
            "dream.read", {"notes": len(current), "tasks": len(logs), "events": sum(len(log.events) for log in logs)}
        )
        self.check()
        limit = gm.store(d.workspace_id, output_id).policy.max_content_bytes
        request = DreamRequest(
            tuple(InputNote(n.path, n.content or "") for n in current.values()),
            d.instructions,
            logs,
            d.model_id,
            limit,
            self.check,
        )
        result = self.ask(dreamer, request)
        self.dreams.record(d.id, **result.usage.as_dict())
        if result.merged:
            self.event("dream.merged", {"merged": [{"path": p, "into": into} for p, into in result.merged]})
        self.check()
        written = self.write_new(output_id, result.notes) if create_new else self.write_existing(current, result.notes)
        self.event("dream.completed", {**written, "usage": result.usage.as_dict()})
        self.dreams.complete(d.id)

    def make_output(self, info: StoreInfo) -> str:
        """A ``create_new`` dream's output store, named after its input and recorded on the dream at once
        (so that a failure deletes it); its id."""
        d, gm = self.dream, self.gm
        name = f"{info.name} (dreamed)"
        if len(name) > MAX_STORE_NAME:
            name = info.name[: MAX_STORE_NAME - len(" (dreamed)")] + " (dreamed)"
        try:
            # An encrypted input gives an encrypted output: the notes never lie in plain text.
            output = gm.create_store(
                d.workspace_id,
                name,
                encrypted=info.encrypted,
                description=f"Written by dream {d.id} from memory store {info.id}.",
            )
        except LimitExceeded as exc:
            raise StopDream("memory_store_org_limit_exceeded", exc.message) from None
        output_id = output.id
        with self.dreams.catalog.transaction() as db:  # at once, so that a failure deletes it
            recorded = db.execute(
                "UPDATE dreams SET output_store_id=? WHERE id=? AND status='running'", (output_id, d.id)
            ).rowcount
        if not recorded:  # ended meanwhile (canceled, or failed by another process): nothing to keep
            gm.delete_store(d.workspace_id, output_id, force=True)
            raise DreamCanceled()
        return output_id

    def start_task(self, info: StoreInfo, output_id: str, create_new: bool) -> None:
        """The dream's task of the workspace's dreamer worker: it reads the input store (and writes it,
        for ``update_existing``) and writes the output; recorded on the dream, and ``dream.started``."""
        d, gm = self.dream, self.gm
        resources = [
            {
                "type": "memory_store",
                "memory_store_id": info.id,
                "access": "read_only" if create_new else "read_write",
                "instructions": "The store this dream tidies.",
            }
        ]
        if create_new:
            resources.append(
                {
                    "type": "memory_store",
                    "memory_store_id": output_id,
                    "access": "read_write",
                    "instructions": "Where this dream writes the tidied notes.",
                }
            )
        worker_id = self.dreams.dreamer_worker(d.workspace_id)
        try:
            task, _ = tasks_for(gm).create_task(d.workspace_id, worker_id, resources)
        except (NotFound, ArchivedStore):
            self.check()
            raise
        self.task_id = task.id
        self.dreams.record(d.id, task_id=task.id, output_store_id=output_id)
        self.event(
            "dream.started",
            {
                "dream_id": d.id,
                "input_memory_store_id": info.id,
                "output_memory_store_id": output_id,
                "task_ids": list(d.task_ids),
                "model": d.model_id,
                "output_behavior": d.output_behavior,
            },
        )

    def read_notes(self) -> dict[str, Note]:
        d = self.dream
        try:
            store = self.gm.store(d.workspace_id, d.input_store_id)
            notes: dict[str, Note] = {}
            page = None
            while True:
                listing = store.list(limit=1000, page=page)
                for item in listing.items:
                    if isinstance(item, Note):
                        notes[item.path] = store.get(item.id, with_content=True)
                page = listing.next_page
                if not page:
                    return notes
        except NotFound:
            self.check()
            raise

    def read_tasks(self) -> tuple[TaskLog, ...]:
        d = self.dream
        tasks = tasks_for(self.gm)
        logs = []
        for task_id in d.task_ids:
            events: list[dict[str, Any]] = []
            page = None
            try:
                tasks.get_task(d.workspace_id, task_id)
                while len(events) < MAX_EVENTS_A_TASK:
                    listing = tasks.list_events(task_id, limit=MAX_PAGE, page=page)
                    events += [{"type": e.type, "payload": e.payload} for e in listing.items]
                    page = listing.next_page
                    if not page:
                        break
            except NotFound:
                raise StopDream("input_session_unavailable", f"task {task_id} was deleted") from None
            logs.append(TaskLog(task_id, tuple(events)))
        return tuple(logs)

    def ask(self, dreamer: Dreamer, request: DreamRequest) -> DreamResult:
        """The dreamer's answer, in a thread of its own so a cancel or the time limit is not kept waiting."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = dreamer.dream(request)
            except BaseException as exc:  # handed to the job's thread
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"dreamer-{self.dream.id}", daemon=True)
        thread.start()
        while True:
            thread.join(min(0.1, max(0.0, self.deadline - time.monotonic())))
            if not thread.is_alive():
                break
            self.check()  # canceled, out of time, or an input gone: stop waiting
        error = box.get("error")
        if isinstance(error, DreamerError):
            usage = error.details.get("usage")
            if isinstance(usage, Usage):
                self.dreams.record(self.dream.id, **usage.as_dict())
            raise StopDream("internal_error", error.message)
        if error is not None:
            raise error
        result: DreamResult = box["result"]
        return result

    def _write(self, action: str, path: str, call: Any) -> bool:
        try:
            call()
        except (NotFound, ArchivedStore) as exc:
            self.check()  # the input store gone: input_memory_store_unavailable
            raise StopDream("internal_error", f"the output memory store is not writable: {exc.message}") from None
        except (PreconditionFailed, PathConflict, InvalidRequest, TooLarge) as exc:
            # Someone changed the note meanwhile, or the store's rules refuse it (a bad path, a secret, too
            # large, too many notes): skip it and say so.
            # Capped: a hostile answer's path may be megabytes long, and an event holds at most 100 KiB.
            self.event("dream.note_skipped", {"action": action, "path": path[:1024], "reason": exc.message[:1024]})
            return False
        self.written += 1
        if self.dreamer is not None:
            after_write(self.dreamer, self.written, self.check)
        return True

    def write_new(self, output_id: str, notes: Sequence[InputNote]) -> dict[str, int]:
        store = self.gm.store(self.dream.workspace_id, output_id)
        actor = Actor("task_actor", self.task_id or "")
        created = 0
        for note in notes:
            self.check()
            created += self._write("create", note.path, lambda n=note: store.create(n.path, n.content, actor=actor))
        return {"created": created, "modified": 0, "deleted": 0}

    def write_existing(self, current: Mapping[str, Note], notes: Sequence[InputNote]) -> dict[str, int]:
        d = self.dream
        store = self.gm.store(d.workspace_id, d.input_store_id)
        actor = Actor("task_actor", self.task_id or "")
        wanted = {n.path: n.content for n in notes}
        counts = {"created": 0, "modified": 0, "deleted": 0}
        for path, note in sorted(current.items()):
            if path not in wanted:
                self.check()
                counts["deleted"] += self._write(
                    "delete", path, lambda n=note: store.delete(n.id, expected_sha256=n.content_sha256, actor=actor)
                )
        for path, content in sorted(wanted.items()):
            old = current.get(path)
            if old is not None and old.content != content:
                self.check()
                counts["modified"] += self._write(
                    "modify",
                    path,
                    lambda n=old, c=content: store.update(
                        n.id, content=c, expected_sha256=n.content_sha256, actor=actor
                    ),
                )
        for path, content in sorted(wanted.items()):
            if path not in current:
                self.check()
                counts["created"] += self._write(
                    "create", path, lambda p=path, c=content: store.create(p, c, actor=actor)
                )
        return counts


def run_dream(dreams: DreamRuns, dream_id: str, dreamer: Dreamer | None, timeout_seconds: float | None) -> Dream:
    """Run a claimed (``running``) dream to its end; any other status is left alone."""
    dream = dreams.get_dream(dream_id)
    if dream.status != "running":
        return dream
    timeout = timeout_seconds if timeout_seconds is not None else dreams.timeout_seconds
    job = DreamJob(dreams, dream, dreamer, time.monotonic() + timeout)
    try:
        job.execute()
    except DreamCanceled:
        job.event("dream.canceled", {})
    except StopDream as stop:
        job.event("dream.failed", {"type": stop.type, "message": stop.message})
        dreams.fail(dream_id, stop.type, stop.message)
    except Exception as exc:
        log.exception("dream %s stopped with an error", dream_id)
        message = exc.message if isinstance(exc, GitmemError) else f"{type(exc).__name__}: {exc}"
        job.event("dream.failed", {"type": "internal_error", "message": message})
        dreams.fail(dream_id, "internal_error", message)
    dreams.withdraw_task(dream_id)
    return dreams.get_dream(dream_id)
