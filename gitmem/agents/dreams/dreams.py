"""Dreams: background jobs that read one store (and up to 100 tasks) and write a tidier store (docs/architecture.md).

A dream is a row in the catalog's ``dreams`` table. It is made ``pending`` (or ``failed`` at once when
its input is too large or a ``create_new`` copy would pass the workspace's limit of shared stores). A
:class:`~gitmem.agents.dreams.runner.DreamRunner` in each server process claims pending dreams under a
transaction (so several processes never run one dream twice) and runs each as a task of the
workspace's ``dreamer`` worker:
every note it writes is a ``task_actor`` version of that task, and the task's event log tells what the
dream read and wrote. The notes come from a pluggable dreamer (``gitmem.agents.dreams.dreamers``).

Statuses: ``pending`` -> ``running`` -> ``completed`` | ``failed`` | ``canceled``. Final statuses never
change again: every transition out of ``running`` is an ``UPDATE ... WHERE status='running'``.

How a running dream ends other than ``completed``: its input store archived or deleted
(``input_memory_store_unavailable``), a task it reads deleted (``input_session_unavailable``), past its
time limit (``timeout``), its dreamer or its runner's process failing (``internal_error``: a runner
finds dreams claimed by a dead process on its host), or ``cancel`` (checked before every step and every
write, so it stops within a moment; every version it wrote is a whole commit). However a dream ends,
its task is ended (its token withdrawn). A failed ``create_new`` dream deletes the store it made, so its
``outputs`` are empty; ``update_existing`` lists the input store, which holds whole versions only.

Here: making, reading, listing, canceling and archiving dreams. What a request may ask for is
:mod:`~gitmem.agents.dreams.request`; claiming, running and ending them :mod:`~gitmem.agents.dreams.ledger`;
the table :mod:`~gitmem.agents.dreams.tables`; the value :mod:`~gitmem.agents.dreams.values`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.agents.dreams.dreamers import Dreamer
from gitmem.agents.dreams.job import run_dream
from gitmem.agents.dreams.ledger import DreamRuns, runner_id
from gitmem.agents.dreams.request import check_inputs, check_model, check_output, checked_text
from gitmem.agents.dreams.tables import MIGRATIONS, dream_from_row
from gitmem.agents.dreams.values import FINAL, MAX_INPUT_BYTES, MAX_INSTRUCTIONS_CHARS, MAX_PAGE, STATUSES, Dream
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.clock import to_micros
from gitmem.errors import ArchivedStore, Conflict, InvalidRequest, NotFound
from gitmem.model import Actor, Page
from gitmem.rules import policy as _policy

if TYPE_CHECKING:
    import datetime as dt

    from gitmem.engine.gitmem import Gitmem


class Dreams(DreamRuns):
    """Dreams of one data home: create, read, list, cancel, archive; and :meth:`run` for a runner
    (:class:`~gitmem.agents.dreams.ledger.DreamRuns`)."""

    MIGRATIONS = MIGRATIONS

    def run(self, dream_id: str, dreamer: Dreamer | None = None, *, timeout_seconds: float | None = None) -> Dream:
        """Run a claimed (``running``) dream to its end; any other status is left alone."""
        return run_dream(self, dream_id, dreamer, timeout_seconds)

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
        store_id, tasks_kind, task_ids = check_inputs(inputs)
        model_id, speed = check_model(model)
        if instructions is not None:
            checked_text(instructions, "instructions", max_len=MAX_INSTRUCTIONS_CHARS)
            self.gm.filters.check_caller_text("the instructions", instructions)
            instructions = instructions or None
        behavior = check_output(output_behavior, store_id)

        self._check_readable(workspace_id, store_id, task_ids)
        error = self._failure_at_once(workspace_id, store_id, behavior)
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
        return self.get_dream(dream_id)

    def _check_readable(self, workspace_id: str, store_id: str, task_ids: Sequence[str]) -> None:
        """The input store is a shared store of the workspace in use, and every task it names exists."""
        info = self.gm.get_store(workspace_id, store_id)  # NotFound for another workspace's store
        if info.kind == "bank":
            # The same answer as a missing store: an id's kind is not told to whoever cannot read it.
            raise NotFound(f"memory store {store_id} not found")
        if info.archived_at is not None:
            raise ArchivedStore(f"memory store {store_id} is archived; a dream reads a store in use")
        tasks = tasks_for(self.gm)
        for task_id in task_ids:
            tasks.get_task(workspace_id, task_id)  # NotFound for an unknown task

    def _failure_at_once(self, workspace_id: str, store_id: str, behavior: str) -> tuple[str, str] | None:
        """Why the dream fails as soon as it is made (its error type and message), if it does: an input
        too large to read, or a ``create_new`` copy past the workspace's limit of shared stores."""
        size = self.gm.store(workspace_id, store_id).index.totals()[1]
        if size > MAX_INPUT_BYTES:
            return (
                "input_memory_store_too_large",
                f"memory store {store_id} holds {size} bytes of notes; a dream reads at most"
                f" {MAX_INPUT_BYTES} bytes (10 MiB)",
            )
        if behavior == "create_new" and self._live_shared(workspace_id) >= _policy.MAX_SHARED_STORES:
            return (
                "memory_store_org_limit_exceeded",
                f"a new memory store would pass the workspace's limit of {_policy.MAX_SHARED_STORES} live"
                " shared stores; archive or delete one, or use output_behavior update_existing",
            )
        return None

    def _live_shared(self, workspace_id: str) -> int:
        count: int
        (count,) = self.db.execute(
            "SELECT count(*) FROM stores WHERE workspace_id=? AND kind='shared' AND archived_at IS NULL",
            (workspace_id,),
        ).fetchone()
        return count

    # -- reading ----------------------------------------------------------------------------------

    def get(self, workspace_id: str, dream_id: str) -> Dream:
        row = None
        if isinstance(dream_id, str) and (
            ids.has_prefix(dream_id, ids.DREAM) or ids.has_prefix(dream_id, ids.DREAM_OLD)
        ):
            checked_text(dream_id, "dream_id")
            row = self.db.execute(
                "SELECT * FROM dreams WHERE id=? AND workspace_id=?", (dream_id, workspace_id)
            ).fetchone()
        if row is None:
            raise NotFound(f"dream {dream_id} not found")
        return dream_from_row(row)

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
            checked_text(page, "page")
            micros, after_id = self.gm.page_tokens.decode(page, "dreams", int, str)
            sql += " AND (created_at<? OR (created_at=? AND id<?))"
            args += [micros, micros, after_id]
        rows = self.db.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit + 1)).fetchall()
        token = (
            self.gm.page_tokens.encode("dreams", rows[limit - 1]["created_at"], rows[limit - 1]["id"])
            if len(rows) > limit
            else None
        )
        return Page([dream_from_row(r) for r in rows[:limit]], token)

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
        return self.get_dream(dream_id)

    def archive(self, workspace_id: str, dream_id: str) -> Dream:
        """Archive a dream that has ended; it then leaves the list. 400 while pending or running."""
        self.get(workspace_id, dream_id)
        with self.catalog.transaction() as db:
            (status,) = db.execute("SELECT status FROM dreams WHERE id=?", (dream_id,)).fetchone()
            if status not in FINAL:
                raise InvalidRequest(f"dream {dream_id} is {status}; only a dream that has ended can be archived")
            db.execute("UPDATE dreams SET archived_at=coalesce(archived_at, ?) WHERE id=?", (self._now(), dream_id))
        return self.get_dream(dream_id)


def dreams_for(gm: Gitmem) -> Dreams:
    """The :class:`Dreams` of this data home (its tables are made on first use)."""
    return Dreams.of(gm)


__all__ = ["MIGRATIONS", "Dreams", "dreams_for", "runner_id"]
