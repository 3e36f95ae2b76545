"""What a dream request may ask for: one input store and up to 100 tasks, a model at standard speed,
and where the notes go (a new store, or the input store updated). Each check raises ``InvalidRequest``
with the field at fault; :meth:`gitmem.agents.dreams.dreams.Dreams.create` asks them before it touches anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gitmem.agents.dreams.values import MAX_MODEL_ID_CHARS, MAX_TASKS, OutputBehavior
from gitmem.errors import InvalidRequest


def checked_text(value: Any, what: str, *, min_len: int = 0, max_len: int | None = None) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(f"{what} is not valid UTF-8 text") from None
    if len(value) < min_len or (max_len is not None and len(value) > max_len):
        raise InvalidRequest(f"{what} must be {min_len} to {max_len} characters")
    return value


def check_inputs(inputs: Any) -> tuple[str, str | None, list[str]]:
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
            stores.append(checked_text(item.get("memory_store_id"), f"{where}.memory_store_id", min_len=1))
        elif kind in ("sessions", "tasks"):
            field = "session_ids" if kind == "sessions" else "task_ids"
            values = item.get(field)
            if isinstance(values, str | bytes) or not isinstance(values, Sequence):
                raise InvalidRequest(f"{where}.{field} must be a list of task ids")
            task_lists.append((kind, [checked_text(v, f"{where}.{field}[]", min_len=1) for v in values]))
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


def check_model(model: Any) -> tuple[str, str | None]:
    if isinstance(model, str):
        return checked_text(model, "model", min_len=1, max_len=MAX_MODEL_ID_CHARS), None
    if not isinstance(model, Mapping):
        raise InvalidRequest('model must be a model id or {"id", "speed"}')
    model_id = checked_text(model.get("id"), "model.id", min_len=1, max_len=MAX_MODEL_ID_CHARS)
    speed = model.get("speed")
    if speed == "fast":
        raise InvalidRequest("dreams run only at speed 'standard'; 'fast' is not available")
    if speed not in (None, "standard"):
        raise InvalidRequest("model.speed must be 'standard'")
    return model_id, speed


def check_output(output: Any, store_id: str) -> OutputBehavior:
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
