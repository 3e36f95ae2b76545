"""Dreams: background jobs that read one store (and up to 100 tasks) and write a tidier store (docs/architecture.md).

A dream is a row in the catalog's ``dreams`` table. It is made ``pending`` (or ``failed`` at once when
its input is too large or a ``create_new`` copy would pass the workspace's limit of shared stores). A
:class:`~gitmem.agents.dream_runner.DreamRunner` in each server process claims pending dreams under a
transaction (so several processes never run one dream twice) and runs each as a task of the
workspace's ``dreamer`` worker:
every note it writes is a ``task_actor`` version of that task, and the task's event log tells what the
dream read and wrote. The notes come from a pluggable dreamer (``gitmem.agents.tidier``).

Statuses: ``pending`` -> ``running`` -> ``completed`` | ``failed`` | ``canceled``. Final statuses never
change again: every transition out of ``running`` is an ``UPDATE ... WHERE status='running'``.

How a running dream ends other than ``completed``: its input store archived or deleted
(``input_memory_store_unavailable``), a task it reads deleted (``input_session_unavailable``), past its
time limit (``timeout``), its dreamer or its runner's process failing (``internal_error``: a runner
finds dreams claimed by a dead process on its host), or ``cancel`` (checked before every step and every
write, so it stops within a moment; every version it wrote is a whole commit). However a dream ends,
its task is ended (its token withdrawn). A failed ``create_new`` dream deletes the store it made, so its
``outputs`` are empty; ``update_existing`` lists the input store, which holds whole versions only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.agents.tasks import tasks_for
from gitmem.agents.tidier import (
    Dreamer,
    Usage,
)
from gitmem.clock import from_micros, to_micros
from gitmem.engine.home import HomeTables
from gitmem.engine.migrations import Migration
from gitmem.errors import (
    ArchivedStore,
    Conflict,
    GitmemError,
    InvalidRequest,
    NotFound,
)
from gitmem.model import Actor, Page
from gitmem.rules import policy as _policy
from gitmem.settings import load_settings

if TYPE_CHECKING:
    import datetime as dt

    from gitmem.engine.home import Gitmem
from gitmem.agents.dream_job import DreamCanceled, DreamJob, StopDream
from gitmem.agents.dream_model import (
    DREAMER_WORKER_NAME,
    FINAL,
    MAX_INPUT_BYTES,
    MAX_INSTRUCTIONS_CHARS,
    MAX_MODEL_ID_CHARS,
    MAX_PAGE,
    MAX_TASKS,
    STATUSES,
    Dream,
    OutputBehavior,
)

log = logging.getLogger(__name__)


SCHEMA = """
CREATE TABLE IF NOT EXISTS dreams (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, status TEXT NOT NULL,
    input_store_id TEXT NOT NULL, tasks_kind TEXT, task_ids TEXT NOT NULL,
    model_id TEXT NOT NULL, model_speed TEXT, instructions TEXT, output_behavior TEXT NOT NULL,
    output_store_id TEXT, task_id TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0, cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
    error_type TEXT, error_message TEXT, created_by TEXT, claimed_by TEXT,
    created_at INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER, archived_at INTEGER);
CREATE INDEX IF NOT EXISTS dreams_workspace ON dreams (workspace_id, created_at, id);
CREATE INDEX IF NOT EXISTS dreams_status ON dreams (status, created_at, id);
CREATE TABLE IF NOT EXISTS dream_workers (workspace_id TEXT PRIMARY KEY, worker_id TEXT NOT NULL);
"""
MIGRATIONS = (Migration("dreams", 1, SCHEMA),)


def _time(micros: int | None) -> dt.datetime | None:
    return from_micros(micros) if micros is not None else None


def _dream(row: Any) -> Dream:
    task_ids = tuple(t for t in row["task_ids"].split("\n") if t)
    usage = Usage(
        row["input_tokens"], row["output_tokens"], row["cache_creation_input_tokens"], row["cache_read_input_tokens"]
    )
    return Dream(
        row["id"],
        row["workspace_id"],
        row["status"],
        row["input_store_id"],
        row["tasks_kind"],
        task_ids,
        row["model_id"],
        row["model_speed"],
        row["instructions"],
        row["output_behavior"],
        row["output_store_id"],
        row["task_id"],
        usage,
        row["error_type"],
        row["error_message"],
        from_micros(row["created_at"]),
        _time(row["started_at"]),
        _time(row["ended_at"]),
        _time(row["archived_at"]),
    )


def _text(value: Any, what: str, *, min_len: int = 0, max_len: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(f"{what} is not valid UTF-8 text") from None
    if len(value) < min_len or (max_len is not None and len(value) > max_len):
        raise InvalidRequest(f"{what} must be {min_len} to {max_len} characters")
    return value


def timeout_setting(environ: Mapping[str, str] | None = None) -> float:
    """``GITMEM_DREAM_TIMEOUT``: seconds a dream may run (default 12 hours)."""
    return load_settings(environ).DREAM_TIMEOUT


def runner_id() -> str:
    """``host:pid:random``: who claimed a dream, so a runner on the same host can tell its process died."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _process_gone(claimed_by: str | None) -> bool:
    """True if the dream's runner was a process on this host (not this one) that no longer runs."""
    host, _, rest = (claimed_by or "").partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. another user's process: it runs
        return False
    return False


# -- the engine ------------------------------------------------------------------------------------


class Dreams(HomeTables):
    """Dreams of one data home: create, read, list, cancel, archive; and :meth:`run` for a runner."""

    MIGRATIONS = MIGRATIONS

    def __init__(self, gm: Gitmem) -> None:
        super().__init__(gm)
        self.timeout_seconds = timeout_setting()

    # -- making one -------------------------------------------------------------------------------

    def create(
        self,
        workspace_id: str,
        inputs: Sequence[Mapping[str, Any]],
        model: str | Mapping[str, Any],
        instructions: str | None = None,
        output_behavior: Mapping[str, Any] | None = None,
        *,
        created_by: Actor | None = None,
    ) -> Dream:
        store_id, tasks_kind, task_ids = self._check_inputs(inputs)
        model_id, speed = self._check_model(model)
        if instructions is not None:
            _text(instructions, "instructions", max_len=MAX_INSTRUCTIONS_CHARS)
            instructions = instructions or None
        behavior = self._check_output(output_behavior, store_id)

        info = self.gm.get_store(workspace_id, store_id)  # NotFound for another workspace's store
        if info.kind == "bank":
            # The same answer as a missing store: an id's kind is not told to whoever cannot read it.
            raise NotFound(f"memory store {store_id} not found")
        if info.archived_at is not None:
            raise ArchivedStore(f"memory store {store_id} is archived; a dream reads a store in use")
        tasks = tasks_for(self.gm)
        for task_id in task_ids:
            tasks.get_task(workspace_id, task_id)  # NotFound for an unknown task

        error: tuple[str, str] | None = None
        size = self.gm.store(workspace_id, store_id).index.totals()[1]
        if size > MAX_INPUT_BYTES:
            error = (
                "input_memory_store_too_large",
                f"memory store {store_id} holds {size} bytes of notes; a dream reads at most"
                f" {MAX_INPUT_BYTES} bytes (10 MiB)",
            )
        elif behavior == "create_new" and self._live_shared(workspace_id) >= _policy.MAX_SHARED_STORES:
            error = (
                "memory_store_org_limit_exceeded",
                f"a new memory store would pass the workspace's limit of {_policy.MAX_SHARED_STORES} live"
                " shared stores; archive or delete one, or use output_behavior update_existing",
            )

        dream_id = ids.new_id(ids.DREAM)
        now = self._now()
        with self.catalog.transaction() as db:
            if behavior == "update_existing" and error is None:
                busy = db.execute(
                    "SELECT id FROM dreams WHERE input_store_id=? AND output_behavior='update_existing'"
                    " AND status IN ('pending','running')",
                    (store_id,),
                ).fetchone()
                if busy is not None:
                    raise Conflict(f"dream {busy[0]} is already updating memory store {store_id}")
            db.execute(
                "INSERT INTO dreams (id, workspace_id, status, input_store_id, tasks_kind, task_ids, model_id,"
                " model_speed, instructions, output_behavior, error_type, error_message, created_by, created_at,"
                " ended_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    dream_id,
                    workspace_id,
                    "failed" if error else "pending",
                    store_id,
                    tasks_kind,
                    "\n".join(sorted(task_ids)),
                    model_id,
                    speed,
                    instructions,
                    behavior,
                    error[0] if error else None,
                    error[1] if error else None,
                    created_by.trailer() if created_by else None,
                    now,
                    now if error else None,
                ),
            )
        return self._get(dream_id)

    @staticmethod
    def _check_inputs(inputs: Any) -> tuple[str, str | None, list[str]]:
        if isinstance(inputs, str | bytes | Mapping) or not isinstance(inputs, Sequence):
            raise InvalidRequest("inputs must be a list")
        stores: list[str] = []
        task_lists: list[tuple[str, list[str]]] = []
        for n, item in enumerate(inputs):
            where = f"inputs[{n}]"
            if not isinstance(item, Mapping):
                raise InvalidRequest(f"{where} must be an object")
            kind = item.get("type")
            if kind == "memory_store":
                stores.append(_text(item.get("memory_store_id"), f"{where}.memory_store_id", min_len=1))
            elif kind in ("sessions", "tasks"):
                field = "session_ids" if kind == "sessions" else "task_ids"
                values = item.get(field)
                if isinstance(values, str | bytes) or not isinstance(values, Sequence):
                    raise InvalidRequest(f"{where}.{field} must be a list of task ids")
                task_lists.append((kind, [_text(v, f"{where}.{field}[]", min_len=1) for v in values]))
            else:
                raise InvalidRequest(f"{where}.type must be 'memory_store' or 'sessions' (or 'tasks')")
        if len(stores) != 1:
            raise InvalidRequest('inputs must hold exactly one {"type": "memory_store"} entry')
        if len(task_lists) > 1:
            raise InvalidRequest("inputs may hold at most one sessions (tasks) entry")
        if not task_lists:
            return stores[0], None, []
        kind, task_ids = task_lists[0]
        if not 1 <= len(task_ids) <= MAX_TASKS:
            raise InvalidRequest(f"a dream reads 1 to {MAX_TASKS} tasks; got {len(task_ids)}")
        if len(set(task_ids)) != len(task_ids):
            raise InvalidRequest("a task is named at most once in a dream's inputs")
        return stores[0], kind, task_ids

    @staticmethod
    def _check_model(model: Any) -> tuple[str, str | None]:
        if isinstance(model, str):
            return _text(model, "model", min_len=1, max_len=MAX_MODEL_ID_CHARS), None
        if not isinstance(model, Mapping):
            raise InvalidRequest('model must be a model id or {"id", "speed"}')
        model_id = _text(model.get("id"), "model.id", min_len=1, max_len=MAX_MODEL_ID_CHARS)
        speed = model.get("speed")
        if speed == "fast":
            raise InvalidRequest("dreams run only at speed 'standard'; 'fast' is not available")
        if speed not in (None, "standard"):
            raise InvalidRequest("model.speed must be 'standard'")
        return model_id, speed

    @staticmethod
    def _check_output(output: Any, store_id: str) -> OutputBehavior:
        if output is None:
            return "create_new"
        if not isinstance(output, Mapping):
            raise InvalidRequest("output_behavior must be an object")
        kind = output.get("type")
        if kind == "create_new":
            return "create_new"
        if kind == "update_existing":
            target = output.get("memory_store_id")
            if target != store_id:
                raise InvalidRequest("output_behavior update_existing must name the input memory store")
            return "update_existing"
        raise InvalidRequest("output_behavior.type must be 'create_new' or 'update_existing'")

    def _live_shared(self, workspace_id: str) -> int:
        (count,) = self.db.execute(
            "SELECT count(*) FROM stores WHERE workspace_id=? AND kind='shared' AND archived_at IS NULL",
            (workspace_id,),
        ).fetchone()
        return count

    # -- reading ----------------------------------------------------------------------------------

    def _get(self, dream_id: str) -> Dream:
        row = self.db.execute("SELECT * FROM dreams WHERE id=?", (dream_id,)).fetchone()
        if row is None:
            raise NotFound(f"dream {dream_id} not found")
        return _dream(row)

    def get(self, workspace_id: str, dream_id: str) -> Dream:
        row = None
        if isinstance(dream_id, str) and (
            ids.has_prefix(dream_id, ids.DREAM) or ids.has_prefix(dream_id, ids.DREAM_OLD)
        ):
            _text(dream_id, "dream_id")
            row = self.db.execute(
                "SELECT * FROM dreams WHERE id=? AND workspace_id=?", (dream_id, workspace_id)
            ).fetchone()
        if row is None:
            raise NotFound(f"dream {dream_id} not found")
        return _dream(row)

    def list(
        self,
        workspace_id: str,
        *,
        include_archived: bool = False,
        statuses: Sequence[str] | None = None,
        created_gt: dt.datetime | None = None,
        created_lt: dt.datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        """Newest first; archived dreams only with ``include_archived``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}")
        sql = "SELECT * FROM dreams WHERE workspace_id=?"
        args: list[str | int] = [workspace_id]  # SQL parameters: ids as text, times as integers
        if not include_archived:
            sql += " AND archived_at IS NULL"
        if statuses:
            unknown = set(statuses) - set(STATUSES)
            if unknown:
                raise InvalidRequest(f"statuses must be among {', '.join(STATUSES)}")
            sql += f" AND status IN ({','.join('?' * len(set(statuses)))})"
            args += sorted(set(statuses))
        if created_gt is not None:
            sql += " AND created_at>?"
            args.append(to_micros(created_gt))
        if created_lt is not None:
            sql += " AND created_at<?"
            args.append(to_micros(created_lt))
        if page:
            _text(page, "page")
            micros, after_id = self.gm.page_tokens.decode(page, "dreams", int, str)
            sql += " AND (created_at<? OR (created_at=? AND id<?))"
            args += [micros, micros, after_id]
        rows = self.db.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit + 1)).fetchall()
        token = (
            self.gm.page_tokens.encode("dreams", rows[limit - 1]["created_at"], rows[limit - 1]["id"])
            if len(rows) > limit
            else None
        )
        return Page([_dream(r) for r in rows[:limit]], token)

    # -- cancel and archive -----------------------------------------------------------------------

    def cancel(self, workspace_id: str, dream_id: str) -> Dream:
        """Stop a pending or running dream (a canceled one stays canceled); 400 once it ended otherwise."""
        self.get(workspace_id, dream_id)
        with self.catalog.transaction() as db:
            (status,) = db.execute("SELECT status FROM dreams WHERE id=?", (dream_id,)).fetchone()
            if status in ("completed", "failed"):
                raise InvalidRequest(
                    f"dream {dream_id} has already {status}; only a pending or running dream can be canceled"
                )
            if status in ("pending", "running"):
                db.execute("UPDATE dreams SET status='canceled', ended_at=? WHERE id=?", (self._now(), dream_id))
        return self._get(dream_id)

    def archive(self, workspace_id: str, dream_id: str) -> Dream:
        """Archive a dream that has ended; it then leaves the list. 400 while pending or running."""
        self.get(workspace_id, dream_id)
        with self.catalog.transaction() as db:
            (status,) = db.execute("SELECT status FROM dreams WHERE id=?", (dream_id,)).fetchone()
            if status not in FINAL:
                raise InvalidRequest(f"dream {dream_id} is {status}; only a dream that has ended can be archived")
            db.execute("UPDATE dreams SET archived_at=coalesce(archived_at, ?) WHERE id=?", (self._now(), dream_id))
        return self._get(dream_id)

    # -- running ----------------------------------------------------------------------------------

    def claim_next(self, runner_id: str) -> str | None:
        """Move the oldest pending dream to ``running`` for this runner, or ``None`` if there is none.
        One transaction: two processes never claim the same dream."""
        with self.catalog.transaction() as db:
            row = db.execute("SELECT id FROM dreams WHERE status='pending' ORDER BY created_at, id LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE dreams SET status='running', started_at=?, claimed_by=? WHERE id=? AND status='pending'",
                (self._now(), runner_id, row[0]),
            )
            return row[0]

    def claim(self, dream_id: str, runner_id: str) -> bool:
        """Move this dream to ``running`` if it is still pending (e.g. ``gitmem dreams create --run``)."""
        with self.catalog.transaction() as db:
            cur = db.execute(
                "UPDATE dreams SET status='running', started_at=?, claimed_by=? WHERE id=? AND status='pending'",
                (self._now(), runner_id, dream_id),
            )
            return cur.rowcount == 1

    def expire(self, timeout_seconds: float | None = None) -> int:
        """Fail running dreams older than the timeout (e.g. their process died on another host); the count."""
        limit = int((timeout_seconds or self.timeout_seconds) * 1_000_000)
        rows = self.db.execute(
            "SELECT id FROM dreams WHERE status='running' AND started_at<?", (self._now() - limit,)
        ).fetchall()
        return sum(self._fail(row[0], "timeout", "the dream ran past its time limit") for row in rows)

    def reap(self) -> int:
        """Fail running dreams whose runner was a process on this host that has died (``internal_error``);
        the count."""
        rows = self.db.execute("SELECT id, claimed_by FROM dreams WHERE status='running'").fetchall()
        return sum(
            self._fail(row[0], "internal_error", "the process running the dream stopped")
            for row in rows
            if _process_gone(row[1])
        )

    def run(self, dream_id: str, dreamer: Dreamer | None = None, *, timeout_seconds: float | None = None) -> Dream:
        """Run a claimed (``running``) dream to its end; any other status is left alone."""
        dream = self._get(dream_id)
        if dream.status != "running":
            return dream
        timeout = timeout_seconds if timeout_seconds is not None else self.timeout_seconds
        job = DreamJob(self, dream, dreamer, time.monotonic() + timeout)
        try:
            job.execute()
        except DreamCanceled:
            job.event("dream.canceled", {})
        except StopDream as stop:
            job.event("dream.failed", {"type": stop.type, "message": stop.message})
            self._fail(dream_id, stop.type, stop.message)
        except Exception as exc:
            log.exception("dream %s stopped with an error", dream_id)
            message = exc.message if isinstance(exc, GitmemError) else f"{type(exc).__name__}: {exc}"
            job.event("dream.failed", {"type": "internal_error", "message": message})
            self._fail(dream_id, "internal_error", message)
        self._withdraw_task(dream_id)
        return self._get(dream_id)

    def _fail(self, dream_id: str, error_type: str, message: str) -> bool:
        """End a running dream as failed (False if it had ended already). A ``create_new`` store it made is
        deleted, so a failed dream leaves no half-made store; its task is ended."""
        with self.catalog.transaction() as db:
            dream = _dream(db.execute("SELECT * FROM dreams WHERE id=?", (dream_id,)).fetchone())
            cur = db.execute(
                "UPDATE dreams SET status='failed', error_type=?, error_message=?, ended_at=?,"
                " output_store_id=CASE WHEN output_behavior='create_new' THEN NULL"
                " ELSE output_store_id END WHERE id=? AND status='running'",
                (error_type, message, self._now(), dream_id),
            )
        if cur.rowcount == 0:
            return False
        if dream.output_behavior == "create_new" and dream.output_store_id:
            with contextlib.suppress(NotFound):
                self.gm.delete_store(dream.workspace_id, dream.output_store_id, force=True)
        self._withdraw_task(dream_id)
        return True

    def _withdraw_task(self, dream_id: str) -> None:
        """End the task a dream ran as: its token stops working once the dream has ended."""
        dream = self._get(dream_id)
        if dream.task_id is not None and dream.status in FINAL:
            with contextlib.suppress(NotFound):
                tasks_for(self.gm).end_task(dream.workspace_id, dream.task_id)

    def _set(self, dream_id: str, **fields: object) -> None:
        assignments = ", ".join(f"{k}=?" for k in fields)
        with self.catalog.transaction() as db:
            db.execute(f"UPDATE dreams SET {assignments} WHERE id=?", (*fields.values(), dream_id))

    def _complete(self, dream_id: str) -> None:
        with self.catalog.transaction() as db:
            db.execute(
                "UPDATE dreams SET status='completed', ended_at=? WHERE id=? AND status='running'",
                (self._now(), dream_id),
            )

    def status_of(self, dream_id: str) -> str:
        row = self.db.execute("SELECT status FROM dreams WHERE id=?", (dream_id,)).fetchone()
        return row[0] if row else "canceled"

    def dreamer_worker(self, workspace_id: str) -> str:
        """The workspace's ``dreamer`` worker, made on first use."""
        tasks = tasks_for(self.gm)
        row = self.db.execute("SELECT worker_id FROM dream_workers WHERE workspace_id=?", (workspace_id,)).fetchone()
        if row is not None:
            try:
                return tasks.get_worker(workspace_id, row[0]).id
            except NotFound:
                pass
        worker = tasks.create_worker(workspace_id, DREAMER_WORKER_NAME)
        with self.catalog.transaction() as db:
            db.execute(
                "INSERT INTO dream_workers (workspace_id, worker_id) VALUES (?, ?) ON CONFLICT (workspace_id)"
                " DO UPDATE SET worker_id=excluded.worker_id WHERE dream_workers.worker_id=?",
                (workspace_id, worker.id, row[0] if row else ""),
            )
            (chosen,) = db.execute(
                "SELECT worker_id FROM dream_workers WHERE workspace_id=?", (workspace_id,)
            ).fetchone()
        return chosen


# -- the runner ------------------------------------------------------------------------------------


def dreams_for(gm: Gitmem) -> Dreams:
    """The :class:`Dreams` of this data home (its tables are made on first use)."""
    return Dreams.of(gm)


__all__ = ["Dreams", "dreams_for", "runner_id", "timeout_setting"]
