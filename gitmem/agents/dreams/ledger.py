"""Running dreams: a runner claims a pending one (one transaction, so two processes never run one dream
twice), runs it as a task of the workspace's ``dreamer`` worker (:class:`~gitmem.agents.dreams.job.DreamJob`)
and ends it ``completed`` or ``failed``; dreams past their time limit or left by a dead process are failed.
:class:`~gitmem.agents.dreams.dreams.Dreams` builds on this; use it through ``dreams_for(gm)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING

from gitmem.agents.dreams.tables import MIGRATIONS, dream_from_row
from gitmem.agents.dreams.values import DREAMER_WORKER_NAME, FINAL, STATUSES, Dream
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.engine.gitmem import HomeTables
from gitmem.errors import NotFound

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem

log = logging.getLogger(__name__)


DEFAULT_DREAM_TIMEOUT = 12 * 3600.0  # seconds a dream may run unless its runner says (GITMEM_DREAM_TIMEOUT)


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


class DreamRuns(HomeTables):
    """Claiming, running and ending the dreams of one data home."""

    MIGRATIONS = MIGRATIONS

    def __init__(self, gm: Gitmem) -> None:
        super().__init__(gm)
        self.timeout_seconds = DEFAULT_DREAM_TIMEOUT

    def get_dream(self, dream_id: str) -> Dream:
        row = self.db.execute("SELECT * FROM dreams WHERE id=?", (dream_id,)).fetchone()
        if row is None:
            raise NotFound(f"dream {dream_id} not found")
        return dream_from_row(row)

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
            dream_id: str = row[0]
            return dream_id

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
        return sum(self.fail(row[0], "timeout", "the dream ran past its time limit") for row in rows)

    def reap(self) -> int:
        """Fail running dreams whose runner was a process on this host that has died (``internal_error``);
        the count."""
        rows = self.db.execute("SELECT id, claimed_by FROM dreams WHERE status='running'").fetchall()
        return sum(
            self.fail(row[0], "internal_error", "the process running the dream stopped")
            for row in rows
            if _process_gone(row[1])
        )

    def abandon(self, dream_id: str) -> bool:
        """Fail a running dream its process cannot finish because it is stopping: at once, where
        otherwise its time limit (or a runner on the same host, :meth:`reap`) would find it hours later.
        Its job sees the change at its next check and stops."""
        return self.fail(dream_id, "internal_error", "the server stopped while the dream ran; create it again")

    def count_by_status(self) -> dict[str, int]:
        """How many dreams of the home are in each status (every status present, zeros included)."""
        rows = self.db.execute("SELECT status, count(*) FROM dreams GROUP BY status").fetchall()
        return {status: 0 for status in STATUSES} | {row[0]: int(row[1]) for row in rows}

    def fail(self, dream_id: str, error_type: str, message: str) -> bool:
        """End a running dream as failed (False if it had ended already). A ``create_new`` store it made is
        deleted in the same transaction (nobody sees the dream failed and its half-made store still
        listed); its task is ended."""
        dream = self.get_dream(dream_id)
        half_made = None
        if dream.output_behavior == "create_new" and dream.output_store_id:
            with contextlib.suppress(NotFound):
                half_made = self.gm.get_store(dream.workspace_id, dream.output_store_id)
        with self.catalog.transaction() as db:
            cur = db.execute(
                "UPDATE dreams SET status='failed', error_type=?, error_message=?, ended_at=?,"
                " output_store_id=CASE WHEN output_behavior='create_new' THEN NULL"
                " ELSE output_store_id END WHERE id=? AND status='running'",
                (error_type, message, self._now(), dream_id),
            )
            if cur.rowcount == 0:
                return False
            if half_made is not None:
                self.catalog.delete_store(half_made.id, db)
        if half_made is not None:
            self.gm.remove_store_files(half_made)
        self.withdraw_task(dream_id)
        return True

    def withdraw_task(self, dream_id: str) -> None:
        """End the task a dream ran as: its token stops working once the dream has ended."""
        dream = self.get_dream(dream_id)
        if dream.task_id is not None and dream.status in FINAL:
            with contextlib.suppress(NotFound):
                tasks_for(self.gm).end_task(dream.workspace_id, dream.task_id)

    def record(self, dream_id: str, **fields: object) -> None:
        """Set columns of the dream's row (its task, output store, usage)."""
        assignments = ", ".join(f"{k}=?" for k in fields)
        with self.catalog.transaction() as db:
            db.execute(f"UPDATE dreams SET {assignments} WHERE id=?", (*fields.values(), dream_id))  # noqa: S608  the columns are record()'s callers' own names; values bound

    def complete(self, dream_id: str) -> None:
        """A running dream ends ``completed`` (a canceled one stays canceled)."""
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
            chosen: str
            (chosen,) = db.execute(
                "SELECT worker_id FROM dream_workers WHERE workspace_id=?", (workspace_id,)
            ).fetchone()
        return chosen
